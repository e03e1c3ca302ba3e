# magpy-capture-args: --log-calls 80
# torch.optim's foreach paths (foreach=True) inside the compiled step: one
# operator per update for all parameters at once. zero_grad groups the
# gradients in a collections.defaultdict built inside the call, whose
# default_factory is a lambda; Adam and AdamW pass their bias corrections
# as a Scalar[] of numbers the graph computes from each step count
# (aten::item), one per parameter and all equal, taken by position. A
# schedule changes the learning rate between steps (one record for the
# run). Compared with eager at every call; the records replay natively.
import torch

from harness import TrainStep, compare, schedule_step, step_batches


class SGD(TrainStep):
    def __init__(self):
        super().__init__(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3,
                                                   foreach=True),
                         lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))


class Adam(TrainStep):
    def __init__(self):
        super().__init__(lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, foreach=True), set_to_none=True)


class AdamWCosine(TrainStep):
    def __init__(self):
        super().__init__(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2, foreach=True),
                         lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6))


if __name__ == "__main__":
    images = step_batches()
    compare(SGD, images, between=schedule_step, records=2, graphs=2, breaks=0)
    compare(Adam, images, records=2, graphs=2, breaks=0, hits=6)
    compare(AdamWCosine, images, between=schedule_step, records=2, graphs=2, breaks=0)
