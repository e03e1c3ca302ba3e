# magpy-test: refused natively
# The call log remembers what each state path held after a logged call, to
# see what the script changes before the next one. It must not keep those
# objects alive: a box the next call pops from a state list is dropped by
# the program, and eager's weak reference to it answers None inside that
# same call. (Before the fix the log held the box, so a monitored call's
# ref() still answered it.)
import weakref

import torch

import magpy


class Box:
    def __init__(self, v):
        self.v = v


BOXES = [Box(1.0)]
REF = weakref.ref(BOXES[0])


def f(x):
    if BOXES and x.shape[0] > 1:
        BOXES.pop()
    held = REF()
    y = x + (0.5 if held is None else held.v)
    del held
    return y


compiled = magpy.compile(f)
shapes = [(1, 3), (1, 3), (2, 3), (2, 3), (1, 3), (2, 3)]
for i, shape in enumerate(shapes):
    if i in (1, 3):  # a fresh box and reference, as the script goes on
        BOXES[:] = [Box(1.0)]
        REF = weakref.ref(BOXES[0])
    x = torch.zeros(shape)
    popping = bool(BOXES) and shape[0] > 1
    expected = 0.5 if popping or REF() is None else 1.0
    got = compiled(x)
    assert torch.equal(got, torch.full(shape, expected)), (i, got, expected)
print("ok")
