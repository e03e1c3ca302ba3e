# One list passed as two arguments: f(x, a, b) clears b and reads len(a).
# A record made for two lists would read a's length as it was; called
# with f(x, l, l) it must miss (args[1] is not args[2]) and make a record
# of its own, in the JIT and natively.
import torch
from harness import compare


def clear_then_count(x, a, b):
    b.clear()
    return x + len(a)


shared = [1, 2]
compare(lambda: clear_then_count,
        [(torch.zeros(1), [1, 2], [1, 2]), (torch.zeros(1), shared, shared), (torch.zeros(1), [1, 2], [1, 2]),
         (torch.zeros(1), shared, shared)], records=2, hits=2)
