# magpy-test: refused natively
# Two layers share one list, which the script changes between calls:
# appends and pops through either layer (logged as in-place changes, so
# native replay keeps the two sharing it), one layer's list replaced by a
# copy (the two part), then the other made to share the copy again. A
# logged value is not the state's own object, so native replay refuses
# the calls after the last change; every call before it replays.
import torch
import torch.nn as nn

from harness import compare


class Scaled(nn.Module):
    def __init__(self, scales, i):
        super().__init__()
        self.scales, self.i = scales, i

    def forward(self, x):
        return x * self.scales[self.i] + len(self.scales)


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        scales = [1.0, 2.0]
        self.a, self.b = Scaled(scales, 0), Scaled(scales, -1)

    def forward(self, x):
        return self.a(x) + self.b(x)


def change(i, subject, reference):
    for m in (subject, reference):
        if i == 1:
            m.a.scales.append(5.0)
        elif i == 2:
            m.b.scales.pop(0)
        elif i == 3:
            m.a.scales = list(m.a.scales)
            m.a.scales.append(7.0)
        elif i == 4:
            m.b.scales.append(9.0)
        elif i == 5:
            m.b.scales = m.a.scales
            m.a.scales.reverse()
        elif i == 6:
            m.a.scales.sort()


with torch.no_grad():
    compare(Pair, [(torch.ones(3),) for _ in range(8)], between=change)
print("shared list changed between calls: every call as eager")
