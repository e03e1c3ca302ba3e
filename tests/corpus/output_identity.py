# Results that are the caller's own objects keep their identity; a tensor
# returned twice is one object twice.
import torch

import magpy


def passthrough(items, x):
    y = x * 2
    return items, y, y


f = magpy.compile(passthrough)
for _ in range(3):
    items = [torch.ones(1)]
    x = torch.randn(2)
    got_items, a, b = f(items, x)
    assert got_items is items
    assert a is b
    assert torch.equal(a, x * 2)
assert f._magpy_stats()["hits"] == 2
