"""Dynamic records: what they save while capturing, and what they cost in
native replay. Writes build/bench/dynamic.md.

1. Scenarios in the style of the MagPy paper's Figures 17 and 18: a model
   called with a batch size or sequence length that changes from call to
   call (an LSTM cell looped over the time steps in Python among them),
   captured with `--dynamic auto` (the default) and `--dynamic off`:
   records, monitored calls, and the total time of the compiled calls
   against the same calls run eagerly (inside magpy-capture, same inputs).
2. Native replay of a dynamic record against the static record of the same
   model at the same batch size (magpy-run --repeat, alternating rounds):
   time per call and guard time per call.

    /usr/bin/python3 bench/dynamic.py [--small] [--calls N] [--repeat N] [--rounds N]
"""
import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile

import torch

import models

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "build", "bin")
MODELS = os.path.join(ROOT, "examples", "models")


def scenarios(small, calls):
    rng = random.Random(0)
    batches = rng.sample(range(1, 17), 10)
    uniform = [rng.randint(2, 16) for _ in range(calls)]
    seqs = rng.sample(range(32, 257, 8), 10)
    bert_seqs = [8, 16, 12, 24] if small else seqs
    lengths = rng.sample(range(8, 65, 4), 10)
    return [
        ("ResNet-101, 10 batch sizes 1-16 in random order", ["--model", "resnet101", "--vary", "batch"], batches),
        (f"DenseNet-121, batch uniform in [2, 16], {calls} calls (Figure 17)", ["--model", "densenet121", "--vary", "batch"],
         uniform),
        ("BERT-base, 10 sequence lengths 32-256", ["--model", "bert", "--vary", "seq"], bert_seqs),
        ("DeBERTa-like, batch 8, 6 sequence lengths 32-256 (Figure 17)", ["--model", "deberta", "--vary", "seq", "--batch", "8"],
         bert_seqs[:4] if small else seqs[:6]),
        ("LSTM-cell loop over time steps, 10 lengths 8-64 (Figure 18)", ["lstm_loop.py", "--lengths"],
         lengths[:4] if small else lengths),
        (f"BlockDrop, a policy's `if` per block, {calls} inputs (Figure 18)", ["blockdrop.py", "--calls"], [calls]),
    ]


def capture(work, name, options, sizes, dynamic, small):
    out = os.path.join(work, f"{name}_{dynamic}.mgp")
    # varying.py's options, or a script of its own and its sizes option
    script, options = (options[0], options[1:]) if options[0].endswith(".py") else ("varying.py", options + ["--sizes"])
    cmd = [os.path.join(BIN, "magpy-capture"), "--dynamic", dynamic, "-o", out, os.path.join(MODELS, script),
           *options, ",".join(map(str, sizes)), "--time", "1"] + (["--small"] if small else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    timing = json.loads(re.search(r"MAGPY_TIMING (.*)", done.stdout).group(1))
    return {"records": timing["stats"]["records"], "monitored": timing["stats"]["monitored"],
            "magpy_s": sum(timing["call_ms"]) / 1e3, "eager_s": sum(timing["eager_call_ms"]) / 1e3}


MODEL_SCRIPT = """
import sys, torch, magpy
sys.path.insert(0, {models!r})
{build}
f = magpy.compile(model)
with torch.no_grad():
    for n in {sizes}:
        f(*x(n))
"""

# name: (what changes, its size in the timed call, the code that builds `model` and `x(n)`, the inputs of size n)
REPLAY_MODELS = {
    "mlp": ("batch", 4, "model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))"
            ".eval()\nx = lambda n: (torch.randn(n, 64),)"),
    "resnet50": ("batch", 4, "import torchvision\nmodel = torchvision.models.resnet50().eval()\n"
                 "x = lambda n: (torch.randn(n, 3, {image}, {image}),)"),
    "bert": ("sequence", 128, "from bert import build\nmodel, (ids, mask) = build(small={small})\n"
             "x = lambda n: (ids[:, :n].contiguous(), mask[:, :n].contiguous())"),
}


def replay_time(record, repeat):
    done = subprocess.run([os.path.join(BIN, "magpy-run"), record, "--threads", "1", "--repeat", str(repeat)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"magpy-run {record} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    m = re.search(r"median ([\d.]+) (us|ms) per call .*guards ([\d.]+) us", done.stdout)
    per_call = float(m.group(1)) / (1e3 if m.group(2) == "us" else 1)
    return per_call, float(m.group(3))


def replay_costs(work, small, repeat, rounds):
    rows = []
    for name, (varies, size, build) in REPLAY_MODELS.items():
        build = build.format(image=64 if small else 224, small=small)
        size = min(size, 16) if small else size
        records = {}
        # Static: one call at `size`. Dynamic: `size`, then another size,
        # which makes the first record dynamic; both serve the first call.
        for kind, sizes in (("static", [size]), ("dynamic", [size, size // 2, size])):
            script = os.path.join(work, f"replay_{name}_{kind}.py")
            with open(script, "w") as f:
                f.write(MODEL_SCRIPT.format(models=MODELS, build=build, sizes=sizes))
            records[kind] = os.path.join(work, f"replay_{name}_{kind}.mgp")
            subprocess.run([os.path.join(BIN, "magpy-capture"), "-q", "-o", records[kind], script], check=True)
        times = {"static": [], "dynamic": []}
        for _ in range(rounds):
            for kind in ("static", "dynamic"):
                times[kind].append(replay_time(records[kind], repeat))
        med = {k: (statistics.median(t for t, _ in v), statistics.median(g for _, g in v)) for k, v in times.items()}
        rows.append((name, f"{varies} {size}", med["static"], med["dynamic"]))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="small models and inputs (a quick check)")
    p.add_argument("--calls", type=int, default=20, help="calls of the uniform-batch scenario")
    p.add_argument("--repeat", type=int, default=30, help="timed calls per magpy-run")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of static and dynamic replay")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "dynamic.md"))
    args = p.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    lines = ["# Dynamic records", "",
             f"`/usr/bin/python3 bench/dynamic.py{' --small' if args.small else ''}` (about 15 minutes); "
             f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, BLAS: {models.blas()}; 1 intra-op "
             "thread for replay. One run; timings on this shared machine vary by 10-30% between runs.", "",
             "## Changing sizes while capturing (total time of the calls, magpy JIT and eager, same inputs)", "",
             "| scenario | sizes | records auto / off | monitored auto / off | magpy auto (s) | magpy off (s) | eager (s) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as work:
        for label, options, sizes in scenarios(args.small, args.calls):
            print(f"== {label}", file=sys.stderr)
            auto = capture(work, "s", options, sizes, "auto", args.small)
            off = capture(work, "s", options, sizes, "off", args.small)
            lines.append(f"| {label} | {','.join(map(str, sizes))} | {auto['records']} / {off['records']} | "
                         f"{auto['monitored']} / {off['monitored']} | {auto['magpy_s']:.2f} | {off['magpy_s']:.2f} | "
                         f"{auto['eager_s']:.2f} |")
        lines += ["", "## Native replay: dynamic record against the static record of the same model", "",
                  "Median of the medians of alternating `magpy-run --repeat` rounds, same batch size and inputs.", "",
                  "| model | what changes | static (ms/call) | dynamic (ms/call) | dynamic / static | guards static / dynamic (us) |",
                  "|---|---:|---:|---:|---:|---|"]
        for name, what, (st, sg), (dt, dg) in replay_costs(work, args.small, args.repeat, args.rounds):
            lines.append(f"| {name} | {what} | {st:.3f} | {dt:.3f} | {dt / st:.3f} | {sg:.2f} / {dg:.2f} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
