"""What a correct compiled result may be: NumPy's values with error bounds, node by node.

``propagate(graph, inputs, tolerances)`` evaluates a traced graph with NumPy (each node by its
op-table reference, as ``trace.evaluate`` does) and, beside every value, what the compiled
kernels may legitimately return there:

- ``exact``: bit for bit NumPy's value (NaN positions; the sign of zeros; NaN payloads are never
  compared). Integer and bool results are always exact, or unverifiable;
- an interval ``[lo, hi]`` (float results): from the tolerance table where an op is not exact
  (transcendentals: ulps; sums, products, matrix products: summation bounds), and from
  *propagating* earlier intervals: an elementwise op is evaluated at the corners of its inputs'
  intervals (and at the critical points inside: zeros, extrema of sin/cos), so cancellation,
  overflow and ill-conditioning are judged by what NumPy itself computes near the inputs;
- ``top``: unverifiable (anything goes): a discrete result (comparison, floor, cast to int,
  argmax) whose inputs are inexact and straddle a jump, a sum that may overflow in some order,
  a divergence marked "unverifiable" (tracearray.testing.divergences).

The evaluator never needs per-op derivative formulas: corner evaluation is exact for every op
that is monotone in each argument between its critical points, which ops here are, with the
exceptions handled explicitly (tan's poles, arctan2's branch cut, remainder's jumps, power of
a non-positive base, equality tests).
"""
from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..trace.graph import Graph, Node
from ..ops import OPS, Kind
from ..tile import sum_rounding_depth
from .divergences import is_x86_64

F64 = np.dtype(np.float64)
INF = math.inf


class Tolerances(Protocol):
    """The part of the tolerance table the evaluator reads (``compare.TOLERANCES``)."""

    def ulps(self, family: str, dtype: np.dtype) -> int: ...
    def slack(self, family: str, dtype: np.dtype) -> float: ...


@dataclass
class Bound:
    """NumPy's value of one node and what a compiled result may be at each element."""
    value: np.ndarray                 # NumPy's value (the node's dtype and shape)
    exact: np.ndarray                 # bool: must equal ``value`` bit for bit
    top: np.ndarray                   # bool: unverifiable
    lo: np.ndarray | None = None      # float64 interval (float nodes; == value where exact)
    hi: np.ndarray | None = None
    why: str = "exact"                # the rule that made the last node inexact
    # a check of a compiled result where elements are unverifiable one by one but not as a
    # whole (an argsort's tied positions: x[result] must still be NumPy's sorted values):
    # result -> mask of the elements it rejects
    verify: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def is_float(self) -> bool:
        return self.value.dtype.kind == "f"

    def inexact(self) -> np.ndarray:
        return ~self.exact & ~self.top


# ============================================================================================
# Float helpers: ulps, directed rounding into a dtype
# ============================================================================================

def _uint(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def ordered(x: np.ndarray) -> np.ndarray:
    """Floats as integers that are consecutive for consecutive floats (+0.0 and -0.0 are 0)."""
    bits = 8 * x.dtype.itemsize
    x = np.asarray(x)
    u = np.ascontiguousarray(x).view(_uint(x.dtype)).reshape(x.shape).astype(np.uint64)
    mag = (u & np.uint64((1 << (bits - 1)) - 1)).astype(np.int64)
    return np.where((u >> np.uint64(bits - 1)).astype(bool), -mag, mag)


def _from_ordered(o: np.ndarray, dtype: np.dtype) -> np.ndarray:
    bits = 8 * dtype.itemsize
    inf_o = int(ordered(np.array([np.inf], dtype))[0])
    o = np.clip(o, -inf_o, inf_o)
    mag = np.abs(o).astype(np.uint64)
    u = np.where(o < 0, mag | np.uint64(1 << (bits - 1)), mag)
    return u.astype(_uint(dtype)).view(dtype)


def step_ulps(x: np.ndarray, dtype: np.dtype, k: int | np.ndarray) -> np.ndarray:
    """``x`` (representable in ``dtype``) moved ``k`` ulps up (k < 0: down), saturating at
    +-inf; NaN stays NaN. Returned as float64."""
    xd = np.asarray(x).astype(dtype)
    out = _from_ordered(ordered(xd) + np.asarray(k, dtype=np.int64), dtype).astype(F64)
    return np.where(np.isnan(xd), np.nan, out)


def round_into(x: np.ndarray, dtype: np.dtype, up: bool) -> np.ndarray:
    """``x`` (float64) rounded to ``dtype`` towards +inf (``up``) or -inf, as float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.asarray(x, dtype=F64).astype(dtype)
        r64 = r.astype(F64)
    if dtype == F64:
        return r64
    wrong = (r64 < x) if up else (r64 > x)
    if wrong.any():
        r64 = np.where(wrong, step_ulps(r, dtype, 1 if up else -1), r64)
    return r64


def widen(lo: np.ndarray, hi: np.ndarray, dtype: np.dtype, k: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] rounded outwards into ``dtype`` and widened by ``k`` ulps of ``dtype``."""
    lo_d, hi_d = round_into(lo, dtype, up=False), round_into(hi, dtype, up=True)
    if k:
        lo_d, hi_d = step_ulps(lo_d, dtype, -k), step_ulps(hi_d, dtype, k)
    return lo_d, hi_d


def _smallest_subnormal(dtype: np.dtype) -> float:
    """The smallest positive subnormal of a float (or complex) dtype, as a float64."""
    dt = np.dtype(dtype)
    real = np.dtype(dt.char.lower()) if dt.kind == "c" else dt
    return float(np.finfo(real if real.kind == "f" else np.float64).smallest_subnormal)


def _power_of_two_scale(a: np.ndarray) -> np.ndarray:
    """Per matrix of the stack ``a`` (..., m, n): the power of two at or below its largest
    finite magnitude (1.0 for a zero or empty matrix), dividing by which is exact."""
    if a.size == 0:
        return np.ones(a.shape[:-2])
    with np.errstate(all="ignore"):
        top = np.max(np.where(np.isfinite(a), np.abs(a), 0.0), axis=(-2, -1))
        _m, e = np.frexp(top)
        return np.where(top > 0, np.ldexp(1.0, e - 1), 1.0)


def _eps(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).eps)


def _fmax(dtype: np.dtype) -> float:
    return float(np.finfo(dtype).max)


# ============================================================================================
# Construction helpers
# ============================================================================================

def exact_bound(value: Any) -> Bound:
    v = np.array(value)
    b = Bound(v, np.ones(v.shape, bool), np.zeros(v.shape, bool))
    if b.is_float:
        b.lo = v.astype(F64)
        b.hi = b.lo.copy()
    return b


def _finish(value: np.ndarray, exact: np.ndarray, top: np.ndarray, lo: np.ndarray | None,
            hi: np.ndarray | None, why: str) -> Bound:
    """Normalise: broadcast, exact elements carry their value, NaN bounds become top."""
    shape = value.shape
    exact = np.array(np.broadcast_to(exact, shape))
    top = np.array(np.broadcast_to(top, shape))
    if value.dtype.kind != "f":
        return Bound(value, exact & ~top, top | ~exact, None, None, why)
    v64 = value.astype(F64)
    lo = np.array(np.broadcast_to(lo, shape), dtype=F64)
    hi = np.array(np.broadcast_to(hi, shape), dtype=F64)
    bad = ~exact & (np.isnan(lo) | np.isnan(hi))
    top |= bad
    exact &= ~top
    lo = np.where(exact, v64, lo)
    hi = np.where(exact, v64, hi)
    return Bound(value, exact, top, lo, hi, why)


def _bcast(arrays: Sequence[np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    return [np.broadcast_to(a, shape) for a in arrays]


def _any(masks: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, bool)
    for m in masks:
        out |= np.broadcast_to(m, shape)
    return out


def _rows(a: np.ndarray, axes: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    """``a`` with the reduced ``axes`` moved last and flattened: shape ``out_shape + (n,)``
    (``out_shape`` keeps the reduced axes as 1)."""
    n = math.prod(a.shape[ax] for ax in axes)
    moved = np.moveaxis(a, axes, tuple(range(-len(axes), 0))) if axes else a[..., None]
    return moved.reshape(out_shape + (n,))


# ============================================================================================
# The evaluator
# ============================================================================================

# Ops whose float result may differ from NumPy's by the ulps of their accuracy family (the
# registry's ``OpSpec.accuracy``: libm/libdevice vs NumPy's SIMD code); every other float op
# is computed exactly as NumPy computes it (correctly rounded or exact).
TRANSCENDENTAL = frozenset(n for n, s in OPS.items() if not s.accuracy.exact)

_EQUALITY = frozenset({"equal", "not_equal"})


# FFTs run in a library with its own rounding on some targets (cuFFT on the GPU, divergence
# gpu-fft-rounding): each element within FFT_EPS * eps * log2(n) * ||y||_2 of NumPy's, y the
# transform's exact output (||y||_2 = sqrt(n) ||x||_2 before NumPy's normalisation)
FFT_OPS = frozenset({"fft.c2c", "fft.r2c", "fft.c2r"})
FFT_EPS = 4
# Small solves and inverses on the GPU are cuBLAS's batched LU (divergence
# gpu-linalg-rounding): each result element within LU_EPS * n * eps * cond(A) * max|x| of
# NumPy's, per matrix (x the result matrix or vector)
# (and pseudo-inverses from the Jacobi SVD, gpu/least_squares.py: divergence gpu-spectral-basis)
LU_OPS = frozenset({"linalg.solve", "linalg.inv", "linalg.pinv"})
LU_EPS = 8
# ... and determinants read from that LU: each within LU_EPS * n * eps * cond(A) (relative;
# absolute for slogdet's logarithm) plus a few ulps; a sign where that is below 1/2
DET_OPS = frozenset({"linalg.det", "linalg.slogdet"})
# ... and Cholesky and QR factors (a block per matrix, gpu/factorizations.py): within
# LU_EPS * max(m, n) * eps * cond(A) * max|x| per matrix, the zero triangle exactly
FACTOR_OPS = frozenset({"linalg.cholesky", "linalg.qr"})
# ... and symmetric eigenproblems and SVDs by Jacobi rotations (gpu/jacobi.py; divergence
# gpu-spectral-basis): values within LU_EPS * max(m, n) * eps * ||A||_2, vectors checked
# against the decomposition's contract, not NumPy's basis
SPECTRAL_OPS = frozenset({"linalg.eigh", "linalg.eigvalsh", "linalg.svd"})
# ... and least squares from that SVD (gpu/least_squares.py): x within LU_EPS * max(m, n) *
# eps * (cond * max|x| + cond^2 * ||r|| / ||A||), the residuals and singular values within
# the rounding of their sums, the rank exactly (unverifiable where a singular value is within
# that rounding of the cutoff)
LSTSQ_OPS = frozenset({"linalg.lstsq"})
# ... and eigenproblems of nonsymmetric matrices past the block kernels' size from cuSOLVER's
# geev (gpu/dense.py; divergence gpu-eig): the values as a set, each within LU_EPS * n * eps *
# ||A||_2 * kappa of NumPy's (kappa: that eigenvalue's condition number), the vectors by the
# contract (unit columns, A x = r x within LU_EPS * n * eps * ||A||_2, r one of the values)
EIG_OPS = frozenset({"linalg.eig"})
# The GPU's block sort is stable (divergence gpu-sort-ties): NumPy's default kinds order
# equal elements their own way, so +0.0 and -0.0 may trade places in a sort's values and tied
# elements' positions in an argsort are not compared (kind="stable": NumPy's order exactly)
SORT_OPS = frozenset({"sort", "argsort"})
# ... and partitions as that sort (divergence gpu-partition-order): the kth elements are
# NumPy's (a zero's sign free), the rest is checked against partition's contract
PARTITION_OPS = frozenset({"partition", "argpartition"})
# the order statistics the GPU reads from its sorted rows (gpu/sort.py, gpu/quantile.py)
# libm functions whose result for a quiet NaN can be a number (hypot(NaN, inf) = inf,
# pow(NaN, 0) = 1, pow(1, NaN) = 1) and for a signaling NaN is NaN
SIGNAL_SENSITIVE = frozenset({"hypot", "power"})
_QUIET_BIT = {2: 1 << 9, 4: 1 << 22, 8: 1 << 51}


def _condition_numbers(a: np.ndarray) -> np.ndarray:
    """The 2-norm condition number of each matrix of the float64 stack ``a`` (0 for empty
    ones: nothing to bound; inf where NumPy cannot compute it)."""
    with np.errstate(all="ignore"):
        if not a.shape[-1] or not a.shape[-2]:
            return np.zeros(a.shape[:-2])
        try:
            return np.asarray(np.linalg.cond(a))
        except np.linalg.LinAlgError:
            return np.full(a.shape[:-2], np.inf)


def _signaling_nan(x: np.ndarray) -> np.ndarray:
    """Where ``x`` (any dtype) holds a signaling NaN: a NaN whose quiet bit is clear."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.dtype.itemsize not in _QUIET_BIT:
        return np.zeros(x.shape, bool)
    # (np.ascontiguousarray makes a 0-d array 1-d: the reshape keeps the caller's shape)
    bits = np.ascontiguousarray(x).view(_uint(x.dtype)).reshape(x.shape)
    return np.isnan(x) & ((bits & _QUIET_BIT[x.dtype.itemsize]) == 0)


SORTED_STATISTICS = frozenset({"median", "nanmedian", "quantile", "percentile", "nanquantile",
                               "nanpercentile"})
LIBRARY_OPS_CUDA = FFT_OPS | LU_OPS | DET_OPS | FACTOR_OPS | SPECTRAL_OPS | LSTSQ_OPS | \
    EIG_OPS | SORT_OPS | PARTITION_OPS | {"order_statistic", "unique"}


class Evaluator:
    def __init__(self, tolerances: Tolerances, library_ops: frozenset[str] = frozenset()):
        self.tol = tolerances
        self.used: set[str] = set()     # divergence ids whose relaxation was applied
        # external ops the compiled target computes in a library of its own (FFT_OPS on the
        # GPU): their results are NumPy's within that library's accuracy, not bit for bit
        self.library_ops = library_ops

    # --- values -----------------------------------------------------------------------------
    @staticmethod
    def fn(node: Node) -> Callable[..., Any]:
        spec = OPS[node.op]
        if spec.ufunc is not None:
            return spec.ufunc
        attrs = dict(node.attrs)
        return lambda *xs: spec.numpy_ref(*xs, **attrs)

    def value(self, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
        if node.op == "power" and node.dtype.kind in "iu":
            out = self._int_power(*args)
        else:
            out = self.fn(node)(*args)
        return np.asarray(out).astype(node.dtype, copy=False).reshape(node.shape)

    def _quieted(self, node: Node, args: list[Bound], b: Bound) -> Bound:
        """Divergence nan-payload: a kernel may quiet a signaling NaN (float16 -> float32
        in hardware does; LLVM keeps no signal), and where a quiet NaN gives a number
        (hypot with an infinity, power with a zero exponent or a base of one) NumPy's libm
        call on the signaling one gives NaN: such elements are unverifiable. (NumPy's own
        float16 quicksort and heapsort return every NaN as the signaling NaN 0x7c01.)"""
        if node.op not in SIGNAL_SENSITIVE or not b.is_float:
            return b
        signaling = _any([_signaling_nan(a.value) for a in args], node.shape)
        if not signaling.any():
            return b
        self.used.add("nan-payload")
        return Bound(b.value, b.exact & ~signaling, b.top | signaling, b.lo, b.hi,
                     f"{node.op} of a signaling NaN" if b.why == "exact" else b.why)

    def _int_power(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The compiled integer power (divergence int-power-negative-exponent): NumPy raises
        on a negative exponent anywhere in the array, the kernel returns the exact result
        (0, or +-1 for a base of +-1). The elements may be ones a selection or a where=
        leaves out, whose values never reach a result: NumPy's error must not stop the
        evaluation there (soak cpu-2026-12-01-n, program 597)."""
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        negative = b < 0
        if not negative.any():
            return np.power(a, b)
        self.used.add("int-power-negative-exponent")
        out = np.power(a, np.where(negative, 0, b))
        odd = (b % 2) != 0
        exact = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
        return np.where(negative, exact.astype(out.dtype), out)

    # --- the walk ---------------------------------------------------------------------------
    def run(self, graph: Graph, inputs: Sequence[np.ndarray]) -> list[Bound]:
        bounds: dict[Node, Bound] = {}
        for node, value in zip(graph.inputs, inputs):
            bounds[node] = exact_bound(np.asarray(value))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for node in graph.nodes():
                if node in bounds:
                    continue
                spec = OPS[node.op]
                args = [bounds[a] for a in node.args]
                if spec.kind is Kind.SOURCE:
                    bounds[node] = exact_bound(self.value(node, []))
                elif node.op == "where":
                    bounds[node] = self.where(node, args)
                elif spec.kind is Kind.ELEMENTWISE:
                    bounds[node] = self._quieted(node, args, self.elementwise(node, args))
                elif spec.kind is Kind.REDUCE:
                    bounds[node] = self.reduce(node, args[0], _fused_overflow(node, bounds))
                elif spec.kind is Kind.SCAN:
                    bounds[node] = self.scan(node, args[0])
                elif spec.kind is Kind.CONTRACT:
                    bounds[node] = self.matmul(node, *args)
                elif spec.kind is Kind.GATHER:
                    bounds[node] = self.gather(node, args)
                elif spec.kind is Kind.SCATTER:
                    bounds[node] = self.scatter(node, args)
                elif spec.kind is Kind.EXTERNAL:
                    bounds[node] = self.external(node, args)
                else:   # movement, concatenation: the same op on every field
                    bounds[node] = self.structural(node, args)
        return [bounds[o] for o in graph.results]

    # --- movement and concatenation -----------------------------------------------------------
    def structural(self, node: Node, args: list[Bound]) -> Bound:
        f = self.fn(node)

        def field(name: str) -> np.ndarray:
            return np.array(f(*[getattr(a, name) for a in args])).reshape(node.shape)
        value = field("value").astype(node.dtype, copy=False)
        lo = field("lo") if args[0].is_float else None
        hi = field("hi") if args[0].is_float else None
        return Bound(value, field("exact"), field("top"), lo, hi,
                     next((a.why for a in args if a.why != "exact"), "exact"))

    def external(self, node: Node, args: list[Bound]) -> Bound:
        """A library call (ops.external) runs NumPy's own function: on exact operands its
        result is NumPy's. A sort is monotone in every element, so sorted bounds bound the
        sorted values of inexact operands; any other call of an inexact operand (an index
        result, a factorisation) is unverifiable."""
        value = self.value(node, [a.value for a in args])
        known = [a.exact & ~a.top for a in args]
        if all(k.all() for k in known):
            if node.op in self.library_ops and node.op in FFT_OPS:
                return self._library_fft(node, args[0], value)
            if node.op in self.library_ops and node.op in LU_OPS and value.dtype.kind == "f":
                return self._library_lu(node, args[0], value)
            if node.op in self.library_ops and node.op in DET_OPS and value.dtype.kind == "f":
                return self._library_det(node, args[0], value)
            if node.op in self.library_ops and node.op in FACTOR_OPS and \
                    value.dtype.kind == "f" and node.attr("mode") != "raw":
                return self._library_factor(node, args[0], value)
            if node.op in self.library_ops and node.op in LSTSQ_OPS:
                return self._library_lstsq(node, args[0], args[1], value)
            if node.op in self.library_ops and node.op in SPECTRAL_OPS and \
                    value.dtype.kind == "f":
                return self._library_spectral(node, args[0], value)
            if node.op in self.library_ops and node.op in EIG_OPS and \
                    value.dtype.kind == "f":
                return self._library_eig(node, args[0], value)
            if node.op in self.library_ops and node.op in SORT_OPS and \
                    node.attr("kind") != "stable":
                return self._library_sort(node, args[0], value)
            if node.op in self.library_ops and node.op in PARTITION_OPS:
                return self._library_partition(node, args[0], value)
            if node.op in self.library_ops and node.op == "unique" and \
                    node.attr("return_inverse") and not node.attr("return_index") and \
                    not node.attr("equal_nan") and \
                    node.attr("result") == 1 and args[0].value.dtype.kind == "f":
                return self._library_unique_inverse(args[0], value)
            if node.op in self.library_ops and node.op == "unique" and \
                    node.attr("result") == 0 and value.dtype.kind == "f" and \
                    not node.attr("return_index"):
                # the first of equal values in a stable sort, where NumPy's quicksort puts
                # -0.0 or 0.0 first its own way (with return_index it sorts stably too)
                self.used.add("gpu-sort-ties")
                v64 = value.astype(F64)
                return _finish(value, value != 0, np.zeros(value.shape, bool), v64,
                               v64.copy(), "unique: read from a stable sort")
            if node.op in self.library_ops and node.op == "order_statistic" and \
                    node.attr("func") in SORTED_STATISTICS and value.dtype.kind == "f":
                # read from a stable sort: a zero's sign may be another zero's (ties of
                # other values are equal values, wherever they sort)
                self.used.add("gpu-sort-ties")
                v64 = value.astype(F64)
                return _finish(value, value != 0, np.zeros(value.shape, bool), v64,
                               v64.copy(), f"{node.attr('func')}: read from a stable sort")
            return exact_bound(value)
        if node.op == "sort" and args[0].is_float:
            axis = node.attr("axis")
            exact = np.broadcast_to(known[0].all(axis=axis, keepdims=True), node.shape)
            top = np.broadcast_to(args[0].top.any(axis=axis, keepdims=True), node.shape)
            lo = np.sort(args[0].lo, axis=axis)
            hi = np.sort(args[0].hi, axis=axis)
            return _finish(value, exact, top, lo, hi, args[0].why)
        f64 = value.astype(F64) if value.dtype.kind == "f" else None
        return Bound(value, np.zeros(node.shape, bool), np.ones(node.shape, bool), f64,
                     None if f64 is None else f64.copy(), "external")

    def _library_fft(self, node: Node, x: Bound, value: np.ndarray) -> Bound:
        """An FFT of exact operands computed by another library (divergence
        gpu-fft-rounding): NumPy's value within FFT_EPS * eps * log2(n) * sqrt(n) *
        ||x||_2 * NumPy's norm factor, per transform; a transform of a non-finite operand is
        unverifiable."""
        from ..ops.fft import norm_factor
        a = dict(node.attrs)
        n, axis = a["n"], a["axis"]
        xv = x.value.astype(F64)
        pairs = node.op != "fft.r2c" and a.get("pairs", False)
        mag2 = (xv ** 2).sum(axis=-1) if pairs else xv ** 2
        used = n // 2 + 1 if node.op == "fft.c2r" else n
        mag2 = np.take(mag2, np.arange(min(used, mag2.shape[axis])), axis=axis)
        with np.errstate(invalid="ignore", over="ignore"):
            energy = mag2.sum(axis=axis, keepdims=True) * (2 if node.op == "fft.c2r" else 1)
            norm = np.sqrt(energy)
        factor = norm_factor(a.get("norm"), n, node.op == "fft.c2r" or a.get("inverse", False))
        real = value.dtype
        tol = FFT_EPS * _eps(real) * max(1.0, math.log2(n)) * math.sqrt(n) * factor * norm
        # the transform's partial sums reach up to ||x||_1 <= sqrt(n) * ||x||_2 in magnitude:
        # past the dtype's range they may overflow to inf in one library's order and not in
        # the other's (soak gpu-2026-12-07-tenth-b, program 198: +-FLT_MAX operands)
        with np.errstate(over="ignore", invalid="ignore"):
            may_overflow = math.sqrt(n) * norm > float(np.finfo(real).max)
        bad = ~np.isfinite(tol) | may_overflow
        if node.op != "fft.c2r":   # pair results: one tolerance for both parts
            tol, bad = tol[..., None], bad[..., None]
        tol = np.broadcast_to(np.where(bad, 0.0, tol), value.shape)
        top = np.broadcast_to(bad, value.shape).copy()
        v64 = value.astype(F64)
        self.used.add("gpu-fft-rounding")
        return _finish(value, np.zeros(value.shape, bool), top, v64 - tol, v64 + tol,
                       f"{node.op}: another library's FFT (gpu-fft-rounding)")

    def _library_unique_inverse(self, x: Bound, value: np.ndarray) -> Bound:
        """np.unique's inverse with ``equal_nan=False`` read from a stable sort (divergence
        gpu-sort-ties): each NaN is a value of its own, and which NaN element gets which of
        the NaN slots follows the sort's order of the NaNs, NumPy's quicksort's its own.
        The other elements' slots exactly; the NaN elements' slots, as a whole, NumPy's."""
        nan = np.isnan(np.asarray(x.value)).reshape(value.shape)
        if not nan.any():
            return exact_bound(value)
        self.used.add("gpu-sort-ties")
        want = np.sort(value[nan])

        def verify(got: np.ndarray) -> np.ndarray:
            g = np.asarray(got)
            if g.shape != value.shape or not np.array_equal(np.sort(g[nan]), want):
                return nan.copy()
            return np.zeros(value.shape, bool)
        return Bound(value, ~nan, nan, None, None, "unique: NaN slots of a stable sort",
                     verify=verify)

    def _library_partition(self, node: Node, x: Bound, value: np.ndarray) -> Bound:
        """A partition computed as a stable sort (divergence gpu-partition-order): NumPy's
        contract, not its arrangement. At the kth positions NumPy's values (a zero's sign
        free; an argpartition's position there is checked through its value, as ties make
        it free); every row, as a whole, must hold the operand's values (an
        argpartition's: a permutation of the row's positions) with no larger value before a
        kth position and no smaller one after it, in NumPy's order (NaN last)."""
        axis, kth = node.attr("axis"), tuple(node.attr("kth"))
        xv = x.value
        self.used.add("gpu-partition-order")
        n = xv.shape[axis]
        kth = kth if n else ()     # (an empty axis: NumPy does not look at kth)
        at_kth = np.zeros(n, bool)
        at_kth[list(kth)] = True
        at_kth = at_kth.reshape([n if d == axis else 1 for d in range(xv.ndim)])
        at_kth = np.broadcast_to(at_kth, value.shape)
        sv = np.moveaxis(np.sort(xv, axis=axis), axis, -1)

        def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return (a == b) | ((a != a) & (b != b))

        def before_or_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:   # NaN last
            return (a <= b) | (b != b)

        def verify(got: np.ndarray) -> np.ndarray:
            g = np.asarray(got)
            if g.shape != value.shape:
                return np.ones(value.shape, bool)
            if node.op == "argpartition":
                if g.size and (g.min() < 0 or g.max() >= n):
                    return np.ones(value.shape, bool)
                perm = np.all(np.sort(g, axis=axis) == np.arange(n).reshape(
                    [n if d == axis else 1 for d in range(xv.ndim)]), axis=axis,
                    keepdims=True)
                g = np.take_along_axis(xv, g, axis=axis)
            else:
                perm = np.ones([1 if d == axis else m for d, m in enumerate(g.shape)], bool)
            rows = np.moveaxis(g, axis, -1)
            ok = np.all(same(np.sort(rows, axis=-1), sv), axis=-1)
            for k in kth:
                pivot = rows[..., k:k + 1]
                ok &= same(rows[..., k], sv[..., k])
                ok &= np.all(before_or_equal(rows[..., :k], pivot), axis=-1)
                ok &= np.all(before_or_equal(pivot, rows[..., k + 1:]), axis=-1)
            bad = ~np.expand_dims(ok, axis) | ~perm
            return np.broadcast_to(bad, value.shape)
        if node.op == "argpartition":   # positions: through their values (``verify``)
            top = np.ones(value.shape, bool)
            return Bound(value, ~top, top, None, None, "argpartition: a stable sort",
                         verify=verify)
        exact = at_kth & (value != 0) if value.dtype.kind == "f" else at_kth.copy()
        top = ~at_kth
        if value.dtype.kind != "f":
            return Bound(value, exact & ~top, top, None, None, "partition: a stable sort",
                         verify=verify)
        v64 = value.astype(F64)
        b = _finish(value, exact, top, v64, v64.copy(), "partition: a stable sort")
        b.verify = verify
        return b

    def _library_sort(self, node: Node, x: Bound, value: np.ndarray) -> Bound:
        """Another (stable) sort than NumPy's default kind (divergence gpu-sort-ties): a
        sort's zeros may have either sign; an argsort's positions of tied values are
        unverifiable (the values' order, and every untied position, still exact)."""
        axis = node.attr("axis")
        exact = np.ones(value.shape, bool)
        top = np.zeros(value.shape, bool)
        if node.op == "sort":
            if value.dtype.kind != "f":
                return exact_bound(value)
            exact = value != 0
        else:
            sv = np.sort(x.value, axis=axis)
            nan = np.isnan(sv) if sv.dtype.kind == "f" else np.zeros(sv.shape, bool)
            a = np.moveaxis(sv, axis, -1)
            na = np.moveaxis(nan, axis, -1)
            eq = (a[..., 1:] == a[..., :-1]) | (na[..., 1:] & na[..., :-1])
            tied = np.zeros(a.shape, bool)
            tied[..., 1:] |= eq
            tied[..., :-1] |= eq
            top = np.moveaxis(tied, -1, axis)
            exact = ~top
        self.used.add("gpu-sort-ties")
        if node.op == "argsort":
            xv = x.value

            def verify(got: np.ndarray) -> np.ndarray:
                """Each row a permutation whose values are NumPy's sorted values."""
                g = np.asarray(got)
                n = xv.shape[axis]
                if g.shape != xv.shape or (g.size and (g.min() < 0 or g.max() >= n)):
                    return np.ones(value.shape, bool)
                picked = np.take_along_axis(xv, g, axis=axis)
                same = (picked == sv) | ((picked != picked) & (sv != sv))
                perm = (np.sort(g, axis=axis) == np.arange(n).reshape(
                    [n if d == axis % xv.ndim else 1 for d in range(xv.ndim)]))
                return ~same | ~np.all(perm, axis=axis, keepdims=True)
            return Bound(value, exact & ~top, top, None, None, f"{node.op}: a stable sort",
                         verify=verify)
        if value.dtype.kind != "f":
            return Bound(value, exact & ~top, top, None, None, f"{node.op}: a stable sort")
        v64 = value.astype(F64)
        return _finish(value, exact, top, v64, v64.copy(), f"{node.op}: a stable sort")

    def _library_lu(self, node: Node, a: Bound, value: np.ndarray) -> Bound:
        """A solve or inverse computed by another library's LU (divergence
        gpu-linalg-rounding), or a pseudo-inverse from Jacobi's SVD (gpu-spectral-basis):
        NumPy's value within LU_EPS * max(m, n) * eps * cond(A) * max|x| per matrix; a matrix
        whose condition number or result is not finite is unverifiable."""
        av = a.value.astype(F64)
        n = max(av.shape[-2:])
        cond = _condition_numbers(av)
        with np.errstate(all="ignore"):
            v64 = value.astype(F64)
            vector = node.op == "linalg.solve" and value.ndim == av.ndim - 1
            per = (-1,) if vector else (-2, -1)
            big = np.max(np.abs(v64), axis=per, keepdims=True) if v64.size else \
                np.zeros(v64.shape[:len(v64.shape) - len(per)] + (1,) * len(per))
            cond = np.asarray(cond).reshape(np.shape(cond) + (1,) * len(per))
            tol = LU_EPS * max(n, 1) * _eps(value.dtype) * cond * big
        tol = np.broadcast_to(tol, value.shape)
        bad = ~np.isfinite(tol)
        why = "gpu-spectral-basis" if node.op == "linalg.pinv" else "gpu-linalg-rounding"
        self.used.add(why)
        return _finish(value, np.zeros(value.shape, bool), bad, v64 - np.where(bad, 0, tol),
                       v64 + np.where(bad, 0, tol),
                       f"{node.op}: another library's factorisation ({why})")

    def _library_factor(self, node: Node, a: Bound, value: np.ndarray) -> Bound:
        """A Cholesky or QR factor computed in another order than LAPACK's (divergence
        gpu-linalg-rounding): each element within LU_EPS * max(m, n) * eps * cond(A) *
        max|x| of NumPy's, per matrix, x the factor; the triangle NumPy zeroes (L's upper
        one, R's lower one) exactly zero; a matrix whose condition number or factor is not
        finite is unverifiable."""
        av = a.value.astype(F64)
        n = max(av.shape[-2:])
        cond = _condition_numbers(av)
        with np.errstate(all="ignore"):
            v64 = value.astype(F64)
            big = np.max(np.abs(v64), axis=(-2, -1), keepdims=True) if v64.size else \
                np.zeros(v64.shape[:-2] + (1, 1))
            cond = np.asarray(cond).reshape(np.shape(cond) + (1, 1))
            tol = np.broadcast_to(LU_EPS * max(n, 1) * _eps(value.dtype) * cond * big,
                                  value.shape)
        rows, cols = np.indices(value.shape[-2:])
        if node.op == "linalg.qr":          # R (the last result): zero below its diagonal
            last = node.attr("result") == (0 if node.attr("mode") == "r" else 1)
            zero = np.broadcast_to(rows > cols if last else np.zeros_like(rows, bool),
                                   value.shape)
        else:
            zero = np.broadcast_to((cols > rows) if not node.attr("upper") else (rows > cols),
                                   value.shape)
        bad = ~np.isfinite(tol) & ~zero
        tol = np.where(bad | zero, 0.0, tol)
        self.used.add("gpu-linalg-rounding")
        return _finish(value, zero, bad, v64 - tol, v64 + tol,
                       f"{node.op}: another order than LAPACK's (gpu-linalg-rounding)")

    def _library_spectral(self, node: Node, a: Bound, value: np.ndarray) -> Bound:
        """Eigenvalues or singular values (and their vectors) computed by Jacobi rotations
        (divergence gpu-spectral-basis). Values: NumPy's within tol = LU_EPS * max(m, n) *
        eps * ||A||_2 (plus 4 ulps), per matrix. Vectors: unverifiable element by element
        (their signs and the basis of a repeated value's space are free); the result as a
        whole must be orthonormal (within LU_EPS * max(m, n) * eps) and satisfy the
        decomposition with NumPy's values w or s: ||A v - w v|| <= tol for eigenvectors,
        ||A A^T u - s^2 u|| and ||A^T A v - s^2 v|| <= tol * ||A||_2 for singular vectors
        (zero past the k values). A matrix with a non-finite element is unverifiable
        (LAPACK's results for one are NaN, numbers or an error as its code paths fall)."""
        op, which = node.op, node.attr("result")
        av = a.value.astype(F64)
        if op != "linalg.svd":         # the symmetric matrix NumPy reads from one triangle
            low = node.attr("UPLO") != "U"
            tri = np.tril(av) if low else np.triu(av)
            av = tri + np.swapaxes(np.tril(av, -1) if low else np.triu(av, 1), -1, -2)
        elif node.attr("hermitian"):
            av = np.tril(av) + np.swapaxes(np.tril(av, -1), -1, -2)
        m, n = av.shape[-2:]
        eps = _eps(value.dtype)
        finite = np.all(np.isfinite(av), axis=(-2, -1))
        with np.errstate(all="ignore"):
            norm2 = np.where(finite, np.linalg.norm(np.where(np.isfinite(av), av, 0),
                                                    2, axis=(-2, -1)), np.inf) \
                if av.size else np.zeros(av.shape[:-2])
            tol = LU_EPS * max(m, n, 1) * eps * norm2 + \
                4 * _smallest_subnormal(value.dtype)      # per matrix (subnormal values)
            self.used.add("gpu-spectral-basis")
            why = f"{op}: Jacobi rotations (gpu-spectral-basis)"
            vectors = (op == "linalg.eigh" and which == 1) or \
                (op == "linalg.svd" and node.attr("compute_uv") and which != 1)
            if not vectors:
                v64 = value.astype(F64)
                t = np.broadcast_to(tol[..., None], value.shape)
                t = t + 4 * eps * np.abs(v64)
                bad = ~np.isfinite(t)
                t = np.where(bad, 0.0, t)
                return _finish(value, np.zeros(value.shape, bool), bad, v64 - t, v64 + t,
                               why)
            # the vector checks on A scaled by a power of two near its largest magnitude:
            # residuals of a matrix of 1e200 (or its Gram matrix) overflowed in their norms,
            # and of 1e-310 lost to subnormals, rejecting correct vectors
            pow2 = _power_of_two_scale(av)
            av = av / pow2[..., None, None]
            norm2 = norm2 / pow2
            tol = tol / pow2
            if op == "linalg.eigh":
                ref = np.linalg.eigvalsh(np.where(np.isfinite(av), av, 0))
            else:
                ref = np.linalg.svd(np.where(np.isfinite(av), av, 0), compute_uv=False)

        def verify(got: np.ndarray) -> np.ndarray:
            g = np.asarray(got).astype(F64)
            if g.shape != value.shape:
                return np.ones(value.shape, bool)
            with np.errstate(all="ignore"):
                if op == "linalg.svd" and which == 2:
                    g = np.swapaxes(g, -1, -2)          # V^T's rows as columns
                cols = g.shape[-1]
                gram = np.swapaxes(g, -1, -2) @ g
                ortho = np.max(np.abs(gram - np.eye(cols)), axis=(-2, -1), initial=0.0)
                if op == "linalg.eigh":
                    resid = av @ g - g * ref[..., None, :]
                    limit = tol
                else:
                    s2 = np.zeros(g.shape[:-2] + (cols,))
                    s2[..., :ref.shape[-1]] = ref ** 2
                    gram_a = av @ np.swapaxes(av, -1, -2) if which == 0 else \
                        np.swapaxes(av, -1, -2) @ av
                    resid = gram_a @ g - g * s2[..., None, :]
                    limit = tol * norm2
                err = np.max(np.linalg.norm(resid, axis=-2), axis=-1, initial=0.0)
                ok = ((ortho <= LU_EPS * max(m, n, 1) * eps) & (err <= limit)) | ~finite
            return np.broadcast_to(~ok[..., None, None], value.shape)
        v64 = value.astype(F64)
        b = _finish(value, np.zeros(value.shape, bool), np.ones(value.shape, bool), v64,
                    v64.copy(), why)
        b.verify = verify
        return b

    def _library_eig(self, node: Node, a: Bound, value: np.ndarray) -> Bound:
        """Eigenvalues or right eigenvectors of nonsymmetric matrices from another geev
        (cuSOLVER's; divergence gpu-eig), checked as a whole per matrix: the values as a set
        (each within LU_EPS * n * eps * ||A||_2 * kappa_i + 4 ulps of one of NumPy's, and
        each of NumPy's that close to one of them; kappa_i = ||y_i|| ||x_i|| / |y_i^H x_i|,
        the eigenvalue's condition number, from NumPy's vectors), the vectors by the contract
        (unit columns; A x = r x within LU_EPS * n * eps * ||A||_2 for r = x^H A x, and the
        r's NumPy's values as a set, so no eigenvalue's vector is missing). Results are real arrays or (real, imaginary) pairs (``real``). A
        matrix with inf or NaN never gets here (NumPy raises for it)."""
        which, real = node.attr("result"), bool(node.attr("real"))
        av = a.value.astype(F64)
        n = av.shape[-1]
        eps = _eps(value.dtype)
        self.used.add("gpu-eig")
        why = "linalg.eig: cuSOLVER's geev (gpu-eig)"
        with np.errstate(all="ignore"):
            finite = np.all(np.isfinite(av), axis=(-2, -1))
            # values and vectors checked on A scaled by a power of two (exact): the residual
            # norms of a matrix of 1e200 overflowed, of 1e-310 lost to subnormals
            pow2 = _power_of_two_scale(av)
            clean = np.where(np.isfinite(av), av, 0.0) / pow2[..., None, None]
            norm2 = np.linalg.norm(clean, 2, axis=(-2, -1)) if av.size else \
                np.zeros(av.shape[:-2])
            ref_w, ref_v = np.linalg.eig(clean) if av.size else \
                (np.zeros(av.shape[:-1], complex), np.zeros(av.shape, complex))
            ref_w = ref_w.astype(complex)
            try:
                kappa = np.linalg.norm(np.linalg.inv(ref_v.astype(complex)), axis=-1)
            except np.linalg.LinAlgError:     # a defective matrix: unbounded sensitivity
                kappa = np.full(ref_w.shape, np.inf)
            # (+ 4 of the dtype's smallest subnormals: a subnormal matrix's values are
            # rounded to them, whatever the scale the check runs at)
            tol = LU_EPS * max(n, 1) * eps * norm2[..., None] * kappa + \
                4 * eps * np.abs(ref_w) + \
                4 * _smallest_subnormal(value.dtype) / pow2[..., None]

        def same_set(values: np.ndarray) -> np.ndarray:
            """Per matrix: whether each value lies within an eigenvalue of NumPy's tolerance
            and each of NumPy's eigenvalues has a value that close."""
            close = np.abs(values[..., :, None] - ref_w[..., None, :]) <= tol[..., None, :]
            return np.all(np.any(close, axis=-1), axis=-1) & \
                np.all(np.any(close, axis=-2), axis=-1)

        def verify(got: np.ndarray) -> np.ndarray:
            g = np.asarray(got).astype(F64)
            if g.shape != value.shape:
                return np.ones(value.shape, bool)
            g = g.astype(complex) if real else g[..., 0] + 1j * g[..., 1]
            with np.errstate(all="ignore"):
                if which == 0:
                    # (by exponents: a complex division by a subnormal power of two
                    # overflows in its intermediates)
                    k = -(np.frexp(pow2)[1] - 1)[..., None]
                    ok = same_set(np.ldexp(g.real, k) + 1j * np.ldexp(g.imag, k))
                else:
                    norms = np.linalg.norm(g, axis=-2)
                    ax = clean @ g
                    r = np.sum(np.conj(g) * ax, axis=-2)
                    resid = np.linalg.norm(ax - g * r[..., None, :], axis=-2)
                    limit = LU_EPS * max(n, 1) * eps
                    ok = np.all(np.abs(norms - 1) <= limit, axis=-1) & \
                        np.all(resid <= limit * norm2[..., None], axis=-1) & same_set(r)
                ok = ok | ~finite
            return np.broadcast_to(ok.reshape(ok.shape + (1,) * (value.ndim - ok.ndim)) == 0,
                                   value.shape)
        v64 = value.astype(F64)
        b = _finish(value, np.zeros(value.shape, bool), np.ones(value.shape, bool), v64,
                    v64.copy(), why)
        b.verify = verify
        return b

    def _library_lstsq(self, node: Node, a: Bound, b: Bound, value: np.ndarray) -> Bound:
        """np.linalg.lstsq from another SVD than LAPACK's (gpu/least_squares.py, divergence
        gpu-spectral-basis), with d = LU_EPS * max(m, n) * eps: x within d * (cond * max|x| +
        cond^2 * ||r|| / s_1) per column (cond = s_1 over the smallest singular value kept, r
        NumPy's residual); each residual sum within 2 ||r|| e + e^2, e = d * (||b|| + s_1
        ||x||); singular values within d * s_1 + 4 ulps; the rank exact. Everything is
        unverifiable when a singular value lies within d * s_1 of the cutoff (the rank is then
        either) or the operands are not finite."""
        which = node.attr("result")
        av, bv = a.value.astype(F64), b.value.astype(F64)
        if av.size == 0 or bv.size == 0:     # (the host's LAPACK: the kernel takes none)
            return exact_bound(value)
        m, n = av.shape
        b2 = bv.reshape(m, -1)
        eps = _eps(value.dtype) if value.dtype.kind == "f" else _eps(a.value.dtype)
        d = LU_EPS * max(m, n, 1) * eps
        rcond = node.attr("rcond")
        rcond = float(np.finfo(F64).eps) * max(m, n) if rcond is None else rcond
        self.used.add("gpu-spectral-basis")
        why = "linalg.lstsq: another SVD (gpu-spectral-basis)"
        with np.errstate(all="ignore"):
            finite = bool(np.isfinite(av).all() and np.isfinite(bv).all())
            s = np.linalg.svd(av, compute_uv=False) if finite and av.size else np.zeros(0)
            s1 = s[0] if s.size else 0.0
            cut = rcond * s1
            near = bool(np.any(np.abs(s - cut) <= d * s1 + 4 * eps * cut))
            if not finite or near or value.dtype.kind != "f":
                if value.dtype.kind != "f" and finite and not near:
                    return exact_bound(value)         # the rank
                top = np.ones(value.shape, bool)
                if value.dtype.kind != "f":
                    return Bound(value, ~top, top, None, None, why)
                v64 = value.astype(F64)
                return _finish(value, ~top, top, v64, v64.copy(), why)
            kept = s[s > cut]
            cond = s1 / kept[-1] if kept.size else 0.0
            x_ref = np.linalg.lstsq(av, b2, rcond=rcond)[0]
            r = b2 - av @ x_ref
            rn = np.linalg.norm(r, axis=0)
            v64 = value.astype(F64)
            if which == 0:
                big = np.max(np.abs(x_ref), axis=0) if x_ref.size else np.zeros(b2.shape[1])
                tol = d * (cond * big + cond ** 2 * rn / (s1 if s1 else 1.0))
                tol = np.broadcast_to(tol, (n, b2.shape[1])).reshape(value.shape)
            elif which == 1:
                e = d * (np.linalg.norm(b2, axis=0) + s1 * np.linalg.norm(x_ref, axis=0))
                tol = (2 * rn * e + e * e)[:value.size].reshape(value.shape)
            else:
                tol = np.full(value.shape, d * s1)
            tol = tol + 4 * eps * np.abs(v64)
            bad = ~np.isfinite(tol)
            tol = np.where(bad, 0.0, tol)
        return _finish(value, np.zeros(value.shape, bool), bad, v64 - tol, v64 + tol, why)

    def _library_det(self, node: Node, a: Bound, value: np.ndarray) -> Bound:
        """A determinant (or slogdet) read from another library's LU (divergence
        gpu-linalg-rounding): relative to NumPy's determinant within LU_EPS * n * eps *
        cond(A) plus 4 ulps (a logarithm within that much, absolutely); a sign exact where
        that bound is below 1/2, else unverifiable, as is every value of a matrix whose
        condition number is not finite (a singular one's 0 and -inf included)."""
        av = a.value.astype(F64)
        n = av.shape[-1]
        eps = _eps(value.dtype)
        cond = _condition_numbers(av)
        with np.errstate(all="ignore"):
            rel = np.broadcast_to(LU_EPS * max(n, 1) * eps * np.asarray(cond), value.shape)
            v64 = value.astype(F64)
            sure = np.isfinite(rel) & (rel < 0.5)
            self.used.add("gpu-linalg-rounding")
            why = f"{node.op}: another library's LU (gpu-linalg-rounding)"
            if node.op == "linalg.slogdet" and node.attr("result") == 0:   # the sign
                return _finish(value, sure, ~sure, v64, v64.copy(), why)
            if node.op == "linalg.slogdet":
                tol = rel + 4 * eps * np.abs(v64)
            else:
                tol = (rel + 4 * eps) * np.abs(v64)
            bad = ~sure | ~np.isfinite(tol)
            tol = np.where(bad, 0.0, tol)
        return _finish(value, np.zeros(value.shape, bool), bad, v64 - tol, v64 + tol, why)

    def gather(self, node: Node, args: list[Bound]) -> Bound:
        """The operand's bounds read at NumPy's positions (the index arrays' values); where
        an index is not exact, the element read is not known: unverifiable."""
        f = self.fn(node)
        x, indices = args[0], args[1:]
        positions = [a.value for a in indices]

        def field(name: str) -> np.ndarray:
            return np.array(f(getattr(x, name), *positions)).reshape(node.shape)
        value = field("value").astype(node.dtype, copy=False)
        lo = field("lo") if x.is_float else None
        hi = field("hi") if x.is_float else None
        top = field("top")
        known = np.logical_and.reduce([a.exact & ~a.top for a in indices])
        if not known.all():
            at, nb = node.attr("at"), indices[0].value.ndim
            rest = node.ndim - nb
            top = top | ~known.reshape((1,) * at + known.shape + (1,) * (rest - at))
        return Bound(value, field("exact") & ~top, top, lo, hi, x.why)

    def scatter(self, node: Node, args: list[Bound]) -> Bound:
        """An assignment moves every field as it moves the values (the last write wins in
        each); ``ufunc.at`` combines in NumPy's order with NumPy's rounding, so an element is
        exact where it and every contribution to it were, unverifiable elsewhere. Indices
        that are not exact leave the written positions unknown: all unverifiable."""
        attrs = dict(node.attrs)
        k = len(attrs["axes"])
        x, indices = args[0], args[1:1 + k]
        vals = args[1 + k] if len(args) > 1 + k else None
        positions = [a.value for a in indices]
        ref = OPS[node.op].numpy_ref

        def put(xf: np.ndarray, vf: np.ndarray | None, **override: Any) -> np.ndarray:
            a = dict(attrs, **override)
            out = ref(xf, *positions, *([vf] if vf is not None else []), **a)
            return np.asarray(out).reshape(node.shape)

        value = put(x.value, vals.value if vals is not None else None).astype(node.dtype)
        known = np.logical_and.reduce([(a.exact & ~a.top).all() for a in indices])
        if not known:
            return Bound(value, np.zeros(node.shape, bool), np.ones(node.shape, bool),
                         *( (value.astype(F64), value.astype(F64)) if x.is_float else ()),
                         why="scatter")
        if attrs["combine"] is None:
            lo = put(x.lo, vals.lo, combine=None) if x.is_float else None
            hi = put(x.hi, vals.hi, combine=None) if x.is_float else None
            return Bound(value, put(x.exact, vals.exact, combine=None),
                         put(x.top, vals.top, combine=None), lo, hi,
                         vals.why if vals.why != "exact" else x.why)
        from ..ops.indexing import gather_shape
        v_shape = gather_shape([x.value.shape, np.shape(positions[0])], attrs)
        touched = put(np.zeros(node.shape, bool), np.ones(v_shape, bool), combine=None,
                      loop=())
        if attrs.get("order_free") and x.is_float and vals is not None:
            return self._order_free_sum(node, x, vals, put, v_shape, touched, value)
        ok = np.ones(node.shape, bool)
        if vals is not None:
            ok = put(ok, vals.exact & ~vals.top, combine="logical_and", loop=("?", "?", "?"))
        good = x.exact & ~x.top & ok
        exact = np.where(touched, good, x.exact)
        top = np.where(touched, ~good, x.top)
        lo = hi = None
        if x.is_float:
            lo = np.where(touched, value.astype(F64), x.lo)
            hi = np.where(touched, value.astype(F64), x.hi)
        return Bound(value, exact, top, lo, hi, "scatter" if top.any() else x.why)

    def _order_free_sum(self, node: Node, x: Bound, vals: Bound, put: Callable,
                        v_shape: tuple, touched: np.ndarray, value: np.ndarray) -> Bound:
        """An order-free ``add.at`` (reduceat's segments: ``scatter(order_free=dtype)``):
        each touched element is a sum of its start and its k contributions, computed in
        order in the node's dtype where NumPy sums them in its own order in ``dtype``'s
        precision (float32 data summed in float64 here): bounded as a reduction's sum is
        (``_sum``: the terms' intervals added), with slack for NumPy's d(k) roundings in
        ``dtype`` and the in-order sum's k - 1 in the node's dtype; elements not touched
        are x's."""
        dt = node.dtype
        data_dt = np.dtype(node.attr("order_free"))

        def total(a: np.ndarray, start: np.ndarray) -> np.ndarray:
            return put(start.astype(F64), np.broadcast_to(a, v_shape).astype(F64),
                       combine="add", loop=("d", "d", "d"))

        def tally(a: np.ndarray, start: np.ndarray) -> np.ndarray:
            return put(start, np.broadcast_to(a, v_shape), combine="logical_or",
                       loop=("?", "?", "?"))

        ex_v, ex_x = vals.exact & ~vals.top, x.exact & ~x.top
        fin_v = np.isfinite(vals.lo) & np.isfinite(vals.hi)
        fin_x = np.isfinite(x.lo) & np.isfinite(x.hi)
        count = total(np.ones(v_shape), np.ones(node.shape))
        mag = total(np.where(fin_v, np.maximum(np.abs(vals.lo), np.abs(vals.hi)), 0.0),
                    np.where(fin_x, np.maximum(np.abs(x.lo), np.abs(x.hi)), 0.0))
        s_lo = total(np.where(fin_v, vals.lo, 0.0), np.where(fin_x, x.lo, 0.0))
        s_hi = total(np.where(fin_v, vals.hi, 0.0), np.where(fin_x, x.hi, 0.0))
        v64, x64 = vals.value.astype(F64), x.value.astype(F64)
        nan_c = tally(ex_v & np.isnan(v64), ex_x & np.isnan(x64))
        posinf = tally(ex_v & (v64 == INF), ex_x & (x64 == INF))
        neginf = tally(ex_v & (v64 == -INF), ex_x & (x64 == -INF))
        inex_inf = tally(~ex_v & ~fin_v & ~vals.top, ~ex_x & ~fin_x & ~x.top)
        top_in = tally(vals.top, x.top)
        depth = np.vectorize(sum_rounding_depth, otypes=[np.int64])(count.astype(np.int64))
        rate = depth * _eps(data_dt) + (count - 1) * _eps(dt)    # (roundings x eps)
        slack = self.tol.slack("sum", data_dt) * rate * mag
        risk = (mag * (1 + 4 * rate) >= _fmax(data_dt)) | inex_inf
        nan_res = nan_c | (posinf & neginf)
        inf_res = (posinf ^ neginf) & ~nan_res & ~risk
        lo_r, hi_r = widen(s_lo - slack, s_hi + slack, dt, 1)
        self.used.add("float-sum-reassociation")
        summed = _finish(value, nan_res | inf_res, top_in | (risk & ~nan_res), lo_r, hi_r,
                         "order-free sum (reduceat's segments)")
        return Bound(value, np.where(touched, summed.exact, x.exact),
                     np.where(touched, summed.top, x.top),
                     np.where(touched, summed.lo, x.lo), np.where(touched, summed.hi, x.hi),
                     summed.why if touched.any() else x.why)

    # --- elementwise ----------------------------------------------------------------------------
    def _candidates(self, b: Bound, dtype: np.dtype) -> list[np.ndarray]:
        """Input values to evaluate the op at: the interval's ends (rounded inwards into the
        operand's dtype: the compiled operand is a value of that dtype) and, where the interval
        holds zero, +0.0 and -0.0 (critical points of abs, square, 1/x, copysign, ...)."""
        inex = b.inexact()
        if not b.is_float or not inex.any():
            return [b.value]
        lo = np.where(inex, round_into(b.lo, dtype, up=True), b.value).astype(dtype)
        hi = np.where(inex, round_into(b.hi, dtype, up=False), b.value).astype(dtype)
        out = [lo, hi]
        z = inex & (b.lo <= 0) & (b.hi >= 0)
        if z.any():
            out += [np.where(z, dtype.type(0.0), lo), np.where(z, dtype.type(-0.0), lo)]
        return out

    def elementwise(self, node: Node, args: list[Bound]) -> Bound:
        if node.op == "bitcast":
            return self._bitcast(node, args[0])
        op, shape, dt = node.op, node.shape, node.dtype
        in_dts = [a.dtype for a in node.args]
        value = self.value(node, [a.value for a in args])
        top = _any([a.top for a in args], shape)
        inex_in = _any([a.inexact() for a in args], shape)
        family = OPS[op].accuracy.family
        transcendental = family != "exact" and dt.kind == "f"
        why = "exact"
        if dt.kind == "f":
            v64 = value.astype(F64)
            lo, hi = v64.copy(), v64.copy()
            exact = ~inex_in.copy()
            if transcendental:
                exact &= np.isnan(v64)
                why = f"{op}: {family} (±{self.tol.ulps(family, dt)} ulp)"
                self.used.add("transcendental-ulps")
            if "fmax-fmin-signed-zero" in OPS[op].divergences and \
                    dt in (np.dtype(np.float32), F64):
                x, y = _bcast([args[0].value, args[1].value], shape)
                tie = (x == 0) & (y == 0) & (np.signbit(x) != np.signbit(y)) & ~inex_in
                if tie.any():
                    exact &= ~tie   # [-0.0, +0.0]: the sign is not compared
                    self.used.add("fmax-fmin-signed-zero")
            if op in ("maximum", "minimum"):
                # np.clip with scalar bounds (traced as maximum/minimum) may return either
                # zero of a tie (divergence clip-signed-zero): the result is [-0.0, +0.0],
                # so an op reading its sign afterwards (signbit, copysign, 1/x) sees both.
                x, y = _bcast([args[0].value, args[1].value], shape)
                tie = (x == 0) & (y == 0) & (np.signbit(x) != np.signbit(y)) & ~inex_in
                if tie.any():
                    exact &= ~tie
                    self.used.add("clip-signed-zero")
        else:
            exact = np.ones(shape, bool)
            lo = hi = None
        if op == "cast" and dt.kind in "iu" and in_dts[0].kind == "f":
            top |= self._float_to_int_unverifiable(args[0], dt, shape)
        if op in ("signbit", "copysign"):
            # The sign bit of a NaN is not promised (divergence nan-payload): signbit(NaN)
            # and copysign(x, NaN) are unverifiable.
            nan_sign = np.broadcast_to(np.isnan(args[-1].value) if args[-1].is_float
                                       else np.zeros((), bool), shape)
            if nan_sign.any():
                top |= nan_sign
                self.used.add("nan-payload")
        if op == "reciprocal" and dt.kind in "iu" and not is_x86_64():
            zero = np.broadcast_to(args[0].value == 0, shape)
            if zero.any():
                top |= zero
                self.used.add("float-to-int-cast")

        if inex_in.any():
            cands = [self._candidates(a, d) for a, d in zip(args, in_dts)]
            f = self.fn(node)
            results = [np.broadcast_to(np.asarray(f(*c)).astype(dt, copy=False), shape)
                       for c in itertools.product(*cands)]
            sel = inex_in & ~top
            if dt.kind == "f":
                lo, hi, exact, new_top = self._float_corners(op, node, args, results, sel,
                                                             lo, hi, exact, cands)
                top |= new_top
            else:
                same = np.ones(shape, bool)
                for r in results[1:]:
                    same &= r == results[0]
                same &= results[0] == value
                if op in _EQUALITY:
                    same &= ~self._overlap(args, shape)
                if op == "cast" and in_dts[0].kind == "f" and dt.kind in "iu":
                    same &= self._in_int_range(cands[0], dt, shape)
                top |= sel & ~same
            if why == "exact":
                why = f"{op}: evaluated over its inputs' error intervals"
        if transcendental:
            k = self.tol.ulps(family, dt)
            lo, hi = widen(lo, hi, dt, k)
        if op == "fma":
            lo, hi, exact, top = self._fused_or_not(args, shape, dt, value, lo, hi, exact, top)
        return _finish(value, exact, top, lo, hi, why)

    def _fused_or_not(self, args: list[Bound], shape: tuple[int, ...], dt: np.dtype,
                      value: np.ndarray, lo: np.ndarray, hi: np.ndarray, exact: np.ndarray,
                      top: np.ndarray):
        """An fma (complex multiplication) also allows the unfused a * b + c: NumPy's complex
        loops fuse on contiguous and strided operands and not on negative strides
        (divergence complex-rounding). Where the two differ in kind (an overflowing product:
        NaN unfused, an infinity fused) the element is unverifiable."""
        a, b, c = _bcast([x.value for x in args], shape)
        with np.errstate(all="ignore"):
            plain = (a * b + c).astype(dt)
        differ = (plain != value) & ~(np.isnan(plain) & np.isnan(value))
        # A subnormal product or operand has lost most of its digits: which of the values
        # a complex product's order gives (NumPy folds np.prod of complex values one by
        # one; the graph's order is its own) is not determined by eps-sized rounding
        # (soak cpu-2026-12-07-tenth-final, program 2317): unverifiable
        # So has a product with an infinite or NaN part: inf * 0 and inf - inf make NaN in
        # one order and not in another (soak cpu-2026-12-07-tenth-reread, program 180)
        tiny = float(np.finfo(dt).tiny)
        sub = _any([np.broadcast_to(((np.abs(v.astype(F64)) < tiny) & (v != 0)) |
                                    ~np.isfinite(v), shape)
                    for v in (a, b, value)], shape)
        top = top | sub
        if sub.any():
            self.used.add("complex-rounding")
        if not differ.any():
            return lo, hi, exact & ~sub, top
        self.used.add("complex-rounding")
        p64, v64 = plain.astype(F64), value.astype(F64)
        # finite, infinite or NaN (an overflowing product: inf - inf is NaN unfused, the fused
        # product's exact value keeps an infinity: soak cpu-2026-12-07-tenth, program 1255)
        kind = (np.isfinite(p64) != np.isfinite(v64)) | (np.isnan(p64) != np.isnan(v64))
        top = top | (differ & kind)
        lo = np.where(differ, np.fmin(lo, p64), lo)
        hi = np.where(differ, np.fmax(hi, p64), hi)
        return lo, hi, exact & ~differ, top

    def _float_corners(self, op: str, node: Node, args: list[Bound], results: list[np.ndarray],
                       sel: np.ndarray, lo: np.ndarray, hi: np.ndarray, exact: np.ndarray,
                       cands: list[list[np.ndarray]]):
        shape = node.shape
        r = np.stack([x.astype(F64) for x in results])
        nan = np.isnan(r)
        any_nan, all_nan = nan.any(0), nan.all(0)
        rlo = np.where(all_nan, np.nan, np.nanmin(np.where(nan, np.inf, r), axis=0))
        rhi = np.where(all_nan, np.nan, np.nanmax(np.where(nan, -np.inf, r), axis=0))
        new_top = sel & any_nan & ~all_nan
        lo = np.where(sel, rlo, lo)
        hi = np.where(sel, rhi, hi)
        exact = np.where(sel, all_nan, exact)     # all corners NaN: certainly NaN
        hint = OPS[op].bounds
        if hint is not None and hint.critical is not None:
            a = args[0]
            inex = np.broadcast_to(a.inexact(), shape)
            a_lo, a_hi = _bcast([a.lo, a.hi], shape)
            crossed, value = _periodic_points(hint.shift, a_lo, a_hi)
            crossed &= inex
            if hint.critical == "poles":
                new_top |= sel & crossed        # a pole inside the interval
            else:
                # An extremum inside the interval: the result reaches its value there (+1 or
                # -1; value 0: several extrema or an unreliable count, both ends).
                lo = np.where(sel & crossed & (value <= 0), -1.0, lo)
                hi = np.where(sel & crossed & (value >= 0), 1.0, hi)
        elif hint is not None and hint.special == "power-base":
            b, e = args
            b_lo = np.broadcast_to(np.where(b.exact, b.value.astype(F64), b.lo), shape)
            b_inex = np.broadcast_to(b.inexact(), shape)
            e_inex = np.broadcast_to(e.inexact(), shape)
            new_top |= sel & ((b_inex & ~(b_lo > 0)) | (e_inex & ~(b_lo > 0)))
        elif hint is not None and hint.special == "atan2-cut":
            y, x = args
            x_lo = np.broadcast_to(np.where(x.exact, x.value.astype(F64), x.lo), shape)
            y_lo, y_hi = _bcast([np.where(y.exact, y.value.astype(F64), y.lo),
                                 np.where(y.exact, y.value.astype(F64), y.hi)], shape)
            new_top |= sel & (x_lo <= 0) & (y_lo <= 0) & (y_hi >= 0)   # branch cut / origin
        elif hint is not None and hint.jump is not None:
            jump = hint.jump
            own = jump is OPS[op].ufunc
            # A remainder's quotient in float64: in the operands' own dtype it may round to
            # the same integer on both sides of a jump (float16 127 / -3.625 and 127 / -3.629
            # are both -35.0; found by the soak: seed cpu-2026-12-02-e, program 1146)
            qs = [np.broadcast_to(np.asarray(jump(*(c if own else [np.asarray(x, F64)
                                                                     for x in c])))
                                  .astype(F64), shape)
                  for c in itertools.product(*cands)]
            same = np.ones(shape, bool)
            for q in qs[1:]:
                same &= (q == qs[0]) | (np.isnan(q) & np.isnan(qs[0]))
            if not own:   # (floor_divide is its own jump: its corners)
                # An overflowing quotient (a / b = +-inf at every corner) hides the jumps of
                # the remainder in between (found by the soak: seed 1, program 6316).
                same &= np.isfinite(qs[0])
                new_top |= sel & ~same          # the quotient jumps inside the box
        return lo, hi, exact, new_top

    @staticmethod
    def _overlap(args: list[Bound], shape: tuple[int, ...]) -> np.ndarray:
        """Where two float operands' intervals overlap (an equality test is then uncertain)."""
        a, b = args
        if not (a.is_float and b.is_float):
            return np.zeros(shape, bool)
        a_lo, a_hi, b_lo, b_hi = _bcast([a.lo, a.hi, b.lo, b.hi], shape)
        inex = np.broadcast_to(a.inexact(), shape) | np.broadcast_to(b.inexact(), shape)
        return inex & (a_lo <= b_hi) & (b_lo <= a_hi)

    @staticmethod
    def _in_int_range(cands: list[np.ndarray], dt: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        info = np.iinfo(dt)
        ok = np.ones(shape, bool)
        for c in cands:
            c64 = np.broadcast_to(c.astype(F64), shape)
            ok &= (c64 > float(info.min) - 1) & (c64 < float(info.max) + 1)
        return ok

    def _float_to_int_unverifiable(self, a: Bound, dt: np.dtype,
                                   shape: tuple[int, ...]) -> np.ndarray:
        """Exact float->int cast inputs whose result is platform dependent (divergence
        float-to-int-cast): NaN/inf/out of range off x86-64; beyond (-2**31, 2**32) for
        uint32 everywhere."""
        v = np.broadcast_to(a.value.astype(F64), shape)
        info = np.iinfo(dt)
        if not is_x86_64():
            bad = ~((v > float(info.min) - 1) & (v < float(info.max) + 1))
        elif dt == np.dtype(np.uint32):
            bad = ~((v > -2.0**31) & (v < 2.0**32))
        else:
            return np.zeros(shape, bool)
        bad &= np.broadcast_to(a.exact, shape)
        if bad.any():
            self.used.add("float-to-int-cast")
        return bad

    def where(self, node: Node, args: list[Bound]) -> Bound:
        shape, dt = node.shape, node.dtype
        c, x, y = args
        value = self.value(node, [a.value for a in args])
        cv, ct = _bcast([c.value, c.top], shape)
        xv, yv, xe, ye, xt, yt = _bcast([x.value, y.value, x.exact, y.exact, x.top, y.top], shape)
        exact = np.where(cv, xe, ye)
        top = np.where(cv, xt, yt)
        both_exact_same = xe & ye & ((xv == yv) & (np.signbit(xv) == np.signbit(yv))
                                     if dt.kind == "f" else (xv == yv))
        if dt.kind == "f":
            both_exact_same |= xe & ye & np.isnan(xv) & np.isnan(yv)
        lo = hi = None
        if dt.kind == "f":
            xl, xh, yl, yh = _bcast([x.lo, x.hi, y.lo, y.hi], shape)
            lo = np.where(cv, xl, yl)
            hi = np.where(cv, xh, yh)
            lo = np.where(ct, np.fmin(xl, yl), lo)
            hi = np.where(ct, np.fmax(xh, yh), hi)
            # a NaN on either side under an uncertain condition: unverifiable
            top = np.where(ct, xt | yt | (~both_exact_same & (np.isnan(xv) | np.isnan(yv))),
                           top)
        else:
            top = np.where(ct, xt | yt | ~both_exact_same, top)
        exact = np.where(ct, both_exact_same, exact)
        why = next((a.why for a in (x, y) if a.why != "exact"), "exact")
        return _finish(value, exact, top, lo, hi, why)

    def _bitcast(self, node: Node, a: Bound) -> Bound:
        """x.view(dtype): the same bits, so exact where x is exact; an interval of floats
        says nothing of their bits (unverifiable), and neither does a NaN, whose payload
        and sign are the hardware's (divergence nan-payload)."""
        value = self.value(node, [a.value])
        nan = np.isnan(a.value) if a.value.dtype.kind == "f" else np.zeros(node.shape, bool)
        src = node.args[0]
        while OPS[src.op].kind is Kind.MOVEMENT or src.op == "bitcast":   # elements moved
            src = src.args[0]
        if src.op in ("input", "constant"):     # NaNs read, not computed: their own bits
            nan = np.zeros(node.shape, bool)
        if nan.any():
            self.used.add("nan-payload")
        top = a.top | ~a.exact | nan
        v64 = value.astype(F64) if node.dtype.kind == "f" else None
        return _finish(value, ~top, top, v64, v64, "bitcast: the same bits")

    # --- reductions ----------------------------------------------------------------------------
    def reduce(self, node: Node, a: Bound, overflow: np.ndarray | None = None) -> Bound:
        """``overflow``: terms that are products whose factors are finite but which rounded
        to an infinity (``_fused_overflow``): known infinite only when NumPy rounds the
        products alone, as it may not."""
        op, shape, dt = node.op, node.shape, node.dtype
        axes = tuple(node.attr("axes"))
        value = self.value(node, [a.value])
        top = _rows(a.top, axes, shape).any(-1)
        n = _rows(a.top, axes, shape).shape[-1]
        reducer = OPS[op].reducer
        if reducer.index is not None:
            return self._arg_reduce(op, a, axes, shape, value, top)
        if dt.kind != "f":
            return _finish(value, ~top, top, None, None, "exact")
        ex = _rows(a.exact, axes, shape)
        vals = _rows(a.value.astype(F64), axes, shape)
        lo, hi = _rows(a.lo, axes, shape), _rows(a.hi, axes, shape)
        nan_c = (ex & np.isnan(vals)).any(-1)
        combine = reducer.combine_op
        if combine in ("maximum", "minimum"):
            return self._max_min("max" if combine == "maximum" else "min", ex, vals, lo, hi,
                                 nan_c, value, top)
        if combine in ("fmax", "fmin"):
            return self._fmax_fmin("max" if combine == "fmax" else "min", ex, vals, lo, hi,
                                   value, top)
        fin = np.isfinite(lo) & np.isfinite(hi)
        inex_inf = (~ex & ~fin & ~_rows(a.top, axes, shape)).any(-1)
        if overflow is not None and combine == "add":
            ov = _rows(overflow, axes, shape)
            inex_inf |= ov.any(-1)
            ex = ex & ~ov
        posinf = (ex & (vals == INF)).any(-1)
        neginf = (ex & (vals == -INF)).any(-1)
        if combine == "add":
            return self._sum(dt, n, fin, lo, hi, nan_c, posinf, neginf, inex_inf, value, top)
        if combine == "multiply":
            return self._prod(dt, n, ex, fin, lo, hi, vals, nan_c, posinf | neginf, inex_inf,
                              value, top)
        raise AssertionError(f"no bound rule for the float reduction {op}")

    def _sum(self, dt, n, fin, lo, hi, nan_c, posinf, neginf, inex_inf, value, top,
             family: str = "sum") -> Bound:
        mag = np.where(fin, np.maximum(np.abs(lo), np.abs(hi)), 0.0)
        scale = mag.sum(-1) if family == "sum" else np.cumsum(mag, -1)
        # a sum's terms go through at most sum_rounding_depth(n) roundings (blocks combined
        # pairwise, tile/__init__.py); a cumsum's k-th output through k - 1, in order
        count = sum_rounding_depth(n) if family == "sum" else np.arange(1, mag.shape[-1] + 1)
        s_lo = np.where(fin, lo, 0.0)
        s_hi = np.where(fin, hi, 0.0)
        s_lo = s_lo.sum(-1) if family == "sum" else np.cumsum(s_lo, -1)
        s_hi = s_hi.sum(-1) if family == "sum" else np.cumsum(s_hi, -1)
        eps = _eps(dt)
        slack = self.tol.slack("sum", dt) * count * eps * scale
        risk = (scale * (1 + 4 * count * eps) >= _fmax(dt)) | inex_inf
        nan_res = nan_c | (posinf & neginf)
        inf_res = (posinf ^ neginf) & ~nan_res & ~risk
        lo_r, hi_r = widen(s_lo - slack, s_hi + slack, dt, 1)
        self.used.add("float-sum-reassociation")
        if dt == np.dtype(np.float16):
            self.used.add("float16-accumulation")
        return _finish(value, nan_res | inf_res, top | (risk & ~nan_res), lo_r, hi_r,
                       f"{family}: blocked pairwise (±{self.tol.slack('sum', dt):g}·d(n)·eps·Σ|x|)"
                       if family == "sum" else
                       f"{family}: in order (±{self.tol.slack('sum', dt):g}·k·eps·Σ|x|)")

    def _prod(self, dt, n, ex, fin, lo, hi, vals, nan_c, inf_c, inex_inf, value, top,
              family: str = "prod") -> Bound:
        """Products: sign and magnitude bounds while no partial product (in any order) can
        overflow or lose precision to underflow; otherwise unverifiable."""
        scan = family != "prod"
        finfo = np.finfo(dt)
        mag_hi = np.where(fin, np.maximum(np.abs(lo), np.abs(hi)), 0.0)
        contains0 = fin & (lo <= 0) & (hi >= 0)
        mag_lo = np.where(fin & ~contains0, np.minimum(np.abs(lo), np.abs(hi)), 1.0)
        with np.errstate(divide="ignore"):
            up = np.where(mag_hi > 1, np.log2(np.maximum(mag_hi, 1.0)), 0.0)
            down = np.where(mag_lo < 1, np.log2(np.where(mag_lo > 0, mag_lo, 1.0)), 0.0)
        acc = (lambda x: np.cumsum(x, -1)) if scan else (lambda x: x.sum(-1))
        accb = (lambda x: np.logical_or.accumulate(x, -1)) if scan else (lambda x: x.any(-1))
        p_up, p_down = acc(up), acc(down)
        count = np.arange(1, vals.shape[-1] + 1) if scan else n
        over = p_up >= math.log2(float(finfo.max)) - 1
        under = p_down <= math.log2(float(finfo.tiny)) + 1
        zero_c = accb(ex & (vals == 0))
        nan_c = accb(ex & np.isnan(vals)) if scan else nan_c
        inf_c = accb(ex & np.isinf(vals)) if scan else inf_c
        inex_inf = accb(~ex & ~fin) if scan else inex_inf
        nan_res = nan_c | (zero_c & inf_c)
        risk = inex_inf | over | (under & ~zero_c) | (under & inf_c)
        inf_res = inf_c & ~zero_c & ~nan_res & ~risk
        # A zero times an element that may be infinite may be NaN (soak seed 1, program
        # 17674: cumprod over [0, sinh(284) = inf-or-max])
        zero_res = zero_c & ~inf_c & ~inex_inf & ~nan_res & ~over
        risk &= ~zero_res
        # interval of the product: sequential interval multiplication (exact rows: NumPy's value)
        p_lo, p_hi = self._interval_product(lo, hi, fin, ex, value, scan)
        m = np.maximum(np.abs(p_lo), np.abs(p_hi))
        slack = self.tol.slack("prod", dt) * count * _eps(dt) * m
        lo_r, hi_r = widen(np.where(zero_res, 0.0, p_lo - slack),
                           np.where(zero_res, 0.0, p_hi + slack), dt, 1)
        self.used.add("float-prod-reassociation")
        if dt == np.dtype(np.float16):
            self.used.add("float16-accumulation")
        return _finish(value, nan_res | inf_res, top | (risk & ~nan_res), lo_r, hi_r,
                       f"{family}: reassociated (±{self.tol.slack('prod', dt):g}·n·eps·|Π x|)")

    @staticmethod
    def _interval_product(lo, hi, fin, ex, value, scan):
        n = lo.shape[-1]
        lo = np.where(fin, lo, 1.0)
        hi = np.where(fin, hi, 1.0)
        if n > 256:   # long rows: NumPy's value where the row is exact, else unverifiable
            all_ex = np.logical_and.accumulate(ex, -1) if scan else ex.all(-1)
            mid = np.where(all_ex, value.astype(F64), np.nan)
            return mid, mid
        p_lo = np.ones(lo.shape[:-1])
        p_hi = np.ones(lo.shape[:-1])
        outs_lo, outs_hi = [], []
        for j in range(n):
            c = np.stack([p_lo * lo[..., j], p_lo * hi[..., j], p_hi * lo[..., j],
                          p_hi * hi[..., j]])
            c = np.where(np.isnan(c), 0.0, c)   # 0 * inf of a saturated bound
            p_lo, p_hi = c.min(0), c.max(0)
            if scan:
                outs_lo.append(p_lo)
                outs_hi.append(p_hi)
        if scan:
            return np.stack(outs_lo, -1) if n else lo, np.stack(outs_hi, -1) if n else hi
        return p_lo, p_hi

    def _max_min(self, op, ex, vals, lo, hi, nan_c, value, top) -> Bound:
        f = np.max if op == "max" else np.min
        fill = -INF if op == "max" else INF
        # initial=: an empty row (legal when the program passes initial=) reduces to the
        # kernel's start value, which is exact (all() of no elements)
        lo_r = f(np.where(np.isnan(lo), fill, lo), axis=-1, initial=fill)
        hi_r = f(np.where(np.isnan(hi), fill, hi), axis=-1, initial=fill)
        all_exact = ex.all(-1)
        exact = nan_c | all_exact
        v = value.astype(F64).reshape(lo_r.shape)
        zeros = ex & (vals == 0)
        tie = all_exact & ~nan_c & (v == 0) & (zeros & np.signbit(vals)).any(-1) & \
            (zeros & ~np.signbit(vals)).any(-1)
        if tie.any():
            exact &= ~tie               # max/min of +0.0 and -0.0: either zero
            self.used.add("max-min-signed-zero")
        why = f"{op}: of inexact values" if not all_exact.all() else "exact"
        return _finish(value, exact, top, lo_r, hi_r, why)

    def _fmax_fmin(self, op, ex, vals, lo, hi, value, top) -> Bound:
        """NaN-ignoring max/min (fmax.reduce, nanmax): NaN only where every element is NaN; an
        element that may or may not be NaN makes the result unverifiable."""
        f = np.max if op == "max" else np.min
        fill = -INF if op == "max" else INF
        nan_e = ex & np.isnan(vals)
        maybe_nan = (~ex & (np.isnan(lo) | np.isnan(hi))).any(-1)
        valid = ~nan_e
        lo_r = f(np.where(valid, lo, fill), axis=-1, initial=fill)
        hi_r = f(np.where(valid, hi, fill), axis=-1, initial=fill)
        all_nan = nan_e.all(-1)
        all_exact = ex.all(-1)
        exact = all_nan | all_exact
        v = value.astype(F64).reshape(lo_r.shape)
        zeros = ex & (vals == 0)
        tie = all_exact & ~all_nan & (v == 0) & (zeros & np.signbit(vals)).any(-1) & \
            (zeros & ~np.signbit(vals)).any(-1)
        if tie.any():
            exact &= ~tie
            self.used.add("max-min-signed-zero")
        return _finish(value, exact, top | (maybe_nan & ~all_nan), lo_r, hi_r,
                       f"nan{op}: of inexact values" if not all_exact.all() else "exact")

    def _arg_reduce(self, op, a, axes, shape, value, top) -> Bound:
        if not a.is_float or a.exact.all():
            return _finish(value, ~top, top, None, None, "exact")
        ex = _rows(a.exact, axes, shape)
        vals = _rows(a.value.astype(F64), axes, shape)
        lo, hi = _rows(a.lo, axes, shape), _rows(a.hi, axes, shape)
        nan_c = (ex & np.isnan(vals)).any(-1)
        idx = value.astype(np.int64)[..., None]
        n = lo.shape[-1]
        if op == "argmax":
            best_lo = np.take_along_axis(lo, idx, -1)[..., 0]
            others = np.where(np.arange(n) == idx, -INF, hi).max(-1) if n else best_lo
            certain = best_lo > others
        else:
            best_hi = np.take_along_axis(hi, idx, -1)[..., 0]
            others = np.where(np.arange(n) == idx, INF, lo).min(-1) if n else best_hi
            certain = best_hi < others
        certain |= nan_c | ex.all(-1)
        return _finish(value, certain & ~top, top | ~certain, None, None,
                       f"{op}: of inexact values")

    # --- scans -----------------------------------------------------------------------------------
    def scan(self, node: Node, a: Bound) -> Bound:
        dt, axis = node.dtype, node.attr("axis")
        value = self.value(node, [a.value])
        top = np.moveaxis(np.logical_or.accumulate(np.moveaxis(a.top, axis, -1), -1), -1, axis)
        if dt.kind != "f":
            return _finish(value, ~top, top, None, None, "exact")

        def last(x: np.ndarray) -> np.ndarray:
            return np.moveaxis(x, axis, -1)
        ex, vals, lo, hi = last(a.exact), last(a.value.astype(F64)), last(a.lo), last(a.hi)
        fin = np.isfinite(lo) & np.isfinite(hi)
        acc = np.logical_or.accumulate
        nan_c = acc(ex & np.isnan(vals), -1)
        combine = OPS[node.op].reducer.combine_op
        if combine in ("maximum", "minimum"):   # running max/min: exact steps, NaN sticks
            run = np.maximum.accumulate if combine == "maximum" else np.minimum.accumulate
            fill = -INF if combine == "maximum" else INF
            lo_r = run(np.where(np.isnan(lo), fill, lo), -1)
            hi_r = run(np.where(np.isnan(hi), fill, hi), -1)
            exact = nan_c | np.logical_and.accumulate(ex, -1)
            b = _finish(last(value), exact, last(top), lo_r, hi_r,
                        f"{node.op}: of inexact values")
        elif combine == "add":
            inex_inf = acc(~ex & ~fin & ~last(a.top), -1)
            posinf, neginf = acc(ex & (vals == INF), -1), acc(ex & (vals == -INF), -1)
            b = self._sum(dt, None, fin, lo, hi, nan_c, posinf, neginf, inex_inf,
                          last(value), last(top), family="cumsum")
        elif combine == "multiply":
            b = self._prod(dt, None, ex, fin, lo, hi, vals, nan_c, None, None, last(value),
                           last(top), family="cumprod")
        else:
            raise AssertionError(f"no bound rule for the float scan {node.op}")

        def back(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else np.moveaxis(x, -1, axis)
        return Bound(value, back(b.exact), back(b.top), back(b.lo), back(b.hi), b.why)

    # --- matrix products ----------------------------------------------------------------------
    def matmul(self, node: Node, a: Bound, b: Bound) -> Bound:
        dt = node.dtype
        value = self.value(node, [a.value, b.value])

        def spread(mask_a: np.ndarray, mask_b: np.ndarray) -> np.ndarray:
            """Outputs whose row of A or column of B has a flagged element."""
            fa, fb = mask_a.astype(F64), mask_b.astype(F64)
            hit = np.matmul(fa, np.ones_like(fb)) + np.matmul(np.ones_like(fa), fb)
            return np.asarray(hit > 0).reshape(node.shape)
        top = spread(a.top, b.top)
        if dt.kind != "f":
            return _finish(value, ~top, top, None, None, "exact")
        mid_a, rad_a, bad_a = _mid_rad(a)
        mid_b, rad_b, bad_b = _mid_rad(b)
        nonfinite = spread(bad_a, bad_b)
        if nonfinite.any():
            self.used.add("matmul-blocking")
        center = np.matmul(mid_a, mid_b)
        scale = np.matmul(np.abs(mid_a) + rad_a, np.abs(mid_b) + rad_b)
        rad_in = (np.matmul(np.abs(mid_a), rad_b) + np.matmul(rad_a, np.abs(mid_b)) +
                  np.matmul(rad_a, rad_b))
        k = a.value.shape[-1]
        eps = _eps(dt)
        slack = self.tol.slack("matmul", dt) * k * eps * scale + rad_in
        risk = scale * (1 + 4 * k * eps) >= _fmax(dt)
        lo, hi = widen(np.asarray(center - slack).reshape(node.shape),
                       np.asarray(center + slack).reshape(node.shape), dt, 1)
        self.used.add("matmul-blocking")
        top = top | nonfinite | np.asarray(risk).reshape(node.shape)
        return _finish(value, np.zeros(node.shape, bool), top, lo, hi,
                       f"matmul: blocked (±{self.tol.slack('matmul', dt):g}·K·eps·|A||B|)")


def _periodic_points(shift: float, a_lo: np.ndarray, a_hi: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Whether ``[a_lo, a_hi]`` holds a critical point of sin/cos (an extremum) or tan (a
    pole), and the value there: +1 or -1 for exactly one extremum, 0 when there may be
    several (or the count is unreliable: both +1 and -1 must be allowed).

    Critical points are ``shift + k*pi`` (shift pi/2 for sin and tan, 0 for cos), so their
    count is that of the integers in ``[y_lo, y_hi]`` with ``y = (a - shift) / pi``. ``y`` is
    computed in float64 with a relative error below 4e-16 (the subtraction, the division and
    pi's own rounding), so the count is taken over ``[y_lo - tol, y_hi + tol]`` with ``tol``
    covering that error at the magnitude of ``y``. (A relative widening of ``y`` itself shifts
    both ends by ``y * 1e-9``, which at ``|a| ~ 1e10`` moved the test by a quarter period and
    missed a maximum: seed 4242 of the CPU soak, NumPy's own value was rejected.)"""
    with np.errstate(all="ignore"):
        y_lo, y_hi = (a_lo - shift) / math.pi, (a_hi - shift) / math.pi
        tol = 1e-15 * np.maximum(np.abs(y_lo), np.abs(y_hi)) + 1e-12
        k_lo = np.floor(y_lo - tol)
        k_hi = np.floor(y_hi + tol)
    finite = np.isfinite(y_lo) & np.isfinite(y_hi)
    count = np.where(finite, k_hi - k_lo, 2.0)
    crossed = (count >= 1) & (a_hi > a_lo) | ~finite
    single = (count == 1) & (tol < 0.25)
    parity = np.where(np.isfinite(k_hi), np.mod(k_hi, 2.0), 0.0)
    value = np.where(single, np.where(parity == 0, 1.0, -1.0), 0.0)
    return crossed, value


def _mid_rad(b: Bound) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centre, radius and non-finite/unverifiable mask of a float bound (bad entries zeroed)."""
    mid = np.where(b.exact, b.value.astype(F64), (b.lo + b.hi) / 2)
    rad = np.where(b.exact, 0.0, (b.hi - b.lo) / 2)
    bad = b.top | ~np.isfinite(mid) | ~np.isfinite(rad)
    return np.where(bad, 0.0, mid), np.where(bad, 0.0, rad), bad


def _fused_overflow(node: Node, bounds: dict) -> np.ndarray | None:
    """Where a float sum's terms are products that overflowed from finite factors: a dot
    product's (np.vecdot, np.dot, einsum are traced as a product and a sum). NumPy's own dot
    loops and BLAS may fuse each product with its accumulation (an FMA), which never rounds
    the product alone: ``np.linalg.vecdot`` of a row holding +inf * 65504 and -1.8e308 *
    65504 is inf with OpenBLAS, where the products rounded one by one (inf and -inf) sum to
    NaN (soak cpu-2026-12-06-fifth-reread, program 346). Such a sum's value depends on
    fusion and order: unverifiable, as a sum that may overflow in some order is. None when
    there is none."""
    src = node.args[0] if node.args else None
    if src is None or src.op != "multiply" or node.dtype.kind != "f" or \
            bounds[src].value.dtype.kind != "f":
        return None
    product = bounds[src].value
    finite = np.ones(product.shape, bool)
    for factor in src.args:
        v = bounds[factor].value
        if v.dtype.kind in "fc":
            finite &= np.broadcast_to(np.isfinite(v), product.shape)
    mask = np.isinf(product) & finite
    return mask if mask.any() else None


def propagate(graph: Graph, inputs: Sequence[np.ndarray], tolerances: Tolerances,
              library_ops: frozenset[str] = frozenset()) -> tuple[list[Bound], set[str]]:
    """Bounds of ``graph.outputs`` for the given inputs, and the divergence ids applied
    (``library_ops``: external ops the target runs in a library of its own, see
    ``Evaluator``)."""
    ev = Evaluator(tolerances, library_ops)
    return ev.run(graph, inputs), ev.used
