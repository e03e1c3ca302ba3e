# One module called in eval and training mode in turn: the training record
# writes batch norm's running statistics in place (an operator that bumps no
# version counter), and the eval record reads them. Native replay on the
# compiled backend freezes them into the eval graph (folded into the
# convolution): it must see the training record's writes.
import torch
import torch.nn as nn
from harness import compare


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


def switch(i, a, b):
    a.train(i % 2 == 1)
    b.train(i % 2 == 1)


with torch.no_grad():
    compare(ConvBN, [(torch.randn(2, 3, 5, 5),) for _ in range(6)], between=switch, records=2, graphs=2, hits=4, breaks=0)
