# magpy-capture-args: --log-calls 200
# Sides that change Python state other than tensors stay checks (one
# record per combination of sides), never joined branches. Each program has
# two ifs whose sides make the same change, so the records of (then, else)
# and (else, then) would look alike: a wrong join would replay (else, else)
# or (then, then) with the change counted once. Every call is compared with
# eager. The objects written are reached before the branch (a list, a dict,
# a cell, a global); the records replay natively on the logged calls.
# (Objects first reached inside a side, e.g. self.sub.flag = 1, are not
# yet seen as written: not covered here.)
import torch
import torch.nn as nn
from harness import compare

T, F = True, False
SIDES = [(T, F), (F, T), (F, F), (T, T), (F, F), (T, F)]
calls = [(torch.ones(2), torch.tensor(c)) for c in SIDES]


def appends():
    log = []

    def f(x, c):
        y = x + len(log)
        a, b = c[0], c[1]
        if a:
            log.append(1)  # a list from before the branch
        if b:
            log.append(1)
        r = y * 2 + len(log)
        log.clear()
        return r
    return f


compare(appends, calls, records=4, graphs=4, breaks=0, hits=2)


def dict_items():
    seen = {}

    def f(x, c):
        y = x + len(seen)
        a, b = c[0], c[1]
        if a:
            seen["k"] = 1  # a dict from before
        if b:
            seen.__setitem__("k", 1)
        r = y * 2 + len(seen)
        seen.clear()
        return r
    return f


compare(dict_items, calls, records=4, graphs=4, breaks=0, hits=2)


def counter_cell():
    def f(x, c):
        x = x + 0
        n = 0

        def inc():
            nonlocal n  # a cell of the frame that jumps
            n += 1
        if c[0]:
            inc()
        if c[1]:
            inc()
        return x * n
    return f


compare(counter_cell, calls, records=4, graphs=4, breaks=0, hits=2)


FLAG = 0


def global_flag():
    def f(x, c):
        global FLAG
        y = x + 0
        a, b = c[0], c[1]
        if a:
            FLAG = 1  # the module's globals
        if b:
            FLAG = 1
        r = y * 2 + FLAG
        FLAG = 0
        return r
    return f


compare(global_flag, calls, records=4, graphs=4, breaks=0, hits=2)


class IntLocal(nn.Module):
    # A side that rebinds a local to an int: the local holds another object
    # where the sides meet, so the first if stays a check. The second if's
    # then side, after the first took its then side, rebinds k to the object
    # it already holds (1): that is a branch, and (T, F) and (T, T) join.
    def forward(self, x, c):
        x = x + 0
        k = 0
        if c[0]:
            k = 1
        if c[1]:
            k = 1
        return x * k


compare(IntLocal, calls, records=3, graphs=3, breaks=0, hits=2)
