"""What a program changes of a DistributedDataParallel module between
calls: buffer broadcasting off and on, gradient sync off and on, a
buffer written on one rank, and a parameter frozen after DDP was built
(DDP then never finishes its reduction, and eager raises at the next
call). On 2 ranks under magpy-capture and plain Python the printed
results (loss, a buffer, a weight, or the error) must agree
(tests/distributed/ddp_test.sh)."""
import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist
import magpy
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8); self.bn = nn.BatchNorm1d(8); self.fc2 = nn.Linear(8, 2)
    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))
model = nn.parallel.DistributedDataParallel(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(x, y):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()
f = magpy.compile(step)
g = torch.Generator().manual_seed(5 + rank)
for k in range(12):
    x, y = torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)
    if k == 3: model.broadcast_buffers = False
    if k == 5: model.broadcast_buffers = True
    if k == 7: model.require_backward_grad_sync = False
    if k == 8: model.require_backward_grad_sync = True
    if k == 9: model.module.bn.running_mean.add_(rank + 1.0)
    if k == 10: model.module.fc2.weight.requires_grad_(False)
    try:
        out = f(x, y).item()
    except Exception as e:
        out = type(e).__name__
    print(rank, k, out, float(model.module.bn.running_mean.sum()), float(model.module.fc1.weight.sum()))
dist.destroy_process_group()  # as train_ddp.py: no process group left to tear down at exit
