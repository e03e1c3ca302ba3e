# Sizes through Python arithmetic and decisions (MagPy 6.2.1): a size the
# program reads stays a graph value through + - * / // %, unary minus, min,
# max, abs, int(), float() and math.sqrt/ceil/floor, and a comparison it
# decides on is a predicate the record checks (magpy.expect_true). Each
# side of a branch makes one dynamic record; a call whose sizes take the
# other side misses and is monitored, never served a stale result. Every
# call is compared with eager, and the records replay natively (the later
# calls replay shapes no run captured).
import math

import torch
from harness import compare


class ScaledHead(torch.nn.Module):
    """Scales by a length, views with a computed size, branches on a length."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(32, 8)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.proj(x) / t
        if t > 8:
            h = h * 2.0
        h = h.view(b, t // 2, -1)
        return self.head(h) * t


shapes = [(2, 4), (3, 6), (2, 10), (4, 12), (2, 16), (3, 8), (5, 20), (3, 14), (6, 40), (7, 2)]
# t <= 8 and t > 8: two dynamic records serve all ten shapes.
compare(lambda: ScaledHead(), [(torch.randn(b, t, 16),) for b, t in shapes], records=2, monitored=4, hits=6, breaks=0)


def attention(q, k, v):
    # scores scaled by the head size, a span capped by min, an assertion on a remainder
    heads = 2
    d = q.size(-1)
    assert d % heads == 0, "head size must split"
    span = min(max(q.size(1), k.size(1)), 6)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    return torch.softmax(scores, -1) @ v + span, math.ceil(d / 3) * 1.0


qkv = [tuple(torch.randn(2, n, 8) for _ in range(3)) for n in [3, 4, 5, 9, 12, 4]]
# min(n, 6) is a graph value (no decision), math.sqrt(d) of a fixed d: one
# dynamic record, joined at the second length.
compare(lambda: attention, qkv, records=1, monitored=2, hits=4, breaks=0)


def flips(x):
    # the predicate flips between calls: each call must take eager's side
    n = x.shape[0]
    if n % 2 == 0:
        return x * -n
    return x + abs(n - 5) + float(n) / 2 + int(n / 3)


compare(lambda: flips, [(torch.randn(k, 3),) for k in [2, 3, 4, 5, 6, 7, 8, 2, 3]], records=2, monitored=4, hits=5,
        breaks=0)


def floors(x):
    # math.floor and math.ceil of a true division give ints the slices take
    n = x.shape[1]
    half = math.floor(n / 2)
    return x[:, :half].sum(1) + x[:, :math.ceil(n / 2) + 1].sum(1)


compare(lambda: floors, [(torch.randn(2, k),) for k in [6, 10, 8, 12, 14]], records=1, monitored=2, hits=3, breaks=0)


def halves(x):
    # For even n the two slice ends have one value: the record made from
    # even sizes must still take each result size from its own slice's end,
    # or odd sizes would miss.
    n = x.shape[1]
    return x[:, :n // 2].sum(1) * x[:, :n - n // 2].sum(1)


compare(lambda: halves, [(torch.randn(2, k),) for k in [4, 6, 5, 9, 7, 8]], records=1, monitored=2, hits=4, breaks=0)


def equal_sizes(x, y):
    # a comparison of two sizes: the record holds while they are equal
    if x.shape[0] == y.shape[0]:
        return x + y
    return x.sum(0) + y.sum(0)


pairs = [(torch.randn(a, 3), torch.randn(b, 3)) for a, b in [(2, 2), (3, 3), (2, 4), (3, 5), (4, 4), (6, 2)]]
compare(lambda: equal_sizes, pairs, records=2, monitored=4, hits=2, breaks=0)


class Warmup(torch.nn.Module):
    """A lifted number of the state decided on: a predicate, not its value."""

    def __init__(self):
        super().__init__()
        self.step = 1

    def forward(self, x):
        if self.step > 3:
            return x * self.step
        return x - self.step


def next_step(i, compiled, eager):
    compiled.step = eager.step = i + 1


# Step 1 makes a record; step 2 differs in the number, which later runs
# lift: its record (step <= 3) replaces the first; step 4 goes the other
# way and makes the second; steps 5 to 8 replay it.
compare(lambda: Warmup(), [(torch.randn(3),) for _ in range(8)], between=next_step, records=2, monitored=3, hits=5,
        breaks=0)
