# Subscripts: reading and writing lists and dicts made inside the function,
# tensor indexing with ints, slices, None and Ellipsis.
import torch
import torch.nn as nn
from harness import compare


class Sub(nn.Module):
    def forward(self, x):
        parts = [x[0], x[1:], x[..., -1], x[:, None, 1]]
        table = {"a": parts[0], "b": parts[1]}
        table["c"] = parts[2] * 2
        parts[3] = parts[3] + 1
        return table["a"].sum() + table["b"].mean() + table["c"].max() + parts[-1].min()


compare(Sub, [(torch.randn(3, 4),)] * 3, records=1, graphs=1, hits=2, breaks=0)

