# magpy-capture-args: --log-calls 64
# Grad mode regions inside the compiled function: `with torch.no_grad():`,
# `with torch.set_grad_enabled(...)`, torch.enable_grad() nested in them,
# a @torch.no_grad() helper. Their operators carry the region's mode, so
# each capture is one graph; the record guards the mode at entry, and
# results (requires_grad included) and parameters stay eager's at every
# call, called with grad on and off.
import torch
import torch.nn as nn
from harness import compare


def alternate_grad(i, compiled, eager):
    torch.set_grad_enabled(i % 2 == 0)


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        with torch.no_grad():
            feats = self.enc(x)
        return self.head(feats), feats.requires_grad


calls = [(torch.randn(2, 4),) for _ in range(6)]
compare(Frozen, calls, alternate_grad, records=2, graphs=2, breaks=0, hits=4)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        with torch.set_grad_enabled(False):
            y = self.a(x)
            with torch.enable_grad():
                z = self.b(y)  # requires grad even in a call made under no_grad
            w = z * 2
        return y, z, w, torch.is_grad_enabled()


compare(Nested, calls, alternate_grad, records=2, graphs=2, breaks=0, hits=4)


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = nn.Linear(4, 2)
        self.teacher = nn.Linear(4, 2)

    @torch.no_grad()
    def target(self, x):
        return self.teacher(x).softmax(-1)

    def forward(self, x):
        # The same operator in and out of the region: never merged.
        return self.student(x).softmax(-1) - self.target(x), self.teacher(x).softmax(-1)


torch.set_grad_enabled(True)
compare(Teacher, calls, records=1, graphs=1, breaks=0, hits=5)


class Ema(nn.Module):
    """Updates a running mean in place under no_grad (VQ-VAE, BYOL, mean teachers)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x):
        y = self.proj(x)
        with torch.no_grad():
            self.mean.mul_(0.9).add_(y.mean(0), alpha=0.1)
        return y - self.mean


compare(Ema, calls, records=1, graphs=1, breaks=0, hits=5)


class ByMode(nn.Module):
    """set_grad_enabled(self.training): the mode comes from state, guarded."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        with torch.set_grad_enabled(self.training):
            return self.fc(x)


def toggle_training(i, compiled, eager):
    compiled.train(i % 3 != 2)
    eager.train(i % 3 != 2)


compare(ByMode, calls, toggle_training, records=2, graphs=2, breaks=0, hits=4)


FREEZE = True


class ByFlags(nn.Module):
    """The mode from an argument and from a global, both changed between
    calls; torch.is_grad_enabled() inside the region reads the program's
    own switch; torch.no_grad patched to a do-nothing context manager."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, train):
        with torch.set_grad_enabled(train and not FREEZE):
            y = self.fc(x)
            if torch.is_grad_enabled():
                y = y * 2
        with torch.no_grad():
            z = self.fc(y)
        return y, z


def change_flags(i, compiled, eager):
    global FREEZE
    FREEZE = i in (2, 3)
    if i == 4:
        import contextlib
        torch.no_grad = contextlib.nullcontext


no_grad = torch.no_grad
flag_calls = [(torch.randn(2, 4), i % 2 == 0) for i in range(6)]
compare(ByFlags, flag_calls, change_flags, records=5, graphs=5, breaks=0, hits=1)
torch.no_grad = no_grad


@torch.no_grad()
def sgd_step(w, g):
    w -= 0.1 * g
    return w.sum()


w, w_ref = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
import magpy

step = magpy.compile(sgd_step)
for _ in range(3):
    got, want = step(w, torch.ones(3)), sgd_step(w_ref, torch.ones(3))
    assert torch.equal(got, want) and got.requires_grad == want.requires_grad
    assert torch.equal(w, w_ref)
