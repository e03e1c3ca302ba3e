# magpy-test: breaks
# A grad mode switch the call does not undo before it returns: a record
# replays grad mode regions only inside the call, so this is a graph break
# that names the line of the switch, and results stay eager's.
import torch
import torch.nn as nn
from harness import compare


class Leaves(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        torch.set_grad_enabled(False)
        return self.fc(x)


def reenable(i, compiled, eager):
    torch.set_grad_enabled(True)


compare(Leaves, [(torch.randn(2, 4),)] * 2, reenable, records=1, graphs=0, breaks=1)
torch.set_grad_enabled(True)


