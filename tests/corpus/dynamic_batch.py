# A CNN called with batch sizes that change from call to call: the first
# two sizes make one dynamic record (batch size s0 >= 2), which serves
# every later size; batch size 1 keeps a record of its own.
import torch
import torch.nn as nn
from harness import compare


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x, scale):
        x = self.features(x) * scale
        return self.head(torch.flatten(x, 1)).softmax(-1)


batches = [2, 4, 3, 7, 1, 5, 16, 2, 1]
calls = [(torch.randn(n, 3, 8, 8), torch.rand(n, 1, 1, 1)) for n in batches]
with torch.no_grad():
    compare(lambda: CNN().eval(), calls, records=2, graphs=2, monitored=3, hits=6, breaks=0)
