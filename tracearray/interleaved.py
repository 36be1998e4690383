"""Complex arrays as the kernels see them: NumPy's interleaved memory, read as real pairs.

A complex array of shape ``s`` is, in memory, a real array of shape ``s + (2,)`` (the real
part, then the imaginary part, of each element). Below the tracer nothing is complex: the
graph, the planner, the tiler and both code generators see that real pair array. This module
is the one binding step between the two views, used by the call path (``api.py``) for both
runtimes:

- ``pair_view(a)``: a complex argument (NumPy array or ``tracearray.Array`` in device memory)
  as the real view of shape ``a.shape + (2,)`` with strides ``a.strides + (itemsize // 2,)``:
  the same memory, whatever its strides (negative ones included), so in-place updates write
  into the caller's array;
- ``complex_view(pair)``: a result computed as a real pair array, viewed as complex (of a
  C-contiguous copy when it is not contiguous along the pair).
"""
from __future__ import annotations

from typing import Any

import numpy as np

COMPLEX_OF_REAL = {np.dtype(np.float32): np.dtype(np.complex64),
                   np.dtype(np.float64): np.dtype(np.complex128)}
REAL_OF_COMPLEX = {c: r for r, c in COMPLEX_OF_REAL.items()}


def is_complex_dtype(dtype: Any) -> bool:
    return np.dtype(dtype).kind == "c"


def real_dtype(dtype: Any) -> np.dtype:
    """float32 for complex64, float64 for complex128 (the dtype of each part)."""
    dt = np.dtype(dtype).newbyteorder("=")
    if dt not in REAL_OF_COMPLEX:
        raise TypeError(f"complex dtype {dt} is not supported by tracearray "
                        f"(supported: complex64, complex128)")
    return REAL_OF_COMPLEX[dt]


def pair_view(a: Any) -> Any:
    """A complex array as its real pair view (shape + (2,)); other arrays unchanged."""
    dtype = getattr(a, "dtype", None)
    if dtype is None or dtype.kind != "c":
        return a
    part = real_dtype(dtype)
    shape = tuple(a.shape) + (2,)
    strides = tuple(a.strides) + (part.itemsize,)
    if isinstance(a, np.ndarray):
        # a.real is a view of the same memory with the same strides, in the part dtype
        return np.lib.stride_tricks.as_strided(a.real, shape, strides,
                                               writeable=a.flags.writeable)
    from .gpu.array import Array
    if isinstance(a, Array):
        return Array(a.ptr, shape, part, strides, owner=a, stream=a._stream)
    raise TypeError(f"cannot bind a complex array of type {type(a).__name__}")


def complex_view(pair: Any, dtype: Any) -> Any:
    """A real pair array (..., 2) as the complex array of ``dtype`` it holds."""
    dtype = np.dtype(dtype)
    if isinstance(pair, np.ndarray):
        if pair.strides[-1:] != (pair.itemsize,) or any(s % dtype.itemsize
                                                         for s in pair.strides[:-1]):
            pair = np.ascontiguousarray(pair)
        out = pair.view(dtype)[..., 0]
        return out[()] if out.ndim == 0 else out
    from .gpu.array import Array
    if isinstance(pair, Array):
        if not pair.is_c_contiguous:
            pair = pair.copy()
        return Array(pair.ptr, pair.shape[:-1], dtype, pair.strides[:-1], owner=pair)
    raise TypeError(f"cannot view a result of type {type(pair).__name__} as complex")
