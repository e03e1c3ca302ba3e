"""Time of the JIT's guard check on live objects, run under magpy-capture:

    build/bin/magpy-capture -q --log-calls 0 -o build/bench/jit_guards.mgp bench/jit_guards.py [--layers 60] [--calls 3000]

A Sequential of small Linear layers (about 13 guards per layer) is called
repeatedly; every call after the first is replayed from its record, and the
guard check's time per call is printed.
"""
import argparse

import torch

import magpy

parser = argparse.ArgumentParser()
parser.add_argument("--layers", type=int, default=60)
parser.add_argument("--calls", type=int, default=3000)
args = parser.parse_args()

model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(args.layers)]).eval()
compiled = magpy.compile(model)
x = torch.randn(1, 4)
with torch.no_grad():
    for _ in range(args.calls):
        compiled(x)
stats = compiled._magpy_stats()
print(f"jit guard check: {stats['guard_seconds'] / stats['hits'] * 1e6:.1f} us per replayed call "
      f"({stats['hits']} calls, {args.layers} layers)")
