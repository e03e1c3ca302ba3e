# Calls with keywords, defaults and keyword-only arguments.
import torch
import torch.nn as nn
from harness import compare


def scale(x, factor=2.0, *, bias=0.0, clamp=None):
    y = x * factor + bias
    return y.clamp(max=clamp) if clamp is not None else y


class KW(nn.Module):
    def forward(self, x):
        a = scale(x)
        b = scale(x, 3.0, bias=1.0)
        c = scale(x, bias=-1.0, clamp=0.5, factor=0.5)
        return torch.cat([a, b, c], dim=0).sum(dim=1, keepdim=True)


compare(KW, [(torch.randn(2, 3),)] * 3, records=1, graphs=1, hits=2, breaks=0)
