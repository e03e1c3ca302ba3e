# An argument that is an object at one call and None at the next makes two
# records that read it differently. The call log keeps, for each logged
# call, what any record reads of its arguments, so the third call (an
# object again) replays natively with its attribute.
import torch

from harness import compare


class Holder:
    def __init__(self, v):
        self.t = torch.full((3,), v)


def make():
    def add(x, o):
        return x + (o.t if o is not None else 0.5)

    return add


calls = [(torch.full((3,), float(i)), o) for i, o in enumerate([Holder(1.0), None, Holder(3.0), None])]
compare(make, calls, records=2, graphs=2, breaks=0, hits=2)
