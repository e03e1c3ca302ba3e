# magpy-test: refused natively
# A class made inside a function, whose __init__ appends to a list of the
# enclosing function (a closure cell) or to its own default argument. The
# program calls the class directly or through map. The list is reached
# only through the class's __init__, which native code (type.__call__)
# runs: a record must name it by that path, or break, never replay a
# call that leaves the list as it was.
import torch

import magpy


def make(through_map):
    made = []

    class Made:
        def __init__(self, v):
            made.append(v)

    def f(x):
        if through_map:
            list(map(Made, [1, 2]))
        else:
            Made(1)
            Made(2)
        return x + 1

    return f, made


class Defaulted:
    def __init__(self, log=[]):  # noqa: B006: the shared default is the point
        log.append(1)
        self.n = len(log)


def with_default(x):
    return x + Defaulted().n


for through_map in (False, True):
    f, made = make(through_map)
    compiled = magpy.compile(f)
    for i in range(3):
        made.clear()
        assert torch.equal(compiled(torch.zeros(1)), torch.ones(1))
        assert made == [1, 2], f"through_map={through_map} call {i}: {made}"

compiled = magpy.compile(with_default)
for i in range(3):
    got = compiled(torch.zeros(1))
    assert got.item() == len(Defaulted.__init__.__defaults__[0]), (i, got)
print("ok")
