"""Record size and capture peak memory of training scripts (what the call
log keeps while a script changes its weights between calls):

    /usr/bin/python3 bench/record_size.py [--bin build/bin] [--steps 6] [--out build/bench]

Captures one training script (an MLP with 16 MiB of weights, SGD, one
compiled forward per step) three ways: the call log without a byte budget
(--log-budget none), with the default budget, and with --state-at exit.
Writes OUT/record_size.md: record bytes, capture's peak memory (RSS, from
/usr/bin/time), and plain Python's peak for the same script.
"""
import argparse
import os
import subprocess
import sys
import tempfile

SCRIPT = '''
import sys, torch, torch.nn as nn
try:
    import magpy
    compile = magpy.compile
except ImportError:  # plain Python: no magpy module
    compile = lambda m: m
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
forward = compile(model)
for step in range(int(sys.argv[1])):
    x = torch.randn(8, 1024)
    loss = forward(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def peak_mib(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True, check=True)
    return int(out.stderr.strip().splitlines()[-1]) / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--out", default="build/bench")
    args = p.parse_args()
    capture = os.path.join(os.path.abspath(args.bin), "magpy-capture")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        python = peak_mib([sys.executable, script, str(args.steps)])
        for label, options in (("call log, no budget (--log-budget none)", ["--log-budget", "none"]),
                               ("call log, default budget", []),
                               ("--state-at exit", ["--state-at", "exit"])):
            record = os.path.join(work, "r.mgp")
            peak = peak_mib([capture, "-q", "-o", record] + options + [script, str(args.steps)])
            rows.append((label, os.path.getsize(record) / 2**20, peak))
    lines = ["# Record size of a training script", "",
             f"`/usr/bin/python3 bench/record_size.py --steps {args.steps}`: an MLP with 16 MiB of weights, "
             f"{args.steps} SGD steps, its forward compiled. Plain Python's peak memory: {python:.0f} MiB.", "",
             "| capture | record (MiB) | capture peak (MiB) |", "|---|---:|---:|"]
    lines += [f"| {label} | {size:.1f} | {peak:.0f} |" for label, size, peak in rows]
    path = os.path.join(args.out, "record_size.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
