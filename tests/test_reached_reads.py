"""What the traced code reads of the objects it reaches by locals, loop variables,
getattr and closures (``p = self.p; p.dt``, ``for layer in self.layers``), of callables
and Enum members held by attributes, of small arrays NumPy reads outside the traced
operations (``np.sqrt(self.running_var + eps)``): a change between calls traces again, as
NumPy would compute with it; a change the code does not read does not (trace/reached.py)."""
from __future__ import annotations

import enum
import functools
import types
import warnings
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import pytest

import tracearray

X = np.array([-1.0, 0.5, 2.0])


def same(f, *args) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (RetraceWarning: values keep changing here)
        got = f(*args)
    want = f.fn(*args)
    assert np.asarray(got).shape == np.asarray(want).shape
    np.testing.assert_allclose(got, want, rtol=1e-12)


class Sim:
    def __init__(self) -> None:
        self.p = types.SimpleNamespace(dt=0.1, k=2.0)
        self.recs = [types.SimpleNamespace(scale=2.0), types.SimpleNamespace(scale=3.0)]

    def step(self, u):
        p = self.p                       # a local bound to a reached object
        for r in self.recs:              # loop variables
            u = u * r.scale
        return u + p.dt * p.k * u + sum(r.scale for r in self.recs)


def test_locals_loop_variables_and_comprehensions() -> None:
    s = Sim()
    f = tracearray.compile(s.step)
    same(f, X)
    s.p.dt = 0.5
    same(f, X)
    s.recs[0].scale = 10.0
    same(f, X)
    s.recs[1] = types.SimpleNamespace(scale=-1.0)
    same(f, X)
    s.recs.append(types.SimpleNamespace(scale=0.5))
    same(f, X)
    s.p = types.SimpleNamespace(dt=0.1, k=2.0)   # another object of the same values
    same(f, X)


class Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2


Point = namedtuple("Point", "dt k")


@dataclass(slots=True)
class Slotted:
    dt: float


class Model:
    def __init__(self) -> None:
        self.act = np.tanh
        self.mode = Mode.TRAIN
        self.cfg = Point(0.1, 2.0)
        self.slot = Slotted(0.5)
        self.k = 2.0
        self.which = "k"
        self.fns = [np.abs]

    def forward(self, x):
        y = self.act(x) * self.cfg.dt * self.slot.dt
        if self.mode is Mode.EVAL:
            y = y * 2
        y = y + getattr(self, "k") + getattr(self, "kk", 3.0) + getattr(self, self.which)
        for fn in self.fns:
            y = fn(y)
        return y


@pytest.mark.parametrize("change", [
    lambda m: setattr(m, "act", np.sin),                 # a ufunc swapped
    lambda m: setattr(m, "act", functools.partial(np.multiply, 2.0)),
    lambda m: setattr(m, "mode", Mode.EVAL),              # an Enum member
    lambda m: setattr(m, "cfg", Point(0.5, 2.0)),         # a namedtuple's field
    lambda m: setattr(m.slot, "dt", 4.0),                 # a __slots__ field
    lambda m: setattr(m, "k", -1.0),                      # getattr(self, "k")
    lambda m: setattr(m, "kk", 7.0),                      # getattr's default no longer
    lambda m: setattr(m, "which", "kk") or setattr(m, "kk", 9.0),
    lambda m: m.fns.append(np.negative),                  # a list of functions
    lambda m: m.fns.__setitem__(0, np.square),
])
def test_attributes_read_by_name_on_reached_objects(change) -> None:
    m = Model()
    f = tracearray.compile(m.forward)
    same(f, X)
    change(m)
    same(f, X)


def make_layer(k):
    state = {"k": k}

    def layer(x):
        return x * k + state["k"]

    def set_k(v):
        nonlocal k
        k = v
    layer.set_k = set_k
    layer.state = state
    return layer


class Net:
    def __init__(self) -> None:
        self.layers = [make_layer(2.0), make_layer(3.0)]
        self.running_var = np.ones(3)
        self.eps = 1e-5
        self.opts = {"lr": 0.1, "step": 0}

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        # NumPy's own operations on a reached array: computed while tracing
        scale = 1.0 / np.sqrt(self.running_var + self.eps)
        return x * scale * self.opts["lr"] + self.opts.get("bias", 0.0)


def test_closures_small_arrays_and_dict_keys() -> None:
    n = Net()
    f = tracearray.compile(n.forward)
    same(f, X)
    n.layers[0].set_k(7.0)                 # a closure variable rebound
    same(f, X)
    n.layers[1].state["k"] = 11.0         # a dict a closure holds
    same(f, X)
    n.running_var[:] = 4.0                 # a small array updated in place
    same(f, X)
    n.opts["bias"] = 1.5                   # a key the code asks for, added
    same(f, X)
    traces = f.cache_info().traces
    for i in range(5):
        n.opts["step"] = i                 # a key the code does not read
        same(f, X)
    assert f.cache_info().traces == traces


class Optimizer:
    def __init__(self) -> None:
        self.params = [np.ones(3), np.full(3, 2.0)]
        self.lr = 0.1
        self.t = 0

    def loss(self, x):
        return (self.params[0] * x).sum() + (self.params[1] * x).sum() * self.lr


def test_arrays_rebound_in_a_list_do_not_trace_again() -> None:
    """Arrays the trace reads (graph inputs) are read at every call: a new list of new
    arrays of the same layout, and a counter the code does not read, trace nothing."""
    o = Optimizer()
    f = tracearray.compile(o.loss)
    same(f, X)
    for _ in range(4):
        o.params = [p - 0.1 for p in o.params]
        o.t += 1
        same(f, X)
    assert f.cache_info().traces == 1


class Norm:
    def __call__(self, x):
        return x * 10


class Other:
    def __call__(self, x):
        return x - 10


class WithOptional:
    def __init__(self) -> None:
        self.norm = Norm()

    def forward(self, x):
        if self.norm is not None:
            x = self.norm(x)
        return x


def test_objects_replaced_dropped_or_changing_class() -> None:
    m = WithOptional()
    f = tracearray.compile(m.forward)
    same(f, X)
    m.norm.__class__ = Other            # the same object, another class
    same(f, X)
    m.norm = None                       # (the old object is gone: not a match of None)
    same(f, X)
    m.norm = Norm()
    same(f, X)


ARGS = __import__("argparse").Namespace(scale=2.0)
CF = types.SimpleNamespace(s=2.0)
LAYERS = [types.SimpleNamespace(s=1.5), types.SimpleNamespace(s=3.0)]


def _alias_helper(x):
    c = CF                       # a helper's local bound to its global
    for layer in LAYERS:
        x = x * layer.s
    return x * c.s


class Ordered:
    def __init__(self) -> None:
        self.order = ["a", "b"]
        self.a, self.b = 2.0, 3.0
        self.q = {"u": 1.0, "v": 2.0}
        self.deep = types.SimpleNamespace(n=types.SimpleNamespace(n=types.SimpleNamespace(
            n=types.SimpleNamespace(n=types.SimpleNamespace(n=types.SimpleNamespace(v=2.0))))))

    def fwd(self, x):
        for name in self.order:
            x = x * getattr(self, name)
        q = self.q
        for k in q:                  # a dict iterated through a local
            x = x + q[k]
        return x * self.deep.n.n.n.n.n.v


@pytest.mark.parametrize("change", [
    lambda o: setattr(ARGS, "scale", 3.0),
    lambda o: setattr(CF, "s", 5.0),
    lambda o: setattr(LAYERS[1], "s", -1.0),
    lambda o: LAYERS.append(types.SimpleNamespace(s=10.0)),
    lambda o: setattr(o, "b", 5.0),
    lambda o: o.order.append("a"),
    lambda o: o.q.__setitem__("w", 4.0),
    lambda o: setattr(o.deep.n.n.n.n.n, "v", 7.0),
])
def test_namespaces_helper_globals_names_held_in_lists_and_deep_chains(change) -> None:
    saved = (ARGS.scale, CF.s, [layer.s for layer in LAYERS], len(LAYERS))
    o = Ordered()

    def f(x):
        return _alias_helper(x) * ARGS.scale + o.fwd(x)

    c = tracearray.compile(f)
    try:
        same(c, X)
        change(o)
        same(c, X)
    finally:
        ARGS.scale, CF.s = saved[0], saved[1]
        del LAYERS[saved[3]:]
        for layer, s in zip(LAYERS, saved[2]):
            layer.s = s


class Trainer:
    def __init__(self) -> None:
        self.opt = types.SimpleNamespace(step=lambda w, g: w - 0.1 * g, lr=0.1)
        self.cfg = types.SimpleNamespace(n=2.0)
        self.hp = Point(0.1, 2.0)
        self.w = np.ones(4)
        self.n, self.step, self.size, self.sum = 0, 0, 0, np.zeros(1)
        self.layers = [types.SimpleNamespace(k=1.0)]

    def run(self, g):
        y = self.opt.step(self.w, g) * self.cfg.n * self.hp.dt
        for layer in self.layers:
            y = y * layer.k
        return y.sum() + y.size


def test_state_the_code_does_not_read_traces_nothing() -> None:
    """Counters named as what the code reads elsewhere (``self.step`` beside
    ``self.opt.step(...)``, ``self.sum`` beside ``y.sum()``), configs and layers rebuilt
    with equal values each step: no new trace."""
    t = Trainer()
    f = tracearray.compile(t.run)
    g = np.full(4, 0.5)
    for i in range(6):
        t.n += 1
        t.step += 1
        t.size += 16
        t.sum += 1
        t.hp = Point(0.1, 2.0)
        t.layers = [types.SimpleNamespace(k=1.0)]
        same(f, g)
    assert f.cache_info().traces == 1


def test_containers_holding_themselves() -> None:
    loop = [1.0]
    loop.append(loop)
    tree = {"a": 2.0}
    tree["self"] = tree
    f = tracearray.compile(lambda x: x * loop[0] * tree["a"])
    same(f, X)
    tree["a"] = 3.0
    same(f, X)


def test_a_compiled_closure_called_by_a_compiled_function_is_read_at_each_call():
    """A compiled helper is inlined into its caller's trace: its closure variables (a
    number changed through nonlocal, an array changed in place) are checked as a plain
    helper's are (a probe found them frozen)."""
    def make():
        scale = 1.0
        w = np.ones(4)

        def inner(a):
            return a * scale * w

        def set_scale(v):
            nonlocal scale
            scale = v
        return tracearray.compile(inner), set_scale, w

    inner, set_scale, w = make()

    @tracearray.compile
    def outer(a):
        return inner(a) + 1

    x = np.arange(4.0)
    np.testing.assert_array_equal(outer(x), x + 1)
    set_scale(3.0)
    np.testing.assert_array_equal(outer(x), x * 3.0 + 1)
    w[:] = 2.0
    np.testing.assert_array_equal(outer(x), x * 6.0 + 1)


def test_an_absent_namespace_attribute_and_a_classmethods_class_attribute():
    """getattr(ns, "s", default) of a SimpleNamespace without ``s``, and ``cls.k`` read by a
    classmethod, are checked at each call (a probe found both frozen)."""
    import types as _types
    ns = _types.SimpleNamespace()

    class P:
        k = 2.0

        @classmethod
        def scale(cls, x):
            return x * cls.k

    @tracearray.compile(device="cpu")
    def f(x):
        return P.scale(x) * getattr(ns, "s", 3.0)

    x = np.arange(4.0)
    np.testing.assert_array_equal(f(x), x * 6.0)
    ns.s = 5.0
    np.testing.assert_array_equal(f(x), x * 10.0)
    P.k = 4.0
    np.testing.assert_array_equal(f(x), x * 20.0)
