# A whole step with torch.optim.SGD under a learning-rate schedule: the
# scheduler wraps opt.step in a function that dereferences a weak
# reference to the optimizer and counts the steps (opt._step_count += 1),
# and changes the learning rate between steps. Gradients accumulate over
# two micro-batches and are clipped by their norm. One record serves every
# step after the first (the rate and the count are lifted numbers; the
# count's int arithmetic runs before the step's writes). Compared with
# eager at every call. Natively the weak reference's referent is the
# optimizer holding it, which replay holds weakly; a rate changed between
# steps is logged where it is (param_groups[0]['lr']), not as a copy of
# the group with copies of its parameters.
import torch

from harness import TrainStep, compare, schedule_step, step_batches


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4)


class Cosine(TrainStep):
    def __init__(self):
        super().__init__(sgd, lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6))


class Steps(TrainStep):
    def __init__(self):
        super().__init__(sgd, lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))


images = step_batches()
compare(Cosine, images, between=schedule_step, records=2, graphs=2, breaks=0)
compare(Steps, images, between=schedule_step, records=2, graphs=2, breaks=0)
