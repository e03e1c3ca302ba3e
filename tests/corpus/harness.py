"""Helpers for the corpus programs: each builds the same program twice,
runs one copy compiled and one eagerly on the same calls, and checks that
results and side effects agree on every call, then checks magpy's counts.

A corpus program runs under magpy-capture (tests/e2e/corpus_test.cpp runs
them all, then replays their records with magpy-run).
"""
import copy

import torch

import magpy


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and
                a.requires_grad == b.requires_grad and torch.equal(a, b) and same_grad(a, b))
    if isinstance(a, dict):  # keys in order; tensor keys (optimizer state) by value
        return (isinstance(b, dict) and len(a) == len(b) and
                all(same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(a.items(), b.items())))
    if isinstance(a, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.nn.Module) or (hasattr(a, "__dict__") and not callable(a) and not isinstance(a, type)):
        return type(a) == type(b) and same_state(a, b)
    return type(a) == type(b) and a == b


def same_grad(a, b):
    """Leaves' gradients agree (training steps write them)."""
    if not (a.is_leaf and b.is_leaf):
        return True
    if a.grad is None or b.grad is None:
        return a.grad is None and b.grad is None
    return same(a.grad, b.grad)


def same_state(a, b):
    """Attributes, parameters and buffers of two objects agree."""
    da, db = vars(a), vars(b)
    if set(da) != set(db):
        return False
    return all(same(da[k], db[k]) for k in da if not k.startswith("_") or k in ("_parameters", "_buffers", "_modules"))


def clone(args):
    return copy.deepcopy(args)


def expect_stats(compiled, **expected):
    stats = compiled._magpy_stats()
    for key, value in expected.items():
        assert stats[key] == value, f"{key}: expected {value}, got {stats[key]} ({stats})"
    return stats


def compare(make, calls, between=None, reseed=False, **expected):
    """make() builds (fn_or_module, state) pairs identically twice; each call
    in `calls` is an args tuple. `between(i, compiled_obj, eager_obj)` may
    change state before call i (the same change on both copies). With
    reseed, torch's generator is seeded alike (100 + i) before call i of
    each copy, so programs that draw random numbers draw the same ones."""
    torch.manual_seed(0)
    subject = make()
    torch.manual_seed(0)
    reference = make()
    compiled = magpy.compile(subject)
    for i, args in enumerate(calls):
        if between:
            between(i, subject, reference)
        if reseed:
            torch.manual_seed(100 + i)
        got = compiled(*clone(args))
        if reseed:
            torch.manual_seed(100 + i)
        want = reference(*clone(args))
        assert same(got, want), f"call {i}: result differs from eager:\n{got}\n{want}"
        if hasattr(subject, "__dict__") and not callable(getattr(subject, "__code__", None)):
            assert same_state(subject, reference), f"call {i}: state differs from eager"
    return expect_stats(compiled, **expected)


class TrainStep(torch.nn.Module):
    """The optimizer programs' step on a small CNN: zero_grad, two
    micro-batches of 2 accumulating gradients, clip_grad_norm_, the
    optimizer's step. `optimizer(params)` and `schedule(opt)` build them."""

    def __init__(self, optimizer, schedule=None, set_to_none=False):
        super().__init__()
        nn = torch.nn
        self.net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 5 * 5, 3))
        self._opt = optimizer(self.net.parameters())
        self._schedule = schedule(self._opt) if schedule else None
        self._set_to_none = set_to_none

    def forward(self, x, y):
        self._opt.zero_grad(set_to_none=self._set_to_none)
        total = 0
        for xs, ys in ((x[:2], y[:2]), (x[2:], y[2:])):
            loss = torch.nn.functional.cross_entropy(self.net(xs), ys) / 2
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self._opt.step()
        return total


def schedule_step(i, subject, reference):
    """A `between` for TrainStep: the learning-rate schedule steps before every call but the first."""
    if i > 0:
        subject._schedule.step()
        reference._schedule.step()


def step_batches(count=8):
    """TrainStep's calls: batches of 4 images 2x5x5 with 3 classes."""
    torch.manual_seed(0)
    return [(torch.randn(4, 2, 5, 5), torch.randint(0, 3, (4,))) for _ in range(count)]
