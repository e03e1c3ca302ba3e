# magpy-test: breaks
# `t.requires_grad = flag` inside the function. Setting it to what a tensor
# the call made already has (a fresh zero state marked as needing no grad)
# changes nothing and stays in the graph (the record guards the grad mode,
# which decides the flags the graph gives). A store that changes a flag,
# or writes a flag of state, and a factory called with requires_grad=True
# are graph breaks.
import torch
import torch.nn as nn
from harness import compare


class FreshState(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.zeros(x.size(0), 4)
        h.requires_grad = False
        return self.fc(x) + h


calls = [(torch.randn(2, 4),) for _ in range(4)]
compare(FreshState, calls, records=1, graphs=1, breaks=0, hits=3)


class UnmarksLeaf(nn.Module):
    """A fresh leaf made with requires_grad=True: Python sets the flag after
    the operator, so no graph makes it; a break (the JIT once replayed it
    without the flag)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.ones(x.size(0), 4, requires_grad=True)
        h.requires_grad = False
        return self.fc(x) + h, h.requires_grad


compare(UnmarksLeaf, calls[:2], records=1, graphs=0, breaks=1)


class FreezesState(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        self.fc.bias.requires_grad = False
        return self.fc(x)


compare(FreezesState, calls[:2], records=2, graphs=0, breaks=2)  # the flag it changed is guarded
