# magpy-test: breaks
# `with torch.no_grad():` inside the compiled function: a graph replays its
# operators in the caller's grad mode, so a run that switches grad mode is a
# graph break, and results (requires_grad included) stay eager's.
import torch
import torch.nn as nn
from harness import compare


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        with torch.no_grad():
            feats = self.enc(x)
        return self.head(feats), feats.requires_grad


compare(Frozen, [(torch.randn(2, 4),)] * 3, records=1, graphs=0, breaks=1)


@torch.no_grad()
def sgd_step(w, g):
    w -= 0.1 * g
    return w.sum()


w, w_ref = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
import magpy

step = magpy.compile(sgd_step)
for _ in range(3):
    got, want = step(w, torch.ones(3)), sgd_step(w_ref, torch.ones(3))
    assert torch.equal(got, want) and got.requires_grad == want.requires_grad
    assert torch.equal(w, w_ref)
