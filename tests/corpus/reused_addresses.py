# A global rebound to a new object that takes the freed old one's address
# (g = None; g = B(2.0): CPython reuses the block). The call log must see
# the change: it keeps what it compared alive, so no new object can look
# like the old one, and native replay of the log serves the call with the
# record made for the new object's class, not the old one's.
import torch
from harness import compare


class Plain(float):
    pass


class Loud(float):
    def __mul__(self, other):
        return other * 100.0

    __rmul__ = __mul__


g = Plain(2.0)


def scaled(x):
    return g * x


def rebind(i, subject, reference):
    global g
    if i == 1:
        g = None
        g = Loud(2.0)
    elif i == 3:
        g = None
        g = Plain(2.0)


compare(lambda: scaled, [(torch.ones(3),)] * 5, between=rebind, records=2, hits=3)
