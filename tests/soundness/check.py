"""check.py BIN_DIR SEED COUNT [BATCH]: generates programs SEED..SEED+COUNT-1
(generate.py), runs them in batches under magpy-capture (each compared with
eager at every call), then replays each batch's record with magpy-run
--keep-going: no result may differ. A failure prints the seed and the
program. Prints one summary line; exit 0 when everything agreed.

    /usr/bin/python3 tests/soundness/check.py build/bin 0 300       # what CI runs
    /usr/bin/python3 tests/soundness/check.py build/bin 1000 5000   # by hand
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    bindir, seed, count = os.path.abspath(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    replayed = refused = 0
    with tempfile.TemporaryDirectory() as work:
        for start in range(seed, seed + count, batch):
            n = min(batch, seed + count - start)
            driver = os.path.join(work, f"soundness_{start}.py")
            record = os.path.join(work, f"soundness_{start}.mgp")
            with open(driver, "w") as out:
                subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), str(start), str(n)], stdout=out,
                               check=True)
            cap = subprocess.run([os.path.join(bindir, "magpy-capture"), "-q", "--log-calls", "1000000", "-o", record,
                                  driver], capture_output=True, text=True, cwd=work)
            if cap.returncode != 0:
                print(f"soundness: programs {start}..{start + n - 1} under magpy-capture:\n{cap.stdout}{cap.stderr}")
                return 1
            run = subprocess.run([os.path.join(bindir, "magpy-run"), "--keep-going", record], capture_output=True,
                                 text=True)
            summary = re.search(r"^replayed (\d+) calls natively", run.stdout, re.M)
            skipped = re.search(r"; (\d+) functions refused", run.stdout)
            if "MISMATCH" in run.stdout or run.returncode not in (0, 1) or not summary:
                print(f"soundness: programs {start}..{start + n - 1}: native replay differs from eager:\n"
                      f"{run.stdout}{run.stderr}")
                return 1
            replayed += int(summary.group(1))
            refused += int(skipped.group(1)) if skipped else 0
    print(f"soundness: {count} programs agreed with eager at every call; {replayed} calls replayed natively "
          f"with the captured results, {refused} programs refused natively (graph breaks or guards on Python "
          f"values) from some call on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
