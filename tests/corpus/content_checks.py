# magpy-capture-args: --log-calls 64
# Python reads of what the graph computes from the call's data: .item(),
# int(t), bool(t) and the sizes of results whose shape depends on tensor
# contents (nonzero). Each read becomes a check in the graph: a call that
# reads other values stops at the check and is monitored anew, so a
# record serves exactly the calls that read what it saw. Every call is
# compared with eager; the records replay natively (magpy-run) on the
# logged calls, whose checks pass or send them to the next record.
# content_checks_breaks.py has the reads that stay graph breaks.
import torch
import torch.nn as nn
from harness import compare


def lengths_mask(lengths):
    # torchaudio's Conformer: a padding mask as long as the longest sequence.
    max_length = int(torch.max(lengths).item())
    return torch.arange(max_length, dtype=lengths.dtype).expand(lengths.shape[0], max_length) >= lengths.unsqueeze(1)


class PaddedMean(nn.Module):
    def forward(self, x, lengths):
        mask = lengths_mask(lengths)
        keep = (~mask).unsqueeze(-1).to(x.dtype)
        return (x[:, : mask.shape[1]] * keep).sum(1) / lengths.unsqueeze(1).to(x.dtype)


# The record checks the longest length, not the lengths: other data or
# other lengths of the same maximum hit; another maximum makes a record.
xs = [torch.randn(2, 6, 3) for _ in range(5)]
compare(PaddedMean, [(xs[0], torch.tensor([5, 3])), (xs[1], torch.tensor([5, 3])), (xs[2], torch.tensor([6, 2])),
                     (xs[3], torch.tensor([5, 1])), (xs[4], torch.tensor([6, 4]))],
        records=2, graphs=2, breaks=0, hits=3)


class ScaleByOwnNorm(nn.Module):
    # The value read feeds only tensor arithmetic (x * t.item()): the graph
    # reads it (aten::item) at every call, and no check is needed.
    def forward(self, x, gain):
        return x * gain.item() + 1


compare(ScaleByOwnNorm, [(torch.randn(3), torch.tensor(2.0)), (torch.randn(3), torch.tensor(2.0)),
                         (torch.randn(3), torch.tensor(0.5)), (torch.randn(3), torch.tensor(2.0))],
        records=1, graphs=1, breaks=0, hits=3)


class RoundedGain(nn.Module):
    # round() of the value is no graph arithmetic: the record checks the
    # value it read, and another value makes a record.
    def forward(self, x, gain):
        return x * round(gain.item(), 2) + 1


compare(RoundedGain, [(torch.randn(3), torch.tensor(2.0)), (torch.randn(3), torch.tensor(2.0)),
                      (torch.randn(3), torch.tensor(0.5)), (torch.randn(3), torch.tensor(2.0))],
        records=2, graphs=2, breaks=0, hits=2)


class BranchOnAny(nn.Module):
    # bool() of a comparison: the record checks the branch's condition,
    # not the data, so other data on the same side hits.
    def forward(self, x):
        if (x > 2).any():
            return x.clamp(max=2)
        return x * 2


calls = [(torch.randn(4),), (torch.tensor([0.5, 3.0, 1.0, 0.0]),), (torch.randn(4),), (torch.tensor([9.0, 0, 0, 0]),)]
compare(BranchOnAny, calls, records=2, graphs=2, breaks=0, hits=2)


class KeepPositive(nn.Module):
    # The number of positives decides a shape Python builds.
    def forward(self, x):
        idx = torch.nonzero(x > 0)
        n = idx.size(0)
        return torch.zeros(n, 2) + x[idx[:, 0]].unsqueeze(1)


calls = [(torch.tensor([1.0, -1.0, 2.0]),), (torch.tensor([3.0, 4.0, -5.0]),), (torch.tensor([1.0, 1.0, 1.0]),)]
compare(KeepPositive, calls, records=2, graphs=2, breaks=0, hits=1)


class ItemOfParameter(nn.Module):
    # A parameter read into Python: changed between calls, the graph reads
    # its new value.
    def __init__(self):
        super().__init__()
        self.temperature = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        return x / self.temperature.detach().item()


def retemper(i, compiled, eager):
    if i == 2:
        for m in (compiled, eager):
            with torch.no_grad():
                m.temperature.fill_(4.0)


compare(ItemOfParameter, [(torch.randn(3),) for _ in range(4)], between=retemper, records=1, graphs=1, breaks=0, hits=3)


class ReadThenCount(nn.Module):
    # The graph writes a buffer after the read: a call whose check fails
    # stops before the write, so the read is checked.
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        positive = bool(x.sum() > 0)
        self.calls.add_(1)
        return x * 2 if positive else -x


calls = [(torch.tensor([1.0, 2.0]),), (torch.tensor([-1.0, -2.0]),), (torch.tensor([3.0, 1.0]),), (torch.tensor([-3.0, 1.0]),)]
compare(ReadThenCount, calls, records=2, graphs=2, breaks=0, hits=2)

