"""Numbers, flags and strings read through attributes, constant items and closure variables
(``cfg.dt``, ``self.lr``, ``PARAMS["alpha"]``, ``nonlocal k``) are checked at every call:
a changed value traces again, as NumPy would compute with it (trace/reads.py)."""
from __future__ import annotations

import collections
import types
import warnings

import numpy as np
import pytest

import tracearray
from tracearray import RetraceWarning
from tracearray.trace import reads

X = np.arange(4.0)


class Holder:
    def __init__(self) -> None:
        self.scale = 2.0
        self.inner = types.SimpleNamespace(shift=1.0, flag=True, name="tanh")


HOLDER = Holder()
PARAMS = {"alpha": 3, "nested": {"beta": 0.5}, "pair": (1, 2)}
NS = types.SimpleNamespace(dt=0.1)


def test_attribute_of_a_global_object() -> None:
    @tracearray.compile
    def f(x):
        return x * HOLDER.scale + HOLDER.inner.shift

    try:
        for scale, shift in [(2.0, 1.0), (2.0, 1.0), (5.0, 1.0), (5.0, -3.0), (2.0, 1.0)]:
            HOLDER.scale, HOLDER.inner.shift = scale, shift
            np.testing.assert_array_equal(f(X), X * scale + shift)
            np.testing.assert_array_equal(f(X), X * scale + shift)   # the fast path
        assert f.stats.traces == 3   # (2.0, 1.0) found again among the trace's variants
    finally:
        HOLDER.scale, HOLDER.inner.shift = 2.0, 1.0


def test_flags_and_strings_choose_the_code() -> None:
    @tracearray.compile
    def f(x):
        y = np.tanh(x) if HOLDER.inner.name == "tanh" else np.sin(x)
        return -y if HOLDER.inner.flag else y

    try:
        for name, flag in [("tanh", True), ("sin", True), ("sin", False), ("tanh", False)]:
            HOLDER.inner.name, HOLDER.inner.flag = name, flag
            y = np.tanh(X) if name == "tanh" else np.sin(X)
            np.testing.assert_allclose(f(X), -y if flag else y)
    finally:
        HOLDER.inner.name, HOLDER.inner.flag = "tanh", True


def test_items_at_constant_keys() -> None:
    @tracearray.compile
    def f(x):
        return x * PARAMS["alpha"] + PARAMS["nested"]["beta"] + PARAMS["pair"][1]

    try:
        np.testing.assert_array_equal(f(X), X * 3 + 0.5 + 2)
        PARAMS["alpha"] = 4
        PARAMS["nested"]["beta"] = -1.0
        np.testing.assert_array_equal(f(X), X * 4 - 1.0 + 2)
        PARAMS["pair"] = (1, 7)
        np.testing.assert_array_equal(f(X), X * 4 - 1.0 + 7)
    finally:
        PARAMS.update(alpha=3, nested={"beta": 0.5}, pair=(1, 2))


def test_int_float_and_bool_are_different_values() -> None:
    # (NEP 50: int8 + 1 is int8, int8 + 1.0 float64)
    @tracearray.compile
    def f(x):
        return x + NS.dt

    x = np.arange(4, dtype=np.int8)
    try:
        for v in (1, 1.0, True, 1):
            NS.dt = v
            got, want = f(x), x + v
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    finally:
        NS.dt = 0.1


def test_bound_method_instance_and_class_attributes() -> None:
    class Opt:
        lr = 0.5

        def __init__(self):
            self.w = np.ones(4)

        def step(self, g):
            return self.w - self.lr * g

    o = Opt()
    step = tracearray.compile(o.step)
    np.testing.assert_array_equal(step(X), 1 - 0.5 * X)
    o.lr = 0.25                    # an instance attribute hides the class's
    np.testing.assert_array_equal(step(X), 1 - 0.25 * X)
    Opt.lr = 0.1                   # hidden: no change
    np.testing.assert_array_equal(step(X), 1 - 0.25 * X)
    del o.lr                       # the class's again
    np.testing.assert_array_equal(step(X), 1 - 0.1 * X)


def test_closure_variable_rebound() -> None:
    def make():
        k = 2

        @tracearray.compile
        def f(x):
            return x * k

        def set_k(v):
            nonlocal k
            k = v
        return f, set_k

    f, set_k = make()
    np.testing.assert_array_equal(f(X), X * 2)
    set_k(5)
    np.testing.assert_array_equal(f(X), X * 5)


def test_attribute_of_a_static_argument() -> None:
    class Cfg:
        def __init__(self):
            self.eps = 1e-3

    @tracearray.compile(static_argnums=0)
    def f(cfg, x):
        return x / (x.sum() + cfg.eps)

    cfg = Cfg()
    np.testing.assert_allclose(f(cfg, X), X / (X.sum() + 1e-3))
    cfg.eps = 10.0
    np.testing.assert_allclose(f(cfg, X), X / (X.sum() + 10.0))


def test_no_user_code_runs_to_check() -> None:
    calls = []

    class WithProperty:
        @property
        def scale(self):
            calls.append(1)
            return 3.0

    obj = WithProperty()
    counts = collections.defaultdict(int, {"a": 2})

    @tracearray.compile
    def f(x):
        return x * obj.scale + counts["a"]

    for _ in range(5):
        np.testing.assert_array_equal(f(X), X * 3.0 + 2)
    assert len(calls) == 1          # the trace's own read; no property call to check it
    assert dict(counts) == {"a": 2}  # (nothing inserted by a check)


def test_library_modules_are_not_checked() -> None:
    def f(x):
        return x * np.pi + HOLDER.scale

    chains = reads.read_chains(f.__code__)
    assert reads.Chain(("global", "np"), (("attr", "pi"),)) in chains
    compiled = tracearray.compile(f)
    compiled(X)
    (trace, _plan, _tiles), = compiled._traces.values()
    texts = [g.text for g in trace.reads]
    assert "HOLDER.scale" in texts and not any("pi" in t for t in texts)


def test_a_value_that_keeps_changing_warns_once() -> None:
    state = types.SimpleNamespace(step=0)

    @tracearray.compile
    def f(x):
        return x + state.step

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            state.step = i
            np.testing.assert_array_equal(f(X), X + i)
    msgs = [w for w in caught if issubclass(w.category, RetraceWarning)]
    assert len(msgs) == 1 and "state.step" in str(msgs[0].message)


def test_a_method_defined_in_the_class_body() -> None:
    class Layer:
        def __init__(self):
            self.slope = 0.1

        @tracearray.compile(static_argnums=0)
        def __call__(self, x):
            return np.where(x > 0, x, self.slope * x)

    layer = Layer()
    x = X - 2
    np.testing.assert_allclose(layer(x), np.where(x > 0, x, 0.1 * x))
    layer.slope = 0.3
    np.testing.assert_allclose(layer(x), np.where(x > 0, x, 0.3 * x))


COUNT = np.zeros(1, np.int64)


def _record():
    COUNT[0] += 1


def test_in_place_updates_of_reached_arrays_by_constants_are_refused():
    # NumPy's own operation (no traced operand) ran once while tracing and was frozen
    # into the trace: a step counter self.t += 1 stayed at its first value
    from tracearray.errors import UnsupportedOperationError

    class Adam:
        def __init__(self):
            self.t = np.zeros(1)

        def step(self, g):
            self.t += 1
            return g / (1 - 0.9 ** self.t)

    def make():
        w = np.array([1.0, 2.0])

        def f(x):
            w[:] = w * 2
            return x + w
        return f, w

    def with_default(x, b=np.array([1.0, 2.0])):
        b += 1
        return x + b

    def calls_helper(x):
        _record()
        return x * 2

    adam = Adam()
    f, w = make()
    for fn, text, arr in [(adam.step, "self.t", adam.t), (f, "w", w),
                          (with_default, "default of b", with_default.__defaults__[0]),
                          (calls_helper, "'COUNT' of _record", COUNT)]:
        before = arr.copy()
        with pytest.raises(UnsupportedOperationError, match=text):
            tracearray.compile(fn)(np.ones(2))
        np.testing.assert_array_equal(arr, before)   # (nothing written while tracing)
        assert arr.flags.writeable                   # (writable again afterwards)


def test_reached_arrays_are_still_read_and_global_arrays_written():
    G = np.zeros(2)
    ns = types.SimpleNamespace(w=np.ones(2))

    def f(x):
        return x * ns.w

    compiled = tracearray.compile(f)
    np.testing.assert_array_equal(compiled(np.arange(2.0)), np.arange(2.0))
    ns.w[:] = 3.0
    np.testing.assert_array_equal(compiled(np.arange(2.0)), 3 * np.arange(2.0))
    assert ns.w.flags.writeable
    del G


MEAN = np.array([1.0, 2.0])
SCALE = 2.0
SETTINGS = types.SimpleNamespace(shift=1.0)


def _normalize(x):
    return (x - MEAN) * SCALE + SETTINGS.shift


def test_globals_read_by_helper_functions():
    # (they were frozen at the first trace: a probe of realistic scripts, 2026-12-07)
    global SCALE
    f = tracearray.compile(lambda x: _normalize(x) * 2)
    x = np.arange(2.0)
    try:
        np.testing.assert_array_equal(f(x), _normalize(x) * 2)
        MEAN[:] = [5.0, 6.0]                      # an array updated in place
        np.testing.assert_array_equal(f(x), _normalize(x) * 2)
        SCALE = 3.0                               # a number rebound
        np.testing.assert_array_equal(f(x), _normalize(x) * 2)
        SETTINGS.shift = -4.0                     # an attribute of a global object
        np.testing.assert_array_equal(f(x), _normalize(x) * 2)
    finally:
        MEAN[:] = [1.0, 2.0]
        SCALE = 2.0
        SETTINGS.shift = 1.0


LAYERS = [1.0, 2.0]
SC = 2.0


@tracearray.compile
def _compiled_helper(x):
    return x * SC


def test_lists_read_whole_compiled_helpers_and_replaced_methods():
    # (a probe of control flow, 2026-12-07: each was frozen at the first trace)
    global SC
    f = tracearray.compile(lambda x: sum(w * x for w in LAYERS))
    x = np.arange(3.0)
    try:
        np.testing.assert_array_equal(f(x), 3.0 * x)
        LAYERS.append(10.0)                       # in place: the same list
        np.testing.assert_array_equal(f(x), 13.0 * x)
        g = tracearray.compile(lambda x: _compiled_helper(x) + 1)
        np.testing.assert_array_equal(g(x), 2.0 * x + 1)
        SC = 5.0
        np.testing.assert_array_equal(g(x), 5.0 * x + 1)
    finally:
        del LAYERS[2:]
        SC = 2.0

    class Op:
        def apply(self, x):
            return x + 1

    op = Op()
    h = tracearray.compile(lambda x: op.apply(x) * 2)
    np.testing.assert_array_equal(h(x), (x + 1) * 2)
    Op.apply = lambda self, x: x + 100          # the class's method replaced
    np.testing.assert_array_equal(h(x), (x + 100) * 2)
    op.apply = lambda x: x - 100               # an instance attribute hides it
    np.testing.assert_array_equal(h(x), (x - 100) * 2)


def test_a_dict_read_at_a_key_is_guarded_at_that_key_only():
    config = {"lr": 0.1, "step": 0}

    @tracearray.compile
    def f(x):
        return x * config["lr"]

    x = np.ones(2)
    for i in range(10):
        config["step"] = i          # an entry the function does not read
        np.testing.assert_array_equal(f(x), 0.1 * x)
    assert f.cache_info().traces == 1
    config["lr"] = 0.5
    np.testing.assert_array_equal(f(x), 0.5 * x)


def test_reached_views_and_their_bases_are_writable_again():
    # (held read-only while traced: a view set writeable before its base raised)
    def make(order):
        z_base = np.arange(4.0)
        a_view = z_base[1:]
        pair = (a_view, z_base) if order else (z_base, a_view)

        def f(x):
            return x + pair[0].sum() + pair[1].sum() + a_view.sum() + z_base.sum()
        return f, z_base, a_view

    for order in (True, False):
        f, base, view = make(order)
        np.testing.assert_array_equal(tracearray.compile(f)(np.ones(2)), f(np.ones(2)))
        assert base.flags.writeable and view.flags.writeable


def test_signed_zero_nan_and_shared_prefixes_of_attribute_reads() -> None:
    # The compiled check (reads.GuardCheck) follows ``cfg.layers[i]`` once for all the
    # attributes read below it, and compares floats by their bits: 0.0 and -0.0 differ
    # (``x * -0.0`` flips signs), NaN still equals NaN (no retrace), 1, 1.0 and True differ.
    cfg = types.SimpleNamespace(layers=[types.SimpleNamespace(w=0.0, b=1.0) for _ in range(3)])

    @tracearray.compile
    def f(x):
        for layer in cfg.layers:
            x = x * layer.w + layer.b
        return x

    def expect() -> np.ndarray:
        y = X.copy()
        for layer in cfg.layers:
            y = y * layer.w + layer.b
        return y

    def check() -> None:
        for _ in range(2):   # (the general path, then the fast path)
            got = f(X)
            np.testing.assert_array_equal(got, expect())
            np.testing.assert_array_equal(np.signbit(got), np.signbit(expect()))

    check()
    cfg.layers[2].w, cfg.layers[2].b = -0.0, -0.0   # 0.0 -> -0.0 (and 1.0 -> -0.0)
    check()
    assert f.stats.traces == 2
    cfg.layers[1].w = float("nan")
    check()
    cfg.layers[1].w = float("nan")   # another NaN object: equal, no new trace
    check()
    assert f.stats.traces == 3
    cfg.layers[0].b = True           # 1.0 -> True: another trace (True is an integer)
    check()
    assert f.stats.traces == 4
    cfg.layers[0].b = 1              # and 1 another again
    check()
    assert f.stats.traces == 5


def test_state_read_is_checked_at_sizes_derived_from_a_template():
    """A size whose graph was re-derived from a size template (no trace) keeps the template
    trace's checks of the state the function reads (they were dropped: after cfg.k changed,
    the derived sizes returned the old value)."""
    cfg = types.SimpleNamespace(k=2.0)

    @tracearray.compile(device="cpu")
    def f(x):
        return x * cfg.k + 1

    sizes = range(10, 210, 10)
    for n in sizes:
        np.testing.assert_array_equal(f(np.ones(n)), np.full(n, 3.0))
    assert f.stats.resizes > 0
    cfg.k = 5.0
    for n in sizes:
        np.testing.assert_array_equal(f(np.ones(n)), np.full(n, 6.0))
