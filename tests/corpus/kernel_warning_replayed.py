# An operator whose kernel warns (indexing with a uint8 mask is
# deprecated): eager, torch's bindings turn the kernel's warning into a
# Python UserWarning at every call, and the "error" filter makes it an
# exception. A replayed call must do the same (the JIT once sent such
# warnings to libtorch's logger on stderr, where no filter saw them).
import warnings

import torch

import magpy
from harness import expect_stats


def masked(x, m):
    return x[m] * 2


compiled = magpy.compile(masked)
x = torch.arange(4.0)
m = torch.tensor([1, 0, 1, 0], dtype=torch.uint8)


def outcome(fn, action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        try:
            result = ("value", fn(x, m).tolist())
        except UserWarning as e:
            result = ("raised", str(e))
    return result, [(k.category, str(k.message)) for k in caught]


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    compiled(x, m)  # the monitored call
for i, action in enumerate(["always", "always", "error", "ignore", "always"]):
    got, want = outcome(compiled, action), outcome(masked, action)
    assert got == want, f"call {i} ({action}): {got} != {want}"
    assert action == "ignore" or "uint8" in str(want), want
expect_stats(compiled, records=1)
print("ok")
