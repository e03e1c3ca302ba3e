"""DenseNet-121 (torchvision, random weights: nothing is downloaded): every
layer reads the concatenation of all earlier features of its block.

    magpy-capture examples/models/densenet121.py [--batch N] [--calls N] [--small]

--small runs the same DenseNet class with blocks of (2, 2) layers at 64x64.
"""
import torch
import torchvision

from common import main


def build(batch=1, small=False, seed=0):
    torch.manual_seed(seed)
    if small:
        model = torchvision.models.densenet.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16,
                                                     num_classes=10)
        size = 64
    else:
        model = torchvision.models.densenet121()
        size = 224
    return model.eval(), (torch.randn(batch, 3, size, size),)


if __name__ == "__main__":
    main("densenet121", build, __doc__)
