# magpy-test: breaks
# Weak references made in the call, and their callbacks (a
# WeakValueDictionary in the state drops its entry in one), run outside
# the program's instructions: the call breaks there. After a break the
# monitor lets go of what it held for recording, so the program sees
# eager's answers at every call: the entry is gone, the callback ran when
# the object was dropped, a dead proxy raises.
import weakref

import torch
from harness import compare

nn = torch.nn


class Scratch:
    def __init__(self, scale):
        self.scale = scale


class Cached(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.cache = weakref.WeakValueDictionary()
        self.log = []

    def forward(self, x):
        s = Scratch(3.0)
        self.cache["s"] = s
        y = self.lin(x) * s.scale
        del s
        if "s" in self.cache:  # eager: the entry left with its value
            y = y + 100.0
        return y, len(self.cache)


class Callback(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.log = []

    def forward(self, x):
        s = Scratch(2.0)
        ref = weakref.ref(s, lambda r: self.log.append("freed"))
        y = self.lin(x) * s.scale
        del s
        if ref() is None:
            y = y + len(self.log)
        return y


class Proxy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        s = Scratch(5.0)
        p = weakref.proxy(s)
        y = self.lin(x) * p.scale
        del s
        try:
            return y * p.scale
        except ReferenceError:  # eager: its referent is gone
            return y + 0.5


calls = [(torch.randn(3, 4),) for _ in range(4)]
with torch.no_grad():
    for make in (Cached, Callback, Proxy):
        compare(make, calls)
