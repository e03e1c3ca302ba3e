# A native method bound to a list (log.append) held where the list itself
# is not: a module global, a closure cell, an attribute. Calling it
# appends to the program's list. The run met the list only as the
# method's __self__ and once took it for an object the call made, so
# replayed calls appended nothing (warnings.catch_warnings(record=True)
# lost every warning after a call's first, through its log.append).
import torch

import magpy

events = []
record_event = events.append


def step(x):
    record_event(x.shape[0])
    return x * 2


def make_closure():
    log = []
    push = log.append

    def count(x):
        push(1)
        return x + 1

    return count, log


class Tally(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.push = [].append  # the list is reachable only through the method

    def forward(self, x):
        self.push(x.shape[0])
        return x - 1


count, log = make_closure()
tally = Tally()
for fn, appended in ((step, events), (count, log), (tally, tally.push.__self__)):
    compiled = magpy.compile(fn)
    for i in range(4):
        got, want = compiled(torch.ones(2)), fn(torch.ones(2))
        assert torch.equal(got, want), (i, got, want)
        assert len(appended) == 2 * (i + 1), f"{fn}: call {i}: {appended}"
print("ok")
