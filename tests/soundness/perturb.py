"""Perturbation soundness programs for magpy: a second differential generator.

    perturb.py SEED COUNT     prints a driver script for programs SEED..SEED+COUNT-1

Each program is a small function f(x, v) computing a tensor from x through
the parts of Python that a record may silently depend on: user classes,
dunders the interpreter calls implicitly (__len__, __getitem__, __bool__,
__mul__/__rmul__, __enter__/__exit__, __call__, __index__), @property, a
descriptor with state of its own, __slots__, super() chains, class names
(__name__, __qualname__, __module__, an instance's __class__), a module alias,
closure cells, __defaults__, a callee whose __code__ is replaced, OrderedDict
order, enums, Python callbacks given to builtins, methods patched on
torch.Tensor, the default dtype, and an argument v that may be a view of x;
also hash()/id() of plain objects, stdlib functions annotated pure that run
user code or read objects (copy.deepcopy, re.sub with a callback,
functools.reduce), operator.iadd/iconcat/setitem/delitem on state, a
property with a side effect read by getattr/hasattr, float and int
subclasses (and bool) of equal value, ops whose result size depends on
tensor contents, torch process settings read by getters (threads, anomaly
mode, grad mode, default dtype), buffers sharing storage with .data
replaced or written, one list passed as two arguments (extra
parameters of f, built per call by the program's extra_args(i)), writes
through super().__setattr__, a module built on every call, sizes
through arithmetic, min/max, math functions and comparisons, and loops
over range() of a size (some roll into loop regions, some must not), and
`if` on a one-element bool tensor that varies by call (some join both
sides into one record, some must keep a record per side), and a training
step (loss.backward() and an SGD update) whose gradients, hooks and
parameters change between calls.
The program also defines perturb(i, rng), the changes made after call i:
class dict entries replaced (dunders and properties included), instance
attributes set and deleted, globals and module aliases rebound, __code__,
__defaults__ and closure cells replaced, containers reordered and changed,
descriptor state changed. Sizes of extra arguments vary by call where a
feature computes with them or decides on them. Each change carries a comment naming its kind.

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
--generator perturb). `perturb.py SEED COUNT --no-grad` makes every call in
both worlds with grad mode off, where the JIT runs compiled graphs
(check.py --no-grad --capture-args "--backend compiled --compile-after 0").
"""
import random
import sys

# With --no-grad, twice the calls: a record's calls after its first hit run
# compiled graphs, and more of them get there.
CALLS = 8 if "--no-grad" in sys.argv[3:] else 4
FEATURES = []


def feature(fn):
    FEATURES.append(fn)
    return fn


def F(setup=(), body=(), perts=(), shared=(), state=(), rebinds=(), imports=(), params=(), args=()):
    """What a feature adds: module-level setup lines, body lines of f (read x,
    update y), perturbations (label, lines) for perturb and perturb_shared,
    state() expressions, globals the perturbations rebind, imports, extra
    parameters of f and the lines of extra_args(i) that append call i's
    values for them to `out`."""
    return dict(setup=list(setup), body=list(body), perts=list(perts), shared=list(shared), state=list(state),
                rebinds=list(rebinds), imports=list(imports), params=list(params), args=list(args))


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
def class_name(r, k):
    read = r.choice(["__name__", "__qualname__"])  # __module__ differs between the two worlds
    return F([f"class Named{k}:", "    pass", f"class Other{k}:", "    pass", f"named{k} = Named{k}()"],
             [f"y = y * len(type(named{k}).{read})"],
             [("class renamed", [f"Named{k}.__name__ = rng.choice(['A', 'Named', 'LongerName'])"]),
              ("class qualified name set", [f"Named{k}.__qualname__ = rng.choice(['Q', 'Outer.Inner', 'Named'])"]),
              ("class module set", [f"Named{k}.__module__ = rng.choice(['m', 'pkg.mod'])"]),
              ("instance class switched", [f"named{k}.__class__ = rng.choice([Named{k}, Other{k}])"])],
             state=[f"type(named{k}).{read}"])


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


@feature
def object_identity(r, k):
    # hash()/id() of plain objects: a dict keyed by an object, identity hashes compared, a __hash__ of its own.
    replace = [("object replaced (equal state)", [f"key{k} = Key{k}(1)"]),
               ("object replaced, old one freed first", [f"key{k} = None", f"key{k} = Key{k}(rng.choice([1, 2]))"]),
               ("object restored", [f"key{k} = orig{k}"])]
    hashed = [("state read by __hash__ changed", [f"hk{k}.n = rng.choice([0, 5, 7])"]),
              ("__hash__ patched on class", [f"HKey{k}.__hash__ = lambda self: self.n + 1"]),
              ("object with __hash__ replaced (equal hash)", [f"hk{k} = HKey{k}(4)"])]
    use, perts = r.choice([
        ([f"y = y + table{k}.get(key{k}, -1.0)"],
         replace + [("dict keyed by object replaced", [f"table{k} = {{Key{k}(1): 5.0, key{k}: rng.choice([3.0, 4.0])}}"]),
                    ("dict entry under object key set", [f"table{k}[key{k}] = rng.choice([6.0, 7.0])"])]),
        ([f"y = y * (2.0 if hash(key{k}) == hash(orig{k}) else 3.0)"], replace),
        ([f"y = y * (2.0 if id(key{k}) == id(orig{k}) else 3.0)"], replace),
        ([f"y = y + len({{key{k}, orig{k}}})"], replace),
        ([f"y = y + key{k}.n"], replace),
        ([f"y = y + hash(hk{k}) % 3"], hashed),
        ([f"y = y + {{hk{k}: 1.0, 5: 2.0}}.get(5, 0.0)"], hashed)])
    return F([f"class Key{k}:", "    def __init__(self, n): self.n = n",
              f"class HKey{k}:", "    def __init__(self, n): self.n = n", "    def __hash__(self): return self.n",
              "    def __eq__(self, o): return self.n == o", f"orig{k} = Key{k}(1)", f"key{k} = orig{k}",
              f"table{k} = {{orig{k}: 2.0}}", f"hk{k} = HKey{k}(4)"],
             use, perts,
             state=[f"key{k}.n", f"key{k} is orig{k}", f"sorted(table{k}.values())", f"hk{k}.n"],
             rebinds=[f"key{k}", f"table{k}", f"hk{k}"])


@feature
def stdlib_callbacks(r, k):
    # Functions annotated pure that run user code or read object state.
    box = [("instance attribute set", [f"box{k}.v = rng.choice([3.0, -1.0])"])]
    glob = [("global read by callback rebound", [f"rv{k} = rng.randint(2, 9)"]),
            ("object read by callback changed", [f"box{k}.v = rng.choice([3.0, -1.0])"]),
            ("callback rebound", [f"rep{k} = lambda m: m.group(0) * 2"]),
            ("__code__ replaced (callback)", [f"rep{k}.__code__ = (lambda m: '8').__code__"])]
    red = [("global read by callback rebound", [f"w{k} = rng.choice([1, 3])"]),
           ("__code__ replaced (callback)", [f"red{k}.__code__ = (lambda a, b: a - b).__code__"]),
           ("container mutated", [f"box{k}.items.append(rng.choice([1.0, 4.0]))"])]
    use, perts = r.choice([
        ([f"y = y * copy.deepcopy(box{k}).v"], box + [("__deepcopy__ added on class", [f"Box{k}.__deepcopy__ = deep{k}"])]),
        ([f"y = y + copy.deepcopy([box{k}, box{k}])[1].v"], box),
        ([f"y = y + copy.copy(box{k}).v"], box + [("__copy__ added on class", [f"Box{k}.__copy__ = lambda self: deep{k}(self, None)"])]),
        ([f"y = y + float(re.sub('[0-9]', rep{k}, '5'))"], glob),
        ([f"y = y + len(re.sub(pat{k}, rep{k}, 'a1b22'))"], glob + [("pattern rebound", [f"pat{k} = rng.choice(['[a-z]', '2'])"])]),
        ([f"y = y + functools.reduce(red{k}, [1, 2, 3])"], red),
        ([f"y = y + functools.reduce(red{k}, box{k}.items, 0.5)"], red)])
    return F([f"class Box{k}:", "    def __init__(self): self.v, self.items = 2.0, [1.0, 2.0]", f"box{k} = Box{k}()",
              f"def deep{k}(self, memo):", f"    b = Box{k}()", "    b.v = self.v * 10", "    return b",
              f"rv{k} = 1", f"def rep{k}(m): return str(rv{k} + len(str(box{k}.v)))", f"pat{k} = '[0-9]'",
              f"w{k} = 2", f"def red{k}(a, b): return a * w{k} + b"],
             use, perts,
             state=[f"box{k}.v", f"box{k}.items"], rebinds=[f"rv{k}", f"rep{k}", f"pat{k}", f"w{k}"],
             imports=["copy", "re", "functools"])


@feature
def operator_mutation(r, k):
    # operator functions that mutate a list or dict of the state.
    ops = [[f"operator.iadd(ol{k}, [0.5])", f"y = y + sum(ol{k})"],
           [f"y = y * len(operator.iconcat(ol{k}, [0.25]))"],
           [f"operator.setitem(od{k}, 'a', od{k}.get('a', 0.0) + 1.0)", f"y = y + od{k}['a']"],
           [f"operator.setitem(ol{k}, 0, ol{k}[0] * 2)", f"y = y + ol{k}[0]"],
           [f"if len(ol{k}) > 1:", f"    operator.delitem(ol{k}, 0)", f"y = y + ol{k}[0]"],
           [f"if 'b' in od{k}:", f"    operator.delitem(od{k}, 'b')", f"y = y + len(od{k})"],
           [f"operator.iadd(tl{k}, [y.sum()])", f"y = y + len(tl{k})"]]
    body = [line for op in r.sample(ops, r.randint(1, 2)) for line in op]
    return F([f"ol{k} = [1.0, 2.0]", f"od{k} = {{'a': 1.0, 'b': 2.0}}", f"tl{k} = []"],
             body,
             [("container mutated", [f"ol{k}.append(rng.choice([3.0, 4.0]))"]),
              ("container rebound", [f"ol{k} = [rng.choice([5.0, 6.0])]"]),
              ("dict entry set", [f"od{k}['b'] = rng.choice([3.0, 4.0])"]),
              ("dict entry deleted", [f"od{k}.pop('a', None)"]),
              ("container cleared", [f"tl{k}.clear()"])],
             state=[f"ol{k}", f"od{k}", f"tl{k}"], rebinds=[f"ol{k}"], imports=["operator"])


@feature
def counting_property(r, k):
    # A getter with a side effect read through getattr()/hasattr(): it must run as often as in eager.
    use = r.choice([[f"y = y * getattr(cnt{k}, 'val')"],
                    [f"y = y * getattr(cnt{k}, name{k}, 1.5)"],
                    [f"if hasattr(cnt{k}, 'val'):", "    y = y + 1"],
                    [f"y = y + hasattr(cnt{k}, 'val') + getattr(cnt{k}, 'val', 0.0)"]])
    perts = [("instance attribute set", [f"cnt{k}.base = rng.choice([3.0, -1.0])"]),
             ("property replaced by one that raises AttributeError", [f"Cnt{k}.val = property(missing{k})"]),
             ("property replaced by class value", [f"Cnt{k}.val = 4.0"]),
             ("counter reset", [f"cnt{k}.count = 0"])]
    if f"name{k}" in use[0]:
        perts.append(("attribute name rebound", [f"name{k} = rng.choice(['base', 'nope', 'val'])"]))
    return F([f"class Cnt{k}:", "    def __init__(self): self.count, self.base = 0, 2.0", "    @property",
              "    def val(self):", "        self.count += 1", "        return self.base",
              f"def missing{k}(self):", "    self.count += 10", "    raise AttributeError('val')",
              f"cnt{k} = Cnt{k}()", f"name{k} = 'val'"],
             use, perts,
             state=[f"cnt{k}.count", f"cnt{k}.base"], rebinds=[f"name{k}"])


@feature
def number_subclass(r, k):
    # A float or int subclass with an equal value where a float or int was seen before (argument or global).
    isint = r.random() < 0.4
    plain, sub, plainsub = ("1", f"MyI{k}(1)", "True") if isint else ("2.0", f"MyF{k}(2.0)", f"PlainF{k}(2.0)")
    name = f"n{k}" if r.random() < 0.5 else f"a{k}"  # a global or an argument
    use = r.choice([[f"y = {name} * y"], [f"y = y * ({name} + 1)"], [f"y = y + {name}"],
                    [f"y = y * (1.0 if type({name}) is {'int' if isint else 'float'} else 2.0)"],
                    [f"y = y + len(repr({name}))"], [f"if {name}:", "    y = y + 1"],
                    [f"y = y + float(torch.tensor({name}).dtype == torch.float32)"],
                    [f"y = y * torch.full((3,), {name})"]])
    values = [r.choice([plain, plain, sub, plainsub]) for _ in range(CALLS)]
    setup = [f"class MyF{k}(float):", "    def __mul__(self, o): return o * (float(self) + 1.0)",
             "    __rmul__ = __mul__", "    def __add__(self, o): return o + float(self) * 10",
             "    __radd__ = __add__", "    def __repr__(self): return 'MyF(%r)' % float(self)",
             f"class PlainF{k}(float): pass",
             f"class MyI{k}(int):", "    def __mul__(self, o): return o * (int(self) + 2)", "    __rmul__ = __mul__",
             "    def __add__(self, o): return o + int(self) * 10", "    __radd__ = __add__",
             "    def __bool__(self): return False", "    def __repr__(self): return 'MyI(%r)' % int(self)",
             f"n{k} = {plain}"]
    if name == f"a{k}":
        return F(setup, use, params=[f"a{k}"], args=[f"out.append([{', '.join(values)}][i])"])
    return F(setup, use, [("global rebound (subclass, equal value)", [f"n{k} = {sub}"]),
                          ("global rebound (plain subclass or bool, equal value)", [f"n{k} = {plainsub}"]),
                          ("global rebound (plain value)", [f"n{k} = {plain}"])],
             state=[f"float(n{k})"], rebinds=[f"n{k}"])


@feature
def data_dependent_size(r, k):
    # Ops whose result size depends on tensor contents, contents changed between calls.
    lab = [("tensor contents changed in place", [f"lab{k}[rng.randrange(3)] = rng.randint(0, 5)"]),
           ("tensor rebound", [f"lab{k} = torch.tensor([rng.randint(0, 6), 1])"])]
    reps = [("tensor contents changed in place", [f"reps{k}[rng.randrange(3)] = rng.randint(0, 3)"])]
    mask = [("tensor contents changed in place", [f"m{k}.logical_not_()"]),
            ("tensor contents changed in place", [f"m{k}[0, rng.randrange(3)] = rng.random() < 0.5"])]
    use, perts = r.choice([([f"y = y * F.one_hot(lab{k}).float().mean()"], lab),
                           ([f"y = y + F.one_hot(lab{k}).shape[-1]"], lab),
                           ([f"y = y + torch.repeat_interleave(y[0], reps{k}).sum()"], reps),
                           ([f"y = y + torch.repeat_interleave(reps{k}).shape[0]"], reps),
                           ([f"y = y + torch.nonzero(m{k}).shape[0]"], mask),
                           ([f"y = y + torch.nonzero(lab{k}).float().sum()"], lab),
                           ([f"y = y + y[m{k}].sum()"], mask),
                           ([f"y = y + torch.masked_select(y, m{k}).numel()"], mask),
                           ([f"y = y + x[x > th{k}].numel()"], [("global rebound", [f"th{k} = rng.choice([0.0, 0.5, 1.0])"])])])
    # torch.unique is left out: magpy-run refuses a whole record holding aten::_unique2 (not on its reviewed list).
    return F([f"lab{k} = torch.tensor([0, 2, 1])", f"reps{k} = torch.tensor([1, 2, 0])",
              f"m{k} = torch.tensor([[True, False, True], [False, False, True]])", f"th{k} = 0.3"],
             use, perts,
             state=[f"lab{k}", f"reps{k}", f"m{k}"], rebinds=[f"lab{k}", f"th{k}"],
             imports=["torch.nn.functional as F"])


@feature
def process_state(r, k):
    # Process-wide torch settings read through getters; changed (once, for both worlds) between calls.
    kind = r.randrange(4)
    if kind == 0:
        return F([], ["if torch.get_num_threads() > 1:", "    y = y + 1", "else:", "    y = y * 2"],
                 shared=[("torch.set_num_threads", ["torch.set_num_threads(rng.choice([1, 2]))"])])
    if kind == 1:
        return F([], ["y = y + (1.0 if torch.is_anomaly_enabled() else 0.0)"],
                 shared=[("anomaly mode set", ["torch.autograd.set_detect_anomaly(rng.random() < 0.5)"])])
    if kind == 2:
        return F([f"wg{k} = torch.ones(3, requires_grad=True)"],
                 [r.choice(["y = y + (1.0 if torch.is_grad_enabled() else 2.0)", f"y = y * wg{k}"])],
                 shared=[("grad mode set", ["torch.set_grad_enabled(rng.random() < 0.5)"])])
    return F([], [r.choice(["y = y + (1.0 if torch.get_default_dtype() == torch.float32 else 2.0)",
                            "y = y * (2 if torch.get_default_dtype() is torch.float64 else 3)"])],
             shared=[("default dtype changed", ["torch.set_default_dtype(rng.choice([torch.float32, torch.float64]))"])])


@feature
def shared_storage(r, k):
    # A module whose buffers share storage (b is a view of a), and .data replaced or written between calls.
    use = r.choice([[f"y = y + mod{k}.b"], [f"mod{k}.a.mul_(0.5)", f"y = y + mod{k}.b"],
                    [f"mod{k}.b.add_(1.0)", f"y = y + mod{k}.a[:3]"], [f"y = y * mod{k}.p"],
                    [f"y = y * mod{k}.p.detach() + mod{k}.a[3:]"]])
    return F([f"class Mod{k}(torch.nn.Module):", "    def __init__(self):", "        super().__init__()",
              "        self.register_buffer('a', torch.arange(6.0))", "        self.register_buffer('b', self.a[2:5])",
              "        self.p = torch.nn.Parameter(torch.ones(3))", f"mod{k} = Mod{k}()"],
             use,
             [("buffer .data replaced", [f"mod{k}.a.data = torch.full((6,), rng.choice([1.0, 2.0]))"]),
              ("buffer .data copied into", [f"mod{k}.a.data.copy_(torch.arange(6.0) * rng.choice([2.0, -1.0]))"]),
              ("view buffer .data written", [f"mod{k}.b.data.fill_(rng.choice([3.0, 4.0]))"]),
              ("parameter .data scaled in place", [f"mod{k}.p.data.mul_(2)"]),
              ("parameter .data replaced", [f"mod{k}.p.data = torch.full((3,), rng.choice([3.0, 0.5]))"]),
              ("view buffer rebound to a copy", [f"mod{k}.b = mod{k}.b.clone()"]),
              ("view buffer rebound to another view", [f"mod{k}.b = mod{k}.a[rng.randrange(4):][:3]"])],
             state=[f"mod{k}.a", f"mod{k}.b", f"mod{k}.p.detach()",
                    f"mod{k}.a.storage().data_ptr() == mod{k}.b.storage().data_ptr()"])


@feature
def aliased_list_args(r, k):
    # One list passed as two arguments on some calls, two equal lists on others.
    alias = [r.random() < 0.5 for _ in range(CALLS)]
    use = r.choice([[f"a{k}.append(len(b{k}))", f"y = y + len(b{k}) + b{k}[-1]"],
                    [f"a{k}[0] = a{k}[0] + 1", f"y = y * b{k}[0]"],
                    [f"b{k}.clear()", f"y = y + len(a{k})"]])
    return F([f"lst{k} = [1, 2]"], use,
             [("container mutated", [f"lst{k}.append(rng.randint(1, 3))"]),
              ("container rebound", [f"lst{k} = [rng.randint(1, 3)]"])],
             state=[f"lst{k}"], rebinds=[f"lst{k}"], params=[f"a{k}", f"b{k}"],
             args=[f"out += [lst{k}, lst{k}] if {alias}[i] else [lst{k}, list(lst{k})]"])


@feature
def size_as_index(r, k):
    # A tensor size picks entries of a Python sequence (an index or a slice bound); its size varies by call.
    sizes = [r.randint(1, 5) for _ in range(CALLS)]
    table = tuple(r.choice([1.0, 2.0, 3.0]) for _ in range(7))
    use = r.choice([[f"y = y * tab{k}[s{k}.shape[0]]"],
                    [f"y = y + max(tab{k}[: s{k}.shape[0]])"],
                    [f"y = y + sum(list(tab{k})[s{k}.shape[0]:])"],
                    [f"y = y * tab{k}[-s{k}.size(0)]"]])
    return F([f"tab{k} = {table}"], use,
             [("global rebound", [f"tab{k} = tuple(rng.choice([1.0, 2.0, 3.0]) for _ in range(7))"])],
             state=[f"tab{k}"], rebinds=[f"tab{k}"], params=[f"s{k}"],
             args=[f"out.append(torch.ones({sizes}[i]))"])


@feature
def bound_slot_setattr(r, k):
    # super().__setattr__ bypasses the class's __setattr__ but not a data descriptor on it.
    return F([f"class Mark{k}:", "    def __init__(self): self.seen, self.w = 0, 1.0",
              "    def mark(self, t):", "        super().__setattr__('seen', self.seen + 1)", "        return t * self.w",
              f"mk{k} = Mark{k}()"],
             [f"y = mk{k}.mark(y)"],
             [("instance attribute set", [f"mk{k}.seen = rng.randint(0, 3)"]),
              ("instance attribute set", [f"mk{k}.w = rng.choice([0.5, 2.0])"]),
              ("property added on class", [f"Mark{k}.seen = property(lambda self: 5, lambda self, v: None)"]),
              ("__setattr__ patched on class (bypassed)",
               [f"Mark{k}.__setattr__ = lambda self, n, v: object.__setattr__(self, n, v * 2)"])],
             state=[f"vars(mk{k})"])


@feature
def layer_built_in_call(r, k):
    # A module built on every call: Module.__init__ writes its state through super().__setattr__.
    return F([f"class Act{k}(torch.nn.Module):", "    def __init__(self, s):", "        super().__init__()",
              "        self.s = s", "    def forward(self, t): return t * self.s", f"gain{k} = 2.0"],
             [f"y = Act{k}(gain{k})(y)"],
             [("global rebound", [f"gain{k} = rng.choice([0.5, 3.0])"]),
              ("forward patched on class", [f"Act{k}.forward = lambda self, t: t + self.s"]),
              ("__init__ patched on class",
               [f"Act{k}.__init__ = lambda self, s: (torch.nn.Module.__init__(self), setattr(self, 's', -s))[0]"])],
             rebinds=[f"gain{k}"])


@feature
def grad_region(r, k):
    # A grad mode region inside f: its mode from a global, nested regions, and
    # is_grad_enabled() read inside; grad mode at entry changed between calls.
    region = r.choice([[f"with torch.no_grad():", f"    y = y * wg{k}"],
                       [f"with torch.set_grad_enabled(on{k}):", f"    y = y * wg{k}",
                        "    y = y + (1.0 if torch.is_grad_enabled() else 2.0)"],
                       [f"with torch.no_grad():", "    with torch.enable_grad():", f"        y = y * wg{k}",
                        f"    y = y + wg{k}"]])
    return F([f"wg{k} = torch.full((3,), 2.0, requires_grad=True)", f"on{k} = False"], region,
             [("global rebound", [f"on{k} = rng.random() < 0.5"]),
              ("parameter .data scaled in place", [f"wg{k}.data.mul_(rng.choice([0.5, 2.0]))"])],
             state=[f"wg{k}.detach()"], rebinds=[f"on{k}"],
             shared=[("grad mode set", ["torch.set_grad_enabled(rng.random() < 0.5)"])])


@feature
def fresh_flags(r, k):
    # requires_grad of tensors f makes: set by a factory (Python sets it after the operator), or stored.
    use = r.choice([[f"h{k} = torch.ones(3, requires_grad=True)", f"y = y * h{k}"],
                    [f"h{k} = torch.zeros(3)", f"h{k}.requires_grad = False", f"y = y + h{k}"],
                    [f"h{k} = torch.full((3,), sc{k})", f"h{k}.requires_grad = sc{k} > 1.0", f"y = y * h{k}"]])
    return F([f"sc{k} = 2.0"], use,
             [("global rebound", [f"sc{k} = rng.choice([0.5, 2.0])"])],
             rebinds=[f"sc{k}"],
             shared=[("grad mode set", ["torch.set_grad_enabled(rng.random() < 0.5)"])])


@feature
def content_reads(r, k):
    # .item()/.tolist() of tensors made from sizes and constants (fixed by guards), of a view whose
    # base an input then writes, or of an input; a branch on a comparison's truth; the size of
    # nonzero's result. The sizes vary by call; the reads the record checks vary with them.
    sizes = [r.randint(1, 4) for _ in range(CALLS)]
    use = r.choice([[f"y = y * (6.0 / torch.tensor(s{k}.shape).float().max()).item()"],
                    [f"y = y + torch.tensor([len(s{k}), sc{k}]).tolist()[-1]"],
                    [f"c{k} = torch.zeros(2)", f"v{k} = c{k}[:1]", f"c{k}.add_(y.sum())", f"y = y * v{k}.item()"],
                    [f"y = y * y.abs().max().mul(sc{k}).item()"],
                    [f"if bool((y > sc{k}).any()):", f"    y = y - sc{k}"],
                    [f"n{k} = torch.nonzero(y > sc{k}).size(0)", f"y = y + torch.ones(n{k}).sum()"]])
    return F([f"sc{k} = 2.0"], use,
             [("global rebound", [f"sc{k} = rng.choice([0.5, 3.0])"])],
             rebinds=[f"sc{k}"], params=[f"s{k}"], args=[f"out.append(torch.ones({sizes}[i]))"])


@feature
def size_arithmetic(r, k):
    # Arithmetic on a size the graph computes (// % min max abs int() math.*), a factory or a slice of a
    # computed size, and a branch on a comparison of sizes with a global the perturbations rebind. The
    # size varies by call: a record must take another branch, or compute other sizes, where eager does.
    sizes = [r.randint(1, 6) for _ in range(CALLS)]
    n = f"s{k}.shape[0]"
    use = r.choice([[f"y = y * ({n} // 2 + 1) - {n} % 3"],
                    [f"if {n} > lim{k}:", f"    y = y - 1"],
                    [f"if -{n} <= -lim{k} or {n} == 2:", f"    y = y * 2"],
                    [f"y = y * min({n}, lim{k}) / math.sqrt({n})"],
                    [f"y = y + torch.ones({n} * 2 - 1).sum() * abs({n} - 3)"],
                    [f"y = y[:, :max(1, {n} % 3)] + int({n} / 2) + math.ceil({n} / 4)"],
                    [f"y = y + torch.arange(float({n})).view(1, -1)[:, :1] * max(math.floor({n} / 2), 1)"]])
    return F([f"lim{k} = 3"], use,
             [("global rebound", [f"lim{k} = rng.choice([2, 4])"])],
             state=[f"lim{k}"], rebinds=[f"lim{k}"], imports=["math"], params=[f"s{k}"],
             args=[f"out.append(torch.ones({sizes}[i]))"])


@feature
def size_loops(r, k):
    # A loop over range() of a size that varies by call: a body whose iterations repeat (a carried
    # accumulator, appended rows stacked, index arithmetic) rolls into one dynamic record; one whose
    # iterations depend on Python state (a counter, a recurrence over two values, a list read, a break
    # on a rebound global, a dict written) must not, and every call must still equal eager.
    sizes = [r.randint(1, 6) for _ in range(CALLS)]
    n = f"s{k}.shape[0]"
    use = r.choice([[f"acc{k} = y * 0", f"outs{k} = []", f"for t in range({n}):",
                     f"    acc{k} = acc{k} * g{k} + s{k}[t]", f"    outs{k}.append(acc{k})",
                     f"y = y + torch.stack(outs{k}).sum(0) if outs{k} else y"],
                    [f"for t in range({n}):", f"    y = y + s{k}[{n} - 1 - t] * (t + 1) * g{k}"],
                    [f"a{k} = b{k} = y * 0 + 1", f"for t in range({n} // 2 + 1):",
                     f"    a{k}, b{k} = b{k}, a{k} + b{k} * g{k}", f"y = y + b{k}"],
                    [f"c{k} = 0", f"for t in range({n}):", f"    c{k} += 1", f"    y = y + c{k} * g{k}"],
                    [f"o{k} = []", f"for t in range({n}):", f"    o{k}.append(y * g{k})",
                     f"    if len(o{k}) > lim{k}:", f"        y = y - o{k}[-1]"],
                    [f"for t in range({n}):", f"    if t >= lim{k}:", f"        break", f"    y = y * g{k} + t"],
                    [f"for t in range({n}):", f"    box{k}['last'] = y", f"    y = y + box{k}['last'] * g{k}"]])
    return F([f"g{k} = 0.5", f"lim{k} = 2", f"box{k} = {{}}"], use,
             [("global rebound", [f"g{k} = rng.choice([0.25, 2.0])"]),
              ("global rebound", [f"lim{k} = rng.choice([1, 3])"])],
             state=[f"g{k}", f"lim{k}"], rebinds=[f"g{k}", f"lim{k}"], params=[f"s{k}"],
             args=[f"out.append(torch.arange(1.0, {sizes}[i] + 1))"])


@feature
def tensor_branches(r, k):
    # `if` on a one-element bool tensor that varies by call (c{k}'s signs): sides that only compute
    # tensors join into one record with both sides; sides that change Python state (a counter, a
    # number, a list), a conditional expression, `is` after the branch, and gates over three blocks
    # must still equal eager at every call, natively too.
    signs = [[r.choice([-1.0, 1.0]) for _ in range(3)] for _ in range(CALLS)]
    cond = f"(c{k}[0] > 0)"
    use = r.choice([[f"if {cond}:", f"    y = y * g{k}"],
                    [f"if {cond}.all():", f"    z{k} = y.exp() * g{k}", "else:", f"    z{k} = y.abs() + 1", f"y = y + z{k}"],
                    [f"y = y * g{k} if {cond} else y - 1"],
                    [f"if not {cond}:", f"    cnt{k}.append(1)", f"    y = y + len(cnt{k})"],
                    [f"m{k} = 1", f"if {cond}:", f"    m{k} = 3", f"    y = y - 1", f"y = y * m{k}"],
                    [f"w{k} = y", f"if {cond}:", f"    y = y.neg()", f"if y is w{k}:", f"    y = y + g{k}"],
                    [f"for j{k} in range(3):", f"    if c{k}[j{k}] > 0:", f"        y = y * g{k} + j{k}"]])
    return F([f"g{k} = 0.5", f"cnt{k} = []"], use,
             [("global rebound", [f"g{k} = rng.choice([0.25, 2.0])"])],
             state=[f"g{k}", f"cnt{k}"], rebinds=[f"g{k}"], params=[f"c{k}"],
             args=[f"out.append(torch.tensor({signs}[i]))"])


@feature
def training_step(r, k):
    # A training step in f: loss.backward() into a Linear's parameters and an SGD update, the
    # gradients left set (they accumulate over calls) or cleared. Between calls the gradients are
    # set or cleared from outside, a hook is registered, a parameter is frozen or changed in place,
    # the learning rate is rebound. Results, weights and .grad must equal eager's at every call.
    source = r.choice(["y.detach()", "y"])
    clear = [f"            p{k}.grad = None"] if r.random() < 0.5 else []
    body = [f"loss{k} = (lin{k}({source}) ** 2).mean()", f"loss{k}.backward()", "with torch.no_grad():",
            f"    for p{k} in lin{k}.parameters():", f"        if p{k}.grad is not None:",
            f"            p{k}.sub_(lr{k} * p{k}.grad)"] + clear + [f"y = y + loss{k}.detach()"]
    setup = [f"lin{k} = torch.nn.Linear(3, 3)", "with torch.no_grad():",
             f"    lin{k}.weight.copy_(torch.arange(9.0).reshape(3, 3) / 10 - 0.4)", f"    lin{k}.bias.fill_(0.1)",
             f"lr{k} = 0.1"]
    return F(setup, body,
             [("gradient set", [f"lin{k}.weight.grad = torch.full((3, 3), rng.choice([0.5, -1.0]))"]),
              ("gradient cleared", [f"lin{k}.bias.grad = None"]),
              ("hook registered", [f"lin{k}.weight.register_hook(lambda g: g * 2)"]),
              ("parameter frozen", [f"lin{k}.bias.requires_grad_(False)"]),
              ("parameter changed in place", [f"lin{k}.weight.data.mul_(rng.choice([0.5, 2.0]))"]),
              ("global rebound", [f"lr{k} = rng.choice([0.05, 0.2])"])],
             state=[f"lin{k}.weight", f"lin{k}.bias", f"lin{k}.weight.grad", f"lin{k}.bias.grad"], rebinds=[f"lr{k}"])


def program(seed, keep=lambda i, j: True):
    """(source, metadata) of program `seed`; metadata: feature names and the labels of each call's changes.
    keep(i, j) False leaves out the j-th change after call i (to narrow a failure down)."""
    r = random.Random(seed)
    chosen = [r.choice(FEATURES) for _ in range(r.randint(2, 4))]
    parts = [(fn.__name__, fn(r, k)) for k, fn in enumerate(chosen)]
    imports = sorted({"torch"} | {m for _, p in parts for m in p["imports"]})
    src = [f"import {m}" for m in imports] + [""]
    for _, p in parts:
        src += p["setup"]
    params = ", ".join(["x", "v"] + [n for _, p in parts for n in p["params"]])
    src += ["", f"def f({params}):", "    y = x * 1.0"] + ["    " + line for _, p in parts for line in p["body"]]
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
    args = [line for _, p in parts for line in p["args"]]
    if args:  # the extra arguments of call i, built in each world from its own objects
        src += ["", "def extra_args(i):", "    out = []"] + ["    " + line for line in args] + ["    return out"]
    meta = {"features": [n for n, _ in parts], "changes": [[lab for lab, _, _ in c] for c in schedule]}
    return "\n".join(src) + "\n", meta


DRIVER = r'''
import random, sys, types
import torch
import magpy


def same_type(a, b):
    # Each world defines its own classes: a user class matches by name.
    return type(a) is type(b) or (type(a).__module__.startswith("perturb") and
                                  type(a).__qualname__ == type(b).__qualname__)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and
                a.requires_grad == b.requires_grad and torch.equal(a, b))
    if isinstance(a, (list, tuple)):
        return same_type(a, b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return same_type(a, b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if hasattr(a, "__code__"):  # the two worlds' copies of one function
        return type(a) == type(b) and a.__code__ == b.__code__
    return same_type(a, b) and a == b


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
    threads = torch.get_num_threads()
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
            ac = [xc, vc] + (cns["extra_args"](i) if "extra_args" in cns else [])
            ae = [xe, ve] + (ens["extra_args"](i) if "extra_args" in ens else [])
            with torch.set_grad_enabled(not NO_GRAD):  # both worlds alike
                got, want = attempt(compiled, *ac), attempt(ens["f"], *ae)
            if not same(got, want):
                fail(seed, source, i, f"result {got} != eager {want}")
            if not same(ac, ae):
                fail(seed, source, i, f"arguments after the call {ac} != eager {ae}")
            a, b = attempt(cns["state"]), attempt(ens["state"])
            if not same(a, b):
                fail(seed, source, i, f"state {a} != eager {b}")
            if i + 1 < CALLS:
                if "perturb_shared" in cns:
                    attempt(cns["perturb_shared"], i, rng_s)
                a, b = attempt(cns["perturb"], i, rng_c), attempt(ens["perturb"], i, rng_e)
                if not same(a, b):
                    fail(seed, source, i, f"perturb gave {a} != eager {b}")
        COMPILED_CALLS[0] += compiled._magpy_stats()["compiled"]
    finally:
        # What the program changed for both worlds goes back for the next program.
        for name in set(vars(torch.Tensor)) - set(tensor_dict):
            delattr(torch.Tensor, name)
        for name, value in tensor_dict.items():
            if vars(torch.Tensor).get(name) is not value:
                setattr(torch.Tensor, name, value)
        torch.set_default_dtype(torch.float32)
        torch.set_num_threads(threads)
        torch.autograd.set_detect_anomaly(False)
        torch.set_grad_enabled(True)


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
    # --no-grad: every call in both worlds runs with grad mode off, where
    # the JIT may run compiled graphs (magpy-capture --backend).
    out = [DRIVER, f"CALLS = {CALLS}", f"NO_GRAD = {'--no-grad' in sys.argv[3:]}", "COMPILED_CALLS = [0]",
           "PROGRAMS = ["]
    for s in range(seed, seed + count):
        out.append(f"    ({s}, {program(s)[0]!r}),")
    out += ["]", "for p in PROGRAMS:", "    run(*p)", "print(f'perturb: {len(PROGRAMS)} programs agree with eager; {COMPILED_CALLS[0]} calls ran compiled graphs')"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
