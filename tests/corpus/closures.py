# Closures and cells: nested functions, nonlocal, a closure made outside.
import torch
from harness import compare


def make_scaler(k):
    def scaler(x):
        return x * k
    return scaler


TRIPLE = make_scaler(3.0)


def run(x):
    count = 0

    def step(y):
        nonlocal count
        count += 1
        return TRIPLE(y) + count

    y = step(step(x))
    return y, count


def make():
    return run


compare(make, [(torch.randn(2),)] * 3, records=1, graphs=1, hits=2, breaks=0)
