"""A whole training step compiled: opt.zero_grad(), forward, backward and
opt.step() (torch.optim.SGD with momentum and weight decay, or AdamW with
--optimizer adamw), captured over a few batches, then trained natively on
more and checked against eager.

    magpy-capture examples/train_step.py OUT_DIR      # also writes OUT_DIR/batches.pt
    magpy-run train_step.mgp --batches OUT_DIR/batches.pt --save-state OUT_DIR/trained.pt
    PYTHONPATH=python python3 examples/train_step.py --check OUT_DIR

--check trains the same model from the same start on the same batches in
plain Python and compares every tensor of OUT_DIR/trained.pt with it
(rtol 1e-4), then loads it with model.load_state_dict. --model resnet18
trains torchvision's ResNet-18 (10 classes) on 8x3x64x64 batches instead
of the small CNN (give it, and --optimizer, to each of the three
commands' script runs).
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import magpy


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).flatten(1))


parser = argparse.ArgumentParser()
parser.add_argument("out_dir", nargs="?", default=".")
parser.add_argument("--check", action="store_true")
parser.add_argument("--model", choices=["cnn", "resnet18"], default="cnn")
parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
options = parser.parse_args()


def make_model():
    torch.manual_seed(0)
    if options.model == "cnn":
        return Net()
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


model = make_model()
if options.optimizer == "sgd":
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)


def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def make_batches(count):
    generator = torch.Generator().manual_seed(1)
    side = 8 if options.model == "cnn" else 64
    return [(torch.randn(8, 3, side, side, generator=generator), torch.randint(0, 10, (8,), generator=generator))
            for _ in range(count)]


def check(out_dir):
    for x, y in torch.load(os.path.join(out_dir, "batches.pt")):
        step(x, y)
    trained = torch.load(os.path.join(out_dir, "trained.pt"))
    expected = model.state_dict()
    assert set(trained) == set(expected), (sorted(trained), sorted(expected))
    worst = 0.0
    for key, value in expected.items():
        assert torch.allclose(trained[key].double(), value.double(), rtol=1e-4, atol=1e-6), key
        worst = max(worst, (trained[key].double() - value.double()).abs().max().item())
    make_model().load_state_dict(trained)
    print(f"trained natively = trained eagerly: {len(expected)} tensors, max abs diff {worst:g}")


if options.check:
    check(options.out_dir)
else:
    out_dir = options.out_dir
    os.makedirs(out_dir, exist_ok=True)
    batches = make_batches(20)
    torch.save(batches, os.path.join(out_dir, "batches.pt"))
    compiled = magpy.compile(step)
    for x, y in batches[:3]:
        print(f"loss {compiled(x, y).item():.4f}")
