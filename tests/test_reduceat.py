"""``ufunc.reduceat`` (trace/dispatch.py ``_reduceat``): each segment is the ufunc's reduce
of its slice, every segment of a call in a few kernels (segments of similar length gathered
into one matrix), against NumPy on the CPU: segment rules (a next index not larger gives the
element alone, the last runs to the end), axes, dtypes, empty index lists, signed zeros,
NaNs, NumPy's errors, and indices that are only known at run time refused by name."""
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


def test_indices_read_at_run_time_are_refused_by_name():
    with pytest.raises(UnsupportedOperationError, match="add.reduceat with indices the "
                       "compiled function reads at run time.*static_argnums"):
        tracearray.compile(lambda x, i: np.add.reduceat(x, i))(X, np.array([0, 5]))
    with pytest.raises(UnsupportedOperationError, match="reduceat with indices"):
        tracearray.compile(lambda x: np.add.reduceat(x, [x.argmax()]))(X)


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
