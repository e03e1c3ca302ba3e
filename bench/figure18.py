"""The MagPy paper's Figure 18 on this machine: dynamic control flow.

Two models whose Python decides per call, each timed per call (median, one
intra-op thread) eagerly, scripted by TorchScript (torch.jit.script of the
same module), in magpy's JIT (under magpy-capture, a call its record
serves) and natively (magpy-run --repeat), on the same inputs:

- an LSTM language model looped over time steps and over 10 stacked
  LSTMCells (hidden 256) in Python: magpy rolls the time loop into a loop
  region (one record for every length);
- BlockDrop: a policy network's decisions skip residual blocks with
  `if keep[0, i]:`; magpy joins the sides into branches (one record for
  every policy).

Also the records and monitored calls the capture made. Writes
build/bench/figure18.md.

    /usr/bin/python3 bench/figure18.py [--small] [--repeat N]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "build", "bin")
MODELS = os.path.join(ROOT, "examples", "models")
sys.path[:0] = [MODELS, os.path.join(ROOT, "python")]  # magpy.compile is the identity in plain Python

import blockdrop  # noqa: E402
import lstm_loop  # noqa: E402
from dynamic import replay_time  # noqa: E402  (magpy-run --threads 1 --repeat N: ms per call)


def cases(small):
    lengths = "16,40,24,32,8" if small else "32,80,48,64,16,40"
    return [
        ("LSTM, 10 LSTMCells (hidden 256) looped over time steps", "lstm_loop.py",
         ["--lengths", lengths] + ([] if small else ["--layers", "10", "--hidden", "256"]),
         lambda: lstm_inputs(small, lengths)),
        ("BlockDrop, blocks skipped by a policy's `if`", "blockdrop.py", ["--calls", "12"],
         lambda: blockdrop.build(small=small)),
    ]


def lstm_inputs(small, lengths):
    model, vocab = lstm_loop.build(small=small, layers=10, hidden=256) if not small else lstm_loop.build(small=True)
    torch.manual_seed(0)  # the first call's inputs, as lstm_loop.py makes them
    return model, (torch.randint(0, vocab, (1, int(lengths.split(",")[0]))),)


def per_call_ms(fn, inputs, repeat):
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def measure(work, label, script, options, make, small, repeat):
    record = os.path.join(work, script.replace(".py", ".mgp"))
    cmd = [os.path.join(BIN, "magpy-capture"), "-o", record, os.path.join(MODELS, script), *options,
           "--threads", "1", "--time", str(repeat)] + (["--small"] if small else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    timing = json.loads(re.search(r"MAGPY_TIMING (.*)", done.stdout).group(1))
    native_ms, _ = replay_time(record, repeat)
    model, inputs = make()
    eager_ms = per_call_ms(model, inputs, repeat)
    scripted_ms = per_call_ms(torch.jit.script(model), inputs, repeat)
    stats = timing["stats"]
    return (label, stats["records"], stats["monitored"], len(timing["call_ms"]), eager_ms, scripted_ms,
            timing["median_ms"], native_ms)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="small configurations (a quick check of the script)")
    p.add_argument("--repeat", type=int, default=30, help="timed calls per measurement")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "figure18.md"))
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for label, script, options, make in cases(args.small):
            rows.append(measure(work, label, script, options, make, args.small, args.repeat))
    lines = ["# Figure 18: dynamic control flow", "",
             f"`/usr/bin/python3 bench/figure18.py{' --small' if args.small else ''}`; {platform.machine()}, "
             f"torch {torch.__version__}, 1 intra-op thread; median of {args.repeat} calls on the first call's "
             "inputs. One run; timings on this shared machine vary by 10-30% between runs.", "",
             "| model | records | monitored / calls | eager (ms) | TorchScript (ms) | magpy JIT (ms) | magpy native (ms) "
             "| eager / native | TorchScript / native |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, records, monitored, calls, eager, scripted, jit, native in rows:
        lines.append(f"| {label} | {records} | {monitored} / {calls} | {eager:.2f} | {scripted:.2f} | {jit:.2f} | "
                     f"{native:.2f} | {eager / native:.2f} | {scripted / native:.2f} |")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
