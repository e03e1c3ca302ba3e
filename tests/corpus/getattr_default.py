# getattr with a default, and hasattr: a missing attribute is part of what
# the function read; setting it later is a new program.
import torch
import torch.nn as nn
from harness import compare


class Optional(nn.Module):
    def forward(self, x):
        bias = getattr(self, "extra_bias", None)
        if bias is not None:
            x = x + bias
        if hasattr(self, "gain"):
            x = x * self.gain
        return x


def add_attrs(i, a, b):
    if i == 2:
        a.extra_bias = b.extra_bias = 1.0
    if i == 4:
        a.gain = b.gain = 2.0


compare(Optional, [(torch.randn(3),)] * 6, between=add_attrs, records=3, hits=3, breaks=0)
