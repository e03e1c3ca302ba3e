# Loops over a size (MagPy 6.2.2): `for t in range(x.size(0))` whose
# iterations run the same operators becomes one loop region, so one
# dynamic record serves every length. Each program below either rolls
# (records=1) or does something between iterations that the graph cannot
# show; those keep today's record per length. Every call is compared with
# eager, and the records replay natively at their logged calls.
import torch
from harness import compare

lengths = [5, 7, 3, 9, 6, 2]


class Recurrent(torch.nn.Module):
    """The paper's Figure 18 LSTM: carried (h, c), outputs appended and stacked."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(8, 16)

    def forward(self, x):
        h = x.new_zeros(x.size(1), 16)
        c = x.new_zeros(x.size(1), 16)
        outputs = []
        for t in range(x.size(0)):
            h, c = self.cell(x[t], (h, c))
            outputs.append(h)
        return torch.stack(outputs), h


seqs = [(torch.randn(n, 2, 8),) for n in lengths]
compare(lambda: Recurrent().eval(), seqs, records=1, monitored=2, hits=4, breaks=0)


def reversed_scan(x, w):
    # index arithmetic (n - 1 - t) and an accumulator; the first read of w
    # happens in the first iteration
    n = x.size(0)
    acc = torch.zeros_like(x[0])
    for t in range(n):
        acc = acc * 0.5 + x[n - 1 - t] * w
    return acc


compare(lambda: reversed_scan, [(torch.randn(n, 4), torch.randn(4)) for n in lengths], records=1, monitored=2, hits=4)


def counts_in_python(x):
    # a Python counter changes between iterations: the body could decide on it
    k = 0
    y = x[0]
    for t in range(x.size(0)):
        k += 1
        y = y + x[t] * k
    return y


compare(lambda: counts_in_python, [(torch.randn(n, 3),) for n in lengths], records=6, monitored=6, hits=0)


def reads_its_list(x):
    # len() of the list the loop appends to decides something
    out = []
    for t in range(x.size(0)):
        y = x[t] * 2
        if len(out) > 2:
            y = y + out[-1]
        out.append(y)
    return torch.stack(out)


compare(lambda: reads_its_list, [(torch.randn(n, 3),) for n in lengths], records=6, monitored=6, hits=0)


def picks_after(x):
    # the loop's list read at a fixed position afterwards: the third row, not the last
    out = []
    h = x[0]
    for t in range(x.size(0)):
        h = h + x[t]
        out.append(h)
    return out[2] * 1 if len(out) > 2 else h


compare(lambda: picks_after, [(torch.randn(n, 3),) for n in [5, 7, 4, 9]], records=4, monitored=4, hits=0)


def breaks_early(x):
    # the index decides when the loop ends
    h = x[0]
    for t in range(x.size(0)):
        if t >= 4:
            break
        h = h * x[t]
    return h


compare(lambda: breaks_early, [(torch.randn(n, 3),) for n in [2, 3, 6, 8, 3]], hits=1)


class Counter(torch.nn.Module):
    """The body writes the module: the graph cannot repeat it per iteration."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x):
        h = x[0]
        for t in range(x.size(0)):
            self.steps += 1
            h = h + x[t]
        return h * self.steps


compare(lambda: Counter(), [(torch.randn(n, 3),) for n in lengths], hits=0)


class Layers(torch.nn.Module):
    """The index picks a layer (a container index): the loop stays unrolled."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(9))

    def forward(self, x):
        h = x[0]
        for t in range(x.size(0)):
            h = self.layers[t](h + x[t])
        return h


compare(lambda: Layers(), [(torch.randn(n, 3),) for n in lengths], records=6, monitored=6, hits=0)


def nested(x):
    # the outer loop holds another and stays unrolled; each inner one rolls
    # or not by what its iterations recorded (x[i, j] at i = 1, j = 0 looks
    # as if j were the dimension: that inner loop's iterations differ)
    total = x[0, 0] * 0
    for i in range(x.size(0)):
        for j in range(x.size(1)):
            total = total + x[i, j] * (j + 1)
    return total


compare(lambda: nested, [(torch.randn(n, 3, 2),) for n in [2, 3, 2, 4]], records=3, monitored=3, hits=1)


def scales():
    for _ in range(5):
        yield 1.0
    while True:
        yield 2.0


def advances_generator(x):
    # a generator made before the loop advances in it: its position is
    # state the loop's frame does not show (1.0 five times, then 2.0)
    g = scales()
    h = x[0]
    for t in range(x.size(0)):
        h = h * next(g) + x[t]
    return h


compare(lambda: advances_generator, [(torch.randn(n, 3),) for n in [5, 4, 7, 8]], records=4, monitored=4, hits=0)


def two_back(x):
    # a recurrence over the two previous values, both starting as z: with
    # two iterations (n // 2 at n = 4 and 5) the second still reads z, as
    # if it were a value from before the loop
    z = x[0] * 0 + 1
    a = b = z
    for t in range(x.size(0) // 2):
        h = a + b + x[t]
        a, b = b, h
    return b


compare(lambda: two_back, [(torch.ones(n, 3),) for n in [4, 5, 8, 12]], records=4, monitored=4, hits=0)


def window(x):
    # the same recurrence kept in a dict the loop writes
    z = x[0] * 0 + 1
    d = {"a": z, "b": z}
    for t in range(x.size(0) // 2):
        h = d["a"] + d["b"] + x[t]
        d["a"], d["b"] = d["b"], h
    return d["b"]


compare(lambda: window, [(torch.ones(n, 3),) for n in [4, 5, 8, 12]], records=4, monitored=4, hits=0)


class Stateful(torch.nn.Module):
    """Per-layer state in a list the loop writes in place (the paper's
    stacked LSTM): the list holds equivalent values at each iteration."""

    def __init__(self):
        super().__init__()
        self.cells = torch.nn.ModuleList([torch.nn.GRUCell(4, 6), torch.nn.GRUCell(6, 6)])

    def forward(self, x):
        state = [x.new_zeros(x.size(1), 6) for _ in self.cells]
        outs = []
        for t in range(x.size(0)):
            h = x[t]
            for i, cell in enumerate(self.cells):
                state[i] = cell(h, state[i])
                h = state[i]
            outs.append(h)
        return torch.stack(outs)  # the last state is not used after the loop itself


compare(lambda: Stateful().eval(), [(torch.randn(n, 2, 4),) for n in lengths], records=1, monitored=2, hits=4)


def rows(x):
    # a generator whose loop yields: the consumer's code runs between its
    # iterations, with a counter the loop's frame does not show
    h = x[0] * 0
    for t in range(x.size(0)):
        h = h + x[t]
        yield h


def consumes(x):
    total = x[0] * 0
    seen = 0
    for h in rows(x):
        seen += 1
        total = total + h * (2.0 if seen > 3 else 1.0)
    return total


compare(lambda: consumes, [(torch.randn(n, 3),) for n in [3, 2, 5, 6]], hits=0)


lin = torch.nn.Linear(3, 4)


def comprehension(x):
    # a list comprehension over range() of a size runs the loop in its own frame
    return torch.stack([torch.relu(lin(x[t])) * (t + 1) for t in range(x.size(0))])


def comprehension_read(x):
    # ... and its list read at a position afterwards: the first row, not the last
    ys = [x[t] * 2 for t in range(x.size(0))]
    return ys[0] + torch.stack(ys).sum(0)


with torch.no_grad():
    compare(lambda: comprehension, [(torch.randn(n, 3),) for n in lengths], records=1, monitored=2, hits=4)
    compare(lambda: comprehension_read, [(torch.randn(n, 3),) for n in lengths], records=6, monitored=6, hits=0)


def over_len(x):
    # len(x) of a tensor is x.size(0): a size the graph reads, here a trip count and a factor
    h = x[0] * 0
    for t in range(len(x)):
        h = h * 0.5 + x[t]
    return h * len(x)


compare(lambda: over_len, [(torch.randn(n, 3),) for n in lengths], records=1, monitored=2, hits=4)
