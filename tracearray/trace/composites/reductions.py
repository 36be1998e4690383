"""NumPy's reductions and statistics: the ndarray methods' functions, the nan-aware family,
``average``, ``ptp``, ``count_nonzero`` and cumulative sums (numpy/_core/_methods.py and
numpy/lib/_nanfunctions_impl.py, step by step)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import context
from .. import numpy_api as api
from ..build import check_where, inexact_dtype, normalize_axes, unsupported
from ...errors import with_location
from ..tracer import (Tracer, check_index_out, no_out, reduction, staged_number, store_out,
                      unwrap)
from . import ALL, FLOATS, NUMERIC, as_tracer, composite


def _keep(keepdims: Any) -> bool:
    return False if keepdims is np._NoValue else bool(keepdims)


def _reduce_fn(kind: str, with_dtype: bool):
    if with_dtype:
        def fn(a, axis=None, dtype=None, out=None, keepdims=np._NoValue,  # type: ignore[no-untyped-def]
               initial=np._NoValue, where=True):
            return reduction(kind, as_tracer(a), axis, dtype, out, keepdims, initial, where)
    else:
        def fn(a, axis=None, out=None, keepdims=np._NoValue, initial=np._NoValue,  # type: ignore[no-untyped-def]
               where=True):
            return reduction(kind, as_tracer(a), axis, None, out, keepdims, initial, where)
    return fn


def _bool_reduce_fn(kind: str):
    def fn(a, axis=None, out=None, keepdims=np._NoValue, *, where=True):  # type: ignore[no-untyped-def]
        return reduction(kind, as_tracer(a), axis, None, out, keepdims, np._NoValue, where)
    return fn


_RED_CALLS = ["np.sum({0})", "np.sum({0}, axis=-1, keepdims=True)",
              "np.sum({0}, axis=0, where={0} > 0)", "np.sum({0}, initial=3)"]
composite(np.sum, calls=_RED_CALLS, impl=_reduce_fn("sum", True),
          divergences=("float-sum-reassociation",))
composite(np.prod, calls=['np.prod({0}, axis=-1)', 'np.prod({0}, where={0} > 0)'],
          impl=_reduce_fn("prod", True), values="small",
          divergences=("float-prod-reassociation",))
for _f in (np.max, np.amax):
    composite(_f, calls=[f"np.{_f.__name__}({{0}}, axis=-1, initial=-5)",
                         f"np.{_f.__name__}({{0}}, axis=0, where={{0}} < 3, initial=-7)"],
              min_dims=1, impl=_reduce_fn("max", False))
for _f in (np.min, np.amin):
    composite(_f, calls=[f"np.{_f.__name__}({{0}}, axis=-1, initial=5)"], min_dims=1,
              impl=_reduce_fn("min", False))
composite(np.any, calls=['np.any({0})', 'np.any({0}, axis=-1, where={0} < 1)'],
          impl=_bool_reduce_fn("any"))
composite(np.all, calls=['np.all({0}, axis=0)'], impl=_bool_reduce_fn("all"))


def _stat_fn(name: str):
    def fn(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *,  # type: ignore[no-untyped-def]
           where=True, mean=np._NoValue, correction=np._NoValue):
        t = as_tracer(a)
        if name == "mean":
            return t.mean(axis, dtype, out, _keep(keepdims), where=where)
        method = getattr(t, name)
        return method(axis, dtype, out, ddof, _keep(keepdims), where=where, mean=mean,
                      correction=correction)
    return fn


def _mean_fn(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, *, where=True):  # type: ignore[no-untyped-def]
    return as_tracer(a).mean(axis, dtype, out, _keep(keepdims), where=where)


composite(np.mean, calls=['np.mean({0})', 'np.mean({0}, axis=-1, where={0} > 0)'],
          impl=_mean_fn, divergences=("float-sum-reassociation",))
composite(np.var, calls=['np.var({0}, axis=-1)', 'np.var({0}, ddof=1)'],
          impl=_stat_fn("var"), values="small", divergences=("float-sum-reassociation",))
composite(np.std, calls=['np.std({0}, axis=0, keepdims=True)'], impl=_stat_fn("std"),
          values="small", divergences=("float-sum-reassociation",))


def _arg_fn(kind: str):
    def fn(a, axis=None, out=None, *, keepdims=np._NoValue):  # type: ignore[no-untyped-def]
        check_index_out(out)
        return store_out(f"np.{kind}", Tracer(api.arg_reduce(kind, unwrap(as_tracer(a)), axis,
                                                             _keep(keepdims))), out,
                         exact=True)
    return fn


composite(np.argmax, calls=['np.argmax({0})', 'np.argmax({0}, axis=-1)'],
          min_dims=1, impl=_arg_fn("argmax"))
composite(np.argmin, calls=['np.argmin({0}, axis=0)'], min_dims=1, impl=_arg_fn("argmin"))


def _cumulative(kind: str):
    def fn(a, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        # (accumulated in out's dtype when out= is given and dtype= is not, as NumPy's)
        return getattr(as_tracer(a), kind)(axis, dtype, out)
    return fn


composite(np.cumsum, calls=['np.cumsum({0})', 'np.cumsum({0}, axis=-1)'],
          impl=_cumulative("cumsum"))
composite(np.cumprod, calls=['np.cumprod({0}, axis=0)'], values="small",
          impl=_cumulative("cumprod"))


def _cumulative_new(kind: str):
    """NumPy 2.1's ``cumulative_sum`` / ``cumulative_prod``: an ``axis`` is required for
    more than one dimension, and ``include_initial`` prepends the identity."""
    def fn(x, /, *, axis=None, dtype=None, out=None, include_initial=False):  # type: ignore[no-untyped-def]
        no_out(f"np.cumulative_{kind[3:]}", out)
        t = as_tracer(x)
        if t.ndim == 0:
            t = t.reshape(1)   # (NumPy's: a 0-d array is scanned as one element)
        if axis is None:
            if t.ndim != 1:
                raise ValueError(with_location(
                    "For arrays which have more than one dimension ``axis`` argument is "
                    "required."))
            axis = 0
        r = Tracer(api.scan(kind, t.node, axis, dtype))
        if include_initial:
            (ax,) = normalize_axes(axis, r.ndim, f"cumulative_{kind[3:]}")
            shape = list(r.shape)
            shape[ax] = 1
            first = np.full(shape, 0 if kind == "cumsum" else 1, r.dtype)
            r = np.concatenate([first, r], axis=ax)
        return r
    return fn


if hasattr(np, "cumulative_sum"):
    composite(np.cumulative_sum, calls=['np.cumulative_sum({0}, axis=-1, include_initial=True)'],
              min_dims=1, impl=_cumulative_new("cumsum"))
    composite(np.cumulative_prod, calls=['np.cumulative_prod({0}, axis=0)'],
              min_dims=1, values="small", impl=_cumulative_new("cumprod"))


# ------------------------------------------------------------------------------------------
# ptp, count_nonzero, average
# ------------------------------------------------------------------------------------------

@composite(np.ptp, calls=['np.ptp({0})', 'np.ptp({0}, axis=-1)'], dtypes=NUMERIC,
           min_dims=1)
def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: Any = np._NoValue) -> Tracer:
    """numpy/_core/fromnumeric.py: maximum - minimum (wrapping for integers)."""
    no_out("np.ptp", out)
    t = as_tracer(a)
    k = _keep(keepdims)
    return np.subtract(t.max(axis, keepdims=k), t.min(axis, keepdims=k))


@composite(np.count_nonzero, calls=['np.count_nonzero({0})',
                                    'np.count_nonzero({0}, axis=-1)'])
def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Tracer:
    """The number of non-zero elements: an intp (0-d with axis=None, as NumPy's int)."""
    t = as_tracer(a)
    return np.sum(t.astype(bool), axis=axis, keepdims=keepdims, dtype=np.intp)


@composite(np.average, calls=['np.average({0})', 'np.average({0}, weights={1})',
                              'np.average({0}, axis=-1, weights={1}[..., ::-1])'],
           arrays=2, dtypes=FLOATS, same_shape=True, values="small",
           divergences=("float-sum-reassociation",))
def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: Any = np._NoValue) -> Any:
    """numpy/lib/_function_base_impl.py::average: sum(a * w) / sum(w) in the result dtype of
    a, w and float64 for integers. A zero sum of weights raises ZeroDivisionError in NumPy:
    a run-time check here."""
    t = as_tracer(a)
    k = _keep(keepdims)
    if weights is None:
        avg = t.mean(axis, keepdims=k)
        scl = np.broadcast_to(np.asarray(t.size / max(avg.size, 1), avg.dtype), avg.shape) \
            if returned else None
        return (avg, scl) if returned else avg
    w = as_tracer(weights)
    res_dt = np.result_type(t.dtype, w.dtype, np.float64) if t.dtype.kind in "biu" else \
        np.result_type(t.dtype, w.dtype)
    if t.shape != w.shape:
        if axis is None:
            raise TypeError(with_location(
                "Axis must be specified when shapes of a and weights differ."))
        # NumPy 2: weights shaped like a along the axes, in the order given
        try:
            axes = np.lib.array_utils.normalize_axis_tuple(axis, t.ndim, argname="axis")
        except np.exceptions.AxisError as e:
            raise np.exceptions.AxisError(with_location(str(e))) from None
        if w.shape != tuple(t.shape[ax] for ax in axes):
            raise ValueError(with_location(
                "Shape of weights must be consistent with shape of a along specified axis."))
        w = w.transpose(np.argsort(axes)).reshape(
            tuple(n if d in axes else 1 for d, n in enumerate(t.shape)))
    scl = np.sum(w.astype(res_dt), axis=axis, keepdims=k)
    context.require(np.all(scl != 0).node, ZeroDivisionError,
                    "Weights sum to zero, can't be normalized")
    # NumPy multiplies in the result dtype (np.multiply(a, w, dtype=...)): integer products
    # would wrap before the cast (uint8 200 * 3)
    avg = np.sum(np.multiply(t.astype(res_dt), w.astype(res_dt)), axis=axis, keepdims=k) / scl
    if returned:
        # (NumPy's own: the sum of weights itself where it has avg's shape, else a copy of
        # its broadcast: writeable either way)
        return avg, scl if scl.shape == avg.shape else np.broadcast_to(scl, avg.shape).copy()
    return avg


# ------------------------------------------------------------------------------------------
# nan-aware reductions (numpy/lib/_nanfunctions_impl.py)
# ------------------------------------------------------------------------------------------

def _nan_replaced(t: Tracer, fill: Any) -> Tracer:
    """``t`` with NaN replaced by ``fill`` (integers and bools have no NaN: unchanged)."""
    if t.dtype.kind != "f":
        return t
    return np.where(np.isnan(t), np.asarray(fill, t.dtype), t)


def _nan_sum_like(kind: str, fill: float):
    def fn(a, axis=None, dtype=None, out=None, keepdims=np._NoValue,  # type: ignore[no-untyped-def]
           initial=np._NoValue, where=True):
        t = _nan_replaced(as_tracer(a), fill)
        return reduction(kind, t, axis, dtype, out, keepdims, initial, where)
    return fn


composite(np.nansum, calls=['np.nansum({0})', 'np.nansum({0}, axis=-1)'],
          impl=_nan_sum_like("sum", 0.0), divergences=("float-sum-reassociation",))
composite(np.nanprod, calls=['np.nanprod({0}, axis=0)'], values="small",
          impl=_nan_sum_like("prod", 1.0), divergences=("float-prod-reassociation",))


def _nan_extreme(kind: str):
    """nanmax / nanmin: ``fmax`` / ``fmin`` reductions (NaN only where a whole slice is NaN,
    where NumPy returns NaN with a RuntimeWarning); integers: max / min."""
    def fn(a, axis=None, out=None, keepdims=np._NoValue, initial=np._NoValue,  # type: ignore[no-untyped-def]
           where=True):
        t = as_tracer(a)
        prim = kind if t.dtype.kind != "f" else {"max": "reduce_fmax", "min": "reduce_fmin"}[kind]
        no_out(f"np.nan{kind}", out)
        return Tracer(api.reduce_with(prim, t.node, axis, _keep(keepdims), None, initial,
                                      unwrap(check_where(where))))
    return fn


composite(np.nanmax, calls=['np.nanmax({0}, axis=-1)', 'np.nanmax({0})'],
          min_dims=1, impl=_nan_extreme("max"))
composite(np.nanmin, calls=['np.nanmin({0}, axis=0)'], min_dims=1,
          impl=_nan_extreme("min"))


@composite(np.nanmean, calls=['np.nanmean({0})', 'np.nanmean({0}, axis=-1)'],
           divergences=("float-sum-reassociation",))
def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: Any = np._NoValue, *, where: Any = True) -> Tracer:
    """The mean of the non-NaN elements (NaN for an all-NaN slice, with NumPy's warning)."""
    no_out("np.nanmean", out)
    t = as_tracer(a)
    if t.dtype.kind != "f":
        return t.mean(axis, dtype, keepdims=_keep(keepdims), where=where)
    inexact_dtype(dtype)
    mask = ~np.isnan(t) if where is True else np.logical_and(~np.isnan(t), where)
    if t.dtype == np.float16 and dtype is None:
        # NumPy's nanmean sums in float16 itself (np.mean sums float16 in float32), then
        # divides by the count in float64 and casts back (_divide_by_count)
        ax, keep = _nan_axis(t, axis), _keep(keepdims)
        total = np.sum(np.where(mask, t, np.float16(0)), axis=ax, keepdims=keep)
        count = np.sum(mask, axis=ax, dtype=np.intp, keepdims=keep)
        return np.true_divide(total.astype(np.float64), count).astype(np.float16)
    return t.mean(_nan_axis(t, axis), dtype, keepdims=_keep(keepdims), where=mask)


def _nan_axis(t: Tracer, axis: Any) -> Any:
    """The nan-functions reduce with np.sum, so they accept an int axis 0 or -1 on a 0-d array
    as the ufunc reductions do (np.mean and np.var themselves refuse it)."""
    return None if api._zero_d_int_axis(t.node, axis) else axis


def _nan_var(name: str):
    def fn(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *,  # type: ignore[no-untyped-def]
           where=True, mean=np._NoValue, correction=np._NoValue):
        no_out(f"np.{name}", out)
        t = as_tracer(a)
        ddof, correction = staged_number(ddof), staged_number(correction)
        if t.dtype.kind != "f":   # (NumPy's np.var / np.std: no NaN to skip)
            return getattr(np, name[3:])(t, axis, dtype, None, ddof, keepdims, where=where,
                                         mean=mean, correction=correction)
        dt = inexact_dtype(dtype)   # (a complex dtype: complex_ops' rule)
        if dt is not None and dt != t.dtype and mean is np._NoValue:
            return _nan_var_in(t, name, axis, dt, ddof, keepdims, where, correction)
        method = getattr(t, name[3:])
        mask = ~np.isnan(t) if where is True else np.logical_and(~np.isnan(t), where)
        ax, keep = _nan_axis(t, axis), _keep(keepdims)
        r = method(ax, dtype, None, ddof, keep, where=mask, mean=mean, correction=correction)
        # NumPy's nanvar: NaN where ddof leaves no degree of freedom (np.var divides by 0)
        d = ddof if correction is np._NoValue else correction
        dof = np.sum(mask, axis=ax, keepdims=bool(keep)) - d
        return np.where(dof <= 0, r.dtype.type(np.nan), r)
    return fn


def _nan_var_in(t: Tracer, name: str, axis: Any, dt: np.dtype, ddof: Any, keepdims: Any,
                where: Any, correction: Any) -> Tracer:
    """np.nanvar / np.nanstd with a ``dtype=`` other than the values': NumPy sums the mean
    in ``dt``, stores the deviations back into a copy of the values (their dtype: out=arr,
    casting='unsafe'), squares them there and sums the squares in ``dt``."""
    if correction is not np._NoValue:
        if ddof != 0:
            raise ValueError(with_location(
                "ddof and correction can't be provided simultaneously."))
        ddof = correction
    mask = ~np.isnan(t) if where is True else np.logical_and(~np.isnan(t), where)
    ax, keep = _nan_axis(t, axis), _keep(keepdims)
    arr = np.where(mask, t, t.dtype.type(0))
    count = np.sum(mask, axis=ax, dtype=np.intp, keepdims=True)
    avg = np.sum(arr, axis=ax, dtype=dt, keepdims=True, where=mask)
    avg = np.true_divide(avg, count).astype(dt)
    dev = np.where(mask, (arr - avg).astype(t.dtype), t.dtype.type(0))
    var = np.sum(dev * dev, axis=ax, dtype=dt, keepdims=keep, where=mask)
    dof = np.sum(mask, axis=ax, dtype=np.intp, keepdims=keep) - ddof
    var = np.where(dof <= 0, dt.type(np.nan), np.true_divide(var, dof).astype(dt))
    return np.sqrt(var) if name == "nanstd" else var


composite(np.nanvar, calls=['np.nanvar({0}, axis=-1)'], values="small",
          impl=_nan_var("nanvar"), divergences=("float-sum-reassociation",))
composite(np.nanstd, calls=['np.nanstd({0}, ddof=1)'], values="small",
          impl=_nan_var("nanstd"), divergences=("float-sum-reassociation",))


def _nan_arg(kind: str):
    """nanargmax / nanargmin: the arg-reduction with NaN replaced by the worst value; NumPy
    raises ValueError for an all-NaN slice: a run-time check here."""
    def fn(a, axis=None, out=None, *, keepdims=np._NoValue):  # type: ignore[no-untyped-def]
        no_out(f"np.nan{kind}", out)
        t = as_tracer(a)
        if t.dtype.kind != "f":
            return Tracer(api.arg_reduce(kind, t.node, axis, _keep(keepdims)))
        nan = np.isnan(t)
        context.require(np.all(~np.all(nan, axis=axis)).node, ValueError,
                        "All-NaN slice encountered")
        worst = -np.inf if kind == "argmax" else np.inf
        return Tracer(api.arg_reduce(kind, _nan_replaced(t, worst).node, axis,
                                     _keep(keepdims)))
    return fn


composite(np.nanargmax, calls=['np.nanargmax({0}, axis=-1)'], min_dims=1, dtypes=NUMERIC,
          impl=_nan_arg("argmax"))
composite(np.nanargmin, calls=['np.nanargmin({0})'], min_dims=1, dtypes=NUMERIC,
          impl=_nan_arg("argmin"))


def _nan_cumulative(kind: str, fill: float):
    def fn(a, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        no_out(f"np.nan{kind}", out)
        t = _nan_replaced(as_tracer(a), fill)
        return Tracer(api.scan(kind, t.node, axis, dtype))
    return fn


composite(np.nancumsum, calls=['np.nancumsum({0}, axis=-1)'],
          impl=_nan_cumulative("cumsum", 0.0))
composite(np.nancumprod, calls=['np.nancumprod({0})'], values="small",
          impl=_nan_cumulative("cumprod", 1.0))

__all__ = ["ptp", "count_nonzero", "average", "nanmean", "ALL", "unsupported"]
