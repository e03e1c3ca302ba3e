# A standard layer compiled on its own, and layers that get their input
# only inside a *args tuple: the argument is read by the layer, so it is
# guarded and bound to the graph input.
import torch
import torch.nn as nn
from harness import compare


def forward_all(m, *inputs):
    return m(*inputs)


x = torch.randn(2, 4)
compare(lambda: nn.Linear(4, 3), [(x,)] * 3, records=1, graphs=1, hits=2, breaks=0)
compare(lambda: nn.Conv2d(2, 3, 3), [(torch.randn(1, 2, 5, 5),)] * 2, records=1, graphs=1, hits=1, breaks=0)

layer = nn.Linear(4, 3)
# The third call differs only in the batch size: the two records become one dynamic record.
compare(lambda: forward_all, [(layer, x), (layer, x), (layer, torch.randn(5, 4))], records=1, graphs=1, hits=1, breaks=0)
