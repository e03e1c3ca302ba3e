# Python code that reads a size and decides on it (a branch, a view of a
# computed shape): the comparison is a predicate the record checks, the
# arithmetic graph values, so each side of the branch makes one dynamic
# record. A call whose size goes to the other side must miss.
import torch
from harness import compare


def step(x):
    n = x.shape[0]
    if n > 3:
        return x.view(n * 2, -1).sum(0)
    return x.flip(0) * n


calls = [(torch.randn(k, 4),) for k in [2, 3, 5, 6, 2, 5, 4, 3]]
compare(lambda: step, calls, records=2, monitored=4, hits=4, breaks=0)


def length(x, y):
    return x * len(y)  # len(y) is y.size(0): the graph reads it, one record for every length


compare(lambda: length, [(torch.randn(3), torch.randn(k)) for k in [2, 4, 4, 7]], records=1, monitored=2, hits=2,
        breaks=0)


def length_key(x, y, table):
    return x * table[len(y)]  # a length picking an entry: a record per length


compare(lambda: length_key, [(torch.randn(3), torch.randn(k), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
                             for k in [2, 4, 4, 7]], records=3, hits=1, breaks=0)
