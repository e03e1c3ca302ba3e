# *args and **kwargs: packing, forwarding, unpacking into calls.
import torch
import torch.nn as nn
from harness import compare


def combine(*tensors, weight=1.0, **extra):
    total = sum(tensors) * weight
    for key in sorted(extra):
        total = total + extra[key]
    return total


class Star(nn.Module):
    def forward(self, *xs, **kw):
        parts = [x * 2 for x in xs]
        return combine(*parts, weight=0.5, **kw)


x, y = torch.randn(3), torch.randn(3)
compare(Star, [(x, y)] * 3, records=1, graphs=1, hits=2, breaks=0)
