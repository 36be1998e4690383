"""numpy.fft compiled: the 1-D transforms are external ops (NumPy's pocketfft on the host,
ops/fft.py) and the rest NumPy's own code over them, so every result is NumPy's exactly:
real and complex inputs of every precision, lengths 1, odd and prime, padding and truncation
(``n``), every axis and norm, strided and reversed inputs, fused neighbours, errors."""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(3)


def _complex(shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _exact(fn, *args):
    """The compiled result is NumPy's bit for bit, or both raise the same error."""
    try:
        want = fn(*args)
    except Exception as e:   # noqa: BLE001
        with pytest.raises(type(e)):
            tracearray.compile(fn, device="cpu")(*args)
        return
    got = tracearray.compile(fn, device="cpu")(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


INPUTS = {
    "float32": RNG.standard_normal((3, 17)).astype(np.float32),
    "float64": RNG.standard_normal((5, 16)),
    "int64": RNG.integers(-9, 9, (4, 13)),
    "float16": RNG.standard_normal((2, 8)).astype(np.float16),
    "complex64": _complex((3, 11), np.complex64),
    "complex128": _complex((6, 7)),
    "length1": _complex((4, 1)),
}


@pytest.mark.parametrize("name", sorted(INPUTS))
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_one_dimensional_transforms_are_numpys(name: str, norm) -> None:
    x = INPUTS[name]
    for fn in (lambda a: np.fft.fft(a, norm=norm), lambda a: np.fft.ifft(a, norm=norm),
               lambda a: np.fft.fft(a, 2 * a.shape[-1] + 3, norm=norm),   # zero padding
               lambda a: np.fft.fft(a, max(1, a.shape[-1] // 2), axis=-1),  # truncation
               lambda a: np.fft.fft(a, axis=0, norm=norm),
               lambda a: np.fft.hfft(a, norm=norm), lambda a: np.fft.irfft(a, norm=norm)):
        _exact(fn, x)
    if x.dtype.kind != "c":
        for fn in (lambda a: np.fft.rfft(a, norm=norm), lambda a: np.fft.rfft(a, 9, axis=0),
                   lambda a: np.fft.ihfft(a, norm=norm),
                   lambda a: np.fft.irfft(np.fft.rfft(a), a.shape[-1], norm=norm)):
            _exact(fn, x)


def test_multi_dimensional_transforms_shifts_and_frequencies() -> None:
    x, z = RNG.standard_normal((4, 6, 5)), _complex((3, 8, 5), np.complex64)
    for a in (x, z):
        _exact(lambda v: (np.fft.fft2(v), np.fft.ifft2(v, s=(5, 3), axes=(-2, -1)), np.fft.fftn(v),
                          np.fft.ifftn(v, axes=(0, 2), norm="ortho"), np.fft.irfftn(v),
                          np.fft.irfft2(v, s=(4, 4), axes=(-2, -1))), a)
    _exact(lambda v: (np.fft.rfft2(v), np.fft.rfftn(v, axes=(1, 0)),
                      np.fft.irfftn(np.fft.rfftn(v), v.shape)), x)
    _exact(lambda v: (np.fft.fftshift(v), np.fft.ifftshift(v, axes=1),
                      v + np.fft.fftfreq(v.shape[-1], 0.1), np.fft.rfftfreq(9, 2.0)), x)


def test_strided_reversed_and_transposed_inputs() -> None:
    x, z = RNG.standard_normal((8, 12)), _complex((9, 10))
    _exact(lambda a: np.fft.rfft(a[::-1, ::3], axis=0), x)
    _exact(lambda a: np.fft.fft(a.T[1:, ::-2]), z)
    _exact(lambda a: np.fft.ifft(a[:, ::-1], axis=0), z.astype(np.complex64))


def test_neighbours_fuse_around_the_transform() -> None:
    """A windowed power spectrum: the window product is one kernel before the transform, the
    magnitude squared one after it."""
    def psd(x, w):
        return np.abs(np.fft.rfft(x * w)) ** 2
    x, w = RNG.standard_normal((16, 256)), np.hanning(256)
    assert_matches_numpy(psd, x, w, device="cpu")
    kinds = [k.strategy for k in tracearray.compile(psd, device="cpu").explain(x, w).kernels]
    assert kinds.count("external") == 1 and len(kinds) == 3, kinds
    assert_matches_numpy(lambda z: np.fft.ifft(np.fft.fft(z) * 2).real, _complex((4, 33)),
                         device="cpu")


def test_errors_are_numpys() -> None:
    for fn, err in ((lambda a: np.fft.fft(a, 0), ValueError),
                    (lambda a: np.fft.fft(a, norm="bad"), ValueError),
                    (lambda a: np.fft.fft(a, axis=3), IndexError),
                    (lambda a: np.fft.fft(a, 4, axis=3), np.exceptions.AxisError),
                    (lambda a: np.fft.fft(a[0, 0]), IndexError),
                    (lambda a: np.fft.fft(a[0, 0], 4), np.exceptions.AxisError),
                    (lambda a: np.fft.irfft(a[:, :1]), ValueError),
                    (lambda a: np.fft.rfft(a + 1j), TypeError)):
        with pytest.raises(err):
            fn(np.ones((2, 3)))
        with pytest.raises(err):
            tracearray.compile(fn, device="cpu")(np.ones((2, 3)))


def test_an_empty_axis_padded_to_n_transforms_zeros() -> None:
    # NumPy's irfft pads an empty axis without writing the padding (uninitialised memory,
    # soak cpu-2026-12-01-n program 501); the padding is zeros, so is the transform
    for fn, shape, n in ((lambda a: np.fft.hfft(a - 1j, 8), (0,), 8),
                         (lambda a: np.fft.irfft(a * 1j, 7, axis=0), (0, 3), 7)):
        got = tracearray.compile(fn, device="cpu")(np.zeros(shape))
        assert got.shape == (n,) + shape[1:] and got.dtype == np.float64
        assert np.array_equal(got, np.zeros_like(got))


def test_out_of_the_four_transforms():
    """fft, ifft, rfft and irfft with out=: the result written into out (cast under
    same_kind, as NumPy's pocketfft gufuncs cast) and out returned; NumPy's UFuncTypeError
    for a real out of a complex result and ValueError for a wrong shape."""
    import tracearray
    x = np.arange(8.0)
    cases = ((lambda x, o: np.fft.fft(x, out=o), np.zeros(8, complex)),
             (lambda x, o: np.fft.ifft(x * 1j, out=o), np.zeros(8, np.complex64)),
             (lambda x, o: np.fft.irfft(np.fft.rfft(x), out=o), np.zeros(8, np.float32)),
             (lambda x, o: np.fft.irfft(np.fft.rfft(x), out=o), np.zeros(8, complex)),
             (lambda x, o: np.fft.rfft(x, out=o), np.zeros(5, np.complex64)),
             (lambda x, o: np.fft.fft(x, out=o) is o, np.zeros(8, complex)))
    for f, o in cases:
        want_o, got_o = o.copy(), o.copy()
        want, got = f(x, want_o), tracearray.compile(f)(x, got_o)
        np.testing.assert_allclose(got_o, want_o, rtol=1e-6, atol=1e-6)
        if isinstance(want, bool):
            assert got == want
        else:
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(np._core._exceptions._UFuncOutputCastingError, match="'fft'"):
        tracearray.compile(lambda x, o: np.fft.fft(x, out=o))(x, np.zeros(8))
    with pytest.raises(ValueError, match="wrong shape"):
        tracearray.compile(lambda x, o: np.fft.fft(x, out=o))(x, np.zeros(7, complex))


def test_float32_data_into_a_complex128_out_is_transformed_in_double():
    """NumPy's gufunc takes its loop from out's dtype: float32 data with a complex128 out=
    is transformed in double precision (it was transformed in single, ~1e-8 off)."""
    import tracearray
    x = np.random.default_rng(0).standard_normal(5).astype(np.float32)
    for f, o in ((lambda x, o: np.fft.fft(x, out=o), np.zeros(5, complex)),
                 (lambda x, o: np.fft.rfft(x, out=o), np.zeros(3, complex)),
                 (lambda x, o: np.fft.irfft(np.fft.rfft(x), out=o), np.zeros(4))):
        want, got = o.copy(), o.copy()
        f(x, want)
        tracearray.compile(f)(x, got)
        np.testing.assert_array_equal(got, want)
