"""What capture costs (the MagPy paper's Figure 16), run under magpy-capture:

    build/bin/magpy-capture --log-calls 0 -o build/bench/capture_cost.mgp bench/capture_cost.py \\
        [--models mlp,resnet18] [--calls 20] [--out build/bench]

For each model, in one process: a plain eager call, the monitored first
call (tracing plus record building; the median over --first-calls fresh
copies of the model, each compiled anew, since one monitored call is too
noisy to compare builds), and a replayed call split into guard check,
graph and mock. Writes OUT/capture_cost.md.
"""
import argparse
import os
import statistics
import time

import torch

import magpy
import models


def median_ms(fn, calls):
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def first_call(name, copy):
    """A fresh copy of the model compiled anew: its first call's time and stats,
    and its second call's time (the record's first hit, which plans its graph).
    Its weights are shifted by the copy's number: weights equal to an earlier
    copy's would skip copying them into the record (blobs are shared by content)."""
    model, inputs = models.build(name, 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(copy * 1e-3)
    compiled = magpy.compile(model)
    with torch.no_grad():
        t0 = time.perf_counter()
        compiled(*inputs)
        first = (time.perf_counter() - t0) * 1e3
        stats = compiled._magpy_stats()
        t0 = time.perf_counter()
        compiled(*inputs)
        first_hit = (time.perf_counter() - t0) * 1e3
    return first, stats, compiled, inputs, first_hit


def measure(name, calls, first_calls):
    twin, inputs = models.build(name, 1)
    with torch.no_grad():
        for _ in range(3):
            twin(*inputs)
        eager = median_ms(lambda: twin(*inputs), calls)
    firsts = sorted((first_call(name, k) for k in range(first_calls)), key=lambda f: f[0])
    first, first_stats, compiled, inputs, first_hit = firsts[len(firsts) // 2]
    with torch.no_grad():
        hit = median_ms(lambda: compiled(*inputs), calls)
    s = compiled._magpy_stats()
    hits = max(s["hits"], 1)
    return {
        "model": name,
        "eager": eager,
        "first": first,
        "first_hit": first_hit,
        "monitor": first_stats["monitor_seconds"] * 1e3,
        "build": first_stats["build_seconds"] * 1e3,
        "hit": hit,
        "guard": s["guard_seconds"] * 1e3 / hits,
        "graph": s["graph_seconds"] * 1e3 / hits,
        "mock": s["mock_seconds"] * 1e3 / hits,
        "guards": None,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp,resnet18")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--first-calls", type=int, default=5, help="fresh compiled copies per model (median first call)")
    p.add_argument("--out", default=os.path.join(models.ROOT, "build", "bench"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = [measure(name, args.calls, args.first_calls) for name in args.models.split(",")]
    lines = [
        "# Capture cost (batch 1, CPU)",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} threads. Times in ms; the monitored call is the median "
        f"over {args.first_calls} fresh copies, its parts from that copy; its first hit is that copy's second call "
        f"(a record's plan is made there); replayed-call parts are medians over {args.calls} calls.",
        "",
        "| model | eager call | monitored call | of which tracing | of which record building | monitored / eager "
        "| first hit | replayed call | guard check | graph | mock |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['eager']:.3f} | {r['first']:.3f} | {r['monitor']:.3f} | {r['build']:.3f} | "
            f"{r['first'] / r['eager']:.1f}x | {r['first_hit']:.3f} | {r['hit']:.3f} | {r['guard']:.3f} | "
            f"{r['graph']:.3f} | {r['mock']:.3f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "capture_cost.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
