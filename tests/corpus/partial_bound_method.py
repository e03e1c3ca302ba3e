# magpy-test: refused natively
# A functools.partial of a bound method kept on the module itself: the
# record's state leads back to the module (self._f.func.__self__ is self),
# which a record cannot hold, so native replay refuses these calls; the JIT
# guards the partial's function, arguments and keywords, and the method's
# receiver, so each change below makes a new record or keeps a valid one.
import functools

import torch
import torch.nn as nn
from harness import compare


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = 2.0
        self._f = functools.partial(self.helper, 3, b=4)

    def helper(self, a, x, b=1, c=0):
        return x * a * self.w + b + c

    def forward(self, x):
        return self._f(x, c=5) + self._f(x, b=7)


def change(i, subject, reference):
    for m in (subject, reference):
        if i == 2:
            m.w = 3.0  # read through the partial's receiver
        if i == 3:
            m._f = functools.partial(m.helper, 5, b=1)  # other arguments and keywords
        if i == 4:
            m._f = functools.partial(m.helper, 5, b=1)  # equal, another object: still valid


x = torch.randn(4)
# self.w, the partial's positional argument and its keyword b are lifted
# (aten::add's alpha of 1 is Python's own, not b = 1): one record serves.
compare(Scaled, [(x,)] * 5, between=change, records=1, graphs=1, breaks=0, hits=2)
