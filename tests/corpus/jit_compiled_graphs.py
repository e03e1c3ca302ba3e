# magpy-capture-args: --backend compiled
"""Calls with grad mode off run on compiled graphs in the JIT once their
record served two (--backend compiled). Each call's result must be eager's
within float tolerance (libtorch's passes reorder arithmetic), and the
state it leaves equal to eager's; writes to the state between calls must be
seen however the program makes them: through `.data` and numpy views (no
version shows them: without freeze_state the state stays a graph input),
and, with freeze_state=True, through torch operations and rebinding.
Calls with grad mode on keep running operator by operator with autograd.
"""
import torch

import magpy
from harness import same

nn = torch.nn


def close(a, b):
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and a.requires_grad == b.requires_grad and \
            torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


def same_params(a, b):
    return all(close(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 6 * 6, 5)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x))).flatten(1)))


def worlds(**compile_options):
    torch.manual_seed(0)
    subject = Net()
    torch.manual_seed(0)
    reference = Net()
    return subject, reference, magpy.compile(subject, **compile_options)


def check(label, compiled, subject, reference, x, seed=None, grad=False):
    with torch.set_grad_enabled(grad):
        if seed is not None:
            torch.manual_seed(seed)
        got = compiled(x)
        if seed is not None:
            torch.manual_seed(seed)
        want = reference(x)
    assert close(got, want), f"{label}: result differs from eager by {(got - want).abs().max()}"
    assert same_params(subject, reference), f"{label}: state differs from eager"
    return got, want


x = torch.randn(2, 3, 6, 6)

# Eval mode, no writes: the third hit checks the compiled graph against
# operator by operator, and later ones run it.
subject, reference, compiled = worlds()
subject.eval(), reference.eval()
for i in range(6):
    check(f"eval call {i}", compiled, subject, reference, x + i)
stats = compiled._magpy_stats()
assert stats["records"] == 1 and stats["compiled"] >= 2, stats

# Writes no version shows, between calls.
writes = [
    ("fc.weight.data scaled", lambda m: m.fc.weight.data.mul_(2)),
    ("conv.weight zeroed through numpy", lambda m: m.conv.weight.detach().numpy().__setitem__(0, 0.0)),
    ("bn.running_var filled through .data", lambda m: m.bn.running_var.data.fill_(3.0)),
    ("fc.bias set through numpy", lambda m: m.fc.bias.detach().numpy().__setitem__(slice(None), 1.5)),
]
before = compiled._magpy_stats()["compiled"]
for label, write in writes:
    write(subject), write(reference)
    check(label, compiled, subject, reference, x)
assert compiled._magpy_stats()["compiled"] == before + len(writes), compiled._magpy_stats()

# Grad mode on: operator by operator, gradients equal eager's exactly.
got, want = check("grad mode on", compiled, subject, reference, x, grad=True)
assert same(got, want), "grad mode on: result differs from eager"
got.sum().backward(), want.sum().backward()
assert all(same(a.grad, b.grad) for a, b in zip(subject.parameters(), reference.parameters()))
assert compiled._magpy_stats()["compiled"] == before + len(writes)

# Training mode under no_grad: batch norm writes its running statistics
# and dropout draws (the same seeds in both worlds).
subject.train(), reference.train()
for i in range(5):
    check(f"train-mode call {i}", compiled, subject, reference, x * (i + 1), seed=7 + i)
assert torch.allclose(subject.bn.running_mean, reference.bn.running_mean, rtol=1e-4, atol=1e-6)

# Frozen state: the program writes it only through torch operations.
subject, reference, compiled = worlds(freeze_state=True)
subject.eval(), reference.eval()
sgd = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (subject, reference)]


def optimizer_step(m, opt):
    opt.zero_grad()
    m(x).sum().backward()
    opt.step()


changes = [
    ("in-place under no_grad", lambda m, o: torch.no_grad()(lambda: m.fc.weight.mul_(2))()),
    ("load_state_dict", lambda m, o: m.load_state_dict({k: v + 0.5 for k, v in m.state_dict().items()})),
    ("parameter data rebound", lambda m, o: setattr(m.conv.weight, "data", torch.ones_like(m.conv.weight))),
    ("an optimizer's step", optimizer_step),
    ("buffer replaced", lambda m, o: setattr(m.bn, "running_mean", torch.full((8,), 0.25))),
]
for i in range(4):
    check(f"frozen call {i}", compiled, subject, reference, x + i)
for label, change in changes:
    for m, opt in zip((subject, reference), sgd):
        change(m, opt)
    for i in range(2):
        check(f"after {label}, call {i}", compiled, subject, reference, x - i)

# Per function: backend="aten" never compiles; a wrong name is refused.
subject, reference, compiled = worlds(backend="aten")
subject.eval(), reference.eval()
for i in range(4):
    check(f"aten call {i}", compiled, subject, reference, x)
assert compiled._magpy_stats()["compiled"] == 0
try:
    magpy.compile(Net(), backend="fast")
    raise AssertionError("backend='fast' was accepted")
except ValueError as e:
    assert "fast" in str(e), e
