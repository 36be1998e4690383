"""The sort family as external ops: NumPy's own sorts run on the operand buffers.

Calling ``np.sort`` / ``np.argsort`` / ``np.partition`` on the operands gives
NumPy's exact results: NaN last, the order of ties of every ``kind`` (the default quicksort's
included), and for partitions the very arrangement NumPy's introselect leaves. Rows are
independent, so a CPU implementation parallel over rows can be registered here later without
changing anything above; NumPy's sorts are vectorised (AVX-512 / AVX2 quicksort) already.

Axes are normalised by the tracer (``axis=None`` is a sort of the flattened array); kth values
are normalised to non-negative positions.
"""
from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .external import (INTP, across_rows, register_external, returning, same_dtype,
                       same_shape)
from .spec import ALL_DTYPES, Domain, Shape

_ANY = Domain(ALL_DTYPES)


def _index_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> tuple[np.dtype, ...]:
    return (INTP,)


def _sort(x: np.ndarray, *, axis: int, kind: str) -> np.ndarray:
    return np.sort(x, axis=axis, kind=kind)


def _argsort(x: np.ndarray, *, axis: int, kind: str) -> np.ndarray:
    return np.argsort(x, axis=axis, kind=kind)


def _partition(x: np.ndarray, *, kth: tuple[int, ...], axis: int) -> np.ndarray:
    return np.partition(x, kth, axis=axis)


def _argpartition(x: np.ndarray, *, kth: tuple[int, ...], axis: int) -> np.ndarray:
    return np.argpartition(x, kth, axis=axis)


register_external("sort", same_shape, same_dtype, returning(_sort), what="NumPy's sort",
                  domain=_ANY, split=across_rows)
register_external("argsort", same_shape, _index_dtype, returning(_argsort),
                  what="NumPy's argsort", domain=_ANY, split=across_rows)
register_external("partition", same_shape, same_dtype, returning(_partition),
                  what="NumPy's partition (introselect)", domain=_ANY, split=across_rows)
register_external("argpartition", same_shape, _index_dtype, returning(_argpartition),
                  what="NumPy's argpartition (introselect)", domain=_ANY,
                  split=across_rows)



# Order statistics: NumPy's own median / quantile / percentile and their nan* variants on
# the operand (introselect partitions, its interpolation, its NaN rules: NumPy's results bit
# for bit, zero signs and every ``method`` included). The tracer normalises the arguments:
# ``axis`` a sorted tuple or None, ``q`` a tuple of the values with its shape and dtype (or
# None for the medians), ``weak``: q was a Python scalar (NumPy then types the result weakly),
# ``ndim`` the operand's. A second operand is ``weights`` (method="inverted_cdf").
ORDER_STATISTICS = ("median", "nanmedian", "quantile", "nanquantile", "percentile",
                    "nanpercentile")


def order_statistic_q(q: tuple | None, q_shape: tuple, q_dtype: str, weak: bool) -> Any:
    if q is None:
        return None
    arr = np.array(q, dtype=np.dtype(q_dtype)).reshape(q_shape)
    return arr.item() if weak else arr


def order_statistic_call(x: np.ndarray, weights: np.ndarray | None = None, *, func: str,
                         q: tuple | None, q_shape: tuple, q_dtype: str, weak: bool,
                         axis: tuple | None, method: str, keepdims: bool, ndim: int
                         ) -> np.ndarray:
    fn = getattr(np, func)
    kwargs = {"axis": axis, "keepdims": keepdims}
    if weights is not None:
        kwargs["weights"] = weights
    if q is None:
        return np.asarray(fn(x, **kwargs))
    return np.asarray(fn(x, order_statistic_q(q, q_shape, q_dtype, weak), method=method,
                         **kwargs))


@dataclass(frozen=True)
class QuantilePlan:
    """Where NumPy's quantile of a row of ``n`` sorted values reads and how it combines what
    it reads, one entry per q (C order of q's shape; for ``lengths`` rows, entry
    ``(n - 1) * nq + k`` for n valid values): ``prev``/``next`` positions in ``[0, n)``;
    ``mode`` 0: the value at ``prev`` (a method without interpolation), 1:
    ``a + (b - a) * t``, 2: ``b - (b - a) * omt`` (NumPy's ``_lerp`` takes the second form
    where ``t >= 0.5``), with ``b - a`` in the values' dtype and the rest in ``dtype``, the
    result's. np.quantile's row whose last sorted value is NaN gives that value instead (NaN
    sorts last); np.nanquantile's reads the row's valid values only (NaN where none is)."""
    prev: np.ndarray
    next: np.ndarray
    mode: np.ndarray
    t: np.ndarray
    omt: np.ndarray
    dtype: np.dtype


QUANTILE_FUNCS = ("quantile", "percentile", "nanquantile", "nanpercentile")


def quantile_plan(n: int, dtype: Any, *, func: str, q: tuple | None, q_shape: tuple,
                  q_dtype: str, weak: bool, method: str, lengths: bool = False,
                  **_: Any) -> QuantilePlan | None:
    """The plan of ``np.quantile`` / ``np.percentile`` and their nan* variants (``func``)
    for rows of ``n`` values of a real ``dtype`` (``lengths``: for each length 1..n, as
    the nan* variants need for a row of that many valid values), computed with NumPy's own
    index and weight helpers on q alone (they do not look at the data), so that a device
    kernel given the sorted rows computes NumPy's values bit for bit. None where this NumPy
    has no such helpers (the caller then runs NumPy's function itself)."""
    try:
        from numpy.lib import _function_base_impl as fb
        methods, get_indexes, get_gamma = fb._QuantileMethods, fb._get_indexes, fb._get_gamma
    except (ImportError, AttributeError):
        return None
    dtype = np.dtype(dtype)
    if n <= 0 or dtype.kind not in "fiub" or func not in QUANTILE_FUNCS or \
            method not in methods:
        return None
    qv = order_statistic_q(q, q_shape, q_dtype, weak)
    if func.endswith("percentile"):
        qv = np.true_divide(qv, 100)
    qa = np.asanyarray(qv)
    # the row length as NumPy's helpers get it, a Python int (weak: q's dtype decides), or
    # each length as a column typed to promote as that Python int does with q
    count: Any = n
    if lengths:
        count = np.arange(1, n + 1).reshape(-1, 1).astype(
            qa.dtype if qa.dtype.kind == "f" else np.int64)
        qa = qa.reshape(1, -1)
    props = methods[method]
    with np.errstate(all="ignore"):
        virtual = np.asanyarray(props["get_virtual_index"](count, qa))
        if props["fix_gamma"] is None or (method == "linear" and
                                          np.issubdtype(virtual.dtype, np.integer)):
            idx = virtual.astype(np.int64)       # ``take``: no interpolation
            size = np.broadcast_to(np.asarray(count, np.int64), idx.shape)
            idx = np.where(idx < 0, idx + size, idx)
            if np.any(idx < 0) or np.any(idx >= size):   # NumPy's take would raise: its call
                return None
            idx = idx.ravel()
            zeros = np.zeros(idx.shape, dtype)
            return QuantilePlan(idx, idx, np.zeros(idx.shape, np.int64), zeros, zeros, dtype)
        if dtype.kind == "b":   # (NumPy's interpolation subtracts bools: it raises)
            return None
        prev, nxt = get_indexes(np.empty(0, dtype), virtual, count)
        gamma = get_gamma(virtual, prev, props)
        # a Python-scalar q is NEP 50's weak scalar: the weights are cast to the values'
        # dtype (NumPy converts ``float(gamma)`` and ``1 - float(gamma)``, the same values),
        # float64 for integer values
        if weak:
            res = dtype if dtype.kind == "f" else np.dtype(np.float64)
        else:
            res = np.result_type(dtype, gamma.dtype)
        t = gamma.astype(res).ravel()
        omt = (1 - gamma).astype(res).ravel()
        high = (gamma >= 0.5).ravel()
    last = np.broadcast_to(np.asarray(count, np.int64) - 1, np.shape(prev))
    prev = np.where(prev < 0, last, prev).astype(np.int64)
    nxt = np.where(nxt < 0, last, nxt).astype(np.int64)
    if np.any(prev > last) or np.any(nxt > last):   # (not for a valid q: then NumPy's call)
        return None
    prev, nxt = prev.ravel(), nxt.ravel()
    return QuantilePlan(prev, nxt, np.where(high, 2, 1).astype(np.int64), t, omt,
                        np.dtype(res))


def _order_statistic_shape(shapes: Sequence[Shape], attrs: dict) -> tuple[Shape, ...]:
    shape, axis = shapes[0], attrs["axis"]
    if numpy_moves_q_axes(attrs):
        return (_numpy_quantile_layout(shape, attrs),)
    axes = range(len(shape)) if axis is None else axis
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape)) if attrs["keepdims"] \
        else tuple(n for d, n in enumerate(shape) if d not in axes)
    return (tuple(attrs["q_shape"]) + kept,)


def numpy_moves_q_axes(attrs: dict) -> bool:
    """Whether NumPy lays this order statistic's result out in its own way: np.nanquantile
    and np.nanpercentile of a q of two or more dimensions over several axes but not all
    (or ``axis=()``) merge the axes last and then move q's axes with a negative axis
    (``_nanquantile_ureduce_func``, NumPy 2.x): q's last axis ends up last, after the kept
    ones. The result is NumPy's, in NumPy's layout (``_numpy_quantile_layout``); the GPU's
    kernel, which writes q's axes first, leaves such calls to the host."""
    axis = attrs["axis"]
    return attrs["func"] in ("nanquantile", "nanpercentile") and \
        len(attrs["q_shape"]) >= 2 and axis is not None and len(axis) != 1 and \
        len(axis) < attrs["ndim"]


MAX_LAYOUT_STANDIN = 8192   # elements of the stand-in that finds NumPy's layout, at most


def _numpy_quantile_layout(shape: Shape, attrs: dict) -> Shape:
    """NumPy's result shape, found by its own function on a stand-in whose kept axes have
    distinct lengths, none of them q's (its reduced axes length 1): each axis of the
    stand-in's result is then known by its length."""
    q_shape, axis = tuple(attrs["q_shape"]), attrs["axis"]
    lengths = (k for k in itertools.count(2) if k not in q_shape)   # (the smallest such)
    real: dict[int, int] = {}
    standin = []
    for d, n in enumerate(shape):
        if d in axis:
            standin.append(1)
        else:
            standin.append(next(lengths))
            real[standin[-1]] = n
    found = None
    if math.prod(standin) <= MAX_LAYOUT_STANDIN:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = order_statistic_call(np.zeros(standin), None, **attrs).shape
    if found is None or any(n not in real and n != 1 and n not in q_shape for n in found):
        from ..errors import UnsupportedOperationError, with_location
        raise UnsupportedOperationError(with_location(
            f"np.{attrs['func']} of a q of {len(q_shape)} dimensions over the axes {axis} of "
            f"a {len(shape)}-dimensional array (NumPy lays this result out in its own way, "
            f"which tracearray follows only for arrays of a few dimensions): pass q as a "
            f"1-d array and reshape the result"))
    return tuple(real.get(n, n) for n in found)


def _order_statistic_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> tuple[np.dtype, ...]:
    """NumPy's result dtype: its function run on a one-element stand-in of the dtype."""
    standin = np.ones((1,) * attrs["ndim"], dtype=dtypes[0])
    weights = np.ones_like(standin, dtypes[1]) if len(dtypes) > 1 else None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (order_statistic_call(standin, weights, **attrs).dtype,)


register_external("order_statistic", _order_statistic_shape, _order_statistic_dtype,
                  returning(order_statistic_call),
                  what="NumPy's median / quantile (introselect)", arity=-1, domain=_ANY)


# np.unique: NumPy's own (its sort, or its hash table for integers without flags; along an
# axis it compares whole slices as records). The number of distinct values (slices) is a size
# the data decides: ``unique_count`` is probed first, then ``unique`` runs with it (and checks
# it). ``axis`` is None (the flattened array) or a non-negative int.
_UNIQUE_FLAGS = ("return_index", "return_inverse", "return_counts")


def _unique_count(x: np.ndarray, *, axis: int | None, equal_nan: bool, sorted: bool,
                  **flags: bool) -> np.ndarray:
    """The number of distinct values ``_unique`` will find: NumPy's unique with the same
    flags, which choose its method (NumPy 2.4's float16 unique without flags, a hash table,
    returns duplicates that its sort-based path with ``return_inverse`` does not)."""
    values = np.unique(x, axis=axis, equal_nan=equal_nan, sorted=sorted, **flags)
    values = values[0] if isinstance(values, tuple) else values
    return np.int64(values.shape[0 if axis is None else axis])


def _unique(x: np.ndarray, *, axis: int | None, count: int, equal_nan: bool, sorted: bool,
            **flags: bool) -> tuple:
    got = np.unique(x, axis=axis, equal_nan=equal_nan, sorted=sorted, **flags)
    got = got if isinstance(got, tuple) else (got,)
    if got[0].shape[0 if axis is None else axis] != count:
        # the probe saw other values: in a compiled call it sees these very values, so this
        # is the comparator evaluating the graph on NumPy's values, which may hold more or
        # fewer distinct ones than the compiled function's (an ulp apart): a ValueError, as
        # for a mask whose count differs (testing/compare.py then checks whether the count
        # is determined by NumPy's values within the tolerances)
        raise ValueError(f"np.unique: {got[0].shape[0 if axis is None else axis]} distinct "
                         f"values where the graph was traced for {count}")
    return got


def _unique_shapes(shapes: Sequence[Shape], attrs: dict) -> tuple[Shape, ...]:
    shape, axis, count = shapes[0], attrs["axis"], attrs["count"]
    if axis is None:
        values, inverse = (count,), tuple(shape)   # NumPy 2: the inverse has x's shape
    else:
        values = tuple(count if d == axis else n for d, n in enumerate(shape))
        inverse = (shape[axis],)
    extra = {"return_index": (count,), "return_inverse": inverse, "return_counts": (count,)}
    return (values,) + tuple(extra[f] for f in _UNIQUE_FLAGS if attrs[f])


def _unique_dtypes(dtypes: Sequence[np.dtype], attrs: dict) -> tuple[np.dtype, ...]:
    return (np.dtype(dtypes[0]),) + (INTP,) * sum(bool(attrs[f]) for f in _UNIQUE_FLAGS)


# np.unique of complex values (the flattened array): NumPy's own on the (..., 2) real pair
# memory read as complex, the values returned as pairs again; on the host on both targets.
def _as_complex(pairs: np.ndarray) -> np.ndarray:
    pairs = np.ascontiguousarray(pairs)
    return pairs.view(np.result_type(pairs.dtype, np.complex64))[..., 0]


def _unique_complex_count(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return _unique_count(_as_complex(x), axis=None, **attrs)


def _unique_complex(x: np.ndarray, *, count: int, **attrs: Any) -> tuple:
    got = _unique(_as_complex(x), axis=None, count=count, **attrs)
    return (np.stack([got[0].real, got[0].imag], axis=-1),) + got[1:]


def _unique_complex_shapes(shapes: Sequence[Shape], attrs: dict) -> tuple[Shape, ...]:
    values, *rest = _unique_shapes([tuple(shapes[0][:-1])], {**attrs, "axis": None})
    return (tuple(values) + (2,),) + tuple(rest)


register_external("unique_complex_count", lambda shapes, attrs: ((),),
                  lambda dtypes, attrs: (np.dtype(np.int64),), returning(_unique_complex_count),
                  what="NumPy's unique of complex values (the count)", domain=_ANY)
register_external("unique_complex", _unique_complex_shapes, _unique_dtypes,
                  returning(_unique_complex), what="NumPy's unique of complex values",
                  domain=_ANY)
register_external("unique_count", lambda shapes, attrs: ((),),
                  lambda dtypes, attrs: (np.dtype(np.int64),), returning(_unique_count),
                  what="NumPy's unique (the count)", domain=_ANY)
register_external("unique", _unique_shapes, _unique_dtypes, returning(_unique),
                  what="NumPy's unique", domain=_ANY)
