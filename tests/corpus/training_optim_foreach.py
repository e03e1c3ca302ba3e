# magpy-capture-args: --log-calls 80
# torch.optim's foreach paths (foreach=True) inside the compiled step: one
# operator per update for all parameters at once. zero_grad groups the
# gradients in a collections.defaultdict built inside the call, whose
# default_factory is a lambda; Adam and AdamW pass their bias corrections
# as a Scalar[] of numbers the graph computes from each step count
# (aten::item), one per parameter and all equal, taken by position. A
# schedule changes the learning rate between steps (one record for the
# run). Compared with eager at every call; the records replay natively.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self, optimizer, schedule=None, set_to_none=False):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 5 * 5, 3))
        self._opt = optimizer(self.net.parameters())
        self._schedule = schedule(self._opt) if schedule else None
        self._set_to_none = set_to_none

    def forward(self, x, y):
        self._opt.zero_grad(set_to_none=self._set_to_none)
        total = 0
        for xs, ys in ((x[:2], y[:2]), (x[2:], y[2:])):
            loss = F.cross_entropy(self.net(xs), ys) / 2
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self._opt.step()
        return total


class SGD(Step):
    def __init__(self):
        super().__init__(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3,
                                                   foreach=True),
                         lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))


class Adam(Step):
    def __init__(self):
        super().__init__(lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, foreach=True), set_to_none=True)


class AdamWCosine(Step):
    def __init__(self):
        super().__init__(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2, foreach=True),
                         lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6))


def schedule(i, subject, reference):
    if i > 0:
        subject._schedule.step()
        reference._schedule.step()


torch.manual_seed(0)
images = [(torch.randn(4, 2, 5, 5), torch.randint(0, 3, (4,))) for _ in range(8)]
if __name__ == "__main__":
    compare(SGD, images, between=schedule, records=2, graphs=2, breaks=0)
    compare(Adam, images, records=2, graphs=2, breaks=0, hits=6)
    compare(AdamWCosine, images, between=schedule, records=2, graphs=2, breaks=0)
