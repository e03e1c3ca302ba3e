# magpy-test: breaks
# `if tensor:` reads tensor contents through bool(): a break, never a stale branch.
import torch
from harness import compare


def pick(x, t):
    if (t > 0).all():
        return x + 1
    return x - 1


def make():
    return pick


x = torch.zeros(2)
calls = [(x, torch.ones(1)), (x, -torch.ones(1)), (x, torch.ones(1))]
compare(make, calls, breaks=1)
