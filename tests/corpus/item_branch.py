# .item() feeds Python control flow: a value read from tensor contents. The
# record checks the sum it read (content_checks.py), so each sum gets a
# record and the results stay eager's when the branch flips.
import torch
import torch.nn as nn
from harness import compare


class Gate(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1


calls = [(torch.ones(3),), (-torch.ones(3),), (torch.ones(3),), (-torch.ones(3) * 2,)]
compare(Gate, calls, records=3, graphs=3, breaks=0, hits=1)
