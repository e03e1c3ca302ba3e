# A small CNN: conv, batch norm in eval mode, pooling, flatten, linear head.
import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import compare


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2), nn.BatchNorm2d(16), nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(self.pool(x), 1)
        return F.log_softmax(self.head(self.drop(x)), dim=-1)


with torch.no_grad():
    compare(lambda: CNN().eval(), [(torch.randn(2, 3, 16, 16),)] * 3, records=1, graphs=1, hits=2, breaks=0)
