# List, dict and set comprehensions, and generator expressions.
import torch
import torch.nn as nn
from harness import compare


class Comp(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 2) for _ in range(3)])

    def forward(self, x):
        outs = [head(x) for head in self.heads]
        named = {f"h{i}": o.sum(-1) for i, o in enumerate(outs)}
        sizes = {o.shape[-1] for o in outs}
        total = sum(o.mean() for o in outs)
        return named, total * len(sizes), any(s > 1 for s in sizes)


compare(Comp, [(torch.randn(5, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)
