# Python reads of tensor contents (.item(), .tolist()) whose contents only
# graph constants decide (torch.tensor of sizes and arithmetic on it, as
# torchvision's detection transforms compute a scale factor) are constants
# the guards fix: one graph per input size. A number read with .item()
# that an input, a later in-place write (a view of a constant whose base
# an input then changes) or a random draw reaches is read by the graph
# (aten::item) where it computes it, after that write or draw: one graph
# serves every value. Results stay eager's.
import torch
import torch.nn as nn
from harness import compare


class ScaleToSize(nn.Module):
    def forward(self, x):
        size = torch.tensor(x.shape[-2:])
        scale = (8.0 / torch.min(size).to(torch.float32)).item()
        steps = torch.tensor(x.shape).tolist()
        return x * scale + steps[-1]


compare(ScaleToSize, [(torch.randn(2, n),) for n in (3, 4, 3, 5)], records=3, graphs=3, breaks=0, hits=1)


class ViewOfWrittenBase(nn.Module):
    def forward(self, x):
        c = torch.zeros(2)
        v = c.view(2)
        c.add_(x.sum())
        return x * v.sum().item()


compare(ViewOfWrittenBase, [(torch.randn(2, 2),) for _ in range(3)], records=1, graphs=1, breaks=0, hits=2)


class SliceOfWrittenBase(nn.Module):
    def forward(self, x):
        c = torch.zeros(2)
        v = c[:1]
        c.add_(x.sum())
        return x * (v * 2).item()


compare(SliceOfWrittenBase, [(torch.randn(2, 2),) for _ in range(3)], records=1, graphs=1, breaks=0, hits=2)


class RandomScale(nn.Module):
    def forward(self, x):
        return x * torch.rand(1).mul(2).item()


compare(RandomScale, [(torch.randn(2, 2),) for _ in range(3)], reseed=True, records=1, graphs=1, breaks=0, hits=2)


class InputScale(nn.Module):
    def forward(self, x):
        return x * x.abs().max().item()


compare(InputScale, [(torch.randn(2, 2),) for _ in range(3)], records=1, graphs=1, breaks=0, hits=2)
