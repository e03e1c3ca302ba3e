# Found by adversarial programs against dicts keyed by tensors (each was
# a wrong result or an internal error in the JIT): a defaultdict whose
# factory is Python that makes a tensor (the entry it inserts is a write,
# not state the call began with), one tensor-keyed dict reachable by two
# paths, and a container compared with `==` while it holds a number the
# record lifted (the answer reads the number: it is kept, not lifted).
from collections import defaultdict

import torch
import torch.nn as nn

from harness import compare


class FactoryMakesTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.ones(3))
        self.d = defaultdict(lambda: torch.zeros(3))

    def forward(self, x):
        self.d[self.a].add_(x)
        return self.d[self.a] * 1


class TwoPaths(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.d1 = {}
        self.d2 = self.d1

    def forward(self, x):
        self.d1[self.w] = torch.zeros(3) + x.sum()
        return self.d2[self.w] + x


class ComparesHolder(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = 2.0
        self.d = {"k": 2.0}

    def forward(self, x):
        same = (self.v, 1) == (2.0, 1)
        also = self.d == {"k": 2.0}
        return x * float(same) + float(also)


def change_numbers(i, subject, reference):
    for m in (subject, reference):
        m.v = [2.0, 2.0, 3.0, 3.0, 2.0][i]
        m.d["k"] = [2.0, 3.0, 3.0, 2.0, 2.0][i]


ones = [(torch.ones(3),) for _ in range(4)]
compare(FactoryMakesTensor, ones, breaks=0)
compare(TwoPaths, ones, breaks=0)
compare(ComparesHolder, [(torch.full((3,), 5.0),) for _ in range(5)], between=change_numbers)
