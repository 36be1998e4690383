"""Scatters: ``x[idx] = v`` with traced indices and ``ufunc.at``, against NumPy.

The scatter primitive writes values at positions loaded from data, in NumPy's order along the
index dimensions (``fuse/plan._place_scatter``: the target copied, then a kernel sequential
along the index dimensions and parallel along the others), so a repeated position keeps the
last assignment and accumulates every ``ufunc.at`` contribution in NumPy's order (bit for bit
for floats). Checked on the CPU, assembled by ptxas, under the GPU emulator and (``-m gpu``)
on the GPU: every indexing form (one and several index arrays, separated ones, mixed with
slices and ``None``, 2-d and 0-d index arrays, negative indices), heavy duplication, empty
indices, dtype conversions, arguments updated in place, out-of-range indices.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

import tracearray
from gpu_differential import assemble_kernels
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.testing import assert_matches_numpy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
HAVE_GPU = driver.is_available()

RNG = np.random.default_rng(7)
X = RNG.standard_normal((6, 5))
I = RNG.integers(-6, 6, 12)              # repeated and negative positions along axis 0
J = RNG.integers(-5, 5, 12)              # along axis 1
V = RNG.standard_normal(12)


def _set(x, key, v):
    y = x.copy()
    y[key] = v
    return y


def _at(ufunc, x, key, *v, dtype=None):
    y = x.astype(dtype) if dtype is not None else x.copy()
    ufunc.at(y, key, *v)
    return y


def _inc(x, i, j, v):
    y = x.copy()
    y[i] += v                  # a gather, then a scatter: a repeated row is added to once
    y[:, j] *= 2
    return y


def _heavy(x, i, j, v):
    out = np.zeros(3)
    np.add.at(out, (i * 0 + 1) % 3, np.arange(12.0) * v)   # every value into out[1]
    hist = np.zeros(6, np.int64)
    np.add.at(hist, i, 1)
    return out, hist


def _chained(x, i, j, v):
    y = x.copy()
    y[i, j] = v                # two index arrays
    y[i % 3, 1:] = -1.0        # a row of a computed index, with a slice
    z = np.exp(y)[i] * 2 + 1   # the written value read again, fused
    return y, z


def _zero_d(x, i, j, v):
    y = x.copy()
    y[i[0]] = 5.0              # a traced 0-d index
    y[i[1], j[2]] = v[3]
    return y


SCATTER_PROGRAMS: dict[str, Callable[..., Any]] = {
    "y[i] = v (rows, repeated, negative)": lambda x, i, j, v: _set(x, i, v[:, None]),
    "y[i] = scalar": lambda x, i, j, v: _set(x, i, 2.5),
    "y[:, j] = v": lambda x, i, j, v: _set(x, (slice(None), j), v),
    "y[i, j] = v": lambda x, i, j, v: _set(x, (i, j), v),
    "y[i[:, None], j[:4]] = v (broadcast 2-d)":
        lambda x, i, j, v: _set(x, (i[:, None], j[:4]), v[:4]),
    "y3[i, :, j] = v (separated: B first)":
        lambda x, i, j, v: _set(np.stack([x, x * 2, x * 3], axis=1), (i, slice(None), j),
                                v[:, None]),
    "y[None, i] = v": lambda x, i, j, v: _set(x, (None, i), v[None, :, None]),
    "y[i.reshape(3, 4)] = v": lambda x, i, j, v: _set(x, i.reshape(3, 4), v.reshape(3, 4, 1)),
    "y.ravel()[i] = v (int32 target, cast)":
        lambda x, i, j, v: _set((x * 10).astype(np.int32).ravel(), i + 10, v * 100),
    "y[i] += v, y[:, j] *= 2": _inc,
    "y[i[0]] = s, y[i[1], j[2]] = s (0-d indices)": _zero_d,
    "y[i, j] = v, then read": _chained,
    "empty index": lambda x, i, j, v: _set(x, i[:0], 1.0),
    "np.add.at": lambda x, i, j, v: _at(np.add, x, i, v[:, None]),
    "np.subtract.at (i, :)": lambda x, i, j, v: _at(np.subtract, x, (i, slice(None)), v[:, None]),
    "np.multiply.at (:, j)": lambda x, i, j, v: _at(np.multiply, x, (slice(None), j), v + 2),
    "np.maximum.at (i, j)": lambda x, i, j, v: _at(np.maximum, x, (i, j), v),
    "np.minimum.at (i, j), NaN": lambda x, i, j, v: _at(np.minimum, x, (i, j),
                                                      np.where(v > 1, np.nan, v)),
    "np.negative.at (unary, repeated)": lambda x, i, j, v: _at(np.negative, x, i),
    "np.add.at float32 += float64": lambda x, i, j, v: _at(np.add, x, i, v[:, None] * 1e-3,
                                                         dtype=np.float32),
    "np.add.at int32 += 1.7 (unsafe cast)": lambda x, i, j, v: _at(np.add, x * 10, j, 1.7,
                                                                  dtype=np.int32)[:, :3],
    "np.add.at int8 wraps": lambda x, i, j, v: _at(np.add, x, i, 100, dtype=np.int8),
    "np.logical_or.at bool": lambda x, i, j, v: _at(np.logical_or, x > 1, (i, j), v > 0),
    "np.add.at basic key": lambda x, i, j, v: _at(np.add, x, (slice(1, 4), 2), v[:3]),
    "heavy duplication": _heavy,
}


def _args() -> tuple:
    return X, I, J, V


@pytest.mark.parametrize("name", sorted(SCATTER_PROGRAMS))
def test_scatter_cpu(name: str) -> None:
    assert_matches_numpy(SCATTER_PROGRAMS[name], *_args(), device="cpu")
    # a Fortran and a negative-stride layout of the same values
    assert_matches_numpy(SCATTER_PROGRAMS[name], np.asfortranarray(X), I[::-1].copy()[::-1],
                         J, V[::-1].copy()[::-1], device="cpu")


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", ["np.add.at", "y[i, j] = v, then read", "heavy duplication",
                                  "np.add.at float32 += float64", "np.negative.at (unary, repeated)",
                                  "np.add.at int8 wraps"])
def test_scatter_ptx(name: str) -> None:
    assemble_kernels(tracearray.compile(SCATTER_PROGRAMS[name], device="cuda").lower(*_args()))


@pytest.mark.parametrize("name", ["y[i] = v (rows, repeated, negative)", "np.add.at",
                                  "y[i, j] = v, then read", "heavy duplication",
                                  "y3[i, :, j] = v (separated: B first)"])
def test_scatter_emulated_gpu(name: str, emulated_gpu) -> None:
    assert_matches_numpy(SCATTER_PROGRAMS[name], *_args(), device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(SCATTER_PROGRAMS))
def test_scatter_cuda(name: str) -> None:
    assert_matches_numpy(SCATTER_PROGRAMS[name], *_args(), device="cuda")


# ------------------------------------------------------------------------------------------
# Arguments, errors, fusion
# ------------------------------------------------------------------------------------------

def _hist_into(counts, idx, w):
    np.add.at(counts, idx, w)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_add_at_updates_the_argument(device, request) -> None:
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    f = tracearray.compile(_hist_into, device="cuda" if device == "emulated" else "cpu")
    idx = RNG.integers(0, 7, 500)
    w = RNG.standard_normal(500)
    base = np.zeros((7, 2))
    got, want = base.copy(), base.copy()
    assert f(got[:, 1], idx, w) is None     # a strided view of the caller's array
    _hist_into(want[:, 1], idx, w)
    np.testing.assert_array_equal(got, want)


def _bad(x, i):
    y = x.copy()
    y[i] = 1.0
    return y


def _bad_at(x, i):
    y = x.copy()
    np.add.at(y, (slice(None), i), 1.0)
    return y


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("fn,line", [(_bad, "y[i] = 1.0"), (_bad_at, "np.add.at(y, (slice")])
def test_out_of_range_index_raises(fn, line, device, request) -> None:
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    f = tracearray.compile(fn, device="cuda" if device == "emulated" else "cpu")
    x = np.zeros((4, 3))
    ok = np.array([0, -3, 2])
    np.testing.assert_array_equal(f(x, ok), fn(x, ok))
    bad = np.array([0, 3, 1]) if fn is _bad_at else np.array([0, -5, 1])
    with pytest.raises(IndexError) as info:
        fn(x, bad)
    with pytest.raises(IndexError) as got:
        f(x, bad)
    assert str(info.value).splitlines()[0] == str(got.value).splitlines()[0]
    assert line in str(got.value)


def test_gpu_runs_order_free_integer_combines_in_parallel() -> None:
    """On the GPU an integer add/max/min/and/or/xor of 32- or 64-bit integers is exact in
    any order: a thread per element with an atomic read-modify-write. Float sums and
    assignments keep NumPy's order (sequential along the index dimensions)."""
    from tracearray.tile.gpu import gpu_strategy
    from tracearray.tile import tile_plan

    def strategies(fn, *args):
        plan = tracearray.compile(fn, device="cpu").lower(*args).plan
        from tracearray.tile.geometry import make_geometry
        out = []
        for spec in tile_plan(plan):
            if spec.kernel.kind == "scatter":
                k = spec.kernel
                geo = make_geometry(k, spec.strategy, [[0] * len(k.space)] * len(k.body.accesses),
                                    [[0] * len(k.space)] * len(k.stores))
                out.append(gpu_strategy(geo))
        return out
    hist = lambda i: _at(np.add, np.zeros(6, np.int64), i, 1)          # noqa: E731
    mx = lambda i: _at(np.maximum, np.zeros(6, np.uint32), i, np.uint32(3))  # noqa: E731
    fsum = lambda i: _at(np.add, np.zeros(6), i, 1.0)                  # noqa: E731
    small = lambda i: _at(np.add, np.zeros(6, np.int8), i, 1)          # noqa: E731
    assert strategies(hist, I) == ["scatter_atomic"]
    assert strategies(mx, I) == ["scatter_atomic"]
    assert strategies(fsum, I) == ["scatter"]
    assert strategies(small, I) == ["scatter"]          # no 8-bit atomics
    assert strategies(lambda i: _set(np.zeros(6), i, 1.0), I) == ["scatter"]


def test_scatter_is_one_kernel_after_the_copy() -> None:
    """The target copied, then one scatter kernel that computes the values and indices it
    writes (``np.exp(v) * 2`` and ``i % 6`` are not kernels of their own)."""
    def f(x, i, v):
        y = x.copy()
        np.add.at(y, i % 6, np.exp(v)[:, None] * 2)
        return y
    plan = tracearray.compile(f, device="cpu").lower(X, I, V).plan
    kinds = [k.kind for k in plan.kernels]
    assert kinds == ["map", "scatter"], kinds
    ops = {n.op for n in plan.kernels[1].nodes}
    assert {"exp", "multiply", "remainder", "scatter"} <= ops, ops


def test_ufunc_at_through_a_view_and_errors() -> None:
    def through_view(x, i):
        y = np.ones((3, 4))
        np.add.at(y.T[1:], i, x)      # a view of an array the function made: y is updated
        return y

    def two_operands(x, i):
        np.negative.at(x, i, 1.0)
    i = np.array([0, 2, 0])
    x = np.arange(3.0)
    np.testing.assert_array_equal(tracearray.compile(through_view, device="cpu")(x, i),
                                  through_view(x, i))
    with pytest.raises(ValueError, match="unary"):
        tracearray.compile(two_operands, device="cpu")(np.zeros(3), np.array([0]))


# ------------------------------------------------------------------------------------------
# Random scatters
# ------------------------------------------------------------------------------------------

@settings(max_examples=examples(40))
@given(n=st.integers(1, 9), m=st.integers(0, 30), cols=st.integers(1, 4),
       op=st.sampled_from(["set", "add", "subtract", "multiply", "maximum", "minimum"]),
       dtype=st.sampled_from(["float64", "float32", "int64", "int16", "uint8"]),
       seed=st.integers(0, 2**16))
def test_random_scatters(n, m, cols, op, dtype, seed) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, cols)) * 50).astype(dtype)
    idx = rng.integers(-n, n, m)
    v = (rng.standard_normal((m, cols)) * 50).astype(dtype)

    def f(x, idx, v):
        y = x.copy()
        if op == "set":
            y[idx] = v
        else:
            getattr(np, op).at(y, idx, v)
        return y
    assert_matches_numpy(f, x, idx, v, device="cpu")
