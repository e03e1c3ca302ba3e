# magpy-test: breaks
# An unannotated native function (time.perf_counter) is dynamic: a break.
import time

import torch
from harness import compare


def timed(x):
    start = time.perf_counter()
    y = x * 3
    elapsed = time.perf_counter() - start
    return y, elapsed >= 0


def make():
    return timed


compare(make, [(torch.randn(3),)] * 3, records=1, breaks=1, eager=2)
