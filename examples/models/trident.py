"""A TridentNet-like network (Li et al., "Scale-aware trident networks for
object detection"), the paper's TridentNet on ResNet-101: a ResNet stem and
stages, then a trident stage whose blocks run several branches that share
every weight but see different receptive fields. The 3x3 convolution of a
trident block holds ONE weight and applies it with a different dilation per
branch (padding = dilation) in a Python loop; the 1x1 convolutions are
shared modules applied to each branch; each branch has its own batch norms.
The branches travel as a Python list and are concatenated along the batch
dimension at the end of the stage (as the detector does at inference, when
all branches are tested), then a last stage and a small classification head
whose logits are split back per branch. Random weights: nothing is
downloaded.

    magpy-capture examples/models/trident.py [--batch N] [--calls N] [--small]

The full configuration is ResNet-101 depth, 3 branches with dilations 1, 2,
3, at 224x224; --small runs the same code with one or two blocks per stage
and narrow channels at 64x64.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import main


@dataclass
class TridentConfig:
    stage_blocks: tuple = (3, 4, 23, 3)  # ResNet-101
    base_channels: int = 64
    expansion: int = 4
    trident_stage: int = 2  # index into stage_blocks: conv4_x, as in the paper
    num_branches: int = 3
    dilations: tuple = (1, 2, 3)
    test_branch_idx: int = -1  # -1: run all branches at inference
    num_classes: int = 1000
    image_size: int = 224

    @classmethod
    def small(cls):
        return cls(stage_blocks=(1, 1, 2, 1), base_channels=16, num_classes=10, image_size=64)

    @property
    def stage_channels(self):
        return [self.base_channels * 2 ** i for i in range(len(self.stage_blocks))]


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


def conv3x3(in_planes, out_planes, stride=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride,
                     padding=dilation, dilation=dilation, bias=False)


def branch_norms(channels, num_branches):
    """One batch norm per branch: the branches share weights, not statistics."""
    return nn.ModuleList([nn.BatchNorm2d(channels) for _ in range(num_branches)])


class TridentConv(nn.Module):
    """A convolution whose single weight is applied to every branch, each
    with its own dilation (and padding = dilation, so all branches keep the
    same spatial size)."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1,
                 dilations=(1, 2, 3), test_branch_idx=-1, bias=False):
        super(TridentConv, self).__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.dilations = list(dilations)
        self.paddings = [d * (kernel_size - 1) // 2 for d in self.dilations]
        self.num_branches = len(self.dilations)
        self.test_branch_idx = test_branch_idx
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_channels))
        else:
            self.register_parameter("bias", None)
        nn.init.kaiming_uniform_(self.weight, nonlinearity="relu")

    def extra_repr(self):
        return "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}, dilations={dilations}".format(
            **self.__dict__)

    def forward(self, inputs):
        assert len(inputs) == self.num_branches or not self.training and self.test_branch_idx != -1
        if self.training or self.test_branch_idx == -1:
            outputs = []
            for x, dilation, padding in zip(inputs, self.dilations, self.paddings):
                outputs.append(F.conv2d(x, self.weight, self.bias, self.stride, padding, dilation))
        else:
            dilation = self.dilations[self.test_branch_idx]
            padding = self.paddings[self.test_branch_idx]
            outputs = [F.conv2d(inputs[0], self.weight, self.bias, self.stride, padding, dilation)]
        return outputs


class Bottleneck(nn.Module):
    """The usual ResNet bottleneck (1x1, 3x3, 1x1 and a shortcut)."""

    def __init__(self, inplanes, planes, expansion=4, stride=1, downsample=None):
        super(Bottleneck, self).__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * expansion)
        self.bn3 = nn.BatchNorm2d(planes * expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class TridentBottleneck(nn.Module):
    """A bottleneck over a list of branches: shared 1x1 convolutions, a
    TridentConv in the middle, batch norms per branch."""

    def __init__(self, inplanes, planes, expansion, stride, dilations, test_branch_idx,
                 concat_output=False, downsample=None):
        super(TridentBottleneck, self).__init__()
        self.num_branches = len(dilations)
        self.test_branch_idx = test_branch_idx
        self.concat_output = concat_output
        self.conv1 = conv1x1(inplanes, planes)
        self.norm1 = branch_norms(planes, self.num_branches)
        self.conv2 = TridentConv(planes, planes, 3, stride=stride, dilations=dilations,
                                 test_branch_idx=test_branch_idx)
        self.norm2 = branch_norms(planes, self.num_branches)
        self.conv3 = conv1x1(planes, planes * expansion)
        self.norm3 = branch_norms(planes * expansion, self.num_branches)
        self.relu = nn.ReLU(inplace=True)
        # the shortcut's convolution is shared too; its norm is per branch
        self.downsample = downsample
        self.downsample_norms = branch_norms(planes * expansion, self.num_branches) if downsample is not None else None

    def active_branches(self):
        if not self.training and self.test_branch_idx != -1:
            return [self.test_branch_idx]
        return list(range(self.num_branches))

    def forward(self, x):
        if not isinstance(x, list):
            # the first block of the stage makes the branches
            x = [x] * len(self.active_branches())
        identity = x
        branches = self.active_branches()

        out = [self.relu(self.norm1[b](self.conv1(x_b))) for b, x_b in zip(branches, x)]
        out = self.conv2(out)
        out = [self.relu(self.norm2[b](o)) for b, o in zip(branches, out)]
        out = [self.norm3[b](self.conv3(o)) for b, o in zip(branches, out)]

        if self.downsample is not None:
            identity = [self.downsample_norms[b](self.downsample(x_b)) for b, x_b in zip(branches, x)]

        out = [self.relu(o + i) for o, i in zip(out, identity)]
        if self.concat_output:
            out = torch.cat(out, dim=0)
        return out


def make_res_layer(inplanes, planes, blocks, expansion, stride):
    downsample = None
    if stride != 1 or inplanes != planes * expansion:
        downsample = nn.Sequential(conv1x1(inplanes, planes * expansion, stride),
                                   nn.BatchNorm2d(planes * expansion))
    layers = [Bottleneck(inplanes, planes, expansion, stride, downsample)]
    for _ in range(1, blocks):
        layers.append(Bottleneck(planes * expansion, planes, expansion))
    return nn.Sequential(*layers)


def make_trident_layer(inplanes, planes, blocks, expansion, stride, dilations, test_branch_idx):
    downsample = None
    if stride != 1 or inplanes != planes * expansion:
        downsample = conv1x1(inplanes, planes * expansion, stride)
    layers = []
    for i in range(blocks):
        layers.append(TridentBottleneck(
            inplanes=inplanes if i == 0 else planes * expansion,
            planes=planes,
            expansion=expansion,
            stride=stride if i == 0 else 1,
            dilations=dilations,
            test_branch_idx=test_branch_idx,
            concat_output=(i == blocks - 1),
            downsample=downsample if i == 0 else None))
    return nn.Sequential(*layers)


class TridentResNet(nn.Module):
    def __init__(self, cfg):
        super(TridentResNet, self).__init__()
        self.cfg = cfg
        stem_channels = cfg.base_channels
        self.stem = nn.Sequential(
            nn.Conv2d(3, stem_channels, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(stem_channels),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1))

        self.res_layers = []
        inplanes = stem_channels
        for i, (blocks, planes) in enumerate(zip(cfg.stage_blocks, cfg.stage_channels)):
            stride = 1 if i == 0 else 2
            if i == cfg.trident_stage:
                layer = make_trident_layer(inplanes, planes, blocks, cfg.expansion, stride,
                                           cfg.dilations, cfg.test_branch_idx)
            else:
                layer = make_res_layer(inplanes, planes, blocks, cfg.expansion, stride)
            name = "layer{}".format(i + 1)
            self.add_module(name, layer)
            self.res_layers.append(name)
            inplanes = planes * cfg.expansion
        self.feat_dim = inplanes

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.stem(x)
        outs = []
        for name in self.res_layers:
            x = getattr(self, name)(x)
            outs.append(x)
        return tuple(outs)


class TridentClassifier(nn.Module):
    """Backbone + a small head: global pooling and a linear layer over the
    concatenated branches, then the logits split back per branch."""

    def __init__(self, cfg):
        super(TridentClassifier, self).__init__()
        self.cfg = cfg
        self.backbone = TridentResNet(cfg)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(self.backbone.feat_dim, cfg.num_classes)

    @property
    def num_test_branches(self):
        return self.cfg.num_branches if self.cfg.test_branch_idx == -1 else 1

    def forward(self, images):
        feats = self.backbone(images)
        x = torch.flatten(self.avgpool(feats[-1]), 1)
        logits = self.fc(x)
        branch_logits = list(torch.chunk(logits, self.num_test_branches, dim=0))
        return {
            "logits": torch.stack(branch_logits, dim=0).mean(dim=0),
            "branch_logits": branch_logits,
            "features": feats,
        }


def build(batch=1, small=False, seed=0):
    torch.manual_seed(seed)
    cfg = TridentConfig.small() if small else TridentConfig()
    model = TridentClassifier(cfg).eval()
    return model, (torch.randn(batch, 3, cfg.image_size, cfg.image_size),)


if __name__ == "__main__":
    main("trident", build, __doc__)
