"""An object whose __class__ claims torch.Tensor (as a mock with
spec=Tensor does): isinstance believes it, but it holds no tensor. State
holding one, and an argument that is one, must be treated as the objects
they are; every call gives eager's results.
"""
import copy

import torch

import magpy

nn = torch.nn


class Impostor:
    """Says it is a Tensor; is a plain object with a number."""

    def __init__(self, scale):
        self.scale = scale

    @property
    def __class__(self):
        return torch.Tensor


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.tag = Impostor(2.0)

    def forward(self, x, extra):
        return self.lin(x) * self.tag.scale + extra.scale


torch.manual_seed(0)
subject = Scaled()
reference = copy.deepcopy(subject)
compiled = magpy.compile(subject)
assert isinstance(subject.tag, torch.Tensor)  # what isinstance believes
for i in range(5):
    x = torch.randn(2, 4)
    extra = Impostor(float(i % 2))
    if i == 3:
        subject.tag.scale = reference.tag.scale = 3.0  # state written between calls
    with torch.no_grad():
        got, want = compiled(x, extra), reference(x, extra)
    assert torch.equal(got, want), f"call {i}: differs from eager"
