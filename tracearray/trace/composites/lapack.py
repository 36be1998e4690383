"""numpy.linalg's LAPACK functions: solve, inv, det, slogdet, cholesky, qr, svd, eigh,
eigvalsh, lstsq, pinv, matrix_rank (the external ops of ``ops.linalg``), batched over leading
axes as NumPy 2 does, with NumPy's shape checks and errors at the user's line.

Operands are cast as ``numpy/linalg/_linalg.py::_commonType`` types them: integers and bools
compute in float64, float32 stays float32 (NumPy computes it in double and casts back, and so
does the host function, which is NumPy's), float16 is refused with NumPy's TypeError. A
singular matrix raises NumPy's ``LinAlgError`` when the compiled function runs. ``eig`` and
``eigvals`` return real arrays when every eigenvalue of the batch is real and complex ones
otherwise, as NumPy does: which one is probed when the function runs (``context.data_size``),
and each answer is its own trace.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.linalg import LinAlgError
from numpy.linalg import _linalg as npl

from ...errors import with_location
from .. import context
from ..build import external, unsupported
from ...ops.linalg import COMPLEX_RESULTS
from ..complex import FUNCTIONS, ComplexTracer, as_complex, is_complex, numpy_code_for_complex
from ..tracer import Tracer
from . import NUMERIC, NUMPY_IMPLEMENTATION as NUMPY, as_tracer, composite

_SQ = "{0} @ {0}.swapaxes(-1, -2) + 3 * np.eye({0}.shape[-1])"   # well conditioned, symmetric
_NOTE = ("external op: LAPACK through numpy.linalg; on the GPU, float32/float64 stacks of "
         "contiguous matrices past 64 x 64: cuSOLVER's geev (divergence gpu-eig), others on "
         "the host; complex matrices: NumPy's LAPACK (on the GPU on the host)")
_LAPACK = dict(dtypes=NUMERIC, min_dims=2, max_dims=3, same_shape=True, values="small",
               notes=_NOTE)
_LU_NOTE = ("external op: LAPACK through numpy.linalg; on the GPU, float32/float64 systems of "
            "n <= 64 with one right-hand side (solve) or contiguous (inv) run in cuBLAS's "
            "batched LU, larger ones and several right-hand sides in cuSOLVER's getrf/getrs "
            "(divergence gpu-linalg-rounding), others on the host")
_LU = dict(_LAPACK, notes=_LU_NOTE)
_DET_NOTE = ("external op: LAPACK through numpy.linalg; on the GPU, float32/float64 stacks of "
             "contiguous n x n matrices (n <= 64): cuBLAS's batched LU, then NumPy's reading "
             "of its diagonal and pivots; larger ones cuSOLVER's getrf (divergence "
             "gpu-linalg-rounding), others on the host")
_DET = dict(_LAPACK, notes=_DET_NOTE)
_QR_NOTE = ("external op: LAPACK through numpy.linalg; on the GPU, modes reduced, complete and "
            "r of float32/float64 stacks of contiguous m x n matrices (m, n <= 64): a block "
            "per matrix, LAPACK's unblocked Householder reflectors (so NumPy's signs; "
            "divergence gpu-linalg-rounding), larger ones cuSOLVER's geqrf/orgqr, mode raw "
            "and others on the host")
_JACOBI = ("Jacobi rotations, a block per matrix (values within 8 max(m, n) eps ||A||_2; "
           "vectors a valid basis, not LAPACK's: divergence gpu-spectral-basis), larger "
           "ones cuSOLVER's syevd/gesvd (the same bounds), others on the host")
_EIGH = dict(_LAPACK, notes="external op: LAPACK through numpy.linalg; on the GPU, float32/"
             "float64 stacks of contiguous n x n matrices (n <= 64): " + _JACOBI)
_SVD = dict(_LAPACK, notes="external op: LAPACK through numpy.linalg; on the GPU, float32/"
            "float64 stacks of contiguous m x n matrices, the shorter side up to 64 and the "
            "longer up to 4096 (both up to 64 for full_matrices' vectors): " + _JACOBI)
_CHOLESKY_NOTE = ("external op: LAPACK through numpy.linalg; on the GPU, float32/float64 "
                  "stacks of contiguous n x n matrices (n <= 64): a block per matrix, the "
                  "unblocked factorisation in shared memory, larger ones cuSOLVER's potrf "
                  "(divergence gpu-linalg-rounding), others on the host")


def _result_dtype(*ts: Any) -> np.dtype:
    """numpy/linalg/_linalg.py::_commonType: float32 (complex64) when every operand is
    float32 (complex64), else float64 (complex128); complex when any operand is."""
    out, complex_ = np.dtype(np.float32), False
    for t in ts:
        if t.dtype == np.float16:
            raise TypeError(with_location("array type float16 is unsupported in linalg"))
        complex_ = complex_ or t.dtype.kind == "c"
        if t.dtype not in (np.float32, np.complex64):
            out = np.dtype(np.float64)
    return np.result_type(out, np.complex64) if complex_ else out


def _operand(x: Any) -> Any:
    """An operand as a tracer: a complex one (a complex tracer, or complex constants) as a
    complex tracer."""
    if isinstance(x, ComplexTracer) or is_complex(x):
        return as_complex(x)
    return as_tracer(x)


def _matrices(a: Any, square: bool = True) -> Any:
    t = _operand(a)
    if t.ndim < 2:
        raise LinAlgError(with_location(
            f"{t.ndim}-dimensional array given. Array must be at least two-dimensional"))
    if square and t.shape[-1] != t.shape[-2]:
        raise LinAlgError(with_location("Last 2 dimensions of the array must be square"))
    return t.astype(_result_dtype(t))


def _call(op: str, *ts: Any, **attrs: Any) -> tuple[Any, ...]:
    """The external op's results as tracers. With a complex operand, its complex variant
    (``ops/linalg.py``: every operand as a pair array) and its complex results as complex
    tracers."""
    if not any(isinstance(t, ComplexTracer) for t in ts):
        return tuple(Tracer(n) for n in external(op, [t.node for t in ts], **attrs))
    dt = _result_dtype(*ts)
    pairs = [as_complex(t, dt).pair_node() for t in ts]
    flags = COMPLEX_RESULTS[op](attrs)
    nodes = external(op + ".complex", pairs, **attrs)
    return tuple(ComplexTracer.from_pair(Tracer(n)) if c else Tracer(n)
                 for n, c in zip(nodes, flags))


@composite(np.linalg.solve, calls=[f'np.linalg.solve({_SQ}, {{1}})',
                                   f'np.linalg.solve({_SQ}, {{1}}[..., 0])'],
           arrays=2, name="np.linalg.solve", **_LU)
def solve(a: Any, b: Any) -> Tracer:
    ta, tb = _operand(a), _operand(b)
    dt = _result_dtype(ta, tb)
    ta = _matrices(ta).astype(dt)
    tb = tb.astype(dt)
    m = ta.shape[-1]
    if tb.ndim == 0 or (tb.ndim == 1 and tb.shape[0] != m) or \
            (tb.ndim >= 2 and tb.shape[-2] != m):
        raise ValueError(with_location(
            f"solve: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (m,m),(m,n)->(m,n) (size {tb.shape[-2 if tb.ndim >= 2 else -1]} is "
            f"different from {m})" if tb.ndim else "solve: b must be at least 1-dimensional"))
    if tb.ndim >= 2:
        np.broadcast_shapes(ta.shape[:-2], tb.shape[:-2])   # NumPy's error if they do not
    return _call("linalg.solve", ta, tb)[0]


@composite(np.linalg.inv, calls=[f'np.linalg.inv({_SQ})',
                                 'np.linalg.inv(np.exp({0}) @ np.exp({0}).swapaxes(-1, -2) '
                                 '+ np.eye({0}.shape[-1]))'],
           name="np.linalg.inv", **_LU)
def inv(a: Any) -> Tracer:
    return _call("linalg.inv", _matrices(a))[0]


@composite(np.linalg.det, calls=[f'np.linalg.det({_SQ})', 'np.linalg.det({0}[..., :2, :2])'],
           name="np.linalg.det", **_DET)
def det(a: Any) -> Tracer:
    return _call("linalg.det", _matrices(a))[0]


@composite(np.linalg.slogdet, calls=[f'np.linalg.slogdet({_SQ})[1]',
                                     'np.linalg.slogdet({0}[..., :2, :2]).sign'],
           name="np.linalg.slogdet", **_DET)
def slogdet(a: Any) -> Any:
    sign, logdet = _call("linalg.slogdet", _matrices(a))
    return npl.SlogdetResult(sign, logdet)


@composite(np.linalg.cholesky, calls=[f'np.linalg.cholesky({_SQ})',
                                      f'np.linalg.cholesky({_SQ}, upper=True)'],
           name="np.linalg.cholesky", **dict(_LAPACK, notes=_CHOLESKY_NOTE))
def cholesky(a: Any, /, *, upper: bool = False) -> Tracer:
    return _call("linalg.cholesky", _matrices(a), upper=bool(upper))[0]


@composite(np.linalg.qr, calls=['np.linalg.qr({0})[0]', 'np.linalg.qr({0}, mode="r")',
                                'np.linalg.qr({0}, mode="complete").R'],
           name="np.linalg.qr", **dict(_LAPACK, notes=_QR_NOTE))
def qr(a: Any, mode: str = "reduced") -> Any:
    if mode not in ("reduced", "complete", "r", "raw"):
        if mode in ("f", "full", "e", "economic"):
            raise unsupported(f"np.linalg.qr(mode={mode!r})", "a deprecated mode")
        raise ValueError(with_location(f"Unrecognized mode '{mode}'"))
    results = _call("linalg.qr", _matrices(a, square=False), mode=mode)
    if mode == "r":
        return results[0]
    return npl.QRResult(*results) if mode != "raw" else results


@composite(np.linalg.svd, calls=['np.linalg.svd({0}, compute_uv=False)',
                                 'np.abs(np.linalg.svd({0})[0])',
                                 f'np.linalg.svd({_SQ}, hermitian=True, compute_uv=False)'],
           name="np.linalg.svd", **_SVD)
def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> Any:
    t = _matrices(a, square=bool(hermitian))
    results = _call("linalg.svd", t, full_matrices=bool(full_matrices),
                    compute_uv=bool(compute_uv), hermitian=bool(hermitian))
    return npl.SVDResult(*results) if compute_uv else results[0]


def _uplo(UPLO: str) -> str:
    if UPLO not in ("L", "U"):
        raise ValueError(with_location("UPLO argument must be 'L' or 'U'"))
    return UPLO


@composite(np.linalg.eigh, calls=[f'np.linalg.eigh({_SQ})[0]',
                                  f'np.abs(np.linalg.eigh({_SQ}, UPLO="U").eigenvectors)'],
           name="np.linalg.eigh", **_EIGH)
def eigh(a: Any, UPLO: str = "L") -> Any:
    w, v = _call("linalg.eigh", _matrices(a), UPLO=_uplo(UPLO))
    return npl.EighResult(w, v)


def _eig(a: Any, vectors: bool) -> tuple:
    """np.linalg.eig / eigvals: real results when every eigenvalue of the batch is real, else
    complex ones (NumPy's rule: a dtype the data decides, probed when the function runs)."""
    t = _matrices(a)
    if isinstance(t, ComplexTracer):     # a complex matrix's results are complex (pairs)
        return tuple(ComplexTracer.from_pair(r)
                     for r in _call("linalg.eig", t, real=False, vectors=vectors))
    (probe,) = _call("linalg.eig_real", t)
    real = bool(context.data_size(probe.node, "whether np.linalg.eig's eigenvalues are real"))
    out = _call("linalg.eig", t, real=real, vectors=vectors)
    return out if real else tuple(ComplexTracer.from_pair(r) for r in out)


@composite(np.linalg.eig, calls=[f'np.abs(np.linalg.eig({_SQ}).eigenvalues)',
                                 'np.sort(np.abs(np.linalg.eigvals({0})), axis=-1)'],
           name="np.linalg.eig", **_LAPACK)
def eig(a: Any) -> Any:
    return npl.EigResult(*_eig(a, True))


@composite(np.linalg.eigvals, calls=['np.linalg.eigvals({0} @ {0}.swapaxes(-1, -2))'],
           name="np.linalg.eigvals", **_LAPACK)
def eigvals(a: Any) -> Any:
    return _eig(a, False)[0]


@composite(np.linalg.eigvalsh, calls=[f'np.linalg.eigvalsh({_SQ})'],
           name="np.linalg.eigvalsh", **_EIGH)
def eigvalsh(a: Any, UPLO: str = "L") -> Tracer:
    return _call("linalg.eigvalsh", _matrices(a), UPLO=_uplo(UPLO))[0]


_PINV_NOTE = ("external op: LAPACK through numpy.linalg; on the GPU, float32/float64 stacks of "
              "contiguous m x n matrices (the shorter side up to 64, the longer up to 4096): "
              "NumPy's formula over the SVD of Jacobi rotations (divergence "
              "gpu-spectral-basis), others on the host")


@composite(np.linalg.pinv, calls=['np.linalg.pinv({0})', 'np.linalg.pinv({0}, rcond=1e-3)',
                                  'np.linalg.pinv({0}, rtol=None)'],
           name="np.linalg.pinv", **dict(_LAPACK, notes=_PINV_NOTE))
def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = np._NoValue
         ) -> Tracer:
    for name, v in (("rcond", rcond), ("rtol", rtol)):
        if isinstance(v, Tracer) or (v is not None and v is not np._NoValue and
                                     np.ndim(v) != 0):
            raise unsupported(f"np.linalg.pinv({name}=<array>)", "pass a Python number")
    if rcond is not None and rtol is not np._NoValue:
        raise ValueError(with_location("`rtol` and `rcond` can't be both set."))
    a = _operand(a)
    if rcond is None:           # NumPy's cutoff, relative to the largest singular value
        if rtol is np._NoValue:
            rcond = 1e-15
        elif rtol is None:      # (NumPy's finfo: an integer matrix raises its ValueError)
            rcond = max(a.shape[-2:]) * float(np.finfo(a.dtype).eps)
        else:
            rcond = rtol
    if a.ndim >= 2 and (a.shape[-1] == 0 or a.shape[-2] == 0):
        # NumPy: an empty result of a's own dtype, before any dtype or shape check (an
        # empty float16 matrix included: soak cpu-2026-12-02-r, program 1094)
        return _operand(np.zeros(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype))
    t = _matrices(a, square=bool(hermitian))
    return _call("linalg.pinv", t, rcond=float(rcond), hermitian=bool(hermitian))[0]


_RANK_NOTE = ("NumPy's formula (numpy/linalg/_linalg.py::matrix_rank) over np.linalg.svd's "
              "values (np.linalg.eigvalsh's with hermitian=True): on the GPU those of "
              "Jacobi rotations where svd runs there (divergence gpu-spectral-basis)")


@composite(np.linalg.matrix_rank, calls=['np.linalg.matrix_rank({0})',
                                         'np.linalg.matrix_rank({0}[..., :1, :] * 0)',
                                         f'np.linalg.matrix_rank({_SQ}, hermitian=True)',
                                         'np.linalg.matrix_rank({0}, tol=0.5)'],
           name="np.linalg.matrix_rank", **dict(_LAPACK, notes=_RANK_NOTE))
def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None
                ) -> Tracer:
    # numpy/linalg/_linalg.py::matrix_rank on tracers: the count of singular values above
    # tol (default: max(M, N) * eps times the largest)
    t = _operand(A)
    if t.ndim < 2:   # NumPy: int(not all(A == 0))
        return (~np.all(t == 0)).astype(np.int64) if t.ndim else \
            (t != 0).astype(np.int64)
    if tol is not None and rtol is not None:
        raise ValueError(with_location("`tol` and `rtol` can't be both set."))
    s = eigvalsh(t) if hermitian else svd(t, compute_uv=False)
    if hermitian:
        s = np.abs(s)
    if tol is None:
        if rtol is None:
            rtol = max(t.shape[-2:]) * float(np.finfo(s.dtype).eps)
        else:
            rtol = as_tracer(rtol)[..., None]
        tol = s.max(axis=-1, keepdims=True, initial=0) * rtol
    else:
        tol = as_tracer(tol)[..., None]
    return np.count_nonzero(s > tol, axis=-1)


@composite(np.linalg.lstsq, calls=['np.linalg.lstsq({0}[0] if {0}.ndim == 3 else {0}, '
                                   '({1}[0] if {1}.ndim == 3 else {1}))[0]'],
           arrays=2, name="np.linalg.lstsq", dtypes=NUMERIC, min_dims=2, max_dims=2,
           same_shape=True, values="small", notes=(
               "external op: LAPACK through numpy.linalg; on the GPU, contiguous float32/"
               "float64 operands of n <= 64 unknowns (or m <= 64 equations) and up to 4096 "
               "of the other: NumPy's formula over the SVD of Jacobi rotations (divergence "
               "gpu-spectral-basis), others on the host"))
def lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    ta, tb = _operand(a), _operand(b)
    dt = _result_dtype(ta, tb)
    if ta.ndim != 2:
        raise LinAlgError(with_location(
            f"{ta.ndim}-dimensional array given. Array must be two-dimensional"))
    if tb.ndim not in (1, 2):
        raise LinAlgError(with_location(
            f"{tb.ndim}-dimensional array given. Array must be one or two-dimensional"))
    m, n = ta.shape
    if tb.shape[0] != m:
        raise LinAlgError(with_location("Incompatible dimensions"))
    if isinstance(rcond, Tracer) or (rcond is not None and np.ndim(rcond) != 0):
        raise unsupported("np.linalg.lstsq(rcond=<array>)", "pass a Python number")
    rcond = None if rcond is None else float(rcond)
    ta, tb = ta.astype(dt), tb.astype(dt)
    k = tb.shape[1] if tb.ndim == 2 else 1
    # The rank is probed first, so that it is a number the trace knows, as NumPy's is (code
    # such as np.polyfit branches on it), and because NumPy returns the residuals only when
    # it is full: a size the data decides
    known = 0
    if ta.size:
        (probe,) = _call("linalg.lstsq_rank", ta, tb, rcond=rcond)
        known = context.data_size(probe.astype(np.int64).node, "np.linalg.lstsq's rank")
    residuals = k if m > n and known == n else 0
    x, res, rank, s = _call("linalg.lstsq", ta, tb, rcond=rcond, residuals=residuals)
    return x, res, as_tracer(np.asarray(known, rank.dtype)), s



@composite(np.linalg.cond, calls=['np.linalg.cond({0})', 'np.linalg.cond({0}, -2)',
                                  f'np.linalg.cond({_SQ}, "fro")',
                                  'np.linalg.cond({0}[..., :2, :2], 1)',
                                  f'np.linalg.cond({_SQ}, -np.inf)'],
           name="np.linalg.cond", **dict(_LAPACK, notes=(
               "NumPy's formula: p None/2/-2 over np.linalg.svd's values (on the GPU Jacobi "
               "rotations where svd runs there: gpu-spectral-basis), other p over inv's "
               "norms (the host's LAPACK)")))
def cond(x: Any, p: Any = None) -> Tracer:
    # numpy/linalg/_linalg.py::cond without its branch on the data: a NaN condition number
    # becomes inf unless the matrix has a NaN (NumPy: ``if nan_mask.any(): r[mask] = inf``)
    t = _operand(x)
    if t.size == 0 and np.prod(t.shape[-2:]) == 0:
        raise LinAlgError(with_location("cond is not defined on empty arrays"))
    if p is None or p in {2, -2}:
        s = svd(t, compute_uv=False)
        r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        m = _matrices(t)        # NumPy checks square stacks, then inverts in double
        result = _result_dtype(t)
        (invx,) = _call("linalg.inv_or_nan", m.astype(np.result_type(result, np.float64)))
        r = (np.linalg.norm(t, p, axis=(-2, -1)) *
             np.linalg.norm(invx, p, axis=(-2, -1))).astype(result.type(0).real.dtype)
    to_inf = np.isnan(r)
    if t.dtype.kind in "fc":     # (an integer matrix has no NaN)
        to_inf = to_inf & ~np.isnan(t).any(axis=(-2, -1))
    return np.where(to_inf, np.asarray(np.inf, r.dtype), r)


@composite(np.linalg.tensorsolve, calls=[f'np.linalg.tensorsolve(({_SQ}).reshape('
                                         '{0}.shape[:-1] + {0}.shape[-1:]), {1}[..., 0])'],
           arrays=2, name="np.linalg.tensorsolve",
           **{**_LAPACK, "max_dims": 2, "notes": "np.linalg.solve of the reshaped operands "
              "(on the GPU cuBLAS's batched LU where solve runs there)"})
def tensorsolve(a: Any, b: Any, axes: Any = None) -> Tracer:
    # numpy/linalg/_linalg.py::tensorsolve: the unknowns' shape is a's last a.ndim - b.ndim
    # axes (all of a's axes when the two have as many)
    ta, tb = _operand(a), _operand(b)
    an = ta.ndim
    if axes is not None:
        order = list(range(an))
        for k in axes:
            order.remove(k)
            order.insert(an, k)
        ta = ta.transpose(order)
    oldshape = ta.shape[-(an - tb.ndim):]
    prod = int(np.prod(oldshape, dtype=np.int64))
    if ta.size != prod ** 2:
        raise LinAlgError(with_location(
            "Input arrays must satisfy the requirement prod(a.shape[b.ndim:]) == "
            "prod(a.shape[:b.ndim])"))
    return solve(ta.reshape(prod, prod), tb.ravel()).reshape(oldshape)


# numpy.linalg's functions over the ones above: NumPy's own Python code on tracers.
composite(np.linalg.svdvals, calls=['np.linalg.svdvals({0})'], name="np.linalg.svdvals",
          impl=NUMPY, **dict(_LAPACK, notes="NumPy's code over np.linalg.svd (on the GPU "
                             "Jacobi rotations where svd runs there: gpu-spectral-basis)"))
composite(np.linalg.tensorinv, calls=[f'np.linalg.tensorinv(({_SQ})[..., None, :], ind=2)'],
          name="np.linalg.tensorinv", impl=NUMPY,
          **{**_LAPACK, "max_dims": 2, "notes": "NumPy's code over np.linalg.inv (on the GPU "
             "cuBLAS's batched LU where inv runs there)"})


# Complex matrices reach these functions through the complex tracer's dispatch
# (``trace/complex.py`` FUNCTIONS): the same code, on complex tracers (``_call``).
for _func, _fn in ((np.linalg.solve, solve), (np.linalg.inv, inv), (np.linalg.det, det),
                   (np.linalg.slogdet, slogdet), (np.linalg.cholesky, cholesky),
                   (np.linalg.qr, qr), (np.linalg.svd, svd), (np.linalg.eigh, eigh),
                   (np.linalg.eig, eig), (np.linalg.eigvals, eigvals),
                   (np.linalg.eigvalsh, eigvalsh), (np.linalg.pinv, pinv),
                   (np.linalg.matrix_rank, matrix_rank), (np.linalg.lstsq, lstsq),
                   (np.linalg.cond, cond), (np.linalg.tensorsolve, tensorsolve)):
    FUNCTIONS[_func] = _fn
for _func in (np.linalg.svdvals, np.linalg.tensorinv):    # NumPy's code over the above
    numpy_code_for_complex(_func)
