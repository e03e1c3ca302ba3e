# magpy-test: breaks
# A new object of a user class returned or stored (a result holder, an
# exception object kept for later): a record cannot rebuild it, so the
# call is a graph break at the function, and runs as Python with its
# results and state equal to eager's. (Rebuilding such objects would
# skip their __init__, whose other effects the record would have to
# replay too; returning a dict, tuple or named tuple instead is whole.)
import torch
import torch.nn as nn
from harness import compare


class ActionValue:
    def __init__(self, action, value):
        self.action = action
        self.value = value


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        q = self.head(x)
        return ActionValue(q.argmax(-1), q.max(-1).values)


compare(Critic, [(torch.randn(2, 4),) for _ in range(3)], breaks=1)


class Validating(nn.Module):
    def __init__(self):
        super().__init__()
        self.last_error = None

    def forward(self, x):
        if x.dim() != 2:
            self.last_error = ValueError("expected a matrix")
            return x
        return x * 2


compare(Validating, [(torch.randn(3),), (torch.randn(2, 2),), (torch.randn(3),)], records=2, graphs=1, breaks=1)
