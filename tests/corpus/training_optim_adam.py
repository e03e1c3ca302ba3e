# magpy-capture-args: --log-calls 80
# torch.optim.Adam and AdamW inside the compiled step. Each parameter's
# step count is a tensor the step increments and then reads with .item():
# the graph reads it (aten::item) and computes the bias corrections from
# it with Python's arithmetic (**, -, /, math.sqrt) as number operators,
# so one record serves every step after the first. A learning-rate
# schedule changes the rate between steps (a lifted number); gradients
# accumulate over two micro-batches and are clipped by their norm.
# Compared with eager at every call; the records replay natively (the
# scheduler's weak reference to its optimizer included).
import torch

from harness import TrainStep, compare, schedule_step, step_batches


class Adam(TrainStep):
    def __init__(self):
        super().__init__(lambda p: torch.optim.Adam(p, lr=1e-2))


class AdamWCosine(TrainStep):
    def __init__(self):
        super().__init__(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2),
                         lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6))


class AdamSteps(TrainStep):
    def __init__(self):
        super().__init__(lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.8, 0.99), amsgrad=True),
                         lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))


def restart_counts(i, subject, reference):
    # The step counts go back (as after loading an older checkpoint): the
    # bias corrections follow the counts the graph reads.
    if i == 4:
        for m in (subject, reference):
            for state in m._opt.state.values():
                state['step'].fill_(1.0)


images = step_batches()
compare(Adam, images, records=2, graphs=2, breaks=0, hits=6)
compare(Adam, images, between=restart_counts, records=2, graphs=2, breaks=0, hits=6)
compare(AdamWCosine, images, between=schedule_step, records=2, graphs=2, breaks=0)
compare(AdamSteps, images, between=schedule_step, records=2, graphs=2, breaks=0)
