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


def det_kernel_ir(dtype: Any, name: str) -> str:
    """``name(lu, pivots, info, n, batch, sign, logdet, det)``: for each of ``batch``
    factored n x n matrices (getrf's: column-major, int32 1-based pivots, int32 info), the
    outputs whose pointers are not null, a thread per matrix."""
    from llvmlite import ir

    from .sort import _Loop, _key_type, sreg
    dtype = np.dtype(dtype)
    ft = _key_type(dtype)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    module = ir.Module(name=name)
    P, Q = ft.as_pointer(1), i32.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, Q, Q, i64, i64, P, P, P]),
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
    piv = b.sext(b.load(b.gep(pivots, [b.add(b.mul(m, n), i)])), i64)
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


_DET_KERNELS: dict[str, tuple[str, str, str]] = {}


def _det_kernel(dtype: np.dtype) -> tuple[str, str, str]:
    from . import ptx as ptxmod
    from .driver import current_target
    key = np.dtype(dtype).str
    if key not in _DET_KERNELS:
        name = f"ta_det_{np.dtype(dtype).name}"
        text = det_kernel_ir(dtype, name)
        _DET_KERNELS[key] = (name, text, ptxmod.compile_ptx(text, current_target()))
    return _DET_KERNELS[key]


def _determinants(dev: Any, a: Any, sign: Any, logdet: Any, det: Any) -> Any:
    """The batch's determinants (``det``) or signs and log-magnitudes (``sign``,
    ``logdet``): cuBLAS's LU, then ``det_kernel_ir``'s reading of it."""
    from .driver import sm_count
    from .sort import _launch
    sq = _square_batch(a)
    outs = [o for o in (sign, logdet, det) if o is not None]
    if sq is None or any(o.dtype != a.dtype for o in outs):
        return NotImplemented
    n, batch = sq
    blas = cublas.blas_for(dev)
    if blas is None or batch == 0 or not outs:
        return NotImplemented if blas is None else None
    lu, pointers, pivots, info = _factor(dev, blas, a, n, batch)
    name, text, ptx = _det_kernel(a.dtype)
    fn = dev.load(ptx, [name], text)[name]
    _launch(dev, fn, max(1, min(-(-batch // 128), 32 * sm_count())), 128,
            [lu.ptr, pivots.ptr, info.ptr, n, batch] +
            [o.ptr if o is not None else 0 for o in (sign, logdet, det)])
    return None


CHOLESKY_THREADS = 128


def cholesky_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, out, info, n, batch, upper)``: a block per matrix of the C-contiguous stack
    ``a`` (n <= MAX_N), factored in shared memory by the unblocked right-looking Cholesky
    (LAPACK's potf2 order: for each column, the square root of its diagonal, the column
    below divided by it, then the trailing lower triangle updated). Only the lower triangle
    is read (``upper``: the upper one, as the transpose), the result's other triangle is 0
    and ``upper`` writes L^T; ``info`` is the first column (1-based) whose diagonal is not
    positive (NaN included), 0 for none, as potrf's."""
    from llvmlite import ir

    from .sort import _Loop, _key_type, sreg
    dtype = np.dtype(dtype)
    ft = _key_type(dtype)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    module = ir.Module(name=name)
    P = ft.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, P, i32.as_pointer(1), i64,
                                                             i64, i64]), name=name)
    fn.calling_convention = "ptx_kernel"
    a, out, info, n, batch, upper = fn.args
    sqrt = ir.Function(module, ir.FunctionType(ft, [ft]),
                       "__nv_sqrtf" if dtype == np.float32 else "__nv_sqrt")
    shared_t = ir.ArrayType(ft, MAX_N * MAX_N)
    sh = ir.GlobalVariable(module, shared_t, f"{name}_m", addrspace=3)
    sh.linkage, sh.initializer, sh.align = "internal", ir.Constant(shared_t, ir.Undefined), 16
    bad_t = ir.ArrayType(i32, 1)
    bad = ir.GlobalVariable(module, bad_t, f"{name}_info", addrspace=3)
    bad.linkage, bad.initializer, bad.align = "internal", ir.Constant(bad_t, ir.Undefined), 4
    barrier_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i32]),
                             "llvm.nvvm.barrier.cta.sync.aligned.all")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(i64, 0), ir.Constant(i64, 1)
    fzero = ir.Constant(ft, 0.0)
    tid, ntid = sreg(b, "tid.x"), sreg(b, "ntid.x")
    nn = b.mul(n, n)
    is_upper = b.icmp_unsigned("!=", upper, zero)
    bad_slot = b.gep(bad, [ir.Constant(i32, 0), ir.Constant(i32, 0)])

    def barrier() -> None:
        b.call(barrier_fn, [ir.Constant(i32, 0)])

    def at(i: ir.Value, j: ir.Value) -> ir.Value:
        return b.gep(sh, [ir.Constant(i32, 0), b.add(b.mul(i, n), j)])

    def each(start: ir.Value, stop: ir.Value, tag: str, body) -> None:
        """``body(p)`` for p = start + tid, start + tid + ntid, ... below ``stop``."""
        loop = _Loop(b, fn, b.add(start, tid), lambda p: b.icmp_unsigned("<", p, stop), tag)
        body(loop.var)
        loop.close(b.add(loop.var, ntid))

    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda m: b.icmp_unsigned("<", m, batch), "matrix")
    base = b.mul(mats.var, nn)

    def load(p: ir.Value) -> None:        # L's element (i, j), i >= j, from A or A^T
        i, j = b.udiv(p, n), b.urem(p, n)
        src = b.select(is_upper, b.add(b.mul(j, n), i), p)
        b.store(b.load(b.gep(a, [b.add(base, src)])), at(i, j))
    each(zero, nn, "load", load)
    with b.if_then(b.icmp_unsigned("==", tid, zero)):
        b.store(ir.Constant(i32, 0), bad_slot)
    barrier()
    cols = _Loop(b, fn, zero, lambda k: b.icmp_unsigned("<", k, n), "column")
    k = cols.var
    with b.if_then(b.icmp_unsigned("==", tid, zero)):
        d = b.load(at(k, k))
        positive = b.fcmp_ordered(">", d, fzero)
        with b.if_then(b.and_(b.not_(positive),
                              b.icmp_signed("==", b.load(bad_slot), ir.Constant(i32, 0)))):
            b.store(b.trunc(b.add(k, one), i32), bad_slot)
        b.store(b.call(sqrt, [d]), at(k, k))
    barrier()
    below = b.add(k, one)
    each(below, n, "scale", lambda i: b.store(b.fdiv(b.load(at(i, k)), b.load(at(k, k))),
                                              at(i, k)))
    barrier()
    rest = b.sub(n, below)

    def update(p: ir.Value) -> None:      # the trailing lower triangle, i >= j > k
        i, j = b.add(below, b.udiv(p, rest)), b.add(below, b.urem(p, rest))
        with b.if_then(b.icmp_unsigned(">=", i, j)):
            cell = at(i, j)
            b.store(b.fsub(b.load(cell), b.fmul(b.load(at(i, k)), b.load(at(j, k)))), cell)
    each(zero, b.mul(rest, rest), "update", update)
    barrier()
    cols.close(b.add(k, one))

    def store(p: ir.Value) -> None:       # L (zeros above), or its transpose
        i, j = b.udiv(p, n), b.urem(p, n)
        v = b.select(b.icmp_unsigned(">=", i, j), b.load(at(i, j)), fzero)
        dst = b.select(is_upper, b.add(b.mul(j, n), i), p)
        b.store(v, b.gep(out, [b.add(base, dst)]))
    each(zero, nn, "store", store)
    with b.if_then(b.icmp_unsigned("==", tid, zero)):
        b.store(b.load(bad_slot), b.gep(info, [mats.var]))
    barrier()       # (the next matrix's loads overwrite the shared matrix)
    mats.close(b.add(mats.var, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


_CHOLESKY_KERNELS: dict[str, tuple[str, str, str]] = {}


def _cholesky_kernel(dtype: np.dtype) -> tuple[str, str, str]:
    from . import ptx as ptxmod
    from .driver import current_target
    key = np.dtype(dtype).str
    if key not in _CHOLESKY_KERNELS:
        name = f"ta_cholesky_{np.dtype(dtype).name}"
        text = cholesky_kernel_ir(dtype, name)
        _CHOLESKY_KERNELS[key] = (name, text, ptxmod.compile_ptx(text, current_target()))
    return _CHOLESKY_KERNELS[key]


def cholesky(dev: Any, operands: list, results: list, *, upper: bool) -> Any:
    """``np.linalg.cholesky`` of a contiguous float stack of n <= MAX_N matrices: a block per
    matrix (``cholesky_kernel_ir``); a matrix that is not positive definite raises NumPy's
    LinAlgError when the host next waits for the device."""
    from .driver import sm_count
    from .sort import _launch
    a, out = operands[0], results[0]
    if out is None:
        return None
    sq = _square_batch(a)
    if sq is None or out.dtype != a.dtype:
        return NotImplemented
    n, batch = sq
    if batch == 0:
        return None
    name, text, ptx = _cholesky_kernel(a.dtype)
    fn = dev.load(ptx, [name], text)[name]
    info = dev.allocator.allocate(batch * 4)
    _launch(dev, fn, max(1, min(batch, 32 * sm_count())), CHOLESKY_THREADS,
            [a.ptr, out.ptr, info.ptr, n, batch, int(bool(upper))])
    return PendingInfo(info, batch, np.linalg.LinAlgError("Matrix is not positive definite"))


QR_THREADS = 64


def qr_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, q, r, m, n, batch, qcols, rrows)``: a block per m x n matrix of the
    C-contiguous stack ``a`` (m, n <= MAX_N): LAPACK's unblocked Householder QR (geqr2: for
    each column j < k = min(m, n), dlarfg's reflector -- beta = -sign(alpha) * hypot(alpha,
    ||x||), tau = (beta - alpha) / beta, v = x / (alpha - beta), or none when x is 0 -- then
    the reflector applied to the columns right of j) in shared memory; ``r`` (when not null)
    gets the ``rrows`` x n upper triangle (zeros below), ``q`` (when not null) the first
    ``qcols`` columns of H_0 ... H_{k-1}, each thread building whole columns from e_c as
    dorg2r does (the reflectors applied from the last)."""
    from llvmlite import ir

    from .sort import _Loop, _key_type, sreg
    dtype = np.dtype(dtype)
    ft = _key_type(dtype)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    module = ir.Module(name=name)
    P = ft.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, P, P] + [i64] * 5),
                     name=name)
    fn.calling_convention = "ptx_kernel"
    a, q_out, r_out, m, n, batch, qcols, rrows = fn.args
    sqrt = ir.Function(module, ir.FunctionType(ft, [ft]),
                       "__nv_sqrtf" if dtype == np.float32 else "__nv_sqrt")
    shared_t = ir.ArrayType(ft, MAX_N * MAX_N + 2 * MAX_N)   # the matrix, tau, a scale
    sh = ir.GlobalVariable(module, shared_t, f"{name}_m", addrspace=3)
    sh.linkage, sh.initializer, sh.align = "internal", ir.Constant(shared_t, ir.Undefined), 16
    barrier_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i32]),
                             "llvm.nvvm.barrier.cta.sync.aligned.all")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(i64, 0), ir.Constant(i64, 1)
    fzero, fone = ir.Constant(ft, 0.0), ir.Constant(ft, 1.0)
    tid, ntid = sreg(b, "tid.x"), sreg(b, "ntid.x")
    k = b.select(b.icmp_unsigned("<", m, n), m, n)
    mn = b.mul(m, n)

    def slot(i: ir.Value) -> ir.Value:
        return b.gep(sh, [ir.Constant(i32, 0), i])

    def at(i: ir.Value, j: ir.Value) -> ir.Value:
        return slot(b.add(b.mul(i, n), j))

    def tau_at(j: ir.Value) -> ir.Value:
        return slot(b.add(ir.Constant(i64, MAX_N * MAX_N), j))
    scale_slot = slot(ir.Constant(i64, MAX_N * MAX_N + MAX_N))

    def barrier() -> None:
        b.call(barrier_fn, [ir.Constant(i32, 0)])

    def each(start: ir.Value, stop: ir.Value, tag: str, body) -> None:
        loop = _Loop(b, fn, b.add(start, tid), lambda p: b.icmp_unsigned("<", p, stop), tag)
        body(loop.var)
        loop.close(b.add(loop.var, ntid))

    def sum_below(j: ir.Value, col, tag: str, first: ir.Value) -> ir.Value:
        """``first`` + the sum over rows i > j of col(i) (in order)."""
        loop = _Loop(b, fn, b.add(j, one), lambda i: b.icmp_unsigned("<", i, m), tag)
        phi = _phi(b, loop, first)
        phi.add_incoming(b.fadd(phi, col(loop.var)), b.block)
        loop.close(b.add(loop.var, one))
        return phi

    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda x: b.icmp_unsigned("<", x, batch), "matrix")
    base = b.mul(mats.var, mn)
    each(zero, mn, "load", lambda p: b.store(b.load(b.gep(a, [b.add(base, p)])), slot(p)))
    barrier()
    cols = _Loop(b, fn, zero, lambda j: b.icmp_unsigned("<", j, k), "column")
    j = cols.var
    with b.if_then(b.icmp_unsigned("==", tid, zero)):
        alpha = b.load(at(j, j))
        xx = sum_below(j, lambda i: b.fmul(b.load(at(i, j)), b.load(at(i, j))), "norm",
                       fzero)
        xnorm = b.call(sqrt, [xx])
        none = b.fcmp_ordered("==", xnorm, fzero)
        mag = b.call(sqrt, [b.fadd(b.fmul(alpha, alpha), xx)])
        neg_alpha = b.fcmp_ordered("<", alpha, fzero)
        beta = b.select(neg_alpha, mag, b.fneg(mag))      # -sign(alpha) * |(alpha, x)|
        tau = b.select(none, fzero, b.fdiv(b.fsub(beta, alpha), beta))
        b.store(tau, tau_at(j))
        b.store(b.select(none, fone, b.fdiv(fone, b.fsub(alpha, beta))), scale_slot)
        b.store(b.select(none, alpha, beta), at(j, j))
    barrier()
    scale = b.load(scale_slot)
    each(b.add(j, one), m, "scale", lambda i: b.store(b.fmul(b.load(at(i, j)), scale),
                                                      at(i, j)))
    barrier()
    tau = b.load(tau_at(j))

    def reflect(c: ir.Value) -> None:     # column c of A, by H_j = I - tau v v^T (v_j = 1)
        w = sum_below(j, lambda i: b.fmul(b.load(at(i, j)), b.load(at(i, c))), "dot",
                      b.load(at(j, c)))
        tw = b.fmul(tau, w)
        b.store(b.fsub(b.load(at(j, c)), tw), at(j, c))
        rows = _Loop(b, fn, b.add(j, one), lambda i: b.icmp_unsigned("<", i, m), "upd")
        i = rows.var
        b.store(b.fsub(b.load(at(i, c)), b.fmul(b.load(at(i, j)), tw)), at(i, c))
        rows.close(b.add(i, one))
    each(b.add(j, one), n, "reflect", reflect)
    barrier()
    cols.close(b.add(j, one))

    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(r_out, i64), zero)):
        rbase = b.mul(mats.var, b.mul(rrows, n))

        def store_r(p: ir.Value) -> None:
            i, c = b.udiv(p, n), b.urem(p, n)
            keep = b.and_(b.icmp_unsigned(">=", c, i), b.icmp_unsigned("<", i, k))
            b.store(b.select(keep, b.load(at(i, c)), fzero), b.gep(r_out, [b.add(rbase, p)]))
        each(zero, b.mul(rrows, n), "store_r", store_r)
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(q_out, i64), zero)):
        qbase = b.mul(mats.var, b.mul(m, qcols))

        def qat(i: ir.Value, c: ir.Value) -> ir.Value:
            return b.gep(q_out, [b.add(qbase, b.add(b.mul(i, qcols), c))])

        def build(c: ir.Value) -> None:   # column c of Q: H_0 ... H_{k-1} e_c
            init = _Loop(b, fn, zero, lambda i: b.icmp_unsigned("<", i, m), "eye")
            b.store(b.select(b.icmp_unsigned("==", init.var, c), fone, fzero),
                    qat(init.var, c))
            init.close(b.add(init.var, one))
            back = _Loop(b, fn, k, lambda t: b.icmp_unsigned(">", t, zero), "back")
            jj = b.sub(back.var, one)
            w = sum_below(jj, lambda i: b.fmul(b.load(at(i, jj)), b.load(qat(i, c))), "qdot",
                          b.load(qat(jj, c)))
            tw = b.fmul(b.load(tau_at(jj)), w)
            b.store(b.fsub(b.load(qat(jj, c)), tw), qat(jj, c))
            rows = _Loop(b, fn, b.add(jj, one), lambda i: b.icmp_unsigned("<", i, m), "qupd")
            i = rows.var
            b.store(b.fsub(b.load(qat(i, c)), b.fmul(b.load(at(i, jj)), tw)), qat(i, c))
            rows.close(b.add(i, one))
            back.close(jj)
        each(zero, qcols, "build_q", build)
    barrier()       # (the next matrix overwrites the shared one)
    mats.close(b.add(mats.var, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


def _phi(b: Any, loop: Any, start: Any) -> Any:
    """A value carried around ``loop`` (a ``sort._Loop``), ``start`` on entry; the caller
    adds the body's value. Leaves the builder where it was."""
    here = b.block
    b.position_at_start(loop.head)
    phi = b.phi(start.type)
    phi.add_incoming(start, loop.pre)
    b.position_at_end(here)
    return phi


_QR_KERNELS: dict[str, tuple[str, str, str]] = {}


def _qr_kernel(dtype: np.dtype) -> tuple[str, str, str]:
    from . import ptx as ptxmod
    from .driver import current_target
    key = np.dtype(dtype).str
    if key not in _QR_KERNELS:
        name = f"ta_qr_{np.dtype(dtype).name}"
        text = qr_kernel_ir(dtype, name)
        _QR_KERNELS[key] = (name, text, ptxmod.compile_ptx(text, current_target()))
    return _QR_KERNELS[key]


def qr(dev: Any, operands: list, results: list, *, mode: str) -> Any:
    """``np.linalg.qr`` (modes reduced, complete and r) of a contiguous float stack of m x n
    matrices (m, n <= MAX_N): a block per matrix (``qr_kernel_ir``); mode raw on the host."""
    from .driver import sm_count
    from .sort import _launch
    a = operands[0]
    if mode not in ("reduced", "complete", "r") or a.dtype not in _FLOATS or \
            len(a.shape) < 2 or not _contiguous(a):
        return NotImplemented
    m, n = a.shape[-2], a.shape[-1]
    if not (1 <= m <= MAX_N and 1 <= n <= MAX_N):
        return NotImplemented
    q, r = (None, results[0]) if mode == "r" else results
    outs = [o for o in (q, r) if o is not None]
    if any(o.dtype != a.dtype for o in outs):
        return NotImplemented
    batch = math.prod(a.shape[:-2])
    if not outs or batch == 0:
        return None
    k = min(m, n)
    wide = m if mode == "complete" else k   # Q's columns, R's rows
    name, text, ptx = _qr_kernel(a.dtype)
    fn = dev.load(ptx, [name], text)[name]
    _launch(dev, fn, max(1, min(batch, 32 * sm_count())), QR_THREADS,
            [a.ptr, q.ptr if q is not None else 0, r.ptr if r is not None else 0, m, n, batch,
             wide, wide])
    return None


def det(dev: Any, operands: list, results: list) -> Any:
    return _determinants(dev, operands[0], None, None, results[0])


def slogdet(dev: Any, operands: list, results: list) -> Any:
    return _determinants(dev, operands[0], results[0], results[1], None)


def register() -> None:
    """Make cuBLAS's batched LU the "cuda" implementation of solve, inv, det and slogdet,
    and the block kernels those of cholesky and qr."""
    EXTERNALS["linalg.solve"].device["cuda"] = solve
    EXTERNALS["linalg.inv"].device["cuda"] = inv
    EXTERNALS["linalg.det"].device["cuda"] = det
    EXTERNALS["linalg.slogdet"].device["cuda"] = slogdet
    EXTERNALS["linalg.cholesky"].device["cuda"] = cholesky
    EXTERNALS["linalg.qr"].device["cuda"] = qr
