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


# The list's length is read (it grows), so each call is a new record.
compare(Recorder, [(torch.randn(4),) for _ in range(3)], records=3, graphs=3, breaks=0)
