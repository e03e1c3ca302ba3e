# Whole training steps: forward, loss.backward() and the update in one
# record. Gradients start as None (set_to_none between steps), or
# accumulate over two micro-batches in a call, or over calls (a tensor at
# entry: a second record adds into it); the update reads .grad through
# .data or under no_grad; momentum buffers live in a list or as module
# buffers; gradients are clipped by their norm. Every call is compared
# with eager: results, weights, buffers and each leaf's .grad.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class ManualSGD(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        for p in self.net.parameters():
            p.data.add_(p.grad, alpha=-0.1)
            p.grad = None
        return loss.detach()


class MicroBatches(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 5 * 5, 3))
        for name, p in self.net.named_parameters():
            self.register_buffer("m_" + name.replace(".", "_"), torch.zeros_like(p))

    def forward(self, x, y):
        total = 0
        for xs, ys in ((x[:2], y[:2]), (x[2:], y[2:])):
            loss = F.cross_entropy(self.net(xs), ys) / 2
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        with torch.no_grad():
            for name, p in self.net.named_parameters():
                m = getattr(self, "m_" + name.replace(".", "_"))
                m.mul_(0.9).add_(p.grad)
                p.sub_(0.05 * m)
                p.grad = None
        return total


class Accumulating(nn.Module):
    """Gradients accumulate over calls; the caller zeroes them every third."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        loss = (x @ self.w).pow(2).mean()
        loss.backward()
        return loss.detach(), self.w.grad.clone()


def zero_every_third(i, subject, reference):
    if i % 3 == 0:
        subject.w.grad = None
        reference.w.grad = None


torch.manual_seed(0)
data = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(5)]
compare(ManualSGD, data, records=1, graphs=1, breaks=0, hits=4)

images = [(torch.randn(4, 2, 5, 5), torch.randint(0, 3, (4,))) for _ in range(4)]
compare(MicroBatches, images, records=1, graphs=1, breaks=0, hits=3)

compare(Accumulating, [(torch.randn(2, 4),) for _ in range(7)], between=zero_every_third, records=2, graphs=2,
        breaks=0, hits=5)
