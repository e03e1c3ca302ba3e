# sorted with a lambda key, map, filter, min/max with keys, zip(*...).
import torch
from harness import compare

SIZES = {"small": 2, "large": 8, "medium": 4}


def arrange(x):
    names = sorted(SIZES, key=lambda k: SIZES[k])
    widths = list(map(lambda k: SIZES[k], names))
    big = list(filter(lambda w: w > 2, widths))
    pairs = list(zip(*[(n, w) for n, w in zip(names, widths)]))
    widest = max(names, key=SIZES.get)
    return x[: min(big)] * len(pairs[0]) + SIZES[widest]


def make():
    return arrange


compare(make, [(torch.randn(10),)] * 3, records=1, graphs=1, hits=2, breaks=0)
