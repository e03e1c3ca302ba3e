"""Data-parallel training on torch.distributed (Gloo): the small CNN of
train_step.py, each rank training on its own shard of batches, with
DistributedDataParallel (--mode ddp) or with the script all-reducing the
gradients itself (--mode manual). Start it once per rank with torchrun's
environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):

    RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
        magpy-capture -o OUT/step.{rank}.mgp examples/train_ddp.py OUT
    magpy-run --nproc-per-node 2 'OUT/step.{rank}.mgp' --batches 'OUT/shard_{rank}.pt' --save-state OUT/trained.pt

Each rank writes OUT/shard_<rank>.pt (its batches), OUT/losses_<rank>.pt
(the loss of every step) and OUT/state_<rank>.pt (the weights after
--steps steps). Under plain Python (PYTHONPATH=python) the same command
is eager training, which tests/distributed/ddp_test.sh compares with.
--compare A B checks two such output directories against each other,
and --compare-state FILE DIR a saved state with DIR/state_0.pt.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import magpy


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).flatten(1))


parser = argparse.ArgumentParser()
parser.add_argument("out_dir", nargs="?", default=".")
parser.add_argument("--mode", choices=["ddp", "manual"], default="ddp")
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batches", type=int, default=20, help="batches in each rank's shard")
parser.add_argument("--time-from", type=int, default=0, help="print the time of the steps from this one on")
parser.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"))
parser.add_argument("--compare-state", nargs=2, metavar=("FILE", "DIR"))
options = parser.parse_args()


def unwrapped(state):
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}


def assert_close_states(a, b, what):
    a, b = unwrapped(a), unwrapped(b)
    assert set(a) == set(b), (what, sorted(a), sorted(b))
    worst = 0.0
    for key in a:
        assert torch.allclose(a[key].double(), b[key].double(), rtol=1e-4, atol=1e-6), (what, key)
        worst = max(worst, (a[key].double() - b[key].double()).abs().max().item())
    return worst


def compare(dir_a, dir_b):
    ranks = sorted(f for f in os.listdir(dir_a) if f.startswith("losses_"))
    assert ranks, dir_a
    for name in ranks:
        la, lb = torch.load(os.path.join(dir_a, name)), torch.load(os.path.join(dir_b, name))
        assert len(la) == len(lb) and all(abs(x - y) <= 1e-5 * max(1.0, abs(y)) for x, y in zip(la, lb)), (name, la, lb)
        state = name.replace("losses_", "state_")
        worst = assert_close_states(torch.load(os.path.join(dir_a, state)), torch.load(os.path.join(dir_b, state)), state)
        print(f"{name}: {len(la)} losses equal, final weights max abs diff {worst:g}")


if options.compare:
    compare(*options.compare)
elif options.compare_state:
    worst = assert_close_states(torch.load(options.compare_state[0]),
                                torch.load(os.path.join(options.compare_state[1], "state_0.pt")), "state")
    print(f"trained natively = trained eagerly with DDP: max abs diff {worst:g}")
else:
    # model and opt are the module's globals: magpy-run --save-state finds the module there.
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = Net()
    model = nn.parallel.DistributedDataParallel(net) if options.mode == "ddp" else net
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if options.mode == "manual":
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        return loss.detach()

    generator = torch.Generator().manual_seed(1 + rank)
    batches = [(torch.randn(8, 3, 8, 8, generator=generator), torch.randint(0, 10, (8,), generator=generator))
               for _ in range(options.batches)]
    out_dir = options.out_dir
    os.makedirs(out_dir, exist_ok=True)
    torch.save(batches, os.path.join(out_dir, f"shard_{rank}.pt"))
    compiled = magpy.compile(step)
    losses = []
    for k, (x, y) in enumerate(batches[:options.steps]):
        if k == options.time_from:
            start = time.perf_counter()
        losses.append(compiled(x, y).item())
    if options.time_from < len(losses):
        print(f"rank {rank}: {len(losses) - options.time_from} steps in {time.perf_counter() - start:.4f} s")
    torch.save(losses, os.path.join(out_dir, f"losses_{rank}.pt"))
    torch.save(model.state_dict(), os.path.join(out_dir, f"state_{rank}.pt"))
    print(f"rank {rank} of {world}: {len(losses)} steps, last loss {losses[-1]:.4f}")
    dist.destroy_process_group()
