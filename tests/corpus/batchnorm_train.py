# BatchNorm in training mode updates its running statistics in place
# (and num_batches_tracked): replayed calls must update them the same way.
import torch
import torch.nn as nn
from harness import compare


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def make():
    return Net().train()


calls = [(torch.randn(2, 3, 8, 8),) for _ in range(4)]
with torch.no_grad():
    compare(make, calls, records=1, graphs=1, hits=3, breaks=0)
