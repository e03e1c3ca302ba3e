# Layers built inside forward, as re-implemented BERT/GPT-2 blocks and
# CIFAR ResNets write them: nn.ReLU()(x), nn.Softmax(dim=-1)(s),
# nn.Dropout(p)(x) made on every call. Module.__init__ sets the new layer's
# state through super().__setattr__, a slot wrapper bound to the layer: the
# layer is the annotation's first argument, and the call is one graph.
# The same binding on a module of the state: its write must reach the mock.
import torch
import torch.nn as nn
from harness import compare


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(self, x):
        s = self.q(x) @ self.k(x).transpose(-1, -2)
        p = nn.Softmax(dim=-1)(s / 8 ** 0.5)
        return nn.ReLU()(p @ x) + nn.Identity()(x)


calls = [(torch.randn(2, 4, 8),)] * 3
with torch.no_grad():
    compare(Attention, calls, records=1, graphs=1, hits=2, breaks=0)


class Tagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.mode = "fresh"

    def forward(self, x):
        super().__setattr__("mode", "seen")  # bypasses Module.__setattr__
        return self.lin(x)


def reset(i, subject, reference):
    if i >= 1:  # the script sets it back: the call must set it again
        subject.mode = reference.mode = "reset"


with torch.no_grad():
    compare(Tagged, [(torch.randn(2, 4),)] * 3, between=reset, records=1, graphs=1, hits=2, breaks=0)


# A fresh dropout layer is in training mode: a random operator, replayed
# with the generator seeded alike.
class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return nn.Dropout(0.25)(self.lin(x))


with torch.no_grad():
    compare(Noisy, [(torch.ones(4, 8),)] * 3, reseed=True, records=1, hits=2, breaks=0)
