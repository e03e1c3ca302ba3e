# magpy-capture-args: --log-calls 200
# Tensor identity and aliasing across branches. Python that tells tensors
# apart by identity after a branch (`is`) keeps the record from joining
# others; returning an input from one side gives another result structure
# (the input itself), so the records stay apart; in-place writes in a side
# to a tensor that another variable or a list also holds reach every alias.
# Every call is compared with eager, including which results are the same
# object; the records replay natively on the logged calls.
import torch
import torch.nn as nn
from harness import compare

T, F = True, False
SIDES = [(T, F), (F, T), (T, T), (F, F), (T, T), (F, F)]


class IsAfterBranch(nn.Module):
    # (T, F) and (F, T) compute the same operators after the branches, but
    # `u is v` holds only in (F, F): were the records joined, (F, F) would
    # replay u + v.
    def forward(self, x, c):
        x = x + 0
        u = x
        v = x
        if c[0]:
            u = x * 2
        if c[1]:
            v = x * 3
        if u is v:
            return x - 100
        return u + v


compare(IsAfterBranch, [(torch.ones(2), torch.tensor(c)) for c in SIDES], records=4, graphs=4, breaks=0, hits=2)


def same_objects():
    # One side returns the input itself (x), the other a new tensor.
    def f(x, c):
        if c[0]:
            x = x * 2
        return x
    return f


def check_identity():
    sf = same_objects()
    compiled = __import__("magpy").compile(sf)
    for c in [T, F, T, F]:
        x = torch.ones(2)
        got = compiled(x, torch.tensor([c]))
        assert (got is x) == (not c), f"result identity differs from eager for {c}"
        assert torch.equal(got, sf(torch.ones(2), torch.tensor([c])))


check_identity()


class InplaceAliased(nn.Module):
    # z and w are one tensor; sides write it in place through either name.
    def forward(self, x, c):
        a, b = c[0], c[1]
        z = x + 1
        w = z
        if a:
            z.mul_(3)
        if b:
            w.add_(1)
        return z + 0, w * 1


compare(InplaceAliased, [(torch.ones(2), torch.tensor(c)) for c in SIDES], records=1, graphs=1, breaks=0, hits=4)


class InplaceListed(nn.Module):
    # A tensor held by a list made before the branches, written in sides.
    def forward(self, x, c):
        a, b = c[0], c[1]
        z = x + 1
        held = [z]
        if a:
            z.mul_(3)
        if b:
            z.add_(1)
        return held[0] + 0


compare(InplaceListed, [(torch.ones(2), torch.tensor(c)) for c in SIDES], records=1, graphs=1, breaks=0, hits=4)
