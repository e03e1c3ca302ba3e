# A forward hook added after the first call changes the program.
import torch
import torch.nn as nn
from harness import same

import magpy

net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
f = magpy.compile(net)
x = torch.randn(2, 3)
assert same(f(x), net(x))
assert same(f(x), net(x))
net[0].register_forward_hook(lambda module, inputs, output: output * 10)
assert same(f(x), net(x))
stats = f._magpy_stats()
assert stats["records"] == 2 and stats["hits"] == 1, stats
