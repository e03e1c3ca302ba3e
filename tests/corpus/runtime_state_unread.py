# magpy-test: breaks
# Interpreter state a result depends on although the program never asks
# for it by name: inference mode decides whether autograd records an
# operator (requires_grad of a result made under enable_grad) and whether
# a tensor is an inference tensor; autocast decides an operator's result
# dtype, which the program reads. Each mode is switched between calls, as
# `with torch.inference_mode():` or `with torch.autocast(...)` around some
# calls does. Process settings torch keeps outside ATen (matmul precision,
# warn-always) run as Python. Every call gives eager's results.
import contextlib

import torch

import magpy
from harness import same

nn = torch.nn


def made_under_enable_grad(w, x):
    with torch.enable_grad():
        y = w * x
    return y.detach() + 1, y.requires_grad


def inference_flag(x):
    y = x * 2
    return y + 0, y.is_inference(), (1.0 if y.is_inference() else 2.0)


torch.manual_seed(0)
lin = nn.Linear(4, 4)


def dtype_branch(x):
    y = lin(x)
    return y.float() * (1.0 if y.dtype == torch.float32 else -1.0), y.element_size()


def matmul_precision(x):
    return x * (10.0 if torch.get_float32_matmul_precision() == "high" else 1.0)


def warn_always(x):
    return x * (100.0 if torch.is_warn_always_enabled() else 1.0)


def check(fn, modes, *args):
    compiled = magpy.compile(fn)
    for i, mode in enumerate(modes):
        with mode():
            got = compiled(*args)
        with mode():
            want = fn(*args)
        assert same(got, want), (fn.__name__, i, got, want)


plain = contextlib.nullcontext
inference = torch.inference_mode
autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
w, x = torch.ones(3, requires_grad=True), torch.ones(3)

with torch.no_grad():
    check(made_under_enable_grad, [plain, inference, plain, inference], w, x)
    check(inference_flag, [plain, inference, inference, plain], x)
    check(dtype_branch, [plain, autocast, autocast, plain, autocast], torch.randn(2, 4))


@contextlib.contextmanager
def setting(setter, getter, value):
    before = getter()
    setter(value)
    try:
        yield
    finally:
        setter(before)


high = lambda: setting(torch.set_float32_matmul_precision, torch.get_float32_matmul_precision, "high")  # noqa: E731
loud = lambda: setting(torch.set_warn_always, torch.is_warn_always_enabled, True)  # noqa: E731
check(matmul_precision, [plain, high, plain, high], x)
check(warn_always, [plain, loud, plain], x)
print("runtime state unread: every call as eager")
