# The old manual-SGD idiom: p.data.add_(p.grad, alpha=-lr) with grad mode
# on, after a forward that computed with autograd. The first replay fails
# with "a leaf Variable that requires grad is being used in an in-place
# operation" (the .data write replays as an in-place op on the leaf under
# autograd). The second program has no backward at all: the failure is not
# the backward node's own.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        for p in self.net.parameters():
            p.data.add_(p.grad, alpha=-0.1)
            p.grad = None
        return loss.detach()


class NoBackward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        y = (self.w * x).sum()
        self.w.data.add_(x, alpha=-0.1)
        return y.detach()


torch.manual_seed(1)
calls = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
compare(Step, calls)
compare(NoBackward, [(torch.ones(3),) for _ in range(3)])
