"""``ufunc.reduceat`` (trace/dispatch.py ``_reduceat``): each segment is the ufunc's reduce
of its slice, every segment of a call in a few kernels (segments of similar length gathered
into one matrix), against NumPy on the CPU: segment rules (a next index not larger gives the
element alone, the last runs to the end), axes, dtypes, empty index lists, signed zeros,
NaNs, NumPy's errors; indices only known at run time folded by ``ufunc.at`` (decreasing
ones refused at the call by name)."""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from tracearray.errors import UnsupportedOperationError
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(7)
X = RNG.standard_normal(40)
M = RNG.standard_normal((6, 30)).astype(np.float32)
CUBE = RNG.standard_normal((3, 50, 4))


def check(fn, *args):
    assert_matches_numpy(fn, *args, device="cpu")


CASES = {
    "increasing": (lambda x: np.add.reduceat(x, [0, 3, 7, 20]), X),
    "repeated and decreasing": (lambda x: np.add.reduceat(x, [5, 5, 2, 30, 39]), X),
    "product": (lambda x: np.multiply.reduceat(x, [0, 4, 1, 5]), X),
    "maximum": (lambda x: np.maximum.reduceat(x, [0, 3, 3, 7]), X),
    "minimum, last axis": (lambda x: np.minimum.reduceat(x, [0, 13], axis=-1), M),
    "sum along rows": (lambda x: np.add.reduceat(x, [0, 10, 20], axis=1), M),
    "axis as a 1-tuple": (lambda x: np.add.reduceat(x, [0, 13], axis=(1,)), M),
    "float64 sums of float32": (lambda x: np.add.reduceat(x, [0, 2], axis=0, dtype=np.float64),
                                M),
    "middle axis": (lambda x: np.add.reduceat(x, [0, 3, 1, 49, 17], axis=1), CUBE),
    "no indices": (lambda x: np.add.reduceat(x, np.array([], dtype=np.intp)), X),
    "int8 sums widen": (lambda x: np.add.reduceat((x * 60).astype(np.int8), [0, 13, 17]), X),
    "bool sums": (lambda x: np.add.reduceat(x > 0, [0, 13, 17]), X),
    "logical or": (lambda x: np.logical_or.reduceat(x > 1, [0, 13, 17]), X),
    "bitwise xor": (lambda x: np.bitwise_xor.reduceat((x * 100).astype(np.int64),
                                                      [0, 5, 1, 39]), X),
    "NaN in max and fmax": (lambda x: (np.maximum.reduceat(np.where(x > 1, np.nan, x),
                                                           [0, 5, 1, 39]),
                                       np.fmax.reduceat(np.where(x > 1, np.nan, x),
                                                        [0, 5, 1, 39])), X),
    "reversed view": (lambda x: np.add.reduceat(x[::-1], [0, 1, 2, 9]), X),
    "indices from np.arange": (lambda x: np.add.reduceat(x, np.arange(0, 40, 8)), X),
    "float indices are cast": (lambda x: np.add.reduceat(x, [0.5, 7.9]), X),
    "one element": (lambda x: np.add.reduceat(x[:1], [0]), X),
    "negative zeros keep their sign": (lambda x: np.add.reduceat(x, [0, 2, 3]),
                                       np.array([-0.0, -0.0, 1.0, -0.0])),
    "with out=": (lambda x: np.add.reduceat(x, [0, 9], out=np.zeros(2)), X),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reduceat_matches_numpy(name):
    fn, x = CASES[name]
    check(fn, x)


def test_many_segments_of_every_length_run_in_few_kernels():
    x = RNG.standard_normal(20000)
    cuts = np.sort(RNG.choice(20000, 300, replace=False))
    cuts[0] = 0
    idx = tuple(int(i) for i in np.concatenate([cuts, [5, 3, 19999]]))
    f = lambda x: np.maximum.reduceat(x, idx) + np.add.reduceat(x, idx)   # noqa: E731
    check(f, x)
    assert len(tracearray.compile(f).explain(x).kernels) <= 40   # not one kernel per segment
    g = lambda x, i: np.add.reduceat(x, i)      # noqa: E731  (a static argument: a tuple)
    assert np.allclose(tracearray.compile(g, static_argnums=1)(x, idx), g(x, idx))


@pytest.mark.parametrize("fn, error, match", [
    (lambda x: np.add.reduceat(x, [-1]), IndexError, r"index -1 out-of-bounds in add.reduceat"),
    (lambda x: np.add.reduceat(x, [40]), IndexError, r"index 40 out-of-bounds"),
    (lambda x: np.add.reduceat(x.reshape(4, 10), [0], axis=None), ValueError,
     "reduceat does not allow multiple axes"),
    (lambda x: np.add.reduceat(x, 3), ValueError, "too small depth"),
    (lambda x: np.add.reduceat(x, [[0, 1]]), ValueError, "setting an array element"),
])
def test_numpys_errors(fn, error, match):
    with pytest.raises(error):
        fn(X)
    with pytest.raises(error, match=match):
        tracearray.compile(fn)(X)


RUN_TIME = {   # (function of (x, indices), x, indices passed as an argument)
    "increasing": (lambda x, i: np.add.reduceat(x, i), X, np.array([0, 3, 7, 20])),
    "repeated": (lambda x, i: np.add.reduceat(x, i), X, np.array([5, 5, 5, 30, 39, 39])),
    "first index past 0": (lambda x, i: np.maximum.reduceat(x, i), X, np.array([7, 9])),
    "every element": (lambda x, i: np.multiply.reduceat(x, i), X, np.arange(40)),
    "one index": (lambda x, i: np.minimum.reduceat(x, i), X, np.array([39])),
    "rows of a matrix": (lambda x, i: np.add.reduceat(x, i, axis=1), M, np.array([0, 10, 10])),
    "middle axis, float64 sums": (lambda x, i: np.add.reduceat(x, i, axis=1, dtype=np.float64),
                                  CUBE.astype(np.float32), np.array([0, 1, 17, 49])),
    "int8 sums widen": (lambda x, i: np.add.reduceat((x * 60).astype(np.int8), i), X,
                        np.array([0, 13, 17])),
    "bool sums and logical folds": (lambda x, i: (np.add.reduceat(x > 0, i),
                                                  np.logical_and.reduceat(x > -1, i),
                                                  np.logical_xor.reduceat(x > 0, i)),
                                    X, np.array([0, 2, 2, 30])),
    "bitwise folds": (lambda x, i: (np.bitwise_and.reduceat((x * 100).astype(np.int16), i),
                                    np.bitwise_or.reduceat((x * 100).astype(np.uint8), i)),
                      X, np.array([1, 5, 39])),
    "NaN in max and fmax": (lambda x, i: (np.maximum.reduceat(np.where(x > 1, np.nan, x), i),
                                          np.fmax.reduceat(np.where(x > 1, np.nan, x), i),
                                          np.fmin.reduceat(np.full_like(x, np.nan), i)),
                            X, np.array([0, 5, 6, 39])),
    "negative zeros keep their sign": (lambda x, i: np.add.reduceat(x, i),
                                       np.array([-0.0, -0.0, 1.0, -0.0]), np.array([0, 2, 3])),
    "no indices": (lambda x, i: np.add.reduceat(x, i), X, np.array([], dtype=np.intp)),
    "int32 indices": (lambda x, i: np.add.reduceat(x, i), X, np.array([0, 8], np.int32)),
}


@pytest.mark.parametrize("name", list(RUN_TIME))
def test_indices_read_at_run_time_match_numpy(name):
    """Indices that are an argument (or data the function computes): every element from the
    first index on is folded in order into the segment of the last index not above it
    (``_reduceat_traced``); NumPy's values, dtypes and shapes, an index equal to the next
    taking its element alone."""
    fn, x, idx = RUN_TIME[name]
    check(fn, x, idx)


def test_group_by_with_segment_starts_from_the_data():
    """The sort-based group-by: segment starts from np.flatnonzero of the sorted keys, one
    trace for every key set and size."""
    def groupby(k, v):
        o = np.argsort(k, kind="stable")
        ks, vs = k[o], v[o]
        start = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        return ks[start], np.add.reduceat(vs, start), np.maximum.reduceat(vs, start)

    f = tracearray.compile(groupby)
    rng = np.random.default_rng(3)
    for n, groups in ((1, 1), (7, 3), (100, 4), (1000, 50)):
        k, v = rng.integers(0, groups, n), rng.standard_normal(n)
        got, want = f(k, v), groupby(k, v)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-12)


def test_run_time_indices_out_of_range_or_decreasing_raise():
    """Indices out of range raise NumPy's IndexError at the call; indices that decrease
    (segments that overlap, which NumPy allows) are refused at the call by name, never a
    wrong result."""
    f = tracearray.compile(lambda x, i: np.add.reduceat(x, i))
    for bad in (np.array([0, 40]), np.array([-1, 3])):
        with pytest.raises(IndexError):
            np.add.reduceat(X, bad)
        with pytest.raises(IndexError, match="out-of-bounds in add.reduceat"):
            f(X, bad)
    with pytest.raises(UnsupportedOperationError, match="indices read at run time that "
                       "decrease"):
        f(X, np.array([5, 2]))
    np.testing.assert_allclose(f(X, np.array([2, 5])), np.add.reduceat(X, [2, 5]))


def test_a_ufunc_without_a_reduction_is_refused():
    with pytest.raises(UnsupportedOperationError, match="np.subtract.reduceat"):
        tracearray.compile(lambda x: np.subtract.reduceat(x, [0, 3]))(X)


def test_axis_none_of_a_vector_is_its_axis():
    """NumPy's reduceat takes axis=None for a vector (its one axis) and refuses it for more
    dimensions."""
    np.testing.assert_array_equal(
        tracearray.compile(lambda x: np.add.reduceat(x, [0, 2], axis=None))(X),
        np.add.reduceat(X, [0, 2], axis=None))
    with pytest.raises(ValueError, match="multiple axes"):
        tracearray.compile(lambda x: np.add.reduceat(x, [0], axis=None))(X.reshape(2, -1))


def test_run_time_segments_of_float16_and_float32_keep_numpys_precision():
    """NumPy's float16 loops keep their running sum and product in float32, and its float32
    sums are pairwise: a run-time reduceat accumulates float16 / float32 sums in float64
    and float16 products in float32 (an in-order float32 sum of 500,000 terms of 0.1 was
    0.35 % off; float16 sums stopped at 2048 and 300 * 300 overflowed)."""
    f = lambda x, i: np.add.reduceat(x, i)         # noqa: E731
    g = lambda x, i: np.multiply.reduceat(x, i)    # noqa: E731
    check(f, np.ones(5000, np.float16), np.array([0, 4000]))
    check(g, np.array([300, 300, 1 / 300, 1 / 300], np.float16), np.array([0]))
    check(f, np.full(10**6, 0.1, np.float32), np.array([0, 500000]))
    check(f, RNG.standard_normal(100_000).astype(np.float32), np.array([0, 10, 50_000]))
    check(lambda x, i: np.multiply.reduceat((x * 10).astype(np.uint8), i, dtype=np.float16),
          np.array([0.0, 1.2, 3.5, 0.3]), np.array([0, 2]))
    for bad in (np.array([0.0, 2.0]), np.array([0, 2], np.uint64)):   # NumPy casts safely
        with pytest.raises(TypeError, match="according to the rule 'safe'"):
            np.add.reduceat(X, bad)
        with pytest.raises(TypeError, match="according to the rule 'safe'"):
            tracearray.compile(f)(X, bad)
