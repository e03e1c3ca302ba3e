# f-strings of Python values (names and keys built at run time).
import torch
import torch.nn as nn
from harness import compare


class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.prefix = "layer"
        self.blocks = nn.ModuleDict({f"layer_{i}": nn.Linear(2, 2) for i in range(2)})

    def forward(self, x):
        out = {}
        for i in range(2):
            key = f"{self.prefix}_{i}"
            x = self.blocks[key](x)
            out[f"{key}:{x.shape[-1]:03d}"] = x
        return out


compare(Named, [(torch.randn(1, 2),)] * 3, records=1, graphs=1, hits=2, breaks=0)
