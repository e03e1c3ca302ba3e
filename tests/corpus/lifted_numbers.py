# Python numbers kept in state that change between calls (MagPy 6.2.1):
# lifted into the graph where the program only computes with them and
# passes them to operators; kept as guarded values where the program
# decides on them. Every call is compared with eager, state included.
import functools

import torch
import magpy
from harness import compare, same


class Scaled:  # a learning-rate-like float, changed by the script between calls
    def __init__(self):
        self.lr = 0.1
        self.w = torch.randn(4)

    def __call__(self, g):
        self.w = self.w - self.lr * g
        return self.w * 2.0


def decay(i, subject, reference):
    for o in (subject, reference):
        o.lr = 0.1 * (0.9 ** i)


compare(Scaled, [(torch.randn(4),)] * 8, between=decay, records=1, monitored=2)


class Window:  # a moving offset in slicing, arange and arithmetic: sizes stay, values move
    def __init__(self):
        self.start = 2  # 0 and 1 would equal other arguments of aten::slice: kept as values

    def __call__(self, x):
        end = self.start + 4
        part = x[:, self.start : end]
        steps = torch.arange(self.start, end, dtype=x.dtype)
        self.start = (self.start + 7) // 2 * 2 - 3
        return part.reshape(-1, 4) * steps, self.start


compare(Window, [(torch.randn(3, 40),)] * 8, records=1, monitored=2)


class Grow:  # a number that changes sizes (a slice length, a view): the size checks catch
    def __init__(self):  # it, and its values stay guarded from then on
        self.n = 2

    def __call__(self, x):
        k = self.n * 2
        head = x[:, : self.n]
        flat = x[:, :k].reshape(-1, k)
        self.n = self.n + 1
        return head.sum(1) + flat.sum(), torch.arange(self.n)


compare(Grow, [(torch.randn(3, 12),)] * 4, records=4, monitored=4)


class Flag:  # an int only ever used as a bool: its value decides, so it stays guarded
    def __init__(self):
        self.on = 0

    def __call__(self, x):
        if self.on:
            return x * 2
        return x + 1


def toggle(i, subject, reference):
    for o in (subject, reference):
        o.on = i % 2 * 5


compare(Flag, [(torch.randn(3),)] * 6, between=toggle, records=2, monitored=2)


class Fill:  # a number written into a tensor: torch makes it tensor data, not an operator's argument
    def __init__(self):
        self.value = 1.0

    def __call__(self, x):
        m = torch.zeros(4)
        m[1:3] = self.value
        self.value = self.value + 1.0
        return x + m


compare(Fill, [(torch.randn(4),)] * 4, records=4, monitored=4)


class Layers:  # the number of operators depends on the value: never lifted
    def __init__(self):
        self.depth = 1

    def __call__(self, x):
        for _ in range(self.depth):
            x = x * 2 + 1
        self.depth = self.depth + 1
        return x


compare(Layers, [(torch.randn(3),)] * 4, records=4)


class Mixed:  # a lifted int and a lifted float in one operator, and a value returned
    def __init__(self):
        self.count = 3
        self.scale = 0.5

    def __call__(self, x):
        self.count += 1
        self.scale = self.scale * 1.5
        return torch.clamp(x * self.scale, max=self.count // 2), self.count / 4


compare(Mixed, [(torch.randn(5) * 10,)] * 6, records=1, monitored=2)


def shared(a, b):  # dims two inputs must share: one call breaks the agreement
    return a + b


compare(lambda: shared, [(torch.randn(2, 3), torch.randn(2, 3)), (torch.randn(4, 3), torch.randn(4, 3)),
                         (torch.randn(5, 3), torch.randn(5, 1)), (torch.randn(6, 3), torch.randn(6, 3))],
        records=2)


class Layer(torch.nn.Module):  # a torch layer reads its own numbers in code magpy does not trace: guarded
    def __init__(self):
        super().__init__()
        self.act = torch.nn.LeakyReLU(0.1)

    def forward(self, x):
        self.act.negative_slope = self.act.negative_slope + 0.1
        return self.act(x) * self.act.negative_slope


def slope(i, subject, reference):
    for o in (subject, reference):
        o.act.negative_slope = [0.1, 0.2, 0.3, 0.1, 0.5][i]


compare(Layer, [(torch.randn(5),)] * 5, between=slope, records=4)


class Chunks:  # the number of results changes with the number: a miss, not an error
    def __init__(self):
        self.n = 1

    def __call__(self, x):
        return x.chunk(self.n, 1)[0]


def rechunk(i, subject, reference):
    subject.n = reference.n = [1, 2, 3, 2][i]


compare(Chunks, [(torch.randn(4, 6),)] * 4, between=rechunk, records=4)  # the record for 2 retires at 3


class Ratio:  # Python raises on a zero divisor after the counter moved: so must the compiled call
    def __init__(self):
        self.step = 0
        self.b = 1

    def __call__(self, x):
        self.step = self.step + 1
        return x * (self.step / self.b)


subject, reference = Ratio(), Ratio()
f = magpy.compile(subject)
for i, b in enumerate([1, 2, 3, 0, 2]):
    subject.b = reference.b = b
    outcomes = []
    for run in (f, reference):
        try:
            outcomes.append(run(torch.ones(2)))
        except ZeroDivisionError:
            outcomes.append("ZeroDivisionError")
    assert same(outcomes[0], outcomes[1]) and subject.step == reference.step, (i, outcomes)


class Partial:  # a number kept inside a native object (functools.partial): the graph cannot see it, so guarded
    def __init__(self):
        self.q = 1.0

    def __call__(self, x):
        return functools.partial(torch.mul, other=self.q)(x)


def requant(i, subject, reference):
    subject.q = reference.q = [1.0, 2.0, 3.0, 4.0][i]


compare(Partial, [(torch.ones(2),)] * 4, between=requant, records=4)


class Pick:  # an operator refuses a lifted index: the call runs as Python (IndexError, after the count moved)
    def __init__(self):
        self.count = 0
        self.i = 0

    def __call__(self, x):
        self.count = self.count + 1
        return x[self.i] * 2


subject, reference = Pick(), Pick()
f = magpy.compile(subject)
x = torch.randn(4, 3)
for i, index in enumerate([0, 1, 2, 9, 3]):
    subject.i = reference.i = index
    outcomes = []
    for run in (f, reference):
        try:
            outcomes.append(run(x))
        except IndexError:
            outcomes.append("IndexError")
    assert same(outcomes[0], outcomes[1]) and subject.count == reference.count, (i, outcomes)
