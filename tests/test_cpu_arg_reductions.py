"""argmax / argmin along contiguous rows on the CPU (issue 17): NumPy's positions exactly.

Rows of at least ``ARG_LANES_MIN`` positions run in one pass of vector lanes, each keeping its
best value and that value's position (``KernelLowering._arg_lanes``); shorter rows in two
vectorised passes (``_arg_two_pass``). Both must give NumPy's answer: the first occurrence of
the best value, a NaN over any number and the first NaN of several, -0.0 equal to +0.0, and
the lanes merged so that a tie between lanes goes to the lower position. The row lengths
cover whole unrolled steps, single vectors after them, a scalar tail, and the switch between
the two strategies.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray.codegen import kernel as K

LENGTHS = [1, 15, 37, K.ARG_LANES_MIN - 1, K.ARG_LANES_MIN, 257, 300, 1000, 1024, 1031, 4133]
OPS = {"argmax": np.argmax, "argmin": np.argmin}


def compiled(op: str):
    return tracearray.compile(lambda a: OPS[op](a, axis=1), device="cpu")


def rows(n: int, dtype, rng: np.random.Generator, kind: str) -> np.ndarray:
    """13 rows of length n: random values, few distinct values (many ties across lanes),
    NaNs at random places (floats), one row all equal, one all NaN, one with infinities."""
    m = 13
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal((m, n)).astype(dtype)
        if kind == "ties":
            x = rng.integers(-3, 4, (m, n)).astype(dtype)
            x[x == 0] = -0.0                            # -0.0 and +0.0 tie
            x[::2][x[::2] == -0.0] = 0.0
        elif kind == "nan":
            for r in range(0, m, 2):
                x[r, rng.integers(0, n, 1 + r // 4)] = np.nan
            x[1] = np.nan
            x[3, :] = 7.0
            x[5, rng.integers(0, n, 3)] = np.inf
            x[5, rng.integers(0, n, 3)] = -np.inf
        return x
    info = np.iinfo(dtype)
    if kind == "ties":
        return rng.integers(0, 3, (m, n)).astype(dtype)
    x = rng.integers(info.min, info.max, (m, n), dtype=dtype, endpoint=True)
    x[1, :] = info.min
    x[3, :] = info.max
    return x


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8, np.int16])
@pytest.mark.parametrize("kind", ["random", "ties", "nan"])
def test_rows_match_numpy_exactly(op, dtype, kind):
    if kind == "nan" and np.dtype(dtype).kind != "f":
        pytest.skip("no NaN in an integer dtype")
    rng = np.random.default_rng(hash((op, np.dtype(dtype).str, kind)) % 2**32)
    f = compiled(op)
    for n in LENGTHS:
        x = rows(n, dtype, rng, kind)
        np.testing.assert_array_equal(f(x), OPS[op](x, axis=1), err_msg=f"{op} {dtype} n={n}")


@pytest.mark.parametrize("op", sorted(OPS))
def test_the_best_value_in_every_lane_position(op):
    """One winner (and, in a second run, a NaN) at each position of a 1031-long row: every
    lane, unrolled vector, single vector and tail position must report it; a tie placed in a
    later lane must lose to it."""
    n = 1031
    f = compiled(op)
    best = np.float32(9.0 if op == "argmax" else -9.0)
    x = np.zeros((n, n), np.float32)
    idx = np.arange(n)
    x[idx, idx] = best
    x[idx[:-1], np.minimum(idx + 17, n - 1)[:-1]] = best    # a later tie
    np.testing.assert_array_equal(f(x), idx)
    x[idx, (idx + 5) % n] = np.nan                           # a NaN wins over the best value
    np.testing.assert_array_equal(f(x), OPS[op](x, axis=1))


def test_long_rows_run_as_vector_lanes(tmp_path: Path, monkeypatch):
    """The kernel of a long-row argmax keeps positions in vector registers (selects on
    vectors of ARG_LANES positions), rather than rescanning the row."""
    monkeypatch.setenv("TRACEARRAY_DUMP_DIR", str(tmp_path))
    f = tracearray.compile(lambda a: np.argmax(a, axis=1), device="cpu")
    x = np.random.default_rng(0).standard_normal((8, 2048)).astype(np.float32)
    np.testing.assert_array_equal(f(x), np.argmax(x, axis=1))
    ir_text = " ".join("".join(p.read_text() for p in tmp_path.glob("*.ll")).split())
    assert f"select <{K.ARG_LANES} x i1> %" in ir_text
    assert f"<{K.ARG_LANES} x i32>" in ir_text     # the positions


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_with_infinities_or_nans_take_the_exact_path(op, dtype):
    """The lane loop flags a row holding a NaN or an infinity (x*0 is NaN) and the row is done
    again exactly: the first of several infinities, an infinity against a NaN after it, one
    NaN in the last vector or in the tail, an infinity of the other sign (not the answer)."""
    n = 1031
    x = np.random.default_rng(7).standard_normal((6, n)).astype(dtype)
    big = np.inf if op == "argmax" else -np.inf
    x[0, [700, 300, 900]] = big
    x[1, [100, 500]] = big
    x[1, 800] = np.nan
    x[2, 1020] = np.nan
    x[3, n - 1] = np.nan
    x[4, [5, 6]] = -big
    x[5, :] = big
    np.testing.assert_array_equal(compiled(op)(x), OPS[op](x, axis=1))
