# Random operators (dropout in training mode) replay as random operators: with
# the generator seeded alike, replayed calls draw exactly what eager draws.
import torch
import torch.nn as nn
from harness import compare


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(torch.relu(self.lin(x))) + torch.rand_like(x) * 0


def reseed(i, a, b):
    torch.manual_seed(100 + i)


calls = [(torch.ones(4, 8),)] * 4
subject_first = []
with torch.no_grad():
    import magpy
    torch.manual_seed(0)
    a = Noisy().train()
    torch.manual_seed(0)
    b = Noisy().train()
    f = magpy.compile(a)
    for i, (x,) in enumerate(calls):
        torch.manual_seed(100 + i)
        got = f(x)
        torch.manual_seed(100 + i)
        want = b(x)
        assert torch.equal(got, want), f"call {i}"
stats = f._magpy_stats()
assert stats["records"] == 1 and stats["hits"] == 3, stats
