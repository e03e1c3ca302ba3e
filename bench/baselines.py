"""Plain-PyTorch baselines for one model script of examples/models, in a
process of its own: eager time per call (torch.no_grad), whether
torch.jit.script and torch.fx.symbolic_trace take the model and give its
results on new inputs, and a TorchScript export (trace + freeze) for the
C++ runner, with whether the trace gives the model's results on new
inputs. Prints one JSON line.

    /usr/bin/python3 bench/baselines.py MODEL --out DIR [--batch N] [--small] [--calls N]
                                        [--threads T] [--kwargs JSON]
"""
import argparse
import importlib
import json
import os
import statistics
import time

import torch

import models  # noqa: F401  (puts examples/models and python/ on sys.path)
from common import assert_same, fresh_like
from export_torchscript import export, flatten


def first_line(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:200]


def close(got, want):
    """Normwise agreement: torch.jit.freeze folds batch norms into
    convolutions, which rounds differently from eager, so a frozen trace is
    compared against the output's scale rather than element by element."""
    return got.shape == want.shape and bool((got - want).abs().max() <= 1e-5 + 1e-4 * want.abs().max())


def attempt(make, inputs, expected):
    """{"ok": True} when make() works and its result equals expected on inputs."""
    try:
        compiled = make()
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        return {"ok": False, "stage": "compile", "error": first_line(e)}
    try:
        assert_same(compiled(*inputs), expected, "result")
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "stage": "run", "error": first_line(e)}
    return {"ok": True}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--small", action="store_true")
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--kwargs", default="{}", help="more arguments of the script's build(), as JSON")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    module = importlib.import_module(args.model)
    model, inputs = module.build(batch=args.batch, small=args.small, seed=0, **json.loads(args.kwargs))
    other = fresh_like(inputs, 1)
    result = {}
    with torch.no_grad():
        expected = model(*other)
        for _ in range(2):
            model(*inputs)
        times = []
        for _ in range(args.calls):
            t0 = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - t0)
        result["eager_ms"] = statistics.median(times) * 1e3
        result["script"] = attempt(lambda: torch.jit.script(model), other, expected)
        fx = attempt(lambda: torch.fx.symbolic_trace(model), other, expected)
        result["fx"] = fx
        ts_file = os.path.join(args.out, args.model + ".ts.pt")
        inputs_file = os.path.join(args.out, args.model + ".inputs.pt")
        try:
            frozen = export(model, inputs, ts_file, inputs_file)
            got = frozen(*other)
            same = len(got) == len(flatten(expected)) and all(close(g, w) for g, w in zip(got, flatten(expected)))
            result["trace"] = {"ok": True, "file": ts_file, "inputs": inputs_file, "same_on_new_inputs": same}
        except Exception as e:  # noqa: BLE001
            result["trace"] = {"ok": False, "error": first_line(e)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
