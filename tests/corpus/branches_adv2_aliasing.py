# magpy-capture-args: --log-calls 200
# Joined branches whose sides leave aliases: one side leaves a view of a
# tensor (or the tensor itself), the other a fresh tensor of the same kind
# (dtype, shape, strides, storage offset alike). An in-place write after
# the join, to the view or to the tensor it views, must reach the alias on
# the paths where there is one and only there. The records join (one
# record serves all four combinations of two conditions after two
# captures); every call is compared with eager, and magpy-run replays the
# joined records natively on the logged calls.
import torch
from harness import compare

T, F = True, False
SIDES = [(T, F), (F, T), (F, F), (T, T), (F, F), (T, F), (F, T), (T, T)]
calls = [(torch.arange(9.).reshape(3, 3), torch.tensor(s)) for s in SIDES]


def view_then_base_written():
    # y is row 0 of x on one side, a new row on the other; x is written in
    # place after the join: y sees the write only where it views x.
    def f(x, c):
        x = x + 0
        if c[0]:
            y = x[0]
        else:
            y = x[0] * 2
        if c[1]:
            x = x * 1  # rebinding x: the write below then misses the view
        x.add_(100)
        return y + 0
    return f


compare(view_then_base_written, calls, records=1, graphs=1, breaks=0, monitored=2, hits=6)


def view_written():
    # The write goes to the view: x changes only on the side that left one.
    def f(x, c):
        x = x + 0
        if c[0]:
            y = x[1]
        else:
            y = x[0] * 2
        if c[1]:
            x = x + 1
        y.mul_(5)
        return x, y
    return f


compare(view_written, calls, records=1, graphs=1, breaks=0, monitored=2, hits=6)


def same_or_new():
    # a is x itself on one path, a new tensor on the others: a.add_(1)
    # writes x only on the path (F, F).
    def f(x, c):
        x = x + 0
        a = x
        if c[0]:
            a = x * 1
        if c[1]:
            a = a * 2
        a.add_(1)
        return x, a
    return f


compare(same_or_new, calls, records=1, graphs=1, breaks=0, monitored=2, hits=6)


def conditional_expression():
    # The value of a conditional expression: a view or a new tensor, on the
    # stack; x written in place afterwards.
    def f(x, c):
        x = x + 0
        z = (x[0] if c[0] else x[0] * 2)
        x.add_(100)
        if c[1]:
            x = x + 1
        return x + z
    return f


compare(conditional_expression, calls, records=1, graphs=1, breaks=0, monitored=2, hits=6)
