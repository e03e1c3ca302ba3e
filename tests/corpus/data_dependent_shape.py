# nonzero() makes a shape from tensor contents; reading that shape in Python
# is checked where the graph computes it, so a graph constant never goes
# stale: a record per shape read.
import torch
from harness import compare


def positives(x):
    idx = x.nonzero()
    n = idx.shape[0]
    return torch.zeros(n) + 1


def make():
    return positives


calls = [(torch.tensor([1.0, -1.0, 2.0]),), (torch.tensor([1.0, 0.0, 2.0]),), (torch.tensor([-1.0, -1.0, 2.0]),)]
compare(make, calls, records=2, graphs=2, breaks=0, hits=1)


# one_hot without num_classes takes its width from the largest label, and
# repeat_interleave with a tensor of repeats its length from their sum:
# reading either shape is checked too.
def widths(labels):
    onehot = torch.nn.functional.one_hot(labels)
    return torch.ones(onehot.shape[1]), torch.ones(torch.repeat_interleave(torch.ones(3), labels[:3]).shape[0])


calls = [(torch.tensor([0, 1, 2, 1]),), (torch.tensor([0, 1, 3, 1]),), (torch.tensor([2, 1, 1, 1]),)]
compare(lambda: widths, calls, records=3, graphs=3)
