"""cuFFT for the GPU's FFTs: the device implementations of ``fft.c2c``, ``fft.r2c`` and
``fft.c2r`` (``ops/fft.py``), on device memory and tracearray's stream, with no host round
trip.

One transform along ``axis`` of a strided operand into a fresh C-contiguous result is one
``cufftPlanMany`` layout (rank 1: ``n``, element strides along the axis, a batch of rows a
fixed distance apart); the other axes' rows that do not fall into one arithmetic progression
are executed one group at a time (``plan_fft`` picks the largest group as the batch). Plans
are cached by layout. cuFFT computes unnormalised transforms: NumPy's ``norm`` factor
(1/n for ``ifft``'s default, 1/sqrt(n) for "ortho", ...) is a cuBLAS ``scal`` of the result.
cuFFT's C2R overwrites its input, so an operand that is read later is copied first, and the
imaginary parts of the zero and (even n) Nyquist frequencies are cleared (in the operand
itself when it is a dead intermediate): NumPy's pocketfft ignores
them, and a C2R of a non-Hermitian spectrum is otherwise the library's choice.

What cuFFT does not take runs on the host as before (``NotImplemented`` tells the runtime):
float16 (NumPy computes it in float32 after a cast) and real operands of ``fft``/``irfft``
(NumPy's loops for a real operand are not its complex loops), a zero-padded transform
(``n`` longer than the operand), negative or zero strides, sizes beyond cuFFT's 32-bit
arguments, and a machine without the library or with ``TRACEARRAY_GPU_LIBRARIES=off``.

Rounding: cuFFT's results are not pocketfft's bits; they are within a few ulp of
``log2(n) * eps * ||x||`` (divergence ``gpu-fft-rounding``), which the testing comparator
allows for FFTs on the GPU.
"""
from __future__ import annotations

import ctypes
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import forksafe
from ..ops import EXTERNALS
from ..ops.fft import norm_factor
from .libraries import ProcessLibrary, row_groups

SONAMES = ("libcufft.so.12", "libcufft.so.13", "libcufft.so.11", "libcufft.so",
           "cufft64_12.dll", "cufft64_11.dll")
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
# cufftType values (cufft.h)
C2C = {F32: 0x29, F64: 0x69}
R2C = {F32: 0x2a, F64: 0x6a}
C2R = {F32: 0x2c, F64: 0x6c}
FORWARD, INVERSE = -1, 1
INT_MAX = (1 << 31) - 1
PLAN_CACHE = 64


@dataclass(frozen=True)
class FftLayout:
    """One cuFFT plan's layout (strides and distances in the operand's and the result's
    elements: complex elements for complex data) and where each execution starts."""
    kind: int
    n: int
    istride: int
    idist: int
    ostride: int
    odist: int
    batch: int
    starts: tuple[tuple[int, int], ...]   # (input offset, output offset) per execution


def plan_fft(kind: int, n: int, axis: int, in_shape: Sequence[int],
             in_strides: Sequence[int], out_shape: Sequence[int],
             out_strides: Sequence[int]) -> FftLayout | None:
    """The layout of transforms of length ``n`` along ``axis``, or None when cuFFT cannot
    express it. Shapes and element strides are the complex (or real) arrays', the pair axis
    of interleaved data removed."""
    if n > INT_MAX or n < 1:
        return None
    ist, ost = in_strides[axis], out_strides[axis]
    if (in_shape[axis] > 1 and ist <= 0) or ost <= 0:
        return None
    ist, ost = max(ist, 1), max(ost, 1)
    dims = [(in_shape[d], in_strides[d], out_strides[d]) for d in range(len(in_shape))
            if d != axis and in_shape[d] != 1]
    if any(size == 0 for size, _, _ in dims):
        return FftLayout(kind, n, ist, 1, ost, 1, 0, ())
    if any(s_in <= 0 or s_out <= 0 for _, s_in, s_out in dims):
        return None
    # the longest arithmetic run of the other axes is cuFFT's batch, the rest executions
    group = row_groups(dims)
    if group is not None:
        batch, idist, odist, starts = group
    else:
        batch, idist, odist, starts = 1, ist * n, ost * n, [(0, 0)]
    if max(batch, idist, odist, ist, ost) > INT_MAX:
        return None
    return FftLayout(kind, n, ist, idist, ost, odist, batch, tuple(starts))


class CuFFT:
    """cuFFT through ctypes: plans (cached by layout) on the device's stream, executions."""

    def __init__(self, lib: Any, stream_handle: int):
        self.lib, self.stream = lib, stream_handle
        self._plans: OrderedDict[tuple, int] = OrderedDict()
        self._lock = threading.Lock()
        forksafe.renew_at_fork(self, "_lock")
        i32, p = ctypes.c_int, ctypes.c_void_p
        ip = ctypes.POINTER(ctypes.c_int)
        lib.cufftPlanMany.argtypes = [ip, i32, ip, ip, i32, i32, ip, i32, i32, i32, i32]
        lib.cufftSetStream.argtypes = [i32, p]
        lib.cufftDestroy.argtypes = [i32]
        for name in ("cufftExecC2C", "cufftExecZ2Z"):
            getattr(lib, name).argtypes = [i32, p, p, i32]
        for name in ("cufftExecR2C", "cufftExecD2Z", "cufftExecC2R", "cufftExecZ2D"):
            getattr(lib, name).argtypes = [i32, p, p]
        for name in ("cufftPlanMany", "cufftSetStream", "cufftDestroy", "cufftExecC2C",
                     "cufftExecZ2Z", "cufftExecR2C", "cufftExecD2Z", "cufftExecC2R",
                     "cufftExecZ2D"):
            getattr(lib, name).restype = ctypes.c_int

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} failed with cuFFT status {status}")

    def _plan(self, lay: FftLayout) -> int:
        key = (lay.kind, lay.n, lay.istride, lay.idist, lay.ostride, lay.odist, lay.batch)
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        handle = ctypes.c_int()
        n = (ctypes.c_int * 1)(lay.n)
        embed_in, embed_out = (ctypes.c_int * 1)(lay.n), (ctypes.c_int * 1)(lay.n)
        self._check(self.lib.cufftPlanMany(ctypes.byref(handle), 1, n, embed_in, lay.istride,
                                           lay.idist, embed_out, lay.ostride, lay.odist,
                                           lay.kind, lay.batch), "cufftPlanMany")
        self._check(self.lib.cufftSetStream(handle.value, ctypes.c_void_p(self.stream)),
                    "cufftSetStream")
        self._plans[key] = handle.value
        while len(self._plans) > PLAN_CACHE:
            _key, old = self._plans.popitem(last=False)
            self.lib.cufftDestroy(old)   # its queued executions finish first (cuFFT's rule)
        return handle.value

    def execute(self, lay: FftLayout, src: int, dst: int, in_itemsize: int,
                out_itemsize: int, direction: int) -> None:
        """Queue every execution of ``lay`` (pointers to the first elements)."""
        name = {0x29: "cufftExecC2C", 0x69: "cufftExecZ2Z", 0x2a: "cufftExecR2C",
                0x6a: "cufftExecD2Z", 0x2c: "cufftExecC2R", 0x6c: "cufftExecZ2D"}[lay.kind]
        fn = getattr(self.lib, name)
        with self._lock:
            plan = self._plan(lay)
            for i_off, o_off in lay.starts:
                a, b = src + i_off * in_itemsize, dst + o_off * out_itemsize
                status = fn(plan, a, b, direction) if lay.kind in (0x29, 0x69) else \
                    fn(plan, a, b)
                self._check(status, name)


_CUFFT = ProcessLibrary("cufft", SONAMES, lambda lib, stream: CuFFT(lib, stream))


def cufft_for(device: Any) -> CuFFT | None:
    """The process's cuFFT on ``device``'s stream, or None (see ``libraries.usable_on``)."""
    return _CUFFT.get(device)


def _complex_view(buf: Any) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The complex array of an interleaved pairs buffer: (shape, complex element strides),
    or None when the pairs are not adjacent or a stride is an odd number of reals."""
    if buf.shape[-1] != 2 or buf.strides[-1] != 1 or \
            any(s % 2 for s, n in zip(buf.strides[:-1], buf.shape[:-1]) if n > 1):
        return None
    if buf.ptr % (2 * buf.dtype.itemsize):
        return None
    return tuple(buf.shape[:-1]), tuple(s // 2 for s in buf.strides[:-1])


def _libraries(dev: Any, factor: float) -> tuple[Any, Any] | None:
    from .blas import blas_for
    fft = cufft_for(dev)
    blas = blas_for(dev) if factor != 1.0 else None
    if fft is None or (factor != 1.0 and blas is None):
        return None
    return fft, blas


def _finish(blas: Any, out: Any, factor: float) -> None:
    if factor != 1.0:
        blas.scale(out.dtype, out.ptr, math.prod(out.shape), factor)


def c2c(dev: Any, operands: list, results: list, *, n: int, axis: int, norm: Any,
        inverse: bool, pairs: bool) -> Any:
    src, out = operands[0], results[0]
    if out is None:
        return None
    view = _complex_view(src) if pairs else None
    if view is None or src.dtype not in C2C or out.dtype != src.dtype:
        return NotImplemented
    shape, strides = view
    if shape[axis] < n:
        return NotImplemented   # zero padding: the host
    factor = norm_factor(norm, n, inverse)
    libs = _libraries(dev, factor)
    o_shape, o_strides = _complex_view(out)
    lay = plan_fft(C2C[src.dtype], n, axis, shape, strides, o_shape, o_strides)
    if libs is None or lay is None:
        return NotImplemented
    if not lay.batch:
        return None   # an empty axis beside the transformed one: no transforms
    size = 2 * src.dtype.itemsize
    libs[0].execute(lay, src.ptr, out.ptr, size, size, INVERSE if inverse else FORWARD)
    _finish(libs[1], out, factor)
    return None


def r2c(dev: Any, operands: list, results: list, *, n: int, axis: int, norm: Any) -> Any:
    src, out = operands[0], results[0]
    if out is None:
        return None
    if src.dtype not in R2C or out.dtype != src.dtype or src.shape[axis] < n:
        return NotImplemented
    factor = norm_factor(norm, n, False)
    libs = _libraries(dev, factor)
    o_shape, o_strides = _complex_view(out)
    lay = plan_fft(R2C[src.dtype], n, axis, src.shape, src.strides, o_shape, o_strides)
    if libs is None or lay is None:
        return NotImplemented
    if not lay.batch:
        return None
    libs[0].execute(lay, src.ptr, out.ptr, src.dtype.itemsize, 2 * out.dtype.itemsize,
                    FORWARD)
    _finish(libs[1], out, factor)
    return None


def c2r(dev: Any, operands: list, results: list, *, n: int, axis: int, norm: Any,
        pairs: bool) -> Any:
    src, out = operands[0], results[0]
    if out is None:
        return None
    view = _complex_view(src) if pairs else None
    if view is None or src.dtype not in C2R or out.dtype != src.dtype:
        return NotImplemented
    shape, strides = view
    half = n // 2 + 1
    if shape[axis] < half:
        return NotImplemented   # zero padding: the host
    factor = norm_factor(norm, n, True)
    libs = _libraries(dev, factor)
    lay = plan_fft(C2R[src.dtype], n, axis, shape, strides, out.shape, out.strides)
    if libs is None or lay is None:
        return NotImplemented
    if not lay.batch:
        return None
    # C2R overwrites its input: transform the operand itself when nothing reads it later
    # (an intermediate), else a copy of its span; the imaginary parts at frequency 0 (and
    # n/2) are cleared as pocketfft ignores them
    size = 2 * src.dtype.itemsize
    if src.scratch:
        base = src.ptr
    else:
        span = 1 + sum((k - 1) * s for k, s in zip(shape, strides) if k > 0)
        scratch = dev.allocator.allocate(span * size)
        dev.dtod(scratch.ptr, src.ptr, span * size)
        base = scratch.ptr
    for freq in ((0, n // 2) if n % 2 == 0 else (0,)):
        for i_off, _ in lay.starts:
            imag = base + (i_off + freq * lay.istride) * size + size // 2
            dev.memset_32(imag, lay.idist * size, size // 8, lay.batch)
    libs[0].execute(lay, base, out.ptr, size, out.dtype.itemsize, INVERSE)
    _finish(libs[1], out, factor)
    return None


def register() -> None:
    """Make cuFFT the "cuda" implementation of the three FFT ops."""
    EXTERNALS["fft.c2c"].device["cuda"] = c2c
    EXTERNALS["fft.r2c"].device["cuda"] = r2c
    EXTERNALS["fft.c2r"].device["cuda"] = c2r
