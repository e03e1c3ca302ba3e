# State the script deletes between calls: a module global that shadowed a
# builtin, an attribute read with a getattr default, an instance attribute
# that shadowed a method, a dict entry. The JIT's guards of absence see
# each deletion; the call log records it as a removal, so native replay
# of the logged calls deletes it too and serves each call with the record
# capture used (a removal not logged left the deleted value in native
# state, and replay served a stale record).
import types

import torch

import magpy
from harness import compare, same

nn = torch.nn


def shifted(x):
    return x + abs(-2.0)


def with_default(x):
    return x + getattr(settings, "offset", 0.5)


def from_table(x):
    return x * table.get("scale", 3.0)


settings = types.SimpleNamespace()
table = {}


def change(i):
    g = globals()
    if i == 1:
        g["abs"] = lambda v: 100.0
        settings.offset = 3.0
        table["scale"] = 5.0
    elif i == 2:
        del g["abs"]
        del settings.offset
        del table["scale"]


compiled = [magpy.compile(f) for f in (shifted, with_default, from_table)]
x = torch.ones(2)
for i in range(4):
    change(i)
    for fn, eager in zip(compiled, (shifted, with_default, from_table)):
        got, want = fn(x), eager(x)
        assert same(got, want), (eager.__name__, i, got, want)


class Shadowed(nn.Module):
    def act(self, x):
        return x.relu()

    def forward(self, x):
        return self.act(x) + 1


def shadow(i, subject, reference):
    for m in (subject, reference):
        if i == 2:
            m.act = torch.sigmoid
        elif i == 4:
            del m.act


with torch.no_grad():
    compare(Shadowed, [(torch.randn(3),) for _ in range(6)], between=shadow)
print("state deleted between calls: every call as eager, natively too")
