# magpy-test: refused natively
# A path made to name another object between calls (self.c = self.b,
# where c was a): the record made at the later call reads the state as
# it is then. Its aliasing must not be merged into the state the run
# began in: native replay once took a, b and c for one object and gave
# call 0 a wrong result. Now call 0 replays with three objects as the
# script had, and the later call is refused (a logged update holds a
# copy, not the state's own object).
import torch
import torch.nn as nn

from harness import compare


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.ones(2)
        self.b = torch.full((2,), 3.0)
        self.c = self.a
        self.items = [self.a, torch.zeros(2)]

    def forward(self, x):
        return x * self.a + self.b * self.c + self.items[0] * self.items[1]


def change(i, subject, reference):
    for m in (subject, reference):
        if i == 2:
            m.c = m.b
        elif i == 3:
            m.items.reverse()


with torch.no_grad():
    compare(Mixed, [(torch.ones(2),) for _ in range(5)], between=change)
print("aliasing changed between calls: every call as eager")
