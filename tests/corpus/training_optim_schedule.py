# A whole step with torch.optim.SGD under a learning-rate schedule: the
# scheduler wraps opt.step in a function that dereferences a weak
# reference to the optimizer and counts the steps (opt._step_count += 1),
# and changes the learning rate between steps. Gradients accumulate over
# two micro-batches and are clipped by their norm. One record serves every
# step after the first (the rate and the count are lifted numbers; the
# count's int arithmetic runs before the step's writes). Compared with
# eager at every call. Natively the weak reference's referent is the
# optimizer holding it, which replay holds weakly; a rate changed between
# steps is logged where it is (param_groups[0]['lr']), not as a copy of
# the group with copies of its parameters.
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self, schedule):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 5 * 5, 3))
        self._opt = torch.optim.SGD(self.net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        self._schedule = schedule(self._opt)

    def forward(self, x, y):
        self._opt.zero_grad()
        total = 0
        for xs, ys in ((x[:2], y[:2]), (x[2:], y[2:])):
            loss = F.cross_entropy(self.net(xs), ys) / 2
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self._opt.step()
        return total


class Cosine(Step):
    def __init__(self):
        super().__init__(lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6))


class Steps(Step):
    def __init__(self):
        super().__init__(lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))


def schedule(i, subject, reference):
    if i > 0:
        subject._schedule.step()
        reference._schedule.step()


torch.manual_seed(0)
images = [(torch.randn(4, 2, 5, 5), torch.randint(0, 3, (4,))) for _ in range(8)]
compare(Cosine, images, between=schedule, records=2, graphs=2, breaks=0)
compare(Steps, images, between=schedule, records=2, graphs=2, breaks=0)
