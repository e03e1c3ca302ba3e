"""BlockDrop's record on policies no capture saw (the paper's Figure 18):
captures examples/models/blockdrop.py --small, finds inputs whose policy
keeps a set of blocks none of the captured calls kept, replays the record
on them natively (magpy-run --inputs) and compares with eager PyTorch.

    python3 blockdrop_unseen.py BIN_DIR WORK_DIR [CALLS]

Prints how many records the capture made and one line per unseen policy;
exits non-zero on any difference.
"""
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = os.path.join(ROOT, "examples", "models")
sys.path[:0] = [MODELS, os.path.join(ROOT, "python")]  # magpy.compile is the identity in plain Python

from blockdrop import build  # noqa: E402
from common import fresh_like  # noqa: E402


def policy(model, image):
    with torch.no_grad():
        return tuple(bool(k) for k in (model.policy(image) > 0.5)[0])


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    record = os.path.join(work, "blockdrop.mgp")
    done = subprocess.run([os.path.join(bin_dir, "magpy-capture"), "-o", record, os.path.join(MODELS, "blockdrop.py"),
                           "--small", "--calls", str(calls)], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"capture failed:\n{done.stdout}{done.stderr}")
    print(done.stderr.strip().splitlines()[-1])
    model, inputs = build(small=True)
    seen = {policy(model, (inputs if step == 0 else fresh_like(inputs, step))[0]) for step in range(calls)}
    unseen = {}
    for seed in range(400):
        torch.manual_seed(5000 + seed)
        image = torch.randn_like(inputs[0])
        p = policy(model, image)
        if p not in seen and p not in unseen:
            unseen[p] = image
    if not unseen:
        sys.exit(f"every policy of 400 inputs was seen while capturing ({sorted(seen)})")
    failed = 0
    for p, image in sorted(unseen.items()):
        path = os.path.join(work, "image.pt")
        out = os.path.join(work, "out.pt")
        torch.save((image,), path)
        run = subprocess.run([os.path.join(bin_dir, "magpy-run"), record, "--inputs", path, "--output", out],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"policy {p}: magpy-run failed: {run.stdout}{run.stderr}")
            failed += 1
            continue
        got = torch.load(out)
        with torch.no_grad():
            want = model(image)
        same = all(torch.allclose(g, w, rtol=1e-5, atol=1e-6) and g.dtype == w.dtype for g, w in zip(got, want))
        print(f"policy {''.join('1' if k else '0' for k in p)}: never seen, natively {'equal to' if same else 'DIFFERENT from'} eager")
        failed += not same
    print(f"{len(seen)} policies captured, {len(unseen)} unseen replayed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
