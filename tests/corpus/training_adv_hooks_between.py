# Hooks that change gradients, registered between calls after the record
# was made: a tensor hook on a parameter (doubles its gradient) and a
# DDP-style hook on a parameter's AccumulateGrad node (scales .grad in
# place). Eager runs them in every later backward; a replayed record that
# ignores them updates the weights with the wrong gradients. magpy must
# notice the hooks (guard, or monitor again and break), never replay.
# magpy-test: refused natively
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.net.parameters():
                p.add_(p.grad, alpha=-0.1)
                p.grad = None
        return loss.detach()


keep = []


def tensor_hook(i, a, b):
    if i == 2:
        for m in (a, b):
            m.net[0].weight.register_hook(lambda g: g * 2)


def accumulator_hook(i, a, b):
    if i == 2:
        for m in (a, b):
            p = m.net[2].bias
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            keep.append(acc)  # the node lives as long as someone holds it
            acc.register_hook(lambda grad_in, grad_out, p=p: (p.grad.mul_(10), None)[1])


torch.manual_seed(1)
calls = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
compare(Step, calls, between=tensor_hook)
compare(Step, calls, between=accumulator_hook)
