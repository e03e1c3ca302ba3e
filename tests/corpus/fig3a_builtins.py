# Paper, Figure 3a: builtins on Python values: list.extend with a generator,
# enumerate with a start, torch.Size(x.shape).numel().
import torch
import torch.nn as nn
from harness import compare


class Permuter(nn.Module):
    def forward(self, x):
        perm = [2, 1]
        perm.extend(i for i in range(x.dim()) if i not in perm)
        return x.permute(*perm)


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.down_blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        outs = []
        for i, block in enumerate(self.down_blocks, 2):
            x = block(x) * i
            outs.append(x)
        return outs


class Numel(nn.Module):
    def forward(self, x):
        return x * torch.Size(x.shape).numel()


torch.manual_seed(0)
compare(Permuter, [(torch.randn(2, 3, 4),)] * 3, records=1, graphs=1, hits=2)
compare(lambda: Blocks().eval(), [(torch.randn(2, 4),)] * 3, records=1, graphs=1, hits=2)
compare(Numel, [(torch.randn(3, 5),)] * 2 + [(torch.randn(2, 5),)], records=2, graphs=2, hits=1)
