# State written in place only through a view (a slice, .view, .detach(),
# .data of a buffer): the record must keep the tensor as the call first
# read it. magpy-capture kept its value at the call's exit instead, so
# magpy-run replayed every logged call from the wrong state (MISMATCH at
# call 0), and `magpy-run --batches` of an SGD step written as
# p.detach().add_(p.grad, alpha=-lr) trained silently wrong weights.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class SliceOfBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(2))

    def forward(self, x):
        b0 = self.buf.clone()
        self.buf[0:1].add_(x[:1])
        return b0


class DataOfBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(2))

    def forward(self, x):
        b0 = self.buf.clone()
        self.buf.data.add_(x)
        return b0


class DetachSGD(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 8)
        self.l2 = nn.Linear(8, 3)

    def forward(self, x, y):
        loss = F.cross_entropy(self.l2(torch.relu(self.l1(x))), y)
        loss.backward()
        for p in self.parameters():
            p.detach().add_(p.grad, alpha=-0.1)
            p.grad = None
        return loss.detach()


compare(SliceOfBuffer, [(torch.ones(2),) for _ in range(3)], records=1, breaks=0)
compare(DataOfBuffer, [(torch.ones(2),) for _ in range(3)], records=1, breaks=0)
torch.manual_seed(1)
compare(DetachSGD, [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)], records=1, breaks=0)


# a global tensor written through .view
buf = torch.zeros(2)
ref = torch.zeros(2)


def step(x):
    b0 = buf.clone()
    buf.view(2).add_(x)
    return b0


import magpy
f = magpy.compile(step)
for i in range(3):
    got = f(torch.ones(2))
    want = ref.clone()
    ref.view(2).add_(torch.ones(2))
    assert torch.equal(got, want), f"call {i}: {got} != {want}"
