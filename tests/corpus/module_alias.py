# magpy-test: refused natively
# A global that names a module (`backend = math`, switched to another
# module or namespace between calls, as numpy/torch backend switches do):
# the record guards the global itself, not only the module it first named.
# Natively the namespace's lambda has no value to check: refused.
import cmath
import math
import types

import torch
from harness import compare

backend = math


def scale(x):
    return x * abs(backend.sqrt(4.0))


def switch(i, subject, reference):
    global backend
    if i == 2:
        backend = types.SimpleNamespace(sqrt=lambda v: v * 3)
    elif i == 3:
        backend = cmath
    elif i == 4:
        backend = math


compare(lambda: scale, [(torch.ones(2),)] * 6, between=switch, records=3, hits=3)
