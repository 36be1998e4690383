"""``ndarray.view(dtype)``: the same bits read as another dtype of the same item size (the
``bitcast`` op), or as items of another size (``trace/memory_views.py``: float32 as bytes,
bytes as float64, float pairs as complex and back), each a view like NumPy's (writes through
it reach the base, later writes to the base reach it). Against NumPy, on the CPU and the
emulated GPU."""
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
    """A byte array as bool (NumPy keeps other bytes than 0 and 1 there), writes through an
    integer view of a bool array, a complex result of arithmetic read as floats, and views as
    ndarray subclasses."""
    with pytest.raises(UnsupportedOperationError, match=r"view\(bool\)"):
        tracearray.compile(lambda a: a.view(bool))(np.ones(4, np.uint8))

    def write(m):
        m.view(np.uint8)[0] = 2
        return m
    for dt in (np.uint8, np.uint16):
        with pytest.raises(UnsupportedOperationError, match="view of a bool array"):
            tracearray.compile(write if dt is np.uint8 else
                               lambda m: (m.view(np.uint16).__setitem__(0, 2), m)[1])(
                np.zeros(4, bool))
    with pytest.raises(UnsupportedOperationError, match="not one array's memory"):
        tracearray.compile(lambda a: (a + 1j * a).view(np.float64))(np.ones(4))
    # ndarray subclasses, numpy.ma's masked arrays among them, by name (they were refused
    # as "dtype object")
    for fn in (lambda a: a.view(np.ma.MaskedArray), lambda a: np.ma.masked_less(a, 0).sum(),
               lambda a: a.view(type=np.recarray)):
        with pytest.raises(UnsupportedOperationError, match="ndarray subclasses"):
            tracearray.compile(fn)(np.arange(4.0))


@pytest.mark.parametrize("src, dst", [("float32", "uint8"), ("float64", "int32"),
                                      ("float64", "float16"), ("int16", "float64"),
                                      ("uint8", "float32"), ("uint8", "int64"),
                                      ("bool", "uint16"), ("int64", "int8"),
                                      ("float32", "complex64"), ("float64", "complex64"),
                                      ("int16", "complex128")])
def test_views_as_another_item_size(device, src, dst) -> None:
    """The bytes read as items of another size, little-endian, on the last axis (of 8:
    every pair of sizes divides it), of arguments and of views (rows of a slice, a column of
    one item), fused with arithmetic after."""
    if src == "bool":
        x = RNG.random((3, 8)) < 0.5
    elif np.dtype(src).kind == "f":
        x = np.resize(SPECIAL32.astype(src), 24).reshape(3, 8)
    else:
        x = RNG.integers(np.iinfo(src).min, np.iinfo(src).max, (3, 8), dtype=src,
                         endpoint=True)
    assert_matches_numpy(lambda a: a.view(dst), x, device=device)
    assert_matches_numpy(lambda a: a[1:].view(dst), x, device=device)
    if np.dtype(dst).itemsize < x.itemsize:
        assert_matches_numpy(lambda a: a[:, 2:3].view(dst), x, device=device)
    if src != "bool":        # (a view as bool is refused: the bytes need not be 0 or 1)
        assert_matches_numpy(lambda a: a.view(dst).view(a.dtype) == a, x, device=device)


def test_writes_through_another_item_size(device) -> None:
    """Writes through a byte view change the floats, writes to the floats reach a byte view
    taken before, and complex items written through a view of float pairs (and the reverse,
    float parts written through a view of a complex argument) reach the other dtype."""
    def bytes_cleared(a):
        v = a.view(np.uint8)
        v[3::4] &= 0x7F          # the sign bits (the high byte of each float32)
        return a

    def read_after_write(a):
        v = a.view(np.uint8)
        a[1] = 1.0
        return v

    def complex_items(a):
        c = a.view(np.complex128)
        c[1] = 1 - 2j
        c.imag[2:] = 0
        return a

    def float_parts(z):
        f = z.view(np.float32)
        f[:, 1::2] = -1        # every imaginary part
        z[0, 0] = 3 + 4j
        return z, f
    x = np.linspace(-3, 3, 8, dtype=np.float32)
    assert_matches_numpy(bytes_cleared, x, device=device)
    assert_matches_numpy(read_after_write, x, device=device)
    assert_matches_numpy(complex_items, np.linspace(-3, 3, 8), device=device)
    z = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
    assert_matches_numpy(float_parts, z, device=device)
    assert_matches_numpy(lambda v: np.fft.fft(v).view(np.float64), np.linspace(0, 1, 6),
                         device=device)
    assert_matches_numpy(lambda v: v[1:, :2].view(np.complex128), z, device=device)


def test_numpy_errors_of_views_as_another_item_size() -> None:
    """NumPy's ValueErrors: a 0-d array, a last axis that is not contiguous, and a last axis
    whose bytes the larger item size does not divide."""
    for fn, arg, what in [(lambda a: a.sum().view(np.int32), np.ones(4), "0d array"),
                          (lambda a: a.T.view(np.uint8), np.ones((2, 3)), "contiguous"),
                          (lambda a: a[:, ::2].view(np.int32), np.ones((2, 4)), "contiguous"),
                          (lambda a: a[:, :3].view(np.float64), np.ones((2, 4), np.int16),
                           "divisor"),
                          (lambda a: a[:3].view(np.complex64), np.ones(4, np.float32),
                           "divisor")]:
        with pytest.raises(ValueError, match=what):
            fn(arg)
        with pytest.raises(ValueError, match=what):
            tracearray.compile(fn)(arg)
