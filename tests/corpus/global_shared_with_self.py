# magpy-test: refused natively
# One compiled module reaches one list by two roots: a module global it
# appends to, and an attribute of self it reads. A record file keeps a
# module's globals apart from each function's state, so natively the
# attribute would be a copy: the record is refused natively.
import torch

import magpy

LOG = []


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.log = LOG

    def forward(self, x):
        LOG.append(1)
        return x + len(self.log)


model = magpy.compile(Model())
for i in range(4):
    assert model(torch.zeros(1)).item() == i + 1
print("ok")
