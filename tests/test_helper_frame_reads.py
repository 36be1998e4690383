"""Numbers read by the user's helper code through objects it is given (``self.eps`` in a
method the function calls, ``cfg.k`` in a helper handed ``cfg``, layers of a list looped
over) are checked at every call, and the objects themselves by identity: a changed value
or a replaced object traces again, as NumPy would compute with the new one
(trace/frames.py)."""
from __future__ import annotations

import types
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import tracearray
from tracearray.errors import UnsupportedOperationError
from tracearray.trace import frames

X = np.arange(6.0).reshape(2, 3) - 2.0


def same(f, *args) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # (RetraceWarning: values keep changing here)
        got = f(*args)
    np.testing.assert_array_equal(got, f.fn(*args))


class Norm:
    def __init__(self, eps: float) -> None:
        self.eps = eps

    def apply(self, x):
        return x / (np.abs(x).sum() + self.eps)


NORM = Norm(1.0)


def test_method_of_a_global_object() -> None:
    @tracearray.compile
    def f(x):
        return NORM.apply(x)

    global NORM
    old = NORM
    try:
        same(f, X)
        NORM.eps = 100.0
        same(f, X)
        NORM = Norm(-3.0)   # another object of the same class
        same(f, X)
    finally:
        NORM = old


class Dense:
    def __init__(self, scale: float, act: bool = True) -> None:
        self.scale, self.act = scale, act

    def __call__(self, x):
        y = x * self.scale
        return np.maximum(y, 0.5) if self.act else y


class Sequential:
    def __init__(self, layers: list) -> None:
        self.layers = layers

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_layers_of_a_compiled_method() -> None:
    model = Sequential([Dense(1.0), Dense(2.0)])
    f = tracearray.compile(model.forward)
    same(f, X)
    model.layers[1].act = False          # a flag read by a layer's __call__
    same(f, X)
    model.layers[0].scale = -1.5          # a number read by it
    same(f, X)
    model.layers.append(Dense(3.0))       # one more layer in the list looped over
    same(f, X)
    model.layers[0] = Dense(4.0, False)   # another object in its place
    same(f, X)
    model.layers = [Dense(5.0)]           # another list
    same(f, X)
    same(f, X)                            # (and the fast path after it)


@dataclass
class Config:
    k: float = 2.0
    mode: str = "scale"


CFG = Config()


def scale_or_shift(x, cfg):
    return x * cfg.k if cfg.mode == "scale" else x - cfg.k


def test_object_handed_to_a_helper() -> None:
    @tracearray.compile
    def f(x):
        return scale_or_shift(x, CFG)

    global CFG
    old = CFG
    try:
        same(f, X)
        CFG.mode = "shift"   # a string read by the helper's control flow
        same(f, X)
        CFG.k = 9.0
        same(f, X)
        CFG = Config(k=4.0)
        same(f, X)
    finally:
        CFG = old


class Model:
    def __init__(self) -> None:
        self.eps = 1.0
        self.opts = {"shift": 0.5}

    def eps2(self):
        return self.eps * 2     # a method that only computes a Python number

    def run(self, x):
        return x + self.eps2() + self._shift(self.opts)

    @staticmethod
    def _shift(opts):
        return opts["shift"]


def test_numbers_computed_by_helper_methods() -> None:
    m = Model()
    f = tracearray.compile(m.run)
    same(f, X)
    m.eps = 3.0
    same(f, X)
    m.opts["shift"] = -7.0   # an item of a dict handed to a static method
    same(f, X)
    calls = f.cache_info().traces
    same(f, X)
    assert f.cache_info().traces == calls   # nothing changed: no new trace


def test_closure_object_and_lambda_argument() -> None:
    ns = types.SimpleNamespace(k=2.0)

    @tracearray.compile
    def f(x):
        get = lambda o: o.k   # noqa: E731 -- a lambda handed the namespace at run time
        return x * get(ns)

    same(f, X)
    ns.k = -1.0
    same(f, X)


def test_object_made_by_the_function_needs_no_guard_of_its_own() -> None:
    """An object the traced code makes and drops: its guards' root has gone, which holds
    (what it was made from is read where it is made)."""
    @tracearray.compile
    def f(x):
        return Norm(2.0).apply(x)

    same(f, X)
    traces = f.cache_info().traces
    for _ in range(3):
        same(f, X)
    assert f.cache_info().traces == traces


class Counter:
    def __init__(self) -> None:
        self.count = np.zeros(1)

    def bump(self, x):
        self.count += 1          # NumPy's own update, with no traced operand
        return x + self.count

    def run(self, x):
        return self.bump(x)


class Noisy:
    def noise(self, x, source):
        return x + source.rng.normal(size=x.shape)


SOURCE = types.SimpleNamespace(rng=np.random.default_rng(0))


def test_updates_and_generators_reached_by_helpers_are_refused() -> None:
    c = Counter()
    with pytest.raises(UnsupportedOperationError, match=r"self\.count \(in Counter\.bump\)"):
        tracearray.compile(c.run)(X)
    assert c.count[0] == 0 and c.count.flags.writeable

    @tracearray.compile
    def f(x):
        return Noisy().noise(x, SOURCE)

    with pytest.raises(UnsupportedOperationError, match=r"source\.rng \(in Noisy\.noise\)"):
        f(X)


def test_no_profile_hook_for_numpy_only_code() -> None:
    """The hook costs every Python call of a trace: code that only calls NumPy and helpers
    named as globals (read before the trace) runs without it; the profile function set
    before a trace is set again after it."""
    from tracearray.trace import captured, reads

    def plain(x):
        return np.tanh(x) * 2.0 + scale_or_shift_plain(x)

    roots = captured.Roots(plain, (), {})
    assert not frames.runs_user_code(plain, roots, (X,), {}, reads._helpers(plain))
    roots = captured.Roots(scale_or_shift, (), {})
    assert frames.runs_user_code(scale_or_shift, roots, (X, CFG), {}, [])
    seen = []
    prev = lambda frame, event, arg: seen.append(event)   # noqa: E731
    import sys
    sys.setprofile(prev)
    try:
        same(tracearray.compile(Model().run), X)
        assert sys.getprofile() is prev
    finally:
        sys.setprofile(None)


def scale_or_shift_plain(x):
    return x * 0.5


def test_layers_rebuilt_with_equal_values_trace_once() -> None:
    """Layers given to their own __call__ and found again by the walk through
    ``self.layers[i]``: a new list of equal layers each step traces nothing new; a changed
    one does."""
    model = Sequential([Dense(1.0), Dense(2.0)])
    f = tracearray.compile(model.forward)
    for _ in range(4):
        model.layers = [Dense(1.0), Dense(2.0)]
        same(f, X)
    assert f.cache_info().traces == 1
    model.layers[1].scale = 5.0
    same(f, X)


class _Scaled:
    def __init__(self) -> None:
        self.k = 2.0

    def __call__(self, x):
        return x * self.k


def test_under_cprofile_and_a_python_profile_function():
    """The trace's profile hook pauses cProfile (whose hook Python cannot call or set again:
    the first call raised TypeError) and runs beside a Python profile function; both are
    in place again after the call, and the helper's state is still checked."""
    import cProfile
    import sys

    layers = [_Scaled(), _Scaled()]

    def fwd(x):
        for layer in layers:
            x = layer(x)
        return x

    x = np.ones(3)
    f = tracearray.compile(fwd)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        got = f(x)
        layers[1].k = 3.0
        got2 = f(x)
    finally:
        profiler.disable()
    np.testing.assert_array_equal(got, 4 * x)
    np.testing.assert_array_equal(got2, 6 * x)
    import pstats
    assert pstats.Stats(profiler).total_calls > 0   # (it kept counting the user's calls)

    events: list[str] = []
    g = tracearray.compile(fwd)
    sys.setprofile(lambda frame, event, arg: events.append(event))
    try:
        got = g(x)
        assert sys.getprofile() is not None
    finally:
        sys.setprofile(None)
    np.testing.assert_array_equal(got, 6 * x)
    assert "call" in events


class _Counter:
    def __init__(self) -> None:
        self.t = 0

    def step(self, x):
        self.t += 1
        return x * self.t


def test_a_number_a_helper_changes_is_guarded_by_the_value_the_call_found():
    """A method the function calls that changes a number it reads (self.t += 1) changes
    it once per trace: guarded by the value the call found, the next call finds another,
    traces again and changes it again, as NumPy's run of the code does at every call (a
    probe found the first result repeated)."""
    c = _Counter()
    f = tracearray.compile(lambda x: c.step(x), device="cpu")
    for i in range(1, 4):
        np.testing.assert_array_equal(f(np.ones(2)), np.full(2, float(i)))
        assert c.t == i


def test_state_changed_by_helpers_reached_through_a_module_or_a_class_attribute(tmp_path,
                                                                                monkeypatch):
    """A helper called as module.h(x) that updates its module's array in place
    (COUNT[0] += 1) is refused as the same helper called by name is; a method that sets an
    instance attribute over a class attribute (self.t += 1 with t = 0 on the class) traces
    again at each call as NumPy's run changes it (a probe found both run once)."""
    import importlib
    import sys
    (tmp_path / "counting_helpers.py").write_text(
        "import numpy as np\n"
        "COUNT = np.zeros(1)\n"
        "def h_count(x):\n"
        "    COUNT[0] += 1\n"
        "    return x\n"
        "class State:\n"
        "    t = 0\n"
        "    def bump(self, x):\n"
        "        self.t += 1\n"
        "        return x * self.t\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    counting = importlib.import_module("counting_helpers")
    try:
        f = tracearray.compile(lambda x: counting.h_count(x), device="cpu")
        with pytest.raises(UnsupportedOperationError, match="'COUNT'"):
            f(np.arange(3.0))
        assert counting.COUNT.flags.writeable
        st = counting.State()
        g = tracearray.compile(lambda x: st.bump(x), device="cpu")
        for i in range(1, 4):
            np.testing.assert_array_equal(g(np.arange(3.0)), np.arange(3.0) * i)
        assert st.t == 3
    finally:
        sys.modules.pop("counting_helpers", None)
