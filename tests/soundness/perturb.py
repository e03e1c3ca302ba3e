"""Perturbation soundness programs for magpy: a second differential generator.

    perturb.py SEED COUNT     prints a driver script for programs SEED..SEED+COUNT-1

Each program is a small function f(x, v) computing a tensor from x through
the parts of Python that a record may silently depend on: user classes,
dunders the interpreter calls implicitly (__len__, __getitem__, __bool__,
__mul__/__rmul__, __enter__/__exit__, __call__, __index__), @property, a
descriptor with state of its own, __slots__, super() chains, a module alias,
closure cells, __defaults__, a callee whose __code__ is replaced, OrderedDict
order, enums, Python callbacks given to builtins, methods patched on
torch.Tensor, the default dtype, and an argument v that may be a view of x.
The program also defines perturb(i, rng), the changes made after call i:
class dict entries replaced (dunders and properties included), instance
attributes set and deleted, globals and module aliases rebound, __code__,
__defaults__ and closure cells replaced, containers reordered and changed,
descriptor state changed. Each change carries a comment naming its kind.

The driver (run under magpy-capture) executes each program's source twice,
into two modules of their own, so each world has its own classes, globals
and aliases; it compiles one world's f with magpy.compile and runs the other
eagerly, and after every call runs each world's perturb with an identically
seeded random.Random. torch.Tensor and the default dtype are shared by both
worlds: their changes live in perturb_shared, run once, and are undone when
the program ends. Results, the arguments (written in place) and the state
the program lists in state() are compared after every call; on a difference
the driver prints the seed and the program's source and exits 1. The record
it leaves is replayed natively by `magpy-run --keep-going` (check.py
--generator perturb).
"""
import random
import sys

CALLS = 4
FEATURES = []


def feature(fn):
    FEATURES.append(fn)
    return fn


def F(setup=(), body=(), perts=(), shared=(), state=(), rebinds=(), imports=()):
    """What a feature adds: module-level setup lines, body lines of f (read x,
    update y), perturbations (label, lines) for perturb and perturb_shared,
    state() expressions, globals the perturbations rebind, imports."""
    return dict(setup=list(setup), body=list(body), perts=list(perts), shared=list(shared), state=list(state),
                rebinds=list(rebinds), imports=list(imports))


# Each feature takes the generator's random.Random and a suffix k for its names.
@feature
def len_dunder(r, k):
    return F([f"class Bag{k}:", "    def __init__(self): self.items = [1, 2]",
              "    def __len__(self): return len(self.items)", f"bag{k} = Bag{k}()"],
             [f"y = y * len(bag{k})"],
             [("container mutated", [f"bag{k}.items.append(rng.randint(1, 3))"]),
              ("__len__ patched on class", [f"n{k} = rng.randint(1, 4)", f"Bag{k}.__len__ = lambda self: n{k}"]),
              ("instance dunder set (ignored)", [f"bag{k}.__len__ = lambda: 9"])],
             state=[f"bag{k}.items"])


@feature
def getitem_dunder(r, k):
    return F([f"class Table{k}:", "    def __init__(self): self.data = [1.0, 2.0, 3.0]",
              "    def __getitem__(self, i): return self.data[i]", f"tab{k} = Table{k}()"],
             [f"y = y + tab{k}[{r.randrange(3)}]"],
             [("container mutated", [f"tab{k}.data[rng.randrange(3)] = rng.choice([4.0, -1.0])"]),
              ("container reordered", [f"tab{k}.data.reverse()"]),
              ("__getitem__ patched on class", [f"Table{k}.__getitem__ = lambda self, i: self.data[i] * 10"]),
              ("instance attribute set", [f"tab{k}.data = [7.0, 8.0, 9.0]"])],
             state=[f"tab{k}.data"])


@feature
def bool_dunder(r, k):
    return F([f"class Flag{k}:", "    on = True", "    def __bool__(self): return self.on", f"flag{k} = Flag{k}()"],
             [f"if flag{k}:", "    y = y + 1", "else:", "    y = y - 1"],
             [("instance attribute set", [f"flag{k}.on = rng.random() < 0.5"]),
              ("instance attribute deleted", [f"vars(flag{k}).pop('on', None)"]),
              ("class attribute set", [f"Flag{k}.on = rng.random() < 0.5"]),
              ("__bool__ patched on class", [f"Flag{k}.__bool__ = lambda self: not self.on"])],
             state=[f"vars(flag{k})", f"Flag{k}.on"])


@feature
def mul_dunder(r, k):
    use = r.choice([f"y = sc{k} * y", f"y = y * sc{k}"])
    return F([f"class Scale{k}:", "    def __init__(self): self.s = 2.0",
              "    def __mul__(self, t): return t * self.s", "    __rmul__ = __mul__", f"sc{k} = Scale{k}()"],
             [use],
             [("instance attribute set", [f"sc{k}.s = rng.choice([0.5, 3.0])"]),
              ("__mul__ patched on class", [f"Scale{k}.__mul__ = lambda self, t: t + self.s"]),
              ("__rmul__ patched on class", [f"Scale{k}.__rmul__ = lambda self, t: t - self.s"])],
             state=[f"sc{k}.s"])


@feature
def context_manager(r, k):
    return F([f"class Ctx{k}:", "    def __init__(self): self.v, self.log = 2.0, []",
              "    def __enter__(self): self.log.append(1); return self.v",
              "    def __exit__(self, *exc): self.log.append(2)", f"ctx{k} = Ctx{k}()"],
             [f"with ctx{k} as v{k}:", f"    y = y * v{k}"],
             [("instance attribute set", [f"ctx{k}.v = rng.choice([1.0, 3.0])"]),
              ("__enter__ patched on class", [f"Ctx{k}.__enter__ = lambda self: self.v + 1"]),
              ("__exit__ patched on class", [f"Ctx{k}.__exit__ = lambda self, *exc: self.log.append(3)"]),
              ("container mutated", [f"ctx{k}.log.clear()"])],
             state=[f"ctx{k}.log", f"ctx{k}.v"])


@feature
def call_dunder(r, k):
    return F([f"class Op{k}:", "    def __init__(self): self.b = 1.0",
              "    def __call__(self, t): return t + self.b", f"op{k} = Op{k}()"],
             [f"y = op{k}(y)"],
             [("instance attribute set", [f"op{k}.b = rng.choice([2.0, -1.0])"]),
              ("__call__ patched on class", [f"Op{k}.__call__ = lambda self, t: t * self.b"]),
              ("instance dunder set (ignored)", [f"op{k}.__call__ = lambda t: t * 100"])],
             state=[f"op{k}.b"])


@feature
def index_dunder(r, k):
    return F([f"class Idx{k}:", "    def __init__(self): self.i = 1",
              "    def __index__(self): return self.i", f"ix{k} = Idx{k}()"],
             [f"y = y + [1.0, 2.0, 3.0][ix{k}]"],
             [("instance attribute set", [f"ix{k}.i = rng.randrange(3)"]),
              ("__index__ patched on class", [f"Idx{k}.__index__ = lambda self: 2 - self.i"])],
             state=[f"ix{k}.i"])


@feature
def prop(r, k):
    return F([f"class P{k}:", "    def __init__(self): self._w = 2.0", "    @property",
              "    def w(self): return self._w * 2", f"p{k} = P{k}()"],
             [f"y = y * p{k}.w"],
             [("instance attribute set", [f"p{k}._w = rng.choice([0.5, 3.0])"]),
              ("property replaced on class", [f"P{k}.w = property(lambda self: self._w + 1)"]),
              ("property replaced by class value", [f"P{k}.w = 5.0"]),
              ("instance dict entry under property", [f"vars(p{k})['w'] = 7.0"])],
             state=[f"vars(p{k})"])


@feature
def descriptor(r, k):
    return F([f"class Desc{k}:", "    def __init__(self): self.k = 2.0",
              "    def __get__(self, obj, owner): return self.k if obj is not None else self",
              f"desc{k} = Desc{k}()", f"class Host{k}:", f"    d = desc{k}", f"h{k} = Host{k}()"],
             [f"y = y * h{k}.d"],
             [("descriptor state", [f"desc{k}.k = rng.choice([3.0, -1.0])"]),
              ("__get__ patched on descriptor class", [f"Desc{k}.__get__ = lambda self, obj, owner: -self.k"]),
              ("instance attribute shadows descriptor", [f"h{k}.d = 9.0"]),
              ("instance attribute deleted", [f"vars(h{k}).pop('d', None)"]),
              ("descriptor replaced on class", [f"Host{k}.d = Desc{k}()"])],
             state=[f"desc{k}.k", f"vars(h{k})"])


@feature
def slots(r, k):
    return F([f"class Pt{k}:", "    __slots__ = ('a', 'b')", "    def __init__(self): self.a, self.b = 1.0, 2.0",
              f"pt{k} = Pt{k}()"],
             [f"y = y * pt{k}.a + pt{k}.b"],
             [("slot set", [f"pt{k}.a = rng.choice([0.5, 3.0])"]),
              ("slot deleted", [f"if hasattr(pt{k}, 'b'): del pt{k}.b"]),
              ("slot set", [f"pt{k}.b = rng.choice([2.0, 5.0])"]),
              ("slot replaced by property on class", [f"Pt{k}.a = property(lambda self: 10.0)"])],
             state=[f"getattr(pt{k}, 'a', None)", f"getattr(pt{k}, 'b', None)"])


@feature
def super_chain(r, k):
    return F([f"class Base{k}:", "    def scale(self, t): return t * 2",
              f"class Mid{k}(Base{k}):", "    def scale(self, t): return super().scale(t) + 1",
              f"class Top{k}(Mid{k}):", "    def scale(self, t): return super().scale(t) * 3", f"top{k} = Top{k}()"],
             [f"y = top{k}.scale(y)"],
             [("super() base method patched", [f"Base{k}.scale = lambda self, t: t - 1"]),
              ("super() middle method patched", [f"Mid{k}.scale = lambda self, t: super(Mid{k}, self).scale(t) - 5"]),
              ("class bases changed", [f"Top{k}.__bases__ = (Base{k},)"]),
              ("instance attribute shadows method", [f"top{k}.scale = lambda t: t * 0"])],
             state=[f"vars(top{k})"])


@feature
def module_alias(r, k):
    return F([f"backend{k} = math", f"alt{k} = types.ModuleType('alt{k}')", f"alt{k}.sqrt = lambda v: v + 1"],
             [f"y = y * backend{k}.sqrt(4.0)"],
             [("module alias switched", [f"backend{k} = rng.choice([math, cmath, alt{k}])"]),
              ("module attribute patched", [f"alt{k}.sqrt = lambda v: v * 3"]),
              ("module alias switched", [f"backend{k} = alt{k}"])],
             state=[f"backend{k}.__name__"], rebinds=[f"backend{k}"], imports=["math", "cmath", "types"])


@feature
def closure_cell(r, k):
    return F([f"def make_add{k}(b):", "    def add(t): return t + b", "    def set_b(v):", "        nonlocal b",
              "        b = v", "    return add, set_b", f"add{k}, set_b{k} = make_add{k}(1.0)"],
             [f"y = add{k}(y)"],
             [("closure cell changed (nonlocal)", [f"set_b{k}(rng.choice([2.0, -3.0]))"]),
              ("closure cell changed (cell_contents)", [f"add{k}.__closure__[0].cell_contents = 5.0"])],
             state=[f"add{k}.__closure__[0].cell_contents"])


@feature
def defaults(r, k):
    return F([f"def bump{k}(t, s=2.0): return t * s"], [f"y = bump{k}(y)"],
             [("__defaults__ replaced", [f"bump{k}.__defaults__ = (rng.choice([3.0, -1.0]),)"])],
             state=[f"bump{k}.__defaults__"])


@feature
def code_replaced(r, k):
    return F([f"def g{k}(t): return t + 1", f"def h{k}(t): return t * 3", f"def j{k}(t): return t - 2"],
             [f"y = g{k}(y)"],
             [("__code__ replaced", [f"g{k}.__code__ = rng.choice([h{k}, j{k}]).__code__"])])


@feature
def own_code(r, k):
    # The compiled function itself gets another body.
    return F([f"def f_alt{k}(x, v): return x * 2 + {k}"], [],
             [("__code__ of f replaced", [f"f.__code__ = f_alt{k}.__code__"])])


@feature
def ordered_dict(r, k):
    return F([f"od{k} = collections.OrderedDict([('a', 1.0), ('b', 2.0), ('c', 3.0)])"],
             [f"for v{k} in od{k}.values():", f"    y = y * 0.5 + v{k}"],
             [("OrderedDict reordered", [f"od{k}.move_to_end(rng.choice('abc'), last=rng.random() < 0.5)"]),
              ("container mutated", [f"od{k}[rng.choice('abcd')] = rng.choice([4.0, -1.0])"])],
             state=[f"list(od{k}.items())"], imports=["collections"])


@feature
def enum_value(r, k):
    return F([f"class Color{k}(enum.Enum):", "    RED = 1", "    BLUE = 2", f"mode{k} = Color{k}.RED"],
             [f"y = y * (2 if mode{k} is Color{k}.RED else 3) + mode{k}.value"],
             [("global rebound", [f"mode{k} = rng.choice(list(Color{k}))"]),
              ("enum member attribute patched on class", [f"Color{k}.value = property(lambda self: 10)"])],
             state=[f"mode{k}.name"], rebinds=[f"mode{k}"], imports=["enum"])


@feature
def callbacks(r, k):
    use = r.choice([f"y = y + sorted(keys{k}, key=key{k})[0]", f"y = y * max(keys{k}, key=key{k})",
                    f"y = y + sum(map(key{k}, keys{k}))", f"y = y + functools.reduce(red{k}, keys{k})"])
    return F([f"keys{k} = [3, 1, 2]", f"def key{k}(v): return -v", f"def red{k}(a, b): return a * 2 - b"], [use],
             [("container reordered", [f"keys{k}.reverse()"]),
              ("container mutated", [f"keys{k}[rng.randrange(3)] = rng.randint(0, 5)"]),
              ("global rebound (callback)", [f"key{k} = lambda v: v % 3"]),
              ("global rebound (callback)", [f"red{k} = lambda a, b: a + 2 * b"]),
              ("__code__ replaced (callback)", [f"key{k}.__code__ = (lambda v: v * 2).__code__"])],
             state=[f"keys{k}"], rebinds=[f"key{k}", f"red{k}"], imports=["functools"])


@feature
def tensor_method(r, k):
    # torch.Tensor is one class for both worlds: its changes are shared, made once.
    kind = r.randrange(3)
    if kind == 0:
        return F([f"torch.Tensor.boost{k} = lambda self: self * 2"], [f"y = y.boost{k}()"],
                 shared=[("torch.Tensor method patched (new)", [f"s{k} = rng.choice([1.0, 2.0])",
                                                                f"torch.Tensor.boost{k} = lambda self: self + s{k}"])])
    if kind == 1:
        return F([], ["y = y.neg()"],
                 shared=[("torch.Tensor method patched (C method)", ["torch.Tensor.neg = lambda self: self * 0.5"]),
                         ("torch.Tensor method restored", ["if 'neg' in vars(torch.Tensor): del torch.Tensor.neg"])])
    return F([], ["y = 1 - y"],
             shared=[("torch.Tensor dunder patched (__rsub__)", ["torch.Tensor.__rsub__ = lambda self, o: self - o"])])


@feature
def default_dtype(r, k):
    return F([], ["y = y + torch.ones(y.shape)"],
             shared=[("default dtype changed", ["torch.set_default_dtype(rng.choice([torch.float32, torch.float64]))"])])


@feature
def view_argument(r, k):
    # v may be x itself, a view of x, or a tensor of its own (the driver decides per call).
    return F([], ["v.add_(1.0)", "y = y + x + v"])


def program(seed, keep=lambda i, j: True):
    """(source, metadata) of program `seed`; metadata: feature names and the labels of each call's changes.
    keep(i, j) False leaves out the j-th change after call i (to narrow a failure down)."""
    r = random.Random(seed)
    chosen = [r.choice(FEATURES) for _ in range(r.randint(2, 4))]
    parts = [(fn.__name__, fn(r, k)) for k, fn in enumerate(chosen)]
    imports = sorted({"torch"} | {m for _, p in parts for m in p["imports"]})
    src = [f"import {', '.join(imports)}", ""]
    for _, p in parts:
        src += p["setup"]
    src += ["", "def f(x, v):", "    y = x * 1.0"] + ["    " + line for _, p in parts for line in p["body"]]
    src += ["    return y", ""]
    own = [(lab, lines, False) for _, p in parts for lab, lines in p["perts"]]
    shared = [(lab, lines, True) for _, p in parts for lab, lines in p["shared"]]
    schedule = []  # per call i: the changes made after it
    pool = own + shared
    for i in range(CALLS - 1):
        fresh = [c for c in pool if not any(c in done for done in schedule)] or pool
        schedule.append(r.sample(fresh, min(len(fresh), r.randint(1, 2))))
    schedule = [[c for j, c in enumerate(changes) if keep(i, j)] for i, changes in enumerate(schedule)]
    rebinds = sorted({g for _, p in parts for g in p["rebinds"]})
    for name, is_shared in (("perturb", False), ("perturb_shared", True)):
        lines = []
        for i, changes in enumerate(schedule):
            mine = [(lab, body) for lab, body, s in changes if s == is_shared]
            if mine:
                lines.append(f"    if i == {i}:")
                for lab, body in mine:
                    lines += ["        " + body[0] + f"  # {lab}"] + ["        " + b for b in body[1:]]
        if is_shared and not lines:
            continue
        src += [f"def {name}(i, rng):"] + ([f"    global {', '.join(rebinds)}"] if rebinds and not is_shared else [])
        src += lines or ["    pass"]
        src += [""]
    src += ["def state():", f"    return [{', '.join(s for _, p in parts for s in p['state'])}]"]
    meta = {"features": [n for n, _ in parts], "changes": [[lab for lab, _, _ in c] for c in schedule]}
    return "\n".join(src) + "\n", meta


DRIVER = r'''
import random, sys, types
import torch
import magpy


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and
                a.requires_grad == b.requires_grad and torch.equal(a, b))
    if isinstance(a, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) == type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "__code__"):  # the two worlds' copies of one function
        return type(a) == type(b) and a.__code__ == b.__code__
    return type(a) == type(b) and a == b


def arguments(kind):
    x = torch.arange(6.0).reshape(2, 3) / 7
    v = {"same": x, "row": x[1], "slice": x.view(-1)[2:5], "own": torch.ones(3)}[kind]
    return x, v


def attempt(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # both worlds must fail alike
        return type(e)


def run(seed, source):
    tensor_dict = dict(vars(torch.Tensor))
    spaces = []
    for world in ("compiled", "eager"):
        # A module of its own (magpy guards globals by module name).
        module = types.ModuleType(f"perturb{seed}_{world}")
        sys.modules[module.__name__] = module
        exec(compile(source, f"perturb{seed}.py", "exec"), module.__dict__)
        spaces.append(module.__dict__)
    cns, ens = spaces
    compiled = magpy.compile(cns["f"])
    rng_c, rng_e, rng_s, rng_a = (random.Random(seed) for _ in range(4))
    try:
        for i in range(CALLS):
            kind = rng_a.choice(["same", "row", "slice", "own"])
            (xc, vc), (xe, ve) = arguments(kind), arguments(kind)
            got, want = attempt(compiled, xc, vc), attempt(ens["f"], xe, ve)
            if not same(got, want):
                fail(seed, source, i, f"result {got} != eager {want}")
            if not same((xc, vc), (xe, ve)):
                fail(seed, source, i, f"arguments after the call {(xc, vc)} != eager {(xe, ve)}")
            a, b = attempt(cns["state"]), attempt(ens["state"])
            if not same(a, b):
                fail(seed, source, i, f"state {a} != eager {b}")
            if i + 1 < CALLS:
                if "perturb_shared" in cns:
                    attempt(cns["perturb_shared"], i, rng_s)
                a, b = attempt(cns["perturb"], i, rng_c), attempt(ens["perturb"], i, rng_e)
                if not same(a, b):
                    fail(seed, source, i, f"perturb gave {a} != eager {b}")
    finally:
        # What the program changed for both worlds goes back for the next program.
        for name in set(vars(torch.Tensor)) - set(tensor_dict):
            delattr(torch.Tensor, name)
        for name, value in tensor_dict.items():
            if vars(torch.Tensor).get(name) is not value:
                setattr(torch.Tensor, name, value)
        torch.set_default_dtype(torch.float32)


def fail(seed, source, call, what):
    print(f"perturb: program {seed}, call {call}: {what}\n--- program {seed} ---\n{source}---", file=sys.stderr)
    sys.exit(1)
'''


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--show":  # perturb.py --show SEED: one program and its metadata
        source, meta = program(int(sys.argv[2]))
        print(source + f"# {meta}")
        return
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    out = [DRIVER, f"CALLS = {CALLS}", "PROGRAMS = ["]
    for s in range(seed, seed + count):
        out.append(f"    ({s}, {program(s)[0]!r}),")
    out += ["]", "for p in PROGRAMS:", "    run(*p)", "print(f'perturb: {len(PROGRAMS)} programs agree with eager')"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
