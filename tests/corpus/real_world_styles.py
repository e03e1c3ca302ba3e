# magpy-capture-args: --log-calls 64
# Module styles from real projects, each called with grad mode on and off
# in turn and compared with eager at every call: a GPT-2 block that builds
# its Softmax, Dropout and GELU inside forward, a memory-efficient Mish as
# a custom autograd Function, a quantization observer that updates its
# range under torch.no_grad() inside forward, frozen embeddings under
# a no_grad region feeding a trained head, and a GRU encoder whose fresh
# initial state is marked as needing no grad.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import compare


def alternate_grad(i, compiled, eager):
    torch.set_grad_enabled(i % 2 == 0)


class CausalSelfAttention(nn.Module):
    def __init__(self, d=16, heads=2, block=8):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.heads = heads
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = nn.Softmax(dim=-1)(att)
        att = nn.Dropout(0.1)(att)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPT2Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(nn.GELU()(self.fc(self.ln_2(x))))


tokens = [(torch.randn(2, 8, 16),) for _ in range(4)]
compare(GPT2Block, tokens, alternate_grad, reseed=True, records=1, graphs=1, breaks=0, hits=3)


class MishFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.mul(torch.tanh(F.softplus(x)))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        sx = torch.sigmoid(x)
        fx = torch.tanh(F.softplus(x))
        return grad * (fx + x * sx * (1 - fx * fx))


class MemoryEfficientMish(nn.Module):
    def forward(self, x):
        return MishFunction.apply(x)


class ConvMish(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.act = MemoryEfficientMish()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


images = [(torch.randn(2, 3, 6, 6),) for _ in range(4)]
# Grad on: forward only (the JIT runs it eagerly, native replay serves it); off: one graph.
compare(lambda: ConvMish().eval(), images, alternate_grad, records=2, graphs=1, breaks=0, hits=1, eager=1)


class RangeObserver(nn.Module):
    """A fake quantizer whose observer widens its range under no_grad."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("min_val", torch.tensor(0.0))
        self.register_buffer("max_val", torch.tensor(0.0))

    def forward(self, x):
        y = self.fc(x)
        with torch.no_grad():
            self.min_val.copy_(torch.minimum(self.min_val, y.min()))
            self.max_val.copy_(torch.maximum(self.max_val, y.max()))
        scale = (self.max_val - self.min_val).clamp(min=1e-6) / 255
        return y + (torch.round(y / scale) * scale - y).detach()


rows = [(torch.randn(3, 4),) for _ in range(4)]
compare(RangeObserver, rows, alternate_grad, records=2, graphs=2, breaks=0, hits=2)


class FrozenEmbeddingClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(20, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        with torch.no_grad():
            h = self.norm(self.embeddings(ids)).mean(1)
        return self.head(h)


ids = [(torch.randint(0, 20, (2, 5)),) for _ in range(4)]
compare(FrozenEmbeddingClassifier, ids, alternate_grad, records=2, graphs=2, breaks=0, hits=2)


class GRUEncoder(nn.Module):
    """An initial state made per call and marked as needing no grad."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 8, batch_first=True)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 8)
        h0.requires_grad = False
        out, h = self.gru(x, h0)
        return out[:, -1] + h[0]


sequences = [(torch.randn(2, 5, 4),) for _ in range(4)]
compare(GRUEncoder, sequences, alternate_grad, records=2, graphs=2, breaks=0, hits=2)
torch.set_grad_enabled(True)
