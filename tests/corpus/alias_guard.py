# Two arguments that are the same object are not two objects: the record
# made for f(a, a) must not run for f(a, b).
import torch

import magpy


def update(a, b):
    a.add_(1)
    return b * 2


f = magpy.compile(update)
x = torch.zeros(2)
assert torch.equal(f(x, x), torch.full((2,), 2.0))   # b is a: it saw the update
x = torch.zeros(2)
assert torch.equal(f(x, x), torch.full((2,), 2.0))   # same aliasing: replayed
y, z = torch.zeros(2), torch.zeros(2)
assert torch.equal(f(y, z), torch.zeros(2))          # different objects: a new record
stats = f._magpy_stats()
assert stats["records"] == 2 and stats["hits"] == 1, stats
