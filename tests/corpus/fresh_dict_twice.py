# A dict the function makes, stores on self and returns: the caller then
# adds to it and expects self's to change too. The mock builds the dict
# once and refers to it in the second place (a Ref), in the JIT and
# natively, so both places stay one object.
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


compare(Caller, [(torch.ones(2) * i,) for i in range(3)], records=1, hits=2)
