# Values a record must not take for their type alone: Enum and IntEnum
# members, scalars reached only by iterating *args
# or summing them, a class attribute shadowed on the instance afterwards,
# and a method replaced on the instance (a monkey-patched forward).
import enum

import torch
import torch.nn as nn

import magpy


class Mode(enum.Enum):
    A = 1
    B = 2


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def branchy(x, mode, level):
    y = x * 2 if mode is Mode.A else x * 3
    return y + level


def scaled(x, *scales):
    for s in scales:
        x = x * s
    return x + sum(scales) + sorted(scales)[0]


def keyed(x, **opts):
    return x * opts["k"]


class Config:
    scale = 2.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = Config()

    def forward(self, x):
        return x * self.cfg.scale


def check(compiled, plain, *args, **kwargs):
    got, want = compiled(*args, **kwargs), plain(*args, **kwargs)
    assert torch.equal(got, want), (plain, args, kwargs, got, want)


x = torch.ones(2)
f = magpy.compile(branchy)
for args in [(Mode.A, Level.LOW), (Mode.B, Level.LOW), (Mode.A, Level.HIGH), (Mode.A, Level.LOW)]:
    check(f, branchy, x, *args)
assert f._magpy_stats()["hits"] == 1, f._magpy_stats()

s = magpy.compile(scaled)
for scales in [(2, 3), (2, 5), (4, 3), (2, 5)]:
    check(s, scaled, x, *scales)
assert s._magpy_stats()["hits"] == 1, s._magpy_stats()

k = magpy.compile(keyed)
for value in [2, 7, 2]:
    check(k, keyed, x, k=value)

net = Net()
m = magpy.compile(net)
check(m, net, x)
net.cfg.scale = 5.0  # shadows the class attribute
check(m, net, x)
net.forward = lambda t: t - 1  # replaces the method on the instance
check(m, net, x)
check(m, net, x)
