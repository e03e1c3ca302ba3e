# magpy-test: refused natively
# torch's bindings warn outside any operator: torch.tensor(tensor) tells
# the program to clone instead. Eager gives the warning at every call and
# the "error" filter makes it an exception; a replayed graph gives only
# its kernels' warnings again, so the call runs as Python: a graph break.
# A kernel's warning in the same call (indexing with a uint8 mask) is no
# reason to break: kernel_warning_replayed.py.
import warnings

import torch

import magpy
from harness import expect_stats


def copy(x):
    return torch.tensor(x) * 2


def copy_masked(x, m):
    return torch.tensor(x[m]) + 1


def outcome(fn, args, action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        try:
            result = ("value", fn(*args).tolist())
        except UserWarning as e:
            result = ("raised", str(e))
    return result, [(k.category, str(k.message)) for k in caught]


mask = torch.tensor([1, 0, 1, 0], dtype=torch.uint8)
for fn, args in ((copy, (torch.ones(3),)), (copy_masked, (torch.arange(4.0), mask))):
    compiled = magpy.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the monitored call: the warning is not shown, yet seen
        compiled(*args)
    for i, action in enumerate(["always", "error", "ignore", "always"]):
        got, want = outcome(compiled, args, action), outcome(fn, args, action)
        assert got == want, f"{fn.__name__} call {i} ({action}): {got} != {want}"
        assert action != "always" or "To copy construct" in str(want), want
    expect_stats(compiled, records=1, breaks=1)
print("ok")
