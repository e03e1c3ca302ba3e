# nn.ModuleDict iteration, items() and key lookups.
import torch
import torch.nn as nn
from harness import compare


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["both"] = self.heads["cls"](x).sum(-1, keepdim=True) + out["reg"]
        return out


compare(Heads, [(torch.randn(2, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)
