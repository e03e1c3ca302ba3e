# magpy-capture-args: --log-calls 200
# BlockDrop-like networks: a random policy decides per call which residual
# blocks run (`if keep[i]:` on a one-element bool tensor). Records made at
# calls with other policies join, so the joined record runs policies no
# capture ran (2^4 of them from a handful of captures). Every call is
# compared with eager; the records replay natively on the logged calls.
import torch
import torch.nn as nn
from harness import compare


def policies(n, k, seed, shape=(3,)):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g), torch.rand(n, generator=g) > 0.5) for _ in range(k)]


class BlockDrop(nn.Module):
    # Four distinct blocks after a stem. The stem matters: both sides must
    # leave tensors of one kind in x (a side that skips every block would
    # leave a tensor without grad where the other leaves one with grad, and
    # the records stay apart); and a variable holding an input the graph
    # has not read yet keeps a branch a check.
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(3, 3)
        self.blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(4)])

    def forward(self, x, keep):
        x = self.stem(x)
        for i, blk in enumerate(self.blocks):
            if keep[i]:
                x = x + torch.relu(blk(x))
        return x


compare(BlockDrop, policies(4, 30, 1), records=1, graphs=1, breaks=0, hits=26)


class SharedBlock(nn.Module):
    # One block reused by every iteration, with an else side: the loop's
    # iterations are alike but for their branches' sides.
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(3, 3)
        self.l = nn.Linear(3, 3)

    def forward(self, x, keep):
        x = self.stem(x)
        for i in range(5):
            if keep[i]:
                x = self.l(x)
            else:
                x = x * 0.5
        return x


compare(SharedBlock, policies(5, 30, 2), records=1, graphs=1, breaks=0, hits=25)


class GatedByScores(nn.Module):
    # The policy comes from the network itself: thresholds of a score
    # vector computed from the input (p[i] > 0.5), read block by block.
    def __init__(self):
        super().__init__()
        self.policy = nn.Linear(3, 3)
        self.blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])

    def forward(self, x, unused):
        p = torch.sigmoid(self.policy(x))
        x = x * p  # requires grad on both sides
        for i in range(3):
            if p[i] > 0.5:
                x = x + self.blocks[i](x)
            else:
                x = x - 0.1
        return x, p


compare(GatedByScores, policies(1, 30, 3), records=1, graphs=1, breaks=0, hits=27)
