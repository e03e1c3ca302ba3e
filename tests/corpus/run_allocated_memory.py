# magpy-capture-args: --log-calls 8
"""A write copies, first, what the call's entry state had on the memory
written; memory an operator of the run allocated has none of it. Here the
program writes both: activations it made (copied nothing) and the state's
buffer, reached through a view, through detach(), through as_strided
and through out=.
Every call must give eager's results and leave eager's state.
"""
import copy

import torch

import magpy

nn = torch.nn


class Accumulate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("acc", torch.zeros(6))

    def forward(self, x):
        h = torch.relu(self.lin(x))  # memory the run allocated
        h.mul_(2)
        self.acc.view(2, 3).add_(h.sum(0).view(2, 3))  # the state, through a view
        self.acc.detach().mul_(0.5)  # another tensor on the state's memory
        torch.as_strided(self.acc, (3,), (2,)).sub_(0.25)
        torch.add(self.acc, h[0], out=self.acc)
        torch.add(h, 1, out=h)
        return h + self.acc


torch.manual_seed(0)
subject = Accumulate()
reference = copy.deepcopy(subject)
compiled = magpy.compile(subject)
for i in range(5):
    x = torch.randn(4, 6)
    with torch.no_grad():
        got, want = compiled(x), reference(x)
    assert torch.allclose(got, want, atol=1e-6), f"call {i}: differs from eager by {(got - want).abs().max()}"
    assert torch.allclose(subject.acc, reference.acc, atol=1e-6), f"call {i}: the state differs: {subject.acc} vs {reference.acc}"
