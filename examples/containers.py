"""A model written with Python containers and builtins: a config dict, a
list of layers, enumerate/zip/len, list.append, a dict comprehension, sum()
over a generator, and a (dict, tuple) result.

    magpy-capture examples/containers.py
"""
import torch
import torch.nn as nn

import magpy

CONFIG = {"dims": [12, 24, 24, 6], "names": ["low", "mid", "high"], "act": "relu"}


class Tower(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        dims = cfg["dims"]
        self.blocks = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])

    def activation(self, x):
        return torch.relu(x) if self.cfg["act"] == "relu" else torch.tanh(x)

    def forward(self, x):
        feats = []
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i < len(self.blocks) - 1:
                x = self.activation(x)
            feats.append(x)
        out = {name: f.mean(dim=-1) for name, f in zip(self.cfg["names"], feats)}
        out["total"] = sum(f.sum() for f in feats)
        return out, tuple(feats)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def main():
    torch.manual_seed(0)
    model = Tower(CONFIG).eval()
    compiled = magpy.compile(model)
    with torch.no_grad():
        for step in range(3):
            x = torch.randn(2, 12)
            assert same(compiled(x), model(x)), f"step {step}: compiled result differs from eager"
        # A changed config is a different program: magpy must notice.
        CONFIG["act"] = "tanh"
        x = torch.randn(2, 12)
        assert same(compiled(x), model(x)), "result after changing the config differs from eager"
    print("containers: 4 calls, results equal to eager")


if __name__ == "__main__":
    main()
