# Paper, Figure 4: a run_act flag picks the branch; a global is written.
import torch
from harness import compare, same

z = None


def model(x, run_act):
    global z
    y = x * 2
    if run_act:
        y = torch.relu(y)
    z = y + 1
    return y


def make():
    return model


torch.manual_seed(0)
x = torch.randn(2, 2)
results = []


def check_global(i, a, b):
    results.append(z)


compare(make, [(x, True), (x, True), (x, False), (x, True)], records=2, graphs=2, hits=2)
# The mock wrote the global on replayed calls as the function does.
assert same(z, torch.relu(x * 2) + 1)
