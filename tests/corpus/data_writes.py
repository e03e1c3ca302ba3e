# Writes through .data between calls: `w.data = t` swaps the memory under
# w, and `w.data.copy_(...)` bumps a version counter of its own, not w's.
# The JIT reads the live weights; the call log sees each change (memory,
# layout and contents of every state tensor), so native replay of the
# log applies it before the next call.
import torch
from harness import compare


def between(i, compiled, eager):
    with torch.no_grad():
        for m in (compiled, eager):
            if i == 1:
                m.weight.data = torch.arange(6.0).reshape(2, 3)
            elif i == 2:
                m.weight.data.copy_(torch.full((2, 3), 0.5))
            elif i == 3:
                m.bias.data.mul_(3)


compare(lambda: torch.nn.Linear(3, 2), [(torch.ones(1, 3),)] * 4, between, records=1, hits=3)
