# staticmethod and classmethod helpers, and a class attribute.
import torch
import torch.nn as nn
from harness import compare


class Helper(nn.Module):
    factor = 3.0

    @staticmethod
    def double(x):
        return x * 2

    @classmethod
    def scale(cls, x):
        return x * cls.factor

    def forward(self, x):
        return self.scale(self.double(x)) + Helper.double(x)


compare(Helper, [(torch.randn(3),)] * 3, records=1, graphs=1, hits=2, breaks=0)
