# magpy-test: refused natively
# Standard layers are summarized (their forward is not traced), so what
# their code calls is guarded instead: torch.nn.functional.relu replaced
# and restored, Conv2d._conv_forward patched on the class and on one
# instance, and a Conv2d subclass whose override reads a private attribute
# (a subclass is traced, not summarized). Layers whose code makes nested
# functions (interpolate's comprehensions) or calls helpers through a
# dispatch wrapper (max_pool2d) stay one graph.
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

import magpy
from harness import compare, same


def check(compiled, eager, x):
    got, want = compiled(x), eager(x)
    assert same(got, want), (got, want)


# F.relu replaced between calls, then restored.
net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
fast = magpy.compile(net)
x = torch.randn(2, 3)
original_relu = F.relu
for patched in [False, True, False, True]:
    F.relu = (lambda t, inplace=False: original_relu(t) + 1) if patched else original_relu
    check(fast, net, x)
F.relu = original_relu

# Conv2d._conv_forward patched on the class, then on one instance.
conv = nn.Conv2d(1, 1, 1)
fast_conv = magpy.compile(conv)
image = torch.randn(1, 1, 2, 2)
original_conv_forward = nn.Conv2d._conv_forward
check(fast_conv, conv, image)
nn.Conv2d._conv_forward = lambda self, input, weight, bias: original_conv_forward(self, input, weight, bias) * 2
check(fast_conv, conv, image)
nn.Conv2d._conv_forward = original_conv_forward
check(fast_conv, conv, image)
conv._conv_forward = types.MethodType(lambda self, i, w, b: original_conv_forward(self, i, w, b) - 1, conv)
check(fast_conv, conv, image)
del conv._conv_forward
check(fast_conv, conv, image)


# A subclass overriding a helper that reads a private attribute.
class Scaled(nn.Conv2d):
    def _conv_forward(self, input, weight, bias):
        return F.conv2d(input, weight, bias) * self._scale


def make_scaled():
    layer = Scaled(1, 1, 1)
    layer._scale = 1.0
    return layer


def rescale(i, subject, reference):
    subject._scale = reference._scale = float(i + 1)


compare(make_scaled, [(image,)] * 3, between=rescale, records=1)  # _scale is lifted after the first change

# Standard layers whose code makes functions or goes through wrappers.
compare(lambda: nn.Sequential(nn.MaxPool2d(2), nn.Upsample(scale_factor=2), nn.BatchNorm2d(1).eval()),
        [(torch.randn(1, 1, 4, 4),)] * 2, records=1, breaks=0)
