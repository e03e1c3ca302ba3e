# Custom torch.autograd.Function: F.apply(*args) is F.forward(ctx, *args),
# captured into the graph (a no_grad region under grad mode on); where
# autograd would attach the backward, which needs Python, the record is
# forward only, so the JIT runs the call eagerly and training stays right. Each case changes what the record depends on
# between calls: F.forward patched on the class, a subclass with its own
# forward, a scalar argument read from state, an in-place forward
# (mark_dirty), a forward that returns its input.
import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import compare


class Mish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.tanh(F.softplus(x))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        t = torch.tanh(F.softplus(x))
        return grad * (t + x * torch.sigmoid(x) * (1 - t * t))


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha, beta):
        ctx.alpha = alpha
        return x * alpha + beta

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.alpha, None, None


class AddOneInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.add_(1)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Passthrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.alpha = 1
        self.beta = 1

    def forward(self, x):
        y = Mish.apply(self.linear(x))
        y = Scaled.apply(y, self.alpha, self.beta)
        z = AddOneInPlace.apply(y.clone())
        return Passthrough.apply(z) + y


x = torch.randn(2, 4)
calls = [(x,), (torch.randn(2, 4),), (x,)]
with torch.no_grad():
    compare(Block, calls, records=1, graphs=1, breaks=0, hits=2)


def change_state(i, subject, reference):
    for m in (subject, reference):
        if i == 1:
            m.alpha = 2  # a scalar apply passes on: lifted (the record computes with any alpha)
        if i == 2:
            m.beta = 1.0  # same value, another type


with torch.no_grad():
    compare(Block, calls, between=change_state, records=2, graphs=2, breaks=0)


def double(ctx, x):
    return x * 2


def patch_forward(i, subject, reference):
    if i == 1:
        Mish.forward = staticmethod(double)  # both copies share the class


original = Mish.forward
with torch.no_grad():
    compare(Block, calls, between=patch_forward, records=2, graphs=2, breaks=0, hits=1)
Mish.forward = staticmethod(original)


class Swish(Mish):
    @staticmethod
    def forward(ctx, x):
        return x * torch.sigmoid(x)


class Choose(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = Mish

    def forward(self, x):
        return self.fn.apply(x)


def subclass(i, subject, reference):
    if i == 1:
        subject.fn = reference.fn = Swish


with torch.no_grad():
    compare(Choose, calls, between=subclass, records=2, graphs=2, breaks=0, hits=1)

# With grad mode on and arguments that require grad (training), the record
# is forward only: the JIT runs the call eagerly and its backward runs;
# native replay serves the logged calls.
compare(Block, [(x,), (x,)], records=1, graphs=0, breaks=0, eager=1)


class Frozen(Block):
    """Grad mode on, no argument requiring grad: no backward, one graph."""

    def __init__(self):
        super().__init__()
        self.linear.requires_grad_(False)


def unfreeze(i, subject, reference):
    if i == 2:
        subject.linear.requires_grad_(True)
        reference.linear.requires_grad_(True)


compare(Frozen, [(x,), (x,), (x,), (x,)], between=unfreeze, records=2, graphs=1, breaks=0, hits=1, eager=1)
block = Block()
compiled = __import__("magpy").compile(block)
out = compiled(x.requires_grad_())
out.sum().backward()
assert x.grad is not None and block.linear.weight.grad is not None
