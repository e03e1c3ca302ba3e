# The script changes one compiled module's state, then calls another
# compiled module first. The call log must keep that change for the
# second module's next call: it once noted every module's state as the
# first call left it, so the change was never logged and native replay
# answered from the old weights.
import torch

import magpy

torch.manual_seed(0)
a, b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
ca, cb = magpy.compile(a), magpy.compile(b)
x = torch.randn(2, 3)
with torch.no_grad():
    for i in range(4):
        assert torch.equal(ca(x), a(x))
        assert torch.equal(cb(x), b(x))
        b.weight.mul_(0.5)  # in place
        b.bias = torch.nn.Parameter(b.bias + 1)  # replaced
print("ok")
