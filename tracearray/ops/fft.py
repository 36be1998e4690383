"""FFTs as external ops: NumPy's pocketfft (``numpy.fft``) on the host.

Three ops cover numpy.fft, as NumPy's own Python code builds every transform from its 1-D
ones (``fftn`` is ``fft`` along each axis, ``rfftn`` is ``rfft`` then ``fft``, ``hfft`` is
``irfft`` of the conjugate): so calling these 1-D transforms in NumPy's order gives NumPy's
numbers exactly.

- ``fft.c2c``: to complex (``fft``, ``ifft``): the result is interleaved pairs, a real array
  of shape ``s + (2,)`` (a complex array's memory, ``trace/complex.py``);
- ``fft.r2c``: real to complex (``rfft``): a real operand, a pair result;
- ``fft.c2r``: to real (``irfft``): a real result.

Attributes: ``n`` (the transform length along ``axis``: the output's for c2r), ``axis`` (of
the complex array, non-negative), ``norm``, for c2c ``inverse``, and for c2c and c2r
``pairs``: whether the operand is a complex value's pairs or a real array.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .external import register_external
from .spec import Shape

POCKETFFT = "NumPy's pocketfft"
_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}


def as_complex(pairs: np.ndarray) -> np.ndarray:
    """The complex array whose interleaved memory is ``pairs`` (..., 2), exactly."""
    c = np.ascontiguousarray(pairs)
    return c.view(_COMPLEX[c.dtype]).reshape(c.shape[:-1])


def write_pairs(out: np.ndarray, z: np.ndarray) -> None:
    out[..., 0] = z.real
    out[..., 1] = z.imag


def norm_factor(norm: str | None, n: int, inverse: bool) -> float:
    """NumPy's normalisation of a transform of length n (``numpy.fft``'s ``norm``)."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    return 1.0 / n if inverse else 1.0   # None, "backward"


def _sized(shape: Sequence[int], axis: int, n: int) -> Shape:
    s = list(shape)
    s[axis] = n
    return tuple(s)


# An operand is either interleaved pairs (a complex value: ``pairs=True``) or the real array
# NumPy itself would get (``pairs=False``): NumPy's loops for a real operand are not those of
# its complex conversion (``ifft`` of float32 runs its complex128 loop), so the host call is
# given what NumPy would be given.
def _operand(a: np.ndarray, pairs: bool) -> np.ndarray:
    return as_complex(a) if pairs else a


def _c2c(operands: list[np.ndarray], outs: list[np.ndarray], *, n: int, axis: int,
         norm: str | None, inverse: bool, pairs: bool) -> None:
    fn = np.fft.ifft if inverse else np.fft.fft
    write_pairs(outs[0], fn(_operand(operands[0], pairs), n=n, axis=axis, norm=norm))


def _r2c(operands: list[np.ndarray], outs: list[np.ndarray], *, n: int, axis: int,
         norm: str | None) -> None:
    write_pairs(outs[0], np.fft.rfft(operands[0], n=n, axis=axis, norm=norm))


def _c2r(operands: list[np.ndarray], outs: list[np.ndarray], *, n: int, axis: int,
         norm: str | None, pairs: bool) -> None:
    z = _operand(operands[0], pairs)
    if z.shape[axis] == 0:
        # NumPy pads an empty axis to n // 2 + 1 without writing the padding (its irfft of
        # an empty array returns uninitialised memory); the padding is zeros by definition
        z = np.zeros(_sized(z.shape, axis, n // 2 + 1), z.dtype)
    outs[0][...] = np.fft.irfft(z, n=n, axis=axis, norm=norm)


def _shape(shape: Sequence[int], a: dict) -> tuple[int, ...]:
    """The complex array's shape of an operand (a pair array drops its last axis)."""
    return tuple(shape[:-1]) if a["pairs"] else tuple(shape)


def _pairs_dtype(dtype: np.dtype, a: dict) -> np.dtype:
    """The real dtype of the pairs of the transform of an operand of ``dtype``."""
    return np.dtype(dtype) if a["pairs"] else result_real_dtype(dtype)


register_external(
    "fft.c2c", lambda shapes, a: (_sized(_shape(shapes[0], a), a["axis"], a["n"]) + (2,),),
    lambda dtypes, a: (_pairs_dtype(dtypes[0], a),), _c2c, what=POCKETFFT)
register_external(
    "fft.r2c", lambda shapes, a: (_sized(shapes[0], a["axis"], a["n"] // 2 + 1) + (2,),),
    lambda dtypes, a: (result_real_dtype(dtypes[0]),), _r2c, what=POCKETFFT)
register_external(
    "fft.c2r", lambda shapes, a: (_sized(_shape(shapes[0], a), a["axis"], a["n"]),),
    lambda dtypes, a: (np.dtype(np.fft.irfft(np.zeros(2, dtypes[0])).dtype)
                       if not a["pairs"] else np.dtype(dtypes[0]),), _c2r, what=POCKETFFT)


def result_real_dtype(dtype: Any) -> np.dtype:
    """The real dtype of NumPy's FFT of an array of ``dtype`` (float32 for float16/float32 and
    complex64, float64 otherwise)."""
    z = np.fft.fft(np.zeros(1, dtype))
    return np.dtype(z.real.dtype)
