"""check.py BIN_DIR SEED COUNT [BATCH] [--generator NAME] [--keep-going] [--no-grad]
[--capture-args ARGS]:
generates programs SEED..SEED+COUNT-1 (generate.py, or perturb.py with
--generator perturb), runs them in batches under magpy-capture (each
compared with eager at every call), then replays each batch's record with
magpy-run --keep-going: no result may differ. A failure prints the seed and
the program. Prints one summary line; exit 0 when everything agreed.
--keep-going reruns a failing batch one program at a time and goes on, so
the summary names every failing seed. --no-grad (perturb only) makes every
call with grad mode off; --capture-args adds magpy-capture options, so
    --generator perturb --no-grad --capture-args "--backend compiled --compile-after 0"
runs each record's calls after the first on the JIT's compiled graphs.

    /usr/bin/python3 tests/soundness/check.py build/bin 0 300       # what CI runs
    /usr/bin/python3 tests/soundness/check.py build/bin 1000 5000   # by hand
    /usr/bin/python3 tests/soundness/check.py build/bin 0 200 --generator perturb --keep-going
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


GENERATORS = {"generate": "generate.py", "perturb": "perturb.py"}


def check_batch(bindir, generator, work, start, n, options):
    """Runs programs start..start+n-1: (None, replayed, refused) when they agree, else (message, 0, 0)."""
    driver = os.path.join(work, f"soundness_{start}.py")
    record = os.path.join(work, f"soundness_{start}.mgp")
    with open(driver, "w") as out:
        subprocess.run([sys.executable, os.path.join(HERE, generator), str(start), str(n)] + options["generator"],
                       stdout=out, check=True)
    cap = subprocess.run([os.path.join(bindir, "magpy-capture"), "-q", "--log-calls", "1000000", "-o", record]
                         + options["capture"] + [driver], capture_output=True, text=True, cwd=work)
    if cap.returncode != 0:
        crash = f" (killed by signal {-cap.returncode})" if cap.returncode < 0 else ""
        return f"programs {start}..{start + n - 1} under magpy-capture{crash}:\n{cap.stdout}{cap.stderr}", 0, 0
    compiled = re.search(r"(\d+) calls ran compiled graphs", cap.stdout)
    options["compiled_calls"] = options.get("compiled_calls", 0) + (int(compiled.group(1)) if compiled else 0)
    run = subprocess.run([os.path.join(bindir, "magpy-run"), "--keep-going", record], capture_output=True,
                         text=True)
    summary = re.search(r"^replayed (\d+) calls natively", run.stdout, re.M)
    skipped = re.search(r"; (\d+) functions refused", run.stdout)
    if "MISMATCH" in run.stdout or run.returncode not in (0, 1) or not summary:
        return (f"programs {start}..{start + n - 1}: native replay differs from eager:\n{run.stdout}{run.stderr}",
                0, 0)
    return None, int(summary.group(1)), int(skipped.group(1)) if skipped else 0


def main():
    args = sys.argv[1:]
    keep_going = "--keep-going" in args
    options = {"generator": ["--no-grad"] if "--no-grad" in args else [], "capture": []}
    args = [a for a in args if a not in ("--keep-going", "--no-grad")]
    if "--capture-args" in args:
        at = args.index("--capture-args")
        options["capture"] = args[at + 1].split()
        del args[at:at + 2]
    generator = "generate"
    if "--generator" in args:
        at = args.index("--generator")
        generator = args[at + 1]
        del args[at:at + 2]
    if generator not in GENERATORS:
        print(f"check.py: --generator must be one of {', '.join(GENERATORS)}")
        return 2
    bindir, seed, count = os.path.abspath(args[0]), int(args[1]), int(args[2])
    batch = int(args[3]) if len(args) > 3 else 100
    replayed = refused = 0
    failing = []
    with tempfile.TemporaryDirectory() as work:
        for start in range(seed, seed + count, batch):
            n = min(batch, seed + count - start)
            failure, r, s = check_batch(bindir, GENERATORS[generator], work, start, n, options)
            if failure and keep_going and n > 1:  # one program at a time, to name every failing seed
                for one in range(start, start + n):
                    failure, r, s = check_batch(bindir, GENERATORS[generator], work, one, 1, options)
                    if failure:
                        print(f"soundness: {failure}")
                        failing.append(one)
                    replayed, refused = replayed + r, refused + s
                continue
            if failure:
                print(f"soundness: {failure}")
                if not keep_going:
                    return 1
                failing.append(start)
            replayed, refused = replayed + r, refused + s
    if failing:
        print(f"soundness: {len(failing)} of {count} programs ({generator}) failed: seeds {failing}")
        return 1
    which = "" if generator == "generate" else f" ({generator})"
    if "compiled" in options["capture"]:  # the mode must keep reaching compiled graphs
        if not options.get("compiled_calls"):
            print("soundness: no call ran a compiled graph (--capture-args asked for them)")
            return 1
        which += f", {options['compiled_calls']} calls on compiled graphs"
    print(f"soundness: {count} programs{which} agreed with eager at every call; {replayed} calls replayed "
          f"natively with the captured results, {refused} programs refused natively (graph breaks or guards on "
          f"Python values) from some call on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
