"""cuBLAS's batched LU for the GPU's small dense solves and inverses: the device
implementations of ``linalg.solve`` (one right-hand side per system) and ``linalg.inv``.

A row-major n x n matrix is its transpose in column-major order, so the LU that
``?getrfBatched`` computes in place of a copy of the operand is that of A^T; then
``?getrsBatched`` with ``CUBLAS_OP_T`` solves (A^T)^T x = A x = b in place of a copy of b
(a vector is the same in either order), and ``?getriBatched`` writes (A^T)^{-1} in
column-major order, which read row-major is A^{-1}. A singular matrix (an exact zero pivot,
LAPACK's criterion too) is found on the device: its ``info`` is read when the host next waits
for the device, and raises NumPy's ``LinAlgError`` at the user's line then (with NumPy inputs,
at the end of the call).

The host (NumPy's LAPACK) takes the rest: float16 and other dtypes, several right-hand
sides, a batch that broadcasts one operand over the other, non-contiguous operands,
matrices larger than ``MAX_N`` (cuBLAS's batched LU is meant for small ones; a large
single system wants cuSOLVER, not built), and machines without cuBLAS.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ops import EXTERNALS
from . import blas as cublas
from .blas import OP_T
from .libraries import PendingInfo

MAX_N = 64
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _contiguous(buf: Any) -> bool:
    expect = 1
    for n, s in zip(reversed(buf.shape), reversed(buf.strides)):
        if n != 1 and s != expect:
            return False
        expect *= max(n, 1)
    return True


def _pointer_array(dev: Any, base: int, count: int, step: int) -> Any:
    """A device array of ``count`` pointers ``base + i * step`` (bytes)."""
    host = base + np.arange(count, dtype=np.uint64) * np.uint64(step)
    block = dev.allocator.allocate(host.nbytes)
    dev.htod(block.ptr, host.ctypes.data, host.nbytes)
    return block


def _factor(dev: Any, blas: Any, a: Any, n: int, batch: int) -> tuple[Any, ...]:
    """Copy ``batch`` contiguous n x n matrices and LU-factor the copies: (the copy, its
    pointer array, pivots, info), all device blocks."""
    size = a.dtype.itemsize
    lu = dev.allocator.allocate(batch * n * n * size)
    dev.dtod(lu.ptr, a.ptr, batch * n * n * size)
    pointers = _pointer_array(dev, lu.ptr, batch, n * n * size)
    pivots = dev.allocator.allocate(batch * n * 4)
    info = dev.allocator.allocate(batch * 4)
    blas.lu_batched(a.dtype, n, pointers.ptr, n, pivots.ptr, info.ptr, batch)
    return lu, pointers, pivots, info


def _square_batch(a: Any) -> tuple[int, int] | None:
    """(n, number of matrices) of a contiguous float stack of small square matrices."""
    if a.dtype not in _FLOATS or len(a.shape) < 2 or not _contiguous(a):
        return None
    n = a.shape[-1]
    if n == 0 or n > MAX_N or a.shape[-2] != n:
        return None
    return n, math.prod(a.shape[:-2])


def solve(dev: Any, operands: list, results: list) -> Any:
    a, b = operands
    x = results[0]
    if x is None:
        return None
    sq = _square_batch(a)
    if sq is None or b.dtype != a.dtype or x.dtype != a.dtype or not _contiguous(b):
        return NotImplemented
    n, batch = sq
    vector = len(b.shape) == 1
    if not vector and (b.shape[-1] != 1 or tuple(b.shape[:-2]) != tuple(a.shape[:-2])):
        return NotImplemented   # several right-hand sides, or a broadcast batch: the host
    if vector and batch != 1:
        return NotImplemented   # one vector for a stack of matrices: broadcast, the host
    blas = cublas.blas_for(dev)
    if blas is None or batch == 0:
        return NotImplemented if blas is None else None
    size = a.dtype.itemsize
    lu, pointers, pivots, info = _factor(dev, blas, a, n, batch)
    dev.dtod(x.ptr, b.ptr, batch * n * size)
    rhs = _pointer_array(dev, x.ptr, batch, n * size)
    blas.lu_solve_batched(a.dtype, OP_T, n, 1, pointers.ptr, n, pivots.ptr, rhs.ptr, n, batch)
    return PendingInfo(info, batch, np.linalg.LinAlgError("Singular matrix"))


def inv(dev: Any, operands: list, results: list) -> Any:
    a, out = operands[0], results[0]
    if out is None:
        return None
    sq = _square_batch(a)
    if sq is None or out.dtype != a.dtype:
        return NotImplemented
    n, batch = sq
    blas = cublas.blas_for(dev)
    if blas is None or batch == 0:
        return NotImplemented if blas is None else None
    size = a.dtype.itemsize
    lu, pointers, pivots, info = _factor(dev, blas, a, n, batch)
    targets = _pointer_array(dev, out.ptr, batch, n * n * size)
    blas.lu_inverse_batched(a.dtype, n, pointers.ptr, n, pivots.ptr, targets.ptr, n, info.ptr,
                            batch)
    return PendingInfo(info, batch, np.linalg.LinAlgError("Singular matrix"))


def register() -> None:
    """Make cuBLAS's batched LU the "cuda" implementation of solve and inv."""
    EXTERNALS["linalg.solve"].device["cuda"] = solve
    EXTERNALS["linalg.inv"].device["cuda"] = inv
