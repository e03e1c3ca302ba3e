# Paper, Figure 9: x[0] += y in place, x.append(x[0] * y), tuple(x).
import torch
from harness import compare, same


def f(x, y, z):
    x[0] += y
    x.append(x[0] * y)
    a = tuple(x)
    return a


def make():
    return f


torch.manual_seed(0)
t = torch.rand(3, 3)
compare(make, [([t], 2.0, 3.0)] * 3, records=1, graphs=1, hits=2)

# The argument list itself is updated in place, on replayed calls too.
import magpy
g = magpy.compile(f)
for _ in range(3):
    lst = [torch.ones(2)]
    out = g(lst, 2.0, 3.0)
    assert len(lst) == 2 and same(lst[0], torch.full((2,), 3.0)) and same(lst[1], torch.full((2,), 6.0)), lst
    assert out[0] is lst[0] and out[1] is lst[1]
