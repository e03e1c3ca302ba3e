"""A forward hook that logs features into a list (feature extraction,
activation statistics): one ResNet-18 whose hook only appends, against the
same model whose hook also reads len() of the list (so its record guards
the list and a longer list misses). Both run inside magpy-capture on the
same input, one thread; prints records, guards and the median time of
calls 3 onwards against eager, and writes build/bench/list_log.md.

    build/bin/magpy-capture --log-calls 0 -o /tmp/list_log.mgp bench/list_log.py [--calls N]
"""
import argparse
import os
import statistics
import time

import torch
import torchvision

import magpy

HERE = os.path.dirname(os.path.abspath(__file__))


def model(reads_length):
    torch.manual_seed(0)
    m = torchvision.models.resnet18().eval()
    feats = []

    def hook(module, inputs, output):
        feats.append(output.detach())
        if reads_length:
            module.seen = len(feats)

    m.layer4.register_forward_hook(hook)
    return m, feats


def timed(fn, x, calls):
    times = []
    with torch.no_grad():
        for _ in range(calls):
            start = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - start)
    return statistics.median(times[2:]) * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(1, 3, 224, 224)
    eager = timed(model(False)[0], x, args.calls)
    rows = []
    for name, reads in (("hook appends only", False), ("hook appends and reads len()", True)):
        m, feats = model(reads)
        compiled = magpy.compile(m)
        ms = timed(compiled, x, args.calls)
        stats = compiled._magpy_stats()
        assert len(feats) == args.calls
        rows.append(f"| {name} | {stats['records']} | {stats['monitored']} | {ms:.1f} | {eager / ms:.2f}x |")
    table = ["| ResNet-18, batch 1 | records | monitored calls | ms per call (median, calls 3+) | vs eager |",
             "|---|---:|---:|---:|---:|"] + rows
    text = f"# A list a forward hook appends to\n\n{args.calls} calls; eager: {eager:.1f} ms per call.\n\n" + "\n".join(table) + "\n"
    print(text)
    out = os.path.join(HERE, "..", "build", "bench")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "list_log.md"), "w") as f:
        f.write(text)


main()
