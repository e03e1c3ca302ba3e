# magpy-test: refused natively
# A compiled module inside another compiled module: both write the inner
# module's counter. Live they share it, so its number is lifted; a record
# file keeps a copy of each function's state, so natively one function
# would not see the other's writes: records that write the shared module
# are refused natively rather than compute with a stale copy.
import torch
from harness import same

import magpy


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1

    def forward(self, x):
        self.k = self.k + 1
        return x * self.k


class Outer(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x) + 1


reference_inner = Inner()
reference = Outer(reference_inner)
inner = magpy.compile(Inner())
outer = magpy.compile(Outer(inner))
x = torch.ones(2)
for i in range(6):
    assert same(inner(x), reference_inner(x)), i
    assert same(outer(x), reference(x)), i
