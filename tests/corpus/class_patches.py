# magpy-test: refused natively
# What the interpreter finds on classes for the program (special methods it
# calls implicitly, properties, methods of torch.Tensor, super()) and the
# code of the functions it runs, changed between calls: each change is a
# miss (a new record), never a stale graph.
import torch
import torch.nn as nn
from harness import compare


class Bag:
    def __init__(self):
        self.items = [1.0, 2.0, 3.0]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __rmul__(self, other):
        return other * 2.0

    def __bool__(self):
        return True

    @property
    def scale(self):
        return 3.0


class Base(nn.Module):
    def shift(self, x):
        return x + 1


class Child(Base):
    def __init__(self):
        super().__init__()
        self.bag = Bag()

    def shift(self, x):
        return super().shift(x) * 2

    def forward(self, x):
        y = x * len(self.bag) + self.bag[1]
        y = 2 * self.bag + y
        if self.bag:
            y = y + 1
        y = y * self.bag.scale
        return self.shift(y).relu()



# Both worlds share these classes: each change is made once and seen by both.
def patches(i, subject, reference):
    if i == 1:
        Bag.__len__ = lambda self: 7
    elif i == 2:
        Bag.__getitem__ = lambda self, i: -5.0
    elif i == 3:
        Bag.__rmul__ = lambda self, other: other * 10.0
    elif i == 4:
        Bag.__bool__ = lambda self: False
    elif i == 5:
        Bag.scale = property(lambda self: -1.0)
    elif i == 6:
        Base.shift = lambda self, x: x - 100
    elif i == 7:
        Base.shift.__code__ = (lambda self, x: x * 0.5).__code__


# Every change makes a new record; the call after each change hits it.
calls = [(torch.randn(4),)] * 9
compare(Child, calls, between=patches, records=8, hits=1, breaks=0)


# torch.Tensor's own methods and operators, patched on the class (restored
# at the end).
def scaled(x):
    return (x + x).relu()


original_add, original_relu = torch.Tensor.__add__, torch.Tensor.relu


def tensor_patches(i, subject, reference):
    if i == 1:
        torch.Tensor.relu = lambda self: self * 3
    elif i == 2:
        torch.Tensor.__add__ = lambda self, other: torch.sub(self, other)


try:
    compare(lambda: scaled, [(torch.randn(4),)] * 4, between=tensor_patches, records=3, hits=1, breaks=0)
finally:
    torch.Tensor.__add__, torch.Tensor.relu = original_add, original_relu
