# Paper, Figure 3c: DeBERTa-style side effect, self.dim = dim, then read back.
import torch
import torch.nn as nn
from harness import compare


class XSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.dim = -1

    def forward(self, inp, mask, dim):
        self.dim = dim
        output = inp.masked_fill(mask, float("-inf"))
        output = torch.softmax(output, self.dim)
        return output


torch.manual_seed(0)
x = torch.randn(3, 5)
mask = x > 1.0
# The dim argument changes once: lifted, one record computes softmax over either dim.
compare(XSoftmax, [(x, mask, 1), (x, mask, 1), (x, mask, 0), (x, mask, 0)], records=1, graphs=1, hits=2)
