# Sizes the program reads and passes straight to operators become graph
# nodes (aten::size.int), and arithmetic on them number operators, so one
# dynamic record serves every size; a comparison is a predicate (a record
# per side); sizes it returns or stores keep records per size.
# Every call is compared with eager, and the records replay natively.
import torch
import torch.nn.functional as F
from harness import compare


def passed_on(x, y):
    b, n = x.size()
    grid = x.view(b, n, 1) + torch.arange(n).view(1, 1, n)  # a view and a factory of read sizes
    head = y[: x.shape[0]]                                  # y's rows, as many as x has
    pad = F.pad(x, (0, x.size(-1)))                         # library code passes it on
    return grid.sum(-1) + head[:, :1] + pad[:, : n].new_zeros(x.shape) + pad[:, n:]


calls = [(torch.randn(b, n), torch.randn(12, 3)) for b, n in [(2, 3), (4, 5), (3, 3), (6, 2), (5, 7), (4, 4)]]
# (2, 3) and (4, 5) make one dynamic record; every later call replays it.
compare(lambda: passed_on, calls, records=1, monitored=2, hits=4, breaks=0)


def rows_of(x, y):
    return y[: x.shape[0]] * 2


# y shorter than x: y[: x.shape[0]] gives fewer rows than the record's
# rule (s0 rows) says; the size check makes that call miss, and it is
# monitored and answered as eager answers it.
compare(lambda: rows_of, [(torch.randn(k, 1), torch.randn(12, 3)) for k in [2, 4, 9, 14]], records=2, monitored=3, hits=1,
        breaks=0)


def computed(x):
    n = x.shape[0]
    return x.view(n // 2, -1) * n  # arithmetic on a size, and a size as a scalar operand


# n // 2 and n are graph values: (2, 3) and (4, 3) make one dynamic record
# whose view has n // 2 rows, which serves 6 and 4.
compare(lambda: computed, [(torch.randn(k, 3),) for k in [2, 4, 6, 4]], records=1, monitored=2, hits=2, breaks=0)


def compared(x):
    n = x.size(0)
    if n > 4:
        return x[:n].flip(0)
    return x[:n] * 2


# n > 4 is a predicate: one dynamic record per side.
compare(lambda: compared, [(torch.randn(k, 3),) for k in [2, 3, 6, 7, 3, 9]], records=2, monitored=4, hits=2, breaks=0)


def returned(x):
    return x * 2, x.shape[0]


compare(lambda: returned, [(torch.randn(k, 3),) for k in [2, 3, 3]], records=2, hits=1, breaks=0)


class Stores(torch.nn.Module):
    def forward(self, x):
        self.rows = x.shape[0]  # state written from a size: per size
        return x + 1


compare(lambda: Stores(), [(torch.randn(k, 3),) for k in [2, 3, 3]], records=2, hits=1, breaks=0)


def same_value(x):
    # x.shape[0] == 4 at the first call: view(4, 4, -1) names both 4s by position.
    return x.view(x.shape[0], 4, -1).sum(1)


compare(lambda: same_value, [(torch.randn(k, 8),) for k in [4, 6, 5]], records=1, hits=1, breaks=0)
