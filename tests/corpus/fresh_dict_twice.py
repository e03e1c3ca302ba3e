# magpy-test: breaks
# A dict the function makes, stores on self and returns: the caller then
# adds to it and expects self's to change too. A mock builds each new
# container it writes, so one dict left in two places would become two:
# the record is a graph break (the JIT runs it as Python), never two dicts.
import torch
from harness import compare


class Cache:
    def __init__(self):
        self.last = None

    def run(self, x):
        out = {"y": x * 2}
        self.last = out
        return out


class Caller:
    def __init__(self):
        self.cache = Cache()

    def __call__(self, x):
        out = self.cache.run(x)
        out["seen"] = True
        return self.cache.last


compare(Caller, [(torch.ones(2) * i,) for i in range(3)])
