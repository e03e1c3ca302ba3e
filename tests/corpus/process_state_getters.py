# magpy-test: refused natively
# Process state read through torch's getters (thread count, anomaly
# detection, autocast) is guarded interpreter state, so a change between
# calls is a new record; torch.autocast inside a compiled function (it sets
# autocast) runs as Python. Natively the thread count differs: refused.
import torch
from harness import compare


def threads(x):
    return x * torch.get_num_threads() + (1.0 if torch.is_anomaly_enabled() else 0.0)


def change(i, subject, reference):
    if i == 1:
        torch.set_num_threads(1)
    elif i == 2:
        torch.set_anomaly_enabled(True)


torch.set_num_threads(2)
try:
    compare(lambda: threads, [(torch.ones(2),)] * 4, between=change, records=3, graphs=3, hits=1)
finally:
    torch.set_anomaly_enabled(False)

layer = torch.nn.Linear(4, 4)


def mixed_precision(x):
    with torch.autocast("cpu"):
        y = layer(x)
    return y.float() * 2


compare(lambda: mixed_precision, [(torch.ones(2, 4),)] * 3, graphs=0)
