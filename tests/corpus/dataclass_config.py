# A dataclass config object: its fields are guarded as attributes.
from dataclasses import dataclass

import torch
import torch.nn as nn
from harness import compare


@dataclass
class Config:
    hidden: int = 8
    act: str = "gelu"
    eps: float = 1e-5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = Config()
        self.lin = nn.Linear(4, self.cfg.hidden)
        self.norm = nn.LayerNorm(self.cfg.hidden, eps=self.cfg.eps)

    def forward(self, x):
        h = self.norm(self.lin(x))
        return nn.functional.gelu(h) if self.cfg.act == "gelu" else torch.relu(h)


def flip(i, a, b):
    if i == 2:
        a.cfg.act = b.cfg.act = "relu"


with torch.no_grad():
    compare(Block, [(torch.randn(2, 4),)] * 4, between=flip, records=2, graphs=2, hits=2, breaks=0)
