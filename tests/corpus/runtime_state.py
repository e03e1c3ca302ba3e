# Interpreter state a result depends on: the default dtype (constants from
# Python floats, factories without a dtype, int tensors times floats, and
# torch.get_default_dtype() itself), deterministic-algorithms mode and
# inference mode read through torch's functions. Changing any of them
# between calls makes a new record, never a stale result. Native replay
# of the logged calls sets the default dtype as the script did.
import torch

import magpy
from harness import same


def constants(x):
    return x.sum() * torch.tensor([1.5, 2.5])


def factories(n):
    return torch.zeros(n) + torch.arange(n) * 0.5


def branch_on_dtype(x):
    return x * 2 if torch.get_default_dtype() == torch.float32 else x * 3


def branch_on_determinism(x):
    return x.cumsum(0) if torch.are_deterministic_algorithms_enabled() else x * 4


def branch_on_inference(x):
    return x + 1 if torch.is_inference_mode_enabled() else x - 1


def check(fn, *args):
    compiled = magpy.compile(fn)
    got, want = compiled(*args), fn(*args)
    assert same(got, want), (fn.__name__, got, want)


x = torch.ones(3)
for dtype in [torch.float32, torch.float64, torch.float32]:
    torch.set_default_dtype(dtype)
    for fn, args in [(constants, (x,)), (factories, (3,)), (branch_on_dtype, (x,))]:
        for _ in range(2):
            check(fn, *args)
torch.set_default_dtype(torch.float32)

for flag in [False, True, False]:
    torch.use_deterministic_algorithms(flag)
    check(branch_on_determinism, x)
torch.use_deterministic_algorithms(False)

for on in [False, True, False]:
    with torch.inference_mode(on):
        check(branch_on_inference, torch.ones(2))
