"""A small multi-layer perceptron, compiled with magpy.

Run it with magpy-capture (python3 runs it too, without capturing):

    magpy-capture examples/mlp.py [batch]
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import magpy


class MLP(nn.Module):
    def __init__(self, sizes=(16, 32, 32, 8)):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])
        self.out = nn.Linear(sizes[2], sizes[3])
        self.scale = 0.5

    def hidden(self, x):
        return F.relu(self.fc2(F.relu(self.fc1(x))))

    def forward(self, x):
        y = self.out(self.hidden(x))
        return torch.tanh(y) * self.scale + y


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = magpy.compile(model)
    with torch.no_grad():
        for step in range(4):
            x = torch.randn(batch, 16)
            y = compiled(x)
            expected = model(x)
            assert torch.equal(y, expected), f"step {step}: compiled result differs from eager"
    print(f"mlp: 4 calls at batch {batch}, results equal to eager")


if __name__ == "__main__":
    main()
