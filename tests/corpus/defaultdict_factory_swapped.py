# A defaultdict in the module's state whose default_factory the script
# swaps between calls, shared by two submodules. The factory decides the
# value of a key the call reads for the first time, so a record captured
# under one factory must not serve a call under another. Natively the
# logged swap is applied to the dict both submodules hold (native replay
# once stopped with an error here: it kept the factory beside the dict,
# not in it, and could not store it).
import collections

import torch
import torch.nn as nn

from harness import compare


def zero():
    return 0.0


def three():
    return 3.0


class Reader(nn.Module):
    def __init__(self, table, key):
        super().__init__()
        self.table, self.key = table, key

    def forward(self, x):
        return x * self.table["a"] + self.table[self.key]


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        table = collections.defaultdict(zero, a=2.0)
        self.first, self.second = Reader(table, "b"), Reader(table, "c")

    def forward(self, x):
        return self.first(x) - self.second(x)


def swap(i, subject, reference):
    for m in (subject, reference):
        table = m.first.table
        if i == 2:
            table.default_factory = three
            del table["b"]
        elif i == 4:
            m.second.table.default_factory = zero
            del table["c"]


with torch.no_grad():
    compare(Pair, [(torch.ones(3),) for _ in range(6)], between=swap)
print("defaultdict factory swapped between calls: every call as eager, natively too")
