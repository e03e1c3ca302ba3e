# magpy-capture-args: --log-calls 32
"""Native replay pages out the state a compiled graph replaced with its own
copies (here the convolution's weight, batch norm folded into it): the
state stays the program's. Between calls the program reads that weight,
writes it in place (a private mapping copies the pages written), writes the
batch norm's statistics the folded weight came from, and rebinds the
weight; every call must give eager's results, in the JIT and when magpy-run
replays the log on the compiled backend (tests/e2e/corpus_test.cpp).
"""
import copy

import torch

import magpy

nn = torch.nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1)  # 18 KiB of weight: pages of its own
        self.bn = nn.BatchNorm2d(32)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def nudge(m):
    with torch.no_grad():
        m.conv.weight[0].mul_(1.5)
        m.bn.running_var.add_(0.25)


def peek(m):
    return m.conv.weight.sum() + m.bn.running_var.sum()


# The compiled functions reach the module through a global, as one state
# that native replay shares between them (a logged argument is a snapshot).
def run(x):
    return subject(x)


torch.manual_seed(0)
subject = Net().eval()
with torch.no_grad():
    subject.bn.running_mean.uniform_(-1, 1)
    subject.bn.running_var.uniform_(0.5, 2)
reference = copy.deepcopy(subject)
infer = magpy.compile(run)
nudged = magpy.compile(lambda: nudge(subject))
peeked = magpy.compile(lambda: peek(subject))
x = torch.randn(1, 16, 8, 8)


def check(label):
    with torch.no_grad():
        got, want = infer(x), reference(x)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), f"{label}: differs from eager by {(got - want).abs().max()}"
    got, want = peeked(), peek(reference)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-4), f"{label}: the state read back differs: {got} vs {want}"


for i in range(4):  # the third call compiles the graph
    check(f"call {i}")
for i in range(3):
    nudged(), nudge(reference)
    check(f"after in-place write {i}")
with torch.no_grad():
    for m in (subject, reference):
        m.conv.weight = nn.Parameter(torch.full_like(m.conv.weight, 0.01))
for i in range(3):
    check(f"after rebinding, call {i}")
assert infer._magpy_stats()["records"] == 1, infer._magpy_stats()
