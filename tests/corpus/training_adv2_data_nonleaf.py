# h.data of a non-leaf, written in place (h.data.mul_(2)) before backward:
# .data has its own version counter, so eager's backward does not notice
# and runs. The first call is monitored and matches; the second call,
# replayed from the record, raised "one of the variables needed for
# gradient computation has been modified by an inplace operation ... is at
# version 1; expected version 0" (as did magpy-run): .data was replayed as
# an alias sharing h's version counter. A replay must not fail where eager
# runs. Such a .data is now a graph break that says why.
# magpy-test: breaks
import torch
import torch.nn as nn

from harness import compare


class DataOfNonLeaf(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.tanh(self.l1(x))
        h.data.mul_(2.0)
        self.l2(h).pow(2).mean().backward()
        for p in self.parameters():
            p.data.add_(p.grad, alpha=-0.1)
            p.grad = None
        return h.detach().clone()


torch.manual_seed(3)
compare(DataOfNonLeaf, [(torch.randn(3, 4),) for _ in range(4)])
