# Leaves hold a .grad before the first compiled call (set from outside:
# random values, or zeros) and the step accumulates into it without zeroing
# and updates with it. The record must keep each .grad as the call FIRST
# read it: backward's in-place accumulation is a write. magpy-capture kept
# the value the .grad had when the call returned, so magpy-run replayed
# every logged call from the wrong gradients (MISMATCH from call 0), and
# `magpy-run --batches` trained silently wrong weights.
import torch
import torch.nn as nn

from harness import compare


def fingerprint(m):
    return [p.detach().clone() for p in m.parameters()] + [p.grad.clone() for p in m.parameters()]


class NoZero(nn.Module):
    def __init__(self, init):
        super().__init__()
        self.l1 = nn.Linear(6, 6)
        self.l2 = nn.Linear(6, 6)
        for p in self.parameters():
            p.grad = init(p)

    def forward(self, x):
        self.l2(torch.tanh(self.l1(x))).pow(2).mean().backward()
        with torch.no_grad():
            for p in self.parameters():
                p.sub_(0.1 * p.grad)
        return fingerprint(self)


torch.manual_seed(3)
calls = [(torch.randn(4, 6),) for _ in range(4)]
compare(lambda: NoZero(torch.randn_like), calls, records=1, breaks=0)
compare(lambda: NoZero(torch.zeros_like), calls, records=1, breaks=0)


# the smallest form: one global leaf whose .grad is 5 at entry
w = torch.zeros(3, requires_grad=True)
w.grad = torch.full((3,), 5.0)
w_ref = torch.zeros(3, requires_grad=True)
w_ref.grad = torch.full((3,), 5.0)


def step(x):
    (w * x).sum().backward()
    with torch.no_grad():
        w.sub_(w.grad)
    return w.detach().clone(), w.grad.clone()


def step_ref(x):
    (w_ref * x).sum().backward()
    with torch.no_grad():
        w_ref.sub_(w_ref.grad)
    return w_ref.detach().clone(), w_ref.grad.clone()


import magpy
f = magpy.compile(step)
for i in range(3):
    got, want = f(torch.ones(3)), step_ref(torch.ones(3))
    assert all(torch.equal(a, b) for a, b in zip(got, want)), f"call {i}: {got} != {want}"
