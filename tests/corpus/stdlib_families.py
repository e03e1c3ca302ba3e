# Calls into Python's standard library and numpy that annotations summarize
# (tests annotations/stdlib.yaml and numpy.yaml per family). Each family
# runs with its inputs changed between calls: the state a summary reads is
# guarded, so a change makes a new record, never a stale result. Random
# numbers from Python and numpy are graph breaks (seeded alike, compiled
# and eager results agree).
import collections.abc
import copy
import functools
import itertools
import random
import re

import numpy as np
import torch
import torch.nn as nn

import magpy
from harness import compare


class Partial(nn.Module):
    def __init__(self):
        super().__init__()
        self._act = functools.partial(torch.nn.functional.leaky_relu, negative_slope=0.1)

    def forward(self, x):
        scale = functools.partial(torch.mul, 2)
        return scale(self._act(x))


def new_slope(i, subject, reference):
    if i == 1:
        for m in (subject, reference):
            m._act = functools.partial(torch.nn.functional.leaky_relu, negative_slope=0.3)


class Abstract(nn.Module):
    def __init__(self):
        super().__init__()
        self.items = [1, 2]

    def forward(self, x):
        return x * 2 if isinstance(self.items, collections.abc.Sequence) else x


def swap_items(i, subject, reference):
    if i == 1:
        subject.items, reference.items = {"a": 1}, {"a": 1}  # a Mapping now


class Patterns(nn.Module):
    def __init__(self):
        super().__init__()
        self.name = "layer12"

    def forward(self, x):
        m = re.match(r"layer(\d+)", self.name)
        return x * int(m.group(1)) + len(re.findall("a", "banana"))


def rename(i, subject, reference):
    if i == 1:
        subject.name = reference.name = "layer3"


class Iterators(nn.Module):
    def __init__(self):
        super().__init__()
        self.widths = [1, 1, 2, 2, 2]

    def forward(self, x):
        runs = [len(list(g)) for _, g in itertools.groupby(self.widths)]
        pairs = sum(a * b for a, b in itertools.pairwise(self.widths))
        return x * max(runs) + pairs + len(copy.deepcopy(self.widths))


def widen(i, subject, reference):
    if i == 1:
        subject.widths = [3, 3, 3]
        reference.widths = [3, 3, 3]


class NumpyConstants(nn.Module):
    def __init__(self):
        super().__init__()
        self.shape = (2, 3)

    def forward(self, x):
        return x * float(np.prod(self.shape)) + float(np.sqrt(self.shape[0])) + np.dtype("float32").itemsize


def reshape(i, subject, reference):
    if i == 1:
        subject.shape, reference.shape = (4, 5), (4, 5)


class Numbers(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 5

    def forward(self, x):
        return x * self.n.bit_length() + len(str(ValueError("bad")))


def grow(i, subject, reference):
    if i == 1:
        subject.n = reference.n = 40


x = torch.randn(3)
calls = [(x,), (x,), (x,)]
compare(Partial, calls, between=new_slope, records=2, graphs=2, breaks=0, hits=1)
compare(Abstract, calls, between=swap_items, records=2, graphs=2, breaks=0, hits=1)
compare(Patterns, calls, between=rename, records=2, graphs=2, breaks=0, hits=1)
compare(Iterators, calls, between=widen, records=2, graphs=2, breaks=0, hits=1)
compare(NumpyConstants, calls, between=reshape, records=2, graphs=2, breaks=0, hits=1)
compare(Numbers, calls, between=grow, records=2, graphs=2, breaks=0, hits=1)




def numpy_random(x):
    return x * float(np.random.rand())


class Stochastic(nn.Module):
    def forward(self, x):
        return x * random.uniform(0.5, 1.5)


# Both copies draw after the same seed: the compiled copy runs these eagerly.
for fn in (lambda: numpy_random, Stochastic):
    subject, reference = fn(), fn()
    compiled = magpy.compile(subject)
    for i in range(3):
        random.seed(i), np.random.seed(i)
        got = compiled(x)
        random.seed(i), np.random.seed(i)
        want = reference(x)
        assert torch.equal(got, want), f"call {i}: {got} != {want}"
    stats = compiled._magpy_stats()
    assert stats["graphs"] == 0 and stats["breaks"] >= 1, stats
