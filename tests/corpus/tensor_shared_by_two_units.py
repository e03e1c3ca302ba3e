# magpy-test: refused natively
# Two compiled modules hold one tensor (tied weights): one steps it in
# place, the other reads it. A record file keeps each function's state
# apart, so natively the reader would read a copy the step never changed:
# the stepper's record is refused natively (the JIT follows the script).
import torch

import magpy

w = torch.zeros(2)


class Stepper(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        with torch.no_grad():
            self.w.add_(1)
        return x + 1


class Reader(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        return x + self.w


stepper, reader = magpy.compile(Stepper(w)), magpy.compile(Reader(w))
for i in range(4):
    stepper(torch.zeros(2))
    assert torch.equal(reader(torch.zeros(2)), torch.full((2,), float(i + 1)))
print("ok")
