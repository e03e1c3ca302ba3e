"""Train a small CNN with its forward compiled, then leave what deployment
needs: the trained weights (the usual state dict) and a probe batch the
trained model, in eval mode, has never seen, with its eager results.

    magpy-capture examples/train_cnn.py [OUT_DIR]
    magpy-run train_cnn.mgp --state OUT_DIR/net.pt --eval \\
        --inputs OUT_DIR/probe.pt --output OUT_DIR/served.pt

The record's own state is the model as the compiled forward first read it
(untrained): --state puts the trained weights in, --eval sets the flags
model.eval() sets. OUT_DIR/probe_expected.pt holds what Python computes.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import magpy


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(self.drop(x.flatten(1)))


def batches(generator, count, size=16):
    for _ in range(count):
        x = torch.randn(size, 1, 16, 16, generator=generator)
        yield x, (x.mean(dim=(1, 2, 3)) * 20).long().clamp(0, 9)


out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(0)
model = SmallCNN()
forward = magpy.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
data = torch.Generator().manual_seed(1)

for epoch in range(3):
    model.train()
    for x, y in batches(data, 12):
        loss = F.cross_entropy(forward(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    schedule.step()
    model.eval()
    with torch.no_grad():
        correct = sum(int((forward(x).argmax(1) == y).sum()) for x, y in batches(data, 4))
    print(f"epoch {epoch}: loss {loss.item():.3f}, held-out accuracy {correct / 64:.2f}")

torch.save(model.state_dict(), os.path.join(out_dir, "net.pt"))
probe = torch.randn(16, 1, 16, 16, generator=torch.Generator().manual_seed(7))  # the batch size trained on
with torch.no_grad():
    expected = model(probe)  # plain Python, eval mode
torch.save((probe,), os.path.join(out_dir, "probe.pt"))
torch.save(expected, os.path.join(out_dir, "probe_expected.pt"))
print(f"wrote {out_dir}/net.pt, probe.pt and probe_expected.pt")
