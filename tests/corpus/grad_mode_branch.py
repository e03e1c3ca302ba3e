# magpy-test: refused natively
# A branch on torch.is_grad_enabled(): each grad mode gets its own record.
# Native replay always runs with grad mode off, so a call the script made
# with grad mode on is refused (its record read grad mode on), never
# served by the grad-off record, which computes the other branch.
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
