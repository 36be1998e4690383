"""np.pad's modes (and np.tile / np.resize, copies read as one broadcast) against NumPy, on
the CPU and the emulated GPU: each axis padded in turn
(an axis's pad sees the earlier axes' pads), widths, statistic lengths and end values in
NumPy's forms (a scalar, one pair, a pair per axis), integer statistics rounded, and NumPy's
errors."""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(11)
ARRAYS = {"float64": RNG.standard_normal((5, 7)),
          "int64": RNG.integers(-50, 50, (4, 6)),
          "float32-3d": RNG.standard_normal((3, 4, 5)).astype(np.float32),
          "uint8": RNG.integers(0, 255, (4, 5), dtype=np.uint8)}


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    if request.param == "cuda":
        request.getfixturevalue("emulated_gpu")
    return request.param


def arrays(device):
    """Every dtype on the CPU; on the (slow) emulated GPU a float and an integer one."""
    names = ARRAYS if device == "cpu" else ("float32-3d", "uint8")
    return [ARRAYS[n] for n in names]


@pytest.mark.parametrize("mode", ["maximum", "minimum", "mean", "median"])
def test_statistic_modes(device, mode) -> None:
    """The whole axis, stat_length pairs per axis (one longer than the axis), a rounded
    scalar length, and NaN inside the statistic's region."""
    for x in arrays(device):
        lead = ((1, 3),) + ((0, 2),) * (x.ndim - 1)
        lengths = ((2, 1),) + ((3, 30),) * (x.ndim - 1)

        def f(a, lead=lead, lengths=lengths):
            return (np.pad(a, 2, mode=mode),
                    np.pad(a, lead, mode=mode, stat_length=lengths),
                    np.pad(a, (2, 1), mode=mode, stat_length=1.6))
        assert_matches_numpy(f, x, device=device)
    assert_matches_numpy(lambda a: np.pad(np.where(a > 1, np.nan, a), 1, mode=mode),
                         ARRAYS["float64"], device=device)


def test_linear_ramp(device) -> None:
    """Ramps to the default 0, to end values per side and per axis (a float end value in an
    integer array floored as NumPy's linspace does), from an edge of one item."""
    for x in arrays(device):
        def f(a):
            return (np.pad(a, 2, mode="linear_ramp"),
                    np.pad(a, ((3, 1),) + ((1, 4),) * (a.ndim - 1), mode="linear_ramp",
                           end_values=(5, -3)),
                    np.pad(a, 2, mode="linear_ramp",
                           end_values=[(1, 2)] + [(3.5, 4)] * (a.ndim - 1)))
        assert_matches_numpy(f, x, device=device)
    assert_matches_numpy(lambda a: np.pad(a[:, :1], 3, mode="linear_ramp", end_values=9),
                         ARRAYS["float64"], device=device)


def test_argument_forms_and_empty_arrays() -> None:
    """Widths as a (2, 1) column and as floats, constant values per axis, statistics of an
    empty array along an axis that is not padded, and NumPy's errors."""
    x = ARRAYS["float64"]
    for f in (lambda a: np.pad(a, [[1], [2]], mode="edge"),
              lambda a: np.pad(a, 1.0),
              lambda a: np.pad(a, 2, constant_values=((1, 2), (3, 4))),
              lambda a: np.pad(a[:0], ((0, 0), (1, 2)), mode="maximum"),
              lambda a: np.pad(a, 1, mode="mean", stat_length=0),
              lambda a: np.pad(a, ((0, 0), (1, 1)), mode="maximum",
                               stat_length=((0, 0), (1, 1)))):
        assert_matches_numpy(f, x)
    for f, what in [(lambda a: np.pad(a, ((0, 0), (1, 1)), mode="maximum", stat_length=0),
                     "stat_length of 0"),
                    (lambda a: np.pad(a, 1, mode="mean", stat_length=-1), "negative"),
                    (lambda a: np.pad(a[:0], 1, mode="linear_ramp"), "empty axis"),
                    (lambda a: np.pad(a[:0], 1, mode="median"), "empty axis")]:
        with pytest.raises(ValueError, match=what):
            f(x)
        with pytest.raises(ValueError, match=what):
            tracearray.compile(f)(x)


def test_tile_and_resize_read_one_broadcast() -> None:
    """np.tile and np.resize with many copies are one broadcast read: a join of 2,000
    copies compiled 4,000 kernels (26 s); values as NumPy's, empty and zero cases."""
    from tracearray.cpu.jit import get_jit
    x = np.arange(40.0)
    before = get_jit().stats.compiles
    for f in (lambda a: np.tile(a, 2000), lambda a: np.tile(a.reshape(5, 8), (3, 1, 2)),
              lambda a: np.tile(a[:0], 3), lambda a: np.tile(a, 0),
              lambda a: np.resize(a, 100000), lambda a: np.resize(a.reshape(5, 8), (3, 7)),
              lambda a: np.resize(a, 0), lambda a: np.resize(a[:0], (2, 2)),
              lambda a: np.resize(a > 3, np.int64(50))):
        assert_matches_numpy(f, x, device="cpu")
    with pytest.raises(ValueError, match="non-negative"):
        tracearray.compile(lambda a: np.resize(a, (-1, 2)))(x)
    assert get_jit().stats.compiles - before < 100


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
def test_odd_reflections_match_numpy_for_every_width(mode) -> None:
    """reflect_type='odd' (each reflected chunk 2 * edge - chunk) was ignored: an even
    reflection came back. Pads wider than the axis reflect in NumPy's chunks, whose edges
    the odd values depend on; widths 0-13 over axes of 1-5, both reflect types."""
    for n in (1, 2, 3, 5):
        x = (np.arange(2 * n).reshape(2, n) ** 2 % 7 - 3).astype(np.float64)
        for before, after in ((0, 1), (2, 0), (2, 3), (7, 4), (13, 11)):
            for kind in ("even", "odd"):
                assert_matches_numpy(lambda x: np.pad(x, ((1, 0), (before, after)), mode=mode,
                                                      reflect_type=kind), x, device="cpu")


def test_complex_pads_each_part_alone() -> None:
    """Complex values: every mode linear in the values pads the two parts alone (constant
    and ramp end values split into parts); maximum / minimum / median, which compare
    complex values as pairs, are refused by name."""
    z = np.array([[-1.5, 0.5j, 2.25], [1 + 1j, 2 - 3j, 0]], np.complex64)
    for fn in (lambda z: np.pad(z, 2, constant_values=1 + 1j),
               lambda z: np.pad(z, ((1, 2), (0, 1)), constant_values=((1, 2j), (3, 4.5))),
               lambda z: np.pad(z, ((1, 0), (2, 1)), mode="edge"),
               lambda z: np.pad(z, 2, mode="symmetric", reflect_type="odd"),
               lambda z: np.pad(z, 3, mode="wrap"), lambda z: np.pad(z, 1, mode="mean"),
               lambda z: np.pad(z, 2, mode="linear_ramp", end_values=(1j, 2))):
        assert_matches_numpy(fn, z, device="cpu")
    with pytest.raises(tracearray.errors.UnsupportedOperationError, match="maximum"):
        tracearray.compile(lambda z: np.pad(z, 1, mode="maximum"), device="cpu")(z)


def test_pad_with_a_traced_constant_value():
    # np.pad(x, 1, constant_values=x.mean()) (probe session 4: refused with a message about
    # np.copyto)
    def f(x):
        return np.pad(x, 1, constant_values=x.mean()), np.pad(x, (2, 1),
                                                               constant_values=(x[0], 7))

    x = np.array([1.0, 2.0, 6.0])
    for got, want in zip(tracearray.compile(f, device="cpu")(x), f(x)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint64, np.float32, bool])
def test_constant_values_are_stored_as_numpy_stores_them(dtype):
    """One or two constant values are NumPy scalars when NumPy's pad stores them (-2 into
    uint8 is 254; a probe found OverflowError), more are Python numbers (out of range:
    OverflowError, as NumPy raises)."""
    a = np.arange(3).astype(dtype)
    for cv in (-2, 300, 200, np.int64(-2), (1, -3), [[1, 2]], 1.5, -1, 2**64 - 1):
        def f(a, cv=cv):
            return np.pad(a, 1, constant_values=cv)
        try:
            want = f(a)
        except OverflowError:
            with pytest.raises(OverflowError):
                tracearray.compile(f, device="cpu")(a)
            continue
        got = tracearray.compile(f, device="cpu")(a)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
