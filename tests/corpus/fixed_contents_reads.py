# magpy-test: breaks
# Python reads of tensor contents (.item(), .tolist()) whose contents only
# graph constants decide (torch.tensor of sizes and arithmetic on it, as
# torchvision's detection transforms compute a scale factor) are constants
# the guards fix: one graph per input size. A read that an input or a later
# in-place write reaches (a view of a constant whose base an input then
# changes) is checked where the graph computes it (content_checks.py): a
# graph per value read. One a random draw reaches stays a graph break, and
# results stay eager's.
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


compare(ViewOfWrittenBase, [(torch.randn(2, 2),) for _ in range(3)], records=3, graphs=3, breaks=0)


class SliceOfWrittenBase(nn.Module):
    def forward(self, x):
        c = torch.zeros(2)
        v = c[:1]
        c.add_(x.sum())
        return x * (v * 2).item()


compare(SliceOfWrittenBase, [(torch.randn(2, 2),) for _ in range(3)], records=3, graphs=3, breaks=0)


class RandomScale(nn.Module):
    def forward(self, x):
        return x * torch.rand(1).mul(2).item()


compare(RandomScale, [(torch.randn(2, 2),) for _ in range(3)], reseed=True, records=1, graphs=0, breaks=1)


class InputScale(nn.Module):
    def forward(self, x):
        return x * x.abs().max().item()


compare(InputScale, [(torch.randn(2, 2),) for _ in range(3)], records=3, graphs=3, breaks=0)
