# magpy-test: refused natively
# The function appends a list to itself (L.append(L)). The JIT follows it
# on the live list; a record file cannot hold an object that contains
# itself, so the logged argument holds a placeholder there that no guard
# accepts. The file still loads and native replay refuses the call that
# reads it (it once wrote a record every reader refused as corrupted).
import torch

import magpy

A, B = [1], [1]


def f(x, items):
    items.append(items)
    return x + len(items)


compiled = magpy.compile(f)
for i in range(3):
    assert compiled(torch.zeros(1), A).item() == f(torch.zeros(1), B).item() == i + 2
    assert len(A) == len(B) and all((a is A) == (b is B) for a, b in zip(A, B))
print("ok")
