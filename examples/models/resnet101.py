"""ResNet-101 (torchvision, random weights: nothing is downloaded), the
paper's deep convolutional baseline.

    magpy-capture examples/models/resnet101.py [--batch N] [--calls N] [--small]

--small runs ResNet-18's code path with fewer blocks (torchvision's
ResNet class with [1, 1, 1, 1] basic blocks) at 64x64.
"""
import torch
import torchvision

from common import main


def build(batch=1, small=False, seed=0):
    torch.manual_seed(seed)
    if small:
        model = torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, [1, 1, 1, 1], num_classes=10)
        size = 64
    else:
        model = torchvision.models.resnet101()
        size = 224
    return model.eval(), (torch.randn(batch, 3, size, size),)


if __name__ == "__main__":
    main("resnet101", build, __doc__)
