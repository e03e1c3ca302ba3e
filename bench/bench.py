"""Per-call time of models in eager PyTorch (Python, no_grad), TorchScript
(torch.jit.trace + freeze, run from C++ with torch::jit::load) and magpy-run
(native replay of the model's record with each backend: aten, operator by
operator; compiled, lowered to TorchScript and optimized by libtorch; auto,
compiled where the first call shows it faster),
measured in one run with the same thread count; ratios to eager; record
load time, guard check time per call and peak memory.

    /usr/bin/python3 bench/bench.py [--models mlp:1,bert:1,resnet18:1,resnet18:8,resnet50:1,resnet50:8]
                                    [--calls N] [--rounds R] [--threads T] [--out build/bench]

Each side runs in a process of its own (so peak memory is its own); the
three alternate for --rounds rounds so machine noise hits all of them; a
figure is the median over rounds of the per-round median. Writes
OUT/results-<T>threads.md and prints it. Needs OpenBLAS (scripts/setup.sh) and a build
(scripts/build.sh).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys

import torch

import models

ROOT = models.ROOT
BIN = os.path.join(ROOT, "build", "bin")
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=models.MALLOC_ENV, **kw).stdout


def eager(name, batch, calls, threads):
    return json.loads(run([PY, os.path.join(HERE, "eager_runner.py"), name, str(batch), str(calls), str(threads)]))


def torchscript(module, inputs, calls, threads):
    return json.loads(run([os.path.join(BIN, "magpy-bench-torchscript"), module, inputs, str(calls), str(threads)]))


def replay(record, calls, threads, backend):
    out = run([os.path.join(BIN, "magpy-run"), record, "--repeat", str(calls), "--threads", str(threads),
               "--backend", backend])
    median = re.search(r"median ([0-9.]+) us per call .*guards ([0-9.]+) us", out)
    load = re.search(r"loaded in ([0-9.]+) ms", out)
    peak = re.search(r"peak memory ([0-9]+) MB", out)
    if not (median and load and peak):
        raise SystemExit(f"magpy-run printed no timing:\n{out}")
    return {"median_us": float(median.group(1)), "guard_us": float(median.group(2)), "load_ms": float(load.group(1)),
            "peak_mb": float(peak.group(1))}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="mlp:1,bert:1,resnet18:1,resnet18:8,resnet50:1,resnet50:8")
    p.add_argument("--calls", type=int, default=0, help="calls per measurement (default: by model size)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rows = []
    for spec in args.models.split(","):
        name, batch = spec.split(":")
        batch = int(batch)
        calls = args.calls or {"mlp": 2000, "bert": 50}.get(name, 20 if batch == 1 else 5)
        tag = f"{name}_b{batch}"
        record = os.path.join(args.out, tag + ".mgp")
        run([os.path.join(BIN, "magpy-capture"), "-q", "-o", record, os.path.join(HERE, "capture_model.py"), name,
             str(batch)], cwd=args.out)
        ts_module, ts_inputs = os.path.join(args.out, tag + ".ts.pt"), os.path.join(args.out, tag + ".inputs.pt")
        run([PY, os.path.join(HERE, "export_torchscript.py"), name, str(batch), ts_module, ts_inputs])
        results = {"eager": [], "ts": [], "aten": [], "compiled": [], "auto": []}
        for _ in range(args.rounds):
            results["eager"].append(eager(name, batch, calls, args.threads))
            results["ts"].append(torchscript(ts_module, ts_inputs, calls, args.threads))
            for backend in ("aten", "compiled", "auto"):
                results[backend].append(replay(record, calls, args.threads, backend))
        med = {k: statistics.median(r["median_us"] for r in v) for k, v in results.items()}
        last = {k: v[-1] for k, v in results.items()}
        rows.append((name, batch, med, last, statistics.median(r["guard_us"] for r in results["auto"])))
        print(f"{tag}: eager {med['eager']:.1f} us, torchscript {med['ts']:.1f} us, magpy-run auto {med['auto']:.1f} us",
              file=sys.stderr)

    lines = [
        "# Native replay benchmark",
        "",
        f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} intra-op threads for every side; torch "
        f"{torch.__version__}; BLAS: {models.blas()}; every side with glibc's large-block thresholds raised "
        f"(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, as magpy-run sets them). Median per-call time after warm-up (median over {args.rounds} "
        "alternating rounds). Ratios are eager time over the column's time (above 1: faster than eager).",
        "",
        "| model | batch | eager (ms) | TorchScript C++ (ms) | magpy-run aten (ms) | magpy-run compiled (ms) "
        "| magpy-run auto (ms) | TorchScript vs eager | aten vs eager | auto vs eager | auto vs TorchScript "
        "| record load (ms) | guards per call (us) | peak MB eager / TS / aten / auto |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, batch, med, last, guards in rows:
        ms = {k: v / 1000 for k, v in med.items()}
        lines.append(
            f"| {name} | {batch} | {ms['eager']:.3f} | {ms['ts']:.3f} | {ms['aten']:.3f} | {ms['compiled']:.3f} | "
            f"{ms['auto']:.3f} | {med['eager'] / med['ts']:.2f}x | {med['eager'] / med['aten']:.2f}x | "
            f"{med['eager'] / med['auto']:.2f}x | {med['ts'] / med['auto']:.2f}x | {last['auto']['load_ms']:.0f} | "
            f"{guards:.2f} | {last['eager']['peak_mb']:.0f} / {last['ts']['peak_mb']:.0f} / "
            f"{last['aten']['peak_mb']:.0f} / {last['auto']['peak_mb']:.0f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, f"results-{args.threads}threads.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
