# magpy-capture-args: --log-calls 20
# A training step that takes the model and its optimizer as arguments:
# step(model, opt, x, y) with AdamW under a cosine schedule. The call log
# keeps what the records read of the arguments through every path that
# reaches an object (a parameter is args[0]._modules['0'].weight,
# ._parameters['weight'] and a key of args[1].state), the optimizer's
# state dict keyed by those parameters, and each parameter's .grad, so
# every logged step replays natively. Compared with eager at every step.
import torch
import torch.nn as nn
import torch.nn.functional as F

import magpy


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-2)
    return model, opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


(m, o, s), (m2, o2, s2) = make(), make()
compiled = magpy.compile(step)
torch.manual_seed(1)
for i in range(10):
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    got, want = compiled(m, o, x, y), step(m2, o2, x, y)
    assert torch.equal(got, want), (i, got, want)
    for p, q in zip(m.parameters(), m2.parameters()):
        assert torch.equal(p, q), i
    s.step()
    s2.step()
stats = compiled._magpy_stats()
assert stats["records"] == 2 and stats["breaks"] == 0, stats
print("OK")
