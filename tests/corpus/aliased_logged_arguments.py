# An object that two paths of the arguments reach (a tuple two dicts hold,
# a tensor that is an argument and an attribute of another) is one object
# in the call log too, so the records' identity guards hold when the
# logged calls replay natively, the first (monitored) call's included.
import torch

from harness import compare


class Holder:
    def __init__(self):
        betas = (0.9, 0.99)
        self.a = {"b": betas}
        self.c = [{"b": betas}]
        self.w = torch.randn(3)


def make():
    def step(x, h, w):
        return x * h.a["b"][0] + x * h.c[0]["b"][1] + h.w * w

    return step


h = Holder()
calls = [(torch.randn(3), h, h.w) for _ in range(3)]
compare(make, calls, records=1, graphs=1, breaks=0, hits=2)
