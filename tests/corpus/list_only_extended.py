# A list the function only appends to (a log, a forward hook collecting
# features) is extended by its record, which guards neither its length nor
# its elements, so one record serves calls whatever the log holds. Any read
# of the list in the call (len, a truth test, iteration, an index, a
# native callee reading it, a callback's result compared natively) keeps
# the old behaviour: the contents are guarded. Each case runs the same
# calls eagerly on a twin state and compares results and lists after
# every call, while the script changes the lists between calls.
import torch

import magpy


def check(name, compiled, eager, args_of, calls, between=None):
    for i in range(calls):
        a, b = args_of(i)
        got, want = compiled(*a), eager(*b)
        assert torch.equal(torch.as_tensor(got), torch.as_tensor(want)), (name, i, got, want)
        if between:
            between(i)


# 1. A global log; the script clears it, fills it, rebinds it between calls.
LOG, TWIN = [], []


def logged(x):
    y = x * 2
    LOG.append(3)
    LOG.append(y)
    return y


def logged_twin(x):
    y = x * 2
    TWIN.append(3)
    TWIN.append(y)
    return y


def same_logs():
    assert len(LOG) == len(TWIN), (LOG, TWIN)
    for a, b in zip(LOG, TWIN):
        assert type(a) is type(b) and (a == b if not isinstance(a, torch.Tensor) else torch.equal(a, b)), (LOG, TWIN)


def change_logs(i):
    global LOG, TWIN
    same_logs()
    if i == 1:
        LOG.clear(), TWIN.clear()
    elif i == 2:
        LOG += ["x"] * 5
        TWIN += ["x"] * 5
    elif i == 3:
        LOG, TWIN = [7], [7]  # a new list under the name


c = magpy.compile(logged)
check("global", c, logged_twin, lambda i: ((torch.full((2,), float(i)),), (torch.full((2,), float(i)),)), 6, change_logs)
same_logs()
assert c._magpy_stats()["records"] == 1, c._magpy_stats()  # the log's length is not guarded


# 2. A forward hook collecting features, as feature extractors do.
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


torch.manual_seed(0)
net, twin = Net(), Net()
twin.load_state_dict(net.state_dict())
feats, twin_feats = [], []
net.a.register_forward_hook(lambda m, i, o: feats.append(o.detach()))
twin.a.register_forward_hook(lambda m, i, o: twin_feats.append(o.detach()))
c = magpy.compile(net)


def hooks_between(i):
    assert len(feats) == len(twin_feats) and all(torch.equal(p, q) for p, q in zip(feats, twin_feats))
    if i == 2:
        del feats[:], twin_feats[:]


xs = [torch.randn(3, 4) for _ in range(5)]
check("hook", c, twin, lambda i: ((xs[i],), (xs[i],)), 5, hooks_between)
assert c._magpy_stats()["records"] == 1, c._magpy_stats()


# 3. A bound method, extend, an argument list, a helper that appends.
class State:
    def __init__(self):
        self.hist = []
        self.push = self.hist.append
        self.steps = 0


def helper(lst, v):
    lst.append(v)


def step(x, st, out):
    st.steps += 1
    st.push(x.sum())
    out.extend((x + 1, x - 1))
    helper(out, st.steps)
    return x * st.steps


s1, s2, o1, o2 = State(), State(), [], []
c = magpy.compile(step)


def step_between(i):
    assert s1.steps == s2.steps and len(s1.hist) == len(s2.hist), (s1.hist, s2.hist)
    assert all(torch.equal(p, q) for p, q in zip(s1.hist, s2.hist))
    assert len(o1) == len(o2) and all(torch.equal(torch.as_tensor(p), torch.as_tensor(q)) for p, q in zip(o1, o2)), (o1, o2)
    if i == 1:
        s1.hist.clear(), s2.hist.clear()
        o1.append(0), o2.append(0)


check("step", c, step, lambda i: ((torch.ones(2) * i, s1, o1), (torch.ones(2) * i, s2, o2)), 5, step_between)


# 4. Reads after the append: the length, a truth test, the last element,
#    iteration, a native callee, a callback's result: the record guards.
R1, R2 = [], []


def reads(x, log):
    log.append(1)
    n = len(log)
    if log[0] == 2:
        n += 10
    total = 0
    for v in log:
        total += v
    longest = max([log, [0]], key=len)
    return x + n + total + len(longest) + sum(log)


c = magpy.compile(reads)


def reads_between(i):
    assert R1 == R2, (R1, R2)
    if i == 1:
        R1[0] = R2[0] = 2
    if i == 3:
        R1.extend([5, 5]), R2.extend([5, 5])


check("reads", c, reads, lambda i: ((torch.zeros(1), R1), (torch.zeros(1), R2)), 6, reads_between)
assert c._magpy_stats()["records"] == 6, c._magpy_stats()  # each call's list differs, and is read


# 5. One list under two names: the script rebinds one of them.
class Holder:
    pass


H1, H2 = Holder(), Holder()
SHARED1, SHARED2 = [], []
H1.log, H2.log = SHARED1, SHARED2


def two_names(x, h, g):
    h.log.append(x.sum())
    g.append(1)
    return x + 1


c = magpy.compile(two_names)


def names_between(i):
    assert len(H1.log) == len(H2.log) and len(SHARED1) == len(SHARED2), (H1.log, H2.log, SHARED1, SHARED2)
    if i == 1:
        H1.log, H2.log = [], []  # no longer the same list


check("names", c, two_names, lambda i: ((torch.ones(1), H1, SHARED1), (torch.ones(1), H2, SHARED2)), 4, names_between)
assert len(SHARED1) == len(SHARED2) == 6 and len(H1.log) == len(H2.log) == 2, (SHARED1, H1.log)


# 6. A closure's list, a mutable default, and lists a sort key hands to
#    native code (sorted compares them: read, so guarded).
def make():
    log = []

    def f(x):
        log.append(x * 2)
        return x + 1

    return f, log


f, closed = make()
c = magpy.compile(f)
for i in range(4):
    c(torch.ones(2) * i)
    if i == 1:
        closed.clear()
assert len(closed) == 2 and torch.equal(closed[-1], torch.ones(2) * 6), closed
assert c._magpy_stats()["records"] == 1, c._magpy_stats()


def with_default(x, acc=[]):
    acc.append(x.sum())
    return x * 2


c = magpy.compile(with_default)
for i in range(4):
    c(torch.ones(2) * i)
acc = with_default.__defaults__[0]
assert len(acc) == 4 and acc[3].item() == 6, acc
assert c._magpy_stats()["records"] == 1, c._magpy_stats()

D = {"a": [1], "b": [1, 1, 1]}


def by_contents(x):
    D["a"].append(1)
    order = sorted(D, key=lambda n: D[n])
    return x + (1 if order[0] == "a" else 2)


c = magpy.compile(by_contents)
outs = [c(torch.zeros(1)).item() for _ in range(4)]
assert outs == [1, 1, 2, 2], outs


# 7. A slice assignment copies the list: a read (t[:] = log, out[1:1] = log).
C = [7]
OUT = []


def copies(x):
    C.append(1)
    tmp = []
    tmp[:] = C
    OUT[1:1] = C
    return x + len(tmp)


c = magpy.compile(copies)
assert [c(torch.zeros(1)).item() for _ in range(3)] == [2.0, 3.0, 4.0]
assert OUT == [7, 7, 1, 1, 1, 7, 1, 1, 1] and C == [7, 1, 1, 1], (OUT, C)


# 8. A counter appended as it changes: the number stays lifted, one record.
class Steps:
    def __init__(self):
        self.n, self.seen = 0, []


def count(x, st):
    st.n += 1
    st.seen.append(st.n)
    return x * st.n


st = Steps()
c = magpy.compile(count)
assert [c(torch.ones(1), st).item() for _ in range(4)] == [1.0, 2.0, 3.0, 4.0]
assert st.seen == [1, 2, 3, 4], st.seen
st.seen.clear()
st.n = 10
assert c(torch.ones(1), st).item() == 11.0 and st.seen == [11], st.seen
assert c._magpy_stats()["records"] <= 2, c._magpy_stats()  # the first call's, then the lifted one
print("ok")
