# Code that checks torch.__version__ (a TorchVersion: a str subclass whose
# comparisons parse versions in Python). The record guards its type and
# string value; the call log and the record's state hold both, so native
# replay checks the guard too. (packaging.version is imported first: its
# import inside the first comparison would be a graph break.)
import torch
import torch.nn as nn
import torch.torch_version
from harness import compare

torch.torch_version.Version.get_cls()


class Versioned(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if torch.__version__ >= "1.10":
            return self.fc(x) * 2
        return self.fc(x)


with torch.no_grad():
    compare(Versioned, [(torch.randn(2, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)
