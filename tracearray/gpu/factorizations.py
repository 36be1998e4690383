"""Small dense factorisations on the GPU, a block per matrix: the device implementations of
``linalg.cholesky`` and ``linalg.qr`` for stacks of contiguous float32/float64 matrices of at
most ``MAX_N`` rows and columns.

Each block loads its matrix into shared memory and factors it in LAPACK's unblocked order
(``potf2``, ``geqr2`` then ``org2r``), so the results are LAPACK's up to rounding (divergence
gpu-linalg-rounding): Cholesky's square roots and divisions column by column with the trailing
triangle updated by the block's threads, QR's Householder reflectors exactly as ``dlarfg``
makes them (their signs are NumPy's). A matrix that is not positive definite sets its ``info``
word, which the runtime reads when the host next waits for the device (NumPy's LinAlgError
then). Larger or strided stacks, complex ones and QR's mode raw run NumPy's LAPACK on the host.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ops import EXTERNALS
from .libraries import PendingInfo
from .linalg import _FLOATS, MAX_N, _contiguous, _square_batch, small_kernel

CHOLESKY_THREADS = 128


def _shared(module: Any, name: str, ty: Any, count: int) -> Any:
    """A block's shared array of ``count`` elements of ``ty`` in ``module``."""
    from llvmlite import ir
    t = ir.ArrayType(ty, count)
    g = ir.GlobalVariable(module, t, name, addrspace=3)
    g.linkage, g.initializer, g.align = "internal", ir.Constant(t, ir.Undefined), 16
    return g


def _barrier_function(module: Any) -> Any:
    """``__syncthreads`` (barrier 0 of the block)."""
    from llvmlite import ir
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]),
                       "llvm.nvvm.barrier.cta.sync.aligned.all")


def cholesky_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, out, info, n, batch, upper)``: a block per matrix of the C-contiguous stack
    ``a`` (n <= MAX_N), factored in shared memory by the unblocked right-looking Cholesky
    (LAPACK's potf2 order: for each column, the square root of its diagonal, the column
    below divided by it, then the trailing lower triangle updated). Only the lower triangle
    is read (``upper``: the upper one, as the transpose), the result's other triangle is 0
    and ``upper`` writes L^T; ``info`` is the first column (1-based) whose diagonal is not
    positive, 0 for none, as potrf's; a NaN pivot is not an error (NumPy's LAPACK returns
    the NaNs it makes: emulated fuzz emu-2026-12-05-i, programs 2051 and 2132)."""
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
    sh = _shared(module, f"{name}_m", ft, MAX_N * MAX_N)
    bad = _shared(module, f"{name}_info", i32, 1)
    barrier_fn = _barrier_function(module)
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
        # (ordered: a NaN pivot is no error but NaNs, as NumPy's LAPACK (OpenBLAS) gives)
        not_positive = b.fcmp_ordered("<=", d, fzero)
        with b.if_then(b.and_(not_positive,
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


def cholesky(dev: Any, operands: list, results: list, *, upper: bool) -> Any:
    """``np.linalg.cholesky`` of a contiguous float stack of n <= MAX_N matrices: a block per
    matrix (``cholesky_kernel_ir``); a matrix that is not positive definite raises NumPy's
    LinAlgError when the host next waits for the device."""
    from .driver import sm_count
    from .sort import _launch
    a, out = operands[0], results[0]
    if out is None:
        return None
    sq = _square_batch(a, out)
    if sq is None:
        return NotImplemented
    n, batch = sq
    if batch == 0:
        return None
    name, text, ptx = small_kernel("cholesky", a.dtype, cholesky_kernel_ir)
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
    sh = _shared(module, f"{name}_m", ft, MAX_N * MAX_N + 2 * MAX_N)   # matrix, tau, scale
    barrier_fn = _barrier_function(module)
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
        phi = loop.carry(first)
        phi.add_incoming(b.fadd(phi, col(loop.var)), b.block)
        loop.close(b.add(loop.var, one))
        return phi

    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda x: b.icmp_unsigned("<", x, batch), "matrix")
    base = b.mul(mats.var, mn)
    each(zero, mn, "load", lambda p: b.store(b.load(b.gep(a, [b.add(base, p)])), slot(p)))
    barrier()
    cols = _Loop(b, fn, zero, lambda j: b.icmp_unsigned("<", j, k), "column")
    j = cols.var
    fabs = module.declare_intrinsic("llvm.fabs", [ft])
    fmax = module.declare_intrinsic("llvm.maxnum", [ft], ir.FunctionType(ft, [ft, ft]))
    with b.if_then(b.icmp_unsigned("==", tid, zero)):
        alpha = b.load(at(j, j))
        # the norms of the column scaled by its largest magnitude s, as dnrm2 and dlapy2
        # scale them: squares of values past 1e154 (1e19 in float32) overflowed and below
        # 1e-154 underflowed (R's diagonal -inf, Q NaN or the identity)
        loop = _Loop(b, fn, b.add(j, one), lambda i: b.icmp_unsigned("<", i, m), "amax")
        big = loop.carry(fzero)
        mag_i = b.call(fabs, [b.load(at(loop.var, j))])
        # (a NaN stays: the reflector's values become NaN, as LAPACK's norms make them)
        big.add_incoming(b.select(b.fcmp_unordered("uno", big, mag_i), b.fadd(big, mag_i),
                                  b.call(fmax, [big, mag_i])), b.block)
        loop.close(b.add(loop.var, one))
        none = b.fcmp_ordered("==", big, fzero)      # x is zero: no reflector
        s = b.call(fmax, [big, b.call(fabs, [alpha])])
        xx = sum_below(j, lambda i: b.fmul(b.fdiv(b.load(at(i, j)), s),
                                           b.fdiv(b.load(at(i, j)), s)), "norm", fzero)
        a_s = b.fdiv(alpha, s)
        mag = b.fmul(s, b.call(sqrt, [b.fadd(b.fmul(a_s, a_s), xx)]))
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
    name, text, ptx = small_kernel("qr", a.dtype, qr_kernel_ir)
    fn = dev.load(ptx, [name], text)[name]
    _launch(dev, fn, max(1, min(batch, 32 * sm_count())), QR_THREADS,
            [a.ptr, q.ptr if q is not None else 0, r.ptr if r is not None else 0, m, n, batch,
             wide, wide])
    return None


def register() -> None:
    """Make the block kernels the "cuda" implementations of cholesky and qr."""
    EXTERNALS["linalg.cholesky"].device["cuda"] = cholesky
    EXTERNALS["linalg.qr"].device["cuda"] = qr
