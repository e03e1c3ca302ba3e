# In-place operators that change a buffer's sizes or strides every call
# (t_, unsqueeze_/squeeze_): the next call sees different metadata, so
# guards on state are checked afresh each call, natively too, and Python
# code that branches on the layout picks the right record.
import torch
import torch.nn as nn

from harness import compare


class Flipper(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.arange(6.0).reshape(2, 3))

    def forward(self, x):
        y = x + 1 if self.b.is_contiguous() else x - 1
        self.b.t_()
        return y + self.b[0, 1]


class Breather(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.arange(3.0))

    def forward(self, x):
        if self.b.dim() == 1:
            self.b.unsqueeze_(0)
            return x * 2
        self.b.squeeze_(0)
        return x * 3


compare(Flipper, [(torch.ones(2),)] * 4, records=2, breaks=0)
compare(Breather, [(torch.ones(2),)] * 4, records=2, breaks=0)
