# Tied weights (an LM's embedding and output layer hold one parameter)
# stepped by an optimizer outside the compiled forward, then given new
# memory through .data and frozen, between calls. The call log marks each
# change as made in place, so native replay writes the one tensor both
# layers hold and replays every call (it kept the two apart and refused
# the calls after the first step before).
import torch
import torch.nn as nn

import magpy
from harness import same


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.decoder = nn.Linear(4, 10, bias=False)
        self.decoder.weight = self.embed.weight

    def forward(self, ids):
        return self.decoder(torch.tanh(self.embed(ids))).logsumexp(-1).sum()


def build():
    torch.manual_seed(0)
    model = TiedLM()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


subject, subject_opt = build()
reference, reference_opt = build()
compiled = magpy.compile(subject)
ids = torch.tensor([1, 2, 3])
for i in range(7):
    got, want = compiled(ids), reference(ids)
    assert same(got, want), (i, got, want)
    for model, opt, loss in ((subject, subject_opt, got), (reference, reference_opt, want)):
        if i < 3:
            opt.zero_grad()
            loss.backward()
            opt.step()
        elif i == 3:
            model.embed.weight.data = torch.linspace(-1, 1, 40).reshape(10, 4)
        elif i == 4:
            model.embed.weight.requires_grad_(False)
        elif i == 5:
            with torch.no_grad():
                model.decoder.weight.mul_(0.5)
assert subject.decoder.weight is subject.embed.weight
print("tied weights stepped between calls: every call as eager, natively too")
