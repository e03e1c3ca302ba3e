# magpy-test: breaks
# print() is dynamic: the function runs as Python around it, and the module
# calls it makes run as captured segments.
import torch
import torch.nn as nn
from harness import compare


class Chatty(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.b = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x):
        h = self.a(x)
        print("hidden norm is a Python float:", round(float(h.norm()), 3) > -1)
        return self.b(h)


stats = compare(Chatty, [(torch.randn(2, 4),)] * 6, records=1, graphs=0, breaks=1, eager=5)
# Call 1 monitors forward as a segment (it breaks too); from call 2 on, the
# module calls forward makes are segments: monitored once, then replayed.
# (self.a and self.b share Module._call_impl: one segment, two records.)
assert stats["segments"] == 2 and stats["segment_graphs"] == 2 and stats["segment_hits"] == 6, stats
