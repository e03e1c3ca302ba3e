"""Data-parallel training speed: samples per second of the small CNN of
examples/train_ddp.py (DistributedDataParallel over Gloo on loopback, 8
samples per batch per rank) at 1, 2 and 4 processes, for eager DDP, the
JIT (the same script under magpy-capture, after its first 20 steps) and
magpy-run --nproc-per-node on the captured records. One run; writes
bench/results/distributed.json and prints a table.

    python3 bench/distributed.py [--bin build/bin] [--batches 200] [--procs 1 2 4]

Every process of a run shares this machine's cores: with more processes
than cores the figures measure the sharing, not the scaling.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
script = os.path.join(root, "examples", "train_ddp.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranks(n, command):
    """Runs command once per rank with torchrun's environment; their outputs."""
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), PYTHONPATH=os.path.join(root, "python"), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate()[0] for p in procs]
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {' '.join(command)}\n{out}")
    return outs


def seconds(outputs, pattern):
    times = [float(m.group(1)) for out in outputs for m in [re.search(pattern, out)] if m]
    if len(times) != len(outputs):
        sys.exit("no timing in:\n" + "\n".join(outputs))
    return max(times)  # the step is synchronous: the slowest rank sets the pace


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(root, "build", "bin"))
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    options = parser.parse_args()
    capture, run = os.path.join(options.bin, "magpy-capture"), os.path.join(options.bin, "magpy-run")
    warmup = 20
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in options.procs:
            out = os.path.join(tmp, str(n))
            train = ["--mode", "ddp", "--batches", str(options.batches), "--steps", str(options.batches),
                     "--time-from", str(warmup)]
            eager = seconds(ranks(n, [sys.executable, script, out + "-eager"] + train), r"steps in ([\d.]+) s")
            jit = seconds(ranks(n, [capture, "-q", "-o", out + "/step.{rank}.mgp", script, out] + train),
                          r"steps in ([\d.]+) s")
            native = subprocess.run([run, "--nproc-per-node", str(n), "--threads", "1", "--no-check",
                                     out + "/step.{rank}.mgp", "--batches", out + "/shard_{rank}.pt"],
                                    capture_output=True, text=True)
            if native.returncode != 0:
                sys.exit(native.stdout + native.stderr)
            # each rank's training time; their outputs interleave, so take the slowest
            native_s = max(float(t) for t in re.findall(r"trained on \d+ batches in ([\d.]+) s", native.stdout))
            samples = n * 8
            row = {"processes": n,
                   "eager_samples_per_s": samples * (options.batches - warmup) / eager,
                   "jit_samples_per_s": samples * (options.batches - warmup) / jit,
                   "native_samples_per_s": samples * options.batches / native_s}
            rows.append(row)
            print(f"{n} processes: eager {row['eager_samples_per_s']:.0f}, JIT {row['jit_samples_per_s']:.0f}, "
                  f"magpy-run {row['native_samples_per_s']:.0f} samples/s", flush=True)
    result = {"machine_cores": os.cpu_count(), "batches_per_rank": options.batches, "warmup_steps": warmup,
              "threads_per_process": 1, "rows": rows}
    os.makedirs(os.path.join(here, "results"), exist_ok=True)
    with open(os.path.join(here, "results", "distributed.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
