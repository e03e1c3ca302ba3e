# magpy-capture-args: --log-calls 200
# Branches on one-element bool tensors whose records join, driven by random
# conditions so that the joined records run combinations of sides no
# capture ran. Each program is compared with eager on every call; the
# joined records replay natively (magpy-run) on the logged calls.
import torch
import torch.nn as nn
from harness import compare


def conds(n, k, seed, shape=(3,)):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g), torch.rand(n, generator=g) > 0.5) for _ in range(k)]


class Helper(nn.Module):
    # The branch lies in a method called from forward: the side ends in the
    # frame that jumped (step's), three times per call. One record serves
    # all 8 combinations after 4 captures.
    def step(self, x, flag):
        if flag:
            x = x * 3
        else:
            x = x - 1
        return x

    def forward(self, x, c):
        for i in range(3):
            x = self.step(x, c[i])
        return x


compare(Helper, conds(3, 24, 4), records=1, graphs=1, breaks=0, hits=20)


class NotNested(nn.Module):
    # `if not`, a comparison of two conditions, and an if inside a side
    # (which stays a check inside the joined branch's side).
    def forward(self, x, c):
        x = x + 0
        if not c[0]:
            x = x * 2
        if c[0] != c[1]:
            x = x / 3
        if c[1]:
            x = x + 100
            if c[2]:
                x = x - 7
        return x


compare(NotNested, conds(3, 24, 34), records=2, graphs=2, breaks=0, hits=19)


class EarlyReturn(nn.Module):
    # A side that returns is no branch (a check); the later if still joins.
    def forward(self, x, c):
        x = x + 0
        if c[0]:
            return x * 7
        if c[1]:
            x = x - 1
        return x


compare(EarlyReturn, conds(2, 24, 7), records=2, graphs=2, breaks=0, hits=21)


class WhileThenBranch(nn.Module):
    # A while loop on a tensor condition (checks per trip) before a branch.
    def forward(self, x, c):
        x = x.abs() + 0.1
        while x.sum() < 4:
            x = x * 2
        if c[0]:
            x = x + 1
        return x


compare(WhileThenBranch, conds(1, 24, 11), records=3, graphs=3, breaks=0, hits=18)


class ReadAfter(nn.Module):
    # A tensor from before the branch (s) and its shape are read after it;
    # the side's result feeds a size read too.
    def forward(self, x, c):
        x = x + 0
        s = x
        if c[0]:
            x = x * 2
        n = x.shape[0] + s.shape[0]
        if c[1]:
            s = s - 1
        return x + s + n


compare(ReadAfter, conds(2, 24, 15), records=3, graphs=3, breaks=0, hits=20)


class GradSides(nn.Module):
    # Sides leave tensors that require grad or not: the result's
    # requires_grad must follow the sides the call took.
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x, c):
        x = x + 0
        w = self.w
        if c[0]:
            x = x * w
        if c[1]:
            x = x.detach()
        return x


compare(GradSides, conds(2, 24, 13), records=3, graphs=3, breaks=0, hits=20)


class ParameterGates(nn.Module):
    # Conditions computed from a parameter that changes between calls, and
    # a Python float (lifted into the graph) read on a side.
    def __init__(self):
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(2), requires_grad=False)
        self.alpha = 1.0

    def forward(self, x):
        x = x + 0
        if self.gate[0] > 0:
            x = x * self.alpha
        if self.gate[1] > 0:
            x = x + self.alpha
        return x


def new_gates(i, subject, reference):
    g = torch.Generator().manual_seed(i)
    v = torch.randn(2, generator=g)
    for m in (subject, reference):
        m.gate.data.copy_(v)
        m.alpha = float(i % 3)


compare(ParameterGates, [(torch.randn(3),) for _ in range(24)], between=new_gates, records=2, graphs=2, breaks=0, hits=20)
