# Results and state kept in a collections.OrderedDict (torchvision's
# segmentation and detection models return one): the mock rebuilds an
# OrderedDict, in the JIT and natively, with its keys in order.
from collections import OrderedDict

import torch
import torch.nn as nn

import magpy
from harness import compare


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Linear(4, 3)
        self.aux = nn.Linear(4, 2)
        self.last = OrderedDict()

    def forward(self, x):
        result = OrderedDict()
        result["out"] = self.main(x)
        result["aux"] = self.aux(x)
        self.last = OrderedDict(seen=result["out"].sum())
        return result


def check_types(i, subject, reference):
    if i > 0:
        assert type(subject.last) is OrderedDict and list(subject.last) == ["seen"], subject.last


x = torch.randn(2, 4)
compare(Heads, [(x,)] * 3, between=check_types, records=1, graphs=1, breaks=0, hits=2)
compiled = magpy.compile(Heads())
compiled(x)
out = compiled(x)  # from the record
assert type(out) is OrderedDict and list(out) == ["out", "aux"], out
