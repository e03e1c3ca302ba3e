# magpy-test: refused natively
# Two compiled modules hold one list: one appends to it, the other reads
# its length. Live that is one list; a record file keeps each compiled
# function's state apart, so natively the reader's copy would never grow
# and it would answer with a stale length. The appender's record is
# refused natively, naming the other path; the JIT follows the script.
import torch

import magpy

shared = []


class Appender(torch.nn.Module):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def forward(self, x):
        self.log.append(1)
        return x + 1


class Reader(torch.nn.Module):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def forward(self, x):
        return x + len(self.log)


appender, reader = magpy.compile(Appender(shared)), magpy.compile(Reader(shared))
for i in range(4):
    appender(torch.zeros(1))
    assert reader(torch.zeros(1)).item() == len(shared) == i + 1
print("ok")
