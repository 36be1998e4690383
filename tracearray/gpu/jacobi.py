"""Symmetric eigenproblems and singular value decompositions on the GPU by Jacobi rotations, a
block per matrix: the device implementations of ``linalg.eigh``, ``linalg.eigvalsh`` and
``linalg.svd`` (so also of ``svdvals``, ``cond``, ``matrix_rank`` and ``norm(ord=2)``, which
call them; pinv and lstsq over it: ``least_squares.py``) for
stacks of contiguous float32/float64 matrices of at most ``MAX_N`` rows and columns (an SVD's
longer side up to ``MAX_ROWS``, its columns then in global memory: tall data matrices of a few
features, least squares of a few unknowns).

Why Jacobi: a round of a round-robin tournament pairs every column with another, so n/2
rotations of disjoint pairs run at once, each applied by the block's threads; it needs no
tridiagonal or bidiagonal reduction, and it is accurate (eigenvalues and singular values
within a small multiple of n * eps * ||A|| of LAPACK's). cuSOLVER's batched small-matrix
solvers (syevjBatched, gesvdjBatched) use the same method. The arithmetic is float64 for
both dtypes (float32 results rounded once at the end, as NumPy's LAPACK calls compute
float32 in double); the rotations stop when every pair is orthogonal to float64's epsilon,
relative to the two columns' norms.

- eigh: the two-sided method on the symmetric matrix read from NumPy's triangle (``UPLO``):
  each rotation zeroes one off-diagonal pair; the eigenvectors are the product of the
  rotations, the eigenvalues the diagonal, sorted ascending as LAPACK's.
- svd: the one-sided method (Hestenes) on A's columns (A^T's when A is wide): rotations
  make the columns orthogonal; their norms are the singular values (sorted descending), the
  normalised columns the left vectors, the rotations' product the right ones. Left vectors
  that no column gives (``full_matrices``' extra ones, and those of zero singular values)
  complete the basis: each the unit vector least represented by the columns so far,
  orthogonalised against them twice.

Divergence gpu-spectral-basis: the vectors are an orthonormal basis satisfying the
decomposition within rounding, not LAPACK's: each may have the other sign, and where values
repeat (or are zero) the basis of their space is another. A non-finite matrix gives NaN
results (LAPACK's are NaN in part, or for svd its LinAlgError, or other numbers, as its code
paths fall).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..ops import EXTERNALS
from .factorizations import _barrier_function, _shared
from .linalg import _FLOATS, MAX_N, _contiguous, _square_batch, small_kernel

THREADS = 128
# The longer side of an SVD's matrix (W in global memory past MAX_N rows): each rotation's
# dot products are one thread's loop over the rows, so much longer ones run on the host
MAX_ROWS = 4096
# A sweep rotates every pair once; Jacobi's convergence is quadratic once the off-diagonal
# part is small, so a few sweeps do; the bound only ends a pathological matrix's loop
MAX_SWEEPS = 30
_HALF = (MAX_N + 1) // 2


class _Block:
    """An IRBuilder for a kernel whose block works on one matrix at a time: the thread
    index, shared arrays, barriers, block-strided loops and one-thread sections."""

    def __init__(self, module: Any, fn: Any, name: str):
        from llvmlite import ir

        from .sort import sreg
        self.module, self.fn, self.name = module, fn, name
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.i32, self.i64, self.f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        self.tid, self.ntid = sreg(self.b, "tid.x"), sreg(self.b, "ntid.x")
        self._barrier = _barrier_function(module)
        ft = ir.FunctionType(self.f64, [self.f64])
        self.sqrt = ir.Function(module, ft, "__nv_sqrt")
        self.fabs = ir.Function(module, ft, "__nv_fabs")

    def const(self, v: int) -> Any:
        from llvmlite import ir
        return ir.Constant(self.i64, v)

    def f(self, v: float) -> Any:
        from llvmlite import ir
        return ir.Constant(self.f64, v)

    def array(self, tag: str, ty: Any, count: int) -> Callable[[Any], Any]:
        """A shared array of ``count`` elements: ``index -> pointer``."""
        from llvmlite import ir
        g = _shared(self.module, f"{self.name}_{tag}", ty, count)
        return lambda i: self.b.gep(g, [ir.Constant(self.i32, 0), i])

    def barrier(self) -> None:
        from llvmlite import ir
        self.b.call(self._barrier, [ir.Constant(self.i32, 0)])

    def each(self, stop: Any, tag: str, body: Callable[[Any], None]) -> None:
        """``body(p)`` for p = tid, tid + ntid, ... below ``stop``."""
        from .sort import _Loop
        b = self.b
        loop = _Loop(b, self.fn, self.tid, lambda p: b.icmp_unsigned("<", p, stop), tag)
        body(loop.var)
        loop.close(b.add(loop.var, self.ntid))

    def loop(self, start: Any, stop: Any, tag: str) -> Any:
        """A sequential loop of one thread, start <= i < stop (``close`` it with i + 1)."""
        from .sort import _Loop
        b = self.b
        return _Loop(b, self.fn, start, lambda i: b.icmp_signed("<", i, stop), tag)

    def total(self, start: Any, stop: Any, tag: str, term: Callable[[Any], Any]) -> Any:
        """The float64 sum of term(i) for start <= i < stop, in order."""
        loop = self.loop(start, stop, tag)
        acc = loop.carry(self.f(0.0))
        acc.add_incoming(self.b.fadd(acc, term(loop.var)), self.b.block)
        loop.close(self.b.add(loop.var, self.const(1)))
        return acc

    def single(self):
        """``with blk.single():`` a section thread 0 runs alone."""
        return self.b.if_then(self.b.icmp_unsigned("==", self.tid, self.const(0)))

    def rotation(self, app: Any, aqq: Any, apq: Any, eps: float) -> tuple[Any, Any, Any]:
        """(rotate, c, s): Golub and Van Loan's symmetric Schur rotation (c s; -s c) that
        zeroes apq in J^T [[app, apq], [apq, aqq]] J, taken when |apq| is above ``eps``
        times sqrt(|app| |aqq|) (a pair orthogonal to the precision is left alone)."""
        b = self.b
        size = b.fmul(b.call(self.sqrt, [b.call(self.fabs, [app])]),
                      b.call(self.sqrt, [b.call(self.fabs, [aqq])]))
        mag = b.call(self.fabs, [apq])
        rotate = b.and_(b.fcmp_ordered("!=", apq, self.f(0.0)),
                        b.fcmp_ordered(">", mag, b.fmul(self.f(eps), size)))
        tau = b.fdiv(b.fsub(aqq, app), b.fmul(self.f(2.0), b.select(rotate, apq, self.f(1.0))))
        at = b.call(self.fabs, [tau])
        big = b.fcmp_ordered(">", at, self.f(1.0))
        inv = b.fdiv(self.f(1.0), b.select(big, at, self.f(1.0)))
        root = b.select(big, b.fmul(at, b.call(self.sqrt, [b.fadd(self.f(1.0),
                                                                   b.fmul(inv, inv))])),
                        b.call(self.sqrt, [b.fadd(self.f(1.0), b.fmul(tau, tau))]))
        t = b.fdiv(self.f(1.0), b.fadd(at, root))
        t = b.select(b.fcmp_ordered("<", tau, self.f(0.0)), b.fneg(t), t)
        c = b.fdiv(self.f(1.0), b.call(self.sqrt, [b.fadd(self.f(1.0), b.fmul(t, t))]))
        s = b.fmul(t, c)
        return rotate, b.select(rotate, c, self.f(1.0)), b.select(rotate, s, self.f(0.0))

    def pair(self, r: Any, k: Any, players: Any) -> tuple[Any, Any]:
        """(p, q), p < q: pair ``k`` of round ``r`` of the round-robin tournament of
        ``players`` (even) columns: player players-1 stays, the others turn."""
        b = self.b
        last = b.sub(players, self.const(1))
        x = b.select(b.icmp_unsigned("==", k, self.const(0)), last,
                     b.urem(b.add(r, k), last))
        y = b.urem(b.sub(b.add(r, last), k), last)
        return (b.select(b.icmp_unsigned("<", x, y), x, y),
                b.select(b.icmp_unsigned("<", x, y), y, x))


class _Rotations:
    """One round's rotations in shared memory: each pair's (c, s) and (p, q), p = MAX_N where
    the pair is not rotated; ``record`` by the pair's thread, ``turn`` by the block."""

    def __init__(self, blk: _Block):
        self.blk = blk
        self.cs = blk.array("cs", blk.f64, 2 * _HALF)
        self.pq = blk.array("pq", blk.i32, 2 * _HALF)

    def record(self, k: Any, p: Any, q: Any, rotate: Any, c: Any, s: Any, flag: Any) -> None:
        """Pair ``k`` rotates (p, q) by (c, s) when ``rotate`` (storing 1 at ``flag``)."""
        blk, b = self.blk, self.blk.b
        with b.if_then(rotate):
            b.store(blk.i32(1), flag)
        k2 = b.mul(k, blk.const(2))
        b.store(c, self.cs(k2))
        b.store(s, self.cs(b.add(k2, blk.const(1))))
        b.store(b.trunc(b.select(rotate, p, blk.const(MAX_N)), blk.i32), self.pq(k2))
        b.store(b.trunc(q, blk.i32), self.pq(b.add(k2, blk.const(1))))

    def each_rotated(self, k: Any, body: Callable[[Any, Any, Any, Any], None]) -> None:
        """``body(p, q, c, s)`` if pair ``k`` rotates."""
        blk, b = self.blk, self.blk.b
        k2 = b.mul(k, blk.const(2))
        p = b.zext(b.load(self.pq(k2)), blk.i64)
        with b.if_then(b.icmp_unsigned("<", p, blk.const(MAX_N))):
            q = b.zext(b.load(self.pq(b.add(k2, blk.const(1)))), blk.i64)
            body(p, q, b.load(self.cs(k2)), b.load(self.cs(b.add(k2, blk.const(1)))))

    def turn(self, rows: Any, cell: Callable, get: Callable, put: Callable) -> Callable:
        """The block's item x: row x % rows of pair x / rows, whose two elements
        ``cell(row, p)`` and ``cell(row, q)`` become (x_p, x_q) (c s; -s c)."""
        b = self.blk.b

        def item(x: Any) -> None:
            def rotate(p: Any, q: Any, c: Any, s: Any) -> None:
                i = b.urem(x, rows)
                cp, cq = cell(i, p), cell(i, q)
                xp, xq = get(cp), get(cq)
                put(b.fsub(b.fmul(c, xp), b.fmul(s, xq)), cp)
                put(b.fadd(b.fmul(s, xp), b.fmul(c, xq)), cq)
            self.each_rotated(b.udiv(x, rows), rotate)
        return item


def _power_of_two_scale(blk: _Block, cells: Callable, count: Any, tag: str) -> Any:
    """Divide the shared ``cells`` 0..count-1 by the power of two at or below their largest
    magnitude (exact: so no sum of squares over- or underflows) and return it (1.0 for a
    zero or non-finite matrix): the values and singular values are scaled back by it."""
    from llvmlite import ir
    b = blk.b
    most = blk.array(f"{tag}_most", blk.f64, THREADS)
    slot = blk.array(f"{tag}_scale", blk.f64, 1)(blk.const(0))
    b.store(blk.f(0.0), most(blk.tid))

    def bigger(p: Any) -> None:
        x, m = b.call(blk.fabs, [b.load(cells(p))]), b.load(most(blk.tid))
        b.store(b.select(b.fcmp_ordered(">", x, m), x, m), most(blk.tid))
    blk.each(count, f"{tag}_max", bigger)
    blk.barrier()
    with blk.single():
        seen = blk.loop(blk.const(0), blk.ntid, f"{tag}_most")
        top = seen.carry(blk.f(0.0))
        m = b.load(most(seen.var))
        top.add_incoming(b.select(b.fcmp_ordered(">", m, top), m, top), b.block)
        seen.close(b.add(seen.var, blk.const(1)))
        exponent = ir.Constant(blk.i64, 0x7FF0000000000000)
        bits = b.and_(b.bitcast(top, blk.i64), exponent)
        usable = b.and_(b.icmp_unsigned("!=", bits, blk.const(0)),
                        b.fcmp_ordered("<", top, blk.f(math.inf)))
        # a subnormal largest magnitude: its power of two from top * 2**52 (normal), scaled
        # back (the sums of squares of a subnormal matrix were all 0: singular values 0)
        lifted = b.and_(b.bitcast(b.fmul(top, blk.f(2.0 ** 52)), blk.i64), exponent)
        tiny = b.fmul(b.bitcast(lifted, blk.f64), blk.f(2.0 ** -52))
        subnormal = b.and_(b.icmp_unsigned("==", bits, blk.const(0)),
                           b.fcmp_ordered(">", top, blk.f(0.0)))
        b.store(b.select(usable, b.bitcast(bits, blk.f64),
                         b.select(subnormal, tiny, blk.f(1.0))), slot)
    blk.barrier()
    scale = b.load(slot)
    blk.each(count, f"{tag}_scale", lambda p: b.store(b.fdiv(b.load(cells(p)), scale),
                                                        cells(p)))
    blk.barrier()
    return scale


def _io(blk: _Block, dtype: np.dtype) -> tuple[Callable, Callable]:
    """(load, store) of a global element of ``dtype`` as float64."""
    b = blk.b
    if dtype == np.float64:
        return (lambda ptr: b.load(ptr)), (lambda v, ptr: b.store(v, ptr))
    from llvmlite import ir
    return ((lambda ptr: b.fpext(b.load(ptr), blk.f64)),
            (lambda v, ptr: b.store(b.fptrunc(v, ir.FloatType()), ptr)))


def _sweeps(blk: _Block, skip: Any, tag: str, body: Callable[[Any, Any], None]) -> None:
    """Up to MAX_SWEEPS sweeps of every round of the tournament: ``body(r, flag)`` is a
    round, which stores 1 at ``flag`` when it rotated; the sweeps end after one that did
    not (or at once when ``skip``). The flag is read by every thread, then cleared, with a
    barrier between each, so that no thread's store of the next sweep is lost."""
    b = blk.b
    flag = blk.array(f"{tag}_flag", blk.i32, 1)(blk.const(0))
    with blk.single():
        b.store(blk.i32(0), flag)
    blk.barrier()
    sweeps = blk.loop(b.select(skip, blk.const(MAX_SWEEPS), blk.const(0)),
                      blk.const(MAX_SWEEPS), tag)
    body(sweeps.var, flag)
    blk.barrier()
    rotated = b.icmp_signed("!=", b.load(flag), blk.i32(0))
    blk.barrier()
    with blk.single():
        b.store(blk.i32(0), flag)
    blk.barrier()
    sweeps.close(b.select(rotated, b.add(sweeps.var, blk.const(1)), blk.const(MAX_SWEEPS)))


def _sort_order(blk: _Block, values: Callable, order: Callable, count: Any,
                descending: bool) -> None:
    """Thread 0: ``order[r]`` the index of the r-th value (a stable insertion sort)."""
    b = blk.b
    with blk.single():
        fill = blk.loop(blk.const(0), count, "order_fill")
        b.store(b.trunc(fill.var, blk.i32), order(fill.var))
        fill.close(b.add(fill.var, blk.const(1)))
        outer = blk.loop(blk.const(1), count, "order")
        i = outer.var
        moving = b.load(order(i))
        key = b.load(values(b.zext(moving, blk.i64)))
        # shift the larger (smaller, descending) ones right: j from i - 1 down
        from .sort import _Loop

        def before(j: Any) -> Any:      # j - 1, clamped: the loop's test reads it at j = 0
            return b.select(b.icmp_signed(">", j, blk.const(0)), b.sub(j, blk.const(1)),
                            blk.const(0))
        inner = _Loop(b, blk.fn, i, lambda j: b.and_(
            b.icmp_signed(">", j, blk.const(0)),
            b.fcmp_ordered(">" if not descending else "<",
                           b.load(values(b.zext(b.load(order(before(j))), blk.i64))), key)),
                      "order_shift")
        j = inner.var
        b.store(b.load(order(b.sub(j, blk.const(1)))), order(j))
        inner.close(b.sub(j, blk.const(1)))
        b.store(moving, order(inner.var))
        outer.close(b.add(i, blk.const(1)))


def eigh_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, w, v, n, batch, upper, vectors)``: a block per n x n matrix of the
    C-contiguous stack ``a`` (n <= MAX_N), symmetric as NumPy reads it (the lower triangle,
    or with ``upper`` the upper one): the two-sided cyclic Jacobi method in shared memory;
    ``w`` gets the eigenvalues in ascending order, ``v`` (when ``vectors``) the eigenvectors
    as columns, rotated in place from the identity."""
    from llvmlite import ir
    dtype = np.dtype(dtype)
    eps = float(np.finfo(np.float64).eps)     # (NumPy computes float32 in double too)
    module = ir.Module(name=name)
    gt = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    P = gt.as_pointer(1)
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, P, P] + [i64] * 4), name=name)
    fn.calling_convention = "ptx_kernel"
    a, w, v, n, batch, upper, vectors = fn.args
    blk = _Block(module, fn, name)
    b, c0, c1 = blk.b, blk.const(0), blk.const(1)
    load, store = _io(blk, dtype)
    S = blk.array("m", blk.f64, MAX_N * MAX_N)
    diag = blk.array("d", blk.f64, MAX_N)
    rots = _Rotations(blk)
    order = blk.array("order", blk.i32, MAX_N)
    bad = blk.array("bad", blk.i32, 1)(c0)
    nn = b.mul(n, n)
    want_v = b.icmp_unsigned("!=", vectors, c0)
    is_upper = b.icmp_unsigned("!=", upper, c0)
    players = b.add(n, b.and_(n, c1))
    half = b.udiv(players, blk.const(2))

    def s_at(i: Any, j: Any) -> Any:
        return S(b.add(b.mul(i, n), j))

    from .sort import _Loop, sreg
    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda x: b.icmp_unsigned("<", x, batch), "matrix")
    base = b.mul(mats.var, nn)

    def v_at(i: Any, j: Any) -> Any:
        return b.gep(v, [b.add(base, b.add(b.mul(i, n), j))])
    with blk.single():
        b.store(blk.i32(0), bad)
    blk.barrier()

    def load_one(p: Any) -> None:        # S[i, j] from NumPy's triangle
        i, j = b.udiv(p, n), b.urem(p, n)
        lo = b.select(b.icmp_unsigned(">=", i, j), p, b.add(b.mul(j, n), i))
        hi = b.select(b.icmp_unsigned(">=", i, j), b.add(b.mul(j, n), i), p)
        x = load(b.gep(a, [b.add(base, b.select(is_upper, hi, lo))]))
        b.store(x, S(p))
        finite = b.fcmp_ordered("<", b.call(blk.fabs, [x]), blk.f(math.inf))
        with b.if_then(b.not_(finite)):
            b.store(blk.i32(1), bad)
        with b.if_then(want_v):
            store(b.uitofp(b.zext(b.icmp_unsigned("==", i, j), i64), blk.f64), v_at(i, j))
    blk.each(nn, "load", load_one)
    blk.barrier()
    nonfinite = b.icmp_signed("!=", b.load(bad), blk.i32(0))
    scale = _power_of_two_scale(blk, S, nn, "s")

    def round_(r: Any, flag: Any) -> None:
        def choose(k: Any) -> None:
            p, q = blk.pair(r, k, players)
            rot, c, s = blk.rotation(b.load(s_at(p, p)), b.load(s_at(q, q)),
                                     b.load(s_at(p, q)), eps)
            rots.record(k, p, q, b.and_(b.icmp_unsigned("<", q, n), rot), c, s, flag)
        blk.each(half, "choose", choose)
        blk.barrier()
        blk.each(b.mul(half, n), "rows", rots.turn(n, lambda j, p: s_at(p, j), b.load,
                                                   b.store))          # J^T A
        blk.barrier()
        blk.each(b.mul(half, n), "cols", rots.turn(n, s_at, b.load, b.store))   # (J^T A) J
        with b.if_then(want_v):
            blk.each(b.mul(half, n), "vcols", rots.turn(n, v_at, load, store))  # V J
        blk.barrier()

        def zero(p: Any, q: Any, c: Any, s: Any) -> None:   # exactly 0, as up to rounding
            b.store(blk.f(0.0), s_at(p, q))
            b.store(blk.f(0.0), s_at(q, p))
        blk.each(half, "zero", lambda k: rots.each_rotated(k, zero))

    def sweep(_: Any, flag: Any) -> None:
        rounds = blk.loop(c0, b.sub(players, c1), "round")
        round_(rounds.var, flag)
        blk.barrier()
        rounds.close(b.add(rounds.var, c1))
    _sweeps(blk, nonfinite, "sweep", sweep)

    nan = blk.f(math.nan)
    blk.each(n, "diag", lambda i: b.store(b.load(s_at(i, i)), diag(i)))
    blk.barrier()
    _sort_order(blk, diag, order, n, descending=False)
    blk.barrier()

    def ordered(i: Any) -> Any:
        return b.zext(b.load(order(i)), i64)
    blk.each(n, "w", lambda r: store(b.select(nonfinite, nan, b.fmul(b.load(diag(ordered(r))),
                                                                      scale)),
                                     b.gep(w, [b.add(b.mul(mats.var, n), r)])))
    with b.if_then(want_v):      # the columns in the eigenvalues' order, through S
        blk.each(nn, "vgather", lambda x: b.store(
            load(v_at(b.udiv(x, n), ordered(b.urem(x, n)))), S(x)))
    blk.barrier()
    with b.if_then(want_v):
        blk.each(nn, "vput", lambda x: store(b.select(nonfinite, nan, b.load(S(x))),
                                             b.gep(v, [b.add(base, x)])))
    blk.barrier()       # (the next matrix overwrites the shared one)
    mats.close(b.add(mats.var, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


def svd_kernel_ir(dtype: Any, name: str) -> str:
    """``name(a, u, s, vt, work, m, n, batch, uv, full, lower)``: a block per m x n
    matrix of the C-contiguous stack ``a`` (min(m, n) <= MAX_N; ``lower``: a square one read
    from its lower triangle as a symmetric matrix, NumPy's ``hermitian=True``). W, A's
    columns (A^T's when m < n: M x N, M >= N), is made orthogonal by the one-sided Jacobi
    method, in shared memory, or for M > MAX_N in ``work`` (M * N + M float64 per matrix:
    W, then the completion's row norms); ``s`` gets the N column norms in descending
    order. With ``uv``, ``u`` and ``vt`` get NumPy's layouts (``full``: U m x m and V^T
    n x n, else m x k and k x n): the right
    vectors are the rotations' product, kept in place (in ``vt``, or in ``u`` when
    transposed), the left ones W's normalised columns, completed to ``full``'s basis or
    past a zero singular value. A non-finite matrix gets NaN results (LAPACK's are NaN, or
    its LinAlgError, or other numbers, as its code paths fall)."""
    from llvmlite import ir
    dtype = np.dtype(dtype)
    eps = float(np.finfo(np.float64).eps)     # (NumPy computes float32 in double too)
    module = ir.Module(name=name)
    gt = ir.DoubleType() if dtype == np.float64 else ir.FloatType()
    P = gt.as_pointer(1)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, P, P, P,
                                                             ir.DoubleType().as_pointer(1)] +
                                             [i64] * 6), name=name)
    fn.calling_convention = "ptx_kernel"
    a, u, s_out, vt, work_g, m, n, batch, uv, full, lower = fn.args
    blk = _Block(module, fn, name)
    b, c0, c1 = blk.b, blk.const(0), blk.const(1)
    load, store = _io(blk, dtype)
    W_shared = blk.array("m", blk.f64, MAX_N * MAX_N)
    sig = blk.array("sig", blk.f64, MAX_N)
    work = blk.array("work", blk.f64, MAX_N)       # row norms, then dot products
    rots = _Rotations(blk)
    order = blk.array("order", i32, MAX_N)
    word = blk.array("word", i64, 2)               # the rank, then the chosen row
    bad = blk.array("bad", i32, 1)(c0)
    norm = blk.array("norm", blk.f64, 1)(c0)
    rank_slot, row_slot = word(c0), word(c1)
    wide = b.icmp_unsigned("<", m, n)
    M, N = b.select(wide, n, m), b.select(wide, m, n)
    want_uv = b.icmp_unsigned("!=", uv, c0)
    is_lower = b.icmp_unsigned("!=", lower, c0)
    ucols = b.select(b.icmp_unsigned("!=", full, c0), M, N)   # the long side's basis
    players = b.add(N, b.and_(N, c1))
    half = b.udiv(players, blk.const(2))

    from .sort import _Loop, sreg
    mats = _Loop(b, fn, sreg(b, "ctaid.x"), lambda x: b.icmp_unsigned("<", x, batch), "matrix")
    x_ = mats.var
    # W and the row norms: shared, or this matrix's part of ``work`` (generic pointers)
    generic = ir.PointerType(blk.f64)
    in_global = b.icmp_unsigned("!=", b.ptrtoint(work_g, i64), c0)
    mine = b.gep(work_g, [b.mul(x_, b.add(b.mul(M, N), M))])
    w_base = b.select(in_global, b.addrspacecast(mine, generic),
                      b.addrspacecast(W_shared(c0), generic))
    rows_base = b.select(in_global, b.addrspacecast(b.gep(mine, [b.mul(M, N)]), generic),
                         b.addrspacecast(work(c0), generic))

    def W(p: Any) -> Any:
        return b.gep(w_base, [p])

    def row_norms(i: Any) -> Any:
        return b.gep(rows_base, [i])

    def w_at(i: Any, j: Any) -> Any:
        return W(b.add(b.mul(i, N), j))

    # this matrix's outputs: the short side's basis V (N x N) and the long side's L
    # (M x ucols), each in the output that holds it (transposed in vt)
    u_mat = b.gep(u, [b.mul(x_, b.select(wide, b.mul(N, N), b.mul(M, ucols)))])
    vt_mat = b.gep(vt, [b.mul(x_, b.select(wide, b.mul(ucols, M), b.mul(N, N)))])

    def v_at(i: Any, j: Any) -> Any:
        return b.select(wide, b.gep(u_mat, [b.add(b.mul(i, N), j)]),
                        b.gep(vt_mat, [b.add(b.mul(j, N), i)]))

    def l_at(i: Any, j: Any) -> Any:
        return b.select(wide, b.gep(vt_mat, [b.add(b.mul(j, M), i)]),
                        b.gep(u_mat, [b.add(b.mul(i, ucols), j)]))
    with blk.single():
        b.store(blk.i32(0), bad)
    blk.barrier()

    def load_one(p: Any) -> None:        # W[i, j] = A[i, j], or A[j, i] when wide
        i, j = b.udiv(p, N), b.urem(p, N)
        r, c = b.select(wide, j, i), b.select(wide, i, j)
        mirror = b.and_(is_lower, b.icmp_unsigned("<", r, c))
        r, c = b.select(mirror, c, r), b.select(mirror, r, c)
        x = load(b.gep(a, [b.add(b.mul(x_, b.mul(m, n)), b.add(b.mul(r, n), c))]))
        b.store(x, W(p))
        with b.if_then(b.not_(b.fcmp_ordered("<", b.call(blk.fabs, [x]), blk.f(math.inf)))):
            b.store(blk.i32(1), bad)
    blk.each(b.mul(M, N), "load", load_one)
    with b.if_then(want_uv):
        blk.each(b.mul(N, N), "eye", lambda p: store(
            b.uitofp(b.zext(b.icmp_unsigned("==", b.udiv(p, N), b.urem(p, N)), i64),
                     blk.f64), v_at(b.udiv(p, N), b.urem(p, N))))
    blk.barrier()
    nonfinite = b.icmp_signed("!=", b.load(bad), blk.i32(0))
    scale = _power_of_two_scale(blk, W, b.mul(M, N), "w")

    def round_(r: Any, flag: Any) -> None:
        def choose(k: Any) -> None:
            p, q = blk.pair(r, k, players)
            valid = b.icmp_unsigned("<", q, N)
            qq = b.select(valid, q, p)
            col = (lambda t: b.load(w_at(t, p))), (lambda t: b.load(w_at(t, qq)))
            alpha = blk.total(c0, M, "alpha", lambda t: b.fmul(col[0](t), col[0](t)))
            beta = blk.total(c0, M, "beta", lambda t: b.fmul(col[1](t), col[1](t)))
            gamma = blk.total(c0, M, "gamma", lambda t: b.fmul(col[0](t), col[1](t)))
            rot, c, s = blk.rotation(alpha, beta, gamma, eps)
            rots.record(k, p, q, b.and_(valid, rot), c, s, flag)
        blk.each(half, "choose", choose)
        blk.barrier()
        blk.each(b.mul(half, M), "turn_w", rots.turn(M, w_at, b.load, b.store))
        with b.if_then(want_uv):
            blk.each(b.mul(half, N), "turn_v", rots.turn(N, v_at, load, store))
        blk.barrier()

    def sweep(_: Any, flag: Any) -> None:
        rounds = blk.loop(c0, b.sub(players, c1), "round")
        round_(rounds.var, flag)
        rounds.close(b.add(rounds.var, c1))
    _sweeps(blk, nonfinite, "sweep", sweep)

    blk.each(N, "norms", lambda j: b.store(b.call(blk.sqrt, [blk.total(
        c0, M, "norm", lambda t: b.fmul(b.load(w_at(t, j)), b.load(w_at(t, j))))]), sig(j)))
    blk.barrier()
    _sort_order(blk, sig, order, N, descending=True)

    def ordered(i: Any) -> Any:
        return b.zext(b.load(order(i)), i64)
    with blk.single():      # the rank: the count of non-zero singular values
        count = blk.total(c0, N, "rank", lambda j: b.uitofp(b.zext(b.fcmp_ordered(
            ">", b.load(sig(j)), blk.f(0.0)), i64), blk.f64))
        b.store(b.fptoui(count, i64), rank_slot)
    blk.barrier()
    nan = blk.f(math.nan)
    blk.each(N, "s", lambda r: store(b.select(nonfinite, nan, b.fmul(
        b.load(sig(ordered(r))), scale)), b.gep(s_out, [b.add(b.mul(x_, N), r)])))
    rank = b.load(rank_slot)
    with b.if_then(b.and_(want_uv, nonfinite)):     # NaN vectors
        blk.each(b.mul(M, ucols), "nan_l", lambda p: store(nan, l_at(b.udiv(p, ucols),
                                                                    b.urem(p, ucols))))
        blk.each(b.mul(N, N), "nan_v", lambda p: store(nan, v_at(b.udiv(p, N),
                                                                b.urem(p, N))))
    with b.if_then(b.and_(want_uv, b.not_(nonfinite))):
        def left(p: Any) -> None:        # L[:, r] = W[:, order[r]] / sigma
            i, r = b.udiv(p, N), b.urem(p, N)
            with b.if_then(b.icmp_unsigned("<", r, rank)):
                j = ordered(r)
                store(b.fdiv(b.load(w_at(i, j)), b.load(sig(j))), l_at(i, r))
        blk.each(b.mul(M, N), "left", left)
        blk.barrier()
        # V's columns in the singular values' order, through the shared matrix
        blk.each(b.mul(N, N), "vgather", lambda p: b.store(
            load(v_at(b.udiv(p, N), ordered(b.urem(p, N)))), W(p)))
        blk.barrier()
        blk.each(b.mul(N, N), "vput", lambda p: store(
            b.load(W(p)), v_at(b.udiv(p, N), b.urem(p, N))))
        blk.barrier()
        _complete(blk, l_at, load, store, rank, ucols, M, row_norms, work, row_slot, norm)
    blk.barrier()       # (the next matrix overwrites the shared one)
    mats.close(b.add(x_, sreg(b, "nctaid.x")))
    b.ret_void()
    return str(module)


def _complete(blk: _Block, l_at: Callable, load: Callable, store: Callable, start: Any,
              stop: Any, M: Any, row_norms: Callable, dots: Callable, row_slot: Any,
              norm: Any) -> None:
    """Columns start..stop-1 of the M-row orthonormal basis ``l_at`` (columns 0..start-1
    made): each the unit vector e_i of the row i least represented so far (the smallest
    row norm, so ||e_i - L L^T e_i||^2 >= 1 - (columns)/M), orthogonalised against the
    columns before it twice (Gram-Schmidt's second pass), then normalised."""
    b, c0, c1 = blk.b, blk.const(0), blk.const(1)
    cols = blk.loop(start, stop, "complete")
    c = cols.var

    def row_norm(i: Any) -> None:
        b.store(blk.total(c0, c, "rownorm", lambda k: b.fmul(load(l_at(i, k)),
                                                              load(l_at(i, k)))), row_norms(i))
    blk.each(M, "rownorms", row_norm)
    blk.barrier()
    with blk.single():
        best = blk.loop(c1, M, "least")
        pick = best.carry(c0)
        smaller = b.fcmp_ordered("<", b.load(row_norms(best.var)), b.load(row_norms(pick)))
        pick.add_incoming(b.select(smaller, best.var, pick), b.block)
        best.close(b.add(best.var, c1))
        b.store(pick, row_slot)
    blk.barrier()
    row = b.load(row_slot)

    def first_pass(r: Any) -> None:      # e_row - L (L[row, :])^T
        unit = b.uitofp(b.zext(b.icmp_unsigned("==", r, row), blk.i64), blk.f64)
        store(b.fsub(unit, blk.total(c0, c, "proj", lambda k: b.fmul(
            load(l_at(r, k)), load(l_at(row, k))))), l_at(r, c))
    blk.each(M, "first", first_pass)
    blk.barrier()
    blk.each(c, "dots", lambda k: b.store(blk.total(c0, M, "dot", lambda r: b.fmul(
        load(l_at(r, k)), load(l_at(r, c)))), dots(k)))
    blk.barrier()
    blk.each(M, "second", lambda r: store(b.fsub(load(l_at(r, c)), blk.total(
        c0, c, "proj2", lambda k: b.fmul(load(l_at(r, k)), b.load(dots(k))))), l_at(r, c)))
    blk.barrier()
    with blk.single():
        b.store(b.call(blk.sqrt, [blk.total(c0, M, "norm2", lambda r: b.fmul(
            load(l_at(r, c)), load(l_at(r, c))))]), norm)
    blk.barrier()
    blk.each(M, "unit", lambda r: store(b.fdiv(load(l_at(r, c)), b.load(norm)), l_at(r, c)))
    blk.barrier()
    cols.close(b.add(c, c1))


def _launch_blocks(dev: Any, kind: str, dtype: Any, make_ir: Any, batch: int,
                   args: list) -> None:
    from .driver import sm_count
    from .sort import _launch
    name, text, ptx = small_kernel(kind, dtype, make_ir)
    fn = dev.load(ptx, [name], text)[name]
    _launch(dev, fn, max(1, min(batch, 32 * sm_count())), THREADS, args)


def _eigen(dev: Any, a: Any, w: Any, v: Any, uplo: str) -> Any:
    sq = _square_batch(a, w, v)
    if sq is None:
        return NotImplemented
    n, batch = sq
    if (w is None and v is None) or batch == 0:
        return None
    keep = None
    if w is None:       # (only the vectors are used: the values still need a place)
        keep = dev.allocator.allocate(batch * n * a.dtype.itemsize)
    _launch_blocks(dev, "eigh", a.dtype, eigh_kernel_ir, batch,
                   [a.ptr, w.ptr if w is not None else keep.ptr, v.ptr if v is not None else 0,
                    n, batch, int(uplo == "U"), int(v is not None)])
    return None


def eigh(dev: Any, operands: list, results: list, *, UPLO: str) -> Any:
    """``np.linalg.eigh`` of a contiguous float stack of n <= MAX_N matrices."""
    return _eigen(dev, operands[0], results[0], results[1], UPLO)


def eigvalsh(dev: Any, operands: list, results: list, *, UPLO: str) -> Any:
    """``np.linalg.eigvalsh``: eigh without its vectors."""
    return _eigen(dev, operands[0], results[0], None, UPLO)


def _svd_shape(a: Any) -> tuple[int, int] | None:
    """(m, n) of a contiguous float stack the SVD kernel takes: the shorter side at most
    MAX_N, the longer at most MAX_ROWS."""
    if a.dtype not in _FLOATS or len(a.shape) < 2 or not _contiguous(a):
        return None
    m, n = a.shape[-2], a.shape[-1]
    if min(m, n) < 1 or min(m, n) > MAX_N or max(m, n) > MAX_ROWS:
        return None
    return m, n


def _work(dev: Any, m: int, n: int, batch: int) -> Any:
    """The SVD kernel's global W and row norms when the longer side passes MAX_N."""
    big, small = max(m, n), min(m, n)
    if big <= MAX_N:
        return None
    return dev.allocator.allocate(batch * (big * small + big) * 8)


def svd(dev: Any, operands: list, results: list, *, full_matrices: bool, compute_uv: bool,
        hermitian: bool) -> Any:
    """``np.linalg.svd`` of a contiguous float stack of m x n matrices (``_svd_shape``; with
    ``full_matrices``' vectors both sides at most MAX_N); a non-finite matrix gives NaNs."""
    a = operands[0]
    if _svd_shape(a) is None:
        return NotImplemented
    m, n = a.shape[-2], a.shape[-1]
    u, s, vt = results if compute_uv else (None, results[0], None)
    if any(o is not None and o.dtype != a.dtype for o in (u, s, vt)):
        return NotImplemented
    batch = math.prod(a.shape[:-2])
    if batch == 0 or all(o is None for o in (u, s, vt)):
        return None
    uv = u is not None or vt is not None
    if uv and full_matrices and max(m, n) > MAX_N:   # (an M x M basis of a long side)
        return NotImplemented
    k, size = min(m, n), a.dtype.itemsize
    keep = []

    def place(out: Any, count: int) -> int:     # an unused result's scratch space
        if out is not None:
            return out.ptr
        keep.append(dev.allocator.allocate(max(count, 1) * size))
        return keep[-1].ptr
    ucols = m if full_matrices else k
    vrows = n if full_matrices else k
    work = _work(dev, m, n, batch)
    _launch_blocks(dev, "svd", a.dtype, svd_kernel_ir, batch,
                   [a.ptr, place(u, batch * m * ucols) if uv else 0, place(s, batch * k),
                    place(vt, batch * vrows * n) if uv else 0,
                    work.ptr if work is not None else 0, m, n, batch,
                    int(uv), int(bool(full_matrices)), int(bool(hermitian))])
    return None


def register() -> None:
    """Make the Jacobi kernels the "cuda" implementations of eigh, eigvalsh and svd (pinv
    and lstsq: ``gpu/least_squares.py``)."""
    EXTERNALS["linalg.eigh"].device["cuda"] = eigh
    EXTERNALS["linalg.eigvalsh"].device["cuda"] = eigvalsh
    EXTERNALS["linalg.svd"].device["cuda"] = svd
