"""Exports one model as TorchScript (torch.jit.trace, then torch.jit.freeze)
with its inputs, for the C++ runner.

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


name, batch, out, inputs_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
model, inputs = models.build(name, batch)
model = Flat(model).eval()
with torch.no_grad():
    traced = torch.jit.trace(model, inputs, strict=False)
    frozen = torch.jit.freeze(traced.eval())
frozen.save(out)
torch.save(tuple(inputs), inputs_file)
