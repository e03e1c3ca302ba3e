# A learning rate that changes every step (a schedule the caller runs, or
# one the step runs on itself and stores) is a lifted number in a training
# step's record: one record serves every value, though the step writes its
# weights in place, because the rate only scales values (no size, check or
# branch depends on it). A number that decides something (a threshold the
# step compares) keeps its value: a record per value.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Scheduled(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 2))
        self.lr = 0.1

    def forward(self, x, y):
        loss = F.mse_loss(self.net(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.net.parameters():
                p.add_(p.grad, alpha=-self.lr)
                p.grad = None
        return loss.detach()


class SelfScheduled(Scheduled):
    def forward(self, x, y):
        loss = super().forward(x, y)
        self.lr = self.lr * 0.8
        return loss


class Thresholded(Scheduled):
    def forward(self, x, y):
        loss = super().forward(x, y)
        if self.lr > 0.05:
            return loss * 2
        return loss


def decay(i, subject, reference):
    subject.lr = reference.lr = 0.1 * 0.9 ** i


torch.manual_seed(0)
calls = [(torch.randn(4, 5), torch.randn(4, 2)) for _ in range(8)]
compare(Scheduled, calls, between=decay, records=1, graphs=1, breaks=0, hits=6)
compare(SelfScheduled, calls, records=1, graphs=1, breaks=0, hits=6)
stats = compare(Thresholded, calls, between=decay)
assert stats["records"] >= 3, stats
