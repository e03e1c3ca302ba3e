"""Times one model in eager PyTorch (no_grad) in a process of its own, so
its peak memory is its own. Prints one JSON line.

    /usr/bin/python3 bench/eager_runner.py MODEL BATCH CALLS THREADS
"""
import json
import resource
import statistics
import sys
import time

import torch

import models

name, batch, calls, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
model, inputs = models.build(name, batch)
with torch.no_grad():
    for _ in range(max(3, calls // 10)):
        model(*inputs)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        model(*inputs)
        times.append(time.perf_counter() - t0)
print(json.dumps({"median_us": statistics.median(times) * 1e6, "min_us": min(times) * 1e6,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
