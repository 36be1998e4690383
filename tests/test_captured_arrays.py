"""Arrays the compiled function reaches through closures, defaults, the bound object and
global containers are read at every call, as NumPy reads them (trace/captured.py): an
in-place update, or a new array of the same shape and dtype bound to the same place, is
seen without tracing again; another shape or dtype traces again."""
import re
import sys
import types

import numpy as np
import pytest

import tracearray

X = np.arange(3.0)


def compiled(fn):
    return tracearray.compile(fn, device="cpu")


def test_closure_in_place_and_rebound_cell():
    w = np.ones(3)

    def f(x):
        return x + w

    c = compiled(f)
    np.testing.assert_array_equal(c(X), f(X))
    w[:] = 7.0                         # in place
    np.testing.assert_array_equal(c(X), X + 7.0)

    def rebind(v):
        nonlocal w
        w = v
    rebind(np.full(3, -2.0))           # the cell now holds another array
    np.testing.assert_array_equal(c(X), X - 2.0)
    assert c.stats.traces == 1


def test_default_argument_in_place():
    def f(x, w=np.ones(3)):
        return x * w

    c = compiled(f)
    c(X)
    f.__defaults__[0][:] = 4.0
    np.testing.assert_array_equal(c(X), X * 4.0)


def test_bound_method_attribute_in_place_rebound_and_new_shape():
    class Model:
        def __init__(self):
            self.w = np.ones(3)
            self.b = np.zeros(3, np.float32)

        def forward(self, x):
            return np.tanh(x * self.w + self.b)

    m = Model()
    c = compiled(m.forward)
    np.testing.assert_allclose(c(X), m.forward(X))
    m.w -= 0.5 * np.arange(3.0)        # an optimiser step, in place
    np.testing.assert_allclose(c(X), m.forward(X))
    m.b = m.b + np.float32(1.5)        # a new array of the same shape and dtype
    np.testing.assert_allclose(c(X), m.forward(X))
    assert c.stats.traces == 1
    m.w, m.b = np.ones(4), np.ones(4, np.float32)   # another shape: traced again
    np.testing.assert_allclose(c(np.ones(4)), m.forward(np.ones(4)))
    assert c.stats.traces == 2
    m.b = np.zeros(4, np.float64)      # another dtype: traced again
    np.testing.assert_allclose(c(np.ones(4)), m.forward(np.ones(4)))
    assert c.stats.traces == 3


def test_nested_objects_and_lists_of_layers():
    class Layer:
        def __init__(self, n):
            self.w = np.eye(n) * 2.0

    class Net:
        def __init__(self):
            self.layers = [Layer(3), Layer(3)]

        def __call__(self, x):
            for layer in self.layers:
                x = np.maximum(x @ layer.w, 0.0)
            return x

    net = Net()
    c = compiled(net)
    np.testing.assert_allclose(c(X), net(X))
    net.layers[1].w[0, 0] = -5.0
    np.testing.assert_allclose(c(X), net(X))


def test_views_of_a_captured_array_follow_it():
    W = np.arange(12.0).reshape(3, 4)

    def f(x):
        return W.T @ x + W[1, ::-1] + W[:, ::-1].T @ x + W[::-2, 1:3].T[1, :1]

    c = compiled(f)
    x = np.ones(3)
    np.testing.assert_allclose(c(x), f(x))
    W[:] = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_allclose(c(x), f(x))


def test_global_containers_namespaces_and_modules():
    ns = types.SimpleNamespace(w=np.ones(3))
    params = {"w": np.ones(3), "layers": [np.ones(3)]}
    mod = types.ModuleType("tracearray_test_captured_cfg")
    mod.W = np.ones(3)
    sys.modules[mod.__name__] = mod
    try:
        g = {"ns": ns, "params": params, "mod": mod, "np": np}
        code = "def f(x):\n    return (x * ns.w + params['w']) * params['layers'][0] * mod.W\n"
        exec(code, g)
        f = g["f"]
        c = compiled(f)
        np.testing.assert_allclose(c(X), f(X))
        ns.w[:] = 3.0
        params["w"] = np.full(3, 5.0)
        params["layers"][0][:] = 2.0
        mod.W = np.full(3, -1.0)
        np.testing.assert_allclose(c(X), f(X))
        assert c.stats.traces == 1
    finally:
        del sys.modules[mod.__name__]


def test_captured_integer_index_array():
    idx = np.array([2, 0])

    def f(x):
        return x[idx] * 2

    c = compiled(f)
    np.testing.assert_array_equal(c(X), f(X))
    idx[:] = [1, 1]
    np.testing.assert_array_equal(c(X), f(X))
    idx[0] = 3                          # out of bounds now: NumPy's IndexError
    with pytest.raises(IndexError):
        c(X)


def test_captured_mask_values_are_fixed_by_the_trace():
    mask = np.array([True, False, True])

    def f(x):
        return x[mask].sum() + x[mask]

    c = compiled(f)
    np.testing.assert_array_equal(c(X), f(X))
    mask[1] = True                      # another count: another shape, traced again
    np.testing.assert_array_equal(c(X), f(X))
    assert c.stats.traces == 2
    np.testing.assert_array_equal(c(X), f(X))
    assert c.stats.traces == 2


def test_path_that_breaks_traces_again():
    class Holder:
        pass

    h = Holder()
    h.w = np.ones(3)

    def f(x):
        return x + h.w

    c = compiled(f)
    c(X)
    del h.w
    h.w = [1.0, 2.0, 3.0]              # not an array any more: traced again, as NumPy reads it
    np.testing.assert_allclose(c(X), f(X))
    assert c.stats.traces == 2


def test_values_numpy_computes_from_captured_arrays_alone_are_computed_once():
    # documented (docs/sharp-bits.md): no traced operand, so NumPy computes it while tracing
    w = np.ones(3)

    def f(x):
        return x + w.sum()

    c = compiled(f)
    c(X)
    w[:] = 2.0
    np.testing.assert_array_equal(c(X), X + 3.0)


def test_arrays_the_function_makes_stay_constants():
    def f(x):
        table = np.array([1.0, 2.0, 3.0])
        return x * table

    c = compiled(f)
    graph = c.lower(X).graph
    assert graph.input_names == ("x",)


def test_lower_names_the_captured_input():
    class M:
        def __init__(self):
            self.scale = np.full(3, 2.0)

        def run(self, x):
            return x * self.scale

    m = M()
    graph = compiled(m.run).lower(X).graph
    assert graph.input_names == ("x", "<captured self.scale>")


def test_new_layout_of_a_global_or_captured_array_gets_its_own_executable():
    # the fast path checks the layout its executable was built for (a C-ordered array
    # rebound to an F-ordered one of the same shape and values read element 0, 3, 6, ...)
    g = {"np": np, "W": np.arange(9.0).reshape(3, 3)}
    exec("def f(x):\n    return x + W\n", g)
    c = compiled(g["f"])
    x = np.zeros((3, 3))
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))
    g["W"] = np.asfortranarray(g["W"])
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))

    class M:
        w = None

        def f(self, x):
            return x + self.w

    m = M()
    m.w = np.arange(9.0).reshape(3, 3)
    cm = compiled(m.f)
    for _ in range(2):
        np.testing.assert_array_equal(cm(x), m.f(x))
    m.w = np.asfortranarray(m.w)
    for _ in range(2):
        np.testing.assert_array_equal(cm(x), m.f(x))
    m.w = m.w[::-1]
    for _ in range(2):
        np.testing.assert_array_equal(cm(x), m.f(x))
    assert cm.stats.traces == 1


def test_an_in_place_reshape_of_a_captured_array_is_seen():
    class M:
        def __init__(self):
            self.w = np.arange(6.0)

        def f(self, x):
            return x + self.w

    m = M()
    c = compiled(m.f)
    x = np.ones(6)
    for _ in range(2):
        np.testing.assert_array_equal(c(x), m.f(x))
    m.w.shape = (6, 1)                   # the same object, another shape
    for _ in range(2):
        np.testing.assert_array_equal(c(x), m.f(x))
    assert c.stats.traces == 2


def test_an_in_place_reshape_of_a_global_array_is_seen():
    g = {"np": np, "W": np.arange(6.0)}
    exec("def f(x):\n    return x + W\n", g)
    c = compiled(g["f"])
    x = np.ones(6)
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))
    g["W"].shape = (6, 1)
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))


def test_arrays_of_a_static_argument_are_read_at_every_call():
    # a method compiled in a class body with a static self: its arrays are the call's own
    class Model:
        def __init__(self, scale):
            self.w = np.full(3, scale)

        @tracearray.compile(static_argnums=0, device="cpu")
        def forward(self, x):
            return x * self.w

    a, b = Model(1.0), Model(2.0)
    np.testing.assert_array_equal(a.forward(X), X)
    a.w[:] = 3.0
    np.testing.assert_array_equal(a.forward(X), X * 3.0)
    np.testing.assert_array_equal(b.forward(X), X * 2.0)
    a.w = np.full(3, -1.0)
    np.testing.assert_array_equal(a.forward(X), -X)
    np.testing.assert_array_equal(b.forward(X), X * 2.0)


def _stale_after(fn, mutate, x=X):
    """Call ``fn`` compiled, mutate the captured state, call again: compiled == NumPy."""
    c = compiled(fn)
    np.testing.assert_allclose(c(x), fn(x))
    mutate()
    got, want = c(x), fn(x)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want)
    return c


def test_values_used_by_the_trace_are_fixed_by_it():
    # probe session 6: np.digitize's bins (their direction), a quantile's q, np.put's
    # indices, np.split's indices, a reshape's shape and Generator.choice's p were read while
    # tracing and kept after an in-place change
    class S:
        pass
    s = S()
    s.bins = np.array([0.0, 1.0, 2.0])
    s.q = np.array([10.0, 50.0])
    s.idx = np.array([0, 2])
    s.sp = np.array([1, 2])
    s.shape = np.array([3, 1])
    s.p = np.array([1.0, 0.0])
    x = np.array([0.5, 1.5, 2.5])
    _stale_after(lambda x: np.digitize(x, s.bins), lambda: s.bins.__setitem__(
        slice(None), [2.0, 1.0, 0.0]), x)
    _stale_after(lambda x: np.percentile(x, s.q), lambda: s.q.__setitem__(0, 90.0), x)

    def put(x):
        y = np.zeros(3)
        np.put(y, s.idx, x[:2])
        return y
    _stale_after(put, lambda: s.idx.__setitem__(1, 1), x)
    _stale_after(lambda x: np.concatenate(np.split(x, s.sp)[::-1]),
                 lambda: s.sp.__setitem__(0, 0), x)
    _stale_after(lambda x: x.reshape(s.shape), lambda: s.shape.__setitem__(
        slice(None), [1, 3]), x)

    def choice(x):
        return np.random.default_rng(0).choice(2, size=3, p=s.p) + 0 * x.astype(int)
    _stale_after(choice, lambda: s.p.__setitem__(slice(None), [0.0, 1.0]), x)


def test_paths_follow_what_the_code_reads():
    # an append changes which item ws[-1] is; one array at two places rebound at one;
    # a view of a view (self.W of self.flat) rebound
    ws = [np.ones(3)]
    _stale_after(lambda x: x * ws[-1], lambda: ws.append(np.full(3, 3.0)))

    class M:
        pass
    m = M()
    m.layers = [M()]
    m.layers[0].W = np.ones(3)
    m.params = [m.layers[0].W]
    _stale_after(lambda x: x * m.layers[0].W, lambda: setattr(m.layers[0], "W", np.full(3, 0.5)))
    m.flat = np.arange(6.0)
    m.W = m.flat.reshape(2, 3)
    _stale_after(lambda x: m.W.T @ x[:2], lambda: setattr(m, "W", np.full((2, 3), 2.0)))


def test_the_walk_reaches_containers_slots_classes_and_helpers():
    import collections
    od = collections.OrderedDict(w=np.ones(3))
    _stale_after(lambda x: x * od["w"], lambda: od["w"].__iadd__(1))
    P = collections.namedtuple("P", "w")
    p = P(np.ones(3))
    _stale_after(lambda x: x * p.w, lambda: p.w.__iadd__(1))

    class S:
        __slots__ = ("w",)

        def __init__(self):
            self.w = np.ones(3)
    s = S()
    _stale_after(lambda x: x * s.w, lambda: s.w.__iadd__(1))

    class C:
        table = np.ones(3)
    _stale_after(lambda x: x * C.table, lambda: C.table.__iadd__(1))

    def make_helper():
        w = np.ones(3)
        return (lambda x: x * w), w
    helper, hw = make_helper()
    _stale_after(lambda x: helper(x) + 1, lambda: hw.__iadd__(1))

    deep = M3 = type("M3", (), {})
    top = M3()
    top.a = M3()
    top.a.b = M3()
    top.a.b.c = [M3()]
    top.a.b.c[0].W = np.ones(3)
    del deep
    _stale_after(lambda x: x * top.a.b.c[0].W, lambda: top.a.b.c[0].W.__iadd__(1))


def test_layouts_and_byte_orders_of_captured_arrays():
    class M:
        pass
    m = M()
    m.W = np.arange(12.0).reshape(4, 3).T        # F-ordered: its views are followed too
    m.be = np.arange(3.0).astype(">f8")
    _stale_after(lambda x: m.W[:, 1] * x + m.W.T[2, :3], lambda: m.W.__iadd__(1))
    _stale_after(lambda x: x * m.be, lambda: m.be.__iadd__(1))


def test_a_global_tuple_of_arrays_rebound_is_read_again():
    g = {"np": np, "PARAMS": (np.ones(3), np.full(3, 2.0))}
    exec("def f(x):\n    return x * PARAMS[0] + PARAMS[1]\n", g)
    c = compiled(g["f"])
    np.testing.assert_array_equal(c(X), g["f"](X))
    g["PARAMS"] = tuple(p - 0.5 for p in g["PARAMS"])   # crashed comparing the tuples
    np.testing.assert_array_equal(c(X), g["f"](X))
    assert c.stats.traces == 1


def test_a_global_dict_rebuilt_each_step_is_read_without_tracing_again():
    # PARAMS = {k: v - lr * g[k] ...}: a new dict of the same keys and shapes each step
    # (it traced at every call); a changed number in it still traces again
    g = {"np": np, "PARAMS": {"w": np.ones(3), "b": np.zeros(3), "scale": 2.0}}
    exec("def f(x):\n    return (x * PARAMS['w'] + PARAMS['b']) * PARAMS['scale']\n", g)
    c = compiled(g["f"])
    for step in range(4):
        np.testing.assert_allclose(c(X), g["f"](X))
        g["PARAMS"] = {k: (v - 0.1 if isinstance(v, np.ndarray) else v)
                       for k, v in g["PARAMS"].items()}
    assert c.stats.traces == 1
    g["PARAMS"] = dict(g["PARAMS"], scale=3.0)
    np.testing.assert_allclose(c(X), g["f"](X))
    assert c.stats.traces == 2


def test_alternating_shapes_and_flags_keep_one_trace_each():
    """A captured array alternating between two shapes, and a global flag toggled between
    calls, trace once per combination (CompiledFunction.max_variants), not at every call;
    past max_variants the least recently used variant is traced again, still correct."""
    m = types.SimpleNamespace(w=np.ones(3))

    def f(x):
        return x @ m.w

    c = compiled(f)
    for i in range(8):
        m.w = np.full(3, 2.0) if i % 2 else np.arange(6.0).reshape(3, 2)
        np.testing.assert_array_equal(c(X), f(X))
    assert c.stats.traces == 2
    c.max_variants = 2
    for i in range(9):
        m.w = [np.full(3, 2.0), np.arange(6.0).reshape(3, 2), np.ones((3, 4))][i % 3]
        np.testing.assert_array_equal(c(X), f(X))
    assert len(c._variants) == 1 and len(next(iter(c._variants.values()))) == 2
    assert len(c._traces) == 2


SWITCH = True


def test_a_global_flag_toggled_between_calls_traces_once_per_value():
    global SWITCH

    def f(x):
        return x * 2 if SWITCH else x - 1

    c = compiled(f)
    try:
        for i in range(6):
            SWITCH = i % 2 == 0
            np.testing.assert_array_equal(c(X), f(X))
    finally:
        SWITCH = True
    assert c.stats.traces == 2


def test_a_traced_value_stored_in_a_reached_object_is_refused_and_taken_back_out():
    """``self.w = self.w - g`` (or an append to a list it holds, a new attribute, a
    nonlocal rebound) while tracing: a clear error, and the object keeps what it held (a
    stored tracer would have replaced the user's array with a dead stand-in)."""
    class Model:
        def __init__(self):
            self.w = np.ones(3)
            self.hist = []

        def step(self, g):
            self.w = self.w - g
            return self.w.sum()

        def log(self, g):
            self.hist.append(g * 2)
            self.extra = g + 1
            return g

    m = Model()
    for method, where in ((m.step, "self.w"), (m.log, "self.")):
        with pytest.raises(tracearray.UnsupportedOperationError, match=re.escape(where)):
            compiled(method)(np.full(3, 0.5))
        np.testing.assert_array_equal(m.w, np.ones(3))
        assert m.hist == [] and not hasattr(m, "extra")
    assert m.step(np.full(3, 0.5)) == 1.5   # the object still works with NumPy

    def outer():
        w = np.ones(3)

        def inner(g):
            nonlocal w
            w = w - g
            return w
        return inner, lambda: w
    inner, current = outer()
    with pytest.raises(tracearray.UnsupportedOperationError, match="'w' of the enclosing"):
        compiled(inner)(np.ones(3))
    np.testing.assert_array_equal(current(), np.ones(3))
    with pytest.warns(RuntimeWarning, match="running it with NumPy"):
        out = tracearray.compile(m.step, device="cpu", fallback="numpy")(np.full(3, 0.5))
    assert out == 0.0 and np.array_equal(m.w, np.zeros(3))   # (w was 0.5 after NumPy's step)


HISTORY: list = []
PAIR = None


def test_traced_values_stored_deep_or_in_globals_are_refused_and_every_change_undone():
    """A traced value inside a tuple or dict stored in the object, three attributes down, in
    a global list, or as a global tuple or complex value: refused, and every change the
    refused trace made to that state undone (a counter it bumped too), so that
    fallback='numpy' runs NumPy's side effects exactly once."""
    global PAIR

    class Deep:
        pass

    class Model:
        def __init__(self):
            self.w = np.ones(3)
            self.hist = []
            self.steps = 0
            self.inner = Deep()
            self.inner.deep = Deep()
            self.inner.deep.z = np.zeros(3)

        def pair(self, x):
            self.steps += 1
            self.hist.append((x, x * self.w))
            return x

        def deep(self, x):
            self.inner.deep.z = x * 2
            return x

    def to_globals(x):
        global PAIR
        HISTORY.append(x * 2)
        PAIR = (x, x * 1j)
        return x

    m = Model()
    for fn in (m.pair, m.deep, to_globals):
        with pytest.raises(tracearray.UnsupportedOperationError, match="stores a traced"):
            compiled(fn)(X)
    assert m.steps == 0 and m.hist == [] and not m.inner.deep.z.any()
    assert HISTORY == [] and PAIR is None
    with pytest.warns(RuntimeWarning, match="running it with NumPy"):
        tracearray.compile(m.pair, device="cpu", fallback="numpy")(X)
    assert m.steps == 1 and len(m.hist) == 1 and type(m.hist[0][1]) is np.ndarray


def test_a_written_argument_sharing_memory_with_a_captured_array_is_an_input_error():
    class Acc:
        def __init__(self):
            self.buf = np.zeros(3)

        def update(self, buf, x):
            buf += x
            return self.buf * x

    a = Acc()
    with pytest.raises(tracearray.InputError, match="share memory"):
        compiled(a.update)(a.buf, X)
    np.testing.assert_array_equal(compiled(a.update)(np.zeros(3), X), np.zeros(3))


def test_a_result_computed_from_a_captured_array_alone_beside_an_argument_update():
    c = np.arange(3.0)

    def step(buf, x):
        buf += x
        return c * 2

    buf = np.zeros(3)
    np.testing.assert_array_equal(compiled(step)(buf, np.ones(3)), c * 2)
    np.testing.assert_array_equal(buf, np.ones(3))


def test_a_number_then_an_array_again_on_a_captured_path_uses_the_arrays_trace():
    """self.w an array, then a number (a constant of its trace), then an array again: the
    number's trace, the most recent, must not answer for the array (it has no guard on
    self.w); the array's trace does (its guards hold again)."""
    m = types.SimpleNamespace(w=np.ones(3))

    def f(x):
        return x * m.w

    c = compiled(f)
    for w in (np.ones(3), 5.0, np.full(3, 2.0), 5.0, np.arange(3.0)):
        m.w = w
        for _ in range(2):   # (the second call: the fast path)
            np.testing.assert_array_equal(c(X), f(X))
    assert c.stats.traces == 2


def _kw_shift(a, *, offset=np.zeros(3)):
    return a + offset


def _kw_scale(a, *, k=1.0):
    return a * k


class _DefaultLayer:
    def act(self, a, w=np.ones(3)):
        return a * w

    def fwd(self, a):
        return self.act(a)


def test_keyword_defaults_of_helpers_and_defaults_of_methods_are_read_at_each_call():
    """A helper's keyword-only defaults (an array changed in place, a number rebound) and
    the defaults of a method called through self are read at every call, as a helper's
    positional defaults are (they were frozen at the first trace: stale results)."""
    saved = (_kw_shift.__kwdefaults__["offset"].copy(), dict(_kw_scale.__kwdefaults__),
             _DefaultLayer.act.__defaults__[0].copy())
    try:
        def plain(a):
            return _kw_shift(a) * _kw_scale(a)

        f = tracearray.compile(plain)
        layer = _DefaultLayer()
        g = tracearray.compile(layer.fwd)
        x = np.ones(3)
        np.testing.assert_array_equal(f(x), plain(x))
        np.testing.assert_array_equal(g(x), layer.fwd(x))
        _kw_shift.__kwdefaults__["offset"][:] = 5.0
        _kw_scale.__kwdefaults__["k"] = 3.0
        _DefaultLayer.act.__defaults__[0][:] = 7.0
        np.testing.assert_array_equal(f(x), plain(x))
        np.testing.assert_array_equal(g(x), layer.fwd(x))
        _kw_scale.__kwdefaults__["k"] = 2.0
        np.testing.assert_array_equal(f(x), plain(x))
    finally:
        _kw_shift.__kwdefaults__["offset"][:] = saved[0]
        _kw_scale.__kwdefaults__.update(saved[1])
        _DefaultLayer.act.__defaults__[0][:] = saved[2]


class _BaseWithDefaults:
    def act(self, x, w=np.ones(3)):
        return x * w


class _ObjWithDefaults(_BaseWithDefaults):
    @staticmethod
    def sm(x, w=np.ones(3)):
        return x * w

    @classmethod
    def cm(cls, x, w=np.ones(3)):
        return x * w

    def __call__(self, x):
        return self.act(x) + self.sm(x) + self.cm(x)


def _number_beside_array(x, w=np.ones(3), s=2.0, *, t=np.ones(3), u=1.0):
    return x * w * t + s + u


def test_defaults_of_inherited_static_and_class_methods_and_numbers_beside_arrays():
    """Array defaults of inherited methods, static methods and class methods called through
    self, and number defaults beside array defaults (positional and keyword-only), are read
    at every call (they were frozen at the first trace)."""
    arrays = (_BaseWithDefaults.act.__defaults__[0], _ObjWithDefaults.sm.__defaults__[0],
              _ObjWithDefaults.cm.__func__.__defaults__[0])
    saved = ([a.copy() for a in arrays], _number_beside_array.__defaults__,
             dict(_number_beside_array.__kwdefaults__))
    try:
        obj = _ObjWithDefaults()
        f = tracearray.compile(obj)
        g = tracearray.compile(lambda x: _number_beside_array(x))
        x = np.arange(3.0)
        np.testing.assert_array_equal(f(x), obj(x))
        np.testing.assert_array_equal(g(x), _number_beside_array(x))
        for a, v in zip(arrays, (3.0, 5.0, 2.0)):
            a[:] = v
        _number_beside_array.__defaults__ = (_number_beside_array.__defaults__[0], 10.0)
        _number_beside_array.__kwdefaults__["u"] = 7.0
        np.testing.assert_array_equal(f(x), obj(x))
        np.testing.assert_array_equal(g(x), _number_beside_array(x))
    finally:
        for a, v in zip(arrays, saved[0]):
            a[:] = v
        _number_beside_array.__defaults__ = saved[1]
        _number_beside_array.__kwdefaults__.update(saved[2])


def test_a_callable_objects_attributes_are_not_the_compiled_functions():
    """A compiled callable object whose attributes are named as the compiled function's
    (self.device = 'cuda', self.fn, self.stats: common in model classes) keeps its own:
    they were copied over the compiled function's (a GPU refusal, an AttributeError, or a
    call of the wrong function returning uninitialised memory)."""
    class Model:
        def __init__(self):
            self.device, self.fn, self.stats = "cuda", len, {}

        def __call__(self, x):
            return x + 1

    f = tracearray.compile(Model())
    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x), x + 1)
    np.testing.assert_array_equal(f(x), x + 1)
    assert f.device != "cuda" and f.stats.calls == 2

    def tagged(x):
        return x * 2
    tagged.label = "double"
    assert tracearray.compile(tagged).label == "double"   # a function's own attributes


def _memo_of_data(x, _c={}):
    n = x.shape[0]
    if n not in _c:
        _c[n] = x * 2
    return _c[n]


def _memo_of_constants(n, _m={}):
    if n not in _m:
        _m[n] = np.eye(n)
    return _m[n]


def _closure_memo():
    memo = {}

    def h(x):
        if "k" not in memo:
            memo["k"] = x * 3
        return memo["k"]
    return h


_closure_memo_helper = _closure_memo()


def test_a_helpers_memo_of_data_is_refused_and_of_constants_kept():
    """A helper that memoises a value of the data in its mutable default or its closure
    (NumPy then returns the first call's value at every call; the compiled function
    recomputed it) is refused as a store into a global is, and its memo undone; a memo of
    constants (np.eye(n) by n) may stay, later traces reading the constant."""
    _memo_of_data.__defaults__[0].clear()
    for fn, where in ((lambda x: _memo_of_data(x) + 1, "default 0 of _memo_of_data"),
                      (lambda x: _closure_memo_helper(x) + 1, "variable 'memo'")):
        with pytest.raises(tracearray.UnsupportedOperationError, match=where):
            tracearray.compile(fn)(np.ones(3))
    assert _memo_of_data.__defaults__[0] == {}          # undone
    f = tracearray.compile(lambda a: a @ _memo_of_constants(a.shape[0]))
    a = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(f(a), a)
    np.testing.assert_array_equal(f(a.astype(np.float32)), a)


def _inner_memo(x, _c={}):
    if "k" not in _c:
        _c["k"] = x.sum()
    return _c["k"]


def _helper_of_memo(x):
    return _inner_memo(x) * 2


def _partial_memo_target(x, scale, _c={}):
    if "k" not in _c:
        _c["k"] = x.sum() * scale
    return _c["k"]


_PARTIAL_MEMO = __import__("functools").partial(_partial_memo_target, scale=3)


class _MemoOwner:
    def get(self, x, _c={}):
        if "k" not in _c:
            _c["k"] = x.sum()
        return _c["k"]


_MEMO_OWNER = _MemoOwner()


def test_memos_of_data_reached_through_helpers_partials_methods_and_lambdas_are_refused():
    """A memo of the data in a helper's default reached through another helper, a partial,
    a method of a global object, a lambda inside the function or a helper the function
    closes over: refused and undone (each kept the first trace's value, silently)."""
    def via(x):
        return _helper_of_memo(x) + x

    def partial(x):
        return _PARTIAL_MEMO(x) + x

    def method(x):
        return _MEMO_OWNER.get(x) + x

    def lam(x):
        g = lambda y: _inner_memo(y)   # noqa: E731
        return g(x) + x

    def factory():
        def h(x, _c={}):
            if "k" not in _c:
                _c["k"] = x.sum()
            return _c["k"]

        def f(x):
            return h(x) + x
        return f, h

    closed, h = factory()
    memos = (_inner_memo.__defaults__[0], _partial_memo_target.__defaults__[0],
             _MemoOwner.get.__defaults__[0], h.__defaults__[0])
    for fn in (via, partial, method, lam, closed):
        with pytest.raises(tracearray.UnsupportedOperationError, match="stores a traced value"):
            tracearray.compile(fn)(np.array([1.0, 2.0, 3.0]))
        assert all(m == {} for m in memos)       # undone
