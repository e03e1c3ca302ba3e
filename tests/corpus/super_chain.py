# super() through several levels, with arguments and keyword arguments.
import torch
import torch.nn as nn
from harness import compare


class Base(nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale


class Middle(Base):
    def forward(self, x, scale=1.0):
        return super().forward(x + 1, scale=scale * 2)


class Top(Middle):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return super(Top, self).forward(self.lin(x), 0.5)


compare(Top, [(torch.randn(2, 3),)] * 3, records=1, graphs=1, hits=2, breaks=0)
