"""Conventions of the ecosystem: static arguments checked against the signature, methods,
``repr``, ``Array.__array__``'s ``copy=``/``dtype=``, ``tracearray.testing`` without
Hypothesis, and ``check()`` under the user's Hypothesis settings."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

import tracearray
import tracearray.testing as tt
from tracearray.errors import InputError

ROOT = Path(__file__).resolve().parent.parent


class Config:
    """A plain object: compares by identity."""

    def __init__(self, scale: float) -> None:
        self.scale = scale


# ------------------------------------------------------------------ static arguments

def scale_by(x, cfg, *, times=1):
    return x * cfg.scale * times


def test_static_argnames_and_argnums_are_mapped_to_each_other() -> None:
    x = np.arange(3.0)
    cfg = Config(2.0)
    by_name = tracearray.compile(scale_by, static_argnames="cfg", device="cpu")
    assert by_name.static_argnums == {1}
    np.testing.assert_array_equal(by_name(x, cfg), x * 2)        # static when positional
    by_num = tracearray.compile(scale_by, static_argnums=1, device="cpu")
    assert by_num.static_argnames == {"cfg"}
    np.testing.assert_array_equal(by_num(x, cfg=cfg), x * 2)     # static when by keyword
    np.testing.assert_array_equal(tracearray.compile(scale_by, static_argnums=-1,
                                                     device="cpu")(x, cfg), x * 2)


@pytest.mark.parametrize("options, message", [
    (dict(static_argnames="cfgg"), "static_argnames 'cfgg' is not one of its parameters"),
    (dict(static_argnums=2), "static_argnums 2 is out of range: it takes 2 positional"),
    (dict(static_argnums=-3), "static_argnums -3 is out of range"),
])
def test_unknown_static_arguments_are_refused_when_compiling(options, message) -> None:
    with pytest.raises(ValueError, match=message) as info:
        tracearray.compile(scale_by, **options)
    assert "tracearray.compile(scale_by)" in str(info.value)
    assert "(its parameters: x, cfg, times)" in str(info.value)
    assert "test_conventions.py" in str(info.value)   # the user's line


def test_static_argument_edge_cases() -> None:
    def positional_only(x, n, /):
        return x * n

    with pytest.raises(ValueError, match="names a positional-only parameter.*static_argnums=1"):
        tracearray.compile(positional_only, static_argnames="n")
    with pytest.raises(TypeError, match="static_argnums must be ints, got '1'"):
        tracearray.compile(scale_by, static_argnums=["1"])
    with pytest.raises(TypeError, match="static_argnames must be strs"):
        tracearray.compile(scale_by, static_argnames=[1])

    def anything(x, *rest, **options):
        return x

    f = tracearray.compile(anything, static_argnums=5, static_argnames="mode")
    assert f.static_argnums == {5} and f.static_argnames == {"mode"}
    assert tracearray.compile(scale_by, static_argnames="times").static_argnums == frozenset()


def test_identity_compared_objects_are_refused_unless_static() -> None:
    f = tracearray.compile(scale_by, device="cpu")
    with pytest.raises(InputError, match="argument 'cfg' is a Config object") as info:
        f(np.ones(2), Config(2.0))
    assert "dataclass" in str(info.value) and "static_argnums" in str(info.value)
    # containers are looked into
    g = tracearray.compile(lambda x, opts: x * opts["c"].scale, device="cpu")
    with pytest.raises(InputError, match="argument 'opts' is a Config object"):
        g(np.ones(2), {"c": Config(1.0)})
    # functions, classes, dtypes and ufuncs are fine as constants
    h = tracearray.compile(lambda x, op, dt: op(x, x).astype(dt), device="cpu")
    np.testing.assert_array_equal(h(np.ones(2), np.add, np.float32), np.full(2, 2, np.float32))


# ------------------------------------------------------------------ methods

@dataclasses.dataclass
class Layer:
    weight: np.ndarray
    bias: float

    @tracearray.compile(device="cpu")
    def forward(self, x):
        return x * self.weight + self.bias

    @staticmethod
    @tracearray.compile(device="cpu")
    def twice(x):
        return x * 2

    @tracearray.compile(device="cpu")
    @staticmethod
    def thrice(x):
        return x * 3

    @classmethod
    @tracearray.compile(device="cpu")
    def ones_like(cls, x):
        return np.ones_like(x) * len(cls.__name__)

    @tracearray.compile(device="cpu")
    @classmethod
    def zeros_like(cls, x):
        return np.zeros_like(x) + len(cls.__name__)


class Plain:
    def __init__(self) -> None:
        self.k = 2.0

    @tracearray.compile(device="cpu")
    def scaled(self, x):
        return x * self.k

    @tracearray.compile(device="cpu", static_argnames="self")
    def scaled_static(self, x):
        return x * self.k


def test_methods_of_every_kind() -> None:
    x = np.arange(4.0)
    a, b = Layer(np.full(4, 2.0), 1.0), Layer(np.full(4, 3.0), 1.0)
    np.testing.assert_array_equal(a.forward(x), x * 2 + 1)
    np.testing.assert_array_equal(b.forward(x), x * 3 + 1)   # the instance's arrays are read
    a.weight = np.full(4, 5.0)
    np.testing.assert_array_equal(a.forward(x), x * 5 + 1)
    assert Layer.forward.stats.traces == 1                  # one cache for every instance
    a.bias = 4.0                                            # a scalar field: a static value
    np.testing.assert_array_equal(a.forward(x), x * 5 + 4)
    assert isinstance(Layer.__dict__["forward"], tracearray.CompiledFunction)
    assert Layer.forward is Layer.__dict__["forward"]
    np.testing.assert_array_equal(Layer.forward(a, x), a.forward(x))
    np.testing.assert_array_equal(a.twice(x), x * 2)
    np.testing.assert_array_equal(Layer.thrice(x), x * 3)
    np.testing.assert_array_equal(a.thrice(x), x * 3)
    np.testing.assert_array_equal(a.ones_like(x), np.full(4, 5.0))
    np.testing.assert_array_equal(Layer.zeros_like(x), np.full(4, 5.0))
    assert isinstance(Layer.__dict__["thrice"], staticmethod)
    assert isinstance(Layer.__dict__["zeros_like"], classmethod)


def test_a_plain_self_is_refused_unless_marked_static() -> None:
    p = Plain()
    with pytest.raises(InputError, match="argument 'self' is a Plain object"):
        p.scaled(np.ones(2))
    np.testing.assert_array_equal(p.scaled_static(np.ones(2)), np.full(2, 2.0))


def test_repr_names_the_function() -> None:
    assert repr(Layer.forward) == \
        "<tracearray.CompiledFunction Layer.forward (device='cpu')>"
    layer = Layer(np.ones(1), 0.0)
    assert repr(layer.forward).startswith("<bound method Layer.forward of Layer(")
    assert Layer.forward.__name__ == "forward" and Layer.forward.__doc__ is None


# ------------------------------------------------------------------ Array.__array__

def test_device_array_conversion_honours_copy_and_dtype(emulated_gpu) -> None:
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    arr = tracearray.Array.from_numpy(host)
    with pytest.raises(ValueError, match="in GPU memory.*copy=False"):
        np.asarray(arr, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        np.array(arr, copy=False)
    as64 = np.asarray(arr, dtype=np.float64)
    assert as64.dtype == np.float64
    np.testing.assert_array_equal(as64, host)
    copied = np.array(arr, copy=True)
    copied[0, 0] = 99                       # a copy of its own
    np.testing.assert_array_equal(np.asarray(arr), host)


# ------------------------------------------------------------------ tracearray.testing

def test_testing_without_hypothesis_names_the_extra() -> None:
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "try:\n    import tracearray.testing\n"
            "except ImportError as e:\n    print(type(e).__name__, e.name, '|', e)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout
    assert out.strip() == ("ImportError hypothesis | tracearray.testing needs Hypothesis, "
                           "which is not installed: pip install 'tracearray[test]' (or: pip "
                           "install hypothesis)")


def test_check_fails_when_numpy_raises_on_every_example() -> None:
    def needs_square(a):
        return np.linalg.inv(a) if a.ndim == 2 else a.reshape(-1, 7)   # always raises

    with pytest.raises(tt.CheckFailure, match=r"NumPy raised on every one of the \d+ "
                                              r"examples drawn \(the first: ValueError"):
        tt.check(needs_square, tt.arrays(np.float64, (3,)), max_examples=5, device="cpu")

    def sometimes(a):   # some examples compared: passes
        if a.shape[0] == 1:
            raise ValueError("one row is refused")
        return a * 2

    tt.check(sometimes, tt.arrays(np.float64, st.tuples(st.integers(1, 3))),
             max_examples=20, derandomize=True, device="cpu")


def test_check_follows_the_users_settings_and_database() -> None:
    calls = []

    def counted(a):
        calls.append(1)
        return a + 1

    tt.check(counted, tt.arrays(np.float64, (2,)), device="cpu",
             settings=hypothesis.settings(max_examples=3, database=None))
    examples_at_3 = len(calls)
    calls.clear()
    tt.check(counted, tt.arrays(np.float64, (2,)), device="cpu", max_examples=9,
             settings=hypothesis.settings(max_examples=3, database=None))
    assert examples_at_3 < len(calls)       # max_examples= overrides the settings
    hypothesis.settings.register_profile("tracearray-test-3", max_examples=3, database=None)
    hypothesis.settings.load_profile("tracearray-test-3")
    try:
        calls.clear()
        tt.check(counted, tt.arrays(np.float64, (2,)), device="cpu")
        assert len(calls) == examples_at_3  # the loaded profile applies
    finally:   # conftest.py's choice of profile
        hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or
                                         ("ci" if os.environ.get("CI") else "dev"))

    db = InMemoryExampleDatabase()
    with pytest.raises(tt.CheckFailure):
        tt.check(lambda a: a.sum() + (a > 0.5).sum(), tt.arrays(np.float64, (4,)),
                 reference=lambda a: a.sum(), device="cpu", stream=open(os.devnull, "w"),
                 settings=hypothesis.settings(database=db, max_examples=50))
    assert db.data, "the failing example was not saved to the user's database"


def test_matmul_precision_option() -> None:
    """``matmul_precision``: "float32" (NumPy's rounding) by default, "tf32" an opt-in for
    the GPU's cuBLAS products (tests/test_gpu_cuda.py checks it there); anything else is
    refused; on the CPU products round as NumPy's whichever is chosen."""
    with pytest.raises(ValueError, match="matmul_precision must be one of .*'float32', 'tf32'"):
        tracearray.compile(scale_by, matmul_precision="tensorfloat32")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((33, 70)).astype(np.float32)
    b = rng.standard_normal((70, 9)).astype(np.float32)
    mm = lambda x, y: x @ y   # noqa: E731
    assert tracearray.compile(mm).matmul_precision == "float32"
    default = tracearray.compile(mm, device="cpu")(a, b)
    tf32 = tracearray.compile(mm, device="cpu", matmul_precision="tf32")(a, b)
    np.testing.assert_array_equal(tf32, default)
    np.testing.assert_allclose(default, a @ b, rtol=1e-5, atol=1e-5)
