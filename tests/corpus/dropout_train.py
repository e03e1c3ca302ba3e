# Random operators (dropout in training mode) replay as random operators: with
# the generator seeded alike, replayed calls draw exactly what eager draws.
import torch
import torch.nn as nn
from harness import compare


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(torch.relu(self.lin(x))) + torch.rand_like(x) * 0


with torch.no_grad():
    compare(lambda: Noisy().train(), [(torch.ones(4, 8),)] * 4, reseed=True, records=1, hits=3)
