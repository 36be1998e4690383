"""Indexing with data (the ``gather`` primitive) against NumPy, on every target.

- ``GATHER_PROGRAMS``: NumPy's advanced-indexing forms (one or several index arrays broadcast
  together, mixed with slices, None and ..., separated indices moving to the front, integers
  and 0-d booleans among array indices, known boolean masks, lists, empty indices, negative
  indices, gathers of gathers, of views and of computed values) and the functions built on
  gather (take in its modes, take_along_axis, choose, compress, searchsorted, digitize,
  interp), on the CPU, assembled by ptxas for sm_90, under the GPU emulator and (``-m gpu``)
  on the GPU;
- ``test_random_keys``: Hypothesis draws keys (every kind of item, traced or known index
  arrays, indices out of range) and compares with NumPy, errors included;
- out-of-range indices raise NumPy's IndexError at the user's line, on the CPU and on the
  (emulated) GPU, for NumPy inputs and, at the next wait, for device arrays;
- fusion: a gather is computed inside its consumer (one kernel), except where it is read in
  part, where it is stored so that every index is checked.
"""
from __future__ import annotations

from typing import Any, Callable

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

import tracearray
from gpu_differential import assemble_kernels
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.errors import UnsupportedOperationError
from tracearray.testing import assert_matches_numpy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
HAVE_GPU = driver.is_available()

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5, 6))
I = np.array([3, -1, 0, 2])
J = np.array([[1], [4], [-5]])
K = np.array([5, 0, -6])

# name -> fn(x, i, j, k); i, j, k are traced index arrays
GATHER_PROGRAMS: dict[str, Callable[..., Any]] = {
    "x[i]": lambda x, i, j, k: x[i],
    "x[:, i]": lambda x, i, j, k: x[:, i[:3] % 5],
    "x[i, j]": lambda x, i, j, k: x[i, j],
    "x[..., k]": lambda x, i, j, k: x[..., k],
    "x[i, :, k] (separated)": lambda x, i, j, k: x[i[:3], :, k],
    "x[0, :, k] (int separates)": lambda x, i, j, k: x[0, :, k],
    "x[:, 1, k]": lambda x, i, j, k: x[:, 1, k],
    "x[i, None, j] (None separates)": lambda x, i, j, k: x[i, None, j],
    "x[:, j, None, k]": lambda x, i, j, k: x[:, j, None, k],
    "x[None, i, 1:3]": lambda x, i, j, k: x[None, i, 1:3],
    "x[::-1, j, ::2]": lambda x, i, j, k: x[::-1, j, ::2],
    "x[[0, 2], [1, 1]] (lists)": lambda x, i, j, k: x[[0, 2], [1, 1]],
    "x[[[0, 1]]]": lambda x, i, j, k: x[[[0, 1]]],
    "x[known mask]": lambda x, i, j, k: x[np.array([True, False, True, True])],
    "x[:, known 2-d mask]": lambda x, i, j, k: x[:, np.arange(30).reshape(5, 6) % 3 == 0],
    "x[True], x[1, False]": lambda x, i, j, k: (x[True], x[1, False], x[0, :, True]),
    "x[i][j] (gather of a gather)": lambda x, i, j, k: x[i][j],
    "x[i][::2] (read in part)": lambda x, i, j, k: x[i][::2],
    "x[i][0, 1]": lambda x, i, j, k: x[i][0, 1],
    "x[i].sum(axis=1)": lambda x, i, j, k: x[i].sum(axis=1),
    "x.T[k]": lambda x, i, j, k: x.T[k],
    "exp(x)[i] * 2 (computed operand)": lambda x, i, j, k: (np.exp(x) * 2)[i],
    "x[i, j, k]": lambda x, i, j, k: x[i[:3], j, k],
    "x[[]]": lambda x, i, j, k: x[[]],
    "x[i[:0]]": lambda x, i, j, k: x[i[:0]],
    "x[i[0]] (traced 0-d)": lambda x, i, j, k: x[i[0]],
    "x[i, 0, 0]": lambda x, i, j, k: x[i, 0, 0],
    "uint8 indices": lambda x, i, j, k: x[(i % 4).astype(np.uint8)],
    "int32 indices": lambda x, i, j, k: x[:, :, (k // 2).astype(np.int32)],
    "list of traced scalars": lambda x, i, j, k: x[[i[0], i[1]]],
    "x.flat[i]": lambda x, i, j, k: x.flat[i * 7],
    "np.take modes": lambda x, i, j, k: (np.take(x, i * 9), np.take(x, i * 9, mode="wrap"),
                                         np.take(x, j, axis=1, mode="clip"), x.take(k, -1)),
    "np.take known": lambda x, i, j, k: np.take(x, [[0, -1], [2, 2]], axis=0),
    "take_along_axis": lambda x, i, j, k: (
        np.take_along_axis(x, np.argmax(x, axis=1, keepdims=True), axis=1),
        np.take_along_axis(x, np.abs(i).reshape(4, 1, 1) % 6, axis=2)),
    "choose": lambda x, i, j, k: np.choose((x > 0).astype(np.int8) + (x > 1),
                                           [x, -x, x * 2]),
    "compress": lambda x, i, j, k: (np.compress([True, False, True], x, axis=2),
                                    x.compress([0, 1, 1], axis=0)),
    "searchsorted": lambda x, i, j, k: (
        np.searchsorted(np.cumsum(np.abs(x[0, 0])), x[1]),
        np.searchsorted([-1.0, 0.0, 0.0, 2.0], x, side="right")),
    "digitize": lambda x, i, j, k: (np.digitize(x, [-1.0, 0.0, 0.5]),
                                    np.digitize(x, [2.0, 0.0, -3.0], right=True)),
    "interp": lambda x, i, j, k: (np.interp(x, [-1.0, 0.0, 0.5, 2.0], [3.0, -1.0, 0.0, 1.0]),
                                  np.interp(x[0], np.cumsum(np.abs(x[1, 0])) - 2, x[2, 0],
                                            left=-9.0, right=np.nan)),
    # periodic (x and xp modulo the period, xp sorted) and complex values (NumPy's complex
    # loop: each part alone, the reciprocal of the step, a NaN x giving NaN + 0j)
    "interp_periodic": lambda x, i, j, k: (
        np.interp(x * 7, x[0, 0] * 3, x[1, 0], period=-2.5),
        np.interp(x, [350.0, 10.0, 90.0, 10.0 + 360.0], [1.0, 2.0, 3.0, 4.0], period=360)),
    "interp_complex": lambda x, i, j, k: (
        np.interp(np.where(x > 1.5, np.nan, x), [-1.0, 0.0, 0.7], [1j, 2.0, 3.0 - 1j],
                  left=5j, right=-1.0),
        np.interp(x[0], [0.5], [2.0 - 1j]),
        np.interp(x[0] * 9, x[1, 0] * 4, x[2, 0] * (1 - 2j), period=6.0)),
}


def _args() -> tuple:
    return X, I, J, K


@pytest.mark.parametrize("name", sorted(GATHER_PROGRAMS))
def test_gather_cpu(name: str) -> None:
    assert_matches_numpy(GATHER_PROGRAMS[name], *_args(), device="cpu")
    # non-contiguous operand and index views
    assert_matches_numpy(GATHER_PROGRAMS[name], np.asfortranarray(X), I[::-1].copy()[::-1],
                         J, K, device="cpu")


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", sorted(GATHER_PROGRAMS))
def test_gather_ptx(name: str) -> None:
    assemble_kernels(tracearray.compile(GATHER_PROGRAMS[name], device="cuda").lower(*_args()))


EMULATED = ["x[i]", "x[i, j]", "x[i, :, k] (separated)", "x[i].sum(axis=1)",
            "exp(x)[i] * 2 (computed operand)", "np.take modes", "take_along_axis", "interp",
            "interp_periodic", "interp_complex", "x[i][::2] (read in part)", "x[known mask]"]


@pytest.mark.parametrize("name", EMULATED)
def test_gather_emulated_gpu(name: str, emulated_gpu) -> None:
    assert_matches_numpy(GATHER_PROGRAMS[name], *_args(), device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(GATHER_PROGRAMS))
def test_gather_cuda(name: str) -> None:
    assert_matches_numpy(GATHER_PROGRAMS[name], *_args(), device="cuda")


# ------------------------------------------------------------------------------------------
# random keys
# ------------------------------------------------------------------------------------------

@st.composite
def keys(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[list, list[np.ndarray]]:
    """A key for an array of ``shape``: items of every kind; index arrays are either traced
    (returned separately, replaced by a placeholder) or known. Values stray out of range."""
    items: list = []
    traced: list[np.ndarray] = []
    dim = 0
    ellipsis = False
    n_items = draw(st.integers(1, len(shape) + 1))
    for _ in range(n_items):
        left = len(shape) - dim
        kind = draw(st.sampled_from(["slice", "int", "array", "none", "ellipsis", "list"]
                                    if left else ["none", "ellipsis"]))
        if kind == "ellipsis":
            if ellipsis:
                continue
            ellipsis = True
            items.append(Ellipsis)
            continue
        if kind == "none":
            items.append(None)
            continue
        n = shape[dim]
        dim += 1
        if kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
            items.append(slice(start, stop, step))
        elif kind == "int":
            items.append(draw(st.integers(-n - (n == 0), max(n - 1, 0))))
        else:
            ishape = draw(st.sampled_from([(), (1,), (3,), (2, 1), (0,), (1, 3)]))
            lo, hi = (-n, n - 1) if n else (0, 0)
            bad = draw(st.integers(0, 19)) == 0
            vals = np.asarray(draw(st.lists(st.integers(lo - 2 * bad, hi + 2 * bad),
                                            min_size=int(np.prod(ishape)),
                                            max_size=int(np.prod(ishape)))),
                              dtype=np.int64).reshape(ishape)
            if kind == "list" and vals.ndim == 1:
                items.append(vals.tolist())
            elif draw(st.booleans()):
                items.append(("traced", len(traced)))
                traced.append(vals.astype(draw(st.sampled_from([np.int64, np.int32,
                                                                np.int16]))))
            else:
                items.append(vals)
    return items, traced


def _program(items: list) -> Callable:
    def fn(x, *idx):
        key = tuple(idx[k[1]] if isinstance(k, tuple) else k for k in items)
        return x[key] * 2
    return fn


@pytest.mark.parametrize("key", [
    (slice(None), np.array([0, 0, 0]), Ellipsis, 0),    # found by test_random_keys in CI
    (slice(None), [0, 2, 3], Ellipsis, 1),
    (1, Ellipsis, [0, 2]),
    ([1, 0], slice(None), Ellipsis, [4, 3]),
])
def test_an_ellipsis_of_no_dims_separates_advanced_indices(key) -> None:
    """NumPy counts an ellipsis that expands to no dimension as a separator: advanced
    indices on both sides of it are not consecutive, so the broadcast dims come first
    (x[:, [0, 0, 0], ..., 0] of a 3-d x is (3, n0)); reads and writes alike."""
    for shape in ((2, 4, 5), (0, 4, 5)):
        x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
        assert_matches_numpy(lambda a: a[key], x, device="cpu")

        def write(a):
            a = a.copy()
            a[key] = -1.0
            return a
        assert_matches_numpy(write, x, device="cpu")


@pytest.mark.parametrize("i", [5, 1, -4, -3])
@pytest.mark.parametrize("shape", [(3, 3), (0, 0)])
def test_a_traced_integer_is_checked_beside_an_empty_index_array(i: int, shape) -> None:
    """NumPy checks an integer index (a 0-d array) when it parses the key, so x[i, []] raises
    for an i out of bounds although the broadcast indices select nothing; reads, writes and
    ufunc.at alike (found by test_random_keys: x[0, []] of a (0, 0) array returned [])."""
    x = np.zeros(shape, np.float32)
    empty = np.zeros(0, np.int64)

    def write(a, k, e):
        a = a.copy()
        a[k, e] = 1.0
        return a

    def add_at(a, k, e):
        a = a.copy()
        np.add.at(a, (e, k), 1.0)
        return a
    for fn in (lambda a, k, e: a[k, e], lambda a, k, e: a[e, k], write, add_at):
        assert_matches_numpy(fn, x, np.array(i), empty, device="cpu")


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_random_keys(data: st.DataObject) -> None:
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 3
    items, traced = data.draw(keys(shape))
    assert_matches_numpy(_program(items), x, *traced, device="cpu")


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------

def _index_error(f: Callable, *args: Any) -> str:
    with pytest.raises(IndexError) as info:
        f(*args)
    return str(info.value)


def test_out_of_range_raises_numpys_index_error_at_the_line() -> None:
    f = tracearray.compile(lambda x, i: x[:, i] + 1, device="cpu")
    msg = _index_error(f, X, np.array([0, 9]))
    assert msg.startswith("index 9 is out of bounds for axis 1 with size 5"), msg
    assert "test_indexing.py" in msg and "x[:, i] + 1" in msg, msg
    msg = _index_error(f, X, np.array([-6]))
    assert msg.startswith("index -6 is out of bounds for axis 1 with size 5"), msg
    np.testing.assert_array_equal(f(X, np.array([-5, 4])), X[:, [-5, 4]] + 1)
    # np.take along no axis names the size only, as NumPy does
    g = tracearray.compile(lambda x, i: np.take(x, i), device="cpu")
    msg = _index_error(g, X, np.array([120]))
    assert msg.startswith("index 120 is out of bounds for size 120"), msg


def test_indices_of_an_empty_result_are_still_checked() -> None:
    """NumPy checks every index even when another dimension is empty."""
    f = tracearray.compile(lambda x, i: x[i, :0], device="cpu")
    with pytest.raises(IndexError):
        f(X, np.array([7]))
    assert f(X, np.array([3])).shape == (1, 0, 6)


def test_indices_read_in_part_are_all_checked() -> None:
    f = tracearray.compile(lambda x, i: x[i][::2], device="cpu")
    _index_error(f, X, np.array([0, 9]))      # the bad index is in the skipped row


def test_known_indices_are_checked_when_tracing() -> None:
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        tracearray.compile(lambda x: x[[0, 4]], device="cpu")(X)
    with pytest.raises(IndexError, match="arrays used as indices must be of integer"):
        tracearray.compile(lambda x: x[np.array([1.0])], device="cpu")(X)
    with pytest.raises(IndexError, match="shape mismatch"):
        tracearray.compile(lambda x, i: x[i, [0, 1]], device="cpu")(X, I)


def test_emulated_gpu_raises_for_numpy_and_device_inputs(emulated_gpu) -> None:
    from tracearray.gpu import Array
    f = tracearray.compile(lambda x, i: x[i] * 2, device="cuda")
    msg = _index_error(f, X, np.array([1, 4]))
    assert msg.startswith("index 4 is out of bounds for axis 0 with size 4"), msg
    out = f(Array.from_numpy(X), Array.from_numpy(np.array([-5])))   # queued, no wait
    msg = _index_error(out.numpy)                                    # the next wait raises
    assert msg.startswith("index -5 is out of bounds for axis 0 with size 4"), msg
    ok = f(Array.from_numpy(X), Array.from_numpy(np.array([-4, 3])))
    np.testing.assert_array_equal(ok.numpy(), X[[-4, 3]] * 2)


# ------------------------------------------------------------------------------------------
# fusion
# ------------------------------------------------------------------------------------------

def _kernels(fn: Callable, *args: Any) -> int:
    return len(tracearray.compile(fn, device="cpu").lower(*args).plan.kernels)


def test_interp_errors_are_numpys() -> None:
    """np.interp's argument errors: a zero period, xp of another length than fp (periodic
    or not), complex sample points; a traced period is refused by name."""
    xp, fp = np.array([0.0, 1.0, 2.0]), np.array([1.0, 0.0, 1.0])
    for fn in (lambda x: np.interp(x, xp, fp, period=0),
               lambda x: np.interp(x, xp, fp[:2], period=3),
               lambda x: np.interp(x, xp, fp[:2]),
               lambda x: np.interp(x + 1j, xp, fp + 1j),
               lambda x: np.interp(x, xp + 0j, fp),
               lambda x: np.interp(x, xp, fp, right=1j)):
        assert_matches_numpy(fn, X[0, 0], device="cpu")
    with pytest.raises(UnsupportedOperationError, match="traced period"):
        tracearray.compile(lambda x, p: np.interp(x, xp, fp, period=p))(X[0, 0], np.float64(2))


def test_gathers_fuse_into_their_consumers() -> None:
    assert _kernels(lambda x, i: x[i] * 2 + 1, X, I) == 1
    assert _kernels(lambda x, i: np.exp(x)[i].sum(axis=-1), X, I) == 1
    assert _kernels(lambda x: np.interp(x, [0.0, 1.0, 3.0], [1.0, 2.0, 0.0]), X) == 1
    assert _kernels(lambda x, i: np.take(x, i, axis=2, mode="wrap") - 1, X, K) == 1


def test_a_gather_read_in_part_is_stored_once() -> None:
    assert _kernels(lambda x, i: x[i][::2] * 2, X, I) == 2


# ------------------------------------------------------------------------------------------
# x[mask] with a traced mask, reduced (trace/selection.py): no compaction, one kernel
# ------------------------------------------------------------------------------------------

Y = RNG.standard_normal((4, 5, 6))

SELECTION_PROGRAMS: dict[str, Callable[..., Any]] = {
    "x[x > 0].sum()": lambda x, y: x[x > 0].sum(),
    "x[m].mean()": lambda x, y: x[y > 0.3].mean(),
    "np.abs(x[m] - y[m]).max()": lambda x, y: np.abs(x[y > 0] - y[y > 0]).max(),
    "(x[m] ** 2).sum()": lambda x, y: (x[x > 0.5] ** 2).sum(),
    "np.sum(x[m])": lambda x, y: np.sum(x[x < 0]),
    "x[row mask].mean(axis=0)": lambda x, y: np.mean(x[x[:, 0, 0] > 0], axis=0),
    "x[row mask].std(axis=0, ddof=1)": lambda x, y: x[x[:, 0, 0] > -1].std(axis=0, ddof=1),
    "np.count_nonzero(x[m] > 1)": lambda x, y: np.count_nonzero(x[x > 0] > 1),
    "x[m].min(initial=)": lambda x, y: x[x > 0].min(initial=10.0),
    "x[m, ...].prod() float32": lambda x, y: (x[x[..., 0] > 0, ...].astype(np.float32)).prod(),
    "x[m & n].sum(dtype=)": lambda x, y: x[(x > 0) & (y > 0)].sum(dtype=np.float32),
    "int x[m].max()": lambda x, y: (x * 100).astype(np.int16)[y > 0].max(),
    "nothing selected: sum, mean": lambda x, y: (x[x > 100].sum(), x[x > 100].mean()),
    "x[:, m].sum(axis=1)": lambda x, y: x[:, x[0, :, 0] > 0].sum(axis=1),
    "x[:, m].mean(axis=-2, keepdims=True)": lambda x, y: x[:, x[0, :, 0] > 0].mean(
        axis=-2, keepdims=True),
    "(x[:, m2d] ** 2).max()": lambda x, y: (x[:, y[0] > 0] ** 2).max(),
}


@pytest.mark.parametrize("name", sorted(SELECTION_PROGRAMS))
def test_masked_selection_cpu(name: str) -> None:
    assert_matches_numpy(SELECTION_PROGRAMS[name], X, Y, device="cpu")
    assert len(tracearray.compile(SELECTION_PROGRAMS[name], device="cpu")
               .lower(X, Y).plan.kernels) <= 2


@pytest.mark.parametrize("name", ["x[x > 0].sum()", "np.abs(x[m] - y[m]).max()",
                                  "x[row mask].mean(axis=0)"])
def test_masked_selection_emulated_gpu(name: str, emulated_gpu) -> None:
    assert_matches_numpy(SELECTION_PROGRAMS[name], X, Y, device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(SELECTION_PROGRAMS))
def test_masked_selection_cuda(name: str) -> None:
    assert_matches_numpy(SELECTION_PROGRAMS[name], X, Y, device="cuda")


def test_masked_selection_errors() -> None:
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        tracearray.compile(lambda x: x[x > 100].max(), device="cpu")(X)
    # what needs the selected elements themselves compacts the selection (a data-dependent
    # size: tests/test_data_sizes.py)
    for fn in (lambda x: x[x > 0] * 2, lambda x: len(x[x > 0]), lambda x: x[x > 0][0],
               lambda x: x[x[:, 0, 0] > 0].sum(axis=1)):
        np.testing.assert_array_equal(tracearray.compile(fn, device="cpu")(X), fn(X))
    assert len(tracearray.compile(lambda x: x[x > 0].sum(), device="cpu")
               .lower(X).plan.kernels) == 1


def test_unravel_index_and_ravel_multi_index_of_traced_indices() -> None:
    cpu = lambda f: tracearray.compile(f, device="cpu")   # noqa: E731
    i = np.array([[5, 7], [0, 11]])
    for f in (lambda a: np.unravel_index(a, (3, 4)),
              lambda a: np.unravel_index(a, (3, 4), order="F"),
              lambda a: np.unravel_index(a > 5, 2),
              lambda a: (np.ravel_multi_index((a % 3, a % 4), (3, 4)),),
              lambda a: (np.ravel_multi_index((a, a - 2), (3, 4), mode=("clip", "wrap"),
                                              order="F"),),
              lambda a: (np.ravel_multi_index((a[:, :1] % 3, a[0] % 4), (3, 4)),)):
        for got, want in zip(cpu(f)(i), f(i)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    # NumPy's errors; out-of-range values are found when the function runs, at the user's line
    for f, a, err, msg in ((lambda a: np.unravel_index(a, (3, 4)), [12], ValueError,
                            "out of bounds for array with size 12"),
                           (lambda a: np.unravel_index(a, (3, 4)), [-1], ValueError,
                            "out of bounds"),
                           (lambda a: np.unravel_index(a * 1.0, 5), [1], TypeError,
                            "only int indices"),
                           (lambda a: np.ravel_multi_index((a, a), (3, 4)), [3], ValueError,
                            "invalid entry in coordinates array"),
                           (lambda a: np.ravel_multi_index((a,), (3, 4)), [1], ValueError,
                            "sequence of length 2")):
        with pytest.raises(err, match=msg):
            f(np.array(a))
        with pytest.raises(err, match=msg) as e:
            cpu(f)(np.array(a))
        assert "test_indexing.py" in str(e.value)


def test_reshape_by_an_array_of_sizes() -> None:
    # ndarray.reshape(shape_array), as NumPy's histogramdd calls it
    f = tracearray.compile(lambda a: a.reshape(np.array([2, 3])) * 2, device="cpu")
    np.testing.assert_array_equal(f(np.arange(6.0)), np.arange(6.0).reshape(2, 3) * 2)


def test_power_operator_of_a_masked_selection_is_ndarrays():
    """soak cpu-2026-12-02-g, program 1043: ``(x[m] == x[m]) ** 2`` took np.power's int64
    where ndarray's ``**`` (its fast path: np.square) gives int8 for a bool selection."""
    x = np.array([4, 0, 7], np.uint8)
    f = np.array([1.5, -2.0, 3.0, 0.25], np.float32)
    z = np.array([1 + 2j, -3 + 0.5j, 0.1 - 0.7j, 5j, 1e-3 + 1e3j])   # (complex: bit for bit)
    for fn, a in [(lambda v: (v[v > 0] == v[v > 0]) ** 2, x),
                  (lambda v: (v[v > np.inf] == v[v > np.inf]) ** 2, x),
                  (lambda v: v[v > 0] ** 0.5, f), (lambda v: v[v > 0] ** -1, f),
                  (lambda v: v[v > 0] ** 3, x), (lambda v: 2 ** v[v > 0], x),
                  (lambda v: v[v.imag > -9] ** 2, z), (lambda v: v[v.imag > 0] ** 0.5, z)]:
        got, want = tracearray.compile(fn, device="cpu")(a), fn(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_traced_zero_d_mask_selects_by_its_value() -> None:
    """A 0-d traced boolean mask is a new axis of one row when True and none when False, in
    reads and writes, alone or beside other indices (it was always taken as True: x[m] kept
    the element and y[m] = v wrote it when m was False; docs/testing.md bug 62)."""
    progs = [
        lambda v: v[v.sum() > 0],
        lambda v: v[..., v.sum() > 0],
        lambda v: v[1:, v.max() > 0, 0],
        lambda v: v[v.min() > 0, [0, 1]],
        lambda v: v[v.min() >= 0, 1],
        lambda v: v.sum()[v.sum() > 0],
    ]

    def write(v):
        y = np.zeros_like(v)
        y[v.sum() > 0] = 7
        z = v.copy()
        z[v.max() > 10] += 1
        return y, z

    progs.append(write)
    for x in (np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)):
        for p in progs:
            try:
                want = p(x)
            except IndexError:   # (NumPy's: a False mask's 0 rows beside 2 positions)
                with pytest.raises(IndexError):
                    tracearray.compile(p, device="cpu")(x)
                continue
            got = tracearray.compile(p, device="cpu")(x)
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                assert np.shape(g) == np.shape(w)
                np.testing.assert_array_equal(g, w)


DELETE_TRACED = {
    "mask": (lambda a: np.delete(a, a > 2), 0),
    "mask_along_axis": (lambda b: np.delete(b, b[0] > 1, axis=1), 1),
    "mask_flattened": (lambda b: np.delete(b, b.ravel() > 5), 1),
    "mask_all_and_none": (lambda a: (np.delete(a, a > 100), np.delete(a, a > -1)), 0),
    "positions": (lambda a: np.delete(a, np.argsort(a)[:3]), 0),
    "negative_repeated": (lambda a: np.delete(a, np.array([-1, -1, 0]) + (a[:3] > 100)), 0),
    "position_of_rows": (lambda b: np.delete(b, np.argmax(b[:, 0]), axis=0), 1),
}


@pytest.mark.parametrize("name", sorted(DELETE_TRACED))
def test_delete_with_traced_positions_or_mask(name):
    """np.delete(a, a > 2) and positions the data decides: NumPy's own way, a mask of what
    is kept (its count the data's, as x[mask]); out-of-bounds positions are NumPy's
    IndexError when the compiled function runs."""
    from tracearray.testing import assert_matches_numpy
    fn, which = DELETE_TRACED[name]
    a = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    b = np.arange(12.0).reshape(3, 4)
    assert_matches_numpy(fn, (a, b)[which], device="cpu")
    with pytest.raises(IndexError, match="out of bounds"):
        tracearray.compile(lambda a: np.delete(a, np.argmax(a) + 10), device="cpu")(a)


@pytest.mark.parametrize("fn, shape", [
    (lambda x: np.mgrid[0:5][x > 0.4], (5,)),
    (lambda x: np.ogrid[0:5][x > 0.4], (5,)),
    (lambda x: np.mgrid[0:3, 0:5].sum(0)[:, x > 0.5], (5,)),
    (lambda X: X[np.tril_indices(4)], (4, 4)),
    (lambda X: X[np.triu_indices(4, 1)] * 2, (4, 4)),
    (lambda X: X[np.diag_indices(4)], (4, 4)),
    (lambda X: np.tril_indices(4)[0][:4][X[0] > 0.5], (4, 4)),
])
def test_index_grids_made_from_numbers_take_traced_indices(fn, shape):
    """np.mgrid / np.ogrid / np.tril_indices ... made from Python numbers are traced
    constants, so a traced mask or index can pick from them (a NumPy array cannot be
    indexed by a traced value)."""
    x = np.random.default_rng(0).random(shape)
    np.testing.assert_array_equal(tracearray.compile(fn)(x), fn(x))


@pytest.mark.parametrize("fn", [lambda x: np.logspace(0, 1, 5)[np.argmax(x, 1)],
                                lambda x: np.geomspace(1, 100, 5)[np.argmax(x, 1)]])
def test_logspace_and_geomspace_take_traced_indices(fn):
    x = np.random.default_rng(1).random((4, 5))
    np.testing.assert_allclose(tracearray.compile(fn)(x), fn(x))


def test_too_many_data_dependent_values_names_the_line():
    from tracearray.errors import UnsupportedOperationError

    def f(a):
        while np.abs(a).max() > 1e-10:
            a = a * 0.8
        return a
    with pytest.raises(UnsupportedOperationError, match=r"more than \d+ values.*test_indexing\.py:\d+"):
        tracearray.compile(f)(np.ones(3))
