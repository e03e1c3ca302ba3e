"""Captures every model of the torchvision and torchaudio zoos
(bench/zoo_model.py) with magpy-capture, replays each record natively with
magpy-run, and writes a table: records and graph breaks (with reasons),
whether the JIT's results equal eager's, whether native replay's do, and the
first (monitored) call's time against an eager call's.

    /usr/bin/python3 bench/zoo.py [--models a,b,...] [--out bench/ZOO.md]
    /usr/bin/python3 bench/zoo.py --models ci --require-whole   # the tests' subset

--require-whole fails (exit 1) unless every model listed is captured as
whole graphs (no break), with JIT and native results equal to eager.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from zoo_model import CI_SUBSET, MODELS  # noqa: E402


def run(cmd, timeout):
    start = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - start
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s", timeout


def first_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def breaks_of(report):
    """Distinct break reasons of the model's own records (not of the segments
    the JIT compiles around them), with how often each came."""
    reasons = {}
    for fn in report.get("functions", []):
        if fn.get("parent"):
            continue
        for b in fn.get("breaks", []):
            key = f"{b['where']} {b['reason']}"
            reasons[key] = reasons.get(key, 0) + 1
    return reasons


def records_of(report):
    top = [fn for fn in report.get("functions", []) if not fn.get("parent")]
    records = [r for fn in top for r in fn.get("records", [])]
    return sum(1 for r in records if r.get("graph")), len(records)


def zoo_one(name, bin_dir, work, timeout, capture_args=()):
    record, report_file = os.path.join(work, name + ".mgp"), os.path.join(work, name + ".json")
    row = {"model": name, "jit_equal": False, "native_equal": False, "breaks": {}, "graphs": 0, "records": 0}
    rc, out, err, seconds = run([os.path.join(bin_dir, "magpy-capture"), "-q", "-o", record, "--report", report_file,
                                 "--format", "json"] + list(capture_args) + [os.path.join(HERE, "zoo_model.py"), name],
                                timeout)
    row["capture_s"] = round(seconds, 1)
    result = [line for line in out.splitlines() if line.startswith("MAGPY_ZOO ")]
    if rc != 0 or not result:
        row["error"] = "capture: " + (first_line(err) or first_line(out) or f"exit {rc}")
        return row
    row.update(json.loads(result[0][len("MAGPY_ZOO "):]))
    with open(report_file) as f:
        report = json.load(f)
    row["breaks"] = breaks_of(report)
    row["graphs"], row["records"] = records_of(report)
    rc, out, err, _ = run([os.path.join(bin_dir, "magpy-run"), record], timeout)
    row["native_equal"] = rc == 0
    if rc != 0:
        lines = [line.strip() for line in (out + err).splitlines() if "record 0" in line or "magpy-run:" in line]
        row["native_error"] = lines[-1] if lines else first_line(err) or f"exit {rc}"
    return row


def environment():
    import platform

    import torch
    import torchaudio
    import torchvision
    return (f"{platform.machine()}, {os.cpu_count()} cores; torch {torch.__version__}, torchvision "
            f"{torchvision.__version__}, torchaudio {torchaudio.__version__}")


HEADER = """# The model zoos: torchvision and torchaudio under magpy

Written by `/usr/bin/python3 bench/zoo.py --out bench/ZOO.md` ({env}). Each
model is built with random weights in eval mode (`bench/zoo_model.py`
says how and at which input size), compiled with `magpy.compile`, and called
under `torch.no_grad()` on two inputs and on the first again; every result
is compared with eager PyTorch's (the same random seed before each).
Then `magpy-run` replays the record's logged calls natively and compares
them with the captured results. "Whole graphs / records": records
without a graph break, of all the model's records (a record with a break
runs as Python through the JIT, and native replay refuses it). "First
call": the monitored call that makes the record; "eager call": one eager
call on the second input (the machine is shared: compare within a row).

"""


def markdown(rows, seconds):
    def yes(flag):
        return "yes" if flag else "**no**"

    out = [HEADER.format(env=environment()).rstrip("\n"), "",
           "| model | whole graphs / records | breaks | JIT = eager | native = eager | first call / eager call |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            out.append(f"| {r['model']} | - | - | - | - | {r['error'][:160]} |")
            continue
        ratio = f"{r['first_call_s']:.2f} s / {r['eager_s'] * 1e3:.0f} ms" if r.get("eager_s") else "-"
        breaks = "; ".join(f"{k} (x{n})" if n > 1 else k for k, n in r["breaks"].items()) or "none"
        native = yes(r["native_equal"]) + ("" if r["native_equal"] or r["breaks"] else
                                           f": {r.get('native_error', '')[:160]}")
        out.append(f"| {r['model']} | {r['graphs']} / {r['records']} | {breaks[:400]} | {yes(r['jit_equal'])} "
                   f"| {native} | {ratio} |")
    whole = sum(1 for r in rows if not r.get("error") and r["graphs"] == r["records"] and not r["breaks"])
    native = sum(1 for r in rows if r.get("native_equal"))
    jit = sum(1 for r in rows if r.get("jit_equal"))
    out += ["", f"{len(rows)} models: {jit} with JIT results equal to eager, {whole} captured as whole graphs, "
                f"{native} replayed natively with results equal to eager ({seconds:.0f} s in all)."]
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="all", help="comma-separated names, 'all' or 'ci'")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="where magpy-capture and magpy-run are")
    p.add_argument("--out", help="write the Markdown table here (and the rows as JSON next to it)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per capture or replay")
    p.add_argument("--require-whole", action="store_true", help="fail unless every model is whole and equal")
    p.add_argument("--capture-args", default="", help="extra magpy-capture options (\"--backend compiled --freeze-state\")")
    args = p.parse_args()
    names = list(MODELS) if args.models == "all" else CI_SUBSET if args.models == "ci" else args.models.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"zoo: unknown models {unknown}; known: {', '.join(MODELS)}")
    rows, start = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            row = zoo_one(name, args.bin, work, args.timeout, args.capture_args.split())
            rows.append(row)
            print(json.dumps(row), flush=True)
    table = markdown(rows, time.perf_counter() - start)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(rows, f, indent=1)
    if args.require_whole:
        bad = [r["model"] for r in rows if r.get("error") or r["breaks"] or r["graphs"] != r["records"]
               or not r["jit_equal"] or not r["native_equal"]]
        if bad:
            sys.exit(f"zoo: not whole or not equal to eager: {', '.join(bad)}")


if __name__ == "__main__":
    main()
