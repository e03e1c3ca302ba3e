# magpy-capture-args: --log-calls 200
# Python a side reads is guarded on the paths through that side only, and
# joined records keep those guards: a side that multiplies by an attribute,
# a config dict's entry or runs a dropout module (its training flag) joins
# the other side's record; when the value changes between calls, a call
# taking that side must not replay the old value. Random numbers drawn in
# one side and after the join come out as eager draws them (compare
# reseeds before each call). Every call is compared with eager; magpy-run
# replays the logged calls natively.
import torch
import torch.nn as nn
from harness import compare

T, F = True, False
CONFIG = {"k": 2}


class ReadsInSide(nn.Module):
    def __init__(self, what):
        super().__init__()
        self.what = what
        self.scale = 2
        self.drop = nn.Dropout(0.5)

    def forward(self, x, c):
        if c[0]:
            if self.what == "attr":
                x = x * self.scale
            elif self.what == "config":
                x = x * CONFIG["k"]
            else:
                x = self.drop(x)
        else:
            x = x - 1
        return x + 1


def change(i, a, b):
    # Before call 4: new values for what the then side reads.
    if i == 4:
        for m in (a, b):
            m.scale = 5
            m.eval()
        CONFIG["k"] = 7


SIDES = [(T,), (F,), (T,), (F,), (T,), (F,), (T,), (F,)]
calls = [(torch.arange(4.) + i, torch.tensor(s)) for i, s in enumerate(SIDES)]
# Calls 0-1 make and join the first record; call 4 misses on the changed
# value (a guard of the then side) and makes a second record, which call
# 5 joins with its else side.
for what in ("attr", "config", "training"):
    CONFIG["k"] = 2
    compare(lambda: ReadsInSide(what), calls, between=change, reseed=True,
            records=2, graphs=2, breaks=0, monitored=4, hits=4)


def random_in_one_side():
    def f(x, c):
        if c[0]:
            x = x + torch.rand(3)
        else:
            x = x - 1
        return x + torch.rand(3)
    return f


calls = [(torch.arange(3.), torch.tensor([s])) for s in [T, F, F, T, T, F, T, F]]
compare(random_in_one_side, calls, reseed=True, records=1, graphs=1, breaks=0, monitored=2, hits=6)
