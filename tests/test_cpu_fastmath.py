"""The inline math sequences of the CPU backend (``tracearray/cpu/fastmath.py``).

float32 ``np.tanh`` is straight-line code instead of glibc's ``tanhf`` (issue 17: gelu_tanh).
It must stay in the registry's accuracy class of tanh: within the comparator's bound of the
"transcendental" family (``TOLERANCES``, 4 ulp of NumPy's float32 result) everywhere, and
within NumPy's own tolerance (the data set's column, 2 ulp) of NumPy's validation data
(the file NumPy installs with its own tests, ``numpy/_core/tests/data``); signed zeros, infinities, NaN, subnormals and the saturation to +-1 exactly
as NumPy gives them. float16 goes through the float32 sequence and one rounding; float64 still
calls glibc's ``tanh`` and is checked on the same data.

float32 ``np.exp`` is straight-line code too (issue 17: softmax and logsumexp): the same
checks, plus underflow into the subnormals and to 0, and overflow to inf, at NumPy's places.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray.ops import OPS
from tracearray.testing.compare import TOLERANCES

DATA_DIR = Path(np.__file__).parent / "_core" / "tests" / "data"
DATA = DATA_DIR / "umath-validation-set-tanh.csv"
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
UINT = {F32: np.uint32, F64: np.uint64}


@pytest.fixture(scope="module")
def tanh():
    return tracearray.compile(np.tanh, device="cpu")


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Units in the last place between two arrays of one float dtype: the distance of their
    positions on the ordered line of floats (signed zeros 0 apart, NaN against NaN 0)."""
    signed = {F16: np.int16, F32: np.int32, F64: np.int64}[got.dtype]

    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.view(signed).astype(np.int64)
        return np.where(i < 0, -(i & np.iinfo(signed).max), i)

    a, b = ordered(got), ordered(want)
    # exact in int64 where the signs agree; across zero the sum of the magnitudes (as floats:
    # it may not fit in int64, and such a result is far off anyway)
    same = (a < 0) == (b < 0)
    d = np.where(same, np.abs(np.where(same, a - b, 0)).astype(np.float64),
                 np.abs(a.astype(np.float64)) + np.abs(b.astype(np.float64)))
    return np.where(np.isnan(got) & np.isnan(want), 0.0, d)


def validation_rows(dtype: np.dtype, data: Path = DATA):
    with data.open() as f:
        rows = [r for r in csv.DictReader(f) if not r["dtype"].startswith("#")]
    rows = [r for r in rows if np.dtype(r["dtype"].removeprefix("np.")) == dtype]
    u = UINT[dtype]
    x = np.array([int(r["input"], 16) for r in rows], dtype=u).view(dtype)
    want = np.array([int(r["output"], 16) for r in rows], dtype=u).view(dtype)
    return x, want, max(int(r["ulperrortol"]) for r in rows)


def test_the_registry_keeps_tanh_in_the_transcendental_family():
    assert OPS["tanh"].accuracy.family == "transcendental"
    assert TOLERANCES.ulps("transcendental", F32) == 4


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_numpy_validation_data_within_its_tolerance(tanh, dtype):
    x, want, tol = validation_rows(dtype)
    assert x.size > 700 and tol == 2
    got = tanh(x)
    assert got.dtype == dtype
    worst = ulp_distance(got, want)
    assert worst.max() <= tol, f"x = {x[worst.argmax()]!r}: {worst.max():.0f} ulp"


SPECIAL32 = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan,
                      1.4e-45, -1.4e-45, 1.1754942e-38, 1.1754944e-38, -1e-30, 1e-8, 3e-4,
                      0.17, 0.1733, 0.35, 0.55, 1.0, 2.5, 9.0, 9.01, 9.02, 9.03, 10.0, 10.5, 20.0,
                      88.7, 89.0, 1e30, 3.4028235e38, -3.4028235e38, -9.02, -5.0], dtype=F32)


def test_special_values_as_numpy(tanh):
    got, want = tanh(SPECIAL32), np.tanh(SPECIAL32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
    tiny = np.abs(SPECIAL32) < 1e-7            # tanh(x) rounds to x
    np.testing.assert_array_equal(got[tiny], SPECIAL32[tiny])
    big = np.abs(SPECIAL32) >= 9.03           # saturated to +-1 exactly
    np.testing.assert_array_equal(got[big], np.sign(SPECIAL32[big]))
    assert ulp_distance(got, want).max() <= TOLERANCES.ulps("transcendental", F32)


def test_dense_float32_sweep_within_the_comparator_bound(tanh):
    """Every 61st float32 of [0, 10] (18 million values), and their negatives: within 4 ulp
    of NumPy and within 2 of the correctly rounded value (the sequence's own bound)."""
    bits = np.arange(0, np.float32(10.0).view(np.uint32) + 1, 61, dtype=np.uint32)
    x = bits.view(F32)
    for v in (x, -x):
        got = tanh(v)
        assert ulp_distance(got, np.tanh(v)).max() <= TOLERANCES.ulps("transcendental", F32)
        exact = np.tanh(v.astype(F64)).astype(F32)
        assert ulp_distance(got, exact).max() <= 2


def test_every_float16_within_one_ulp_of_numpy(tanh):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16)
    with np.errstate(invalid="ignore"):        # NumPy warns on its signalling NaNs
        want = np.tanh(x)
    got = tanh(x)
    assert got.dtype == F16
    assert ulp_distance(got, want).max() <= TOLERANCES.ulps("transcendental", F16)


def test_float64_within_the_comparator_bound(tanh):
    x = np.random.default_rng(0).standard_normal(1 << 16) * 4
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-300, 20.0, 1e300]])
    got, want = tanh(x), np.tanh(x)
    assert ulp_distance(got, want).max() <= TOLERANCES.ulps("transcendental", F64)


# ---------------------------------------------------------------------------------- exp

@pytest.fixture(scope="module")
def exp():
    return tracearray.compile(np.exp, device="cpu")


@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_exp_numpy_validation_data_within_its_tolerance(exp, dtype):
    x, want, tol = validation_rows(dtype, DATA_DIR / "umath-validation-set-exp.csv")
    assert x.size > 100
    with np.errstate(over="ignore"):
        got = exp(x)
    assert got.dtype == dtype
    worst = ulp_distance(got, want)
    # float64 calls glibc's vector exp (libmvec), within 4 ulp, not NumPy's 1: 2 at -696.6
    bound = tol if dtype == F32 else TOLERANCES.ulps("transcendental", F64)
    assert worst.max() <= bound, f"x = {x[worst.argmax()]!r}: {worst.max():.0f} ulp"


EXP_SPECIAL32 = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.4e-45, -1.4e-45,
                          1e-8, -1e-8, 0.34657359, 0.3466, -0.3466, 1.0, -1.0, 10.0, 88.0,
                          88.72283, 88.722839, 88.7228394, 88.73, 89.0, 100.0, 3.4028235e38,
                          -87.33654, -87.3366, -100.0, -103.27893, -103.972, -103.98, -104.0,
                          -150.0, -3.4028235e38], dtype=F32)


def test_exp_special_values_as_numpy(exp):
    with np.errstate(over="ignore"):
        got, want = exp(EXP_SPECIAL32), np.exp(EXP_SPECIAL32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))        # overflow at 88.7228...
    np.testing.assert_array_equal(got == 0, want == 0)                  # underflow at -103.97...
    np.testing.assert_array_equal(got[np.abs(EXP_SPECIAL32) < 1e-7], 1.0)
    assert ulp_distance(got, want).max() <= TOLERANCES.ulps("transcendental", F32)


def test_exp_dense_float32_sweep_within_the_comparator_bound(exp):
    """Every 61st float32 of [0, 89] and of [-104, 0] (about 35 million values): within 4 ulp
    of NumPy and within 1 of the correctly rounded value (subnormal results included)."""
    for top, sign in ((89.0, 1), (104.0, -1)):
        bits = np.arange(0, np.float32(top).view(np.uint32) + 1, 61, dtype=np.uint32)
        v = sign * bits.view(F32)
        with np.errstate(over="ignore"):
            got, want = exp(v), np.exp(v)
            exact = np.exp(v.astype(F64)).astype(F32)
        assert ulp_distance(got, want).max() <= TOLERANCES.ulps("transcendental", F32)
        assert ulp_distance(got, exact).max() <= 1


def test_exp_every_float16_within_one_ulp_of_numpy(exp):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16)
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.exp(x)
    got = exp(x)
    assert got.dtype == F16
    assert ulp_distance(got, want).max() <= TOLERANCES.ulps("transcendental", F16)
