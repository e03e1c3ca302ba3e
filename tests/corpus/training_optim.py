# magpy-capture-args: --log-calls 80
# torch.optim inside the compiled step: optimizers keep their state in a
# dict keyed by the parameters themselves (state[p]), which access paths
# name by the parameter's own path (G['opt'].state[@path]). Every call is
# compared with eager: results, weights and gradients; the script changes
# the optimizer between calls where a record keyed by parameters could go
# stale: its state reset (training_optim_adv.py has more changes, and the
# programs that break or that native replay refuses).
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


def net():
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


class Step(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.net = net()
        self._opt = torch.optim.SGD(self.net.parameters(), lr=0.1, **options)

    def forward(self, x, y):
        self._opt.zero_grad()
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        self._opt.step()
        return loss.detach()


class Momentum(Step):
    def __init__(self):
        super().__init__(momentum=0.9, weight_decay=1e-3)


class Nesterov(Step):
    def __init__(self):
        super().__init__(momentum=0.8, nesterov=True)


class Plain(Step):
    def __init__(self):
        super().__init__()


class OwnOptimizer(nn.Module):
    """An optimizer written in the script: `p not in self.state`, and a
    per-parameter scale in a dict keyed by the parameters."""

    def __init__(self):
        super().__init__()
        self.net = net()
        self._state = {}
        self._scale = {p: 0.5 + 0.1 * i for i, p in enumerate(self.net.parameters())}

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.net.parameters():
                if p not in self._state:
                    self._state[p] = torch.zeros_like(p)
                buf = self._state[p]
                buf.mul_(0.9).add_(p.grad)
                p.sub_(0.1 * self._scale[p] * buf)
                p.grad = None
        return loss.detach()


def reset_state(i, subject, reference):
    if i == 3:  # as after opt.state.clear(): the first record holds again
        for m in (subject, reference):
            m._opt.state = defaultdict(dict)


torch.manual_seed(0)
data = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(7)]
compare(Momentum, data, records=2, graphs=2, breaks=0, hits=5)
compare(Nesterov, data, records=2, graphs=2, breaks=0, hits=5)
compare(Plain, data, records=2, graphs=2, breaks=0, hits=5)
# zero_grad left zeros where the first call found None: a third record
compare(Momentum, data, between=reset_state, records=3, graphs=3, breaks=0, hits=4)
compare(OwnOptimizer, data, records=2, graphs=2, breaks=0, hits=5)
