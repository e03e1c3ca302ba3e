# A global written by the function (a counter and a cache); the mock writes
# them on replayed calls, and a later call reads what it wrote. The counter
# is lifted: one record computes STEPS + 1 for any STEPS.
import torch
from harness import same

import magpy

STEPS = 0
LAST = None


def step(x):
    global STEPS, LAST
    STEPS = STEPS + 1
    LAST = x * 2
    return LAST + 1


f = magpy.compile(step)
x = torch.randn(3)
for i in range(20):
    out = f(x)
    assert same(out, x * 2 + 1)
    assert STEPS == i + 1 and same(LAST, x * 2)
stats = f._magpy_stats()
# STEPS changes on every call: the second call's guard miss lifts it into the
# graph (G['STEPS'] + 1, written by the mock), and that record serves the rest.
assert stats["records"] == 1 and stats["monitored"] == 2, stats


# A counter read in a branch decides which operators run: it keeps its
# value in every record (a new record per value, never a stale one).
PHASE = 0


def phased(x):
    global PHASE
    PHASE = PHASE + 1
    if PHASE % 2:
        return x + 1
    return x - 1


g = magpy.compile(phased)
for i in range(6):
    assert same(g(x), x + 1 if (i + 1) % 2 else x - 1), i
assert g._magpy_stats()["records"] == 6, g._magpy_stats()
