# magpy-test: refused natively
# Identity between two arguments (`a is b`) and tensor subclasses with
# __torch_function__: a record made with distinct objects must not serve
# the same object twice, and one made with a plain tensor must not serve a
# subclass (whose __torch_function__ changes what operators do).
import torch

import magpy


def same_or_sum(a, b):
    return a * 2 if a is b else a + b


class Doubling(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        return out * 2 if func is torch.Tensor.add else out


def plus_one(x):
    return x.add(1)


f = magpy.compile(same_or_sum)
x, y = torch.ones(2), torch.zeros(2)
for a, b in [(x, y), (x, x), (x, y), (y, y)]:
    assert torch.equal(f(a, b), same_or_sum(a, b)), (a, b)

g = magpy.compile(plus_one)
plain = torch.ones(2)
sub = torch.ones(2).as_subclass(Doubling)
for t in [plain, sub, plain, sub]:
    got, want = g(t), plus_one(t)
    assert torch.equal(got.as_subclass(torch.Tensor), want.as_subclass(torch.Tensor)) and type(got) is type(want), (got, want)
