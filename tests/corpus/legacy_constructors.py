# magpy-test: breaks
# Tensors filled without ATen operators: the legacy constructors
# (torch.Tensor(list), torch.FloatTensor(list), x.new(list)) become graph
# constants by value, and torch.tensor of values read from tensors is a
# graph break, never a stale constant.
import torch
import torch.nn as nn
from harness import compare


class EdgeLoss(nn.Module):
    def forward(self, x):
        kernel = torch.Tensor([[1, 0, -1], [2, 0, -2], [1, 0, -1]])
        row = torch.FloatTensor([[1, 2, 1]])
        offsets = x.new([0.5, -0.5, 0.25])
        counts = torch.LongTensor([1, 2, 3])
        return (x @ kernel) * row + offsets + counts


def extremes(x):
    return torch.tensor([x.max(), x.min()]) * 2


def sized(x):
    t = torch.Tensor(2, 3)  # uninitialized, then filled by operators
    t.fill_(1.5)
    return x + t


calls = [(torch.randn(2, 3),) for _ in range(4)]
compare(lambda: EdgeLoss(), calls, records=1, hits=3, breaks=0)
compare(lambda: extremes, calls, breaks=1)
compare(lambda: sized, calls, records=1, hits=3, breaks=0)
