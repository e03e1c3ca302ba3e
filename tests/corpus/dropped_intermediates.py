# magpy-test: breaks
"""Capture frees the memory of intermediates the program dropped, as eager
does, while it keeps their identities. Each way a program can reach an
intermediate again must see its values or keep it alive: a weak reference
taken before the drop, gc.get_objects() after it, a view that outlives its
base, a tensor stashed in a module attribute, and autograd's saved tensors.
The monitored call's peak memory stays near eager's (16 intermediates of
16 MiB, one alive at a time); every call gives eager's results.
"""
import copy
import ctypes
import gc
import resource
import weakref

import torch

# A fixed mmap threshold: each 16 MiB block is mapped and unmapped as the
# tensor lives and dies. glibc's own threshold moves after the first free,
# and blocks then reused from the heap made the peak depend on timing.
ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD

import magpy

nn = torch.nn
MiB = 1 << 20


class Chain(nn.Module):
    """Sixteen 16 MiB intermediates, each dropped before the next is made."""

    def forward(self, x):
        for _ in range(16):
            x = x * 1.0001 + 1.0
        return x.sum()


class Reaching(nn.Module):
    """Ways a program reaches memory it dropped (graph breaks cut the
    graph before each, so each is a separate module)."""

    def __init__(self, how):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.how = how

    def forward(self, x):
        a = self.lin(x).relu()
        b = a * 2.0
        view = (b + 1.0)[:, :4]  # its base is dropped: its memory must stay
        del b
        c = view * 3.0
        if self.how == "gc":
            # Eager's gc does not find what the program dropped; capture
            # keeps the objects, and must not let gc hand them back.
            for t in gc.get_objects():
                if type(t) is torch.Tensor and t.shape == (x.shape[0], 8):
                    assert torch.isfinite(t).all()
        if self.how == "weakref":
            # Making a weak reference breaks the call; from there on what
            # the program drops is freed as in eager (autograd saved a).
            ref = weakref.ref(a)
            del a
            held = ref()
            assert held is None or torch.isfinite(held).all()
        self.stash = c + 0.5
        return self.stash * 2.0, view


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


torch.manual_seed(0)
chain = magpy.compile(Chain())
x = torch.randn(4 * MiB)  # 16 MiB
with torch.no_grad():
    chain(x)  # eager's peak first: a plain call's intermediates
    before = peak_mib()
    eager = Chain()(x)
    chain_again = magpy.compile(Chain())
    got = chain_again(x)  # monitored: a new function, captured anew
grown = peak_mib() - before
assert torch.allclose(got, eager), "the chain differs from eager"
assert grown < 128, f"capture held the dropped intermediates: peak grew by {grown:.0f} MiB"

for how in ("gc", "weakref", "autograd"):
    subject = Reaching(how)
    reference = copy.deepcopy(subject)
    compiled = magpy.compile(subject)
    for i in range(4):
        x = torch.randn(3, 8, requires_grad=(how == "autograd"))
        got, want = compiled(x), reference(x)
        assert torch.allclose(got[0], want[0]) and torch.equal(got[1], want[1]), f"{how}, call {i}: differs from eager"
        if how == "autograd":
            got[0].sum().backward()
            want[0].sum().backward()
            assert torch.allclose(subject.lin.weight.grad, reference.lin.weight.grad), "gradients differ from eager"
