"""cuBLAS's batched LU for the GPU's small dense solves, inverses and determinants: the
device implementations of ``linalg.solve`` (one right-hand side per system), ``linalg.inv``,
``linalg.det`` and ``linalg.slogdet``.

A row-major n x n matrix is its transpose in column-major order, so the LU that
``?getrfBatched`` computes in place of a copy of the operand is that of A^T; then
``?getrsBatched`` with ``CUBLAS_OP_T`` solves (A^T)^T x = A x = b in place of a copy of b
(a vector is the same in either order), and ``?getriBatched`` writes (A^T)^{-1} in
column-major order, which read row-major is A^{-1}. A singular matrix (an exact zero pivot,
LAPACK's criterion too) is found on the device: its ``info`` is read when the host next waits
for the device, and raises NumPy's ``LinAlgError`` at the user's line then (with NumPy inputs,
at the end of the call).

A determinant is NumPy's reading of the factors (``det_kernel_ir``): the LU of A^T has A's
determinant; 0 and -inf when getrf found an exact zero pivot, else the sign of the row
interchanges times the signs of U's diagonal, and the sum of the logs of its magnitudes, in
order; ``det`` is ``sign * exp(logdet)`` in the matrix's dtype, as NumPy computes it.

Cholesky and QR factors are kernels of our own (``factorizations.py``).

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


def _square_batch(a: Any, *others: Any) -> tuple[int, int] | None:
    """(n, number of matrices) of a contiguous float stack of small square matrices, when
    each of ``others`` (the call's other buffers; None: an unused result) has its dtype."""
    if a.dtype not in _FLOATS or len(a.shape) < 2 or not _contiguous(a) or \
            any(o is not None and o.dtype != a.dtype for o in others):
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
    sq = _square_batch(a, b, x)
    if sq is None or not _contiguous(b):
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
    sq = _square_batch(a, out)
    if sq is None:
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


def det_kernel_ir(dtype: Any, name: str, pivot_bits: int = 32) -> str:
    """``name(lu, pivots, info, n, batch, sign, logdet, det)``: for each of ``batch``
    factored n x n matrices (getrf's: column-major, 1-based pivots of ``pivot_bits`` --
    cuBLAS's int32, cuSOLVER's int64 --, int32 info), the outputs whose pointers are not
    null, a thread per matrix."""
    from llvmlite import ir

    from .sort import _key_type, _Loop, sreg
    dtype = np.dtype(dtype)
    ft = _key_type(dtype)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    module = ir.Module(name=name)
    P, Q = ft.as_pointer(1), i32.as_pointer(1)
    pivot_type = ir.IntType(pivot_bits)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, pivot_type.as_pointer(1), Q,
                                                             i64, i64, P, P, P]),
                     name=name)
    fn.calling_convention = "ptx_kernel"
    lu, pivots, info, n, batch, sign_out, logdet_out, det_out = fn.args
    suffix = "f" if dtype == np.float32 else ""
    log = ir.Function(module, ir.FunctionType(ft, [ft]), f"__nv_log{suffix}")
    exp = ir.Function(module, ir.FunctionType(ft, [ft]), f"__nv_exp{suffix}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(i64, 0), ir.Constant(i64, 1)
    fzero, fone = ir.Constant(ft, 0.0), ir.Constant(ft, 1.0)
    start = b.add(b.mul(sreg(b, "ctaid.x"), sreg(b, "ntid.x")), sreg(b, "tid.x"))
    step = b.mul(sreg(b, "nctaid.x"), sreg(b, "ntid.x"))
    mats = _Loop(b, fn, start, lambda m: b.icmp_unsigned("<", m, batch), "matrix")
    m = mats.var
    singular = b.icmp_signed("!=", b.load(b.gep(info, [m])), ir.Constant(i32, 0))
    base = b.mul(m, b.mul(n, n))
    pre = b.block
    diag = _Loop(b, fn, zero, lambda i: b.icmp_unsigned("<", i, n), "diag")
    head_here = b.block
    b.position_at_start(diag.head)
    acc_sign, acc_log = b.phi(ft), b.phi(ft)
    acc_sign.add_incoming(fone, pre)
    acc_log.add_incoming(fzero, pre)
    b.position_at_end(head_here)
    i = diag.var
    piv = b.load(b.gep(pivots, [b.add(b.mul(m, n), i)]))
    piv = b.sext(piv, i64) if pivot_bits < 64 else piv
    swapped = b.icmp_signed("!=", piv, b.add(i, one))
    u = b.load(b.gep(lu, [b.add(base, b.add(b.mul(i, n), i))]))
    negative = b.fcmp_ordered("<", u, fzero)
    flips = b.xor(swapped, negative)
    new_sign = b.select(flips, b.fneg(acc_sign), acc_sign)
    new_log = b.fadd(acc_log, b.call(log, [b.select(negative, b.fneg(u), u)]))
    acc_sign.add_incoming(new_sign, b.block)
    acc_log.add_incoming(new_log, b.block)
    diag.close(b.add(i, one))
    sign = b.select(singular, fzero, acc_sign)
    logdet = b.select(singular, ir.Constant(ft, float("-inf")), acc_log)
    for out, v in ((sign_out, sign), (logdet_out, logdet)):
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(out, i64), zero)):
            b.store(v, b.gep(out, [m]))
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(det_out, i64), zero)):
        b.store(b.fmul(sign, b.call(exp, [logdet])), b.gep(det_out, [m]))
    mats.close(b.add(m, step))
    b.ret_void()
    return str(module)


_KERNELS: dict[tuple[str, str], tuple[str, str, str]] = {}


def small_kernel(kind: str, dtype: Any, make_ir: Any) -> tuple[str, str, str]:
    """(entry name, IR, PTX) of the one-entry kernel ``ta_<kind>_<dtype>`` that
    ``make_ir(dtype, name)`` generates, made once per process (the PTX through the disk
    cache)."""
    from . import ptx as ptxmod
    from .driver import current_target
    key = (kind, np.dtype(dtype).str)
    if key not in _KERNELS:
        name = f"ta_{kind}_{np.dtype(dtype).name}"
        text = make_ir(dtype, name)
        _KERNELS[key] = (name, text, ptxmod.compile_ptx(text, current_target()))
    return _KERNELS[key]


def _determinants(dev: Any, a: Any, sign: Any, logdet: Any, det: Any) -> Any:
    """The batch's determinants (``det``) or signs and log-magnitudes (``sign``,
    ``logdet``): cuBLAS's LU, then ``det_kernel_ir``'s reading of it."""
    from .driver import sm_count
    from .sort import _launch
    sq = _square_batch(a, sign, logdet, det)
    outs = [o for o in (sign, logdet, det) if o is not None]
    if sq is None:
        return NotImplemented
    n, batch = sq
    blas = cublas.blas_for(dev)
    if blas is None or batch == 0 or not outs:
        return NotImplemented if blas is None else None
    lu, pointers, pivots, info = _factor(dev, blas, a, n, batch)
    name, text, ptx = small_kernel("det", a.dtype, det_kernel_ir)
    fn = dev.load(ptx, [name], text)[name]
    _launch(dev, fn, max(1, min(-(-batch // 128), 32 * sm_count())), 128,
            [lu.ptr, pivots.ptr, info.ptr, n, batch] +
            [o.ptr if o is not None else 0 for o in (sign, logdet, det)])
    return None


def determinant_implementations(determinants: Any) -> tuple[Any, Any]:
    """The device implementations of det and slogdet over ``determinants(dev, a, sign,
    logdet, det)`` (cuBLAS's batched LU here, cuSOLVER's getrf in ``dense.py``)."""
    def det(dev: Any, operands: list, results: list) -> Any:
        return determinants(dev, operands[0], None, None, results[0])

    def slogdet(dev: Any, operands: list, results: list) -> Any:
        return determinants(dev, operands[0], results[0], results[1], None)
    return det, slogdet


det, slogdet = determinant_implementations(_determinants)


def register() -> None:
    """Make cuBLAS's batched LU the "cuda" implementation of solve, inv, det and slogdet."""
    EXTERNALS["linalg.solve"].device["cuda"] = solve
    EXTERNALS["linalg.inv"].device["cuda"] = inv
    EXTERNALS["linalg.det"].device["cuda"] = det
    EXTERNALS["linalg.slogdet"].device["cuda"] = slogdet

