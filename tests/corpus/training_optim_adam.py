# magpy-capture-args: --log-calls 80
# torch.optim.Adam and AdamW inside the compiled step. Each parameter's
# step count is a tensor the step increments and then reads with .item():
# the graph reads it (aten::item) and computes the bias corrections from
# it with Python's arithmetic (**, -, /, math.sqrt) as number operators,
# so one record serves every step after the first. A learning-rate
# schedule changes the rate between steps (a lifted number); gradients
# accumulate over two micro-batches and are clipped by their norm.
# Compared with eager at every call; the records replay natively (the
# scheduler's weak reference to its optimizer included).
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness import compare


class Step(nn.Module):
    def __init__(self, optimizer, schedule=None):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(4 * 5 * 5, 3))
        self._opt = optimizer(self.net.parameters())
        self._schedule = schedule(self._opt) if schedule else None

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


class Adam(Step):
    def __init__(self):
        super().__init__(lambda p: torch.optim.Adam(p, lr=1e-2))


class AdamWCosine(Step):
    def __init__(self):
        super().__init__(lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=1e-2),
                         lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6))


class AdamSteps(Step):
    def __init__(self):
        super().__init__(lambda p: torch.optim.Adam(p, lr=1e-2, betas=(0.8, 0.99), amsgrad=True),
                         lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))


def schedule(i, subject, reference):
    if i > 0:
        subject._schedule.step()
        reference._schedule.step()


def restart_counts(i, subject, reference):
    # The step counts go back (as after loading an older checkpoint): the
    # bias corrections follow the counts the graph reads.
    if i == 4:
        for m in (subject, reference):
            for state in m._opt.state.values():
                state['step'].fill_(1.0)


torch.manual_seed(0)
images = [(torch.randn(4, 2, 5, 5), torch.randint(0, 3, (4,))) for _ in range(8)]
compare(Adam, images, records=2, graphs=2, breaks=0, hits=6)
compare(Adam, images, between=restart_counts, records=2, graphs=2, breaks=0, hits=6)
compare(AdamWCosine, images, between=schedule, records=2, graphs=2, breaks=0)
compare(AdamSteps, images, between=schedule, records=2, graphs=2, breaks=0)
