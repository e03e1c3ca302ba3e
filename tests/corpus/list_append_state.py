# An external list grows on every call (append), and a dict is updated.
import torch
import torch.nn as nn
from harness import compare


class Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []
        self.stats = {"last": None}

    def forward(self, x):
        y = x.relu()
        self.history.append(y.sum())
        self.stats["last"] = y.mean()
        return y


# The list is only appended to: records extend it without guarding its
# length, so the third call replays the second's record (the first one's
# read stats['last'] as None).
compare(Recorder, [(torch.randn(4),) for _ in range(3)], records=2, graphs=2, breaks=0)
