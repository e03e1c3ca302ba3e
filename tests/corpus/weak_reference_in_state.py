# magpy-test: breaks
# A weak reference the state holds, whose referent the call drops from the
# state: eager frees the referent there, and the reference answers None
# from then on. A monitored call keeps what it touched alive until it
# returns (addresses name its values); before the program uses a weak
# reference whose referent nothing but the monitor holds any more, the
# referent's weak references are cleared, as its freeing would have, and
# the call breaks (no record follows what freeing does to the state's
# reference). Every call gives eager's results. (Weak references the call
# makes break it where they are made: weak_references_dropped.py.)
import weakref

import torch
from harness import compare

nn = torch.nn


class Scratch:
    def __init__(self, scale):
        self.scale = scale


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.items = [Scratch(2.0)]
        self._ref = weakref.ref(self.items[0])

    def forward(self, x):
        y = self.lin(x)
        held = self._ref()
        if held is not None:
            y = y * held.scale
        del held
        self.items.clear()
        if self._ref() is None:  # eager: the list held it last
            y = y + 1.0
        return y


def rearm(i, subject, reference):
    for m in (subject, reference):
        m.items.append(Scratch(2.0))
        m._ref = weakref.ref(m.items[0])


calls = [(torch.randn(3, 4),) for _ in range(4)]
with torch.no_grad():
    compare(Holder, calls, between=lambda i, s, r: i and rearm(i, s, r))
