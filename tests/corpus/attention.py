# Self-attention written as research code: math.sqrt scaling, view /
# transpose / permute / contiguous, masked_fill, softmax, matmul.
import math

import torch
import torch.nn as nn
from harness import compare


class Attention(nn.Module):
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v)]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        out = scores.softmax(dim=-1) @ v
        out = out.permute(0, 2, 1, 3).contiguous().reshape(b, n, d)
        return self.proj(out)


x = torch.randn(2, 5, 16)
mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
with torch.no_grad():
    compare(Attention, [(x, mask)] * 3, records=1, graphs=1, hits=2, breaks=0)
