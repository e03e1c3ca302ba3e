# nn.Embedding(sparse=True) gives its weight a sparse gradient. Replaying
# magpy.backward for it fails inside the engine (aten::new_empty_strided
# on SparseCPU); after the graph wrote its inputs in place the failure
# reaches the program as a RuntimeError. Capture must refuse (break) or
# replay it right.
# magpy-test: breaks
import torch
import torch.nn as nn

from harness import compare


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 3, sparse=True)

    def forward(self, idx):
        loss = self.emb(idx).pow(2).sum()
        loss.backward()
        g = self.emb.weight.grad.to_dense()
        with torch.no_grad():
            self.emb.weight.sub_(0.1 * g)
        self.emb.weight.grad = None
        return loss.detach(), g


torch.manual_seed(1)
calls = [(torch.randint(0, 10, (5,)),) for _ in range(4)]
compare(Step, calls)
