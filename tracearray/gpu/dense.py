"""Dense matrices past the block kernels' size, through cuSOLVER (``solver.py``): the device
implementations of cholesky, solve, inv, det, slogdet, eigh, eigvalsh, svd, qr, eig and
eigvals for contiguous float32/float64 stacks whose matrices the block kernels
(``factorizations.py``, ``jacobi.py``) or cuBLAS's batched LU (``linalg.py``) do not take:
more than ``MAX_N`` rows or columns (an SVD's longer side past ``jacobi.MAX_ROWS``, or
full_matrices vectors of a side past ``MAX_N``), a solve with several right-hand sides, and
every np.linalg.eig / eigvals of matrices past ``MAX_N`` (smaller ones stay on the host's
LAPACK: one cuSOLVER call per matrix does not pay for a large batch of small matrices).

Layout: a row-major matrix is its transpose in column-major order, which is what cuSOLVER
reads. Where that is the same problem (a symmetric matrix's other triangle, LU of A^T with
getrs's transpose, the SVD of A^T with its factors swapped) the buffers are passed as they
are; where it is not (QR, a tall SVD, eig, several right-hand sides) the device's strided
copy (``copy.strided_copy``) transposes into and out of a column-major scratch stack. One
cuSOLVER call per matrix of the stack, all on the stream.

As NumPy: a singular matrix raises LinAlgError("Singular matrix") for solve and inv (det and
slogdet give 0 and (0, -inf)), one that is not positive definite LinAlgError for cholesky,
a failed convergence LinAlgError for eigh, svd and eig -- read from the ``info`` words when
the host next waits (``PendingInfo``); eig and eigvals of a matrix with inf or NaN raise
NumPy's LinAlgError("Array must not contain infs or NaNs") (checked on the device by the
probe of the eigenvalues' kind). eigh and svd of a non-finite matrix give NaNs, as the block
kernels do (divergence gpu-spectral-basis). eig's real or complex result is NumPy's rule
(``ops/linalg.py``): real when every eigenvalue of the stack has a zero imaginary part.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..ops import EXTERNALS
from . import solver as cusolver
from .copy import strided_copy
from .libraries import PendingInfo
from .linalg import (
    _FLOATS,
    MAX_N,
    _contiguous,
    det_kernel_ir,
    determinant_implementations,
    small_kernel,
)
from .solver import LOWER, OP_N, OP_T, UPPER

FEW = 8   # a stack of at most this many small matrices may take cuSOLVER's per-matrix calls
THREADS = 128


# ---- kernels around the library calls
def fill_kernel_ir(dtype: Any, name: str) -> str:
    """``name(out, rows, cols, count, mode)``: over ``count`` elements of a C-contiguous
    stack of rows x cols matrices, mode 0 zeroes the strictly upper triangle, 1 the strictly
    lower one (a factor's unused triangle), 2 writes the identity."""
    from llvmlite import ir

    from .sort import _key_type, _Loop, sreg
    ft = _key_type(np.dtype(dtype))
    i64 = ir.IntType(64)
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ft.as_pointer(1)] + [i64] * 4),
                     name=name)
    fn.calling_convention = "ptx_kernel"
    out, rows, cols, count, mode = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    start = b.add(b.mul(sreg(b, "ctaid.x"), sreg(b, "ntid.x")), sreg(b, "tid.x"))
    step = b.mul(sreg(b, "nctaid.x"), sreg(b, "ntid.x"))
    loop = _Loop(b, fn, start, lambda p: b.icmp_unsigned("<", p, count), "fill")
    p = loop.var
    q = b.urem(p, b.mul(rows, cols))
    i, j = b.udiv(q, cols), b.urem(q, cols)
    slot = b.gep(out, [p])
    def c(v: int) -> Any:
        return ir.Constant(i64, v)
    with b.if_then(b.and_(b.icmp_unsigned("==", mode, c(0)), b.icmp_unsigned(">", j, i))):
        b.store(ir.Constant(ft, 0.0), slot)
    with b.if_then(b.and_(b.icmp_unsigned("==", mode, c(1)), b.icmp_unsigned("<", j, i))):
        b.store(ir.Constant(ft, 0.0), slot)
    with b.if_then(b.icmp_unsigned("==", mode, c(2))):
        b.store(b.select(b.icmp_unsigned("==", i, j), ir.Constant(ft, 1.0),
                         ir.Constant(ft, 0.0)), slot)
    loop.close(b.add(p, step))
    b.ret_void()
    return str(module)


def nonfinite_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, per, batch, info, o1, c1, o2, c2, o3, c3)``: a block per matrix of the stack
    ``a`` (``per`` elements each); a matrix with an inf or NaN gets NaN in its ``c_k``
    elements of each output ``o_k`` (null: none) and a zero ``info`` word (null: none)."""
    from llvmlite import ir

    from .factorizations import _barrier_function, _shared
    from .sort import _key_type, _Loop, sreg
    ft = _key_type(np.dtype(dtype))
    i32, i64 = ir.IntType(32), ir.IntType(64)
    P = ft.as_pointer(1)
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, i64, i64, i32.as_pointer(1),
                                                             P, i64, P, i64, P, i64]),
                     name=name)
    fn.calling_convention = "ptx_kernel"
    a, per, batch, info, o1, c1, o2, c2, o3, c3 = fn.args
    flag = _shared(module, f"{name}_flag", i32, 1)
    barrier_fn = _barrier_function(module)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(i64, 0)
    tid, ntid = sreg(b, "tid.x"), sreg(b, "ntid.x")
    slot = b.gep(flag, [ir.Constant(i32, 0), ir.Constant(i32, 0)])

    def barrier() -> None:
        b.call(barrier_fn, [ir.Constant(i32, 0)])
    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda m: b.icmp_unsigned("<", m, batch), "mat")
    m = mats.var
    with b.if_then(b.icmp_unsigned("==", tid, zero)):
        b.store(ir.Constant(i32, 0), slot)
    barrier()
    scan = _Loop(b, fn, tid, lambda e: b.icmp_unsigned("<", e, per), "scan")
    x = b.load(b.gep(a, [b.add(b.mul(m, per), scan.var)]))
    with b.if_then(b.fcmp_unordered("uno", b.fsub(x, x), b.fsub(x, x))):   # inf - inf: NaN
        b.store(ir.Constant(i32, 1), slot)
    scan.close(b.add(scan.var, ntid))
    barrier()
    with b.if_then(b.icmp_unsigned("!=", b.load(slot), ir.Constant(i32, 0))):
        for out, count in ((o1, c1), (o2, c2), (o3, c3)):
            with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(out, i64), zero)):
                fill = _Loop(b, fn, tid, lambda e, count=count: b.icmp_unsigned("<", e, count),
                             "nan")
                b.store(ir.Constant(ft, math.nan), b.gep(out, [b.add(b.mul(m, count), fill.var)]))
                fill.close(b.add(fill.var, ntid))
        with b.if_then(b.and_(b.icmp_unsigned("==", tid, zero),
                              b.icmp_unsigned("!=", b.ptrtoint(info, i64), zero))):
            b.store(ir.Constant(i32, 0), b.gep(info, [m]))
    barrier()     # (the next matrix resets the flag)
    mats.close(b.add(m, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


def eig_probe_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, w, n, batch, real, bad)``: over a stack of n x n matrices and geev's
    eigenvalues (2n per matrix: real parts, then imaginary ones), ``real`` (int64, set to 1
    before) becomes 0 when an imaginary part is not zero, ``bad`` (int32, 0 before) 1 when
    an element of ``a`` is inf or NaN."""
    from llvmlite import ir

    from .sort import _key_type, _Loop, sreg
    ft = _key_type(np.dtype(dtype))
    i32, i64 = ir.IntType(32), ir.IntType(64)
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [
        ft.as_pointer(1), ft.as_pointer(1), i64, i64, i64.as_pointer(1), i32.as_pointer(1)]),
        name=name)
    fn.calling_convention = "ptx_kernel"
    a, w, n, batch, real, bad = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fzero = ir.Constant(ft, 0.0)
    start = b.add(b.mul(sreg(b, "ctaid.x"), sreg(b, "ntid.x")), sreg(b, "tid.x"))
    step = b.mul(sreg(b, "nctaid.x"), sreg(b, "ntid.x"))
    loop = _Loop(b, fn, start, lambda p: b.icmp_unsigned("<", p, b.mul(batch, b.mul(n, n))),
                 "probe")
    p = loop.var
    x = b.load(b.gep(a, [p]))
    with b.if_then(b.fcmp_unordered("uno", b.fsub(x, x), b.fsub(x, x))):
        b.store(ir.Constant(i32, 1), b.gep(bad, [ir.Constant(i64, 0)]))
    with b.if_then(b.icmp_unsigned("<", p, b.mul(batch, n))):
        m, j = b.udiv(p, n), b.urem(p, n)
        wi = b.load(b.gep(w, [b.add(b.mul(m, b.add(n, n)), b.add(n, j))]))
        with b.if_then(b.fcmp_unordered("!=", wi, fzero)):
            b.store(ir.Constant(i64, 0), b.gep(real, [ir.Constant(i64, 0)]))
    loop.close(b.add(p, step))
    b.ret_void()
    return str(module)


def eig_kernel_ir(dtype: Any, name: str) -> str:
    """``name(w, vr, n, batch, real, w_out, v_out)``: geev's results (per matrix 2n values,
    real parts then imaginary ones, and the column-major right eigenvectors ``vr`` in
    LAPACK's real packing) as NumPy's: row-major vectors, real arrays when ``real``, else
    interleaved (real, imaginary) pairs -- a conjugate pair's vectors from the two columns
    ``vr[:, j] +- i vr[:, j+1]`` (the first of the pair has the positive imaginary part).
    ``v_out`` null: the values only."""
    from llvmlite import ir

    from .sort import _key_type, _Loop, sreg
    ft = _key_type(np.dtype(dtype))
    i64 = ir.IntType(64)
    P = ft.as_pointer(1)
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, P, i64, i64, i64, P, P]),
                     name=name)
    fn.calling_convention = "ptx_kernel"
    w, vr, n, batch, real, w_out, v_out = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one, two = ir.Constant(i64, 0), ir.Constant(i64, 1), ir.Constant(i64, 2)
    fzero = ir.Constant(ft, 0.0)
    nn = b.mul(n, n)
    is_real = b.icmp_unsigned("!=", real, zero)
    start = b.add(b.mul(sreg(b, "ctaid.x"), sreg(b, "ntid.x")), sreg(b, "tid.x"))
    step = b.mul(sreg(b, "nctaid.x"), sreg(b, "ntid.x"))
    loop = _Loop(b, fn, start, lambda p: b.icmp_unsigned("<", p, b.mul(batch, nn)), "eig")
    p = loop.var
    m, q = b.udiv(p, nn), b.urem(p, nn)
    r, c = b.udiv(q, n), b.urem(q, n)
    wbase = b.mul(m, b.add(n, n))
    wr = b.load(b.gep(w, [b.add(wbase, c)]))
    wi = b.load(b.gep(w, [b.add(wbase, b.add(n, c))]))
    with b.if_then(b.icmp_unsigned("==", r, zero)):
        at = b.add(b.mul(m, n), c)
        with b.if_else(is_real) as (then, otherwise):
            with then:
                b.store(wr, b.gep(w_out, [at]))
            with otherwise:
                b.store(wr, b.gep(w_out, [b.mul(at, two)]))
                b.store(wi, b.gep(w_out, [b.add(b.mul(at, two), one)]))
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(v_out, i64), zero)):
        vbase = b.mul(m, nn)

        def column(col: Any) -> Any:
            return b.load(b.gep(vr, [b.add(vbase, b.add(b.mul(col, n), r))]))
        with b.if_else(is_real) as (then, otherwise):
            with then:
                b.store(column(c), b.gep(v_out, [p]))
            with otherwise:
                positive = b.fcmp_ordered(">", wi, fzero)
                negative = b.fcmp_ordered("<", wi, fzero)
                # the pair's first column: c itself, or c - 1 for its second member
                first = b.select(negative, b.sub(c, one), c)
                re = column(first)
                second = b.select(negative, c, b.add(c, one))
                im_col = b.select(b.or_(positive, negative), second, c)
                im = b.select(b.or_(positive, negative), column(im_col), fzero)
                im = b.select(negative, b.fneg(im), im)
                b.store(re, b.gep(v_out, [b.mul(p, two)]))
                b.store(im, b.gep(v_out, [b.add(b.mul(p, two), one)]))
    loop.close(b.add(p, step))
    b.ret_void()
    return str(module)


def _launch_over(dev: Any, kind: str, dtype: Any, make_ir: Any, count: int, args: list,
                 per_block: bool = False) -> None:
    """Launch ``make_ir``'s kernel over ``count`` elements (``per_block``: blocks)."""
    from .driver import sm_count
    from .sort import _launch
    name, text, ptx = small_kernel(kind, dtype, make_ir)
    fn = dev.load(ptx, [name], text)[name]
    grid = count if per_block else -(-count // THREADS)
    _launch(dev, fn, max(1, min(grid, 32 * sm_count())), THREADS, args)


def _fill(dev: Any, out: Any, rows: int, cols: int, batch: int, mode: int) -> None:
    _launch_over(dev, "fill", out.dtype, fill_kernel_ir, batch * rows * cols,
                 [out.ptr, rows, cols, batch * rows * cols, mode])


def _nan_where_nonfinite(dev: Any, a: Any, batch: int, info: Any, *outs: tuple) -> None:
    """NaN results (and a zero info word) for the matrices of ``a`` with an inf or NaN;
    ``outs``: (buffer or None, elements per matrix)."""
    per = math.prod(a.shape[-2:])
    args = [a.ptr, per, batch, info.ptr if info is not None else 0]
    for out, count in list(outs) + [(None, 0)] * (3 - len(outs)):
        args += [out.ptr if out is not None else 0, count]
    _launch_over(dev, "nonfinite", a.dtype, nonfinite_kernel_ir, batch, args, per_block=True)


# ---- buffers
def _stack(a: Any, *others: Any) -> tuple[int, int, int] | None:
    """(m, n, number of matrices) of a contiguous float stack whose other buffers (None: an
    unused result) have its dtype; None otherwise."""
    if a.dtype not in _FLOATS or len(a.shape) < 2 or not _contiguous(a) or \
            any(o is not None and o.dtype != a.dtype for o in others):
        return None
    return a.shape[-2], a.shape[-1], math.prod(a.shape[:-2])


def _scratch(dev: Any, count: int, itemsize: int) -> Any:
    return dev.allocator.allocate(max(count, 1) * itemsize)


def _copy(dev: Any, a: Any, count: int) -> Any:
    """A scratch copy of the first ``count`` elements of ``a`` (cuSOLVER works in place)."""
    out = _scratch(dev, count, a.dtype.itemsize)
    dev.dtod(out.ptr, a.ptr, count * a.dtype.itemsize)
    return out


def _transpose(dev: Any, dst: int, src: int, batch: int, rows: int, cols: int,
               itemsize: int) -> None:
    """dst (a contiguous stack of cols x rows) = the transpose of each row-major rows x cols
    matrix of the stack at src: a row-major matrix into its column-major storage, or back."""
    strided_copy(dev, dst, src, (batch, cols, rows), (rows * cols, 1, cols), 0, itemsize)


def _ok(n: int, batch: int) -> bool:
    """Whether cuSOLVER's per-matrix calls are worth it (see the module docstring)."""
    return n > MAX_N or batch <= FEW


def _take(dev: Any, a: Any, *others: Any, square: bool = True) -> tuple | None:
    """(solver, m, n, number of matrices) when cuSOLVER takes a call on ``a``: a contiguous
    float stack (of square matrices with ``square``) whose other buffers have its dtype,
    matrices that are not empty, worth the per-matrix calls (``_ok``), and the library
    there; None otherwise (the call runs on the host)."""
    shape = _stack(a, *others)
    if shape is None or (square and shape[0] != shape[1]) or min(shape[:2]) == 0 or \
            not _ok(max(shape[:2]), shape[2]):
        return None
    lib = cusolver.solver_for(dev)
    return None if lib is None else (lib,) + shape


# ---- the implementations
def cholesky(dev: Any, operands: list, results: list, *, upper: bool) -> Any:
    a, out = operands[0], results[0]
    took = _take(dev, a, out) if out is not None else ()
    if not took:
        return None if out is None else NotImplemented
    lib, n, _, batch = took
    if batch == 0:
        return None
    size = a.dtype.itemsize
    dev.dtod(out.ptr, a.ptr, batch * n * n * size)
    info = _scratch(dev, batch, 4)
    # NumPy's lower triangle of A is the upper one of its column-major transpose (and U^T
    # U = A^T read row-major is L L^T); upper=True: the other way round
    for i in range(batch):
        lib.potrf(dev, a.dtype, LOWER if upper else UPPER, n, out.ptr + i * n * n * size, n,
                  info.ptr + 4 * i)
    _fill(dev, out, n, n, batch, 1 if upper else 0)
    return PendingInfo(info, batch, np.linalg.LinAlgError("Matrix is not positive definite"))


def _lu(dev: Any, lib: Any, a: Any, n: int, batch: int) -> tuple[Any, Any, Any]:
    """getrf of a copy of each matrix (the LU of A^T, column-major): (copy, int64 pivots,
    info)."""
    size = a.dtype.itemsize
    lu = _copy(dev, a, batch * n * n)
    pivots = _scratch(dev, batch * n, 8)
    info = _scratch(dev, batch, 4)
    for i in range(batch):
        lib.getrf(dev, a.dtype, n, lu.ptr + i * n * n * size, n, pivots.ptr + i * n * 8,
                  info.ptr + 4 * i)
    return lu, pivots, info


def solve(dev: Any, operands: list, results: list) -> Any:
    a, b = operands
    x = results[0]
    took = _take(dev, a, b, x) if x is not None and _contiguous(b) else ()
    if not took:
        return None if x is None else NotImplemented
    lib, n, _, batch = took
    vector = len(b.shape) == 1
    if vector and batch != 1 or not vector and tuple(b.shape[:-2]) != tuple(a.shape[:-2]):
        return NotImplemented   # a broadcast batch: the host
    k = 1 if vector else b.shape[-1]
    if batch == 0 or k == 0:
        return None
    size = a.dtype.itemsize
    lu, pivots, info = _lu(dev, lib, a, n, batch)
    scratch = _scratch(dev, batch, 4)      # getrs's info: argument checks only
    rhs = x if k == 1 else _scratch(dev, batch * n * k, size)
    if k == 1:
        dev.dtod(x.ptr, b.ptr, batch * n * size)
    else:   # B's columns, column-major
        _transpose(dev, rhs.ptr, b.ptr, batch, n, k, size)
    for i in range(batch):
        lib.getrs(a.dtype, OP_T, n, k, lu.ptr + i * n * n * size, n, pivots.ptr + i * n * 8,
                  rhs.ptr + i * n * k * size, n, scratch.ptr + 4 * i)
    if k > 1:
        _transpose(dev, x.ptr, rhs.ptr, batch, k, n, size)
    return PendingInfo(info, batch, np.linalg.LinAlgError("Singular matrix"))


def inv(dev: Any, operands: list, results: list) -> Any:
    a, out = operands[0], results[0]
    took = _take(dev, a, out) if out is not None else ()
    if not took:
        return None if out is None else NotImplemented
    lib, n, _, batch = took
    if batch == 0:
        return None
    size = a.dtype.itemsize
    lu, pivots, info = _lu(dev, lib, a, n, batch)
    scratch = _scratch(dev, batch, 4)
    _fill(dev, out, n, n, batch, 2)
    # A^T X = I column-major is X = (A^T)^-1 = (A^-1)^T, which read row-major is A^-1
    for i in range(batch):
        lib.getrs(a.dtype, OP_N, n, n, lu.ptr + i * n * n * size, n, pivots.ptr + i * n * 8,
                  out.ptr + i * n * n * size, n, scratch.ptr + 4 * i)
    return PendingInfo(info, batch, np.linalg.LinAlgError("Singular matrix"))


def _determinants(dev: Any, a: Any, sign: Any, logdet: Any, det: Any) -> Any:
    took = _take(dev, a, sign, logdet, det)
    if not took:
        return NotImplemented
    lib, n, _, batch = took
    if batch == 0 or all(o is None for o in (sign, logdet, det)):
        return None
    lu, pivots, info = _lu(dev, lib, a, n, batch)
    _launch_over(dev, "det64", a.dtype, functools.partial(det_kernel_ir, pivot_bits=64), batch,
                 [lu.ptr, pivots.ptr, info.ptr, n, batch] +
                 [o.ptr if o is not None else 0 for o in (sign, logdet, det)])
    return None


det, slogdet = determinant_implementations(_determinants)


def _eigen(dev: Any, a: Any, w: Any, v: Any, uplo: str) -> Any:
    took = _take(dev, a, w, v)
    if not took:
        return NotImplemented
    lib, n, _, batch = took
    if batch == 0 or (w is None and v is None):
        return None
    size = a.dtype.itemsize
    work = _copy(dev, a, batch * n * n)
    values = w if w is not None else _scratch(dev, batch * n, size)
    info = _scratch(dev, batch, 4)
    for i in range(batch):   # NumPy's UPLO triangle is the other one of the transpose
        lib.syevd(dev, a.dtype, v is not None, UPPER if uplo == "L" else LOWER, n,
                  work.ptr + i * n * n * size, n, values.ptr + i * n * size, info.ptr + 4 * i)
    if v is not None:       # the eigenvectors are the columns of the column-major result
        _transpose(dev, v.ptr, work.ptr, batch, n, n, size)
    _nan_where_nonfinite(dev, a, batch, info, (w, n), (v, n * n))
    return PendingInfo(info, batch, np.linalg.LinAlgError("Eigenvalues did not converge"))


def eigh(dev: Any, operands: list, results: list, *, UPLO: str) -> Any:
    return _eigen(dev, operands[0], results[0], results[1], UPLO)


def eigvalsh(dev: Any, operands: list, results: list, *, UPLO: str) -> Any:
    return _eigen(dev, operands[0], results[0], None, UPLO)


def svd(dev: Any, operands: list, results: list, *, full_matrices: bool, compute_uv: bool,
        hermitian: bool) -> Any:
    """A row-major m x n matrix is the column-major n x m A^T: when n >= m its SVD
    (cuSOLVER's gesvd wants rows >= columns) is A's with U and V^T swapped, written straight
    into NumPy's vh and u; a tall matrix is transposed into column-major storage first and
    its factors transposed back."""
    a = operands[0]
    u, s, vt = results if compute_uv else (None, results[0], None)
    took = _take(dev, a, u, s, vt, square=False) if not hermitian else ()
    if not took:        # (hermitian: NumPy's eigh-based route, on the host)
        return NotImplemented
    lib, m, n, batch = took
    if batch == 0 or all(o is None for o in (u, s, vt)):
        return None
    k, size = min(m, n), a.dtype.itemsize
    uv = compute_uv and (u is not None or vt is not None)
    ucols, vrows = (m, n) if full_matrices else (k, k)
    keep = []

    def place(out: Any, count: int) -> int:
        if out is not None:
            return out.ptr
        keep.append(_scratch(dev, count, size))
        return keep[-1].ptr
    s_ptr = place(s, batch * k)
    info = _scratch(dev, batch, 4)
    job_long, job_short = ("A" if full_matrices else "S", "A") if uv else ("N", "N")
    if n >= m:      # gesvd of A^T (n x m): its U is vh^T's storage, its V^T u^T's
        work = _copy(dev, a, batch * m * n)
        vh_ptr = place(vt, batch * vrows * n) if uv else 0
        u_ptr = place(u, batch * m * m) if uv else 0
        for i in range(batch):
            lib.gesvd(dev, a.dtype, job_long, job_short, n, m, work.ptr + i * m * n * size, n,
                      s_ptr + i * k * size, vh_ptr + i * vrows * n * size if uv else 0, n,
                      u_ptr + i * m * m * size if uv else 0, m, info.ptr + 4 * i)
    else:           # tall: A column-major (m x n, lda m), factors transposed back
        work = _scratch(dev, batch * m * n, size)
        _transpose(dev, work.ptr, a.ptr, batch, m, n, size)
        ut = _scratch(dev, batch * m * ucols, size) if uv else None
        vtt = _scratch(dev, batch * n * n, size) if uv else None
        for i in range(batch):
            lib.gesvd(dev, a.dtype, job_long, job_short, m, n, work.ptr + i * m * n * size, m,
                      s_ptr + i * k * size, ut.ptr + i * m * ucols * size if uv else 0, m,
                      vtt.ptr + i * n * n * size if uv else 0, n, info.ptr + 4 * i)
        if uv:
            _transpose(dev, place(u, batch * m * ucols), ut.ptr, batch, ucols, m, size)
            _transpose(dev, place(vt, batch * n * n), vtt.ptr, batch, n, n, size)
    _nan_where_nonfinite(dev, a, batch, info, (u, m * ucols), (s, k), (vt, vrows * n))
    return PendingInfo(info, batch, np.linalg.LinAlgError("SVD did not converge"))


def qr(dev: Any, operands: list, results: list, *, mode: str) -> Any:
    a = operands[0]
    if mode not in ("reduced", "complete", "r"):
        return NotImplemented
    q, r = (None, results[0]) if mode == "r" else results
    took = _take(dev, a, q, r, square=False)
    if not took:
        return NotImplemented
    lib, m, n, batch = took
    if batch == 0 or (q is None and r is None):
        return None
    k, size = min(m, n), a.dtype.itemsize
    rows = m if mode == "complete" else k      # R's rows, Q's columns
    work = _scratch(dev, batch * m * n, size)  # A column-major (lda m)
    _transpose(dev, work.ptr, a.ptr, batch, m, n, size)
    tau = _scratch(dev, batch * k, size)
    info = _scratch(dev, batch, 4)
    for i in range(batch):
        lib.geqrf(dev, a.dtype, m, n, work.ptr + i * m * n * size, m, tau.ptr + i * k * size,
                  info.ptr + 4 * i)
    if r is not None:   # R: the leading rows of the column-major result, upper triangle
        strided_copy(dev, r.ptr, work.ptr, (batch, rows, n), (m * n, 1, m), 0, size)
        _fill(dev, r, rows, n, batch, 1)
    if q is not None:
        if rows <= n:   # Q's columns fit in the factored matrix's
            basis, stride = work, m * n
        else:           # complete Q of a tall matrix: m columns, the reflectors in the first n
            basis, stride = _scratch(dev, batch * m * m, size), m * m
            for i in range(batch):
                dev.dtod(basis.ptr + i * m * m * size, work.ptr + i * m * n * size,
                         m * n * size)
        for i in range(batch):
            lib.orgqr(dev, a.dtype, m, rows, k, basis.ptr + i * stride * size, m,
                      tau.ptr + i * k * size, info.ptr + 4 * i)
        strided_copy(dev, q.ptr, basis.ptr, (batch, m, rows), (stride, 1, m), 0, size)
    return None


def _geev(dev: Any, lib: Any, a: Any, n: int, batch: int, vectors: bool) -> tuple:
    """geev of the column-major copy of each matrix: (values: 2n per matrix, vectors or
    None, info)."""
    size = a.dtype.itemsize
    work = _scratch(dev, batch * n * n, size)
    _transpose(dev, work.ptr, a.ptr, batch, n, n, size)
    w = _scratch(dev, batch * 2 * n, size)
    vr = _scratch(dev, batch * n * n, size) if vectors else None
    info = _scratch(dev, batch, 4)
    for i in range(batch):
        lib.geev(dev, a.dtype, vectors, n, work.ptr + i * n * n * size, n,
                 w.ptr + i * 2 * n * size, vr.ptr + i * n * n * size if vectors else 0, n,
                 info.ptr + 4 * i)
    return w, vr, info


def _eig_stack(dev: Any, a: Any) -> tuple[Any, int, int] | None:
    took = _take(dev, a)
    if not took or took[1] <= MAX_N or not took[0].has("cusolverDnXgeev"):
        return None
    return took[0], took[1], took[3]


def eig_real(dev: Any, operands: list, results: list) -> Any:
    """The probe of eig's result kind (1: every eigenvalue real), and NumPy's LinAlgError for
    an inf or NaN in the stack."""
    a, real = operands[0], results[0]
    found = _eig_stack(dev, a)
    if found is None or real is None:
        return NotImplemented
    lib, n, batch = found
    one = np.ones(1, np.int64)
    dev.htod(real.ptr, one.ctypes.data, 8)
    bad = _scratch(dev, 1, 4)
    zero = np.zeros(1, np.int32)
    dev.htod(bad.ptr, zero.ctypes.data, 4)
    if batch == 0:
        return None
    w, _, _ = _geev(dev, lib, a, n, batch, False)
    _launch_over(dev, "eig_probe", a.dtype, eig_probe_kernel_ir, batch * n * n,
                 [a.ptr, w.ptr, n, batch, real.ptr, bad.ptr])
    return PendingInfo(bad, 1, np.linalg.LinAlgError("Array must not contain infs or NaNs"))


def eig(dev: Any, operands: list, results: list, *, real: bool, vectors: bool) -> Any:
    a = operands[0]
    found = _eig_stack(dev, a)
    if found is None or any(o is not None and o.dtype != a.dtype for o in results):
        return NotImplemented
    lib, n, batch = found
    w_out, v_out = results if vectors else (results[0], None)
    if batch == 0 or (w_out is None and v_out is None):
        return None
    w, vr, info = _geev(dev, lib, a, n, batch, v_out is not None)
    keep = w_out if w_out is not None else _scratch(dev, batch * n * 2, a.dtype.itemsize)
    _launch_over(dev, "eig", a.dtype, eig_kernel_ir, batch * n * n,
                 [w.ptr, vr.ptr if vr is not None else 0, n, batch, int(real), keep.ptr,
                  v_out.ptr if v_out is not None else 0])
    return PendingInfo(info, batch, np.linalg.LinAlgError("Eigenvalues did not converge"))


# np.linalg's names, the dense implementations: each runs after the op's small-matrix one
# (if any) declined the call
DENSE = {"linalg.cholesky": cholesky, "linalg.solve": solve, "linalg.inv": inv,
         "linalg.det": det, "linalg.slogdet": slogdet, "linalg.eigh": eigh,
         "linalg.eigvalsh": eigvalsh, "linalg.svd": svd, "linalg.qr": qr,
         "linalg.eig_real": eig_real, "linalg.eig": eig}


def register() -> None:
    """Put cuSOLVER behind each op's device implementation (``libraries.either``)."""
    from .libraries import either
    for op, implementation in DENSE.items():
        device = EXTERNALS[op].device
        current = device.get("cuda")
        if current is not implementation and \
                getattr(current, "parts", (None, None))[1] is not implementation:
            device["cuda"] = either(current, implementation)
