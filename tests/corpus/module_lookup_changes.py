# magpy-test: refused natively
# How Python finds a module's attribute may change between calls: the
# script sets the module's __class__ to a ModuleType subclass whose
# property or __getattribute__ answers first, or gives a global to a
# module whose __getattr__ (PEP 562) answered for the name, then deletes
# it again. Guards name a module's globals; a module of a subclass is
# read as Python (a graph break), and a name its __getattr__ answered
# for is guarded absent from its globals. Every call gives eager's
# results; natively, the calls the subclass served are refused.
import sys
import types

import torch

import magpy
from harness import same


def registered(name, **values):
    module = types.ModuleType(name)
    module.__dict__.update(values)
    sys.modules[name] = module
    return module


config = registered("magpy_corpus_config", base=1.0)
lazy_values = {"gain": 2.0}
lazy = registered("magpy_corpus_lazy", __getattr__=lambda name: lazy_values[name])


class WithProperty(types.ModuleType):
    @property
    def base(self):
        return 50.0


class WithLookup(types.ModuleType):
    def __getattribute__(self, name):
        return -10.0 if name == "base" else super().__getattribute__(name)


def scaled(x):
    return x * config.base


def gained(x):
    return x * lazy.gain


def change(i):
    if i == 2:
        config.__class__ = WithProperty
    elif i == 3:
        config.__class__ = WithLookup
    elif i == 4:
        config.__class__ = types.ModuleType
    if i == 1:
        lazy_values["gain"] = 7.0
    elif i == 3:
        lazy.gain = 0.5
    elif i == 4:
        del lazy.gain


compiled = [(magpy.compile(f), f) for f in (scaled, gained)]
x = torch.ones(3)
for i in range(6):
    change(i)
    for fn, eager in compiled:
        got, want = fn(x), eager(x)
        assert same(got, want), (eager.__name__, i, got, want)
print("module lookup changes: every call as eager")
