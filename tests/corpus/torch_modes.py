# magpy-test: refused natively
# Torch function and dispatch modes the script enters and leaves between
# calls (mode.__enter__(), as `with mode:` around some calls does): their
# Python runs inside torch calls, where no record can follow it, so a
# record is made only without a mode (guarded: runtime.torch_modes) and a
# call under a mode runs as Python. Every call gives eager's results.
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from harness import compare

nn = torch.nn


class DoubleAdds(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__) else out


class NegateMuls(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return -out if func is torch.ops.aten.mul.Tensor else out


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return torch.add(self.lin(x), 1.0) * x + x


def switching(mode, on, off):
    def between(i, subject, reference):
        if i == on:
            mode.__enter__()
        elif i == off:
            mode.__exit__(None, None, None)
    return between


calls = [(torch.randn(2, 3),) for _ in range(6)]
with torch.no_grad():
    compare(Net, calls, between=switching(DoubleAdds(), 2, 4))
    compare(Net, calls, between=switching(NegateMuls(), 1, 3))
    compare(Net, calls, between=switching(DoubleAdds(), 0, 3))
print("torch modes: every call as eager")
