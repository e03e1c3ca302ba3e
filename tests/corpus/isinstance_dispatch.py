# isinstance() picks a path by the argument's type; a list and a tensor are
# different programs.
import torch
from harness import same

import magpy


def total(xs):
    if isinstance(xs, (list, tuple)):
        return torch.stack(list(xs)).sum(0)
    return xs * 1


f = magpy.compile(total)
a, b = torch.randn(3), torch.randn(3)
for _ in range(2):
    assert same(f([a, b]), total([a, b]))
    assert same(f(a), total(a))
    assert same(f((a, b)), total((a, b)))
stats = f._magpy_stats()
assert stats["records"] == 3 and stats["hits"] == 3, stats
