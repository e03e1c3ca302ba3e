# A float subclass of equal value where a float was captured: its own
# methods run where the float's did not, so only a record made for the
# subclass serves it, in the JIT and natively (the call log holds the
# subclass's name with the value).
import torch
from harness import compare


class Loud(float):
    def __mul__(self, other):
        return other * 100.0


SCALE = {"s": 2.0}


def scaled(x):
    return SCALE["s"] * x


def swap(i, subject, reference):
    if i == 2:
        SCALE["s"] = Loud(2.0)


compare(lambda: scaled, [(torch.ones(2),)] * 4, between=swap, records=2, hits=2)
