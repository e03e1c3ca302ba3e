# Numbers read with t.item() from tensors the graph holds are graph
# numbers (aten::item): the operators and the number arithmetic that take
# them read them at every call, and a decision on one is a predicate the
# graph checks. Each program changes the tensor between calls where a
# record that kept the value it read at capture would go stale. Compared
# with eager at every call.
import math

import torch
import torch.nn as nn

from harness import compare


class Scale(nn.Module):
    """x * s.item() / 2 ** k.item(): the state's tensors change between calls."""

    def __init__(self):
        super().__init__()
        self.register_buffer("s", torch.tensor(2.0))
        self.register_buffer("k", torch.tensor(1))

    def forward(self, x):
        return x * self.s.item() / 2 ** self.k.item()


class ReadThenWrite(nn.Module):
    """The count is read before the call increments it in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.tensor(0.0))

    def forward(self, x):
        n = self.count.item()
        self.count += 1
        return x * math.sqrt(n + 1) - n


class Index(nn.Module):
    """An int read from a tensor picks a row."""

    def __init__(self):
        super().__init__()
        self.register_buffer("row", torch.tensor(0))

    def forward(self, x):
        return x[self.row.item()] * 2


class Decide(nn.Module):
    """A decision on a number the graph read: one record per side."""

    def forward(self, x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1


class Pinned(nn.Module):
    """A number used where the graph cannot compute with it (a dict key):
    the graph checks it equals what the capture read."""

    table = {1: 10.0, 2: 20.0}

    def __init__(self):
        super().__init__()
        self.register_buffer("key", torch.tensor(1))

    def forward(self, x):
        return x * self.table[self.key.item()]


def change(name, values):
    def between(i, subject, reference):
        for m in (subject, reference):
            getattr(m, name).fill_(values[i % len(values)])
    return between


def scale_both(i, subject, reference):
    for m in (subject, reference):
        m.s.fill_(1.5 + i)
        m.k.fill_(i % 3)


x = [(torch.randn(4, 3),) for _ in range(6)]
compare(Scale, x, between=scale_both, records=1, graphs=1, breaks=0, hits=5)
compare(ReadThenWrite, x, records=1, graphs=1, breaks=0, hits=5)
compare(Index, x, between=change("row", [2, 0, 3, 1]), records=1, graphs=1, breaks=0, hits=5)
signs = [(torch.ones(3),), (-torch.ones(3),), (torch.ones(3) * 3,), (-torch.ones(3) * 2,)]
compare(Decide, signs, records=2, graphs=2, breaks=0, hits=2)
compare(Pinned, x, between=change("key", [1, 1, 2, 2, 1, 2]), records=2, graphs=2, breaks=0, hits=4)
