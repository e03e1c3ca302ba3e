# magpy-capture-args: --log-calls 64
# Branches on a tensor's truth (MagPy 6.2.2): `if t:` on a one-element bool
# tensor becomes a branch of the record, with the side the call took; a
# call that takes the other side is monitored, and its record joins the
# first, so that one record serves every combination of sides, natively
# too. A side that leaves Python state changed, or Python that tells the
# sides' tensors apart, keeps a check per path instead. Every call is
# compared with eager; magpy-run replays the logged calls.
import torch
import torch.nn as nn
from harness import compare


class Gated(nn.Module):
    # BlockDrop in small: each block runs or not, as its gate says.
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        # Inference: with gradients, a block's result would require grad
        # where a skipped block's would not, and such sides stay checks.
        self.requires_grad_(False)

    def forward(self, x, gates):
        for i, block in enumerate(self.blocks):
            if gates[i]:
                x = torch.relu(block(x)) + x
        return x * 2


torch.manual_seed(1)
patterns = [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0]]
calls = [(torch.randn(2, 4), torch.tensor(p, dtype=torch.bool)) for p in patterns + patterns[::-1]]
# Two runs see both sides of every gate: the record they join serves the
# six other patterns, and the first ones again.
compare(Gated, calls, records=1, graphs=1, breaks=0, monitored=2)


class EitherWay(nn.Module):
    # Both sides compute: the value each leaves in `y` stands for the other's.
    def forward(self, x):
        if (x.sum() > 0).all():
            y = x.exp()
        else:
            y = x.abs() + 1
        z = y * 3 if (y.mean() > 2).all() else y - 1  # a conditional expression: its value is on the stack
        return z + y


calls = [(torch.randn(3) + s,) for s in (2.0, -3.0, 0.1, 1.5, -0.2, 3.0, -1.0, 0.0)]
compare(EitherWay, calls, records=1, graphs=1, breaks=0)


class CountsInSide(nn.Module):
    # The side changes Python state (a counter on self): joining would
    # replay one path's count on the other, so each path keeps its check.
    def __init__(self):
        super().__init__()
        self.hits = 0

    def forward(self, x):
        if (x > 0).all():
            x = x + 1
            self.hits += 1
        return x * 2


calls = [(torch.rand(3),), (-torch.rand(3),), (torch.rand(3),), (-torch.rand(3),)]
compare(CountsInSide, calls, records=2, graphs=2, breaks=0)


class RebindsNumber(nn.Module):
    # A local number changed in a side: the sides meet in another state.
    def forward(self, x):
        scale = 1
        if (x > 0).any():
            scale = 2
            x = x - 1
        return x * scale


calls = [(torch.randn(3) + 5,), (torch.randn(3) - 5,), (torch.randn(3) + 5,), (torch.randn(3) - 5,)]
compare(RebindsNumber, calls, records=2, graphs=2, breaks=0, hits=2)


class TellsApart(nn.Module):
    # `y is x` after the branch: Python sees which side ran through
    # identity, which a joined record would not repeat.
    def forward(self, x):
        y = x
        if (x.mean() > 0).all():
            y = x.neg()
        same = y is x
        return y + 1, same


calls = [(torch.randn(3) + 4,), (torch.randn(3) - 4,), (torch.randn(3) + 4,), (torch.randn(3) - 4,)]
compare(TellsApart, calls, records=2, graphs=2, breaks=0, hits=2)


class DrawsInSide(nn.Module):
    # A side draws random numbers, and a later decision stays a check: a
    # plan runs that check before the branch (it reads nothing the side
    # computes), so a call that decides otherwise stops before any draw.
    def forward(self, x, a, b):
        if a:
            x = x + torch.rand(3)
        if b:
            x = x * 3
        return x


T, F = torch.tensor(True), torch.tensor(False)
calls = [(torch.ones(3), T, F), (torch.ones(3), T, T), (torch.ones(3), F, F), (torch.ones(3), T, F), (torch.ones(3), F, T)]
compare(DrawsInSide, calls, reseed=True, breaks=0)
