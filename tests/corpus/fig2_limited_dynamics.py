# Paper, Figure 2: a list of dims, self.scale and self.dim read from outside.
import torch
import torch.nn as nn
from harness import compare

DIMS = [1, 0, 2]


class Fig2(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 0.5
        self.dim = 2

    def forward(self, x):
        x = x.permute(*DIMS)
        return torch.softmax(x * self.scale, self.dim)


torch.manual_seed(0)
x = torch.randn(2, 3, 4)
compare(Fig2, [(x,)] * 3, records=1, graphs=1, hits=2, breaks=0)


def change(i, a, b):
    if i == 1:
        a.dim = b.dim = 1  # a changed attribute: softmax takes the dim from the state


compare(Fig2, [(x,)] * 3, between=change, records=1, hits=1)
