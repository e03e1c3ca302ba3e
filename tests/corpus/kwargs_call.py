# The compiled function called with keyword arguments.
import torch
import torch.nn as nn
from harness import same

import magpy


class Masked(nn.Module):
    def forward(self, x, mask=None, scale=1.0):
        if mask is not None:
            x = x.masked_fill(mask, 0.0)
        return x * scale


m = Masked()
f = magpy.compile(m)
x = torch.randn(4)
mask = x > 0
for _ in range(2):
    assert same(f(x, mask=mask, scale=2.0), m(x, mask=mask, scale=2.0))
assert same(f(x), m(x))
assert same(f(x, scale=3.0), m(x, scale=3.0))
stats = f._magpy_stats()
assert stats["records"] == 3 and stats["hits"] == 1, stats
