# Leaves hold a .grad tensor before the first call (zero_grad(set_to_none=
# False), grads left from an earlier step): backward adds into them in
# place. Under magpy-capture this matches eager; the record must also keep
# those .grad tensors as the state it first read, so that magpy-run can
# replay the logged calls natively (it must not stop at "no record matches:
# ...weight.grad expected tensor, got None").
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        self.net.zero_grad(set_to_none=False)
        for p in self.net.parameters():
            p.grad = torch.zeros_like(p)

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()          # grads accumulate across calls
        return loss.detach()


torch.manual_seed(1)
calls = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
compare(Step, calls, records=1, hits=3, breaks=0)
