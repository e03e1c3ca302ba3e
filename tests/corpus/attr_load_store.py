# Attributes of plain Python objects read and written inside the function.
import torch
from harness import compare


class Config:
    def __init__(self):
        self.width = 4
        self.gain = 1.5


class Counter:
    def __init__(self):
        self.cfg = Config()
        self.calls = 0
        self.last = None

    def __call__(self, x):
        self.calls = self.calls + 1
        y = x[:, : self.cfg.width] * self.cfg.gain
        self.last = y
        return y


compare(Counter, [(torch.randn(2, 6),)] * 4, records=4, graphs=4, hits=0, breaks=0)
