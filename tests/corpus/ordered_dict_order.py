# An OrderedDict's own order (move_to_end changes it, not the dict's
# storage): the record guards the order Python iterates in.
import collections

import torch
from harness import compare

WEIGHTS = collections.OrderedDict(a=1.0, b=2.0)


def weighted(x):
    out = x
    for k, v in WEIGHTS.items():
        out = out * v + (1.0 if k == "a" else 0.0)
    return out


def reorder(i, subject, reference):
    if i == 2:
        WEIGHTS.move_to_end("a")


compare(lambda: weighted, [(torch.ones(2),)] * 4, between=reorder, records=2, hits=2, breaks=0)
