# Tensors each call makes afresh stay distinct and fresh: two identical
# factories (an LSTM's zero state) are two tensors, a constant written in
# place or handed to the caller starts from its value again on every call,
# and an unused random draw still advances the generator. The caller writes
# into the results between calls, as real code does.
import torch

import magpy


def zero_state(x):
    h = torch.zeros(2, 3)
    c = torch.zeros(2, 3)
    h.add_(x)  # written in the graph: c must stay zero
    return h, c


def twin_results(x):
    a = x.clone()
    b = x.clone()
    return a, b  # the caller writes into a: b must not change


def accumulate(x):
    acc = torch.tensor([0.0, 0.0])
    acc.add_(x)
    return acc


def returned_constant(x):
    table = torch.tensor([1.0, 2.0])
    return table, x * 2


def unused_draw(x):
    torch.rand(3)  # unused, but it moves the generator
    return x + torch.rand(2)


def check(fn, calls, caller_writes=None, seeded=False):
    compiled = magpy.compile(fn)
    for i, x in enumerate(calls):
        if seeded:
            torch.manual_seed(10 + i)
        got = compiled(x.clone())
        if seeded:
            torch.manual_seed(10 + i)
        want = fn(x.clone())
        got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
        for g, w in zip(got, want):
            assert torch.equal(g, w), f"{fn.__name__} call {i}: {g} != {w}"
        if caller_writes:
            caller_writes(got)
            caller_writes(want)
            for g, w in zip(got, want):
                assert torch.equal(g, w), f"{fn.__name__} call {i} after the caller's writes: {g} != {w}"
    stats = compiled._magpy_stats()
    assert stats["records"] == 1 and stats["hits"] == len(calls) - 1, (fn.__name__, stats)


xs = [torch.full((2,), float(i)) for i in range(1, 5)]
check(zero_state, [torch.ones(2, 3)] * 4, caller_writes=lambda r: r[0].mul_(3))
check(twin_results, xs, caller_writes=lambda r: r[0].add_(100))
check(accumulate, xs)
check(returned_constant, xs, caller_writes=lambda r: r[0].add_(5))
check(unused_draw, xs, seeded=True)
