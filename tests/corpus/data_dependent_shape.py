# magpy-test: breaks
# nonzero() makes a shape from tensor contents; reading that shape in Python
# is a break (a graph constant would go stale).
import torch
from harness import compare


def positives(x):
    idx = x.nonzero()
    n = idx.shape[0]
    return torch.zeros(n) + 1


def make():
    return positives


calls = [(torch.tensor([1.0, -1.0, 2.0]),), (torch.tensor([1.0, 1.0, 2.0]),), (torch.tensor([-1.0, -1.0, 2.0]),)]
compare(make, calls, breaks=1)
