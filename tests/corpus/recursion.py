# A recursive Python function over a tree of modules.
import torch
import torch.nn as nn
from harness import compare


class Node(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.kids = nn.ModuleList([Node(depth - 1) for _ in range(2)] if depth > 0 else [])


def run(node, x):
    y = torch.tanh(node.lin(x))
    for kid in node.kids:
        y = y + run(kid, x)
    return y


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.root = Node(2)

    def forward(self, x):
        return run(self.root, x)


with torch.no_grad():
    compare(Tree, [(torch.randn(1, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)
