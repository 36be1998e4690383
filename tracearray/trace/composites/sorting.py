"""Sorting and what NumPy builds on it: sort, argsort, partition, argpartition, lexsort, and
median, percentile, quantile and their nan* variants: the external ops of ``ops.sorting``,
NumPy's own functions on the buffers, so ties, NaN placement, the arrangement introselect
leaves and hence the sign of a zero each order statistic picks are NumPy's. (A composite of a
full sort and gathers gives the same numbers but not always the same zero: NumPy's partition
of -0.0 and 0.0, which compare equal, leaves them in an order of its own.)
Elementwise producers and consumers fuse into the kernels before and after each call.
"""
from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from ...errors import with_location
from .. import context
from ...ops.sorting import order_statistic_call
from ..build import (STAGED_NEEDED_MAX, external, fix_captured_value, needed_value,
                     normalize_axes, unsupported)
from ..tracer import Tracer
from . import ALL, NUMERIC, as_tracer, composite

_PARTITION_NOTE = ("external op: NumPy's own function on the buffers; on the GPU the rows "
                   "sorted by the device's sorts, one arrangement partition's contract allows "
                   "(divergence gpu-partition-order); float16 rows longer than 4096 elements "
                   "on the host")
_MEDIAN_NOTE = ("external op: NumPy's own function on the buffers; on the GPU float32, float64, "
                "integers and bool over any axes: the middle of the GPU's sort of the rows (of "
                "their valid values for nanmedian; divergence gpu-sort-ties), float16 on the "
                "host")
_QUANTILE_NOTE = ("external op: NumPy's own function on the buffers; on the GPU float32, float64, "
                  "integers and bool over any axes, every method, without weights: the GPU's "
                  "sort of the rows, then NumPy's positions and interpolation (bit for bit; "
                  "divergence gpu-sort-ties), float16 and weights on the host")
_NANQUANTILE_NOTE = ("external op: NumPy's own function on the buffers; on the GPU "
                     "float32, float64 and integers over any axes, every method, without "
                     "weights, float rows of "
                     "up to 65536 values per q: the GPU's sort of the rows, then NumPy's "
                     "positions and interpolation for each row's count of valid values (bit "
                     "for bit; divergences gpu-sort-ties, nan-quantile-dtype), otherwise on "
                     "the host")
_SORT_NOTE = ("external op: NumPy's own function on the buffers; on the GPU rows of up to "
              "4096 elements (2048 of 8 bytes) sort in a block (a stable bitonic network), "
              "longer rows in a stable radix sort over all the blocks (divergence "
              "gpu-sort-ties); float16 rows longer than 4096 elements on the host")


def _sort_kind(kind: Any, stable: Any, what: str) -> Any:
    """The sort kind NumPy will use for ``kind``/``stable``, checked by NumPy itself (its
    errors, at the user's line)."""
    if stable is not None:
        if kind is not None:
            raise ValueError(with_location(
                "`kind` and `stable` parameters can't be provided at the same time. Use only "
                "one of them."))
        return "stable" if stable else None
    try:
        np.sort(np.zeros(1), kind=kind)
    except (TypeError, ValueError) as e:
        raise type(e)(with_location(f"{what}: {e}")) from None
    return kind


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
           dtypes=ALL, min_dims=1, notes=_SORT_NOTE)
def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
         stable: Any = None) -> Tracer:
    _no_order(order, "np.sort")
    t, ax = _axis_and_array(a, axis, "np.sort")
    return _one("sort", t, axis=ax, kind=_sort_kind(kind, stable, "sort"))


@composite(np.argsort, calls=['np.argsort({0})', 'np.argsort({0}, axis=0, kind="stable")',
                              'np.argsort({0}, axis=None)', 'np.argsort(-{0}, kind="mergesort")'],
           dtypes=ALL, min_dims=1, notes=_SORT_NOTE)
def argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
            stable: Any = None) -> Tracer:
    _no_order(order, "np.argsort")
    if np.ndim(a) == 0:   # (NumPy's argsort of a 0-d array is array([0]), whatever axis)
        _sort_kind(kind, stable, "argsort")
        return context.owned(np.zeros(1, np.intp))
    t, ax = _axis_and_array(a, axis, "np.argsort")
    return _one("argsort", t, axis=ax, kind=_sort_kind(kind, stable, "argsort"))


@composite(np.sort_complex, calls=['np.sort_complex({0})', 'np.sort_complex({0}[::-1])'],
           dtypes=ALL, min_dims=1, notes=_SORT_NOTE)
def sort_complex(a: Any) -> Any:
    """A real array: sorted along the last axis, then as NumPy's sort_complex casts it
    (complex64 from int8, int16, uint8 and uint16, else complex128). A complex one is the
    complex rules' (trace/complex_ops.py)."""
    t = as_tracer(a)
    if t.ndim == 0:
        raise np.exceptions.AxisError(with_location(
            "np.sort_complex: axis -1 is out of bounds for array of dimension 0"))
    return np.sort(t).astype(np.complex64 if t.dtype.char in "bhBH" else np.complex128)


def _kth(kth: Any, n: int, empty: bool) -> tuple[int, ...]:
    """kth as non-negative positions (NumPy's checks: integers in [-n, n); an empty array
    NumPy partitions without looking at kth's values)."""
    known = needed_value(kth, "kth of a partition")
    if known is None:
        raise unsupported(f"partition with a traced kth of more than {STAGED_NEEDED_MAX} "
                          f"elements", "kth decides the result's layout")
    k = np.asarray(known)
    if k.ndim > 1:
        raise ValueError(with_location("object too deep for desired array"))
    if k.size == 0:
        return ()
    if k.dtype.kind == "b":
        raise TypeError(with_location("Booleans unacceptable as partition index"))
    if k.dtype.kind not in "iu":
        raise TypeError(with_location("Partition index must be integer"))
    out = []
    if empty:
        return tuple(k.ravel().tolist())
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
    positions = _kth(kth, t.shape[ax], t.size == 0)
    if not positions:     # an empty integer kth: NumPy leaves the order as it is
        if op == "partition":
            return t.copy()
        shape = [1] * t.ndim
        shape[ax] = t.shape[ax]
        return np.broadcast_to(np.arange(t.shape[ax]).reshape(shape), t.shape).copy()
    return _one(op, t, kth=positions, axis=ax)


@composite(np.partition, calls=['np.partition({0}, 1)', 'np.partition({0}, (0, -1), axis=0)',
                                'np.partition({0}, 0, axis=None)'],
           dtypes=ALL, min_dims=1, notes=_PARTITION_NOTE)
def partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
              order: Any = None) -> Tracer:
    return _partitioned("partition", a, kth, axis, kind, order, "np.partition")


@composite(np.argpartition, calls=['np.argpartition({0}, 1)',
                                   'np.argpartition({0}, (0, -1), axis=0)'],
           dtypes=ALL, min_dims=1, notes=_PARTITION_NOTE)
def argpartition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
                 order: Any = None) -> Tracer:
    if np.ndim(a) == 0:   # (as np.argsort: array([0]))
        return context.owned(np.zeros(1, np.intp))
    return _partitioned("argpartition", a, kth, axis, kind, order, "np.argpartition")


_LEXSORT_NOTE = ("a stable argsort of each key in turn, from the first (least significant) "
                 "to the last, each gathered in the order of the ones before: NumPy's result "
                 "(ties in their original order); on the GPU the device's stable sorts and "
                 "gathers")


@composite(np.lexsort, calls=['np.lexsort(({0}, {1}))', 'np.lexsort(({0} > 0, {1}), axis=0)',
                              'np.lexsort({0})'],
           arrays=2, dtypes=ALL, min_dims=1, same_shape=True, notes=_LEXSORT_NOTE)
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
    # The last key is the primary one: sorting stably by each key from the first to the last
    # leaves the order NumPy's lexsort defines, ties of every key in their original order.
    order = _one("argsort", ks[0], axis=ax, kind="stable")
    for k in ks[1:]:
        step = _one("argsort", np.take_along_axis(k, order, axis=ax), axis=ax, kind="stable")
        order = np.take_along_axis(order, step, axis=ax)
    return order


# ------------------------------------------------------------------------------------------
# Order statistics: median, percentile, quantile (and nan*)
# ------------------------------------------------------------------------------------------

def _order_statistic(func: str, a: Any, q: Any = None, axis: Any = None, out: Any = None,
                     method: str = "linear", keepdims: Any = False, weights: Any = None,
                     interpolation: Any = None) -> Tracer:
    """NumPy's ``func`` (``ops.sorting.ORDER_STATISTICS``) as one external call on ``a``.
    NumPy's own checks run first, on a stand-in of ``a``'s dtype with one element per
    dimension (none along an empty one), so its errors come at the user's line."""
    name = f"np.{func}"
    if out is not None:
        raise unsupported(f"{name}(out=...)", "compiled functions return new arrays")
    if interpolation is not None:
        raise unsupported(f"{name}(interpolation=...)", "use method=")
    t = as_tracer(a)
    keepdims = False if keepdims is np._NoValue else bool(keepdims)
    axes = None if axis is None else normalize_axes(axis, t.ndim, func)
    if func.startswith("nan") and t.size == 0:
        return np.nanmean(t, axis=axis, keepdims=keepdims)   # NumPy's rule for empty input
    if q is None:
        qattrs: dict = dict(q=None, q_shape=(), q_dtype="", weak=False)
    else:
        fix_captured_value(q)   # q's values are the trace's
        known = needed_value(q, f"q of {name}")
        if known is None:
            raise unsupported(f"{name} with a traced q of more than {STAGED_NEEDED_MAX} "
                              f"elements", "q must be known when tracing")
        qv = np.asarray(known)
        qattrs = dict(q=tuple(qv.ravel().tolist()), q_shape=qv.shape, q_dtype=qv.dtype.str,
                      weak=type(q) in (int, float))
    attrs = dict(func=func, axis=axes, method=method, keepdims=keepdims, ndim=t.ndim, **qattrs)
    operands = [t]
    shape = t.shape
    if weights is not None:   # NumPy's checks of weights' shape see the real shapes
        w = as_tracer(weights)
        operands.append(w)
        if w.shape != t.shape:
            shape = None
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if shape is None:   # weights along the axis: the reduced axes at full length
                full = tuple(n if axes is None or d in axes else min(n, 1)
                             for d, n in enumerate(t.shape))
                order_statistic_call(np.ones(full, t.dtype), np.ones(w.shape, w.dtype),
                                     **attrs)
            else:
                standin = np.ones(tuple(min(n, 1) for n in shape), t.dtype)
                order_statistic_call(standin, None if weights is None else
                                     np.ones_like(standin, w.dtype), **attrs)
    except Exception as e:   # noqa: BLE001 -- NumPy's error, at the user's line
        raise type(e)(with_location(str(e))) from None
    return Tracer(external("order_statistic", [o.node for o in operands], **attrs)[0])


@composite(np.median, calls=['np.median({0})', 'np.median({0}, axis=-1)',
                             'np.median({0}, axis=0, keepdims=True)', 'np.median(np.exp({0}))'],
           dtypes=NUMERIC, min_dims=1, notes=_MEDIAN_NOTE)
def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Tracer:
    return _order_statistic("median", a, None, axis, out, keepdims=keepdims)


@composite(np.nanmedian, calls=['np.nanmedian(np.where({0} > 1, np.nan, {0}), axis=-1)',
                                'np.nanmedian({0})'],
           dtypes=NUMERIC, min_dims=1, notes=_MEDIAN_NOTE)
def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: Any = np._NoValue) -> Tracer:
    return _order_statistic("nanmedian", a, None, axis, out, keepdims=keepdims)


@composite(np.quantile, calls=['np.quantile({0}, 0.5)', 'np.quantile({0}, [0.1, 0.9], axis=-1)',
                               'np.quantile({0}, 0.25, method="nearest")',
                               'np.quantile({0}, 0.75, method="median_unbiased", axis=0)',
                               'np.quantile({0}, 1.0, keepdims=True, axis=-1)'],
           dtypes=NUMERIC, min_dims=1, notes=_QUANTILE_NOTE)
def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None,
             interpolation: Any = None) -> Tracer:
    return _order_statistic("quantile", a, q, axis, out, method, keepdims, weights,
                            interpolation)


@composite(np.percentile, calls=['np.percentile({0}, 50)',
                                 'np.percentile({0}, [10, 90], axis=-1, method="lower")',
                                 'np.percentile({0}, 33.0, method="weibull")'],
           dtypes=NUMERIC, min_dims=1, notes=_QUANTILE_NOTE)
def percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
               *, weights: Any = None, interpolation: Any = None) -> Tracer:
    return _order_statistic("percentile", a, q, axis, out, method, keepdims, weights,
                            interpolation)


@composite(np.nanquantile, calls=['np.nanquantile(np.where({0} > 1, np.nan, {0}), 0.5, axis=-1)',
                                  'np.nanquantile({0}, [0.2, 0.7])'],
           dtypes=NUMERIC, min_dims=1, notes=_NANQUANTILE_NOTE)
def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: Any = np._NoValue, *, weights: Any = None,
                interpolation: Any = None) -> Tracer:
    return _order_statistic("nanquantile", a, q, axis, out, method, keepdims, weights,
                            interpolation)


@composite(np.nanpercentile,
           calls=['np.nanpercentile(np.where({0} > 1, np.nan, {0}), 50, axis=0)'],
           dtypes=NUMERIC, min_dims=1, notes=_NANQUANTILE_NOTE)
def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: Any = np._NoValue, *, weights: Any = None,
                  interpolation: Any = None) -> Tracer:
    return _order_statistic("nanpercentile", a, q, axis, out, method, keepdims, weights,
                            interpolation)
