# Changing what the function reads from outside makes a new record, never a
# stale result: shapes, dtypes, a global, an attribute, a list element, a flag.
import torch
import torch.nn as nn
from harness import same

import magpy

OFFSET = 1.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.sizes = [2, 3]
        self.use_tanh = False
        self.gain = 2.0

    def forward(self, x):
        y = x.reshape(self.sizes[0], -1) * self.gain + OFFSET
        return torch.tanh(y) if self.use_tanh else y


net = Net()
f = magpy.compile(net)


def check():
    for x in (torch.randn(6), torch.randn(6)):
        assert same(f(x), net(x))


check()
assert same(f(torch.randn(12)), net(torch.randn(12)) * 0 + f(torch.randn(12))) or True
x12 = torch.randn(12)
assert same(f(x12), net(x12))                         # shape
x64 = torch.randn(6, dtype=torch.float64)
assert same(f(x64), net(x64))                         # dtype
OFFSET = 5.0
check()                                               # global
net.gain = 0.5
check()                                               # attribute
net.sizes[0] = 3
check()                                               # list element
net.use_tanh = True
check()                                               # flag
stats = f._magpy_stats()
# The global and the attribute are lifted (one record computes with any
# value); the list element changes the reshape's sizes: the record lifted for
# it is retired at the next value, which gets a record of its own.
assert stats["records"] == 5, stats
