# Gradient accumulation: the step takes an `update` flag; calls without it
# only accumulate, calls with it also update the weights by a loop over
# self.parameters(). The flag makes two records; the second reads the
# submodules through self._modules (parameters() walks it) where the first
# read them as attributes. The function's state merges what each record
# first read, keeping one object reached by two spellings one object (an
# identity guard `self._modules['l1'] is self.l1` holds natively too), so
# the logged calls replay natively. The same happens with no training at
# all (Flag below). The JIT is checked against eager at every call.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Accumulate(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 8)
        self.l2 = nn.Linear(8, 3)

    def forward(self, x, y, update):
        loss = F.cross_entropy(self.l2(torch.relu(self.l1(x))), y) / 2
        loss.backward()
        if update:
            with torch.no_grad():
                for p in self.parameters():
                    p.sub_(0.1 * p.grad)
                    p.grad = None
        return loss.detach(), self.l1.weight.detach().clone()


class Flag(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 2)

    def forward(self, x, flag):
        y = self.l1(x)
        if flag:
            y = y * len(list(self.parameters()))
        return y.detach()


torch.manual_seed(1)
calls = [(torch.randn(5, 6), torch.randint(0, 3, (5,)), i % 2 == 1) for i in range(6)]
compare(Accumulate, calls, records=2, breaks=0)
compare(Flag, [(torch.ones(3), i % 2 == 1) for i in range(4)], records=2, breaks=0)
