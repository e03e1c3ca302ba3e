# magpy-test: refused natively
# Capture keeps the name of each callee per class and per builtin
# function, and looks a layer's attributes up natively where its class
# keeps nn.Module's lookup. A program that patches what those depend on
# between calls must still get eager's results: the layer's class takes a
# __getattr__ that supplies an attribute forward reads, a builtin's
# __module__ is set, and the global naming the activation is rebound to
# another builtin. Records of a class patched later run as Python: native
# replay refuses them.
import copy

import torch

import magpy

nn = torch.nn
act = torch.relu


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.gain = 2.0

    def forward(self, x):
        return act(self.lin(x)) * self.gain


torch.manual_seed(0)
subject = Block()
reference = copy.deepcopy(subject)  # one class: patching it patches both
compiled = magpy.compile(subject)
for i in range(8):
    if i == 2:
        del subject.gain, reference.gain
        Block.__getattr__ = lambda self, name: 3.0 if name == "gain" else nn.Module.__getattr__(self, name)
    if i == 4:
        torch.relu.__module__ = "elsewhere"
    if i == 5:
        act = torch.tanh
    if i == 6:
        Block.__getattr__ = lambda self, name: -1.5 if name == "gain" else nn.Module.__getattr__(self, name)
    x = torch.randn(2, 4)
    with torch.no_grad():
        got, want = compiled(x), reference(x)
    assert torch.equal(got, want), f"call {i}: differs from eager by {(got - want).abs().max()}"
