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


# self.calls changes on every call: lifted after the first miss, so one
# record serves all 20 calls (self.calls + 1 computed in the graph).
compare(Counter, [(torch.randn(2, 6),)] * 20, records=1, graphs=1, monitored=2, breaks=0)
