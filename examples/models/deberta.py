"""A DeBERTa-like encoder (He et al., "DeBERTa: Decoding-enhanced BERT with
disentangled attention"), random weights: nothing is downloaded.

Each token is represented by its content alone; relative positions enter
every layer through a shared table of relative position embeddings, and an
attention score is the sum of three terms,

    A[i, j] = Qc[i] . Kc[j]  +  Qc[i] . Kr[d(i, j)]  +  Kc[j] . Qr[d(j, i)]
              content->content  content->position     position->content

scaled by 1/sqrt(3 * head_dim), where d(i, j) is the relative distance i - j
clamped to [-k, k) (and, with position_buckets, bucketed logarithmically
first). The masked softmax is a module that stores the dimension it was
called with (self.dim = dim) before using it: the side effect of the MagPy
paper's Figure 3c.

    magpy-capture examples/models/deberta.py [--batch N] [--calls N] [--small] [--seq N]

--small: hidden 128, 2 layers, 4 heads, sequences of 32 tokens.
"""
import math
from dataclasses import dataclass, field
from typing import Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import main


@dataclass
class DebertaConfig:
    vocab_size: int = 50265
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    # k in the paper: relative distances are clamped to [-k, k)
    max_relative_positions: int = -1
    # > 0: log-bucket distances beyond position_buckets / 2 (0: plain clamping)
    position_buckets: int = 256
    pos_att_type: Tuple[str, ...] = field(default=("c2p", "p2c"))
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-7
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    pad_token_id: int = 0

    def __post_init__(self):
        if self.max_relative_positions < 1:
            self.max_relative_positions = self.max_position_embeddings
        assert self.hidden_size % self.num_heads == 0, "hidden_size must be a multiple of num_heads"

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    @property
    def relative_span(self):
        """Half the number of rows of the relative embedding table."""
        return self.position_buckets if self.position_buckets > 0 else self.max_relative_positions

    @classmethod
    def small(cls):
        return cls(vocab_size=1000, hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512,
                   max_position_embeddings=64, position_buckets=16)


ACT2FN = {"gelu": F.gelu, "relu": F.relu, "tanh": torch.tanh}


# ---------------------------------------------------------------------------
# relative positions


def log_bucket_position(relative_pos, buckets, max_distance):
    """Distances up to buckets // 2 keep their value; farther ones are
    compressed logarithmically so that max_distance maps to the last bucket."""
    half = buckets // 2
    sign = torch.sign(relative_pos)
    magnitude = relative_pos.abs()
    # clamp before the log: near distances are discarded by the where below anyway
    far = magnitude.clamp(min=half).to(torch.float32)
    log_ratio = torch.log(far / half) / math.log((max_distance - 1) / half)
    bucketed = half + torch.ceil(log_ratio * (half - 1)).to(relative_pos.dtype)
    return torch.where(magnitude <= half, relative_pos, sign * bucketed)


def build_relative_position(query_size, key_size, buckets=0, max_position=-1, device=None):
    """rel[i, j] = i - j for query position i and key position j, shape (1, q, k)."""
    q_ids = torch.arange(query_size, dtype=torch.long, device=device)
    k_ids = torch.arange(key_size, dtype=torch.long, device=device)
    rel = q_ids[:, None] - k_ids[None, :]
    if buckets > 0 and max_position > 0:
        rel = log_bucket_position(rel, buckets, max_position)
    return rel.unsqueeze(0)


# ---------------------------------------------------------------------------
# building blocks


class FP32LayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32 whatever the input type."""

    def forward(self, x):
        return super().forward(x.float()).type_as(x)


class XSoftmax(nn.Module):
    """Softmax over the positions the mask keeps; masked positions get 0
    (rows with nothing to attend to are all zeros, not NaN)."""

    def __init__(self):
        super().__init__()
        self.dim = -1

    def forward(self, scores, mask, dim):
        self.dim = dim
        rmask = ~mask.to(torch.bool)
        output = scores.masked_fill(rmask, float("-inf"))
        output = torch.softmax(output, self.dim)
        output = output.masked_fill(rmask, 0.0)
        return output


class StableDropout(nn.Dropout):
    """Dropout that is skipped outright when it can do nothing."""

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        return super().forward(x)


class Embeddings(nn.Module):
    """Content only: DeBERTa adds no absolute positions at the input."""

    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=cfg.pad_token_id)
        self.norm = FP32LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = StableDropout(cfg.hidden_dropout)

    def forward(self, input_ids, mask=None):
        embeddings = self.norm(self.word_embeddings(input_ids))
        if mask is not None:
            # zero the padding so it contributes nothing downstream
            embeddings = embeddings * mask.unsqueeze(-1).to(embeddings.dtype)
        return self.dropout(embeddings)


class DisentangledSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.head_dim
        self.all_head_size = self.num_heads * self.head_dim
        self.pos_att_type = tuple(cfg.pos_att_type)
        self.query_proj = nn.Linear(cfg.hidden_size, self.all_head_size)
        self.key_proj = nn.Linear(cfg.hidden_size, self.all_head_size)
        self.value_proj = nn.Linear(cfg.hidden_size, self.all_head_size)
        # W_{k,r} and W_{q,r}: projections of the relative embeddings
        if "c2p" in self.pos_att_type:
            self.pos_key_proj = nn.Linear(cfg.hidden_size, self.all_head_size, bias=False)
        if "p2c" in self.pos_att_type:
            self.pos_query_proj = nn.Linear(cfg.hidden_size, self.all_head_size)
        self.span = cfg.relative_span
        self.softmax = XSoftmax()
        self.dropout = StableDropout(cfg.attention_dropout)
        self.pos_dropout = StableDropout(cfg.hidden_dropout)

    def transpose_for_scores(self, x):
        # (..., n, heads * d) -> (..., heads, n, d)
        new_shape = x.size()[:-1] + (self.num_heads, self.head_dim)
        return x.view(new_shape).transpose(-3, -2)

    def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
        query = self.transpose_for_scores(self.query_proj(hidden_states))
        key = self.transpose_for_scores(self.key_proj(hidden_states))
        value = self.transpose_for_scores(self.value_proj(hidden_states))

        scale_factor = 1 + len(self.pos_att_type)
        scale = math.sqrt(self.head_dim * scale_factor)
        scores = torch.matmul(query, key.transpose(-1, -2)) / scale
        if self.pos_att_type:
            rel_embeddings = self.pos_dropout(rel_embeddings)
            scores = scores + self.disentangled_bias(query, key, relative_pos, rel_embeddings, scale)

        probs = self.dropout(self.softmax(scores, attention_mask, -1))
        context = torch.matmul(probs, value)
        context = context.transpose(-3, -2).contiguous()
        return context.view(context.size()[:-2] + (self.all_head_size,))

    def disentangled_bias(self, query, key, relative_pos, rel_embeddings, scale):
        q_len, k_len = query.size(-2), key.size(-2)
        if relative_pos.dim() == 2:
            relative_pos = relative_pos.unsqueeze(0)
        # only the part of the table the sequence can reach
        att_span = min(max(q_len, k_len), self.span)
        rel_embeddings = rel_embeddings[self.span - att_span:self.span + att_span].unsqueeze(0)

        bias = 0
        if "c2p" in self.pos_att_type:
            pos_key = self.transpose_for_scores(self.pos_key_proj(rel_embeddings))  # (1, h, 2a, d)
            c2p = torch.matmul(query, pos_key.transpose(-1, -2))  # (b, h, q, 2a)
            c2p_pos = torch.clamp(relative_pos + att_span, 0, 2 * att_span - 1)  # d(i, j)
            index = c2p_pos.unsqueeze(1).expand(query.size(0), query.size(1), q_len, k_len)
            bias = bias + torch.gather(c2p, dim=-1, index=index) / scale
        if "p2c" in self.pos_att_type:
            pos_query = self.transpose_for_scores(self.pos_query_proj(rel_embeddings))  # (1, h, 2a, d)
            p2c = torch.matmul(key, pos_query.transpose(-1, -2))  # (b, h, k, 2a)
            # d(j, i) = j - i: the distance seen from the key, laid out [j, i]
            p2c_pos = torch.clamp(-relative_pos + att_span, 0, 2 * att_span - 1).transpose(-1, -2)
            index = p2c_pos.unsqueeze(1).expand(key.size(0), key.size(1), k_len, q_len)
            bias = bias + torch.gather(p2c, dim=-1, index=index).transpose(-1, -2) / scale
        return bias


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self = DisentangledSelfAttention(cfg)
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.norm = FP32LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = StableDropout(cfg.hidden_dropout)

    def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
        context = self.self(hidden_states, attention_mask, relative_pos, rel_embeddings)
        return self.norm(hidden_states + self.dropout(self.dense(context)))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = ACT2FN[cfg.hidden_act]
        self.output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.norm = FP32LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = StableDropout(cfg.hidden_dropout)

    def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
        attended = self.attention(hidden_states, attention_mask, relative_pos, rel_embeddings)
        out = self.output(self.act(self.intermediate(attended)))
        return self.norm(attended + self.dropout(out))


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg.num_layers)])
        # one table shared by every layer
        self.rel_embeddings = nn.Embedding(cfg.relative_span * 2, cfg.hidden_size)
        self.rel_norm = FP32LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def get_rel_embedding(self):
        return self.rel_norm(self.rel_embeddings.weight)

    def get_attention_mask(self, attention_mask):
        # (b, n) -> (b, 1, n, n): pair (i, j) is kept when both tokens are
        if attention_mask.dim() <= 2:
            extended = attention_mask.unsqueeze(1).unsqueeze(2)
            attention_mask = extended * extended.squeeze(-2).unsqueeze(-1)
        elif attention_mask.dim() == 3:
            attention_mask = attention_mask.unsqueeze(1)
        return attention_mask

    def get_rel_pos(self, hidden_states, query_states=None):
        q = query_states.size(-2) if query_states is not None else hidden_states.size(-2)
        return build_relative_position(q, hidden_states.size(-2), self.cfg.position_buckets,
                                       self.cfg.max_relative_positions, device=hidden_states.device)

    def forward(self, hidden_states, attention_mask, output_hidden_states=True):
        attention_mask = self.get_attention_mask(attention_mask)
        relative_pos = self.get_rel_pos(hidden_states)
        rel_embeddings = self.get_rel_embedding()
        all_hidden = [hidden_states] if output_hidden_states else []
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask, relative_pos, rel_embeddings)
            if output_hidden_states:
                all_hidden.append(hidden_states)
        return hidden_states, all_hidden


class DebertaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.embeddings(input_ids, attention_mask)
        last, all_hidden = self.encoder(hidden, attention_mask, output_hidden_states=True)
        return {"last_hidden_state": last, "hidden_states": tuple(all_hidden)}


def build(batch=1, small=False, seed=0, seq=None):
    torch.manual_seed(seed)
    cfg = DebertaConfig.small() if small else DebertaConfig()
    if seq is None:
        seq = 32 if small else 128
    model = DebertaModel(cfg).eval()
    ids = torch.randint(1, cfg.vocab_size, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[:, seq - seq // 8:] = 0  # padding at the end
    ids = ids.masked_fill(mask == 0, cfg.pad_token_id)
    return model, (ids, mask)


def add_options(parser):
    parser.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 128, --small 32)")


if __name__ == "__main__":
    main("deberta", build, __doc__, add_options=add_options)
