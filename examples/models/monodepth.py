"""A MonoDepth2-like self-supervised depth network (Godard et al., "Digging
into self-supervised monocular depth estimation"), the paper's
`Monodepth-18`: a ResNet-18 encoder that returns its features at five
scales, and a U-Net-like decoder that goes from the deepest feature up with
3x3 reflection-padded convolutions + ELU, nearest upsampling and skip
concatenations, predicting a sigmoid disparity map at scales 3, 2, 1 and 0.
The decoder keeps its layers in a dict keyed by tuples and returns a dict
keyed by ("disp", scale), the way the research code does. Random weights:
nothing is downloaded.

    magpy-capture examples/models/monodepth.py [--batch N] [--calls N] [--small]

The full configuration takes 192x640 images (the KITTI setting); --small
runs the same code on 64x96 images.
"""
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

from common import main


@dataclass
class MonoDepthOptions:
    num_layers: int = 18
    height: int = 192
    width: int = 640
    scales: list = field(default_factory=lambda: [0, 1, 2, 3])
    num_output_channels: int = 1
    use_skips: bool = True
    min_depth: float = 0.1
    max_depth: float = 100.0

    @classmethod
    def small(cls):
        return cls(height=64, width=96)


def disp_to_depth(disp, min_depth, max_depth):
    """Turns the sigmoid output into a depth map between min_depth and max_depth."""
    min_disp = 1 / max_depth
    max_disp = 1 / min_depth
    scaled_disp = min_disp + (max_disp - min_disp) * disp
    depth = 1 / scaled_disp
    return scaled_disp, depth


def upsample(x):
    """Nearest-neighbour upsampling by a factor of 2."""
    return F.interpolate(x, scale_factor=2, mode="nearest")


class Conv3x3(nn.Module):
    """3x3 convolution on a reflection-padded input (no zeros at the borders)."""

    def __init__(self, in_channels, out_channels, use_refl=True):
        super(Conv3x3, self).__init__()
        if use_refl:
            self.pad = nn.ReflectionPad2d(1)
        else:
            self.pad = nn.ZeroPad2d(1)
        self.conv = nn.Conv2d(int(in_channels), int(out_channels), 3)

    def forward(self, x):
        out = self.pad(x)
        out = self.conv(out)
        return out


class ConvBlock(nn.Module):
    """Conv3x3 followed by an ELU."""

    def __init__(self, in_channels, out_channels):
        super(ConvBlock, self).__init__()
        self.conv = Conv3x3(in_channels, out_channels)
        self.nonlin = nn.ELU(inplace=True)

    def forward(self, x):
        out = self.conv(x)
        out = self.nonlin(out)
        return out


class ResnetEncoder(nn.Module):
    """A torchvision ResNet without its classifier, returning a list of its
    features after the stem and after each of the four stages."""

    resnets = {
        18: torchvision.models.resnet18,
        34: torchvision.models.resnet34,
        50: torchvision.models.resnet50,
    }

    def __init__(self, num_layers):
        super(ResnetEncoder, self).__init__()
        if num_layers not in self.resnets:
            raise ValueError("{} is not a valid number of resnet layers".format(num_layers))
        self.num_ch_enc = [64, 64, 128, 256, 512]
        self.encoder = self.resnets[num_layers]()
        del self.encoder.fc  # features only
        if num_layers > 34:
            self.num_ch_enc[1:] = [c * 4 for c in self.num_ch_enc[1:]]

    def forward(self, input_image):
        self.features = []
        x = (input_image - 0.45) / 0.225
        x = self.encoder.conv1(x)
        x = self.encoder.bn1(x)
        self.features.append(self.encoder.relu(x))
        self.features.append(self.encoder.layer1(self.encoder.maxpool(self.features[-1])))
        self.features.append(self.encoder.layer2(self.features[-1]))
        self.features.append(self.encoder.layer3(self.features[-1]))
        self.features.append(self.encoder.layer4(self.features[-1]))
        return self.features


class DepthDecoder(nn.Module):
    """From the deepest feature up: conv block, upsample, concatenate the
    skip feature of the same scale, conv block; a disparity head at each
    scale in `scales`."""

    def __init__(self, num_ch_enc, scales=range(4), num_output_channels=1, use_skips=True):
        super(DepthDecoder, self).__init__()
        self.num_output_channels = num_output_channels
        self.use_skips = use_skips
        self.scales = scales
        self.num_ch_enc = num_ch_enc
        self.num_ch_dec = [16, 32, 64, 128, 256]

        self.convs = OrderedDict()
        for i in range(4, -1, -1):
            # upconv_0
            num_ch_in = self.num_ch_enc[-1] if i == 4 else self.num_ch_dec[i + 1]
            num_ch_out = self.num_ch_dec[i]
            self.convs[("upconv", i, 0)] = ConvBlock(num_ch_in, num_ch_out)

            # upconv_1
            num_ch_in = self.num_ch_dec[i]
            if self.use_skips and i > 0:
                num_ch_in += self.num_ch_enc[i - 1]
            num_ch_out = self.num_ch_dec[i]
            self.convs[("upconv", i, 1)] = ConvBlock(num_ch_in, num_ch_out)

        for s in self.scales:
            self.convs[("dispconv", s)] = Conv3x3(self.num_ch_dec[s], self.num_output_channels)

        # nn.Module wants string names: register the tuple-keyed layers as a list
        self.decoder = nn.ModuleList(list(self.convs.values()))
        self.sigmoid = nn.Sigmoid()

    def forward(self, input_features):
        self.outputs = {}

        x = input_features[-1]
        for i in range(4, -1, -1):
            x = self.convs[("upconv", i, 0)](x)
            x = [upsample(x)]
            if self.use_skips and i > 0:
                x += [input_features[i - 1]]
            x = torch.cat(x, 1)
            x = self.convs[("upconv", i, 1)](x)
            if i in self.scales:
                self.outputs[("disp", i)] = self.sigmoid(self.convs[("dispconv", i)](x))

        return self.outputs


class MonoDepth(nn.Module):
    """Encoder + decoder; also turns the full-resolution disparity into depth."""

    def __init__(self, opt):
        super(MonoDepth, self).__init__()
        self.opt = opt
        self.models = nn.ModuleDict()
        self.models["encoder"] = ResnetEncoder(opt.num_layers)
        self.models["depth"] = DepthDecoder(
            self.models["encoder"].num_ch_enc, opt.scales, opt.num_output_channels, opt.use_skips)

    def forward(self, images):
        features = self.models["encoder"](images)
        outputs = self.models["depth"](features)
        _, depth = disp_to_depth(outputs[("disp", 0)], self.opt.min_depth, self.opt.max_depth)
        outputs[("depth", 0, 0)] = depth
        return outputs


def build(batch=1, small=False, seed=0):
    torch.manual_seed(seed)
    opt = MonoDepthOptions.small() if small else MonoDepthOptions()
    model = MonoDepth(opt).eval()
    return model, (torch.rand(batch, 3, opt.height, opt.width),)


if __name__ == "__main__":
    main("monodepth", build, __doc__)
