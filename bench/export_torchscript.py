"""Exports a model as TorchScript (torch.jit.trace, then torch.jit.freeze)
with its inputs, for the C++ runner (magpy-bench-torchscript).

    /usr/bin/python3 bench/export_torchscript.py MODEL BATCH OUT.pt INPUTS.pt
"""
import sys

import torch

import models


def flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for k in value for t in flatten(value[k])]
    return [t for v in value for t in flatten(v)]


class Flat(torch.nn.Module):
    """torch.jit.trace takes neither dicts mixing tensors and tuples nor
    nested structures: the same computation, returning a flat tuple."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        return tuple(flatten(self.model(*inputs)))


def export(model, inputs, out, inputs_file):
    """Saves the frozen trace and the inputs; returns the frozen module."""
    with torch.no_grad():
        traced = torch.jit.trace(Flat(model).eval(), inputs, strict=False)
        frozen = torch.jit.freeze(traced.eval())
    frozen.save(out)
    torch.save(tuple(inputs), inputs_file)
    return frozen


if __name__ == "__main__":
    name, batch, out, inputs_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    export(*models.build(name, batch), out, inputs_file)
