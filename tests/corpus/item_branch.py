# .item() feeds Python control flow: a value read from tensor contents. The
# graph reads the sum (aten::item) and checks the comparison that held (a
# predicate), so one record serves each side of the branch and the results
# stay eager's when it flips.
import torch
import torch.nn as nn
from harness import compare


class Gate(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1


calls = [(torch.ones(3),), (-torch.ones(3),), (torch.ones(3),), (-torch.ones(3) * 2,)]
compare(Gate, calls, records=2, graphs=2, breaks=0, hits=2)
