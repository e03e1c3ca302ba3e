"""One small model captured in variants that each differ from "base" in
one way, for the golden tests of magpy-inspect diff:

    base     a Linear layer, ReLU, scaled by the global SCALE, batch 2
    shape    batch 4 instead of 2
    global   SCALE = 0.5 instead of 1.0
    layer    a second Linear layer after the first
    weight   one weight of the first layer changed
    batches  a second call at batch 4: one dynamic record (batch s0)
"""
import sys

import torch

import magpy

variant = sys.argv[1] if len(sys.argv) > 1 else "base"
SCALE = 0.5 if variant == "global" else 1.0


class Net(torch.nn.Module):
    def __init__(self, extra):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.extra = torch.nn.Linear(4, 4) if extra else None

    def forward(self, x):
        y = torch.relu(self.fc(x)) * SCALE
        if self.extra is not None:
            y = self.extra(y)
        return y


torch.manual_seed(0)
x = torch.randn(4 if variant == "shape" else 2, 4)
torch.manual_seed(1)
net = Net(extra=variant == "layer")
if variant == "weight":
    with torch.no_grad():
        net.fc.weight[0, 0] += 1.0
compiled = magpy.compile(net)
second = torch.randn(4, 4, generator=torch.Generator().manual_seed(2)) if variant == "batches" else x
for call in (x, second):
    out = compiled(call)
    assert torch.equal(out, net(call)), "compiled result differs from eager"
