# magpy-test: refused natively
# Names of classes, which live outside the class's __dict__: a class
# renamed between calls while the program reads its name (a record made
# before must miss), a class whose metaclass computes its name, and classes
# made anew on every call (which may reuse a freed class's memory) with the
# same name and other behavior. Every call agrees with eager.
import gc

import torch
from harness import same

import magpy


class Scale:
    k = 2.0


def by_name(x, obj):
    return x * len(type(obj).__qualname__) + x * obj.k


f = magpy.compile(by_name)
x = torch.randn(4)
for name in ["Scale", "S", "Scale", "LongerName"]:
    Scale.__qualname__ = name
    Scale.__name__ = name
    for _ in range(2):
        assert same(f(x, Scale()), by_name(x, Scale()))


class Named(type):
    def __getattribute__(cls, name):
        if name == "__qualname__":
            return "N" * type.__getattribute__(cls, "width")
        return type.__getattribute__(cls, name)


class Wide(metaclass=Named):
    k = 1.0
    width = 2


for width in [2, 3, 3, 5]:
    Wide.width = width
    assert same(f(x, Wide()), by_name(x, Wide()))


def made(k):
    return type("Made", (), {"k": k})


g = magpy.compile(lambda x, obj: x * obj.k + len(type(obj).__name__))
for k in [1.0, 2.0, 3.0, 2.0, 5.0]:
    cls = made(k)
    assert same(g(x, cls()), x * k + 4)
    del cls
    gc.collect()
