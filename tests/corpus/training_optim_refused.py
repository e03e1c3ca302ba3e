# magpy-test: refused natively
# magpy-capture-args: --log-calls 100
# Identity the call log cannot carry: between calls the script makes one
# parameter's momentum buffer the same tensor as another's. The JIT
# follows it (compared with eager at every call); a record file would hold
# two tensors where the script has one, so the logged update is a
# placeholder no guard accepts and native replay refuses the calls after
# it (before, it replayed them on two buffers and gave other numbers).
# containers_refused_key_argument.py: the same for a call's argument.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
        self._opt = torch.optim.SGD(self.net.parameters(), lr=0.1, momentum=0.9)

    def forward(self, x, y):
        self._opt.zero_grad()
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        self._opt.step()
        return loss.detach()


def share_buffers(i, subject, reference):
    if i == 3:
        for m in (subject, reference):
            state = m._opt.state
            state[m.net[2].weight]["momentum_buffer"] = state[m.net[0].weight]["momentum_buffer"]


torch.manual_seed(0)
data = [(torch.randn(5, 4), torch.randint(0, 2, (5,))) for _ in range(6)]
compare(Step, data, between=share_buffers, breaks=0)
