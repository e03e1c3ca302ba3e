# magpy-test: refused natively
# A call's argument is the very parameter that keys a dict of the state
# (f(m.a) where m.d = {m.a: 2.0}), or another tensor. The JIT follows it
# (compared with eager at every call); the call log would hold a copy of
# the argument, another object, which the record made for other tensors
# would take natively: the logged argument is a placeholder no guard
# accepts instead, and native replay refuses that call.
import torch
import torch.nn as nn

import magpy


class IsKey(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.ones(3))
        self.d = {self.a: 2.0}

    def forward(self, k):
        if k in self.d:
            return (k * self.d[k] + self.a).detach()
        return (k * 0 + self.a).detach()



def run():
    torch.manual_seed(0)
    subject, reference = IsKey(), IsKey()
    compiled = magpy.compile(subject)
    others = (torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    for i, own in enumerate([True, True, False, False, True]):
        got = compiled(subject.a if own else others[0])
        want = reference(reference.a if own else others[1])
        assert torch.equal(got, want), f"call {i}: {got} != {want}"
    return compiled._magpy_stats()


stats = run()
assert stats["breaks"] == 0 and stats["records"] == 2, stats
