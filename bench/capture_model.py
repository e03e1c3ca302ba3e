"""Run by magpy-capture: compiles one benchmark model and calls it, so the
record holds its graph and a logged call to time.

    magpy-capture -o mlp.mgp bench/capture_model.py mlp 1
"""
import sys

import torch

import magpy
import models

name, batch = sys.argv[1], int(sys.argv[2])
model, inputs = models.build(name, batch)
compiled = magpy.compile(model)


def close(a, b):
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b)
    if isinstance(a, dict):
        return all(close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return all(close(x, y) for x, y in zip(a, b))
    return a == b


with torch.no_grad():
    for _ in range(3):
        out = compiled(*inputs)
    assert close(out, model(*inputs)), "compiled result differs from eager"
