# magpy-test: breaks
# Reads of tensor contents into Python that stay graph breaks, beside
# those content_checks.py checks: a value that differs at every call
# (checks stop after a few records), and reads in a graph that writes its
# inputs in place or draws random numbers, which could not stop cleanly
# at a failed check. Every call is compared with eager.
import torch
import torch.nn as nn
from harness import compare


class EveryCallDiffers(nn.Module):
    # A value that differs at every call, used where the graph cannot
    # compute with it (round): after 4 records with checks, the next call's
    # record is a graph break that runs as Python.
    def forward(self, x):
        return x * round(x.sum().item(), 3)


compare(EveryCallDiffers, [(torch.randn(3),) for _ in range(7)], records=5, graphs=4, breaks=1, hits=0, eager=2)


class CountsCalls(nn.Module):
    # The graph writes a buffer in place, then Python reads a value made
    # from it: the check cannot move before the write, and a failed check
    # could not undo it, so this stays a break.
    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.seen.add_(1)
        return x * (self.seen > 1).item()


compare(CountsCalls, [(torch.randn(3),) for _ in range(3)], records=1, graphs=0, breaks=1)


class NoisyThreshold(nn.Module):
    # A random draw before the read: stopping would have moved the generator.
    def forward(self, x):
        noise = torch.rand(()) * 0.1
        return x * bool(x.mean() > noise)


compare(NoisyThreshold, [(torch.randn(3),) for _ in range(3)], reseed=True, records=1, graphs=0, breaks=1)


class CountThenRead(nn.Module):
    # The write of a buffer comes first, and the value read is computed from
    # the argument, which may share the buffer's memory (the caller may pass
    # a view of it): the read cannot move before the write, so it stays a
    # break.
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls.add_(1)
        return x * 2 if bool(x.sum() > 0) else -x


signs = [(torch.tensor([1.0, 2.0]),), (torch.tensor([-1.0, -2.0]),), (torch.tensor([3.0, 1.0]),)]
compare(CountThenRead, signs, records=1, graphs=0, breaks=1)
