"""The sort family against NumPy: sort, argsort, partition, argpartition, lexsort, ndarray.sort
in place, median, percentile, quantile (every method), their nan* variants, unique, isin and
the set routines.

The external ops call NumPy's own sorts, so results must be NumPy's exactly: values and
indices bit for bit, the sign of zeros, the order of ties for every kind (the default
quicksort's included), NaN last. Inputs have many ties, NaN, +-0 and +-inf, empty and size-1
rows, every axis, every real dtype and non-contiguous layouts; elementwise producers and
consumers around a sort must stay fused into the kernels before and after it.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray.ops import ALL_DTYPES

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def cpu(fn):
    return tracearray.compile(fn, device="cpu")


def awkward(shape, dtype, seed=0) -> np.ndarray:
    """Values with many ties, and for floats NaN, +-0 and +-inf."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(0, 4, shape).astype(dtype)
        flat = x.reshape(-1)
        if flat.size > 3:
            flat[::5] = info.max
            flat[1::7] = info.min
        return x
    x = rng.integers(-3, 4, shape).astype(dtype)
    flat = x.reshape(-1)
    special = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan], dtype)
    for i, v in enumerate(special):
        flat[i * 3 + 1::11] = v
    return x


def same(got, want, what=""):
    """Exactly NumPy's result: type, dtype, shape, values, NaN positions and zero signs."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        assert type(got) is type(want), (what, type(got), type(want))
        for g, w in zip(got, want):
            same(g, w, what)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
    np.testing.assert_array_equal(g, w, err_msg=what)
    if w.dtype.kind == "f":
        assert np.array_equal(np.signbit(g), np.signbit(w)), f"{what}: signs of zeros"


def check(fn, *args, what=""):
    want = fn(*args)
    got = cpu(fn)(*args)
    same(got, want, what)
    return got


# ------------------------------------------------------------------------------------------
# sort, argsort: every dtype, every axis, every kind
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_sort_and_argsort_every_dtype_and_axis(dtype):
    x = awkward((5, 33), dtype)
    for axis in (0, 1, -1, None):
        check(lambda x: np.sort(x, axis=axis), x, what=f"sort axis={axis}")
        check(lambda x: np.argsort(x, axis=axis), x, what=f"argsort axis={axis}")


@pytest.mark.parametrize("kind", ["quicksort", "mergesort", "heapsort", "stable"])
def test_argsort_ties_follow_every_kind(kind):
    # 300 elements with 4 distinct values: NumPy's introsort (and heapsort) put ties in an
    # order of their own, which must be reproduced exactly
    x = awkward((3, 300), np.float32, seed=3)
    check(lambda x: np.argsort(x, axis=-1, kind=kind), x, what=kind)
    check(lambda x: np.sort(x, axis=0, kind=kind), x, what=kind)
    check(lambda x: np.argsort(x, stable=True), x, what="stable=True")


def test_sort_edge_shapes_and_layouts():
    x = awkward((4, 6, 5), np.float64, seed=1)
    check(lambda x: np.sort(x.transpose(2, 0, 1), axis=1), x, what="transposed")
    check(lambda x: np.argsort(x[:, ::-2, 1:], axis=1), x, what="strided view")
    for shape in [(0,), (1,), (3, 0), (0, 4), (3, 1), (1, 7)]:
        y = awkward(shape, np.int16, seed=2)
        check(lambda y: np.sort(y), y, what=str(shape))
        check(lambda y: np.argsort(y, axis=0), y, what=str(shape))


def test_sort_keeps_its_producers_and_consumers_fused():
    x = awkward((8, 64), np.float32, seed=4)

    def f(x):
        s = np.sort(x * 2.0 + 1.0, axis=-1)
        return np.exp(s[:, ::-1]) * 0.5 - 1.0

    want = f(x)
    got = cpu(f)(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    kinds = [k.strategy for k in cpu(f).explain(x).kernels]
    assert kinds == ["map", "external", "map"], kinds   # one producer kernel, one consumer
    text = str(cpu(f).explain(x))
    assert "external: NumPy's sort" in text


def test_sort_errors_name_the_line():
    x = np.zeros((3, 4))
    with pytest.raises(np.exceptions.AxisError, match="test_sort.py"):
        cpu(lambda x: np.sort(x, axis=2))(x)
    with pytest.raises(ValueError, match="sort kind"):
        cpu(lambda x: np.sort(x, kind="bogus"))(x)
    with pytest.raises(ValueError, match="can't be provided at the same time"):
        cpu(lambda x: np.argsort(x, kind="stable", stable=True))(x)


# ------------------------------------------------------------------------------------------
# in place: ndarray.sort / partition on made values and on arguments
# ------------------------------------------------------------------------------------------

def test_ndarray_sort_in_place_on_an_argument_and_a_made_value():
    def f(x):
        x.sort(axis=0)
        return x[0] + 1

    x = awkward((6, 9), np.float64, seed=5)
    want_x = x.copy()
    want = f(want_x)
    got_x = x.copy()
    same(cpu(f)(got_x), want)
    same(got_x, want_x, "the argument, sorted in place")

    def g(x):
        y = x * 3
        y.sort()
        v = y[:, ::2]
        v.sort(axis=1, kind="stable")   # through a view: the base sees it
        return y

    check(g, awkward((4, 10), np.int32, seed=6), what="made value, through a view")


def test_ndarray_partition_in_place():
    def f(x):
        x.partition(2, axis=-1)
        return x

    x = awkward((5, 8), np.float32, seed=7)
    want_x = x.copy()
    got_x = x.copy()
    same(cpu(f)(got_x), f(want_x))
    same(got_x, want_x)


# ------------------------------------------------------------------------------------------
# partition, argpartition, lexsort
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int8, np.uint64, np.float16, np.float64, np.bool_], ids=str)
def test_partition_and_argpartition(dtype):
    x = awkward((4, 13), dtype, seed=8)
    for kth, axis in [(3, -1), ((0, 5, -1), -1), (-2, 0), (1, None)]:
        check(lambda x: np.partition(x, kth, axis=axis), x, what=f"partition {kth} {axis}")
        check(lambda x: np.argpartition(x, kth, axis=axis), x, what=f"argpartition {kth}")
    with pytest.raises(ValueError, match="out of bounds"):
        cpu(lambda x: np.partition(x, 13))(x)
    # NumPy does not look at kth for an empty array (soak sort-1, program 896)
    check(lambda x: np.partition(x, 1), np.zeros((1, 1, 0), np.int16))
    check(lambda x: np.argpartition(x, 5, axis=0), np.zeros((0, 3), dtype))


def test_lexsort():
    a = awkward((3, 40), np.int8, seed=9)
    b = awkward((3, 40), np.float64, seed=10)
    check(lambda a, b: np.lexsort((a, b)), a, b)
    check(lambda a, b: np.lexsort((b, a, b > 0), axis=0), a, b)
    check(lambda a, b: np.lexsort(a), a, b)
    with pytest.raises(ValueError, match="same shape"):
        cpu(lambda a, b: np.lexsort((a, b[0])))(a, b)


def test_lexsort_ties_nan_zeros_and_shapes():
    """lexsort is stable argsorts of the keys in turn: the result is NumPy's index for index
    with keys full of ties, NaN (last), -0.0 and 0.0 (equal: original order), three keys and
    more, along every axis of 3-d keys, empty and one-element rows."""
    rng = np.random.default_rng(31)
    few = rng.integers(0, 3, (4, 5, 33)).astype(np.int16)
    f = rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf], (4, 5, 33))
    g = (rng.integers(0, 2, (4, 5, 33)) > 0)
    for axis in (0, 1, 2, -1):
        check(lambda a, b, c: np.lexsort((a, b, c), axis=axis), few, f, g, what=f"axis {axis}")
        check(lambda a, b, c: np.lexsort((c, a, b, a), axis=axis), few, f, g)
    check(lambda a, b: np.lexsort((a, b)), np.zeros((3, 0)), np.zeros((3, 0)))
    check(lambda a, b: np.lexsort((a, b)), np.ones((3, 1)), np.zeros((3, 1)))
    check(lambda a: np.lexsort(a), f[0])   # the keys as the rows of one array


# ------------------------------------------------------------------------------------------
# median, percentile, quantile and nan*
# ------------------------------------------------------------------------------------------

METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation",
           "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
           "normal_unbiased", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("method", METHODS)
def test_quantile_every_method(method):
    x = awkward((5, 11), np.float64, seed=11)
    y = awkward((6, 7), np.int32, seed=12)
    check(lambda x: np.quantile(x, [0.0, 0.3, 0.5, 1.0], axis=-1, method=method), x,
          what=method)
    check(lambda y: np.percentile(y, 37.5, axis=0, method=method), y, what=method)
    finite = np.nan_to_num(x, posinf=9, neginf=-9)
    finite[0, ::3] = np.nan
    check(lambda x: np.nanquantile(x, [0.25, 0.9], axis=1, method=method), finite,
          what=f"nan {method}")


def _quantiles_from_plan(rows: np.ndarray, plan) -> np.ndarray:
    """What the GPU's quantile kernel computes (gpu/quantile.py), in NumPy: the plan's one
    or two sorted values per q, the difference in the values' dtype, one rounded product and
    one rounded add or subtract in the result's, the row's last value where it is NaN."""
    res = plan.dtype
    out = []
    with np.errstate(all="ignore"):
        for i in range(len(plan.prev)):
            a, b = rows[:, plan.prev[i]], rows[:, plan.next[i]]
            if plan.mode[i] == 0:
                r = a.astype(res)
            else:
                diff = (b - a).astype(res)
                r = b.astype(res) - diff * plan.omt[i] if plan.mode[i] == 2 else \
                    a.astype(res) + diff * plan.t[i]
            if rows.dtype.kind == "f":
                r = np.where(np.isnan(rows[:, -1]), rows[:, -1].astype(res), r)
            out.append(r)
    return np.stack(out)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_quantile_plan_gives_numpys_values_bit_for_bit(method, dtype):
    """Issue 13: ``ops.sorting.quantile_plan`` (which sorted positions a quantile reads and
    its weights, from n and q alone, by NumPy's own helpers) and the GPU kernel's arithmetic
    give np.quantile's and np.percentile's values bit for bit (signed zeros, infinities and
    NaN rows included) for every method, Python-scalar (weak) and array q, float32 q."""
    from tracearray.ops.sorting import quantile_plan
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 10, 101):
        x = np.round(rng.standard_normal((5, n)) * 3, 1).astype(dtype)
        x[0, 0] = np.nan
        x[1] = np.inf
        x[2, : n // 2] = -np.inf
        x[3, ::2] = -0.0
        rows = np.sort(x, axis=-1)
        for func, qs in (("quantile", [0.5, 0.0, 1.0, 0.3, 1, [0.1, 0.25, 0.999],
                                       np.float32(0.7), np.array([0.2, 0.8], np.float32)]),
                         ("percentile", [50, 33.3, 100, [10, 90], np.array([5, 95.5])])):
            for q in qs:
                qa = np.asarray(q)
                plan = quantile_plan(n, dtype, func=func, q=tuple(qa.ravel().tolist()),
                                     q_shape=qa.shape, q_dtype=qa.dtype.str,
                                     weak=type(q) in (int, float), method=method)
                with np.errstate(all="ignore"):
                    want = np.asarray(getattr(np, func)(x, q, axis=-1, method=method))
                got = _quantiles_from_plan(rows, plan).reshape(qa.shape + (5,))
                what = f"{func}({q!r}, method={method!r}), n={n}"
                assert got.dtype == want.dtype, what
                np.testing.assert_array_equal(got, want, err_msg=what)
                assert np.array_equal(np.signbit(got), np.signbit(want)), what


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64], ids=str)
def test_quantile_plan_of_integers_gives_numpys_values(method, dtype):
    """Issue 13: for integer rows the plan and the kernel's arithmetic give NumPy's values
    too: ``b - a`` in the integers' dtype (wrapping past its range, as NumPy's does), then
    float64 (or the q array's float dtype when it is wide enough); the methods without
    interpolation keep the integers' dtype."""
    from tracearray.ops.sorting import quantile_plan
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    for n in (1, 2, 5, 33):
        x = rng.integers(info.min, info.max, (4, n), dtype=dtype, endpoint=True)
        if n >= 2:
            x[0, :2] = (info.min, info.max)   # a difference past the dtype's range
        rows = np.sort(x, axis=-1)
        for func, q in (("quantile", 0.5), ("quantile", [0.1, 0.75, 1.0]),
                        ("quantile", np.array([0.3], np.float32)), ("percentile", 62.5),
                        ("nanquantile", [0.2, 0.9])):
            qa = np.asarray(q)
            plan = quantile_plan(n, dtype, func=func, q=tuple(qa.ravel().tolist()),
                                 q_shape=qa.shape, q_dtype=qa.dtype.str,
                                 weak=type(q) in (int, float), method=method)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = np.asarray(getattr(np, func)(x, q, axis=-1, method=method))
                got = _quantiles_from_plan(rows, plan).reshape(qa.shape + (4,))
            what = f"{func}({q!r}, method={method!r}) {np.dtype(dtype)} n={n}"
            assert got.dtype == want.dtype, what
            np.testing.assert_array_equal(got, want, err_msg=what)


def _nanquantiles_from_plan(rows: np.ndarray, plan, nq: int) -> np.ndarray:
    """What the GPU's kernel computes for np.nanquantile: each sorted row's valid values
    counted (NaN sorts last), the plan's entry for that many, NaN for none. When the first
    row has none, NumPy's ``apply_along_axis`` makes its output in the values' dtype (the
    all-NaN row's result), so every value is rounded to it."""
    res = plan.dtype
    out = np.empty((nq, len(rows)), res)
    first_all_nan = len(rows) and not np.count_nonzero(~np.isnan(rows[0]))
    with np.errstate(all="ignore"):
        for r, row in enumerate(rows):
            valid = int(np.count_nonzero(~np.isnan(row)))
            for k in range(nq):
                if not valid:
                    out[k, r] = np.nan
                    continue
                e = (valid - 1) * nq + k
                a, b = row[plan.prev[e]], row[plan.next[e]]
                diff = res.type(b - a)
                out[k, r] = res.type(a) if plan.mode[e] == 0 else \
                    res.type(b) - diff * plan.t.dtype.type(plan.omt[e]) if plan.mode[e] == 2 \
                    else res.type(a) + diff * plan.t[e]
    return out.astype(rows.dtype).astype(res) if first_all_nan else out


@pytest.mark.parametrize("method", METHODS)
def test_nanquantile_plan_by_length_gives_numpys_values(method):
    """Issue 13: the plan for each row length 1..n at once (``lengths=True``, which the
    GPU's np.nanquantile / np.nanpercentile index by a row's count of valid values) has
    each length's entries exactly, and gives NumPy's nan* values bit for bit, all-NaN rows
    included."""
    from tracearray.ops.sorting import quantile_plan
    rng = np.random.default_rng(6)
    for dtype in (np.float32, np.float64):
        x = np.round(rng.standard_normal((9, 12)) * 3, 1).astype(dtype)
        x[0] = np.nan
        x[1, ::2] = np.nan
        x[2, 5:] = np.nan
        x[3, 1:] = np.nan
        x[4, ::3] = np.inf
        x[5, ::4] = -0.0
        rows = np.sort(x, axis=-1)
        for func, q in (("nanquantile", 0.4), ("nanquantile", [0.0, 0.5, 1.0]),
                        ("nanquantile", np.array([0.3, 0.9], np.float32)),
                        ("nanpercentile", 75), ("nanpercentile", [12.5, 99.0])):
            qa = np.asarray(q)
            attrs = dict(func=func, q=tuple(qa.ravel().tolist()), q_shape=qa.shape,
                         q_dtype=qa.dtype.str, weak=type(q) in (int, float), method=method)
            table = quantile_plan(12, dtype, lengths=True, **attrs)
            nq = qa.size
            for n in (1, 2, 7, 12):
                one = quantile_plan(n, dtype, **attrs)
                sl = slice((n - 1) * nq, n * nq)
                for field in ("prev", "next", "mode", "t", "omt"):
                    np.testing.assert_array_equal(getattr(table, field)[sl],
                                                  getattr(one, field), err_msg=field)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = np.asarray(getattr(np, func)(x, q, axis=-1, method=method))
            got = _nanquantiles_from_plan(rows, table, nq).reshape(qa.shape + (9,))
            what = f"{func}({q!r}, method={method!r}) {np.dtype(dtype)}"
            np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)
            assert np.array_equal(np.signbit(got), np.signbit(want)), what


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.float16, np.float32, np.float64],
                         ids=str)
def test_median_and_nanmedian(dtype):
    x = awkward((4, 6, 5), dtype, seed=13)
    for axis in (None, 0, -1, (0, 2)):
        check(lambda x: np.median(x, axis=axis), x, what=f"median {axis}")
        check(lambda x: np.median(x, axis=axis, keepdims=True), x, what=f"keepdims {axis}")
        check(lambda x: np.nanmedian(x, axis=axis), x, what=f"nanmedian {axis}")
    if np.dtype(dtype).kind == "f":
        allnan = x.copy()
        allnan[1] = np.nan
        check(lambda x: np.nanmedian(x, axis=1), allnan, what="all-NaN rows")
        check(lambda x: np.nanpercentile(x, [10, 50], axis=(1, 2), keepdims=True), allnan)


def test_order_statistics_fuse_and_empty_inputs():
    x = awkward((7, 20), np.float32, seed=14)

    def f(x):
        return np.median(np.abs(x) + 1.0, axis=-1) * 2.0

    check(f, x)
    kinds = [k.strategy for k in cpu(f).explain(x).kernels]
    assert kinds.count("external") == 1 and len(kinds) <= 3, kinds
    check(lambda x: np.nanquantile(x, 0.5), np.zeros((0, 3), np.float32))
    check(lambda x: np.median(x, axis=0), np.zeros((0, 3)))
    with pytest.raises(IndexError):
        cpu(lambda x: np.quantile(x, 0.5))(np.zeros(0))
    with pytest.raises(ValueError, match="Quantiles must be in the range"):
        cpu(lambda x: np.quantile(x, 1.5))(x)


# ------------------------------------------------------------------------------------------
# unique, isin and the set routines
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.int64, np.float16,
                                   np.float64], ids=str)
def test_unique_every_flag(dtype):
    x = awkward((6, 9), dtype, seed=15)
    check(lambda x: np.unique(x), x)
    check(lambda x: np.unique(x, return_index=True, return_inverse=True, return_counts=True), x)
    check(lambda x: np.unique(x.T, return_inverse=True), x)
    check(lambda x: np.unique(x, return_counts=True, equal_nan=False), x)
    check(lambda x: np.unique(x[:0]), x)


def test_unique_distinct_count_is_decided_by_the_data():
    f = cpu(lambda x: np.unique(x * 2, return_counts=True))
    for seed, n in [(0, 3), (1, 6), (2, 3)]:
        x = np.random.default_rng(seed).integers(0, n, 50).astype(np.float32)
        same(f(x), np.unique(x * 2, return_counts=True))


def test_isin_and_set_routines():
    a = awkward((5, 8), np.float64, seed=16)
    b = awkward((11,), np.float64, seed=17)
    ai = awkward((5, 8), np.int16, seed=18)
    bi = awkward((4,), np.int64, seed=19)
    for x, y in [(a, b), (ai, bi), (ai, b)]:
        check(lambda x, y: np.isin(x, y), x, y)
        check(lambda x, y: np.isin(x, y, invert=True, kind="sort"), x, y)
        check(lambda x, y: np.isin(x, y[:0]), x, y)
        check(lambda x, y: np.intersect1d(x, y), x, y)
        check(lambda x, y: np.intersect1d(x, y, return_indices=True), x, y)
        check(lambda x, y: np.union1d(x, y), x, y)
        check(lambda x, y: np.setdiff1d(x, y), x, y)
        check(lambda x, y: np.setxor1d(x, y), x, y)
    check(lambda x, y: np.isin(x, y, assume_unique=True), ai, np.arange(3))


def test_sort_round_trips_through_the_gpu_host_path():
    """On the GPU an external op without a device implementation runs on the host (copied
    there and back on the stream): checked here under the SIMT emulator."""
    from gpu_emulator import EmulatedDevice
    from tracearray.gpu import driver

    prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        x = awkward((6, 40), np.float32, seed=20)

        def f(x):
            return np.sort(x.T * 2 + 1, axis=0)[::-1] - 1, np.argsort(x, kind="stable")

        same(tracearray.compile(f, device="cuda")(x), f(x))
    finally:
        driver.set_device_for_testing(prev)


def test_large_sorts_run_rows_in_parallel_with_numpys_results(monkeypatch):
    """A sort of at least HOST_SPLIT_MIN elements is cut into pieces of rows for the pool;
    every row is still NumPy's own sort of that row (ties included)."""
    from tracearray.cpu import pool, runtime

    calls = []
    real = pool.parallel_for
    monkeypatch.setattr(pool, "parallel_for", lambda fn, chunks: (calls.append(len(chunks)),
                                                                 real(fn, chunks)))
    monkeypatch.setattr(pool, "num_threads", lambda: 4)
    x = awkward((300, 260), np.float32, seed=21)
    assert x.size >= runtime.HOST_SPLIT_MIN
    check(lambda x: np.argsort(x, axis=-1), x, what="rows")
    check(lambda x: np.sort(x, axis=0, kind="stable"), x, what="columns")
    check(lambda x: np.argpartition(x, 7, axis=-1), x, what="partition rows")
    assert calls and all(n > 1 for n in calls[-3:]), calls


def test_every_external_op_is_registered():
    """Each EXTERNAL primitive has its registration: result rules, a host function, and
    results one node each (the meta-test of the kind)."""
    from tracearray.ops import EXTERNALS, OPS, Kind

    external = {n for n, s in OPS.items() if s.kind is Kind.EXTERNAL}
    assert {"sort", "argsort", "partition", "argpartition", "order_statistic"} <= external
    for name in external:
        ext = EXTERNALS[name]
        assert callable(ext.host) and callable(ext.shapes) and callable(ext.dtypes), name


def test_array_api_unique_functions():
    x = awkward((5, 7), np.float64, seed=22)
    for fn in (np.unique_all, np.unique_counts, np.unique_inverse):
        check(lambda x: fn(x), x, what=fn.__name__)
    check(lambda x: np.unique_values(x), x, what="unique_values of floats: sorted")
    # integers come in the order of NumPy's hash table: NumPy's own function gives it
    check(lambda x: np.unique_values(x * 3), np.array([7, 3, 1, 2, 1, 9, 3, 5]))
    check(lambda x: np.unique(x, sorted=False), np.array([7, 3, 1, 2, 1, 9, 3, 5]))


def test_unique_along_an_axis():
    x = awkward((7, 3), np.float64, seed=23)
    x[1] = x[4]
    x[2] = x[5]
    x[3, :] = np.nan
    x[6, :] = np.nan
    check(lambda x: np.unique(x, axis=0), x)
    check(lambda x: np.unique(x, axis=0, equal_nan=False), x)
    check(lambda x: np.unique(x * 2, axis=-1, return_index=True, return_inverse=True,
                              return_counts=True), x.T.copy())
    check(lambda x: np.unique(x, axis=1, return_counts=True), awkward((3, 9), np.int8, seed=24))
    check(lambda x: np.unique(x, axis=0, return_inverse=True), np.zeros((3, 0)))


def test_weighted_quantiles():
    x = awkward((4, 9), np.float64, seed=25)
    w = np.random.default_rng(26).random((4, 9))
    check(lambda x, w: np.quantile(x, [0.2, 0.7], axis=1, method="inverted_cdf", weights=w),
          x, w)
    check(lambda x, w: np.percentile(x * 2, 30, axis=-1, method="inverted_cdf",
                                     weights=w[0]), x, w)
    with pytest.raises(ValueError, match="Only method 'inverted_cdf' supports weights"):
        cpu(lambda x, w: np.quantile(x, 0.2, axis=1, weights=w))(x, w)
    with pytest.raises(ValueError, match="non-negative(.|\n)*test_sort.py"):   # at run time
        cpu(lambda x, w: np.quantile(x, 0.2, axis=1, method="inverted_cdf",
                                     weights=w - 2))(x, w)


def test_unique_probe_takes_numpys_path_for_the_flags():
    """soak cpu-2026-12-02-f, program 1408: NumPy 2.4's float16 ``np.unique`` without flags
    (a hash table) returns duplicates its sort-based path (``return_inverse``) does not; the
    probe counted with the first and the call ran the second ("the number of distinct values
    changed"). The probe now asks NumPy with the call's own flags."""
    x = np.round(np.random.default_rng(3).uniform(-8, 8, 10363)).astype(np.float16)
    x[::97] = np.nan
    x[5::89] = -0.0
    for flags in ({}, {"return_inverse": True}, {"return_counts": True},
                  {"return_index": True, "return_inverse": True}):
        got = cpu(lambda v: np.unique(v, **flags))(x)
        same(got, np.unique(x, **flags))


@pytest.mark.parametrize("axis", [(0, 2), (0, 1), (1, 2), (), 1, (0, 1, 2), None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_nanquantile_of_a_2d_q_in_numpys_layout(axis, keepdims):
    """np.nanquantile / np.nanpercentile of a q of 2+ dimensions over several axes (or
    axis=()) lay the result out in NumPy's own way (q's last axis after the kept ones):
    the compiled function's result is NumPy's, shape and values (a soak found it reshaped)."""
    x = awkward((5, 7, 9), np.float64, seed=3)
    x[0, 0, :] = np.nan
    for q in (np.array([[0.1, 0.9], [0.5, 0.7]]), np.full((2, 3), 0.3), np.full((2, 1, 2), 0.4)):
        for fn, scale in ((np.nanquantile, 1), (np.nanpercentile, 100), (np.quantile, 1)):
            def f(x, q=q * scale, fn=fn):
                return fn(x, q, axis=axis, keepdims=keepdims)
            try:
                want = f(x)
            except ValueError:   # (np.quantile over several axes: q must be 0-d or 1-d)
                with pytest.raises(ValueError):
                    cpu(f)(x)
                continue
            same(cpu(f)(x), want, (fn.__name__, q.shape))


def test_nanquantile_layout_of_many_dimensions_is_refused_clearly():
    x = np.random.default_rng(0).random((2,) * 10)
    q = np.full((2, 2), 0.5)
    with pytest.raises(tracearray.UnsupportedOperationError, match="NumPy lays this result"):
        cpu(lambda x: np.nanquantile(x, q, axis=(0, 1)))(x)


GLOBAL_Q = np.array([0.1, 0.9])
GLOBAL_KTH = np.array([2, 5])


def test_a_global_q_or_kth_is_used_by_its_values():
    """A module-level q or kth array is read by its values while tracing (a call where it
    holds other values traces again), as one in a closure is."""
    global GLOBAL_Q

    def f(x):
        return np.quantile(x, GLOBAL_Q, axis=1), np.partition(x, GLOBAL_KTH, axis=1)

    g = cpu(f)
    x = awkward((4, 9), np.float64, seed=1)
    x = np.nan_to_num(x)
    saved = GLOBAL_Q.copy(), GLOBAL_KTH.copy()
    try:
        same(g(x), f(x))
        same(g(x), f(x))
        assert g.stats.traces == 1
        GLOBAL_Q[0], GLOBAL_KTH[1] = 0.3, 6      # in place: traced again
        same(g(x), f(x))
        assert g.stats.traces == 2
        GLOBAL_Q = np.array([0.5, 0.6, 0.7])      # rebound, another shape
        same(g(x), f(x))
        assert g.stats.traces == 3
    finally:
        GLOBAL_Q = saved[0]
        GLOBAL_KTH[:] = saved[1]


GLOBAL_P = np.array([10.0, 90.0])


def test_a_q_computed_from_a_global_array_is_used_by_its_values():
    def f(x):
        return np.quantile(x, GLOBAL_P / 100, axis=1), np.percentile(x, GLOBAL_P[::-1])

    g = cpu(f)
    x = np.arange(12.0).reshape(3, 4)
    saved = GLOBAL_P.copy()
    try:
        same(g(x), f(x))
        GLOBAL_P[0] = 30.0   # in place: traced again
        same(g(x), f(x))
        assert g.stats.traces == 2
    finally:
        GLOBAL_P[:] = saved


def test_a_q_or_kth_argument_is_staged_by_its_values():
    """q of the quantile functions and kth of partition passed as arguments (arrays, NumPy
    scalars) or computed from the data: each element is found by a probe at each call, as
    ``float(x)`` is (trace/build.py ``needed_value``), and a call with other values traces
    again; NumPy's errors for a q out of range are raised; a q of more than
    STAGED_NEEDED_MAX elements is refused by name."""
    from tracearray.trace.build import STAGED_NEEDED_MAX

    def quantiles(x, q):
        return (np.quantile(x, q), np.percentile(x, q * 100, axis=0),
                np.nanquantile(x, q, axis=1, method="nearest"))

    def partition(x, k):
        return np.partition(x, k, axis=1), np.argpartition(x, k, axis=0)

    def data_decides(x):     # q from the data itself: the fraction of positive values
        return np.quantile(x, np.mean(x > 0))

    x = awkward((6, 9), np.float64, seed=4)
    x = np.nan_to_num(x)
    xn = x.copy()
    xn[1, 3] = np.nan
    g = cpu(quantiles)
    for q in (np.array([0.1, 0.9]), np.float64(0.3), np.array([0.1, 0.9]), np.array(0.5),
              np.array([[0.2, 0.4], [0.6, 1.0]]), np.float32(0.25)):
        same(g(xn, q), quantiles(xn, q), repr(q))
    assert g.stats.traces >= 5
    before = g.stats.traces
    same(g(xn, np.array([0.1, 0.9])), quantiles(xn, np.array([0.1, 0.9])))
    assert g.stats.traces == before       # a value seen before: no new trace
    with pytest.raises(ValueError, match="Quantiles must be in the range"):
        g(x, np.array([0.5, 1.5]))
    with pytest.raises(tracearray.UnsupportedOperationError, match="q of more than"):
        g(x, np.linspace(0, 1, STAGED_NEEDED_MAX + 1))
    p = cpu(partition)
    for k in (np.array([2, 5]), np.array(3), np.array([0, -1])):
        same(p(x, k), partition(x, k), repr(k))
    d = cpu(data_decides)
    for seed in (1, 2):
        y = awkward((40,), np.float64, seed=seed)
        same(d(np.nan_to_num(y)), data_decides(np.nan_to_num(y)))


def test_partition_kth_of_no_positions_or_too_many_dimensions():
    """An empty integer kth leaves the order as it is (NumPy: a copy, and argpartition's
    positions in order); a kth of 2 dimensions raises NumPy's ValueError."""
    x = np.array([3.0, 1.0, 2.0, 0.0])
    empty = np.array([], int)
    check(lambda x, k: np.partition(x, k), x, empty)
    check(lambda x, k: np.argpartition(x, k), x, empty)
    check(lambda x, k: np.argpartition(np.ones((2, 3)) * x[:3], k, axis=0), x, empty)
    with pytest.raises(ValueError, match="too deep"):
        np.partition(x, np.array([[1, 2]]))
    with pytest.raises(ValueError, match="too deep"):
        cpu(lambda x, k: np.partition(x, k))(x, np.array([[1, 2]]))
