# Instances of classes derived from str, int and float are used as values:
# guarded by type and value, so a different value makes a new record. The
# record's state holds their type name and value, so native replay serves
# each call with the record of its value.
import torch

import magpy


class Tag(str):
    pass


class Count(int):
    pass


def tagged(x, tag, count):
    return x * count + (1 if tag == "a" else 5)


f = magpy.compile(tagged)
x = torch.ones(2)
for args in [(Tag("a"), Count(2)), (Tag("b"), Count(2)), (Tag("a"), Count(3)), (Tag("a"), Count(2))]:
    got, want = f(x, *args), tagged(x, *args)
    assert torch.equal(got, want), (args, got, want)
assert f._magpy_stats()["records"] == 3 and f._magpy_stats()["hits"] == 1, f._magpy_stats()
