# magpy-capture-args: --log-calls 80
# A parameter frozen between foreach steps (requires_grad_(False), its
# gradient dropped) leaves the optimizer's foreach lists: the lists get
# shorter, which the tensor's requires_grad guard sends to a new record.
# Compared with eager at every call. The call log carries the frozen flag
# onto the one tensor the module and the optimizer's parameter list hold
# (an update in place), so native replay follows every call.
import torch

from harness import compare, step_batches
from training_optim_foreach import AdamWCosine


def freeze_bias(i, subject, reference):
    # A parameter leaves the foreach lists: its gradient is None, so the
    # optimizer skips it and the lists get shorter (another record).
    if i == 4:
        for m in (subject, reference):
            m.net[4].bias.requires_grad_(False)
            m.net[4].bias.grad = None


compare(AdamWCosine, step_batches(), between=freeze_bias, records=3, graphs=3, breaks=0)
