# magpy-capture-args: --log-calls 200
# Sides that leave tensors of other kinds in a variable, though of one
# dtype and shape at the start: a transposed view (other strides), or the
# same tensor object changed in place by a side (unsqueeze_, t_, resize_,
# as_strided_). Python after the branch can read strides, contiguity or the
# shape, so such records stay apart (one per path of the first branch);
# the second branch, whose sides leave one kind, still joins. Every call is
# compared with eager; magpy-run replays the records on the logged calls.
import torch
from harness import compare

T, F = True, False
SIDES = [(T, F), (F, T), (F, F), (T, T), (F, F), (T, F), (F, T), (T, T)]
calls = [(torch.arange(9.).reshape(3, 3), torch.tensor(s)) for s in SIDES]


def contiguity():
    def f(x, c):
        x = x + 0
        if c[0]:
            y = x.t()  # strides (1, 3)
        else:
            y = x * 2  # strides (3, 1)
        if c[1]:
            x = x + 1
        if y.is_contiguous():
            return y.sum(0) + x.sum()
        return y.sum(1) + x.sum()
    return f


compare(contiguity, calls, records=2, graphs=2, breaks=0, monitored=4, hits=4)


def strides_read():
    def f(x, c):
        x = x + 0
        if c[0]:
            y = x.t()
        else:
            y = x * 2
        if c[1]:
            x = x + 1
        return y * y.stride(0) + x
    return f


compare(strides_read, calls, records=2, graphs=2, breaks=0, monitored=4, hits=4)


calls = [(torch.arange(3.), torch.tensor(s)) for s in SIDES]


def in_place_metadata(op):
    # The side changes the shape or strides of the object y already holds.
    def make():
        def f(x, c):
            y = x.reshape(3, 1) * 1 if op == "t_" else x * 1
            if c[0]:
                if op == "unsqueeze_":
                    y.unsqueeze_(0)
                elif op == "t_":
                    y.t_()
                elif op == "resize_":
                    y.resize_(2)
                else:
                    y.as_strided_((2,), (1,))
            if c[1]:
                x = x + 1
            return y * 2 + (x if op in ("unsqueeze_", "t_") else 0)
        return f
    return make


for op in ("unsqueeze_", "t_", "resize_", "as_strided_"):
    compare(in_place_metadata(op), calls, records=2, graphs=2, breaks=0, monitored=4, hits=4)
