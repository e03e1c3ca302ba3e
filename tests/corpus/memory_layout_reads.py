# magpy-test: breaks
# Facts about a tensor that no guard holds: its storage offset, its
# address, and whether a tensor from outside that requires grad is a leaf
# (is_leaf, grad_fn). Reading them is a graph break; results stay eager's.
import torch

import magpy


def by_offset(t):
    return t * t.storage_offset()


def by_address(t):
    return t + (1 if t.data_ptr() % 2 == 0 else 2)


def by_leafness(t):
    return t * 2 if t.is_leaf else t * 3


def by_grad_fn(t):
    return t * 2 if t.grad_fn is None else t * 3


base = torch.arange(6.0)
f = magpy.compile(by_offset)
for view in [base[1:3], base[2:4], base[1:3]]:
    assert torch.equal(f(view), by_offset(view))

g = magpy.compile(by_address)
for t in [base, base[1:], base]:
    assert torch.equal(g(t), by_address(t))

w = torch.ones(2, requires_grad=True)
for fn in [by_leafness, by_grad_fn]:
    h = magpy.compile(fn)
    for t in [w, w * 1, w]:
        got, want = h(t), fn(t)
        assert torch.equal(got, want) and got.requires_grad == want.requires_grad, (fn.__name__, got, want)
