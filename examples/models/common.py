"""What the model scripts in this directory share: their command-line
options, and running a model compiled and eagerly on the same inputs, call
after call, stopping at the first result that differs.

Each model script defines build(batch, small, seed) -> (model, inputs) and
calls main(); run one under magpy-capture:

    magpy-capture examples/models/<model>.py [--batch N] [--calls N] [--small]

(python3 runs them too, with python/ on sys.path: magpy.compile is then
the identity.)
"""
import argparse
import json
import statistics
import time

import torch

import magpy


def options(description, batch=1, calls=3):
    """The options every model script takes; a script may add its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--batch", type=int, default=batch, help="inputs per call")
    p.add_argument("--calls", type=int, default=calls, help="calls to compare, each with fresh inputs")
    p.add_argument("--small", action="store_true", help="a smaller configuration of the same code (fast tests)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time", type=int, default=0, metavar="N",
                   help="then time N more calls of the compiled model (bench/evaluate.py reads the line it prints)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (default: torch's choice)")
    return p


def assert_same(got, want, where):
    """Results agree: same structure, tensors equal within float32 rounding."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{where}: expected a tensor, got {type(got).__name__}"
        torch.testing.assert_close(got, want, msg=lambda m: f"{where}: {m}")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {type(got).__name__} of {len(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def fresh_like(inputs, step):
    """Inputs of the same shapes with other values (integer tensors: ids)."""
    torch.manual_seed(1000 + step)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            out.append(torch.randn_like(x))
        elif isinstance(x, torch.Tensor) and x.dtype != torch.bool:
            high = int(x.max()) + 1 if x.numel() else 1
            out.append(torch.randint_like(x, 0, max(high, 2)))
        else:
            out.append(x)
    return tuple(out)


def run(name, model, inputs_for, calls, timed_calls=0):
    """Calls the compiled model and the model itself on inputs_for(step);
    then, if timed_calls, times that many calls of the compiled model on the
    first inputs and prints one line: MAGPY_TIMING {json}."""
    compiled = magpy.compile(model)
    call_seconds, eager_seconds = [], []
    with torch.no_grad():
        for step in range(calls):
            inputs = inputs_for(step)
            t0 = time.perf_counter()
            got = compiled(*inputs)
            t1 = time.perf_counter()
            want = model(*inputs)
            eager_seconds.append(time.perf_counter() - t1)
            call_seconds.append(t1 - t0)
            assert_same(got, want, f"{name}, call {step}")
        print(f"{name}: {calls} calls, results equal to eager")
        if timed_calls:
            inputs = inputs_for(0)
            # The JIT checks a record's compiled graph on its third call
            # without autograd (magpy-capture --backend): not timed.
            for _ in range(3):
                compiled(*inputs)
            times = []
            for _ in range(timed_calls):
                t0 = time.perf_counter()
                compiled(*inputs)
                times.append(time.perf_counter() - t0)
            stats = compiled._magpy_stats() if hasattr(compiled, "_magpy_stats") else {}
            print("MAGPY_TIMING " + json.dumps({"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
                                                "call_ms": [t * 1e3 for t in call_seconds],
                                                "eager_call_ms": [t * 1e3 for t in eager_seconds], "stats": stats}))


def main(name, build, description, add_options=None, **defaults):
    """The usual script: options, build, then `calls` calls with fresh inputs
    of one shape. Options that add_options(parser) adds go to build by name."""
    parser = options(description, **defaults)
    common = {a.dest for a in parser._actions}
    if add_options:
        add_options(parser)
    args = vars(parser.parse_args())
    extra = {k: v for k, v in args.items() if k not in common}
    if args["threads"]:
        torch.set_num_threads(args["threads"])
    model, inputs = build(batch=args["batch"], small=args["small"], seed=args["seed"], **extra)
    run(name, model, lambda step: inputs if step == 0 else fresh_like(inputs, step), args["calls"], args["time"])
