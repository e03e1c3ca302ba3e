"""An ALIGN-like dual encoder (Jia et al., "Scaling Up Visual and
Vision-Language Representation Learning With Noisy Text Supervision"),
random weights: nothing is downloaded.

Two towers meet only at the end: an EfficientNet-like image encoder (stem,
MBConv blocks with squeeze-and-excitation and stochastic depth, built from a
list of stage configs) and a BERT-like text encoder whose [CLS] token is the
text's representation. Each tower is projected to a shared space and
L2-normalized; the cosine similarities divided by a learnable temperature
are the contrastive logits.

    magpy-capture examples/models/align.py [--batch N] [--calls N] [--small]

Full: 224x224 images, EfficientNet-B0 stages, a 6-layer text encoder of
width 512 over 64 tokens. --small: 64x64 images, two small stages, a
2-layer text encoder of width 64 over 16 tokens.
"""
import math
from dataclasses import dataclass, field
from typing import List, NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import main


# ---------------------------------------------------------------------------
# configs


class StageConfig(NamedTuple):
    expand_ratio: int
    kernel_size: int
    stride: int
    in_channels: int
    out_channels: int
    num_repeats: int
    se_ratio: float = 0.25


# EfficientNet-B0 (Tan & Le, Table 1): stages 2-8
B0_STAGES = [
    StageConfig(1, 3, 1, 32, 16, 1),
    StageConfig(6, 3, 2, 16, 24, 2),
    StageConfig(6, 5, 2, 24, 40, 2),
    StageConfig(6, 3, 2, 40, 80, 3),
    StageConfig(6, 5, 1, 80, 112, 3),
    StageConfig(6, 5, 2, 112, 192, 4),
    StageConfig(6, 3, 1, 192, 320, 1),
]


@dataclass
class VisionConfig:
    stages: List[StageConfig] = field(default_factory=lambda: list(B0_STAGES))
    width_coefficient: float = 1.0
    depth_coefficient: float = 1.0
    depth_divisor: int = 8
    stem_channels: int = 32
    head_channels: int = 1280
    image_size: int = 224
    drop_connect_rate: float = 0.2
    batch_norm_eps: float = 1e-3


@dataclass
class TextConfig:
    vocab_size: int = 30522
    hidden_size: int = 512
    num_layers: int = 6
    num_heads: int = 8
    intermediate_size: int = 2048
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    seq_len: int = 64


@dataclass
class AlignConfig:
    vision: VisionConfig = field(default_factory=VisionConfig)
    text: TextConfig = field(default_factory=TextConfig)
    projection_dim: int = 640
    temperature_init: float = 1.0

    @classmethod
    def small(cls):
        vision = VisionConfig(
            stages=[StageConfig(1, 3, 1, 16, 8, 1), StageConfig(4, 5, 2, 8, 16, 2)],
            stem_channels=16, head_channels=64, image_size=64)
        text = TextConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=2,
                          intermediate_size=256, max_positions=64, seq_len=16)
        return cls(vision=vision, text=text, projection_dim=32)


def round_filters(channels, cfg):
    """Scale a channel count by the width coefficient, to a multiple of the divisor."""
    divisor = cfg.depth_divisor
    channels *= cfg.width_coefficient
    new = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    if new < 0.9 * channels:  # never round down by more than 10%
        new += divisor
    return int(new)


def round_repeats(repeats, cfg):
    return int(math.ceil(cfg.depth_coefficient * repeats))


# ---------------------------------------------------------------------------
# image tower


def drop_path(x, drop_prob, training):
    """Stochastic depth: drop the whole residual branch of some samples."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1.0 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.dim() - 1)
    mask = x.new_empty(shape).bernoulli_(keep_prob)
    return x.div(keep_prob) * mask


class ConvBNAct(nn.Sequential):
    def __init__(self, in_ch, out_ch, kernel_size, stride=1, groups=1, eps=1e-3, act=True):
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding=(kernel_size - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch, eps=eps),
            nn.SiLU() if act else nn.Identity(),
        )


class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeezed):
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = F.adaptive_avg_pool2d(x, 1)
        scale = self.expand(F.silu(self.reduce(scale)))
        return x * torch.sigmoid(scale)


class MBConv(nn.Module):
    """Inverted residual: 1x1 expansion, depthwise conv, SE, 1x1 projection."""

    def __init__(self, in_ch, out_ch, kernel_size, stride, expand_ratio, se_ratio, drop_rate, eps):
        super().__init__()
        hidden = in_ch * expand_ratio
        self.expand = ConvBNAct(in_ch, hidden, 1, eps=eps) if expand_ratio != 1 else nn.Identity()
        self.depthwise = ConvBNAct(hidden, hidden, kernel_size, stride, groups=hidden, eps=eps)
        self.se = SqueezeExcite(hidden, max(1, int(in_ch * se_ratio))) if se_ratio else nn.Identity()
        self.project = ConvBNAct(hidden, out_ch, 1, eps=eps, act=False)
        self.use_residual = stride == 1 and in_ch == out_ch
        self.drop_rate = drop_rate

    def forward(self, inputs):
        x = self.expand(inputs)
        x = self.depthwise(x)
        x = self.se(x)
        x = self.project(x)
        if self.use_residual:
            x = drop_path(x, self.drop_rate, self.training) + inputs
        return x


class EfficientNetEncoder(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.cfg = cfg
        stem_out = round_filters(cfg.stem_channels, cfg)
        self.stem = ConvBNAct(3, stem_out, 3, stride=2, eps=cfg.batch_norm_eps)

        total_blocks = sum(round_repeats(s.num_repeats, cfg) for s in cfg.stages)
        blocks = []
        for stage in cfg.stages:
            in_ch = round_filters(stage.in_channels, cfg)
            out_ch = round_filters(stage.out_channels, cfg)
            for i in range(round_repeats(stage.num_repeats, cfg)):
                # only the first block of a stage changes resolution and width
                blocks.append(MBConv(
                    in_ch if i == 0 else out_ch, out_ch, stage.kernel_size,
                    stage.stride if i == 0 else 1, stage.expand_ratio, stage.se_ratio,
                    cfg.drop_connect_rate * len(blocks) / total_blocks, cfg.batch_norm_eps))
        self.blocks = nn.ModuleList(blocks)

        last_ch = round_filters(cfg.stages[-1].out_channels, cfg)
        self.head = ConvBNAct(last_ch, round_filters(cfg.head_channels, cfg), 1, eps=cfg.batch_norm_eps)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.out_features = round_filters(cfg.head_channels, cfg)

    def forward(self, pixel_values):
        x = self.stem(pixel_values)
        for block in self.blocks:
            x = block(x)
        x = self.head(x)
        return torch.flatten(self.pool(x), 1)


# ---------------------------------------------------------------------------
# text tower


class TextEmbeddings(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids, token_type_ids=None):
        batch, seq_len = input_ids.shape
        position_ids = torch.arange(seq_len, device=input_ids.device).unsqueeze(0).expand(batch, -1)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids)
        x = x + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.norm(x))


class TextSelfAttention(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.hidden_size // cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, attention_bias):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        scores = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        probs = self.dropout(scores.add(attention_bias).softmax(dim=-1))
        context = (probs @ v).transpose(1, 2).reshape(b, n, c)
        return self.out(context)


class TextLayer(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.attention = TextSelfAttention(cfg)
        self.attn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.hidden_size, cfg.intermediate_size),
            nn.GELU(),
            nn.Linear(cfg.intermediate_size, cfg.hidden_size),
        )
        self.mlp_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, attention_bias):
        x = self.attn_norm(x + self.dropout(self.attention(x, attention_bias)))
        return self.mlp_norm(x + self.dropout(self.mlp(x)))


class TextEncoder(nn.Module):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        self.cfg = cfg
        self.embeddings = TextEmbeddings(cfg)
        self.layers = nn.ModuleList([TextLayer(cfg) for _ in range(cfg.num_layers)])

    @staticmethod
    def extended_attention_bias(attention_mask, dtype):
        bias = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        return bias

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        x = self.embeddings(input_ids)
        bias = self.extended_attention_bias(attention_mask, x.dtype)
        for layer in self.layers:
            x = layer(x, bias)
        return x[:, 0, :]  # [CLS]


# ---------------------------------------------------------------------------
# the dual encoder


class AlignModel(nn.Module):
    def __init__(self, cfg: AlignConfig):
        super().__init__()
        self.cfg = cfg
        self.vision_model = EfficientNetEncoder(cfg.vision)
        self.text_model = TextEncoder(cfg.text)
        self.image_projection = nn.Linear(self.vision_model.out_features, cfg.projection_dim)
        self.text_projection = nn.Linear(cfg.text.hidden_size, cfg.projection_dim)
        self.temperature = nn.Parameter(torch.tensor(cfg.temperature_init))
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    @staticmethod
    def normalize(x):
        return x / x.norm(p=2, dim=-1, keepdim=True)

    def get_image_features(self, pixel_values):
        return self.image_projection(self.vision_model(pixel_values))

    def get_text_features(self, input_ids, attention_mask=None):
        return self.text_projection(self.text_model(input_ids, attention_mask))

    def forward(self, pixel_values, input_ids, attention_mask=None):
        image_embeds = self.normalize(self.get_image_features(pixel_values))
        text_embeds = self.normalize(self.get_text_features(input_ids, attention_mask))
        logits_per_text = torch.matmul(text_embeds, image_embeds.t()) / self.temperature
        logits_per_image = logits_per_text.t()
        return {
            "image_embeds": image_embeds,
            "text_embeds": text_embeds,
            "logits_per_image": logits_per_image,
            "logits_per_text": logits_per_text,
        }


def build(batch=2, small=False, seed=0):
    torch.manual_seed(seed)
    cfg = AlignConfig.small() if small else AlignConfig()
    model = AlignModel(cfg).eval()
    size, seq = cfg.vision.image_size, cfg.text.seq_len
    images = torch.randn(batch, 3, size, size)
    ids = torch.randint(1, cfg.text.vocab_size, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[:, seq - seq // 4:] = 0  # padding at the end
    ids = ids.masked_fill(mask == 0, 0)
    return model, (images, ids, mask)


if __name__ == "__main__":
    main("align", build, __doc__, batch=2)
