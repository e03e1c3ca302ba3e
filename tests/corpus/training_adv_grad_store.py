# loss.backward() when a leaf's .grad is None at entry stores the gradient
# into .grad, and the call returns with it set. Replayed calls must leave
# .grad set as eager does: (1) grads set to None from outside between
# calls, (2) zero_grad(set_to_none=True) at the start of the step (grads
# from the previous call must not survive), (3) a leaf argument's x.grad.
import torch
import torch.nn as nn
import torch.nn.functional as F

import magpy
from harness import compare


class Step(nn.Module):
    def __init__(self, zero_first):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        self.zero_first = zero_first

    def forward(self, x, y):
        if self.zero_first:
            self.net.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        return loss.detach()


def set_none(i, a, b):
    for m in (a, b):
        m.net.zero_grad(set_to_none=True)


torch.manual_seed(1)
calls = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
compare(lambda: Step(False), calls, between=set_none)   # (1)
compare(lambda: Step(True), calls)                       # (2)


# (3) a leaf argument that requires grad: x.grad after the call
def grad_of_input(w, x):
    (w * x).sum().backward()
    return w.grad is None


w_got, w_want = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
f = magpy.compile(grad_of_input)
for i in range(3):
    x = torch.full((3,), float(i + 1))
    w_got.grad = None
    w_want.grad = None
    assert f(w_got, x) == grad_of_input(w_want, x)
    assert w_got.grad is not None and torch.equal(w_got.grad, w_want.grad), f"call {i}: w.grad {w_got.grad} != {w_want.grad}"
