# magpy-test: breaks
# In-place operators on state containers: a dict's |= and a list's += change
# the object itself, and a set's |= (native code the monitor does not
# follow) breaks the graph. Each is compared with eager at every call,
# while the script also changes the containers between calls. A dict's |=
# was once taken for a new dict, and the JIT answered from stale records.
import torch

import magpy

STATS = {"n": 0}
SEEN = set()


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.d = {"a": 1}
        self.items = [1]

    def forward(self, x):
        self.d |= {"a": self.d["a"] + 1}
        self.items += [2]
        return x * self.d["a"] + len(self.items)


def count(x):
    global STATS
    STATS |= {"n": STATS["n"] + 1}
    return x + STATS["n"]


def mark(x, k):
    global SEEN
    SEEN |= {k}
    return x + len(SEEN)


model, reference = Counter(), Counter()
compiled, compiled_count, compiled_mark = magpy.compile(model), magpy.compile(count), magpy.compile(mark)
for i in range(5):
    assert torch.equal(compiled(torch.ones(2)), reference(torch.ones(2))), i
    assert model.d == reference.d and model.items == reference.items
    assert compiled_count(torch.zeros(1)).item() == STATS["n"] == i + 1
    assert compiled_mark(torch.zeros(1), i % 2).item() == len(SEEN)
    if i == 2:  # the script changes the containers too
        model.d["a"] = reference.d["a"] = 10
        model.items.clear(), reference.items.clear()
print("ok")
