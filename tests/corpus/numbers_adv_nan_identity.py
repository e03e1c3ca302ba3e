# magpy-test: breaks
# Python's containers compare their elements by identity first: (v,) == (v,)
# and v in [v] hold for one NaN object, not for two. A guard on a float
# (`== nan`) cannot tell NaN objects apart, so a run that reads a NaN from
# the state is a graph break (it runs as Python), never a record that
# keeps one call's answer. (Underscored: the harness compares state by ==.)
import torch
import torch.nn as nn

from harness import compare


class Pairs(nn.Module):
    def __init__(self):
        super().__init__()
        self._t, self._u, self._l = (0.0,), (0.0,), [1.0]

    def forward(self, x):
        out = x + 1 if self._t == self._u else x - 1
        return out * 2 if self._t[0] in self._l else out


def renan(i, subject, reference):
    for m in (subject, reference):
        v = float("nan")
        m._t = (v,)
        m._u = (v,) if i % 2 == 0 else (float("nan"),)
        m._l = [1.0, v] if i % 3 == 0 else [1.0, float("nan")]


compare(Pairs, [(torch.zeros(3),) for _ in range(6)], between=renan, graphs=0)
