# A tensor size used as an index or slice bound into Python sequences
# (FLAGS[x.shape[0]], WEIGHTS[: x.shape[0]]) decides which entries Python
# takes: it is a use of the size. Sizes 2 and 3 find equal entries, so
# their records look alike; a dynamic record joined from them must not
# serve size 4, where Python takes other entries. Every call is compared
# with eager; the records replay natively.
import torch
from harness import compare

FLAGS = (0.0, 1.0, 2.0, 2.0, 7.0, 7.0)
WEIGHTS = (0.5, 0.5, 0.5, 0.5, 9.0, 9.0)


def pick(x):
    return x * FLAGS[x.shape[0]]


def bound(x):
    return x * max(WEIGHTS[: x.shape[0]])


calls = [(torch.ones(n),) for n in (2, 3, 4, 5, 2)]
compare(lambda: pick, calls, hits=1)
compare(lambda: bound, calls, hits=1)
compare(lambda: (lambda x: x * max(list(WEIGHTS)[: x.shape[0]])), calls, hits=1)
