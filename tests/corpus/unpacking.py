# Tuple unpacking, starred unpacking, swaps, returning tuples.
import torch
from harness import compare


def split3(x):
    a, b, c = x.chunk(3)
    first, *rest = [a, b, c]
    b, a = a, b
    *init, last = (a, b, c)
    return first + last, len(rest), init[0] - init[1]


def make():
    return split3


compare(make, [(torch.randn(6, 2),)] * 3, records=1, graphs=1, hits=2, breaks=0)
