# A branch on torch.is_grad_enabled(): each grad mode gets its own record.
# The call log holds the script's grad mode; native replay computes without
# autograd but its guards read the script's mode, so each logged call is
# served by the record of its own branch, never the other's.
import torch
from harness import compare


def scale(x):
    if torch.is_grad_enabled():
        return x * 2
    return x * 3


def between(i, compiled, eager):
    torch.set_grad_enabled(i % 2 == 0)


compare(lambda: scale, [(torch.ones(2),)] * 4, between, records=2, hits=2)
torch.set_grad_enabled(True)
