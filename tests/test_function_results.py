"""NumPy-level functions against NumPy on the inputs probe helpers found them wrong on
(2026-12-07, seventeenth session): einsum's size-1 labels broadcast, the result dtypes of
np.gradient and np.apply_along_axis, NumPy integers passed as sizes, and NumPy's error
class for np.clip's out=."""
from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import tracearray
from tracearray.testing import assert_matches_numpy


def check(fn, *args):
    assert_matches_numpy(fn, *args, device="cpu")


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,ij->", [(1, 4), (4, 1)]),            # a size-1 label broadcast, then summed
    ("ijl,jlk->ik", [(2, 1, 4), (4, 1, 3)]),
    ("nd,nd->", [(4, 3), (1, 3)]),
    ("nd,nd->d", [(4, 3), (1, 3)]),
    ("ij,jk->ik", [(3, 1), (4, 2)]),
    ("ij,j->i", [(3, 4), (1,)]),
    ("i,i,i->", [(1,), (5,), (1,)]),
    ("bij,bjk->bik", [(1, 2, 3), (4, 3, 2)]),
])
def test_einsum_broadcasts_size_one_labels(subscripts, shapes):
    """A label of size 1 in one operand broadcasts against the others' size (NumPy's rule),
    also where it is summed: it was reshaped as if it had the first operand's size (a
    silently wrong sum, or a reshape error)."""
    rng = np.random.default_rng(len(subscripts))
    ops = [rng.standard_normal(s) for s in shapes]
    check(lambda *a: np.einsum(subscripts, *a), *ops)


def test_gradient_keeps_the_datas_float_dtype():
    """NumPy writes np.gradient into an array of f's dtype (float64 for integers): float32
    data with float64 coordinates or spacings stays float32, rounded once."""
    def f(y, t):
        return (np.gradient(y, t), np.gradient(y, t[1] - t[0]),
                np.gradient(y, np.float64(0.1), edge_order=2), np.gradient(y),
                np.gradient(y, t, edge_order=2))

    t = np.array([0.0, 1.0, 3.0, 7.0, 8.5])
    for y in (np.array([5, 200, 3, 255, 7], np.float32), np.array([5, 2, 3, 25, 7], np.float16),
              np.array([5, 200, 3, 255, 7], np.int32)):
        check(f, y, t)
        check(f, y, t.astype(np.int64))


def test_apply_along_axis_casts_into_the_first_results_dtype():
    """NumPy sizes apply_along_axis's result from the first slice's result and casts the
    later ones into it: an int first result truncates a later float one."""
    def f(x):
        return np.apply_along_axis(lambda r: r.sum() if r.sum() < 5 else r.sum() / 2, 1, x)

    check(f, np.array([[0, 1, 2], [3, 4, 6], [1, 1, 1]]))


@pytest.mark.parametrize("fn", [
    lambda x, k: sliding_window_view(x, k),
    lambda x, k: np.resize(x, k),
    lambda x, k: np.histogram(x, bins=k),
    lambda x, k: np.histogram_bin_edges(x, k),
    lambda x, k: np.fft.fftfreq(k) + x[:k],
    lambda x, k: np.hanning(k) * x[:3],
])
def test_numpy_integers_passed_as_sizes(fn):
    """A NumPy integer argument (a traced 0-d value) where NumPy's code needs a count is
    staged by its value, as int() of it is (it raised from inside NumPy's code)."""
    x = np.linspace(-1.0, 2.0, 10)
    for k in (np.int64(3), np.int32(3), np.int64(5)):
        check(fn, x, k)


def test_clip_into_an_out_it_cannot_cast_to_raises_numpys_class():
    f = lambda x, o: np.clip(x, 0, 255, out=o)   # noqa: E731
    with pytest.raises(np._core._exceptions._UFuncOutputCastingError, match="'clip'"):
        tracearray.compile(f)(np.arange(6), np.zeros(6, np.uint8))


def test_dot_into_out():
    """np.dot(a, b, out=o) writes the product into o (an argument: written back; an array
    the function made) and raises NumPy's errors for an out of another dtype, number of
    dimensions or shape."""
    def into_argument(a, b, o):
        r = np.dot(a, b, out=o)
        return r + 1, r is o

    a, b = np.ones((3, 4)), np.arange(20.0).reshape(4, 5)
    o = np.zeros((3, 5))
    got, same = tracearray.compile(into_argument)(a, b, o)
    assert same
    np.testing.assert_array_equal(o, a @ b)
    np.testing.assert_array_equal(got, a @ b + 1)
    check(lambda a, b: np.dot(a, b, out=np.empty((3, 5))) * 2, a, b)
    check(lambda a, b: np.dot(a[0], b[:, 0], out=np.empty(())), a, b)
    f = tracearray.compile(into_argument)
    for bad, match in ((np.zeros((3, 5), np.float32), "not acceptable"),
                       (np.zeros((3, 6)), "wrong dimensions"), (np.zeros(15), "not acceptable")):
        with pytest.raises(ValueError, match=match):
            into_argument(a, b, bad.copy())
        with pytest.raises(ValueError, match=match):
            f(a, b, bad)


@pytest.mark.parametrize("fn, k", [
    (lambda x, k: np.pad(x, k), np.int64(2)),
    (lambda x, k: np.pad(x, ((k, 1), (0, k)), mode="reflect"), np.int32(1)),
    (lambda x, k: np.pad(x, k, mode="edge"), np.array([[1, 2], [0, 1]])),
    (lambda x, k: np.pad(x, k, mode="mean", stat_length=2), np.int64(1)),
])
def test_pad_widths_passed_in(fn, k):
    """np.pad's widths from NumPy integers or a small array passed in (traced): staged by
    their values (they were refused as widths the data decides)."""
    check(fn, np.arange(12.0).reshape(3, 4), k)


def test_numpy_integer_sizes_keep_numpys_arithmetic():
    """A staged NumPy integer stays a NumPy integer: fftfreq of np.int64(0) divides by zero
    as NumPy does (an empty result), of np.uint8(10) wraps as NumPy's uint8 arithmetic
    does."""
    f = lambda x, k: np.fft.fftfreq(k) + x   # noqa: E731
    with np.errstate(all="ignore"):
        check(f, np.float64(1.0), np.int64(0))
        check(f, np.float64(1.0), np.uint8(10))


def test_average_returned_weight_sum_is_writeable():
    """np.average(..., returned=True)'s sum of weights is a writeable array, as NumPy's
    (a broadcast view came back read-only)."""
    f = lambda X, w: np.average(X, axis=0, weights=w, returned=True)   # noqa: E731
    X, w = np.random.default_rng(1).random((5, 3)), np.random.default_rng(2).random(5)
    got = tracearray.compile(f)(X, w)
    assert got[1].flags.writeable
    check(f, X, w)


def test_spectral_norm_of_an_empty_matrix_is_zero():
    for f in (lambda a: np.linalg.norm(a, ord=2, axis=(0, 1)), lambda a: np.linalg.norm(a, 2)):
        check(f, np.zeros((0, 3)))
        check(f, np.random.default_rng(3).random((4, 3)))


def test_histogram2d_of_non_finite_data_raises_numpys_error():
    """np.histogram2d / histogramdd autodetect each dimension's range from the data; a NaN
    or an infinity there raises NumPy's ValueError when the compiled function runs (NumPy's
    own code formatted the traced ends into its message: a refusal instead)."""
    r = np.random.default_rng(0)
    x, y = r.standard_normal(50), r.standard_normal(50)
    for f in (lambda x, y: np.histogram2d(x, y, bins=4),
              lambda x, y: np.histogramdd(np.stack([x, y], 1), bins=(3, 2)),
              lambda x, y: np.histogram2d(x, y, bins=3, range=[None, (-1, 1)]),
              lambda x, y: np.histogram2d(x * 0 + 1, y, bins=3)):
        check(f, x, y)
    bad = x.copy()
    bad[3] = np.nan
    g = tracearray.compile(lambda x, y: np.histogram2d(x, y, bins=4))
    g(x, y)
    with pytest.raises(ValueError, match="not finite"):
        g(bad, y)


def test_ddof_and_diagonals_passed_in_as_numpy_numbers():
    """var / std / nanvar / nanstd with ddof or correction a NumPy number argument, and
    np.tril / triu's k: staged by value (an internal error, and a refusal, before)."""
    r = np.arange(5.0)
    rn = r.copy()
    rn[2] = np.nan
    for f, a in ((lambda r, d: r.std(ddof=d), r), (lambda r, d: np.var(r, ddof=d), r),
                 (lambda r, d: np.std(r, correction=d), r),
                 (lambda r, d: np.nanvar(r, ddof=d), rn), (lambda r, d: np.nanstd(r, ddof=d), rn)):
        for d in (np.int64(1), np.float64(0.5)):
            check(f, a, d)
    for f in (lambda x, k: np.tril(np.ones((3, 3)), k) * x,
              lambda x, k: np.triu(np.ones((3, 4)) * x, k=k)):
        for k in (np.int64(1), np.int64(-1)):
            check(f, np.float64(2.0), k)


@pytest.mark.parametrize("fn", [
    lambda x: np.fmax.accumulate(x, axis=1), lambda x: np.fmin.accumulate(x, axis=1),
    lambda x: np.fmax.accumulate(x), lambda x: np.logical_or.accumulate(x > 1, axis=1),
    lambda x: np.logical_and.accumulate(np.nan_to_num(x), axis=1),
    lambda x: np.logical_or.accumulate(np.array([0, 2, 0])),
    lambda x: np.fmax.accumulate(np.array([3, 1, 5])),
])
def test_fmax_fmin_and_logical_accumulates(fn):
    """A running peak that skips NaN (fmax / fmin .accumulate), a flag that stays set
    (logical_or / logical_and .accumulate): by the maximum / minimum scans (refused
    before)."""
    x = np.array([[np.nan, 1.0, np.nan, 0.5, 3.0], [2.0, np.nan, -np.inf, np.nan, 1.0]])
    check(fn, x)


def test_round_as_numpys_pyarray_round():
    """np.round into a wider out= scales in the input's own loop (float32 in float32, an
    integer's division in float64), then rounds and scales back in out's dtype; the power
    of ten is NumPy's (1e9 multiplied by 10.0 past 10**9: not 10.0 ** 23); decimals past a
    C int raise NumPy's OverflowError."""
    x = np.array([2.675, 0.125, 3.3e38], np.float32)
    r = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 100
    wide = lambda a: np.round(a, 2, out=np.empty(a.shape, np.float64))   # noqa: E731
    with np.errstate(all="ignore"):
        check(wide, x)
        check(wide, r)
        ints = np.random.default_rng(1).integers(-2**40, 2**40, 1000)
        check(lambda a: np.round(a, -1, out=np.empty(a.shape, np.float32)), ints)
        big = np.array([0.1, 7e22, 1.234e25])
        for d in (9, 22, 23, 30, 36, -23, -25, -30, 400):
            check(lambda a, d=d: np.round(a, d), big)
    with pytest.raises(OverflowError):
        tracearray.compile(lambda a: np.round(a, 2**40))(big)
