"""A BERT-like encoder, written the way research code writes it: a config
object, embedding sums, an attention mask turned into an additive bias,
helper methods, a list of layers, and a dict of outputs.

    magpy-capture examples/models/bert.py [--size base|small] [--seq N] [--batch N] [--calls N] [--small]

base is BERT-base (12 layers, hidden 768) at sequence 256; small has 4
layers of hidden 256; --small is a 2-layer, hidden-64 model at sequence 32.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import main


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1

    @classmethod
    def small(cls):
        return cls(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024)

    @classmethod
    def tiny(cls):
        return cls(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128)


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position = nn.Embedding(cfg.max_positions, cfg.hidden_size)
        self.token_type = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        self.register_buffer("position_ids", torch.arange(cfg.max_positions).unsqueeze(0), persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        seq_len = input_ids.shape[1]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = self.position_ids[:, :seq_len]
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        return self.dropout(self.norm(x))


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.hidden_size // cfg.num_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def split_heads(self, x):
        b, n, _ = x.size()
        return x.view(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, hidden, attention_bias):
        q, k, v = (self.split_heads(proj(hidden)) for proj in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = self.dropout(F.softmax(scores + attention_bias, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(*context.shape[:2], -1)


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.attn_out = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.attn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.out_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, hidden, attention_bias):
        attended = self.attn_norm(hidden + self.dropout(self.attn_out(self.attention(hidden, attention_bias))))
        return self.out_norm(attended + self.dropout(self.output(F.gelu(self.intermediate(attended)))))


class BertModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embeddings = Embeddings(cfg)
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg.num_layers)])
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    @staticmethod
    def attention_bias(mask, dtype):
        # 1 keeps a position, 0 masks it: a large negative bias before softmax.
        bias = (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        return bias

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.embeddings(input_ids, token_type_ids)
        bias = self.attention_bias(attention_mask, hidden.dtype)
        all_hidden = []
        for layer in self.layers:
            hidden = layer(hidden, bias)
            all_hidden.append(hidden)
        pooled = torch.tanh(self.pooler(hidden[:, 0]))
        return {"last_hidden_state": hidden, "pooler_output": pooled, "hidden_states": tuple(all_hidden)}


def build(batch=1, small=False, seed=0, size="base", seq=256):
    torch.manual_seed(seed)
    if small:
        cfg, seq = BertConfig.tiny(), min(seq, 32)
    else:
        cfg = BertConfig.small() if size == "small" else BertConfig()
    model = BertModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[:, seq - seq // 8:] = 0  # padding at the end
    return model, (ids, mask)


def options(parser):
    parser.add_argument("--size", default="base", choices=["base", "small"])
    parser.add_argument("--seq", type=int, default=256)


if __name__ == "__main__":
    main("bert", build, __doc__, options)
