# A parameter is frozen (requires_grad_(False)) between calls and later
# unfrozen. Under magpy-capture the guard on requires_grad misses and a
# second record is made, matching eager. The toggles are state changes the
# call log keeps (a frozen weight must not be updated); magpy-run applies
# them to the same tensors (updates in place), so each call replays with
# the record capture used.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.net.parameters():
                if p.grad is not None:
                    p.add_(p.grad, alpha=-0.1)
                    p.grad = None
        return loss.detach()


def freeze(i, a, b):
    for m in (a, b):
        if i == 2:
            m.net[0].weight.requires_grad_(False)
        if i == 4:
            m.net[0].weight.requires_grad_(True)


torch.manual_seed(1)
calls = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(6)]
compare(Step, calls, between=freeze, records=2, breaks=0)
