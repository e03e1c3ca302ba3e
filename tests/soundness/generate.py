"""Differential soundness programs for magpy.

    generate.py SEED COUNT     prints a driver script for programs SEED..SEED+COUNT-1

Each program is a small PyTorch function or nn.Module, drawn from a seeded
grammar of the things that make a captured record stale or wrong: globals,
attributes, flags and container elements read and changed between calls,
enum and scalar arguments, *args and **kwargs, in-place updates of fresh
tensors and constants, state written by the function, random draws,
arguments that alias, weak references to what the function drops,
lists the function only appends to, and one object held both as a global
and by self. The driver (run under magpy-capture) builds each
program twice from the same source, compiles one copy with magpy.compile,
and before every call applies the same external change to both copies; it
compares results (values, dtypes, shapes, requires_grad) and the state the
program can see after every call. On a difference it prints the seed and
the program's source and exits 1. The record it leaves is then replayed
natively by magpy-run (tests/soundness/run.sh).
"""
import random
import sys

TEMPLATES = []


def template(fn):
    TEMPLATES.append(fn)
    return fn


# Each template returns (state lines, body lines, mutation lines): state
# lines run once per copy at module level (names: G_*, and `self` fields
# set in __init__ as S.<name>), body lines read `x` (a tensor) and update
# `y`, mutations change external state between calls (the same on both
# copies; `i` is the call index, `rng` a seeded random.Random).
@template
def global_scale(r, k):
    return ([f"G_s{k} = {r.choice([1.0, 2.0, 0.5])}"], [f"y = y * G_s{k}"],
            [f"ns['G_s{k}'] = rng.choice([1.0, 2.0, 0.5, 3.0])"])


@template
def attribute_flag(r, k):
    return ([f"S.flag{k} = True"], [f"if self.flag{k}:", f"    y = y + 1", "else:", f"    y = y - 1"],
            [f"obj.flag{k} = rng.random() < 0.5"])


@template
def list_element(r, k):
    return ([f"G_l{k} = [1.0, 2.0, 3.0]"], [f"y = y + G_l{k}[{r.randrange(3)}]"],
            [f"ns['G_l{k}'][rng.randrange(3)] = rng.choice([1.0, 4.0])"])


@template
def dict_entry(r, k):
    return ([f"G_d{k} = {{'a': 1.0, 'b': 2.0}}"], [f"y = y * G_d{k}['a'] + G_d{k}.get('c', 0.0)"],
            [f"ns['G_d{k}']['a'] = rng.choice([1.0, 2.0])", f"if rng.random() < 0.3: ns['G_d{k}']['c'] = 5.0"])


@template
def attribute_scalar(r, k):
    return ([f"S.k{k} = 3"], [f"y = y.reshape(-1)[: self.k{k}].sum() + y * self.k{k}"],
            [f"obj.k{k} = rng.choice([1, 2, 3])"])


@template
def counter_write(r, k):
    return ([f"S.count{k} = 0"], [f"self.count{k} = self.count{k} + 1", f"y = y + self.count{k}"], [])


@template
def fresh_accumulator(r, k):
    return ([], [f"acc{k} = torch.zeros(y.shape)", f"acc{k}.add_(y)", f"acc2{k} = torch.zeros(y.shape)",
                 f"y = acc{k} + acc2{k}"], [])


@template
def mutated_constant(r, k):
    return ([], [f"c{k} = torch.tensor([1.0, 2.0])", f"c{k}.mul_(2)", f"y = y + c{k}.sum()"], [])


@template
def global_tensor_inplace(r, k):
    return ([f"G_t{k} = torch.ones(1)"], [f"G_t{k}.add_(1)", f"y = y * G_t{k}"], [])


@template
def global_write(r, k):
    return ([f"G_w{k} = 0"], [f"global G_w{k}", f"G_w{k} = G_w{k} + 2", f"y = y + G_w{k}"], [])


@template
def list_append(r, k):
    return ([f"G_a{k} = []"], [f"G_a{k}.append(1)", f"y = y + len(G_a{k})"], [])


@template
def list_only_appended(r, k):
    # A list the function only appends to: its record extends it, guarding
    # neither its length nor its elements, while the script empties, fills
    # or rebinds it between calls (some programs also read it back).
    on_self = r.random() < 0.5
    name = f"self.log{k}" if on_self else f"G_g{k}"
    state = [f"S.log{k} = []"] if on_self else [f"G_g{k} = []"]
    grow = r.choice([f"{name}.append(y.sum())", f"{name}.extend([1, y.mean()])", f"{name}.append({k})"])
    body = [grow] + ([f"y = y + len({name})"] if r.random() < 0.3 else [])
    held = f"obj.log{k}" if on_self else f"ns['G_g{k}']"
    mutations = [f"if rng.random() < 0.3: {held}.clear()",
                 f"if rng.random() < 0.3: {held}.extend([2.0] * rng.randint(1, 3))"]
    mutations += [f"if rng.random() < 0.2: obj.log{k} = []"] if on_self else [
        f"if rng.random() < 0.2: ns['G_g{k}'] = [7]"]
    return state, body, mutations


@template
def global_held_by_self(r, k):
    # One list or tensor reached as a module global and as an attribute of
    # self: a record file keeps the two apart, so a record that writes it
    # through either name must be refused natively (reads alone replay),
    # while the script writes through either name or rebinds one.
    if r.random() < 0.5:
        state = [f"G_h{k} = [1]", f"S.h{k} = G_h{k}"]
        write = r.choice([f"G_h{k}.append(2)", f"self.h{k}.append(2)", f"self.h{k}[0] = {k}", ""])
        read = r.choice([f"y = y + len(self.h{k})", f"y = y + len(G_h{k})", f"y = y + self.h{k}[0]"])
        mutations = [f"if rng.random() < 0.3: ns['G_h{k}'].append(5)",
                     f"if rng.random() < 0.2: obj.h{k} = [3]"]
    else:
        state = [f"G_h{k} = torch.zeros(3)", f"S.h{k} = G_h{k}"]
        write = r.choice([f"G_h{k}.add_(1)", f"self.h{k}.mul_(2)", ""])
        read = r.choice([f"y = y + self.h{k}", f"y = y * G_h{k}.sum()"])
        mutations = [f"if rng.random() < 0.3: ns['G_h{k}'].add_(0.5)",
                     f"if rng.random() < 0.2: obj.h{k} = torch.ones(3)"]
    return state, ([write] if write else []) + [read], mutations


@template
def enum_branch(r, k):
    return ([], [f"y = y * 2 if mode is Mode.A else y * 3"], [])


@template
def random_draw(r, k):
    return ([], [f"y = y + torch.rand(y.shape) * 0.1"], [])


@template
def grad_region(r, k):
    return ([], [f"with torch.no_grad():", f"    z{k} = y * 2", f"y = y + z{k}"], [])


@template
def star_scales(r, k):
    return ([], [f"for s{k} in scales:", f"    y = y * s{k}"], [])


@template
def legacy_constructor(r, k):
    return ([], [f"y = y + torch.Tensor([1.0, 2.0]).sum()"], [])


@template
def default_dtype(r, k):
    return ([], [f"y = y + torch.zeros(y.shape[-1]) + torch.tensor([0.5]).sum()"],
            ["torch.set_default_dtype(rng.choice([torch.float32, torch.float64]))"])


@template
def made_requires_grad(r, k):
    return ([], [f"w{k} = y * 1", f"y = y + (1 if w{k}.requires_grad else 2)"], [])


@template
def standard_layer(r, k):
    return ([f"S.act{k} = torch.nn.{r.choice(['ReLU', 'Sigmoid'])}()"], [f"y = self.act{k}(y)"],
            ["F.relu = patched_relu if rng.random() < 0.3 else original_relu"])


@template
def layout_in_place(r, k):
    return ([f"G_m{k} = torch.arange(6.0).reshape(2, 3)"],
            [f"y = y + (1 if G_m{k}.is_contiguous() else 2)", f"G_m{k}.t_()", f"y = y + G_m{k}[0, 1]"], [])


@template
def size_passed_on(r, k):
    # Sizes read and passed straight to operators: a dynamic record reads them from its tensors.
    return ([], [f"b{k}, n{k} = y.size()", f"z{k} = y.view(b{k}, n{k}, 1).sum(-1) + torch.arange(n{k})",
                 f"y = y + z{k}.reshape(y.shape)[: b{k}] + torch.zeros(y.shape)"], [])


@template
def size_decision(r, k):
    # Sizes compared or computed with: such a record keeps its sizes.
    return ([], [f"if y.shape[0] > {r.choice([1, 2, 4])}:", "    y = y.flip(0)", "y = y * (y.size(0) % 3 + 1)"], [])


@template
def size_bounds_state(r, k):
    # An argument's size bounds a slice of state that the script replaces between calls.
    return ([f"G_rows{k} = torch.arange(30.0).reshape(10, 3)"], [f"y = y + G_rows{k}[: y.shape[0]].sum(-1, keepdim=True)"],
            # an explicit dtype: another template's mutation may change the default between the two copies
            [f"ns['G_rows{k}'] = torch.arange(30, dtype=torch.float32).reshape(10, 3) * rng.choice([1.0, 2.0])"])


@template
def lifted_arithmetic(r, k):
    # A float the script changes between calls, only computed with: lifted into the graph.
    return ([f"S.lr{k} = 0.5"], [f"y = y * (self.lr{k} * 2 - 0.25) + self.lr{k} // 0.5"],
            [f"obj.lr{k} = rng.choice([0.1, 0.5, 1.5, 2.0, -1.0])"])


@template
def number_decides(r, k):
    # An int the script changes, compared: its value stays guarded.
    return ([f"G_n{k} = 3"], [f"y = y + (1 if G_n{k} * 2 > 5 else -1)", f"y = y * G_n{k}"],
            [f"ns['G_n{k}'] = rng.choice([1, 2, 3, 4])"])


@template
def number_bounds(r, k):
    # An int bounding arange and a slice: lifted where the sizes stay, guarded where they change.
    return ([f"S.off{k} = 2"],
            [f"y = y * torch.arange(self.off{k}, self.off{k} + 1, dtype=torch.float32)",
             f"y = y + torch.arange(12.0)[self.off{k} : self.off{k} + 2].sum()"],
            [f"obj.off{k} = rng.choice([0, 1, 2, 3, 7, 11])"])


@template
def number_into_tensor(r, k):
    # A float written into a tensor: torch makes it tensor data, so it stays guarded.
    return ([f"S.v{k} = 1.0"], [f"m{k} = torch.zeros(y.shape)", f"m{k}.view(-1)[0] = self.v{k}", f"y = y + m{k}"],
            [f"obj.v{k} = rng.choice([1.0, 2.5, -3.0])"])


@template
def number_state_write(r, k):
    # A float global the function rewrites from itself on every call.
    return ([f"G_c{k} = 1.5"], [f"global G_c{k}", f"G_c{k} = G_c{k} * 2 - 1", f"y = y + G_c{k}"], [])


@template
def weak_referent(r, k):
    # A weak reference whose referent the call may drop (its list held it
    # last): eager frees it there and ref() answers None; a monitored call
    # must not hand back what it keeps alive. The names are not G_: the
    # state comparison would compare the two copies' objects by identity.
    v = r.choice([1.0, 2.0])
    return (["import weakref", f"class Box{k}:", "    def __init__(self, v): self.v = v",
             f"W_box{k} = [Box{k}({v})]", f"W_ref{k} = weakref.ref(W_box{k}[0])"],
            [f"if W_box{k} and y.shape[0] > 1:", f"    W_box{k}.pop()", f"held{k} = W_ref{k}()",
             f"y = y + (0.5 if held{k} is None else held{k}.v)", f"del held{k}"],
            [f"if rng.random() < 0.5: ns['W_box{k}'][:] = [ns['Box{k}']({v})]; "
             f"ns['W_ref{k}'] = ns['weakref'].ref(ns['W_box{k}'][0])"])


ARGUMENT_KINDS = ["shape", "dtype", "scale", "mode", "scales", "no_grad", "grad"]


def program(seed):
    """The source of program `seed` and the calls to make (argument specs)."""
    r = random.Random(seed)
    chosen = [r.choice(TEMPLATES) for _ in range(r.randint(1, 4))]
    state, body, mutations = [], [], []
    for k, t in enumerate(chosen):
        s, b, m = t(r, k)
        state += s
        body += b
        mutations += m
    as_module = r.random() < 0.5
    module_state = [line for line in state if not line.startswith("S.")]
    self_state = [line[2:] for line in state if line.startswith("S.")]
    if self_state and not as_module:
        as_module = True
    src = ["import enum", "import torch", "", "class Mode(enum.Enum):", "    A = 1", "    B = 2", ""]
    src += module_state
    header = "def forward(self, x, mode=Mode.A, *scales):" if as_module else "def f(x, mode=Mode.A, *scales):"
    lines = ["y = x * 1.0"] + body + ["return y"]
    if as_module:
        src += ["", "class Net(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
        src += ["        self." + line for line in self_state] or ["        pass"]
        src += ["", "    " + header] + ["        " + line for line in lines]
        src += ["", "def make():", "    return Net()"]
    else:
        src += ["", header.replace("(self, ", "(")] + ["    " + line for line in lines]
        src += ["", "def make():", "    return f"]
    calls = [[r.choice(ARGUMENT_KINDS) for _ in range(r.randint(0, 2))] for _ in range(r.randint(3, 6))]
    return "\n".join(src) + "\n", mutations, calls


DRIVER = r'''
import random, sys, types
import torch
import torch.nn.functional as F
import magpy

original_relu = F.relu


def patched_relu(t, inplace=False):
    return original_relu(t) + 1


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and
                a.requires_grad == b.requires_grad and torch.equal(a, b))
    if isinstance(a, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) == type(b) and a == b


def visible(ns, obj):
    state = {k: v for k, v in ns.items() if k.startswith("G_")}
    if isinstance(obj, torch.nn.Module):
        state.update({"self." + k: v for k, v in vars(obj).items() if not k.startswith("_")})
    return state


def arguments(spec, mode_type, rng):
    shape = (2, 3) if "shape" not in spec else rng.choice([(2, 3), (3, 3), (1, 3), (5, 3), (8, 3)])
    dtype = torch.float32 if "dtype" not in spec else rng.choice([torch.float32, torch.float64])
    x = torch.arange(float(shape[0] * shape[1]), dtype=dtype).reshape(shape) / 7
    if "grad" in spec:
        x.requires_grad_(True)
    if "scale" in spec:
        x = x * rng.choice([1.0, -2.0])
    mode = mode_type.A if "mode" not in spec else rng.choice([mode_type.A, mode_type.B])
    scales = () if "scales" not in spec else tuple(rng.choice([1, 2, 3]) for _ in range(rng.randint(1, 3)))
    return x, mode, scales


def run(seed, source, mutations, calls):
    spaces = []
    for copy_name in ("compiled", "eager"):
        # A module of its own (magpy guards globals by module name).
        module = types.ModuleType(f"prog{seed}_{copy_name}")
        sys.modules[module.__name__] = module
        exec(compile(source, f"program{seed}.py", "exec"), module.__dict__)
        spaces.append(module.__dict__)
    (cns, ens) = spaces
    compiled_obj, eager_obj = cns["make"](), ens["make"]()
    compiled = magpy.compile(compiled_obj)
    rng_c, rng_e, rng_a = random.Random(seed), random.Random(seed), random.Random(seed + 1)
    for i, spec in enumerate(calls):
        for rng, ns, obj in ((rng_c, cns, compiled_obj), (rng_e, ens, eager_obj)):
            for line in mutations:
                exec(line, {"ns": ns, "obj": obj, "rng": rng, "i": i, "torch": torch, "F": F,
                            "patched_relu": patched_relu, "original_relu": original_relu})
        x, mode_name, scales = arguments(spec, cns["Mode"], rng_a)
        results = []
        for fn, ns in ((compiled, cns), (eager_obj, ens)):
            mode = ns["Mode"][mode_name.name]
            torch.manual_seed(seed * 100 + i)
            try:
                with torch.set_grad_enabled("no_grad" not in spec):
                    results.append(fn(x.clone(), mode, *scales))
            except Exception as e:  # both must fail alike
                results.append(type(e))
        if not same(results[0], results[1]):
            fail(seed, source, i, f"result {results[0]} != eager {results[1]}")
        a, b = visible(cns, compiled_obj), visible(ens, eager_obj)
        if not same(a, b):
            fail(seed, source, i, f"state {a} != eager {b}")
    # Process-wide state the mutations change goes back for the next program.
    torch.set_default_dtype(torch.float32)
    F.relu = original_relu


def fail(seed, source, call, what):
    print(f"soundness: program {seed}, call {call}: {what}\n--- program {seed} ---\n{source}---", file=sys.stderr)
    sys.exit(1)
'''


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    out = [DRIVER, "PROGRAMS = ["]
    for s in range(seed, seed + count):
        source, mutations, calls = program(s)
        out.append(f"    ({s}, {source!r}, {mutations!r}, {calls!r}),")
    out += ["]", "for p in PROGRAMS:", "    run(*p)", "print(f'soundness: {len(PROGRAMS)} programs agree with eager')"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
