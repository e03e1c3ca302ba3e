# Iterating tensors (zip, enumerate, list, reversed) unbinds them with
# operators: one graph, its length guarded by the input's shape. Storing a
# Python number into a tensor (t[i] = v) lifts it into a tensor without an
# operator: a graph constant, guarded through v, so a changed v makes a
# new record.
import torch
import torch.nn as nn
from harness import compare


class Pairs(nn.Module):
    def forward(self, a, b):
        out = [x * y for x, y in zip(a, b)]
        out += [r + i for i, r in enumerate(reversed(a))]
        return torch.stack(out + list(b)) * len(tuple(a))


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fill = 3

    def forward(self, x):
        mask = x.new_zeros(4, 4)
        mask[1:3, 1:3] = self.fill
        mask[0, :] = 1
        return x + mask


def refill(i, subject, reference):
    if i == 2:
        subject.fill = reference.fill = 5


a, b = torch.randn(3, 2), torch.randn(3, 2)
compare(Pairs, [(a, b), (torch.randn(3, 2), b), (torch.randn(4, 2), torch.randn(4, 2))], records=2, graphs=2,
        breaks=0, hits=1)
x = torch.randn(4, 4)
compare(Masked, [(x,)] * 4, between=refill, records=2, graphs=2, breaks=0, hits=2)  # the fill is tensor data: guarded
