# magpy-test: breaks
# Indexing with a Python list: torch fills the index tensor outside any
# operator, so the graph cannot hold it. A break that says so, never the
# uninitialized memory a replayed empty() would hold.
import torch
from harness import compare


def pick(x):
    return x[[1, 0]]


compare(lambda: pick, [(torch.arange(24.0).reshape(4, 6),)] * 3, breaks=1)
