# A collections.defaultdict built inside the compiled function (as the
# optimizers' foreach zero_grad builds one): its default_factory runs
# where a key is missing, a builtin type or a lambda the monitor traces,
# and what that lambda reads is guarded. Each is changed between calls
# and compared with eager at every call; the records replay natively.
import collections

import torch
import torch.nn as nn

from harness import compare

GROUPS = {"a": 0, "b": 1}
START = 1.0


class GroupSums(nn.Module):
    # defaultdict(list) grouping tensors under keys a global dict gives:
    # the dict is changed between calls.
    def forward(self, xs):
        groups = collections.defaultdict(list)
        for name, x in zip("abab", xs):
            groups[GROUPS[name]].append(x)
        return [torch.stack(g).sum(0) for _, g in sorted(groups.items())]


class Counted(nn.Module):
    # defaultdict(int) counts, read back as numbers that scale tensors.
    def forward(self, x, tags):
        counts = collections.defaultdict(int)
        for t in tags:
            counts[t] += 1
        return x * counts["a"] + counts["b"]


class LambdaStart(nn.Module):
    # A lambda factory that reads a global: START changes between calls.
    def forward(self, x):
        acc = collections.defaultdict(lambda: START)
        acc["x"] = acc["x"] + 1
        return x * acc["x"] + acc["y"]


class Nested(nn.Module):
    # defaultdict(lambda: defaultdict(list)) keyed by device and dtype, as
    # Optimizer.zero_grad(foreach) groups gradients.
    def forward(self, xs):
        grouped = collections.defaultdict(lambda: collections.defaultdict(list))
        for x in xs:
            grouped[x.device][x.dtype].append(x)
        out = []
        for _, per_dtype in grouped.items():
            for tensors in per_dtype.values():
                out.append(torch.cat([t.flatten() for t in tensors]))
        return out


def regroup(i, subject, reference):
    if i == 2:
        GROUPS["b"] = 0


def restart(i, subject, reference):
    global START
    if i == 2:
        START = 5.0


torch.manual_seed(0)
compare(GroupSums, [([torch.randn(3) for _ in range(4)],) for _ in range(4)], between=regroup, records=2, breaks=0)
compare(Counted, [(torch.randn(3), tags) for tags in (["a", "b", "a"], ["a", "b", "a"], ["b"], ["a"] * 4)],
        records=3, breaks=0)
compare(LambdaStart, [(torch.randn(3),) for _ in range(4)], between=restart, records=2, breaks=0)
compare(Nested, [([torch.randn(2), torch.randn(3).double(), torch.randn(1)],) for _ in range(3)],
        records=1, breaks=0)
