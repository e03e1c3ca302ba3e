# magpy-test: refused natively
# Native code that calls a native callable the program gives it: map's
# function, max's key, where the callable is a method bound to the
# program's list or dict. The monitor traces Python callbacks, but a
# native one runs unseen: log.append's writes were not replayed and
# d.get's reads not guarded (a replayed call appended nothing, or summed
# what d held at capture). A writing callable breaks the graph and the
# call runs as Python; a reading one (d.get) reads all of d, guarded.
import torch

import magpy


def appends_through_map():
    log = []
    push = log.append

    def f(x):
        list(map(push, [1, 2]))
        return x * 2

    return f, log, None, "breaks"


def reads_through_map():
    d = {"a": 5, "b": 0}
    get = d.get

    def f(x):
        return x + sum(map(get, ["a", "b"]))

    return f, d, lambda i: d.__setitem__("b", 10 * i), "guards d"


def appends_through_key():
    log = []
    push = log.append

    def f(x):
        max([7], key=push)  # one item: the key is still called
        return x + 1

    return f, log, lambda i: log.clear(), "breaks"


for make in (appends_through_map, reads_through_map, appends_through_key):
    subject, subject_state, subject_change, expected = make()
    reference, reference_state, reference_change, _ = make()
    compiled = magpy.compile(subject)
    for i in range(4):
        for change in (subject_change, reference_change):
            if change:
                change(i)
        got, want = compiled(torch.zeros(1)), reference(torch.zeros(1))
        assert torch.equal(got, want), f"{make.__name__} call {i}: {got} != {want}"
        assert subject_state == reference_state, f"{make.__name__} call {i}: {subject_state} != {reference_state}"
    stats = compiled._magpy_stats()
    if expected == "breaks":
        assert stats["breaks"] >= 1, (make.__name__, stats)
    else:  # d changes before every call: each call misses the records before it
        assert stats["breaks"] == 0 and stats["records"] == 4, (make.__name__, stats)
print("ok")
