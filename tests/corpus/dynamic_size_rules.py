# Dynamic records against programs that would make them wrong: sizes that
# change independently, sizes that must stay equal, operators whose
# arguments summarized library code computes from sizes, in-place writes
# to inputs, non-contiguous arguments. Every call is compared with eager.
import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import compare, expect_stats, same, same_state

import magpy


def joined(x, y):
    return torch.cat([x, y]) * 2


# (2,3) and (4,6) make s0, s1; the result's size, 5 then 10, fits 2*s0+1,
# a rule that is wrong at (3,3): that call's result check misses and it is
# monitored, never answered with a stale size.
compare(lambda: joined, [(torch.randn(n, 2), torch.randn(m, 2)) for n, m in [(2, 3), (4, 6), (3, 3), (5, 4)]], breaks=0)

# Equal sizes in both records share one symbol: a call where they differ misses.
compare(lambda: joined, [(torch.randn(n, 2), torch.randn(m, 2)) for n, m in [(2, 2), (4, 4), (5, 3), (6, 6)]],
        records=2, monitored=3, hits=1, breaks=0)


def upsample(x):
    return F.interpolate(x, scale_factor=2.0, mode="nearest") + 1


# The batch changes: the upsampled sizes do not, one record serves all.
compare(lambda: upsample, [(torch.randn(n, 2, 4, 4),) for n in [2, 3, 5]], records=1, hits=1, breaks=0)
# The image size changes too: interpolate passes the scale factors to the
# operator (upsample_nearest2d.vec), which computes the output size itself,
# so one record serves every size.
compare(lambda: upsample, [(torch.randn(n, 2, k, k),) for n, k in [(2, 4), (2, 6), (3, 8), (2, 6)]], records=1, hits=1,
        monitored=3, breaks=0)


def pooled(x):
    return F.adaptive_avg_pool2d(x, (None, 2)).sum(1)  # None takes the input's height


compare(lambda: pooled, [(torch.randn(2, 3, k, 4),) for k in [4, 6, 5]], records=3, breaks=0)

# Batch norm in training mode writes its running statistics (inputs of the
# graph) in place: such records keep their sizes.
compare(lambda: nn.BatchNorm1d(3).train(), [(torch.randn(n, 3),) for n in [2, 4, 3, 4]], records=3, hits=1, breaks=0)


def transposed(x):
    return x.t().contiguous() * 2


# A non-contiguous argument's strides do not follow from its sizes.
compare(lambda: transposed, [(torch.randn(3, n).t(),) for n in [2, 4, 5]], records=3, breaks=0)


class Keeps(nn.Module):
    def forward(self, x, *, bias):
        self.last = x * 2  # the mock writes a result of the call's size into state
        return self.last + bias


subject, reference = Keeps(), Keeps()
keeps = magpy.compile(subject)
for n in [2, 4, 3]:
    x, bias = torch.randn(n, 2), torch.randn(n, 2)
    assert same(keeps(x, bias=bias), reference(x, bias=bias)) and same_state(subject, reference), n
expect_stats(keeps, records=1, hits=1, breaks=0)

# Dropout in training mode draws random numbers: a call that a size check
# stopped half-way would already have drawn some, so such records keep
# their sizes (each call draws exactly what eager draws).
torch.manual_seed(0)
noisy, noisy_eager = nn.Dropout(0.5).train(), nn.Dropout(0.5).train()
drop = magpy.compile(noisy)
for i, n in enumerate([2, 4, 3, 4]):
    x = torch.ones(n, 3)
    torch.manual_seed(100 + i)
    got = drop(x)
    torch.manual_seed(100 + i)
    assert same(got, noisy_eager(x)), n
expect_stats(drop, records=3, hits=1, breaks=0)
