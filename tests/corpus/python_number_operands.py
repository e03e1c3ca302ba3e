"""Python floats as operands of tensor arithmetic (x * 0.1): Python passes
them as float64 wrapped numbers, which replay casts once to the
operator's dtype where the kernel would cast them on every call. The
values here are ones float32 does not hold exactly, on float32, float64,
int and half tensors, on either side of the operator.
Every call must give eager's results bit for bit.
"""
import copy

import torch

import magpy

nn = torch.nn


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)
        self.scale = 0.1
        self.shift = 1e-40  # a float32 subnormal

    def forward(self, x, counts, wide, half):
        y = self.lin(x) * self.scale + 0.3
        y = y / 3.3 - self.shift
        y = torch.sub(y, 2.7, alpha=1.5)
        y = torch.mul(0.7, y)  # the number first: Tensor.__rmul__
        z = counts * 0.1 + counts / 7.0  # int tensors: float32 results
        w = wide * 0.1 - 1.0 / 3.0  # float64 stays float64
        h = half * 0.1 + 0.3  # float16: the kernels read the double
        return y, z, w, h


torch.manual_seed(0)
subject = Mixed()
reference = copy.deepcopy(subject)
compiled = magpy.compile(subject)
for i in range(6):
    inputs = (torch.randn(3, 5), torch.randint(-50, 50, (3, 5)), torch.randn(3, 5, dtype=torch.float64),
              torch.randn(3, 5).half())
    with torch.no_grad():
        got, want = compiled(*inputs), reference(*inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"call {i}, result {k}: dtype {g.dtype} vs eager's {w.dtype}"
        assert torch.equal(g, w), f"call {i}, result {k}: differs from eager by {(g.double() - w.double()).abs().max()}"
