# magpy-test: refused natively
# Between calls the script makes one state path name the very list that
# another path names (M[0] = L). The call log can only write a copy there,
# so natively M[0] would be another list and the calls after would answer
# from two lists where the script has one: the logged change is a
# placeholder no guard accepts, and native replay refuses those calls
# (the JIT, on the live objects, follows the script).
import torch

import magpy

L = []
M = [[0]]


def f(x):
    L.append(1)
    return x + len(M[0])


compiled = magpy.compile(f)
assert compiled(torch.zeros(1)).item() == 1.0
L[:] = [0]
M[0] = L
assert compiled(torch.zeros(1)).item() == 2.0  # L.append made M[0] longer too
assert compiled(torch.zeros(1)).item() == 3.0
print("ok")
