# `with torch.no_grad():` inside the compiled function.
import torch
import torch.nn as nn
from harness import compare


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        with torch.no_grad():
            feats = self.enc(x)
        return self.head(feats), feats.requires_grad


compare(Frozen, [(torch.randn(2, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)
