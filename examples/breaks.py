"""A model whose forward calls a native function magpy has no annotation
for (zlib.crc32), so its calls break the graph. magpy-capture --report
shows where, and suggests the annotation that removes the break:

    magpy-capture --report report.txt examples/breaks.py
"""
import zlib

import torch

import magpy


class Tagged(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, tag):
        salt = zlib.crc32(tag.encode()) % 7 + 1
        return torch.relu(self.fc(x)) * salt


torch.manual_seed(0)
model = Tagged().eval()
compiled = magpy.compile(model)
x = torch.randn(2, 8)
with torch.no_grad():
    for tag in ["alpha", "alpha", "beta", "beta"]:
        assert torch.equal(compiled(x, tag), model(x, tag)), "compiled result differs from eager"
print("breaks: 4 calls, results equal to eager")
