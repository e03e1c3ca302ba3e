# magpy-test: breaks
# getattr()/hasattr() of a property or a __getattr__ written in Python:
# the getter runs once per read, as in Python, never again to check a
# guard; magpy does not follow it from there, so it is a graph break.
import torch
from harness import compare


class Counter:
    def __init__(self):
        self.reads = 0

    @property
    def scale(self):
        self.reads += 1
        return 2.0

    def __getattr__(self, name):
        self.reads += 1
        return 3.0


COUNTER = Counter()


def scaled(x):
    return x * getattr(COUNTER, "scale") + (1.0 if hasattr(COUNTER, "offset") else 0.0)


compare(lambda: scaled, [(torch.ones(2),)] * 3, graphs=0)
# Both worlds read the shared counter: 2 reads per call in each.
assert COUNTER.reads == 12, COUNTER.reads
