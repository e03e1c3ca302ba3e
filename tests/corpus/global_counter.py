# A global written by the function (a counter and a cache); the mock writes
# them on replayed calls, and a later call reads what it wrote.
import torch
from harness import same

import magpy

STEPS = 0
LAST = None


def step(x):
    global STEPS, LAST
    STEPS = STEPS + 1
    LAST = x * 2
    return LAST + 1


f = magpy.compile(step)
x = torch.randn(3)
for i in range(4):
    out = f(x)
    assert same(out, x * 2 + 1)
    assert STEPS == i + 1 and same(LAST, x * 2)
stats = f._magpy_stats()
# STEPS changes every call: each call is a new program until scalars can be lifted.
assert stats["records"] == 4, stats
