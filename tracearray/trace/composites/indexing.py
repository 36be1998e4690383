"""Indexing with data as NumPy functions: take, take_along_axis, choose, compress,
searchsorted, digitize and interp, built on the ``gather`` primitive; nonzero and the
functions built on it (argwhere, flatnonzero, extract, one-argument where), whose length the
data decides (``selection.true_positions``).

searchsorted, digitize and interp search a sorted array by bisection: a fixed number of
steps (the bit length of its size), each a gather at the current midpoint, so the whole search
is elementwise arithmetic and loads inside one kernel (numpy/_core/src/npysort/
binsearch.cpp, numpy/_core/src/multiarray/compiled_base.c ``arr_interp``, step by step).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import context
from .. import indexing as ix
from .. import numpy_api as api
from ..build import constant, fix_captured_value, make, normalize_axes, unsupported
from ...errors import with_location
from ...ops.rules import broadcast_shape
from ..tracer import Tracer, as_array_memory, no_out
from . import FLOATS, NUMERIC, NUMPY_IMPLEMENTATION, as_tracer, composite

I64 = np.dtype(np.int64)


def _gather1d(a: Tracer, positions: Tracer, mode: str = "clip") -> Tracer:
    """``a[positions]`` of a 1-d ``a`` (positions already in range: mode 'clip')."""
    idx = positions.node if positions.dtype == I64 else api.astype(positions.node, I64)
    return Tracer(make("gather", [a.node, idx], axes=(0,), at=0, mode=mode,
                       messages=(f"index {{}} is out of bounds for axis 0 with size "
                                 f"{a.shape[0]}",)))


# ------------------------------------------------------------------------------------------
# take, take_along_axis, choose, compress
# ------------------------------------------------------------------------------------------

@composite(np.take, calls=['np.take({0}, [2, 0, -1], axis=-1, mode="clip")',
                           'np.take({0}, np.argmax({0}, axis=0), axis=-1)',
                           'np.take({0}, [[0, 1], [-1, 0]])',
                           'np.take({0}, 7, mode="wrap")',
                           '{0}.take(np.argmin({0}, axis=-1), axis=-1)'],
           min_dims=1)
def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tracer:
    no_out("np.take", out)
    from ..tracer import unwrap
    return Tracer(ix.take(unwrap(as_tracer(a)), unwrap(indices), axis, mode))


@composite(np.take_along_axis,
           calls=['np.take_along_axis({0}, np.argmax({0}, axis=-1, keepdims=True), axis=-1)',
                  'np.take_along_axis({0}, np.argmin({0}, axis=0, keepdims=True), axis=0)',
                  'np.take_along_axis({0}, np.zeros((1,) * {0}.ndim, np.int64), axis=-1)'],
           min_dims=1)
def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Tracer:
    """``out[..., i, ...] = arr[..., indices[..., i, ...], ...]``: a gather along every
    dimension, the others by their own position (arr and indices broadcast against each
    other elsewhere)."""
    a, idx = as_tracer(arr), as_tracer(indices)
    if idx.dtype.kind not in "iu":
        raise IndexError(with_location("`indices` must be an integer array"))
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(with_location(
                "when axis=None, `indices` must have a single dimension."))
        a, ax = a.reshape(-1), 0
    else:
        if a.ndim != idx.ndim:
            raise ValueError(with_location(
                "`indices` and `arr` must have the same number of dimensions"))
        (ax,) = normalize_axes(axis, a.ndim, "take_along_axis")
    try:
        # (NumPy's own rule, not np.broadcast_shapes: that stops at 32 dimensions, and
        # np.take_along_axis does not)
        shape = list(broadcast_shape([tuple(n for d, n in enumerate(a.shape) if d != ax),
                                      tuple(n for d, n in enumerate(idx.shape) if d != ax)]))
    except ValueError:
        # (NumPy indexes arr with idx and a range for every other axis: its IndexError)
        shapes = [idx.shape if d == ax else tuple(n if e == d else 1 for e in range(a.ndim))
                  for d, n in enumerate(a.shape)]
        texts = " ".join("(" + ",".join(str(n) for n in sh) + ("," if len(sh) == 1 else "") + ")"
                         for sh in shapes)
        raise IndexError(with_location(
            f"shape mismatch: indexing arrays could not be broadcast together with shapes "
            f"{texts} ")) from None
    shape.insert(ax, idx.shape[ax])
    shape = tuple(shape)
    nodes = []
    for d in range(a.ndim):
        if d == ax:
            nodes.append(api.broadcast_to(idx.node, shape))
        else:
            iota = np.arange(a.shape[d], dtype=np.int64).reshape(
                tuple(-1 if e == d else 1 for e in range(a.ndim)))
            nodes.append(api.broadcast_to(constant(iota), shape) if a.shape[d] == shape[d]
                         else api.broadcast_to(constant(np.zeros((1,) * a.ndim, np.int64)),
                                               shape))
    messages = tuple(f"index {{}} is out of bounds for axis {d} with size {a.shape[d]}"
                     for d in range(a.ndim))
    return Tracer(make("gather", [a.node] + nodes, axes=tuple(range(a.ndim)), at=0,
                       mode="raise", messages=messages))


def safe_indices(dtype: np.dtype) -> None:
    """NumPy's cast of indices to intp under the 'safe' rule (np.choose's, np.put's, a
    count's): floats and uint64 raise TypeError (np.take and indexing accept uint64)."""
    if not np.can_cast(dtype, np.intp, casting="safe"):
        raise TypeError(with_location(
            f"Cannot cast array data from {np.dtype(dtype)!r} to dtype('int64') according to "
            f"the rule 'safe'"))


@composite(np.choose, calls=['np.choose(({0} > 0).astype(np.int8), [{0}, -{0}])',
                             'np.choose(np.argmax({0}, axis=-1), [0, 1, 2, 3], mode="clip")',
                             'np.choose(({0} > 0) * 3, [{0}, {1}], mode="wrap")'],
           arrays=2, dtypes=NUMERIC)
def choose(a: Any, choices: Sequence[Any], out: Any = None, mode: str = "raise") -> Tracer:
    """``choices[a[i]][i]`` with every choice broadcast against ``a``: a chain of selects
    (one per choice, all fused); mode 'raise' checks ``0 <= a < len(choices)`` at run time."""
    no_out("np.choose", out)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(with_location(f"clipmode not understood: {mode!r}"))
    idx = as_tracer(a)
    safe_indices(idx.dtype)
    opts = [as_tracer(c) for c in choices]
    n = len(opts)
    if n == 0:
        raise ValueError(with_location("0-length sequence."))
    idx = idx.astype(np.int64)
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    elif idx.size:
        context.require(((idx >= 0) & (idx < n)).all().node, ValueError,
                        "invalid entry in choice array")
    # (NumPy's common type of the choices: Python numbers weak (NEP 50), then cast unsafely:
    # np.choose(i, [int8 array, 1000]) is int8, 1000 wrapped)
    dt = np.result_type(*[c if type(c) in (bool, int, float) else o.dtype
                          for c, o in zip(choices, opts)])
    out = opts[-1].astype(dt)
    for k in range(n - 2, -1, -1):
        out = np.where(idx == k, opts[k].astype(dt), out)
    # (NumPy's result is a new array: writable, not a broadcast view)
    return Tracer(np.broadcast_to(out, np.broadcast_shapes(idx.shape, *[o.shape for o in opts]))
                  .node)


@composite(np.compress, calls=['np.compress([True, False, True], {0}, axis=-1)',
                               'np.compress([0, 1], {0})',
                               'np.compress(np.ravel({0})[:2] > 0, {0}, axis=0)'],
           min_dims=1)
def compress(condition: Any, a: Any, axis: Any = None, out: Any = None) -> Tracer:
    """The elements (or slabs) where ``condition`` holds: a known condition is a static
    selection (a gather at its positions); a traced one takes at the positions np.nonzero
    finds, a size the data decides (staged, as ``x[mask]``), and np.take's check of them
    (a true entry past the axis: NumPy's IndexError)."""
    no_out("np.compress", out)
    t = as_tracer(a)
    if axis is None:
        t, ax = t.reshape(-1), 0
    else:
        (ax,) = normalize_axes(axis, t.ndim, "compress")
    if isinstance(condition, Tracer):
        if condition.ndim != 1:
            raise ValueError(with_location("condition must be a 1-d array"))
        return np.take(t, np.nonzero(condition)[0], axis=ax)
    cond = np.asarray(condition)
    if cond.ndim != 1:
        raise ValueError(with_location("condition must be a 1-d array"))
    return Tracer(ix.take(t.node, np.nonzero(cond)[0], ax))


# ------------------------------------------------------------------------------------------
# sorted search
# ------------------------------------------------------------------------------------------

def _less(a: Tracer, b: Tracer) -> Tracer:
    """NumPy's sort order: NaN after everything (npysort's ``LT``)."""
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return (a < b) | (np.isnan(b) & ~np.isnan(a))
    return a < b


def _bisect(a: Tracer, v: Tracer, upper: bool) -> Tracer:
    """For a sorted 1-d ``a``: how many elements are < v (``upper``: <= v), in NumPy's sort
    order; bisection in a fixed number of steps, every element of ``v`` in parallel."""
    n = a.shape[0]
    lo = Tracer(api.broadcast_to(constant(np.int64(0)), v.shape))
    if n == 0:
        return lo
    hi = lo + n
    for _ in range(n.bit_length()):
        active = lo < hi
        mid = (lo + hi) // 2
        x = _gather1d(a, np.minimum(mid, n - 1))
        go = ~_less(v, x) if upper else _less(x, v)
        lo = np.where(active & go, mid + 1, lo)
        hi = np.where(active & ~go, mid, hi)
    return lo


def _common(a: Tracer, v: Tracer) -> tuple[Tracer, Tracer]:
    dt = np.result_type(a.dtype, v.dtype)
    return a.astype(dt), v.astype(dt)


# The sorted arrays of the test calls are cumulative sums of values below 64: a sum of large
# integers could wrap around and leave the array unsorted, where NumPy's result is not defined
# (divergence unsorted-search; soak cpu-2026-12-01-g, program 4668, drew exactly that).
@composite(np.searchsorted, calls=['np.searchsorted(np.cumsum(np.abs({1}.ravel()) % 64), {0})',
                                   'np.searchsorted([0, 1, 1, 2, 5], {0}, side="right")',
                                   'np.searchsorted(np.cumsum(np.abs({1}.ravel()) % 64), {0}, '
                                   'sorter=np.arange({1}.size))'],
           arrays=2, dtypes=NUMERIC, values="small", max_dims=2)
def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Tracer:
    if side not in ("left", "right"):
        raise ValueError(with_location(
            f"side must be 'left' or 'right' (got {side!r})"))
    t = as_tracer(a)
    if t.ndim != 1:
        raise ValueError(with_location("object too deep for desired array"))
    if sorter is not None:
        if np.size(sorter) != np.size(t):   # (NumPy's check, before any index is read)
            raise ValueError(with_location("sorter.size must equal a.size"))
        t = as_tracer(t)[as_tracer(sorter)]
    tv = as_tracer(v)
    ta, tv2 = _common(t, tv)
    out = _bisect(ta, tv2, side == "right")
    return out


@composite(np.digitize, calls=['np.digitize({0}, [-1.0, 0.0, 0.5, 2.0])',
                               'np.digitize({0}, [3, 1, 0], right=True)',
                               'np.digitize({0}, np.cumsum(np.abs({1}.ravel()) % 64))'],
           arrays=2, dtypes=NUMERIC, values="small", max_dims=2)
def digitize(x: Any, bins: Any, right: bool = False) -> Tracer:
    """NumPy's digitize: searchsorted on increasing bins, from the end on decreasing ones;
    bins that are neither raise ValueError (checked at run time when traced)."""
    tx, tb = as_tracer(x), as_tracer(bins)
    if tx.dtype.kind == "c":   # pragma: no cover - complex is not a tracer dtype
        raise TypeError(with_location("x may not be complex"))
    if tb.ndim != 1:
        raise ValueError(with_location("object too deep for desired array"))
    n = tb.shape[0]
    ta, tv = _common(tb, tx)
    up = _bisect(ta, tv, upper=not right)
    if n <= 1:
        return up
    down = n - _bisect(ta[::-1], tv, upper=not right)
    inc, ok = _monotonicity(tb.astype(np.float64))
    if isinstance(bins, (list, tuple, np.ndarray)):
        fix_captured_value(bins)   # (the direction is read from its values)
        with np.errstate(invalid="ignore"):
            known_inc, known_ok = _monotonicity_of(np.asarray(bins, np.float64))
        if not known_ok:
            raise ValueError(with_location("bins must be monotonically increasing or "
                                           "decreasing"))
        return up if known_inc else down
    context.require(ok.node, ValueError, "bins must be monotonically increasing or decreasing")
    return np.where(inc, up, down)


def _monotonicity(b: Tracer) -> tuple[Tracer, Tracer]:
    """NumPy's check_array_monotonic (on float64 bins): the direction is set by the first
    element that differs from the first (NaN differs; no such element: increasing), then no
    later pair may go the other way. (increasing?, valid?)"""
    differs = b[1:] != b[0]
    first = np.argmax(differs) + 1
    any_differs = differs.any()
    inc = ~any_differs | (b[0] < _gather1d(b, first))
    ok = np.where(inc, ~(b[:-1] > b[1:]).any(), ~(b[:-1] < b[1:]).any())
    return inc, ok


def _monotonicity_of(b: np.ndarray) -> tuple[bool, bool]:
    differs = np.flatnonzero(b[1:] != b[0])
    if not differs.size:
        return True, True
    inc = bool(b[0] < b[differs[0] + 1])
    ok = not (b[:-1] > b[1:]).any() if inc else not (b[:-1] < b[1:]).any()
    return inc, ok


@composite(np.interp, calls=['np.interp({0}, [-2.0, -0.5, 0.0, 1.0, 4.0], [1.0, 0.0, 2.0, -1.0, 3.0])',
                             'np.interp({0}, np.cumsum(np.abs({1}.ravel()) % 64) - 3, {1}.ravel(), '
                             'left=-7.0, right=9.0)',
                             'np.interp({0}, [0.5], [2.0])',
                             ('np.interp({0}, [10.0, 350.0, 90.0, 180.0], [1.0, 2.0, 3.0, 4.0], '
                              'period=360.0)'),
                             'np.interp({0}, [-1.0, 0.0, 3.0], [1j, 2.0, 3.0 - 1j], left=5j)'],
           arrays=2, dtypes=FLOATS, values="small", max_dims=2,
           notes="period= (NumPy's sort of xp modulo the period) and complex values to "
                 "interpolate (NumPy's complex loop)")
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Tracer:
    """NumPy's piecewise-linear interpolation in float64: ``fp[j]`` where ``x == xp[j]``, the
    fill values outside ``xp``, else ``slope * (x - xp[j]) + fp[j]`` with NumPy's retry from
    the right end when that is NaN."""
    return _interp(x, xp, [fp], [left], [right], period, complex_loop=False)[0]


def interp_complex(x: Any, xp: Any, fp: Sequence[Any], left: Sequence[Any],
                   right: Sequence[Any], period: Any) -> list[Tracer]:
    """The real and imaginary parts of NumPy's interpolation of complex values (``fp``,
    ``left``, ``right``: each a pair of parts, None for a default fill): its complex loop
    interpolates each part alone, but multiplies by the reciprocal of the step where the
    real loop divides by it, and makes a NaN x's result NaN + 0j."""
    return _interp(x, xp, fp, left, right, period, complex_loop=True)


def _interp(x: Any, xp: Any, fps: Sequence[Any], lefts: Sequence[Any],
            rights: Sequence[Any], period: Any, complex_loop: bool) -> list[Tracer]:
    F = np.float64
    tx = as_tracer(x).astype(F)
    txp = as_tracer(xp).astype(F)
    tfps = [as_tracer(fp).astype(F) for fp in fps]
    if period is not None:   # x and xp modulo |period|, xp sorted, one point past each end
        if isinstance(period, Tracer):
            raise unsupported("np.interp with a traced period",
                              "NumPy's check that it is not zero needs its value; pass a "
                              "number")
        if period == 0:
            raise ValueError(with_location("period must be a non-zero value"))
        period = abs(period)
        if txp.ndim != 1 or any(f.ndim != 1 for f in tfps):
            raise ValueError(with_location("Data points must be 1-D sequences"))
        if any(txp.shape[0] != f.shape[0] for f in tfps):
            raise ValueError(with_location("fp and xp are not of the same length"))
        tx, txp = tx % period, txp % period
        order = np.argsort(txp)
        txp, tfps = txp[order], [f[order] for f in tfps]
        txp = np.concatenate((txp[-1:] - period, txp, txp[0:1] + period))
        tfps = [np.concatenate((f[-1:], f, f[0:1])) for f in tfps]
        lefts = rights = [None] * len(tfps)
    if txp.ndim != 1 or any(f.ndim != 1 for f in tfps):
        raise ValueError(with_location("object too deep for desired array"))
    n = txp.shape[0]
    if n == 0:
        if tx.size:
            raise ValueError(with_location("array of sample points is empty"))
        return [tx + 0.0 for _f in tfps]
    if any(f.shape[0] != n for f in tfps):
        raise ValueError(with_location("fp and xp are not of the same length."))
    if n == 1:
        return [np.where(tx < txp[0], _fill(left, f[0]),
                         np.where(tx > txp[0], _fill(right, f[n - 1]), f[0]))
                + np.zeros(tx.shape) for f, left, right in zip(tfps, lefts, rights)]
    count = _bisect(txp, tx, upper=True)          # elements <= x
    j = np.where(tx > txp[n - 1], n, count - 1)
    jj = np.clip(j, 0, n - 2)
    x0, x1 = _gather1d(txp, jj), _gather1d(txp, jj + 1)
    out = []
    for part, (tfp, left, right) in enumerate(zip(tfps, lefts, rights)):
        y0, y1 = _gather1d(tfp, jj), _gather1d(tfp, jj + 1)
        slope = (y1 - y0) * (1.0 / (x1 - x0)) if complex_loop else (y1 - y0) / (x1 - x0)
        r = slope * (tx - x0) + y0
        r2 = slope * (tx - x1) + y1
        r = np.where(np.isnan(r), np.where(np.isnan(r2) & (y0 == y1), y0, r2), r)
        r = np.where(x0 == tx, y0, r)
        r = np.where(j == n - 1, tfp[n - 1], r)
        r = np.where(j == n, _fill(right, tfp[n - 1]), r)
        r = np.where(j == -1, _fill(left, tfp[0]), r)
        out.append(np.where(np.isnan(tx), 0.0 if complex_loop and part else tx, r))
    return out


def _fill(value: Any, default: Tracer) -> Tracer:
    """np.interp's left / right fill: ``value`` in float64, or ``default`` (fp's end)."""
    return default if value is None else as_tracer(value).astype(np.float64)


# ------------------------------------------------------------------------------------------
# nonzero: positions of a length the data decides
# ------------------------------------------------------------------------------------------

_NONZERO_0D = ("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar)."
               "nonzero() instead. If the context of this error is of the form "
               "`arr[nonzero(cond)]`, just use `arr[cond]`.")


@composite(np.nonzero, calls=['np.nonzero({0} > 0)[0]', 'np.nonzero({0})[-1]',
                              'np.nonzero({0} > 5)[0]', '{0}[np.nonzero({0} < 0)] * 2'],
           min_dims=1)
def nonzero(a: Any) -> tuple[Tracer, ...]:
    """The indices of the non-zero elements, one int64 array per dimension, in C order: the
    flat positions (``selection.true_positions``: a probe counts them first) unravelled."""
    from ..selection import nonzero_positions
    t = as_tracer(a)
    if t.ndim == 0:
        raise ValueError(with_location(_NONZERO_0D))
    return tuple(Tracer(p) for p in nonzero_positions(api.cast(t.node, np.dtype(bool))))


@composite(np.where, calls=['np.where({0} > 0, {0}, {1})', 'np.where({0} > 1, {0}, 0)',
                            'np.where({0} > 0)[0]'],
           arrays=2)
def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:
        return nonzero(condition)         # NumPy: np.asarray(condition).nonzero()
    if x is None or y is None:
        raise ValueError(with_location("either both or neither of x and y should be given"))
    from ..tracer import unwrap
    # (an ndarray, 0-d too: np.where of scalars is a 0-d array, written in place by op=)
    return as_array_memory(Tracer(api.where(unwrap(condition), unwrap(x), unwrap(y))))


@composite(np.argwhere, calls=['np.argwhere({0} > 0)', 'np.argwhere({0})'])
def argwhere(a: Any) -> Tracer:
    """The indices of the non-zero elements as rows (NumPy: ``transpose(nonzero(a))``; a 0-d
    array has one row of no columns, or none)."""
    t = as_tracer(a)
    if t.ndim == 0:
        return argwhere(t.reshape(1))[:, :0]
    return np.stack(nonzero(t), axis=-1)


composite(np.flatnonzero, calls=['np.flatnonzero({0} > 0)'], impl=NUMPY_IMPLEMENTATION)
composite(np.extract, calls=['np.extract({0} > 0, {0})', 'np.extract({1} < 0, {0} * 2)'],
          arrays=2, same_shape=True, impl=NUMPY_IMPLEMENTATION)


# ------------------------------------------------------------------------------------------
# unravel_index, ravel_multi_index: flat positions and coordinates of a known shape
# ------------------------------------------------------------------------------------------

def _int_positions(x: Any) -> Tracer:
    """An index array as NumPy's ``unravel_index`` / ``ravel_multi_index`` take it: integers
    (and bools) cast to intp, anything else refused with NumPy's TypeError."""
    t = as_tracer(x)
    if t.dtype.kind not in "iub":
        raise TypeError(with_location("only int indices permitted"))
    return t.astype(I64)


def _dims(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, Tracer):
        raise unsupported(f"{what} of a traced shape", "the shape must be known when tracing")
    return tuple(int(d) for d in np.atleast_1d(np.asarray(shape)).ravel())


@composite(np.unravel_index, calls=['np.unravel_index(np.abs({0}.astype(np.int64)) % 12, (3, 4))',
                                    'np.unravel_index(np.abs({0}.astype(np.int64)) % 6, (2, 3),'
                                    ' order="F")[1]'],
           dtypes=NUMERIC, values="small")
def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple:
    dims = _dims(shape, "np.unravel_index")
    if order not in ("C", "F"):
        raise ValueError(with_location("only 'C' or 'F' order is permitted"))
    idx = _int_positions(indices)
    size = int(np.prod(dims, dtype=np.int64))
    if idx.size:
        # NumPy names the first bad index; a run-time check cannot, it says that one is bad
        ok = np.all((idx >= 0) & (idx < size))
        context.require(ok.node, ValueError,
                        f"an index is out of bounds for array with size {size}")
    out, rest = [], idx
    for d in (reversed(dims) if order == "C" else dims):
        out.append(rest % d if d else rest * 0)
        rest = rest // d if d else rest * 0
    return tuple(out[::-1] if order == "C" else out)


@composite(np.ravel_multi_index,
           calls=['np.ravel_multi_index((np.abs({0}.astype(np.int64)) % 3, '
                  'np.abs({0}.astype(np.int64)) % 4), (3, 4))',
                  'np.ravel_multi_index(({0}.astype(np.int64), {0}.astype(np.int64) - 2), '
                  '(3, 4), mode=("clip", "wrap"), order="F")'],
           dtypes=NUMERIC, values="small")
def ravel_multi_index(multi_index: Any, dims: Any, mode: Any = "raise", order: str = "C"
                      ) -> Tracer:
    shape = _dims(dims, "np.ravel_multi_index")
    coords = [_int_positions(c) for c in multi_index]
    if len(coords) != len(shape):
        raise ValueError(with_location(
            f"parameter multi_index must be a sequence of length {len(shape)}"))
    if order not in ("C", "F"):
        raise ValueError(with_location("only 'C' or 'F' order is permitted"))
    modes = (mode,) * len(shape) if isinstance(mode, str) else tuple(mode)
    if len(modes) != len(shape) or any(m not in ("raise", "wrap", "clip") for m in modes):
        raise ValueError(with_location(f"clipmode must be one of 'clip', 'raise', or 'wrap' "
                                       f"(got {mode!r})"))
    coords = np.broadcast_arrays(*coords)
    values, ok = [], None
    for c, d, m in zip(coords, shape, modes):
        if m == "wrap":
            c = c % d if d else c
        elif m == "clip":
            c = np.clip(c, 0, max(d - 1, 0))
        elif c.size:
            inside = (c >= 0) & (c < d)
            ok = inside if ok is None else ok & inside
        values.append(c)
    if ok is not None:
        context.require(np.all(ok).node, ValueError, "invalid entry in coordinates array")
    flat, stride = None, 1
    for c, d in (zip(reversed(values), reversed(shape)) if order == "C" else zip(values, shape)):
        term = c * stride
        flat = term if flat is None else flat + term
        stride *= d
    return flat
