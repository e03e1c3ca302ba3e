# for over range, lists, enumerate, zip and dict items; a while loop.
import torch
import torch.nn as nn
from harness import compare

WEIGHTS = {"a": 0.5, "b": 2.0}


class Loops(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = [1.0, 2.0, 3.0]

    def forward(self, x):
        acc = x
        for i in range(3):
            acc = acc + i
        for s in self.scales:
            acc = acc * s
        for i, s in enumerate(self.scales, 1):
            acc = acc - i * s
        for s, t in zip(self.scales, reversed(self.scales)):
            acc = acc + s * t
        for key, w in WEIGHTS.items():
            acc = acc * w if key == "a" else acc + w
        n = 0
        while n < 2:
            acc = acc / 2
            n += 1
        return acc


compare(Loops, [(torch.randn(3),)] * 3, records=1, graphs=1, hits=2, breaks=0)
