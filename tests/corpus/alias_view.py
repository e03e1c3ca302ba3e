# Two arguments that alias at capture (a tensor and a view of it with the
# same geometry) are two graph inputs: the next call may pass unrelated
# tensors, and must not compute with the first one twice.
import torch
import magpy

def fn(a, b):
    return a + b * 2

f = magpy.compile(fn)
x = torch.arange(3.0)
r1 = f(x, x.view(3))
assert torch.equal(r1, fn(x, x.view(3)))
y, z = torch.ones(3), torch.zeros(3)
r2 = f(y, z)
assert torch.equal(r2, fn(y, z)), (r2, fn(y, z))
