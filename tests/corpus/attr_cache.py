# A tensor the function stores on self, read back on the next call.
import torch
import torch.nn as nn
from harness import compare


class Smoother(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.zeros(3)
        self.momentum = 0.9

    def forward(self, x):
        self.state = self.state * self.momentum + x * (1 - self.momentum)
        return self.state * 2


compare(Smoother, [(torch.randn(3),) for _ in range(4)], records=1, graphs=1, hits=3, breaks=0)
