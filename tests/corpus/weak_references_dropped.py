# magpy-test: breaks
# A weak reference the call makes breaks it (weakref.ref is native code).
# A monitored call keeps what it touched alive for recording (addresses
# name its values); after the break it lets go, so a weak reference to an
# object or a tensor the program dropped answers None, as in eager. A
# tensor C++ still holds (a view's base) keeps its Python object in eager,
# so its weak reference still answers. Weak references the state holds:
# weak_reference_in_state.py.
import weakref

import torch
from harness import compare

nn = torch.nn


class Scratch:
    def __init__(self, scale):
        self.scale = scale


class Dropper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        s = Scratch(3.0)
        ref = weakref.ref(s)
        y = y * s.scale
        del s
        if ref() is not None:  # eager: freed at `del s`
            y = y + 100.0

        t = y * 2.0
        tref = weakref.ref(t)
        y = y + t
        del t
        if tref() is not None:  # eager: freed at `del t` (no_grad: nothing saved it)
            y = y - 100.0

        base = y + 1.0
        view = base[:, :2]
        bref = weakref.ref(base)
        del base
        if bref() is None:  # eager: the view holds its base's tensor, so its object lives
            y = y * 0.0

        return y, view.sum()


calls = [(torch.randn(3, 4),) for _ in range(4)]
with torch.no_grad():
    compare(Dropper, calls, records=1)
