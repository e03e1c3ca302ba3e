# magpy-test: refused natively
# Arguments that are views of one tensor (f(t, t[1:]), f(t, t.view(4))):
# the JIT runs the graph on the caller's own tensors, so a write through
# one is seen through the other. A record file keeps each tensor's
# contents apart, so native replay refuses such logged calls rather than
# run them on independent copies.
import torch
from harness import compare


def shift_then_read(a, b):
    a.add_(1)
    return b * 2


base = torch.zeros(4)
compare(lambda: shift_then_read, [(base, base.view(4)), (base, base.view(2, 2)), (base, base[1:])])
compare(lambda: shift_then_read, [(torch.zeros(4), torch.ones(4))] * 2, records=1, hits=1)
