# magpy-test: breaks
# A resize_ that grows a tensor leaves its new elements unset: a graph that
# reads them (here through a view of the old part, which magpy does not tell
# apart) is refused at capture and runs eagerly, never replayed with other
# memory's contents.
import torch
from harness import compare


def grow_then_read(x):
    z = torch.zeros(2)
    z.resize_(3)
    return z[:2] + x


compare(lambda: grow_then_read, [(torch.randn(2),), (torch.randn(2),)], records=1, graphs=0, breaks=1)
