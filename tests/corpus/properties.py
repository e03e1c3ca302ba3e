# @property getters run as traced Python: a scalar and a tensor property.
import torch
import torch.nn as nn
from harness import compare


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw = nn.Parameter(torch.randn(3))
        self.temperature = 2.0

    @property
    def inv_temperature(self):
        return 1.0 / self.temperature

    @property
    def weight(self):
        return torch.tanh(self.raw) * self.inv_temperature

    def forward(self, x):
        return x * self.weight


compare(Scaled, [(torch.randn(3),)] * 3, records=1, graphs=1, hits=2, breaks=0)
