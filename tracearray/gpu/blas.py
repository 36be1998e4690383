"""cuBLAS for the GPU's matrix products: float32 and float64 ``matmul`` as one call of
``cublas{S,D}gemmStridedBatched`` on tracearray's stream.

Why a library: a register-blocked SGEMM at the H200's FP32 peak is a kernel of its own
(tensor-core-free, double-buffered shared tiles, tuned per shape); cuBLAS is that kernel,
shipped with every CUDA toolkit and as NVIDIA's ``nvidia-cublas`` wheel. Our tiled matmul
kernel stays for what cuBLAS does not take: integer, bool and float16 operands, layouts
that are neither row- nor column-major (a zero or arbitrary stride), sizes beyond 32-bit
cuBLAS arguments, empty products, and a GPU without the library (``TRACEARRAY_GPU_LIBRARIES=off``
forces it). cuBLAS runs with its default math mode: no TF32 (the products round as float32
FMAs, as NumPy's OpenBLAS does; the summation order differs, within the matmul tolerance).
Only ``compile(..., matmul_precision="tf32")`` lets float32 products use TF32 tensor cores
(``Gemm.tf32``: the handle's math mode is ``CUBLAS_TF32_TENSOR_OP_MATH`` for that call only,
under the handle's lock, and back to the default after it).

Layout: a row-major M x K matrix with row stride ``ld`` is the column-major K x M matrix
with leading dimension ``ld``, so C = A @ B (row-major) is computed as C^T = B^T A^T
(column-major); an operand whose *row* stride is 1 (a transposed view) is passed with
``CUBLAS_OP_T``. The library is found with ``cuda.pathfinder`` (wheels, conda, the CUDA
toolkit), else by the system's loader; it is loaded on the first product that uses it.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import forksafe
from .libraries import ProcessLibrary

OP_N, OP_T = 0, 1
DEFAULT_MATH, TF32_TENSOR_OP_MATH = 0, 3   # cublasMath_t
INT_MAX = (1 << 31) - 1
SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so", "cublas64_13.dll",
           "cublas64_12.dll")


class CublasError(RuntimeError):
    """A cuBLAS call failed."""


@dataclass(frozen=True)
class Gemm:
    """One strided-batched product, in cuBLAS's column-major terms (see the module
    docstring): C (m x n, ldc) = op_a(A) (m x k) @ op_b(B) (k x n), ``batch`` times, where
    cuBLAS's A is our B (``*_a`` fields) and its B our A (``*_b``)."""
    dtype: np.dtype
    op_a: int
    op_b: int
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    stride_a: int     # elements between batches (0: the same matrix for every batch)
    stride_b: int
    stride_c: int
    batch: int
    offset_a: int     # elements from the buffer's start
    offset_b: int
    tf32: bool = False   # float32 only: TF32 tensor cores allowed (compile's option)


def _operand(rows: int, cols: int, s_row: int, s_col: int) -> tuple[int, int] | None:
    """(op, leading dimension) of a row-major ``rows x cols`` view with these element
    strides, as cuBLAS's *transposed* (column-major ``cols x rows``) operand; None when it
    is neither row- nor column-major."""
    if cols == 1 and rows == 1:
        return OP_N, 1
    if s_col == 1 or cols == 1:
        ld = s_row if rows > 1 else cols
        if ld >= max(cols, 1):
            return OP_N, ld
    if s_row == 1 or rows == 1:
        ld = s_col if cols > 1 else rows
        if ld >= max(rows, 1):
            return OP_T, ld
    return None


def plan_gemm(dtype: np.dtype, M: int, N: int, K: int, a: tuple[int, int, int],
              b: tuple[int, int, int], batch: int, batch_strides: tuple[int, int, int],
              tf32: bool = False) -> Gemm | None:
    """The cuBLAS call of C[b] (M x N, C-contiguous) = A[b] (M x K) @ B[b] (K x N), where
    ``a`` and ``b`` are (row stride, column stride, offset) in elements and
    ``batch_strides`` the elements between batches of A, B and C; None when cuBLAS cannot
    take it (see the module docstring). ``tf32``: a float32 product may use TF32 tensor
    cores (float64 products never do)."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return None
    if min(M, N, K, batch) <= 0 or max(M, N, K, batch) > INT_MAX:
        return None
    # C^T = B^T A^T: cuBLAS's first operand is B, its second A
    ob = _operand(K, N, b[0], b[1])
    oa = _operand(M, K, a[0], a[1])
    if ob is None or oa is None or max(ob[1], oa[1], N) > INT_MAX:
        return None
    sa, sb, sc = batch_strides
    if batch > 1 and (sa < 0 or sb < 0 or sc < 0):
        return None
    return Gemm(dtype, ob[0], oa[0], N, M, K, ob[1], oa[1], N, sb, sa, sc, batch,
                b[2], a[2], tf32=tf32 and dtype == np.float32)


class Blas:
    """A cuBLAS handle on the device's stream (one per process, made on first use)."""

    def __init__(self, lib: Any, stream_handle: int):
        self.lib = lib
        self._lock = threading.Lock()   # a handle is not for concurrent use (cuBLAS docs)
        forksafe.renew_at_fork(self, "_lock")
        handle = ctypes.c_void_p()
        self._check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate_v2")
        self.handle = handle
        self._check(lib.cublasSetStream_v2(handle, ctypes.c_void_p(stream_handle)),
                    "cublasSetStream_v2")
        lib.cublasSetMathMode.restype = ctypes.c_int
        lib.cublasSetMathMode.argtypes = [ctypes.c_void_p, ctypes.c_int]
        p, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        self._fns = {}
        for dt, name, scalar in ((np.dtype(np.float32), "cublasSgemmStridedBatched",
                                  ctypes.c_float),
                                 (np.dtype(np.float64), "cublasDgemmStridedBatched",
                                  ctypes.c_double)):
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [p, i32, i32, i32, i32, i32, p, p, i32, i64, p, i32, i64, p, p,
                           i32, i64, i32]
            one, zero = scalar(1.0), scalar(0.0)
            self._fns[dt] = (fn, name, one, zero, ctypes.addressof(one),
                             ctypes.addressof(zero))

    def scale(self, dtype: np.dtype, ptr: int, count: int, factor: float) -> None:
        """Multiply ``count`` contiguous elements of ``dtype`` at ``ptr`` by ``factor`` (an
        FFT's normalisation), on the stream."""
        dtype = np.dtype(dtype)
        name = {np.dtype(np.float32): "cublasSscal_v2", np.dtype(np.float64): "cublasDscal_v2"}[dtype]
        scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_int]
        alpha = scalar(factor)
        step = INT_MAX - INT_MAX % 2   # cuBLAS counts are 32-bit
        with self._lock:
            for start in range(0, count, step):
                n = min(step, count - start)
                self._check(fn(self.handle, n, ctypes.addressof(alpha),
                               ptr + start * dtype.itemsize, 1), name)

    # ---- batched LU (small matrices; gpu/linalg.py): pointer arrays live in device memory
    def _batched(self, dtype: np.dtype, stem: str, argtypes: list) -> tuple[Any, str]:
        name = f"cublas{'S' if np.dtype(dtype) == np.float32 else 'D'}{stem}Batched"
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] + argtypes
        return fn, name

    def lu_batched(self, dtype: np.dtype, n: int, a_ptrs: int, lda: int, pivots: int,
                   info: int, batch: int) -> None:
        """``?getrfBatched``: LU with partial pivoting of ``batch`` column-major matrices in
        place (``a_ptrs``: device array of their pointers), pivots and info on the device."""
        i32, p = ctypes.c_int, ctypes.c_void_p
        fn, name = self._batched(dtype, "getrf", [i32, p, i32, p, p, i32])
        with self._lock:
            self._check(fn(self.handle, n, a_ptrs, lda, pivots, info, batch), name)

    def lu_solve_batched(self, dtype: np.dtype, trans: int, n: int, nrhs: int, a_ptrs: int,
                         lda: int, pivots: int, b_ptrs: int, ldb: int, batch: int) -> None:
        """``?getrsBatched``: solve op(A) X = B in place of B with ``lu_batched``'s factors."""
        i32, p = ctypes.c_int, ctypes.c_void_p
        fn, name = self._batched(dtype, "getrs", [i32, i32, i32, p, i32, p, p, i32, p, i32])
        host_info = ctypes.c_int(0)   # argument validity only (singularity: getrf's info)
        with self._lock:
            self._check(fn(self.handle, trans, n, nrhs, a_ptrs, lda, pivots, b_ptrs, ldb,
                           ctypes.byref(host_info), batch), name)
        if host_info.value:
            raise CublasError(f"{name}: argument {-host_info.value} is invalid")

    def lu_inverse_batched(self, dtype: np.dtype, n: int, a_ptrs: int, lda: int, pivots: int,
                           c_ptrs: int, ldc: int, info: int, batch: int) -> None:
        """``?getriBatched``: the inverses, out of place, from ``lu_batched``'s factors."""
        i32, p = ctypes.c_int, ctypes.c_void_p
        fn, name = self._batched(dtype, "getri", [i32, p, i32, p, p, i32, p, i32])
        with self._lock:
            self._check(fn(self.handle, n, a_ptrs, lda, pivots, c_ptrs, ldc, info, batch), name)

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise CublasError(f"{what} failed with cuBLAS status {status}")

    def gemm(self, g: Gemm, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        """Queue ``g`` on the stream: ``a_ptr``/``b_ptr`` the row-major operands' buffers
        (offsets are added here), ``c_ptr`` the C-contiguous result."""
        fn, name, _one, _zero, one, zero = self._fns[g.dtype]
        (op_a, op_b, m, n, k, pa, lda, sa, pb, ldb, sb, pc, ldc, sc, batch) = \
            gemm_arguments(g, a_ptr, b_ptr, c_ptr)
        with self._lock:
            if g.tf32:
                self._check(self.lib.cublasSetMathMode(self.handle, TF32_TENSOR_OP_MATH),
                            "cublasSetMathMode")
                try:
                    status = fn(self.handle, op_a, op_b, m, n, k, one, pa, lda, sa, pb, ldb,
                                sb, zero, pc, ldc, sc, batch)
                finally:
                    self._check(self.lib.cublasSetMathMode(self.handle, DEFAULT_MATH),
                                "cublasSetMathMode")
            else:
                status = fn(self.handle, op_a, op_b, m, n, k, one, pa, lda, sa, pb, ldb, sb,
                            zero, pc, ldc, sc, batch)
        self._check(status, name)


def gemm_arguments(g: Gemm, a_ptr: int, b_ptr: int, c_ptr: int) -> tuple[int, ...]:
    """The arguments of ``cublas?gemmStridedBatched`` after the handle, without alpha and
    beta (1 and 0): transa, transb, m, n, k, A, lda, strideA, B, ldb, strideB, C, ldc,
    strideC, batchCount. cuBLAS's A is our B and its B our A (C^T = B^T A^T)."""
    size = g.dtype.itemsize
    return (g.op_a, g.op_b, g.m, g.n, g.k, b_ptr + size * g.offset_a, g.lda, g.stride_a,
            a_ptr + size * g.offset_b, g.ldb, g.stride_b, c_ptr, g.ldc, g.stride_c, g.batch)


_BLAS = ProcessLibrary("cublas", SONAMES, lambda lib, stream: Blas(lib, stream),
                       (CublasError, AttributeError))


def blas_for(device: Any) -> Blas | None:
    """The process's cuBLAS handle on ``device``'s stream, or None: no library, turned off
    (``TRACEARRAY_GPU_LIBRARIES=off``), or a device that is not a CUDA one (the emulator)."""
    return _BLAS.get(device)
