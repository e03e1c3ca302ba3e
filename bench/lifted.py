"""Lifted numbers: Python ints and floats of the state that change from call
to call (a step counter, a learning rate, a temperature). Writes
build/bench/lifted.md.

1. Scenarios captured with `--dynamic auto` (the default: such numbers are
   lifted into the graph after the first guard miss on them) and
   `--dynamic off` (a record per value): records, monitored calls, and the
   total time of the compiled calls against the same calls run eagerly
   (inside magpy-capture, same inputs).
2. Native replay of a lifted record against the static record of the
   same function and inputs (magpy-run --repeat, alternating rounds).

    /usr/bin/python3 bench/lifted.py [--calls N] [--repeat N] [--rounds N]
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

import torch

import models
from dynamic import replay_time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "build", "bin")

# Each script defines `make()` (the object to compile, built the same way
# twice), `inputs(i)` and `between(i, obj)` (the script's own change of
# state before call i).
SGD = """
class Step:  # a hand-written SGD step: a counter and a decaying learning rate
    def __init__(self):
        torch.manual_seed(0)
        self.w = torch.randn(256, 256) * 0.05
        self.steps = 0
        self.base_lr = 0.1

    def __call__(self, x):
        self.steps = self.steps + 1
        lr = self.base_lr / (1 + 0.01 * self.steps)
        y = x @ self.w
        self.w = self.w - lr * (x.t() @ y) / x.shape[0]
        return y.square().mean()

make = Step
inputs = lambda i: (torch.randn(64, 256),)
between = lambda i, obj: None
"""

TEMPERATURE = """
import torchvision

def make():
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    class Tempered(torch.nn.Module):  # logits divided by a temperature the script anneals
        def __init__(self):
            super().__init__()
            self.net = model
            self.t = 2.0
        def forward(self, x):
            return (self.net(x) / self.t).softmax(-1)
    return Tempered()

inputs = lambda i: (torch.randn(1, 3, {image}, {image}),)
def between(i, obj):
    obj.t = 2.0 * 0.9 ** i
"""

TEMPERED_MLP = """
def make():
    torch.manual_seed(0)
    class Tempered(torch.nn.Module):  # a small MLP's logits over a temperature the script changes
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
            self.t = 2.0
        def forward(self, x):
            return self.net(x) / self.t
    return Tempered().eval()

inputs = lambda i: (torch.randn(4, 64),)
def between(i, obj):
    obj.t = 2.0 * 0.9 ** i
"""

DRIVER = """
import json, sys, time, torch, magpy
{body}
torch.set_num_threads(1)
subject, reference = make(), make()
f = magpy.compile(subject)
call_ms, eager_ms = [], []
with torch.no_grad():
    for i in range({calls}):
        between(i, subject)
        between(i, reference)
        x = inputs(i)
        t0 = time.perf_counter()
        got = f(*x)
        t1 = time.perf_counter()
        want = reference(*x)
        t2 = time.perf_counter()
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), i
        call_ms.append((t1 - t0) * 1e3)
        eager_ms.append((t2 - t1) * 1e3)
s = f._magpy_stats()
print("NUMBERS", json.dumps({{"records": s["records"], "monitored": s["monitored"], "magpy_s": sum(call_ms) / 1e3,
                              "eager_s": sum(eager_ms) / 1e3}}))
"""


def capture(work, name, body, calls, dynamic, log_calls=16):
    script = os.path.join(work, f"{name}_{dynamic}_{calls}.py")
    with open(script, "w") as f:
        f.write(DRIVER.format(body=body, calls=calls))
    out = os.path.join(work, f"{name}_{dynamic}_{calls}.mgp")
    done = subprocess.run([os.path.join(BIN, "magpy-capture"), "-q", "--dynamic", dynamic, "--log-calls", str(log_calls),
                           "-o", out, script], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"capturing {script} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return json.loads(re.search(r"NUMBERS (.*)", done.stdout).group(1)), out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=50, help="calls of the SGD scenario (the ResNet-18 one makes 20)")
    p.add_argument("--repeat", type=int, default=200, help="timed calls per magpy-run")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of static and lifted replay")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "lifted.md"))
    args = p.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    lines = ["# Lifted numbers", "",
             f"`/usr/bin/python3 bench/lifted.py`; {platform.machine()}, {os.cpu_count()} cores, torch "
             f"{torch.__version__}, BLAS: {models.blas()}; 1 intra-op thread. One run; timings on this shared machine "
             "vary by 10-30% between runs.", "",
             "## Numbers that change while capturing (total time of the calls, magpy JIT and eager, same inputs)", "",
             "| scenario | calls | records auto / off | monitored auto / off | magpy auto (s) | magpy off (s) | eager (s) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    scenarios = [("SGD step, 256x256 weights, step counter and decaying learning rate", "sgd", SGD, args.calls),
                 ("ResNet-18 (224x224, batch 1) with an annealed softmax temperature", "temperature",
                  TEMPERATURE.format(image=224), 20)]
    with tempfile.TemporaryDirectory() as work:
        for label, name, body, calls in scenarios:
            print(f"== {label}", file=sys.stderr)
            auto, _ = capture(work, name, body, calls, "auto")
            off, _ = capture(work, name, body, calls, "off")
            lines.append(f"| {label} | {calls} | {auto['records']} / {off['records']} | {auto['monitored']} / "
                         f"{off['monitored']} | {auto['magpy_s']:.2f} | {off['magpy_s']:.2f} | {auto['eager_s']:.2f} |")
        # A small model's last call, replayed from a static record (one
        # call captured) and from the lifted record (three calls with
        # another temperature each: the second lifts it).
        _, static = capture(work, "replay", TEMPERED_MLP, 1, "auto")
        stats, lifted = capture(work, "replay", TEMPERED_MLP, 3, "auto")
        assert stats["records"] == 1, stats
        times = {"static": [], "lifted": []}
        for _ in range(args.rounds):
            times["static"].append(replay_time(static, args.repeat))
            times["lifted"].append(replay_time(lifted, args.repeat))
        med = {k: (statistics.median(t for t, _ in v), statistics.median(g for _, g in v)) for k, v in times.items()}
        (st, sg), (lt, lg) = med["static"], med["lifted"]
        lines += ["", "## Native replay: the lifted record against the static record", "",
                  "An MLP (64-256-10, batch 4) whose logits are divided by a temperature; median of the medians of "
                  f"alternating `magpy-run --repeat {args.repeat} --threads 1` rounds.", "",
                  "| function | static (ms/call) | lifted (ms/call) | lifted / static | guards static / lifted (us) |",
                  "|---|---:|---:|---:|---|",
                  f"| tempered MLP | {st:.4f} | {lt:.4f} | {lt / st:.3f} | {sg:.2f} / {lg:.2f} |"]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
