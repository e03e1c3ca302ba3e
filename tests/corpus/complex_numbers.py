# magpy-test: breaks
# A complex Python number passed to an operator (x * (1 + 2j)) is a graph
# break that says so: records hold int, float and bool scalars. The call
# runs as Python, equal to eager.
import torch
import torch.nn as nn

from harness import compare


class ComplexScale(nn.Module):
    def forward(self, x):
        return (x * (1 + 2j)).real + 1


compare(ComplexScale, [(torch.randn(3),) for _ in range(2)], records=1, graphs=0, breaks=1)
