"""The MagPy paper's evaluation, reproduced on this machine (CPU), in one run:

  - graphs and graph breaks per model for magpy, torch.jit.script and
    torch.fx.symbolic_trace (the paper's Table 2; a failure counts as such,
    and so does a result that differs from eager on new inputs);
  - per-call time of eager PyTorch, TorchScript from C++ (trace + freeze),
    the magpy JIT inside magpy-capture, and magpy-run, with ratios to eager
    (Figure 15);
  - the cost of capture: the monitored first call split into monitoring and
    record building, against an eager call, and the guard check per call
    (Figure 16);
  - dynamic scenarios: batch size and sequence length changing between
    calls, a Python loop over an LSTM cell, and BlockDrop's tensor-valued
    branches (Figures 17 and 18): per-call times and records.

Writes bench/RESULTS.md and PNG plots in bench/results/ (matplotlib; or
under --results DIR), and the raw numbers in build/evaluate/results.json. Needs a build
(scripts/build.sh) and OpenBLAS (scripts/setup.sh).

    /usr/bin/python3 bench/evaluate.py [--models a,b] [--calls N] [--threads T] [--small]

--small runs every model in its small configuration (a quick check that
the harness works; its figures say nothing about speed).
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys

import torch

import models

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "build", "bin")
MODELS_DIR = os.path.join(ROOT, "examples", "models")
PY = "/usr/bin/python3"

# name: (description, build() keyword arguments, script options for them)
MODELS = {
    "resnet101": ("ResNet-101 (torchvision), 224x224", {}),
    "densenet121": ("DenseNet-121 (torchvision), 224x224", {}),
    "bert": ("BERT-base, sequence 256", {"size": "base", "seq": 256}),
    "deberta": ("DeBERTa-like, disentangled attention", {}),
    "monodepth": ("MonoDepth-like, 192x640, 4 disparity scales", {}),
    "quant_resnet": ("ResNet-50 fake-quantized after Banner et al.", {}),
    "trident": ("TridentNet-like, shared weights over 3 dilations", {}),
    "align": ("ALIGN-like two towers, dict output", {}),
}

DYNAMIC = [
    # label, script, arguments
    ("ResNet-101, batch 1-2-4-1-2-4", "varying.py", ["--model", "resnet101", "--vary", "batch", "--sizes", "1,2,4,1,2,4"]),
    ("BERT-base, sequence 64-128-256-64-128-256", "varying.py",
     ["--model", "bert", "--vary", "seq", "--sizes", "64,128,256,64,128,256"]),
    ("LSTM-cell loop, length 16-32-64-16-32-64", "lstm_loop.py", ["--lengths", "16,32,64,16,32,64"]),
    ("BlockDrop, tensor-valued branches", "blockdrop.py", ["--calls", "6"]),
]
SMALL_DYNAMIC_SIZES = {"batch": "1,2,1,2", "seq": "8,16,8,16", "lengths": "4,8,4,8"}


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, env=models.MALLOC_ENV, **kw)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def script_options(kwargs):
    out = []
    for k, v in kwargs.items():
        out += [f"--{k}", str(v)]
    return out


def capture(name, script, options, out, timed, threads, log_calls=16, jit_args=()):
    """magpy-capture of the script; returns its timing line and its report."""
    record = os.path.join(out, name + ".mgp")
    report = os.path.join(out, name + ".report.json")
    stdout = run([os.path.join(BIN, "magpy-capture"), "-q", "-o", record, "--report", report, "--format", "json",
                  "--log-calls", str(log_calls)] + list(jit_args) + [
                  os.path.join(MODELS_DIR, script)] + options + ["--time", str(timed), "--threads", str(threads)])
    line = next(l for l in stdout.splitlines() if l.startswith("MAGPY_TIMING "))
    with open(report) as f:
        return record, json.loads(line[len("MAGPY_TIMING "):]), json.load(f)


def replay(record, calls, threads, backend="aten"):
    out = run([os.path.join(BIN, "magpy-run"), record, "--repeat", str(calls), "--threads", str(threads),
               "--backend", backend])
    median = re.search(r"median ([0-9.]+) us per call .*guards ([0-9.]+) us", out)
    matched = re.search(r"replayed (\d+) calls natively: (\d+) matched", out)
    if not median or not matched:
        raise SystemExit(f"magpy-run printed no timing for {record}:\n{out}")
    return {"median_ms": float(median.group(1)) / 1e3, "guard_us": float(median.group(2)),
            "all_matched": matched.group(1) == matched.group(2)}


def magpy_counts(report):
    """Graphs and distinct breaks of the compiled model and its segments."""
    top = report["functions"][0]
    graphs = sum(r["graph"] for f in report["functions"] for r in f["records"])
    breaks = sum(len(f["breaks"]) for f in report["functions"] if not f["parent"])
    reasons = sorted({b["reason"] for f in report["functions"] for b in f["breaks"]})
    return {"records": len(top["records"]), "graphs": graphs, "breaks": breaks, "guards": top["records"][0]["guards"],
            "one_graph": all(r["graph"] for r in top["records"]), "reasons": reasons}


def evaluate_model(name, kwargs, args):
    print(f"== {name}", file=sys.stderr)
    base = json.loads(run([PY, os.path.join(HERE, "baselines.py"), name, "--out", args.work, "--calls", str(args.calls),
                           "--threads", str(args.threads), "--kwargs", json.dumps(kwargs)]
                          + (["--small"] if args.small else [])).splitlines()[-1])
    options = script_options(kwargs) + (["--small"] if args.small else [])
    # Only the checked calls are logged: logging (snapshots of inputs and
    # results, for replay) would otherwise be timed as part of the JIT.
    # Batch 1 as baselines.py times eager and TorchScript (a script may
    # default to another: align.py's main runs batch 2).
    # The JIT runs compiled graphs with the state frozen into them: the
    # scripts write no weights between calls.
    record, timing, report = capture(name, name + ".py", options + ["--batch", "1"], args.work, args.calls, args.threads,
                                     log_calls=3, jit_args=["--freeze-state"])
    result = {"baselines": base, "jit": timing, "counts": magpy_counts(report),
              "replay": replay(record, args.calls, args.threads),
              "replay_auto": replay(record, args.calls, args.threads, "auto")}
    if base["trace"]["ok"]:
        ts = json.loads(run([os.path.join(BIN, "magpy-bench-torchscript"), base["trace"]["file"],
                             base["trace"]["inputs"], str(args.calls), str(args.threads)]))
        result["torchscript_ms"] = ts["median_us"] / 1e3
    return result


def evaluate_dynamic(label, script, options, args):
    print(f"== {label}", file=sys.stderr)
    if args.small:
        options = list(options) + ["--small"]
        for i, opt in enumerate(options):
            if opt in ("--sizes", "--lengths"):
                kind = "lengths" if opt == "--lengths" else ("batch" if "batch" in options else "seq")
                options[i + 1] = SMALL_DYNAMIC_SIZES[kind]
    name = "dynamic_" + re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
    record, timing, report = capture(name, script, options, args.work, 1, args.threads)
    # Records with graph breaks need Python: magpy-run refuses them (exit 1).
    done = subprocess.run([os.path.join(BIN, "magpy-run"), record], capture_output=True, text=True)
    matched = re.search(r"replayed (\d+) calls natively: (\d+) matched", done.stdout)
    return {"label": label, "jit": timing, "counts": magpy_counts(report),
            "replay_matched": done.returncode == 0 and matched and matched.group(1) == matched.group(2)}


def fmt(ms):
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def verdict(attempt):
    if attempt["ok"]:
        return "1 graph"
    return ("fails: " if attempt.get("stage") == "compile" else "wrong result: ") + attempt["error"].replace("|", "/")


def write_results(results, dynamic, args, path):
    threads = args.threads
    lines = [
        "# magpy evaluation (the MagPy paper's, on this machine)",
        "",
        f"Regenerate with `/usr/bin/python3 bench/evaluate.py` (after `bash scripts/build.sh`). {platform.machine()}, "
        f"{os.cpu_count()} cores, {threads} intra-op threads everywhere; torch {torch.__version__}; BLAS: {models.blas()}; "
        f"batch 1; random weights; median of {args.calls} calls after warm-up; every process with glibc's large-block "
        "thresholds raised as magpy-run sets them (`MALLOC_ENV` in bench/models.py)"
        + ("; SMALL configurations (not a speed measurement)" if args.small else "") + ".",
        "",
        "## Graphs (the paper's Table 2)",
        "",
        "magpy: records of the model's forward over its calls, graphs captured (the forward's, and segments' "
        "where the forward breaks), distinct graph breaks. torch.jit.script and torch.fx.symbolic_trace: whether "
        "they take the model and give its results on new inputs.",
        "",
        "| model | magpy | torch.jit.script | torch.fx.symbolic_trace |",
        "|---|---|---|---|",
    ]
    for name, r in results.items():
        c = r["counts"]
        magpy = ("1 graph" if c["one_graph"] and c["records"] == 1 else
                 f"{c['graphs']} graphs, {c['breaks']} breaks")
        lines.append(f"| {MODELS[name][0]} | {magpy} | {verdict(r['baselines']['script'])} | "
                     f"{verdict(r['baselines']['fx'])} |")
    lines += [
        "",
        "## Inference time per call (the paper's Figure 15)",
        "",
        "ms per call; ratios are eager time over the column's time (above 1: faster than eager). TorchScript is "
        "torch.jit.trace + torch.jit.freeze run from C++; the magpy JIT is the compiled model called from Python "
        "inside magpy-capture (guards checked on live objects, the graph compiled with the state frozen into it "
        "(`--freeze-state`, backend auto: compiled where its first call shows it faster), mock applied); magpy-run is "
        "native replay with graph optimizations, operator by operator (`--backend aten`) and compiled where the "
        "first call shows it faster (`--backend auto`).",
        "",
        "| model | eager | TorchScript (C++) | magpy JIT | magpy-run aten | magpy-run auto | TS vs eager | JIT vs eager "
        "| aten vs eager | auto vs eager | auto vs TS | guards per call (us) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        eager = r["baselines"]["eager_ms"]
        ts = r.get("torchscript_ms")
        ts_note = "" if r["baselines"]["trace"].get("same_on_new_inputs", False) else " (trace wrong on new inputs)"
        jit, native, auto = r["jit"]["median_ms"], r["replay"]["median_ms"], r["replay_auto"]["median_ms"]
        lines.append(f"| {MODELS[name][0]} | {fmt(eager)} | {fmt(ts) + ts_note if ts else 'n/a'} | {fmt(jit)} | "
                     f"{fmt(native)} | {fmt(auto)} | {eager / ts if ts else float('nan'):.2f}x | {eager / jit:.2f}x | "
                     f"{eager / native:.2f}x | {eager / auto:.2f}x | {ts / auto if ts else float('nan'):.2f}x | "
                     f"{r['replay']['guard_us']:.0f} |")
    lines += [
        "",
        "## Cost of capture (the paper's Figure 16)",
        "",
        "The first call of each model under magpy-capture is monitored: its time splits into running the model "
        "under per-instruction monitoring and building the record (guards, mock, graph). Ratios are to an eager "
        "call of the same model.",
        "",
        "| model | eager call (ms) | monitored run (ms) | record building (ms) | capture vs eager | guards |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        stats, eager = r["jit"]["stats"], r["baselines"]["eager_ms"]
        monitor, build = stats["monitor_seconds"] * 1e3, stats["build_seconds"] * 1e3
        guards = r["counts"].get("guards", "")
        lines.append(f"| {MODELS[name][0]} | {fmt(eager)} | {fmt(monitor)} | {fmt(build)} | "
                     f"{(monitor + build) / eager:.1f}x | {guards} |")
    lines += [
        "",
        "## Dynamic shapes and control flow (the paper's Figures 17 and 18)",
        "",
        "ms per call, eager and magpy JIT side by side (inside magpy-capture, the same inputs). A shape seen for "
        "the first time is monitored and adds a record; a shape seen before replays its record.",
        "",
        "| scenario | records | graphs | breaks | per call: eager / magpy (ms) | native replay |",
        "|---|---:|---:|---:|---|---|",
    ]
    for d in dynamic:
        pairs = ", ".join(f"{fmt(e)}/{fmt(m)}" for e, m in zip(d["jit"]["eager_call_ms"], d["jit"]["call_ms"]))
        c = d["counts"]
        native = "all calls matched" if d["replay_matched"] else "refused (graph breaks need Python)"
        lines.append(f"| {d['label']} | {c['records']} | {c['graphs']} | {c['breaks']} | {pairs} | {native} |")
    breaks = [(name, r["counts"]["reasons"]) for name, r in results.items() if r["counts"]["reasons"]]
    breaks += [(d["label"], d["counts"]["reasons"]) for d in dynamic if d["counts"]["reasons"]]
    if breaks:
        lines += ["", "## Why graphs break", ""]
        for name, reasons in breaks:
            lines.append(f"- {name}: " + "; ".join(reasons))
    lines += ["", "Plots: `results/speed.png`, `results/capture.png`, `results/dynamic.png`."]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def plot(results, dynamic, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    labels = [n.replace("_", "\n") for n in names]
    eager = [results[n]["baselines"]["eager_ms"] for n in names]
    series = [
        ("TorchScript (C++)", [e / results[n]["torchscript_ms"] if results[n].get("torchscript_ms") else 0
                               for n, e in zip(names, eager)]),
        ("magpy JIT", [e / results[n]["jit"]["median_ms"] for n, e in zip(names, eager)]),
        ("magpy-run aten", [e / results[n]["replay"]["median_ms"] for n, e in zip(names, eager)]),
        ("magpy-run auto", [e / results[n]["replay_auto"]["median_ms"] for n, e in zip(names, eager)]),
    ]
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        ax.bar([x + i * width for x in range(len(names))], values, width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + width for x in range(len(names))], labels)
    ax.set_ylabel("speed-up over eager PyTorch")
    ax.set_title("Inference time per call, batch 1 (higher is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "speed.png"), dpi=120)

    fig, ax = plt.subplots(figsize=(10, 4))
    monitor = [results[n]["jit"]["stats"]["monitor_seconds"] * 1e3 / e for n, e in zip(names, eager)]
    build = [results[n]["jit"]["stats"]["build_seconds"] * 1e3 / e for n, e in zip(names, eager)]
    ax.bar(labels, monitor, label="monitored run")
    ax.bar(labels, build, bottom=monitor, label="record building")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("time of the first (monitored) call / eager call")
    ax.set_title("Cost of capture")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "capture.png"), dpi=120)

    if not dynamic:
        return
    fig, axes = plt.subplots(1, len(dynamic), figsize=(4 * len(dynamic), 3.5), squeeze=False)
    for ax, d in zip(axes[0], dynamic):
        calls = range(1, len(d["jit"]["call_ms"]) + 1)
        ax.plot(calls, d["jit"]["eager_call_ms"], "o-", label="eager")
        ax.plot(calls, d["jit"]["call_ms"], "s-", label="magpy")
        ax.set_yscale("log")
        ax.set_xlabel("call")
        ax.set_ylabel("ms")
        ax.set_title(d["label"], fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "dynamic.png"), dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--calls", type=int, default=10, help="timed calls per measurement")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--small", action="store_true")
    p.add_argument("--no-dynamic", action="store_true")
    p.add_argument("--work", default=os.path.join(ROOT, "build", "evaluate"), help="records, exports, raw numbers")
    p.add_argument("--results", default=HERE, help="where RESULTS.md and results/*.png go")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    results = {name: evaluate_model(name, MODELS[name][1], args) for name in args.models.split(",")}
    dynamic = [] if args.no_dynamic else [evaluate_dynamic(*d, args) for d in DYNAMIC]
    with open(os.path.join(args.work, "results.json"), "w") as f:
        json.dump({"models": results, "dynamic": dynamic}, f, indent=1)
    path = os.path.join(args.results, "RESULTS.md")
    write_results(results, dynamic, args, path)
    out = os.path.join(args.results, "results")
    os.makedirs(out, exist_ok=True)
    plot(results, dynamic, out)
    print(open(path).read())


if __name__ == "__main__":
    main()
