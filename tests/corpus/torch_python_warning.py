# magpy-test: refused natively
# torch's own Python code warns inside calls the monitor summarizes
# (F.softmax without dim, the deprecated F.upsample). Eager gives the
# warning at every call, and the "error" filter makes it an exception; a
# replayed graph would give neither (the JIT once returned a value where
# eager raised). The call runs as Python: a graph break naming the call.
import warnings

import torch
import torch.nn.functional as F

import magpy
from harness import expect_stats


def scores(x):
    return F.softmax(x) * 2


def grow(x):
    return F.upsample(x, scale_factor=2) + 1


def outcome(fn, x, action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        try:
            result = ("value", fn(x).tolist())
        except UserWarning as e:
            result = ("raised", str(e))
    return result, [(k.category, str(k.message)) for k in caught]


for fn, x in ((scores, torch.ones(2, 3)), (grow, torch.ones(1, 1, 2, 2))):
    compiled = magpy.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the monitored call: the warning is not shown, yet seen
        compiled(x)
    for i, action in enumerate(["always", "error", "ignore", "always"]):
        got, want = outcome(compiled, x, action), outcome(fn, x, action)
        assert got == want, f"{fn.__name__} call {i} ({action}): {got} != {want}"
        assert action == "ignore" or want[1] or want[0][0] == "raised", want
    expect_stats(compiled, records=1, breaks=1)
print("ok")
