"""The models the benchmarks time, by name: how to build each and its input.

Shared by bench.py (eager timing, in plain Python) and capture_model.py
(the script magpy-capture runs to record the same model).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "examples"), os.path.join(ROOT, "examples", "models"), os.path.join(ROOT, "python")]

import torch  # noqa: E402


def mlp(batch):
    from mlp import MLP
    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(batch, 16),)


def resnet18(batch):
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18().eval(), (torch.randn(batch, 3, 224, 224),)


def resnet50(batch):
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet50().eval(), (torch.randn(batch, 3, 224, 224),)


def bert(batch):
    import bert as bert_model
    return bert_model.build(batch, size="small", seq=128)


MODELS = {"mlp": mlp, "bert": bert, "resnet18": resnet18, "resnet50": resnet50}


def build(name, batch):
    if name not in MODELS:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    return MODELS[name](batch)


def blas():
    """The BLAS libtorch's CPU kernels use here (benchmarks need OpenBLAS)."""
    target = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    return "OpenBLAS" if "openblas" in target else target
