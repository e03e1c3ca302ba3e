# magpy-test: breaks
# .item() feeds Python control flow: a value read from tensor contents. The
# function must break there and stay correct when the branch flips.
import torch
import torch.nn as nn
from harness import compare


class Gate(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1


calls = [(torch.ones(3),), (-torch.ones(3),), (torch.ones(3),), (-torch.ones(3) * 2,)]
compare(Gate, calls, graphs=0, breaks=1, eager=3)
