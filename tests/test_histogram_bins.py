"""np.histogram and np.histogram_bin_edges with a bin estimator's name (``bins='auto'``,
'fd', 'doane', 'scott', 'rice', 'sturges', 'sqrt'; trace/composites/counting.py): the width
from the data in NumPy's arithmetic, the count a number the data decides (a probe, then a
trace with it), against NumPy on the CPU: floats, integers (widths of at least 1), constant
data, one and two elements, empty data, a range that truncates the data, an IQR of zero
(NumPy 2.3's bounded 'auto' and the rule before it), NumPy's errors."""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from tracearray.errors import UnsupportedOperationError
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(21)
DATA = {
    "normal": RNG.standard_normal(1000),
    "float32": RNG.standard_normal(300).astype(np.float32),
    "int64": RNG.integers(0, 50, 300),
    "int16 wide": RNG.integers(-30000, 30000, 300).astype(np.int16),
    "constant": np.ones(10),
    "two": RNG.standard_normal(2),
    "one": RNG.standard_normal(1),
    "empty": np.zeros(0),
    "zero IQR": np.concatenate([np.zeros(50), RNG.standard_normal(3)]),
    "numpy#28400": np.array([0, 1, 1, 1, 1, 1, np.e, np.e, np.e, np.e, np.e, np.e, 2]),
}
ESTIMATORS = ["auto", "fd", "doane", "scott", "rice", "sturges", "sqrt"]


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("data", list(DATA))
def test_estimated_bins_match_numpy(name, data):
    assert_matches_numpy(lambda a: np.histogram(a, bins=name), DATA[data], device="cpu")


@pytest.mark.parametrize("name", ["auto", "fd", "doane"])
def test_edges_density_and_ranges(name):
    x = DATA["normal"]
    for fn in (lambda a: np.histogram_bin_edges(a, bins=name),
               lambda a: np.histogram(a, bins=name, density=True),
               lambda a: np.histogram(a, bins=name, range=(-1, 1)),
               lambda a: np.histogram(a, bins=name, range=(5, 6)),
               lambda a: np.histogram_bin_edges(a.reshape(50, 20), bins=name, range=(0, 0))):
        assert_matches_numpy(fn, x, device="cpu")


def test_histogram_bin_edges_of_counts_and_edges():
    x = DATA["normal"]
    for fn in (lambda a: np.histogram_bin_edges(a, bins=5),
               lambda a: np.histogram_bin_edges(a.astype(np.int32), bins=4),
               lambda a: np.histogram_bin_edges(a, bins=[0.0, 1.0, 1.0, 4.0])):
        assert_matches_numpy(fn, x, device="cpu")


def test_a_new_count_traces_again_and_compiles_nothing():
    f = tracearray.compile(lambda a: np.histogram(a, bins="auto"))
    counts, compiled = set(), []
    rng = np.random.default_rng(5)
    for n in (100, 1000, 3000, 100):
        x = rng.standard_normal(n)
        got, want = f(x), np.histogram(x, bins="auto")
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        counts.add(len(want[0]))
        compiled.append(f.cache_info().compiles)
    assert len(counts) >= 3                      # bin counts the data decided ...
    assert f.cache_info().traces >= len(counts)  # ... each a trace of its own ...
    assert compiled[-1] == compiled[0], compiled   # ... and no kernel after the first call's


@pytest.mark.parametrize("fn, error, match", [
    (lambda a: np.histogram(a, bins="bogus"), ValueError, "not a valid estimator"),
    (lambda a: np.histogram(a, bins="auto", weights=a), TypeError, "weighted data"),
    (lambda a: np.histogram_bin_edges(a, bins=[3.0, 1.0]), ValueError, "monotonically"),
])
def test_numpys_errors(fn, error, match):
    x = DATA["normal"]
    with pytest.raises(error):
        fn(x)
    with pytest.raises(error, match=match):
        tracearray.compile(fn)(x)


def test_stone_is_refused_by_name():
    with pytest.raises(UnsupportedOperationError, match=r"np.histogram\(bins='stone'\)"):
        tracearray.compile(lambda a: np.histogram(a, bins="stone"))(DATA["normal"])


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_weights_over_explicit_edges(device, request):
    """Weights summed over explicit (and traced) edges as NumPy sums them: per block of
    65,536 in the data's sorted order, a running sum read at the edges (its rounding is
    that order's), density, repeated edges, float32 and integer weights, bool weights
    (NumPy's casting error), empty data."""
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    dev = "cuda" if device == "emulated" else "cpu"
    x, w = RNG.standard_normal(40), RNG.random(40)
    ties = np.round(x * 2), RNG.integers(0, 4, 40)
    for fn, args in [
            (lambda a, b: np.histogram(a, bins=[-2, -1, 0, 1, 2], weights=b), (x, w)),
            (lambda a, b: np.histogram(a, [-2, -0.5, 0, 3], weights=b, density=True), (x, w)),
            (lambda a, b: np.histogram(a, bins=[0, 1, 2, 2, 4], weights=b), ties),
            (lambda a, b: np.histogram(a.astype(np.float32), bins=np.array([-1, 0, 1.0]),
                                       weights=b.astype(np.float32)), (x, w)),
            (lambda a, b: np.histogram(a, bins=np.sort(a[:5]), weights=b), (x, w)),
            (lambda a, b: np.histogram(a, bins=[-1, 0, 1], weights=b > 0.5), (x, w)),
            (lambda a, b: np.histogram(a[:0], bins=[-1, 0, 1], weights=b[:0]), (x, w))]:
        assert_matches_numpy(fn, *args, device=dev)


def test_weights_over_explicit_edges_in_two_blocks():
    """80,000 values: NumPy's sums restart at each block of 65,536."""
    x, w = RNG.standard_normal(40), RNG.random(40)
    assert_matches_numpy(lambda a, b: np.histogram(np.tile(a, 2000), [-2, 0, 0.5, 2],
                                                   weights=np.tile(b, 2000)), x, w,
                         device="cpu")


@pytest.mark.parametrize("bins", ["auto", "fd", "sturges", 3])
def test_booleans_are_counted_as_uint8(bins):
    """NumPy converts boolean data to uint8 (with a RuntimeWarning): booleans cannot be
    subtracted, and its estimators subtract."""
    b = np.array([True, False, True, True, False])
    with pytest.warns(RuntimeWarning, match="Converting input from bool"):
        assert_matches_numpy(lambda a: np.histogram(a, bins=bins), b, device="cpu")


def test_histogram_of_a_traced_range():
    """(acceptance probe, sixteenth session) range=(x.min(), x.max()), (0, x.max()) or two
    percentiles was refused; NumPy's checks of the range run when the function runs."""
    x = np.random.default_rng(0).random(100).astype(np.float32)
    fns = [lambda x: np.histogram(x, 10, range=(x.min(), x.max())),
           lambda x: np.histogram(x, 5, range=(0, x.max())),
           lambda x: np.histogram(x, 4, range=tuple(np.percentile(x, [5, 95]))),
           lambda x: np.histogram(x, 3, range=(x.min(), x.min())),
           lambda x: np.histogram(x.astype(np.int8), 3, range=(0, x.max() * 10))]
    for fn in fns:
        want, got = fn(x), tracearray.compile(fn, device="cpu")(x)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
        assert got[1].dtype == want[1].dtype
    for bad in (lambda x: np.histogram(x, 3, range=(x.max(), x.min())),
                lambda x: np.histogram(x, 3, range=(0, x.max() / 0))):
        with np.errstate(all="ignore"), pytest.raises(ValueError):
            bad(x)
        with pytest.raises(ValueError):
            tracearray.compile(bad, device="cpu")(x)


def test_item_at_a_position():
    x = np.arange(6.0).reshape(2, 3)
    for fn in (lambda x: x.item(4), lambda x: x.item(-1), lambda x: x.item((1, 2)),
               lambda x: x.item(1, 0)):
        got, want = tracearray.compile(fn, device="cpu")(x), fn(x)
        assert type(got) is type(want) and got == want
    with pytest.raises(IndexError):
        tracearray.compile(lambda x: x.item(7), device="cpu")(x)


def test_item_at_a_traced_position_and_of_complex_values():
    x = np.arange(6.0).reshape(2, 3)
    for fn in (lambda x: x.item(np.argmax(x)), lambda x: x.item((2,)),
               lambda x: (x + 1j).item(3), lambda x: (x + 1j).item(1, 1)):
        got, want = tracearray.compile(fn, device="cpu")(x), fn(x)
        assert type(got) is type(want) and got == want


def test_too_many_bins_for_the_data_range_raises_as_numpy():
    x = (1 + np.arange(10) * 1e-7).astype(np.float32)
    fn = lambda x: np.histogram(x, 1000, range=(x.min(), x.max()))  # noqa: E731
    with pytest.raises(ValueError, match="Too many bins"):
        fn(x)
    with pytest.raises(ValueError, match="Too many bins"):
        tracearray.compile(fn, device="cpu")(x)
