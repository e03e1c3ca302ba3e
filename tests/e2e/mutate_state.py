"""mutate_state.py RECORD STATE INPUTS COUNT: rewrites the pickle inside a
torch.save'd state dict with random byte changes and truncations (seeded),
and runs magpy-run --state on each: every run must end with status 0 or 2
and, on 2, one line of ASCII on stderr. Prints one summary line; exit 1 on
the first run that does not."""
import os
import random
import subprocess
import sys
import tempfile
import zipfile


def main():
    record, state, inputs, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    source = zipfile.ZipFile(state)
    names = source.namelist()
    pickle_name = next(n for n in names if n.endswith("data.pkl"))
    original = source.read(pickle_name)
    rng = random.Random(0)
    statuses = {}
    with tempfile.TemporaryDirectory() as work:
        mutated = os.path.join(work, "mutated.pt")
        for _ in range(count):
            data = bytearray(original)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if rng.random() < 0.2:
                data = data[: rng.randrange(len(data))]
            with zipfile.ZipFile(mutated, "w") as out:
                for n in names:
                    out.writestr(n, bytes(data) if n == pickle_name else source.read(n))
            run = subprocess.run(["magpy-run", record, "--state", mutated, "--eval", "--inputs", inputs],
                                 capture_output=True, timeout=120)
            statuses[run.returncode] = statuses.get(run.returncode, 0) + 1
            clean = run.returncode == 0 or (run.returncode == 2 and run.stderr.count(b"\n") == 1 and run.stderr.isascii())
            if not clean:
                print(f"mutated state file: status {run.returncode}: {run.stderr[-400:]!r}")
                return 1
    print(f"mutated state files: {count} runs, statuses {dict(sorted(statuses.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
