# Training through the JIT: compiled forward, backward and optimizer steps
# in Python. Parameters change in place between calls (their metadata does
# not), so the record keeps being used, and training matches eager exactly.
import torch
import torch.nn as nn

import magpy


def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


a, b = make(), make()
fa = magpy.compile(a)
opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
torch.manual_seed(1)
data = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(5)]
for x, y in data:
    for model, f, opt in ((a, fa, opt_a), (b, b, opt_b)):
        opt.zero_grad()
        loss = ((f(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
for pa, pb in zip(a.parameters(), b.parameters()):
    assert torch.equal(pa, pb), "training through the compiled forward differs from eager"
stats = fa._magpy_stats()
assert stats["records"] == 1 and stats["hits"] == 4, stats
