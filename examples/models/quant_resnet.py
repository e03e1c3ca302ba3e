"""A post-training quantized ResNet in the style of Banner et al. ("Post
training 4-bit quantization of convolutional networks for
rapid-deployment", ACIQ): every nn.Conv2d and nn.Linear of a torchvision
ResNet is replaced by a quantizing subclass that fake-quantizes
(quantize-dequantize, uniform, torch.round)

  - its weights per output channel, between each channel's min and max,
    then corrects the quantized weights' per-channel mean and norm (the
    paper's bias correction), and
  - its input activations per tensor, clipped at the analytically optimal
    value alpha for a Laplace (or Gaussian) prior: alpha = coefficient[bits]
    * b, with b = mean(|x - mean(x)|) estimated from the activation itself.

A Python config picks the bit-widths (4-bit weights, 8-bit activations, the
first and last layers kept at 8 bits); the ranges and statistics are
tensors, computed on every call. Random weights: nothing is downloaded.

    magpy-capture examples/models/quant_resnet.py [--batch N] [--calls N] [--small]

The full configuration quantizes ResNet-50 at 224x224; --small quantizes
ResNet-18 at 64x64.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

from common import main


# Optimal clipping value alpha* / b for a Laplace(0, b) and alpha* / sigma for
# a N(0, sigma^2) distributed tensor, per bit-width (Banner et al., sec. 4).
ALPHA_LAPLACE = {2: 2.83, 3: 3.89, 4: 5.03, 5: 6.20, 6: 7.41, 7: 8.64, 8: 9.89}
ALPHA_GAUS = {2: 1.71, 3: 2.15, 4: 2.55, 5: 2.94, 6: 3.29, 7: 3.61, 8: 3.92}


@dataclass
class QuantConfig:
    weight_bits: int = 4
    act_bits: int = 8
    first_last_bits: int = 8  # the stem and the classifier stay at 8 bits
    act_clipping: str = "laplace"  # "laplace", "gaus" or "no" (min/max)
    per_channel_weights: bool = True
    bias_correction: bool = True
    eps: float = 1e-8


def uniform_quantize(x, lo, hi, num_bits, eps=1e-8):
    """Quantize-dequantize x on 2**num_bits evenly spaced levels in [lo, hi]
    (lo and hi are tensors, broadcast against x)."""
    levels = 2 ** num_bits - 1
    scale = torch.clamp((hi - lo) / levels, min=eps)
    x = torch.max(torch.min(x, hi), lo)
    q = torch.round((x - lo) / scale)
    return q * scale + lo


def laplace_b(x):
    """Maximum-likelihood estimate of the Laplace scale: E|x - E x|."""
    return torch.mean(torch.abs(x - x.mean()))


def aciq_range(x, num_bits, clipping="laplace"):
    """The clipping range of a tensor: its mean +- alpha, inside [min, max]."""
    x_min, x_max = x.min(), x.max()
    if clipping == "no":
        return x_min, x_max
    mean = x.mean()
    if clipping == "laplace":
        alpha = ALPHA_LAPLACE[num_bits] * laplace_b(x)
    elif clipping == "gaus":
        alpha = ALPHA_GAUS[num_bits] * x.std()
    else:
        raise ValueError("unknown clipping method {!r}".format(clipping))
    return torch.max(x_min, mean - alpha), torch.min(x_max, mean + alpha)


def channel_view(t, ndim):
    """A per-output-channel vector shaped to broadcast against a weight."""
    return t.view(-1, *([1] * (ndim - 1)))


def per_channel_range(w):
    flat = w.flatten(1)
    return channel_view(flat.min(dim=1)[0], w.dim()), channel_view(flat.max(dim=1)[0], w.dim())


def bias_correct(w, wq, eps=1e-8):
    """Banner et al.'s bias correction: w_c <- xi_c * (wq_c + mu_c) with
    mu_c = E[w_c] - E[wq_c] and xi_c = ||w_c - E w_c|| / ||wq_c - E wq_c||."""
    dims = list(range(1, w.dim()))
    mean = w.mean(dim=dims, keepdim=True)
    mean_q = wq.mean(dim=dims, keepdim=True)
    norm = (w - mean).flatten(1).norm(dim=1)
    norm_q = (wq - mean_q).flatten(1).norm(dim=1)
    xi = channel_view(norm / torch.clamp(norm_q, min=eps), w.dim())
    return xi * (wq + (mean - mean_q))


class QuantMixin(object):
    """What a quantizing layer adds to its float layer."""

    def init_quant(self, cfg, weight_bits, act_bits):
        self.cfg = cfg
        self.weight_bits = weight_bits
        self.act_bits = act_bits

    def quantize_input(self, x):
        lo, hi = aciq_range(x, self.act_bits, self.cfg.act_clipping)
        return uniform_quantize(x, lo, hi, self.act_bits, self.cfg.eps)

    def quantized_weight(self):
        w = self.weight
        if self.cfg.per_channel_weights:
            lo, hi = per_channel_range(w)
        else:
            lo, hi = w.min(), w.max()
        wq = uniform_quantize(w, lo, hi, self.weight_bits, self.cfg.eps)
        if self.cfg.bias_correction:
            wq = bias_correct(w, wq, self.cfg.eps)
        return wq

    def extra_repr(self):
        return super(QuantMixin, self).extra_repr() + ", weight_bits={}, act_bits={}".format(
            self.weight_bits, self.act_bits)

    @classmethod
    def from_float(cls, module, cfg, weight_bits, act_bits):
        raise NotImplementedError


class QConv2d(QuantMixin, nn.Conv2d):
    @classmethod
    def from_float(cls, conv, cfg, weight_bits, act_bits):
        qconv = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                    padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
                    bias=conv.bias is not None, padding_mode=conv.padding_mode)
        qconv.load_state_dict(conv.state_dict())
        qconv.init_quant(cfg, weight_bits, act_bits)
        return qconv

    def forward(self, input):
        input = self.quantize_input(input)
        return self._conv_forward(input, self.quantized_weight(), self.bias)


class QLinear(QuantMixin, nn.Linear):
    @classmethod
    def from_float(cls, linear, cfg, weight_bits, act_bits):
        qlinear = cls(linear.in_features, linear.out_features, bias=linear.bias is not None)
        qlinear.load_state_dict(linear.state_dict())
        qlinear.init_quant(cfg, weight_bits, act_bits)
        return qlinear

    def forward(self, input):
        input = self.quantize_input(input)
        return F.linear(input, self.quantized_weight(), self.bias)


QUANT_MODULES = {nn.Conv2d: QConv2d, nn.Linear: QLinear}


def set_module(model, name, module):
    parent_name, _, child_name = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child_name, module)


def quantize_model(model, cfg):
    """Replaces every Conv2d / Linear of `model` by its quantizing subclass."""
    layers = [(name, m) for name, m in model.named_modules() if type(m) in QUANT_MODULES]
    first, last = layers[0][0], layers[-1][0]
    for name, module in layers:
        if name in (first, last):
            weight_bits = cfg.first_last_bits
        else:
            weight_bits = cfg.weight_bits
        qmodule = QUANT_MODULES[type(module)].from_float(module, cfg, weight_bits, cfg.act_bits)
        set_module(model, name, qmodule)
    return model


def build(batch=1, small=False, seed=0):
    torch.manual_seed(seed)
    if small:
        model, size = torchvision.models.resnet18(), 64
    else:
        model, size = torchvision.models.resnet50(), 224
    model = quantize_model(model.eval(), QuantConfig())
    return model.eval(), (torch.randn(batch, 3, size, size),)


if __name__ == "__main__":
    main("quant_resnet", build, __doc__)
