# magpy-test: refused natively
# self.b is self.a, and two records of one module each read one name: the
# first writes through self.a, the second reads self.b. Each record's
# first read is a snapshot of its own, so the file holds two lists where
# the module has one; the writing record is refused natively.
import torch

import magpy


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = [torch.zeros(2)]
        self.b = self.a

    def forward(self, x, write: bool):
        if write:
            self.a[0] = self.a[0] + 1
            return x
        return x * self.b[0]


model, reference = Model(), Model()
compiled = magpy.compile(model)
for i in range(4):
    for write in (True, False):
        assert torch.equal(compiled(torch.ones(2), write), reference(torch.ones(2), write)), (i, write)
print("ok")
