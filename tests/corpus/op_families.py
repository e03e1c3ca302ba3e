# The operator families of the benchmark models, one module each: every
# record must run on magpy-run's compiled backend (lowered to TorchScript,
# libtorch's inference passes applied) and agree with operator-by-operator
# replay (corpus_test replays with --backend compiled and checks).
# magpy-test: compiled
import torch
import torch.nn as nn
import torch.nn.functional as F
from harness import compare


class ConvBlock(nn.Module):  # conv + batch norm folding, fused conv add relu, pooling
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.down = nn.Conv2d(3, 8, 1, stride=1)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = self.bn2(self.conv2(y))
        y = F.relu(y + self.down(x))
        return F.adaptive_avg_pool2d(F.max_pool2d(y, 2), 1).flatten(1), F.avg_pool2d(y, 2, ceil_mode=True)


class Decoder(nn.Module):  # transposed conv, upsampling, padding, concatenation, sigmoid
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.conv = nn.Conv2d(8, 2, 3)

    def forward(self, x):
        a = self.up(x)
        b = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = self.conv(F.pad(torch.cat([a, b], dim=1), (1, 1, 1, 1), mode="reflect"))
        return torch.sigmoid(y), F.interpolate(y, size=(5, 7), mode="nearest")


class Attention(nn.Module):  # linear, matmul, softmax with a mask, layer norm, gelu
    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
        scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e4)
        y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = self.norm(x + self.proj(y))
        return self.norm(x + self.ff(x))


class Embedder(nn.Module):  # embedding, gather, index_select, reductions, where, cumsum
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.pos = nn.Parameter(torch.randn(10, 6))

    def forward(self, ids):
        e = self.emb(ids) + self.pos.index_select(0, torch.arange(ids.shape[1]))
        top = e.max(dim=-1).values
        picked = torch.gather(e, 2, ids.unsqueeze(-1) % 6)
        return torch.where(top > 0, top, top * 0.1).cumsum(-1), picked.mean(), e.sum(dim=(0, 1))


class Recurrent(nn.Module):  # an LSTM cell unrolled: addmm, chunk, sigmoid, tanh, stack
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(5, 7)

    def forward(self, xs):
        h = c = torch.zeros(xs.shape[1], 7)
        outs = []
        for x in xs.unbind(0):
            h, c = self.cell(x, (h, c))
            outs.append(h)
        return torch.stack(outs).clamp(-0.5, 0.5).pow(2).sqrt()


class Training(nn.Module):  # batch norm statistics written, dropout drawn, in-place arithmetic
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        y = self.bn(self.conv(x))
        y.mul_(2).add_(1)
        return self.drop(F.elu(y))


def random_calls():
    """Training mode draws: each call seeded alike for the compiled and the eager copy."""
    import magpy
    from harness import same, same_state
    torch.manual_seed(0)
    subject = Training().train()
    torch.manual_seed(0)
    reference = Training().train()
    compiled = magpy.compile(subject)
    for i in range(3):
        x = torch.randn(2, 3, 6, 6)
        torch.manual_seed(50 + i)
        got = compiled(x.clone())
        torch.manual_seed(50 + i)
        assert same(got, reference(x.clone())), f"call {i}: result differs from eager"
        assert same_state(subject, reference), f"call {i}: state differs from eager"
    stats = compiled._magpy_stats()
    assert stats["records"] == 1 and stats["hits"] == 2, stats


with torch.no_grad():
    compare(lambda: ConvBlock().eval(), [(torch.randn(2, 3, 12, 12),) for _ in range(3)], records=1, graphs=1, hits=2)
    compare(lambda: Decoder().eval(), [(torch.randn(1, 4, 6, 6),) for _ in range(3)], records=1, graphs=1, hits=2)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    compare(lambda: Attention().eval(), [(torch.randn(2, 5, 16), mask) for _ in range(3)], records=1, graphs=1, hits=2)
    compare(lambda: Embedder().eval(), [(torch.randint(0, 20, (2, 4)),) for _ in range(3)], records=1, graphs=1, hits=2)
    compare(lambda: Recurrent().eval(), [(torch.randn(3, 2, 5),) for _ in range(3)], records=1, graphs=1, hits=2)
    random_calls()
