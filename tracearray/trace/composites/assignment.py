"""NumPy functions that write into an array: np.copyto, np.putmask, np.place, np.put.

They write through the tracer's memory (``trace/buffers.py``), as ``a[...] = v`` does, so
every view and name of the array sees the new values and an argument's are written back to
the caller. Their test calls wrap the call in a function that returns the array written to.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import with_location
from ..build import check_python_int, holds_traced, known_value, unsupported
from ..tracer import Tracer
from . import NUMERIC, as_tracer, composite
from .indexing import safe_indices


def _written(what: str) -> str:
    """A test call: ``what`` (NumPy source writing into ``t``) on a copy of ``{0}``, then t."""
    return f"(lambda t: ({what}, t)[1])({{0}}.copy())"


def _values_as(v: Any, dtype: np.dtype, safe_arrays: bool = False) -> Tracer:
    """np.put's, np.putmask's and np.place's values in the target's dtype: traced values and
    arrays cast (unsafe; ``safe_arrays``: arrays, not NumPy scalars, by the 'safe' rule, as
    np.putmask and np.place take them), Python numbers and lists converted as NumPy converts
    them (an int out of the dtype's range raises OverflowError, as in NumPy 2)."""
    if isinstance(v, np.ndarray) or holds_traced(v):
        scalar = isinstance(v, Tracer) and v._is_numpy_scalar()
        if safe_arrays and not scalar and isinstance(v, (Tracer, np.ndarray)) and \
                not np.can_cast(v.dtype, dtype, "safe"):
            raise TypeError(with_location(
                f"Cannot cast array data from {v.dtype!r} to {np.dtype(dtype)!r} according "
                f"to the rule 'safe'"))
        return as_tracer(v).astype(dtype)
    try:
        return as_tracer(np.asarray(v, dtype=dtype))
    except OverflowError as e:
        raise OverflowError(with_location(str(e))) from None


def _target(a: Any, fn: str) -> Tracer:
    if not isinstance(a, Tracer):
        raise unsupported(f"np.{fn} into a NumPy array the function does not trace")
    return a


@composite(np.copyto, calls=[_written("np.copyto(t, {1})"),
                             _written("np.copyto(t, {1}, where={1} > 0)"),
                             _written("np.copyto(t, 3, casting='unsafe')")],
           arrays=2, same_shape=True)
def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    d = _target(dst, "copyto")
    # (a Python number is NEP 50's weak scalar: np.copyto(uint8_array, 0) is fine, its
    # range checked below; a Python float into integers is same_kind's TypeError)
    src_dt = src.dtype if isinstance(src, Tracer) else \
        np.result_type(d.dtype, type(src)(0)) if type(src) in (bool, int, float, complex) \
        else np.asarray(src).dtype
    if not np.can_cast(src_dt, d.dtype, casting=casting):
        raise TypeError(with_location(
            f"Cannot cast array data from {src_dt!r} to {d.dtype!r} according to the rule "
            f"{casting!r}"))
    check_python_int(src, d.dtype)
    value = as_tracer(src).astype(d.dtype)
    if where is not True:
        value = np.where(where, value, d)
    d[...] = value


@composite(np.putmask, calls=[_written("np.putmask(t, {1} > 0, {1})"),
                              _written("np.putmask(t, {0} > 0, [7, 8])")],
           arrays=2, same_shape=True, dtypes=NUMERIC)
def putmask(a: Any, mask: Any, values: Any) -> None:
    """``a.flat[n] = values.flat[n % values.size]`` wherever ``mask.flat[n]``."""
    t = _target(a, "putmask")
    m = as_tracer(mask)
    if m.size != t.size:
        raise ValueError(with_location("putmask: mask and data must be the same size"))
    v = _values_as(values, t.dtype, safe_arrays=True).reshape(-1)
    if v.size == 0:
        return
    if v.size != t.size:
        v = v[np.arange(t.size) % v.size]
    t[...] = np.where(m.astype(bool).reshape(t.shape), v.reshape(t.shape), t)


@composite(np.place, calls=[_written("np.place(t, {0} > 0, {1}[:2].ravel())"),
                            _written("np.place(t, {1} < 0, [1, 2, 3])")],
           arrays=2, same_shape=True, dtypes=NUMERIC, min_dims=1)
def place(arr: Any, mask: Any, vals: Any) -> None:
    """The k-th element where ``mask`` is True (C order) takes ``vals[k % len(vals)]``."""
    t = _target(arr, "place")
    m = as_tracer(mask).astype(bool)
    if m.size != t.size:
        raise ValueError(with_location("place: mask and data must be the same size"))
    v = _values_as(vals, t.dtype, safe_arrays=True).reshape(-1)
    if v.size == 0:
        # NumPy raises only when some element is to be replaced: a run-time check
        from .. import context
        context.require(np.logical_not(m.any()).node, ValueError,
                        "Cannot insert from an empty array!")
        return
    k = np.cumsum(m.reshape(-1).astype(np.int64)) - 1
    picked = np.take(v, k, mode="wrap").astype(t.dtype).reshape(t.shape)
    t[...] = np.where(m.reshape(t.shape), picked, t)


@composite(np.put, calls=[_written("np.put(t, [0, -1], {1}.ravel()[:2])"),
                          _written("np.put(t, [1, 5, 1], [7, 8, 9], mode='wrap')"),
                          # (traced indices that stay small: NumPy's own put in mode 'wrap'
                          # loops |i| / n times per index, so a drawn huge one would hang it)
                          _written("np.put(t, ({1} > 0).ravel().astype(np.int64) * 5 - 2, "
                                   "{0}.ravel(), mode='wrap')"),
                          _written("np.put(t, ({1}.ravel() * 3).astype(np.int32), [5, 6], "
                                   "mode='clip')")],
           arrays=2, same_shape=True, dtypes=NUMERIC, min_dims=1)
def put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    """``a.flat[ind] = v`` (v repeated to ind's length), ``mode`` as np.take's."""
    t = _target(a, "put")
    n = t.size
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(with_location(f"clipmode must be one of 'clip', 'raise', or 'wrap' "
                                       f"(got {mode!r})"))
    traced = isinstance(ind, Tracer) and known_value(ind.node) is None
    if traced:
        # traced indices: a scatter (the kernel checks them in mode 'raise')
        safe_indices(ind.dtype)
        idx = ind.reshape(-1).astype(np.int64)
    elif isinstance(ind, (list, tuple)) and not holds_traced(ind):
        # (NumPy converts a sequence straight to intp, as np.array(ind, np.intp) does: [] and
        # [1.0] are indices; an array is cast under the 'safe' rule)
        try:
            idx = np.array(ind, dtype=np.intp).reshape(-1)
        except (TypeError, ValueError) as e:
            raise type(e)(with_location(str(e))) from None
    else:
        idx = np.asarray(known_value(ind.node) if isinstance(ind, Tracer) else ind)
        safe_indices(idx.dtype)
        idx = idx.astype(np.int64).reshape(-1)
    if idx.size == 0:
        return
    if n == 0:
        raise IndexError(with_location("cannot replace elements of an empty array"))
    if mode == "wrap":
        idx = np.mod(idx, n)
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    elif not traced:      # known indices are checked now, NumPy's way
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError(with_location(
                f"index {int(idx[bad][0])} is out of bounds for axis 0 with size {n}"))
        idx = np.where(idx < 0, idx + n, idx)
    _put_values(t, idx, v)


def _put_values(t: Tracer, idx: Any, v: Any) -> None:
    """``t.flat[idx] = v`` with v repeated (or cut) to idx's length, as np.put does."""
    vals = _values_as(v, t.dtype).reshape(-1)
    if vals.size == 0:
        return
    if vals.size != idx.size:
        vals = vals[np.arange(idx.size) % vals.size]
    t.flat[idx] = vals.astype(t.dtype)
