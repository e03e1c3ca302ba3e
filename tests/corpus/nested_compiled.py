# A compiled function calls another compiled function: the inner one is
# traced as part of the outer one's graph.
import torch
from harness import same

import magpy


def inner(x):
    return torch.sigmoid(x) * 2


inner_c = magpy.compile(inner)


def outer(x):
    return inner_c(x) + inner_c(x * 3)


outer_c = magpy.compile(outer)
x = torch.randn(4)
for _ in range(3):
    assert same(outer_c(x), outer(x))
assert outer_c._magpy_stats()["records"] == 1 and outer_c._magpy_stats()["hits"] == 2
assert same(inner_c(x), inner(x))
