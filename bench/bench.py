"""Per-call time of a model in eager PyTorch (Python) and in magpy-run
(native replay of its record), measured in one run, with their ratio.

    /usr/bin/python3 bench/bench.py [--models mlp] [--batches 1] [--calls 2000] [--out build/bench]

Writes OUT/results.md and prints it. Needs OpenBLAS installed (scripts/setup.sh)
and the tools built (scripts/build.sh). Every timing is a median over
--calls calls after warm-up, repeated --rounds times, alternating the two
sides so machine noise hits both; the table reports the median round.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import torch

import models

ROOT = models.ROOT
BIN = os.path.join(ROOT, "build", "bin")


def eager_us(model, inputs, calls):
    with torch.no_grad():
        for _ in range(max(20, calls // 10)):
            model(*inputs)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def capture(name, batch, out_dir):
    record = os.path.join(out_dir, f"{name}_b{batch}.mgp")
    subprocess.run([os.path.join(BIN, "magpy-capture"), "-q", "-o", record,
                    os.path.join(ROOT, "bench", "capture_model.py"), name, str(batch)],
                   check=True, cwd=out_dir)
    return record


def replay_us(record, calls):
    out = subprocess.run([os.path.join(BIN, "magpy-run"), record, "--repeat", str(calls),
                          "--threads", str(torch.get_num_threads())],
                         check=True, capture_output=True, text=True).stdout
    match = re.search(r"median ([0-9.]+) us per call", out)
    if not match:
        raise SystemExit(f"magpy-run printed no timing:\n{out}")
    return float(match.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mlp")
    p.add_argument("--batches", default="1")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rows = []
    for name in args.models.split(","):
        for batch in [int(b) for b in args.batches.split(",")]:
            model, inputs = models.build(name, batch)
            record = capture(name, batch, args.out)
            eager, native = [], []
            for _ in range(args.rounds):
                eager.append(eager_us(model, inputs, args.calls))
                native.append(replay_us(record, args.calls))
            e, n = statistics.median(eager), statistics.median(native)
            rows.append((name, batch, e, n, e / n))

    lines = [
        "# magpy benchmark results",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}, "
        f"{torch.get_num_threads()} intra-op threads; BLAS: {blas()}.",
        f"Median per-call time over {args.calls} calls after warm-up; median of {args.rounds} alternating rounds.",
        "",
        "| model | batch | eager PyTorch (us) | magpy-run (us) | eager / magpy-run |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, batch, e, n, ratio in rows:
        lines.append(f"| {name} | {batch} | {e:.1f} | {n:.1f} | {ratio:.2f}x |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"written to {os.path.join(args.out, 'results.md')}")


def blas():
    try:
        target = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
        return "OpenBLAS" if "openblas" in target else os.path.basename(os.path.dirname(target))
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
