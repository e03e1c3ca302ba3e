# magpy-capture-args: --annotations annotations/zlib.yaml
# A native function magpy does not know (zlib.crc32) becomes pure through a
# user annotation file, so the function stays one graph.
import zlib

import torch
from harness import compare


def salted(x, name):
    salt = zlib.crc32(name.encode()) % 7
    return x * salt


def make():
    return salted


x = torch.randn(3)
compare(make, [(x, "alpha"), (x, "alpha"), (x, "beta")], records=2, graphs=2, breaks=0, hits=1)
