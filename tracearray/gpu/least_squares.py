"""Pseudo-inverses and least squares on the GPU from the Jacobi SVD (``gpu/jacobi.py``): the
device implementations of ``linalg.pinv``, ``linalg.lstsq`` and the rank probe
``linalg.lstsq_rank``, for contiguous float32/float64 operands whose SVD the kernel takes
(the shorter side at most ``MAX_N``, the longer at most ``MAX_ROWS``).

Both are NumPy's formulas over the reduced SVD A = U diag(s) V^T: singular values at or below
``rcond`` times the largest count as zero (LAPACK gelsd's rule, and NumPy's pinv's), the
others are inverted; pinv = V diag(s+) U^T and lstsq's x = V diag(s+) U^T b, its rank the
count of values above the cutoff and its residuals ||b - A x||^2 per column (only for a full
rank and m > n, as NumPy returns them). Arithmetic is float64 (float32 results rounded once),
as NumPy's LAPACK calls compute float32 in double. Divergence gpu-spectral-basis.
"""
from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from ..ops import EXTERNALS
from .jacobi import MAX_N, THREADS, _Block, _io, _launch_blocks, _svd_shape, _work, \
    svd_kernel_ir


def _bits(x: float) -> int:
    """A float64's bits as a kernel's 8-byte argument."""
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


def _reduced_svd(dev: Any, a: Any, hermitian: bool = False) -> tuple:
    """(u, s, vt) of the stack ``a``'s reduced SVD, in new device blocks of a's dtype."""
    m, n = a.shape[-2], a.shape[-1]
    batch, k, size = math.prod(a.shape[:-2]), min(m, n), a.dtype.itemsize
    u, s, vt = (dev.allocator.allocate(max(batch * count, 1) * size)
                for count in (m * k, k, k * n))
    work = _work(dev, m, n, batch)
    _launch_blocks(dev, "svd", a.dtype, svd_kernel_ir, batch,
                   [a.ptr, u.ptr, s.ptr, vt.ptr, work.ptr if work is not None else 0,
                    m, n, batch, 1, 0, int(bool(hermitian))])
    return u, s, vt


def pinv_kernel_ir(dtype: Any, name: str) -> str:
    """``name(u, s, vt, out, m, n, k, batch, rcond)``: a block per matrix, NumPy's
    pseudo-inverse from the reduced SVD (u m x k, s k, vt k x n): V diag(s+) U^T, s+ = 1/s
    for s above ``rcond`` (a float64's bits) times the largest, else 0 (float64 sums)."""
    from llvmlite import ir

    from .sort import _Loop, sreg
    dtype = np.dtype(dtype)
    module = ir.Module(name=name)
    gt = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    P = gt.as_pointer(1)
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P] * 4 + [i64] * 5), name=name)
    fn.calling_convention = "ptx_kernel"
    u, s, vt, out, m, n, k, batch, rcond_bits = fn.args
    blk = _Block(module, fn, name)
    b, c0 = blk.b, blk.const(0)
    load, store = _io(blk, dtype)
    inverse = blk.array("sinv", blk.f64, MAX_N)
    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda x: b.icmp_unsigned("<", x, batch), "matrix")
    x_ = mats.var
    u_m = b.gep(u, [b.mul(x_, b.mul(m, k))])
    vt_m = b.gep(vt, [b.mul(x_, b.mul(k, n))])
    s_m = b.gep(s, [b.mul(x_, k)])
    largest = load(s_m)          # (s[0]; NaN for a non-finite matrix: a NaN result)
    cutoff = b.fmul(b.bitcast(rcond_bits, blk.f64), largest)
    unknown = b.fcmp_unordered("uno", largest, largest)

    def invert(j: Any) -> None:
        sj = load(b.gep(s_m, [j]))
        b.store(b.select(b.fcmp_ordered(">", sj, cutoff), b.fdiv(blk.f(1.0), sj),
                         blk.f(0.0)), inverse(j))
    blk.each(k, "invert", invert)
    blk.barrier()

    def entry(p: Any) -> None:           # out[i, j] = sum_l vt[l, i] s+[l] u[j, l]
        i, j = b.udiv(p, m), b.urem(p, m)
        store(b.select(unknown, blk.f(math.nan), blk.total(c0, k, "sum", lambda l_: b.fmul(
            b.fmul(load(b.gep(vt_m, [b.add(b.mul(l_, n), i)])), b.load(inverse(l_))),
            load(b.gep(u_m, [b.add(b.mul(j, k), l_)]))))),
            b.gep(out, [b.add(b.mul(x_, b.mul(n, m)), p)]))
    blk.each(b.mul(n, m), "entry", entry)
    blk.barrier()       # (the next matrix's s+ overwrites this one's)
    mats.close(b.add(x_, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


def pinv(dev: Any, operands: list, results: list, *, rcond: float, hermitian: bool) -> Any:
    """``np.linalg.pinv`` as NumPy computes it, from the reduced SVD then
    ``pinv_kernel_ir``."""
    a, out = operands[0], results[0]
    if out is None:
        return None
    if _svd_shape(a) is None or out.dtype != a.dtype:
        return NotImplemented
    m, n = a.shape[-2], a.shape[-1]
    batch = math.prod(a.shape[:-2])
    if batch == 0:
        return None
    u, s, vt = _reduced_svd(dev, a, hermitian)
    _launch_blocks(dev, "pinv", a.dtype, pinv_kernel_ir, batch,
                   [u.ptr, s.ptr, vt.ptr, out.ptr, m, n, min(m, n), batch, _bits(rcond)])
    return None


def lstsq_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, b, u, s, vt, x, res, rank32, rank64, s_out, m, n, nrhs, rcond, residuals)``:
    one matrix's least squares from its reduced SVD (u m x k, s k, vt k x n), a block per
    column of the C-contiguous ``b`` (m x nrhs) at a time: c = s+ * (U^T b), x = V c, and with
    ``residuals`` the column's ||b - A x||^2; block 0 writes the rank (``rank32`` / ``rank64``,
    either null) and copies s to ``s_out`` (when not null). ``rcond``: a float64's bits. A
    non-finite matrix (NaN singular values) gives NaN x and residuals, rank 0."""
    from llvmlite import ir

    from .sort import _Loop, sreg
    dtype = np.dtype(dtype)
    module = ir.Module(name=name)
    gt = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    P = gt.as_pointer(1)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P] * 7 + [
        i32.as_pointer(1), i64.as_pointer(1), P] + [i64] * 5), name=name)
    fn.calling_convention = "ptx_kernel"
    a, b_in, u, s, vt, x, res, rank32, rank64, s_out, m, n, nrhs, rcond_bits, residuals = \
        fn.args
    blk = _Block(module, fn, name)
    b, c0 = blk.b, blk.const(0)
    load, store = _io(blk, dtype)
    k = b.select(b.icmp_unsigned("<", m, n), m, n)
    inverse = blk.array("sinv", blk.f64, MAX_N)
    coef = blk.array("coef", blk.f64, MAX_N)
    part = blk.array("part", blk.f64, THREADS)
    largest = load(s)            # (NaN for a non-finite matrix: NaN results)
    cutoff = b.fmul(b.bitcast(rcond_bits, blk.f64), largest)
    unknown = b.fcmp_unordered("uno", largest, largest)
    nan = blk.f(math.nan)

    def invert(j: Any) -> None:
        sj = load(b.gep(s, [j]))
        b.store(b.select(b.fcmp_ordered(">", sj, cutoff), b.fdiv(blk.f(1.0), sj),
                         blk.f(0.0)), inverse(j))
    blk.each(k, "invert", invert)
    first = b.icmp_unsigned("==", sreg(b, "ctaid.x"), c0)
    with b.if_then(first):
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(s_out, i64), c0)):
            blk.each(k, "s", lambda j: b.store(b.load(b.gep(s, [j])), b.gep(s_out, [j])))
        with blk.single():
            count = blk.total(c0, k, "rank", lambda j: b.uitofp(b.zext(b.fcmp_ordered(
                ">", load(b.gep(s, [j])), cutoff), i64), blk.f64))
            rank = b.fptoui(count, i64)
            with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(rank32, i64), c0)):
                b.store(b.trunc(rank, i32), rank32)
            with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(rank64, i64), c0)):
                b.store(rank, rank64)
    blk.barrier()
    cols = _Loop(b, fn, sreg(b, "ctaid.x"), lambda c: b.icmp_unsigned("<", c, nrhs), "column")
    col = cols.var

    def b_at(r: Any) -> Any:
        return b.gep(b_in, [b.add(b.mul(r, nrhs), col)])

    def x_at(i: Any) -> Any:
        return b.gep(x, [b.add(b.mul(i, nrhs), col)])
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(x, i64), c0)):
        blk.each(k, "coef", lambda j: b.store(b.fmul(b.load(inverse(j)), blk.total(
            c0, m, "utb", lambda r: b.fmul(load(b.gep(u, [b.add(b.mul(r, k), j)])),
                                           load(b_at(r))))), coef(j)))
        blk.barrier()
        blk.each(n, "x", lambda i: store(b.select(unknown, nan, blk.total(
            c0, k, "vc", lambda j: b.fmul(load(b.gep(vt, [b.add(b.mul(j, n), i)])),
                                          b.load(coef(j))))), x_at(i)))
    blk.barrier()
    with b.if_then(b.icmp_unsigned("!=", residuals, c0)):
        b.store(blk.f(0.0), part(blk.tid))

        def square(r: Any) -> None:      # (b - A x)[r]^2, into this thread's partial sum
            ax = blk.total(c0, n, "ax", lambda i: b.fmul(
                load(b.gep(a, [b.add(b.mul(r, n), i)])), load(x_at(i))))
            d = b.fsub(load(b_at(r)), ax)
            b.store(b.fadd(b.load(part(blk.tid)), b.fmul(d, d)), part(blk.tid))
        blk.each(m, "resid", square)
        blk.barrier()
        with blk.single():
            store(b.select(unknown, nan, blk.total(c0, blk.ntid, "sum",
                                                   lambda t: b.load(part(t)))),
                  b.gep(res, [col]))
    blk.barrier()       # (the next column overwrites coef and the partial sums)
    cols.close(b.add(col, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


def _least_squares(dev: Any, a: Any, b: Any, rcond: Any, x: Any, res: Any, rank32: Any,
                   rank64: Any, s_out: Any, residuals: int) -> Any:
    from .driver import sm_count
    from .linalg import _contiguous, small_kernel
    from .sort import _launch
    if _svd_shape(a) is None or len(a.shape) != 2 or b.dtype != a.dtype or \
            not _contiguous(b) or any(o is not None and o.dtype != a.dtype
                                      for o in (x, res, s_out)):
        return NotImplemented
    m, n = a.shape
    nrhs = b.shape[1] if len(b.shape) == 2 else 1
    if nrhs == 0:
        return NotImplemented
    if rcond is None:        # NumPy's default: float64's eps (it computes in double)
        rcond = float(np.finfo(np.float64).eps) * max(m, n)
    u, s, vt = _reduced_svd(dev, a)
    name, text, ptx = small_kernel("lstsq", a.dtype, lstsq_kernel_ir)
    fn = dev.load(ptx, [name], text)[name]
    want_x = x is not None or (res is not None and residuals)
    keep = None
    if want_x and x is None:
        keep = dev.allocator.allocate(n * nrhs * a.dtype.itemsize)
    xp = (x.ptr if x is not None else keep.ptr) if want_x else 0
    _launch(dev, fn, max(1, min(nrhs, 32 * sm_count())), THREADS,
            [a.ptr, b.ptr, u.ptr, s.ptr, vt.ptr, xp,
             res.ptr if res is not None and residuals else 0,
             rank32.ptr if rank32 is not None else 0, rank64.ptr if rank64 is not None else 0,
             s_out.ptr if s_out is not None else 0, m, n, nrhs, _bits(rcond),
             int(bool(residuals and res is not None))])
    return None


def lstsq(dev: Any, operands: list, results: list, *, rcond: Any, residuals: int) -> Any:
    """``np.linalg.lstsq`` (a 2-d ``a`` as NumPy requires) from the reduced SVD: x, the
    residuals (``residuals`` of them: the rank probe found a full rank and m > n), the rank
    and the singular values."""
    x, res, rank, s = results
    a, b = operands
    return _least_squares(dev, a, b, rcond, x, res, rank, None, s, residuals)


def lstsq_rank(dev: Any, operands: list, results: list, *, rcond: Any) -> Any:
    """The rank ``np.linalg.lstsq`` finds (the probe that sizes its residuals)."""
    a, b = operands
    if results[0] is None:
        return None
    return _least_squares(dev, a, b, rcond, None, None, None, results[0], None, 0)


def register() -> None:
    """Make the SVD's formulas the "cuda" implementations of pinv, lstsq and its rank."""
    EXTERNALS["linalg.pinv"].device["cuda"] = pinv
    EXTERNALS["linalg.lstsq"].device["cuda"] = lstsq
    EXTERNALS["linalg.lstsq_rank"].device["cuda"] = lstsq_rank
