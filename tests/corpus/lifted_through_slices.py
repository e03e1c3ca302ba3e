# Numbers in a global tuple change between calls, so magpy lifts the ones
# the graph takes as inputs; numbers a slice copies into a new tuple that a
# builtin then reads (max, sum, sorted) decide the result natively, so
# they keep their values in the guards. Before, the slice's elements were
# not followed back, the numbers were lifted with only type guards, and a
# record baked one call's max for every other call.
import torch
from harness import compare

TABLE = (1.0, 1.0, 1.0, 2.0)
VALUES = [(1.0, 1.0, 1.0, 2.0), (1.0, 2.0, 3.0, 2.0), (1.0, 1.0, 1.0, 2.0), (1.0, 1.0, 3.0, 2.0)]


def peak(x):
    return x + max(TABLE[:3]) + sum(TABLE[1:][:2]) * 0.5


def rebind(i, subject, reference):
    global TABLE
    TABLE = VALUES[i]


compare(lambda: peak, [(torch.ones(2),)] * 4, between=rebind, hits=1)
