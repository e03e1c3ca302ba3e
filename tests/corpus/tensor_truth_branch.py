# `if tensor:` reads tensor contents through bool(): the record checks the
# condition's value, so a call that takes the other side never gets a
# stale branch, and one that takes the same side with other data hits.
import torch
from harness import compare


def pick(x, t):
    if (t > 0).all():
        return x + 1
    return x - 1


def make():
    return pick


x = torch.zeros(2)
calls = [(x, torch.ones(1)), (x, -torch.ones(1)), (x, torch.ones(1) * 3), (x, -torch.ones(1) * 2)]
compare(make, calls, records=2, graphs=2, breaks=0, hits=2)
