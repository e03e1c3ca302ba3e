# magpy-test: refused natively
# An iterator the call is given: a list's iterator, or a map object whose
# function appends to the program's list. Iterating it reads values and
# advances a position no record holds, and runs map's function unseen: a
# replayed call once returned the first call's sum for other values and
# appended nothing. The call breaks the graph and runs as Python.
import torch

import magpy


def total(x, it):
    for v in it:
        x = x + v
    return x


def count(x, it):
    return x + sum(1 for _ in it)


def summed(x, it):
    return x + sum(it)


compiled = magpy.compile(total)
for values in ([1, 2], [5, 6], [1, 2]):
    it = iter(values)
    assert torch.equal(compiled(torch.zeros(1), it), total(torch.zeros(1), iter(values)))
    assert list(it) == [], "the iterator is exhausted, as eagerly"

log = []
compiled = magpy.compile(count)
for i in range(3):
    assert compiled(torch.zeros(1), map(log.append, [1, 2])).item() == 2
    assert log == [1, 2] * (i + 1), log
compiled = magpy.compile(summed)
for values in ([1, 2], [5, 6]):
    it = iter(values)
    assert torch.equal(compiled(torch.zeros(1), it), summed(torch.zeros(1), iter(values)))
    assert list(it) == []
print("ok")
