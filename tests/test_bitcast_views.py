"""``ndarray.view(dtype)`` of another dtype of the same item size: the same bits read as
another dtype (the ``bitcast`` op), a view like NumPy's (writes through it reach the base).
Against NumPy, on the CPU and the emulated GPU."""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from tracearray.errors import UnsupportedOperationError
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(7)
SPECIAL32 = np.array([0.5, -0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, -1e-40, 3.0,
                      np.finfo(np.float32).max, np.finfo(np.float32).tiny], dtype=np.float32)


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    """Each test on the CPU and on the emulated GPU (conftest's ``emulated_gpu``)."""
    if request.param == "cuda":
        request.getfixturevalue("emulated_gpu")
    return request.param


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("float32", "uint32"),
                                      ("float64", "int64"), ("float64", "uint64"),
                                      ("float16", "int16"), ("float16", "uint16"),
                                      ("int32", "uint32"), ("int64", "float64"),
                                      ("uint16", "float16"), ("bool", "uint8"),
                                      ("bool", "int8")])
def test_views_read_the_same_bits(device, src, dst) -> None:
    """Reads through the view, fused with arithmetic on both sides, at odd sizes and on a
    transposed (non-contiguous) operand."""
    if src == "bool":
        x = RNG.random((5, 7)) < 0.5
    elif np.dtype(src).kind == "f":
        with np.errstate(over="ignore"):      # float32's max is float16's inf
            x = np.resize(SPECIAL32.astype(src), 35).reshape(5, 7)
    else:
        x = RNG.integers(np.iinfo(src).min, np.iinfo(src).max, (5, 7), dtype=src,
                         endpoint=True)
    assert_matches_numpy(lambda a: a.view(dst), x, device=device)
    assert_matches_numpy(lambda a: a.T.view(np.dtype(dst)) // 3 if np.dtype(dst).kind != "f"
                         else a.T.view(np.dtype(dst)) * 3, x, device=device)


def test_float_bits_after_arithmetic(device) -> None:
    """The exponent field of computed floats (exact results), and the bits of computed NaNs
    (their payload is the hardware's: unverifiable, divergence nan-payload)."""
    x = np.linspace(0.1, 1000, 37, dtype=np.float32)
    assert_matches_numpy(lambda a: ((a * 2).view(np.int32) >> 23) & 0xFF, x, device=device)
    assert_matches_numpy(lambda a: np.log(a - 500).view(np.uint32), x, device=device)


def test_writes_through_a_view_reach_the_base(device) -> None:
    """Sign bits cleared through an integer view of a float argument and of a made array,
    as NumPy's views of the same memory do."""
    def clear_signs(x):
        v = x.view(np.uint64)
        v[1::2] &= np.uint64(0x7FFFFFFFFFFFFFFF)
        return x, v

    def made(x):
        y = x * 2.0
        y.view(np.int32)[0] = 0x3F800000       # 1.0f by its bits
        return y
    assert_matches_numpy(clear_signs, np.linspace(-3, 3, 9), device=device)
    assert_matches_numpy(made, np.linspace(-3, 3, 9, dtype=np.float32), device=device)


def test_refused_views_are_named() -> None:
    """Another item size (float64 as int32 pairs), a byte array as bool (NumPy keeps other
    bytes than 0 and 1 there), writes through an integer view of a bool array, and views as
    ndarray subclasses."""
    for fn, arg, what in [(lambda a: a.view(np.int32), np.ones(4), "view(int32) of a float64"),
                          (lambda a: a.view(bool), np.ones(4, np.uint8), "view(bool)")]:
        with pytest.raises(UnsupportedOperationError, match=what.replace("(", r"\(")
                           .replace(")", r"\)")):
            tracearray.compile(fn)(arg)

    def write(m):
        m.view(np.uint8)[0] = 2
        return m
    with pytest.raises(UnsupportedOperationError, match="view of a bool array"):
        tracearray.compile(write)(np.zeros(3, bool))
    # ndarray subclasses, numpy.ma's masked arrays among them, by name (they were refused
    # as "dtype object")
    for fn in (lambda a: a.view(np.ma.MaskedArray), lambda a: np.ma.masked_less(a, 0).sum(),
               lambda a: a.view(type=np.recarray)):
        with pytest.raises(UnsupportedOperationError, match="ndarray subclasses"):
            tracearray.compile(fn)(np.arange(4.0))
