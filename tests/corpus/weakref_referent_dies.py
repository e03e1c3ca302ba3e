# A module reads an object through a weak reference; between calls the
# object changes, dies (ref() gives None: the other branch), and a new
# one takes its place. magpy holds no strong reference to the referent
# (the call log observes it through a weak reference), so the script's
# ref() dies when eager's does. Compared with eager at every call.
import gc
import weakref

import torch

from harness import compare


class Obj:
    def __init__(self, v):
        self.t = torch.full((3,), v)
        self.k = v


class Reader(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.objs = [Obj(2.0)]  # the one strong reference
        self._ref = weakref.ref(self.objs[0])

    def forward(self, x):
        o = self._ref()
        if o is None:
            return x * 0 - 5
        return x * o.t + o.k


def change(i, subject, reference):
    for m in (subject, reference):
        if i == 2:
            m.objs[0].k = 3.0
            m.objs[0].t.mul_(2)
        if i == 3:
            m.objs.clear()
            gc.collect()
        if i == 5:
            m.objs.append(Obj(9.0))
            m._ref = weakref.ref(m.objs[0])


compare(Reader, [(torch.full((3,), float(i)),) for i in range(7)], between=change, breaks=0)
