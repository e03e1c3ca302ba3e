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


# glibc gives large blocks back to the kernel and maps fresh pages for them
# on every call unless told otherwise; magpy-run keeps them (mallopt in its
# main), which alone makes convolution-heavy models up to 2x faster. Every
# side of a benchmark runs with these settings, so that timings compare
# eager PyTorch, TorchScript and magpy, not allocator configurations.
MALLOC_ENV = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(256 << 20), MALLOC_TRIM_THRESHOLD_=str(512 << 20))


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
    """The BLAS libtorch's CPU kernels use here (benchmarks need OpenBLAS),
    with the kernels OpenBLAS chose for this CPU: a CPU model newer than
    its tables gets its generic SSE3 ("Prescott") kernels, about 5x slower
    on a BERT-sized matmul than its AVX-512 ones on the same machine, so
    figures compare only within one core name (OPENBLAS_CORETYPE=SkylakeX
    picks the AVX-512 kernels)."""
    target = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    if "openblas" not in target:
        return target
    import ctypes
    corename = ctypes.CDLL(target).openblas_get_corename
    corename.restype = ctypes.c_char_p
    return f"OpenBLAS, {corename().decode()} kernels"
