# Autograd state read by Python code: requires_grad of a tensor the call
# made depends on the grad mode (guarded once read), is_leaf of a tensor
# from outside that does not require grad is always True (its metadata
# guard holds requires_grad), and grad_fn of a tensor the call made. Calls
# alternate between grad mode on and off. Native replay serves each call
# with the record of the script's grad mode at that call.
import torch
import torch.nn as nn

import magpy
from harness import compare


class Checkpointish(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if y.requires_grad:  # made by the call: follows the grad mode
            return y * 2
        return y - 1


def leaf_or_not(x):
    # x never requires grad here: is_leaf is fixed by the guarded metadata.
    return x + 1 if x.is_leaf else x - 1


def grad_fn_none(x):
    y = x * 3
    return y if y.grad_fn is None else y.detach() + 10


for mode in [True, False, True, False]:
    with torch.set_grad_enabled(mode):
        compare(lambda: Checkpointish(), [(torch.ones(2, 3),)])

f = magpy.compile(leaf_or_not)
for t in [torch.ones(2), torch.ones(3), torch.ones(2)]:
    assert torch.equal(f(t), leaf_or_not(t))

g = magpy.compile(grad_fn_none)
w = torch.ones(2, requires_grad=True)
for mode in [True, False, True]:
    with torch.set_grad_enabled(mode):
        got, want = g(w), grad_fn_none(w)
        assert torch.equal(got, want) and got.requires_grad == want.requires_grad, (mode, got, want)
