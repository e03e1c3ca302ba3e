"""A reduce op the program switches between calls (SUM, then MAX): native
code reads it where no guard sees, so it is a break, never a record that
keeps summing. Run on 2 ranks under magpy-capture and plain Python: the
printed results must agree (tests/distributed/ddp_test.sh)."""
import torch, torch.distributed as dist
import magpy
dist.init_process_group("gloo")
rank = dist.get_rank()
OP = dist.ReduceOp.SUM
def f(x):
    y = x * 2
    dist.all_reduce(y, op=OP)
    return y + 1
g = magpy.compile(f)
for k in range(6):
    if k == 3:
        OP = dist.ReduceOp.MAX
    x = torch.full((3,), float(rank + k))
    print(rank, k, g(x).tolist())
dist.destroy_process_group()  # as train_ddp.py: no process group left to tear down at exit
