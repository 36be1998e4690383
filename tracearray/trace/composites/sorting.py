"""Sorting and what NumPy builds on it: sort, argsort, partition, argpartition, lexsort (the
external ops of ``ops.sorting``: NumPy's own sorts on the buffers, so ties and NaN placement
are NumPy's), and, as composites on them, median, percentile, quantile and their nan*
variants (``numpy/lib/_function_base_impl.py::_quantile``, ``_nanfunctions_impl.py``).

The order statistics read the sorted array with gathers at the positions NumPy's method gives
(computed with NumPy's own method table for a known q), so the interpolation and everything
after it fuse into one kernel after the sort.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...errors import with_location
from ..build import external, known_value, normalize_axes, unsupported
from ..tracer import Tracer
from . import ALL, NUMERIC, as_tracer, composite

_KINDS = ("quicksort", "mergesort", "heapsort", "stable")


def _sort_kind(kind: Any, stable: Any, what: str) -> str:
    """NumPy's sort kind for ``kind``/``stable`` (its errors, at the user's line)."""
    if stable is not None:
        if kind is not None:
            raise ValueError(with_location(
                "`kind` and `stable` parameters can't be provided at the same time. Use only "
                "one of them."))
        return "stable" if stable else "quicksort"
    if kind is None:
        return "quicksort"
    if not isinstance(kind, str):
        raise TypeError(with_location(f"{what}: sort kind must be str, not {type(kind).__name__}"))
    for k in _KINDS:   # NumPy accepts any case and a prefix of the name's first letter on
        if kind.lower().startswith(k[0]) and k.startswith(kind.lower()[:len(k)]):
            return k
    raise ValueError(with_location(f"{what}: sort kind must be one of 'quick', 'heap', or "
                                   f"'stable' (got '{kind}')"))


def _no_order(order: Any, what: str) -> None:
    if order is not None:
        raise unsupported(f"{what}(order=...)", "tracearray has no structured dtypes")


def _axis_and_array(a: Any, axis: Any, what: str) -> tuple[Tracer, int]:
    t = as_tracer(a)
    if axis is None:
        return t.ravel(), 0
    if isinstance(axis, (tuple, list)):
        raise TypeError(with_location(f"{what}: 'tuple' object cannot be interpreted as an "
                                      f"integer"))
    (ax,) = normalize_axes(operator.index(axis), t.ndim, what)
    return t, ax


def _one(op: str, t: Tracer, **attrs: Any) -> Tracer:
    return Tracer(external(op, [t.node], **attrs)[0])


@composite(np.sort, calls=['np.sort({0})', 'np.sort({0}, axis=0)', 'np.sort({0}, axis=None)',
                           'np.sort({0}, kind="stable")', 'np.sort({0} * 2 - 1)[..., ::-1]'],
           dtypes=ALL, min_dims=1)
def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
         stable: Any = None) -> Tracer:
    _no_order(order, "np.sort")
    t, ax = _axis_and_array(a, axis, "np.sort")
    return _one("sort", t, axis=ax, kind=_sort_kind(kind, stable, "sort"))


@composite(np.argsort, calls=['np.argsort({0})', 'np.argsort({0}, axis=0, kind="stable")',
                              'np.argsort({0}, axis=None)', 'np.argsort(-{0}, kind="mergesort")'],
           dtypes=ALL, min_dims=1)
def argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
            stable: Any = None) -> Tracer:
    _no_order(order, "np.argsort")
    t, ax = _axis_and_array(a, axis, "np.argsort")
    return _one("argsort", t, axis=ax, kind=_sort_kind(kind, stable, "argsort"))


def _kth(kth: Any, n: int) -> tuple[int, ...]:
    """kth as non-negative positions (NumPy's checks: integers in [-n, n))."""
    known = known_value(kth.node) if isinstance(kth, Tracer) else np.asarray(kth)
    if known is None:
        raise unsupported("partition with a traced kth", "kth decides the result's layout")
    k = np.asarray(known)
    if k.dtype.kind == "b":
        raise TypeError(with_location("Booleans unacceptable as partition index"))
    if k.dtype.kind not in "iu":
        raise TypeError(with_location("Partition index must be integer"))
    out = []
    for v in k.ravel().tolist():
        if v < -n or v >= n:
            raise ValueError(with_location(f"kth(={v}) out of bounds ({n})"))
        out.append(v + n if v < 0 else v)
    return tuple(out)


def _partitioned(op: str, a: Any, kth: Any, axis: Any, kind: Any, order: Any,
                 what: str) -> Tracer:
    _no_order(order, what)
    if kind != "introselect":
        raise ValueError(with_location(f"{what}: Unknown selection kind {kind!r}"))
    t, ax = _axis_and_array(a, axis, what)
    if t.ndim == 0:
        raise ValueError(with_location("Cannot partition a 0-d array"))
    return _one(op, t, kth=_kth(kth, t.shape[ax]), axis=ax)


@composite(np.partition, calls=['np.partition({0}, 1)', 'np.partition({0}, (0, -1), axis=0)',
                                'np.partition({0}, 0, axis=None)'],
           dtypes=ALL, min_dims=1)
def partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
              order: Any = None) -> Tracer:
    return _partitioned("partition", a, kth, axis, kind, order, "np.partition")


@composite(np.argpartition, calls=['np.argpartition({0}, 1)',
                                   'np.argpartition({0}, (0, -1), axis=0)'],
           dtypes=ALL, min_dims=1)
def argpartition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
                 order: Any = None) -> Tracer:
    return _partitioned("argpartition", a, kth, axis, kind, order, "np.argpartition")


@composite(np.lexsort, calls=['np.lexsort(({0}, {1}))', 'np.lexsort(({0} > 0, {1}), axis=0)',
                              'np.lexsort({0})'],
           arrays=2, dtypes=ALL, min_dims=1, same_shape=True)
def lexsort(keys: Any, axis: int = -1) -> Tracer:
    if isinstance(keys, (tuple, list)):
        ks = [as_tracer(k) for k in keys]
    else:
        t = as_tracer(keys)
        if t.ndim == 0:
            raise TypeError(with_location("need sequence of keys with len > 0 in lexsort"))
        ks = [t[i] for i in range(t.shape[0])]
    if not ks:
        raise TypeError(with_location("need sequence of keys with len > 0 in lexsort"))
    if any(k.shape != ks[0].shape for k in ks):
        raise ValueError(with_location("all keys need to be the same shape"))
    if ks[0].ndim == 0:   # one element: NumPy's answer is index 0
        return as_tracer(np.intp(0))
    (ax,) = normalize_axes(operator.index(axis), ks[0].ndim, "lexsort")
    return Tracer(external("lexsort", [k.node for k in ks], axis=ax)[0])


# ------------------------------------------------------------------------------------------
# Order statistics: median, percentile, quantile (and nan*)
# ------------------------------------------------------------------------------------------

def _gathered_last(t: Tracer, axis: Any, what: str) -> tuple[Tracer, tuple[int, ...]]:
    """``t`` with the reduced axes merged into one last axis (NumPy's ``_ureduce``; the
    order of the merged elements does not matter to an order statistic), and those axes."""
    axes = normalize_axes(axis, t.ndim, what) if not (isinstance(axis, (tuple, list)) and
                                                      not axis) else ()
    keep = [d for d in range(t.ndim) if d not in axes]
    moved = t.transpose(*(keep + list(axes))) if t.ndim else t
    merged = int(np.prod([t.shape[d] for d in axes], dtype=np.int64))
    return moved.reshape(tuple(t.shape[d] for d in keep) + (merged,)), axes


def _keepdims(r: Tracer, shape: tuple[int, ...], axes: tuple[int, ...], qdims: int) -> Tracer:
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    return r.reshape(r.shape[:qdims] + kept)


@composite(np.median, calls=['np.median({0})', 'np.median({0}, axis=-1)',
                             'np.median({0}, axis=0, keepdims=True)', 'np.median(np.exp({0}))'],
           dtypes=NUMERIC, min_dims=1)
def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Tracer:
    """NumPy's ``_median``: the mean of the middle one or two sorted elements (so its dtype
    rules), NaN where the row holds a NaN (sorted last)."""
    if out is not None:
        raise unsupported("np.median(out=...)", "compiled functions return new arrays")
    t = as_tracer(a)
    rows, axes = _gathered_last(t, axis, "median")
    n = rows.shape[-1]
    s = np.sort(rows, axis=-1)
    mid = s[..., n // 2:n // 2 + 1] if n % 2 else s[..., max(n // 2 - 1, 0):n // 2 + 1]
    r = np.mean(mid, axis=-1)
    if t.dtype.kind == "f" and n:
        last = s[..., -1]
        r = np.where(np.isnan(last), last.astype(r.dtype), r)
    return _keepdims(r, t.shape, axes, 0) if keepdims else r


def _quantile_q(q: Any, what: str) -> tuple[np.ndarray, bool]:
    known = known_value(q.node) if isinstance(q, Tracer) else np.asarray(q)
    if known is None:
        raise unsupported(f"{what} with a traced q", "q must be known when tracing")
    weak = type(q) in (int, float)
    return np.asarray(known), weak


def _check_q(q: np.ndarray, what: str) -> None:
    if q.dtype.kind == "c" or q.dtype.kind not in "biuf":
        raise TypeError(with_location(f"{what}: q must be a real number"))
    if not (np.all(0 <= q) and np.all(q <= 1)):
        raise ValueError(with_location("Quantiles must be in the range [0, 1]"
                                       if "quantile" in what else
                                       "Percentiles must be in the range [0, 100]"))


def _order_statistic(s: Tracer, n: Any, q: np.ndarray, method: str, weak: bool) -> Tracer:
    """NumPy's ``_quantile`` on ``s`` sorted along its last axis with ``n`` valid elements
    per row (NaNs sort last): a Python int, whose positions and weights NumPy's own helpers
    compute, or a traced count per row (the nan* variants), for which they are traced.
    The result is rows x q's elements."""
    from numpy.lib import _function_base_impl as fb
    try:
        props = fb._QuantileMethods[method]
    except KeyError:
        raise ValueError(with_location(
            f"{method!r} is not a valid method. Use one of: "
            f"{fb._QuantileMethods.keys()}")) from None
    traced = isinstance(n, Tracer)
    count = n[..., None] if traced else n
    qq = q.reshape((1,) * (s.ndim - 1) + (q.size,)) if traced else q.ravel()
    vi = props["get_virtual_index"](count, qq)
    vi = vi if isinstance(vi, Tracer) else np.asanyarray(vi)
    if props["fix_gamma"] is None or (method == "linear" and vi.dtype.kind in "iu"):
        return _take_last(s, as_tracer(vi).astype(np.intp), count)
    if traced:
        prev, nxt = np.floor(vi), np.floor(vi) + 1
        off = (vi >= count - 1) | np.isnan(vi)
        prev = np.where(off, -1, np.where(vi < 0, 0, prev)).astype(np.intp)
        nxt = np.where(off, -1, np.where(vi < 0, 0, nxt)).astype(np.intp)
        gamma = props["fix_gamma"](vi - prev, vi).astype(vi.dtype)
    else:
        prev, nxt = fb._get_indexes(np.empty(0, s.dtype), vi, n)
        gamma = fb._get_gamma(vi, prev, props)
        gamma = float(gamma.ravel()[0]) if weak else gamma
    lo = _take_last(s, as_tracer(prev), count)
    hi = _take_last(s, as_tracer(nxt), count)
    return _lerp(lo, hi, gamma)


def _take_last(s: Tracer, idx: Tracer, count: Any) -> Tracer:
    """``s`` read along its last axis at ``idx`` (-1: the last valid element of its row):
    idx holds q's elements, for every row or (a known count) shared by all rows."""
    if isinstance(count, Tracer):
        idx = np.where(idx < 0, idx + count, idx)
        return np.take_along_axis(s, np.broadcast_to(idx, s.shape[:-1] + idx.shape[-1:]),
                                  axis=-1)
    return np.take(s, idx, axis=-1)


def _lerp(a: Tracer, b: Tracer, t: Any) -> Tracer:
    """``_lerp``: a + (b-a)*t, and b - (b-a)*(1-t) where t >= 0.5, in a + (b-a)*t's dtype."""
    d = b - a
    r = a + d * t
    return np.where(np.asarray(t) >= 0.5 if not isinstance(t, Tracer) else t >= 0.5,
                    (b - d * (1 - t)).astype(r.dtype), r)


def _quantile(a: Any, q: Any, axis: Any, method: str, keepdims: bool, what: str,
              nan: bool, scale: float = 1.0, out: Any = None, overwrite_input: bool = False,
              weights: Any = None, interpolation: Any = None) -> Tracer:
    if out is not None:
        raise unsupported(f"np.{what}(out=...)", "compiled functions return new arrays")
    if weights is not None:
        raise unsupported(f"np.{what}(weights=...)")
    if interpolation is not None:
        raise unsupported(f"np.{what}(interpolation=...)", "use method=")
    qv, weak = _quantile_q(q, what)
    if scale != 1.0:
        qv = np.true_divide(qv, scale)
        qv = np.asanyarray(qv)
    _check_q(qv, what)
    t = as_tracer(a)
    if nan and t.size == 0:   # NumPy: the nanmean of the empty array
        return np.nanmean(t, axis=axis, keepdims=keepdims)
    if t.dtype.kind == "b" and method not in ("inverted_cdf", "closest_observation",
                                              "lower", "higher", "nearest"):
        raise TypeError(with_location(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead."))
    rows, axes = _gathered_last(t, axis, what)
    s = np.sort(rows, axis=-1)
    n_all = rows.shape[-1]
    if nan and t.dtype.kind == "f":
        n = np.count_nonzero(~np.isnan(rows), axis=-1)
        r = _order_statistic(s, n, qv, method, weak)
        r = np.where((n == 0)[..., None], np.nan, r) if r.ndim == s.ndim else r
    else:
        if n_all == 0:
            raise IndexError(with_location(
                f"index {-1 if t.dtype.kind == 'f' else 0} is out of bounds for axis 0 with "
                f"size 0"))
        r = _order_statistic(s, n_all, qv, method, weak)
        if t.dtype.kind == "f":
            last = s[..., -1:]
            r = np.where(np.isnan(last), last.astype(r.dtype), r)
    # rows x q-elements -> q's shape first, then the kept dims
    r = np.moveaxis(r, -1, 0).reshape(qv.shape + rows.shape[:-1])
    if keepdims:
        r = _keepdims(r, t.shape, axes, qv.ndim)
    return r


@composite(np.quantile, calls=['np.quantile({0}, 0.5)', 'np.quantile({0}, [0.1, 0.9], axis=-1)',
                               'np.quantile({0}, 0.25, method="nearest")',
                               'np.quantile({0}, 0.75, method="median_unbiased", axis=0)',
                               'np.quantile({0}, 1.0, keepdims=True, axis=-1)'],
           dtypes=NUMERIC, min_dims=1)
def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None,
             interpolation: Any = None) -> Tracer:
    return _quantile(a, q, axis, method, keepdims, "quantile", False, out=out,
                     weights=weights, interpolation=interpolation)


@composite(np.percentile, calls=['np.percentile({0}, 50)',
                                 'np.percentile({0}, [10, 90], axis=-1, method="lower")',
                                 'np.percentile({0}, 33.0, method="weibull")'],
           dtypes=NUMERIC, min_dims=1)
def percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
               *, weights: Any = None, interpolation: Any = None) -> Tracer:
    return _quantile(a, q, axis, method, keepdims, "percentile", False, 100, out=out,
                     weights=weights, interpolation=interpolation)


@composite(np.nanquantile, calls=['np.nanquantile(np.where({0} > 1, np.nan, {0}), 0.5, axis=-1)',
                                  'np.nanquantile({0}, [0.2, 0.7])'],
           dtypes=NUMERIC, min_dims=1)
def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear", keepdims: Any = False,
                *, weights: Any = None, interpolation: Any = None) -> Tracer:
    return _quantile(a, q, axis, method, bool(keepdims) if keepdims is not np._NoValue
                     else False, "nanquantile", True, out=out, weights=weights,
                     interpolation=interpolation)


@composite(np.nanpercentile,
           calls=['np.nanpercentile(np.where({0} > 1, np.nan, {0}), 50, axis=0)'],
           dtypes=NUMERIC, min_dims=1)
def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                  overwrite_input: bool = False, method: str = "linear", keepdims: Any = False,
                  *, weights: Any = None, interpolation: Any = None) -> Tracer:
    return _quantile(a, q, axis, method, bool(keepdims) if keepdims is not np._NoValue
                     else False, "nanpercentile", True, 100, out=out, weights=weights,
                     interpolation=interpolation)


@composite(np.nanmedian, calls=['np.nanmedian(np.where({0} > 1, np.nan, {0}), axis=-1)',
                                'np.nanmedian({0})'],
           dtypes=NUMERIC, min_dims=1)
def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: Any = False) -> Tracer:
    """The median of each row's non-NaN elements: the mean of the middle one or two (NaN for
    an all-NaN row)."""
    if out is not None:
        raise unsupported("np.nanmedian(out=...)", "compiled functions return new arrays")
    t = as_tracer(a)
    if t.size == 0:   # NumPy: the nanmean of the empty array
        return np.nanmean(t, axis=axis, keepdims=keepdims is not np._NoValue and keepdims)
    if t.dtype.kind != "f":
        return median(t, axis=axis, keepdims=bool(keepdims) if keepdims is not np._NoValue
                      else False)
    rows, axes = _gathered_last(t, axis, "nanmedian")
    s = np.sort(rows, axis=-1)
    n = np.count_nonzero(~np.isnan(rows), axis=-1)
    last = rows.shape[-1] - 1
    lo = np.take_along_axis(s, np.clip((n - 1) // 2, 0, last)[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(s, np.clip(n // 2, 0, last)[..., None], axis=-1)[..., 0]
    if axis is not None and rows.ndim > 1 and rows.shape[-1] < 600:
        # NumPy's small-row path (np.ma.median): the two middle elements (the one twice for
        # an odd count) summed in the dtype, halved
        r = np.true_divide(np.where(n % 2 == 1, lo, hi) + lo, 2.0).astype(t.dtype)
    else:
        # NumPy's 1-d path: np.median of the non-NaN elements (a mean of one or two)
        r = np.where(n % 2 == 1, lo, np.mean(np.stack([lo, hi], axis=-1), axis=-1)
                     ).astype(t.dtype)
    r = np.where(n == 0, np.nan, r).astype(t.dtype)
    if keepdims is not np._NoValue and keepdims:
        r = _keepdims(r, t.shape, axes, 0)
    return r

