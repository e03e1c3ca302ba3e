# What a program reads of a tensor without reading its contents: len(t) is
# its first dimension, .data/.grad/.real of state tensors are paths native
# replay follows, and resize_ / resize_as_ / t_ are operators when what they
# leave is fully written. Every call compares with eager; the records replay
# natively.
import torch
import torch.nn as nn
from harness import compare


class Lengths(nn.Module):
    def forward(self, x, items):
        return x * len(x) + len(x[0]) + len(items)


class StateAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.randn(1, 16, 4)  # a plain tensor attribute, not a buffer
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        y = x + self.table.data[:, : x.shape[1]] + x @ self.w.data.mT + self.w.real.sum()
        if self.w.grad is None:
            y = y + 1
        return y


class Resizes(nn.Module):
    def forward(self, x):
        flat = x.clone()
        flat.resize_(x.numel())
        grown = torch.empty(0)
        grown.resize_as_(x)
        grown.copy_(x)
        square = x[0].clone()
        square.t_()
        return flat * 2 + grown.sum() + square.sum(0).sum()


x = torch.randn(2, 5, 4)
others = [(torch.randn(2, 5, 4),), (torch.randn(2, 5, 4),)]
compare(Lengths, [(x, [1, 2]), (torch.randn(2, 5, 4), [3, 4]), (torch.randn(3, 5, 4), [1])], records=3, graphs=3,
        breaks=0)
compare(StateAttributes, [(x,)] + others, records=1, graphs=1, breaks=0, hits=2)


def set_grad(i, subject, reference):
    """A gradient appears between calls, then goes: .grad is state."""
    for m in (subject, reference):
        m.w.grad = torch.ones(4, 4) if i == 1 else None


compare(StateAttributes, [(x,)] * 3, between=set_grad, records=2, graphs=2, breaks=0, hits=1)
compare(Resizes, [(x,)] + others, records=1, graphs=1, breaks=0, hits=2)
