# magpy-test: breaks
# Buffers that share memory (self.view = self.total.view(2, 2)) and a
# record that writes one of them in place: the JIT runs on the live
# tensors, where the write shows through the view. A record file keeps
# each tensor's contents apart, so its records are graph breaks natively
# (refused with the reason), never a replay on independent copies.
import torch
from harness import compare


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("view", self.total.view(2, 2))

    def forward(self, x):
        self.total.add_(x)
        return self.view * 2


compare(Accumulate, [(torch.ones(4) * (i + 1),) for i in range(3)], records=1, hits=2)
