# assert statements on shapes and types (they hold: no exception path runs).
import torch
from harness import compare


def checked(x, y):
    assert x.dim() == 2, "x must be a matrix"
    assert x.shape[1] == y.shape[0]
    assert isinstance(y, torch.Tensor)
    return x @ y


def make():
    return checked


compare(make, [(torch.randn(2, 3), torch.randn(3, 4))] * 3, records=1, graphs=1, hits=2, breaks=0)
