# magpy-test: breaks
# magpy-test: breaks
# try/except control flow is a break; results stay right.
import torch
from harness import compare

TABLE = {"a": 2.0}


def lookup(x, key):
    try:
        factor = TABLE[key]
    except KeyError:
        factor = -1.0
    return x * factor


def make():
    return lookup


x = torch.randn(2)
compare(make, [(x, "a"), (x, "b"), (x, "a"), (x, "b")], records=2, graphs=1, breaks=1, hits=1, eager=1)
