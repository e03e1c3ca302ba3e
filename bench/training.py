"""Training steps on this machine: `opt.zero_grad()`, forward, backward and
`opt.step()` (torch.optim.SGD with momentum and weight decay, and AdamW
with weight decay) in one compiled step. Per step (median, one intra-op thread): eagerly, in
magpy's JIT (under magpy-capture, a step its record serves) and natively
(magpy-run --repeat, the record's first logged batch again and again, its
weights carried), for a small CNN (conv, batch norm, linear; 8x3x8x8)
and torchvision's ResNet-18 (10 classes; 8x3x64x64, --small 4x3x32x32).
Also the records, monitored steps, the record's size and capture's peak
memory. Writes build/bench/training.md.

    /usr/bin/python3 bench/training.py [--small] [--repeat N] [--runs N]

With --step, this file is the training script itself (what magpy-capture
runs, and what the eager timing runs in plain Python).
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "build", "bin")


def build(model_name, small):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    if model_name == "cnn":
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, padding=1)
                self.bn = nn.BatchNorm2d(8)
                self.fc = nn.Linear(8 * 8 * 8, 10)

            def forward(self, x):
                return self.fc(F.relu(self.bn(self.conv(x))).flatten(1))

        return Net(), (8, 3, 8, 8)
    import torchvision
    return torchvision.models.resnet18(num_classes=10), ((4, 3, 32, 32) if small else (8, 3, 64, 64))


def step_script(model_name, optimizer, small, steps):
    """Runs `steps` training steps (timed after the first three), printing MAGPY_TIMING."""
    import torch
    import torch.nn.functional as F

    import magpy

    torch.set_num_threads(1)
    model, shape = build(model_name, small)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    compiled = magpy.compile(step)
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(*shape, generator=generator), torch.randint(0, 10, (shape[0],), generator=generator)
    times = []
    for k in range(steps):
        t0 = time.perf_counter()
        compiled(x, y)
        times.append(time.perf_counter() - t0)
    stats = compiled._magpy_stats() if hasattr(compiled, "_magpy_stats") else {}
    print("MAGPY_TIMING " + json.dumps({"median_ms": statistics.median(times[3:]) * 1e3, "stats": stats}))


def run_step(model_name, optimizer, small, steps, record=None):
    script = [os.path.abspath(__file__), "--step", model_name, "--optimizer", optimizer, "--steps", str(steps)]
    script += ["--small"] if small else []
    if record:
        cmd = [os.path.join(BIN, "magpy-capture"), "-q", "--log-calls", "1", "-o", record] + script
        env = dict(os.environ)
    else:
        cmd = [sys.executable] + script
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))  # magpy.compile is the identity
    wrapped = [sys.executable, "-c", "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"] + cmd
    done = subprocess.run(wrapped, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    timing = json.loads(re.search(r"MAGPY_TIMING (.*)", done.stdout).group(1))
    timing["peak_mb"] = int(re.search(r"PEAK_KB (\d+)", done.stdout).group(1)) / 1024
    return timing


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="small configurations (a quick check of the script)")
    p.add_argument("--repeat", type=int, default=20, help="timed steps per measurement")
    p.add_argument("--runs", type=int, default=3,
                   help="measurements of each (eager, JIT, native taking turns); the table keeps each one's best")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "training.md"))
    p.add_argument("--step", help=argparse.SUPPRESS)
    p.add_argument("--optimizer", default="sgd", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.step:
        return step_script(args.step, args.optimizer, args.small, args.steps)

    import torch
    sys.path.insert(0, HERE)
    from dynamic import replay_time  # magpy-run --threads 1 --repeat N: ms per call
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, label in (("cnn", "small CNN"), ("resnet18", "ResNet-18 (torchvision)")):
            for optimizer, optimizer_label in (("sgd", "SGD"), ("adamw", "AdamW")):
                record = os.path.join(work, f"{name}_{optimizer}.mgp")
                # This machine is shared: the three take turns, so a busy
                # minute slows one run of each rather than all runs of one.
                eagers, jits, natives = [], [], []
                for _ in range(args.runs):
                    eagers.append(run_step(name, optimizer, args.small, args.repeat + 3))
                    jits.append(run_step(name, optimizer, args.small, args.repeat + 3, record))
                    natives.append(replay_time(record, args.repeat)[0])
                eager = min(eagers, key=lambda t: t["median_ms"])
                jit = min(jits, key=lambda t: t["median_ms"])
                rows.append((f"{label}, {optimizer_label}", jit["stats"], eager["median_ms"], jit["median_ms"],
                             min(natives), os.path.getsize(record) / 2**20, eager["peak_mb"], jit["peak_mb"]))
    lines = ["# Training steps", "",
             f"`/usr/bin/python3 bench/training.py{' --small' if args.small else ''}`; {platform.machine()}, "
             f"torch {torch.__version__}, 1 intra-op thread; median of {args.repeat} steps after 3 (the first "
             f"monitored), the same batch each step, weights carried; the best of {args.runs} such medians each, "
             "eager, JIT and native taking turns. One run; timings on this shared machine vary by 10-30% "
             "between runs.", "",
             "| model, optimizer | records / monitored steps | eager (ms) | magpy JIT (ms) | magpy native (ms) | eager / JIT "
             "| eager / native | record (MB) | peak MB eager / capture |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, stats, eager, jit, native, size, eager_mb, capture_mb in rows:
        lines.append(f"| {label} | {stats.get('records', '?')} / {stats.get('monitored', '?')} | {eager:.2f} | "
                     f"{jit:.2f} | {native:.2f} | {eager / jit:.2f} | {eager / native:.2f} | {size:.1f} | "
                     f"{eager_mb:.0f} / {capture_mb:.0f} |")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
