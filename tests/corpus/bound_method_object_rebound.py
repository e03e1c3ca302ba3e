# A method bound to a list or a buffer (push = A.append, self.bump =
# self.count.add_), where the function also reads the object by its name
# before calling the method. The script then rebinds the name to a new
# object (or the method to another object): eager, the method still writes
# the object it is bound to. A record must guard that the name and the
# method's __self__ are one object, else a replayed call writes the new one.
import torch

import magpy

A, B = [], []
push = A.append


def g(x):
    n = len(A)
    push(n)
    return x + len(A)


compiled = magpy.compile(g)
assert compiled(torch.zeros(1)).item() == 1.0 and A == [0]
old, A = A, []  # a new global A; push still appends to the old list
assert compiled(torch.zeros(1)).item() == 0.0 and A == [] and old == [0, 0], (A, old)
A = old
A.clear()
push = B.append  # the method now bound to another list
assert compiled(torch.zeros(1)).item() == 0.0 and A == [] and B == [0], (A, B)


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.bump = self.count.add_  # bound to the first buffer

    def forward(self, x):
        y = x * self.count
        self.bump(1)
        return y


m = Counter()
compiled = magpy.compile(m)
compiled(torch.ones(1))
old = m.count
m.count = torch.zeros(())  # a new buffer; bump still adds to the old one
old.zero_()
r = compiled(torch.ones(1))
assert r.item() == 0 and m.count.item() == 0 and old.item() == 1, (r, m.count, old)
print("ok")
