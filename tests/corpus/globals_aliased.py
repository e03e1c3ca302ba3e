# magpy-test: refused natively
# Two names of one module for one list and one tensor (A = B = []): one
# compiled function writes through one name, another reads through the
# other. A record file copies module globals per name, so natively they
# are two objects: the writer's records are refused natively, naming the
# other global, rather than let the reader answer from a stale copy.
import torch

import magpy

A = B = []
T = U = torch.zeros(2)


def write(x):
    A.append(1)
    T.add_(1)
    return x + 1


def read(x):
    return x * len(B) + U


compiled_write, compiled_read = magpy.compile(write), magpy.compile(read)
for i in range(4):
    compiled_write(torch.zeros(2))
    assert torch.equal(compiled_read(torch.ones(2)), torch.full((2,), 2.0 * (i + 1)))
print("ok")
