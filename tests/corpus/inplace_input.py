# The function updates its tensor argument in place and returns nothing.
import torch
from harness import same

import magpy


def accumulate(buf, x):
    buf.add_(x)
    buf.mul_(0.5)


f = magpy.compile(accumulate)
buf, ref = torch.zeros(4), torch.zeros(4)
for i in range(4):
    x = torch.randn(4)
    assert f(buf, x) is None
    accumulate(ref, x)
    assert same(buf, ref), (buf, ref)
stats = f._magpy_stats()
assert stats["records"] == 1 and stats["hits"] == 3, stats
