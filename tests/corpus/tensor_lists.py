# Operators with several results: chunk, split, unbind, max(dim), topk.
import torch
from harness import compare


def pieces(x):
    a, b = x.chunk(2, dim=1)
    parts = torch.split(x, [1, 3], dim=1)
    rows = x.unbind(0)
    best = x.max(dim=1)
    top = torch.topk(x, 2, dim=1)
    return a + b, torch.stack(rows).sum(), parts[1].mean(), best.values, best.indices, top.indices


def make():
    return pieces


compare(make, [(torch.randn(3, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)
