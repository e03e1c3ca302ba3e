"""A BlockDrop-like network (Wu et al., CVPR'18): a small policy network
looks at the image and decides, per residual block, whether to run it; the
decision is a tensor, and a Python `if` on it picks the blocks (the MagPy
paper's Figure 18). Each `if keep[0, i]` reads tensor contents: the graph
checks the decision there, so one record serves every input whose policy
keeps the same blocks, and an input with other decisions gets its own.

    magpy-capture examples/models/blockdrop.py [--calls N] [--small]
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import main


class Block(nn.Module):
    def __init__(self, channels, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(channels // stride, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = None
        if stride != 1:
            self.shortcut = nn.Sequential(nn.Conv2d(channels // stride, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def skip(self, x):
        return x if self.shortcut is None else self.shortcut(x)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.skip(x))


class Policy(nn.Module):
    """Keep probabilities per block, from a downsampled view of the image."""

    def __init__(self, num_blocks, width=16):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.fc = nn.Linear(width * 16, num_blocks)

    def forward(self, image):
        small = F.interpolate(image, scale_factor=0.5, mode="bilinear", align_corners=False)
        return torch.sigmoid(self.fc(self.features(small).flatten(1)))


class BlockDropNet(nn.Module):
    def __init__(self, widths=(32, 64, 128), blocks_per_stage=3, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        self.blocks = nn.ModuleList()
        for s, width in enumerate(widths):
            for b in range(blocks_per_stage):
                self.blocks.append(Block(width, stride=2 if s > 0 and b == 0 else 1))
        self.policy = Policy(len(self.blocks))
        self.head = nn.Linear(widths[-1], num_classes)

    def forward(self, image):
        keep = self.policy(image) > 0.5
        x = self.stem(image)
        for i, block in enumerate(self.blocks):
            if keep[0, i]:
                x = block(x)
            else:
                x = block.skip(x)
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1)), keep


def build(batch=1, small=False, seed=0):
    torch.manual_seed(seed)
    model = BlockDropNet(widths=(8, 16), blocks_per_stage=2) if small else BlockDropNet()
    size = 16 if small else 32
    return model.eval(), (torch.randn(1, 3, size, size),)


if __name__ == "__main__":
    main("blockdrop", build, __doc__, calls=4)
