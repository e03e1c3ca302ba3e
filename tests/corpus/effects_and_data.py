# magpy-test: breaks
# Effects a record must replay or refuse: delattr() on the module (the mock
# deletes the attribute, natively too), a buffer read through .data (a
# native state path), and Tensor.apply_ (a Python callback writing the
# tensor: a graph break).
import torch
import torch.nn as nn

import magpy


class Once(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = 1.0
        self.register_buffer("pe", torch.arange(4.0))

    def forward(self, x):
        if hasattr(self, "pending"):
            delattr(self, "pending")
            return x + 1
        return x + self.pe.data


def doubled(x):
    x.apply_(lambda v: v * 2)
    return x + 1


a, b = Once(), Once()
once = magpy.compile(a)
for _ in range(3):
    assert torch.equal(once(torch.ones(4)), b(torch.ones(4)))
    assert hasattr(a, "pending") == hasattr(b, "pending")

twice = magpy.compile(doubled)
for _ in range(2):
    x, y = torch.ones(2), torch.ones(2)
    assert torch.equal(twice(x), doubled(y)) and torch.equal(x, y)
