# Two parameters' .grad are the same tensor, set from outside before the
# first call; backward accumulates both gradients into it. Under
# magpy-capture this matches eager, but magpy-run rejected the whole record
# file ("the record is corrupted: a scalar or tensor value has elements (a
# tensor only its .grad, a tensor like it)"), refusing every function in
# it. Native replay must refuse these calls with a clear reason (the grads
# share memory and the record writes them in place), or replay them right.
import torch
import torch.nn as nn

from harness import compare


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)
        self.b = nn.Linear(3, 3, bias=False)
        g = torch.zeros(3, 3)
        self.a.weight.grad = g
        self.b.weight.grad = g

    def forward(self, x):
        self.b(self.a(x)).sum().backward()
        with torch.no_grad():
            self.a.weight.sub_(0.1 * self.a.weight.grad)
            self.b.weight.sub_(0.1 * self.b.weight.grad)
        return self.a.weight.detach().clone(), self.b.weight.detach().clone(), self.a.weight.grad.clone()


torch.manual_seed(0)
compare(Shared, [(torch.ones(3),) for _ in range(3)], records=1, breaks=0)
