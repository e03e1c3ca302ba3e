# A .grad set inside the step to a parameter's own storage (p.grad =
# q.detach()): backward then accumulates into q in place. Eager does so;
# the record must treat backward's accumulation as a write of q, and keep q
# as the call first read it. magpy-capture kept q's value at the call's
# exit, so magpy-run replayed every logged call wrong (MISMATCH at call 0).
import torch
import torch.nn as nn

from harness import compare


class IntoParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Linear(4, 4)

    def forward(self, x):
        w0 = [p.detach().clone() for p in self.parameters()]
        self.l1.bias.grad = self.l2.bias.detach()      # l1.bias's gradient lands in l2.bias
        self.l2(torch.tanh(self.l1(x))).pow(2).mean().backward()
        with torch.no_grad():
            self.l1.weight.sub_(0.1 * self.l1.weight.grad)
        self.zero_grad(set_to_none=True)
        return w0


class SelfGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x):
        w0 = self.lin.weight.detach().clone()
        self.lin.weight.grad = self.lin.weight.detach()  # backward adds into the weight itself
        self.lin(x).sum().backward()
        self.zero_grad(set_to_none=True)
        return w0


torch.manual_seed(3)
compare(IntoParam, [(torch.randn(3, 4),) for _ in range(4)], records=1, breaks=0)
compare(SelfGrad, [(torch.ones(3),) for _ in range(3)], records=1, breaks=0)
