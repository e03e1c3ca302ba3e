# magpy-test: breaks
# Programs with tensor-keyed dicts that no record can hold, which must
# break and still give eager's results: a dict read as a whole
# (iteration over it depends on the identity and order of its keys), and
# an optimizer whose state keeps an entry for a parameter the model no
# longer holds (no path names that key, so no path names its element).
# And three that native replay refuses (the JIT is right): the script
# deletes a key between calls or changes a value of a tensor-keyed dict (a
# logged update holds no tensor-keyed dict), or swaps the parameters in the
# optimizer's group (a logged update holds copies of tensors, not the
# state's own objects).
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Iterates(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self._seen = {self.w: torch.zeros(3)}

    def forward(self, x):
        total = x.sum()
        for p, v in self._seen.items():
            v.add_(p * total)
        return self._seen[self.w].clone()


class OwnOptimizer(nn.Module):
    """An optimizer written in the script: `p not in self.state`, and a
    per-parameter scale in a dict keyed by the parameters."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        self._state = {}
        self._scale = {p: 0.5 + 0.1 * i for i, p in enumerate(self.net.parameters())}

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.net.parameters():
                if p not in self._state:
                    self._state[p] = torch.zeros_like(p)
                buf = self._state[p]
                buf.mul_(0.9).add_(p.grad)
                p.sub_(0.1 * self._scale[p] * buf)
                p.grad = None
        return loss.detach()


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
        self._opt = torch.optim.SGD(self.net.parameters(), lr=0.1, momentum=0.9)

    def forward(self, x, y):
        self._opt.zero_grad()
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        self._opt.step()
        return loss.detach()


def alias_entries(i, subject, reference):
    if i == 3:  # one buffer under two parameters' keys
        for m in (subject, reference):
            w, b = m.net[0].weight, m.net[0].bias
            m._scale[b] = m._scale[w]


def delete_key(i, subject, reference):
    if i == 3:
        for m in (subject, reference):
            del m._opt.state[m.net[0].weight]


def swap_groups(i, subject, reference):
    if i == 3:  # the same parameters, in another order: state[p] still follows p
        for m in (subject, reference):
            params = m._opt.param_groups[0]["params"]
            params[0], params[1] = params[1], params[0]


def replace_parameter(i, subject, reference):
    if i == 2:  # a new weight object; the state keeps the old one's entry
        for m in (subject, reference):
            new = nn.Parameter(m.net[2].weight.detach() * 0.5)
            m.net[2].weight = new
            m._opt.param_groups[0]["params"][2] = new


compare(Iterates, [(torch.randn(3),) for _ in range(4)], records=1, breaks=1)
torch.manual_seed(0)
data = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(6)]
stats = compare(Step, data, between=replace_parameter)
assert stats["breaks"] > 0, stats
compare(Step, data, between=delete_key, records=3, graphs=3, breaks=0, hits=3)
compare(Step, data, between=swap_groups, records=3, graphs=3, breaks=0, hits=3)
# the changed scale is lifted: still two records
compare(OwnOptimizer, data, between=alias_entries, records=2, graphs=2, breaks=0, hits=3)
