"""NumPy's protocols on tracers: which implementation a ufunc call or a NumPy function call gets.

``ufunc(ufunc, method, inputs, kwargs)`` (from ``Tracer.__array_ufunc__``):

- a ufunc that is a primitive of the registry becomes its node (``numpy_api.apply_ufunc``);
  a ufunc that is a composite (``logaddexp``, ``divmod``, ``vecdot``, ...) runs its expansion;
- ``reduce`` / ``accumulate`` use the reduction / scan primitive whose reducer is that ufunc
  (``sum`` for ``np.add.reduce``, ``cummax`` for ``np.maximum.accumulate``); ``outer`` is the
  ufunc of the operands broadcast against each other, for every ufunc.

``function(func, args, kwargs)`` (from ``Tracer.__array_function__``): the composite
registered for ``func`` (``tracearray.trace.composites``), else NumPy's own Python
implementation run on the tracers (argument conversion passes them through while tracing, see
``context``), else ``UnsupportedOperationError``. An error raised inside NumPy's implementation
is reported as that function's, at the user's line.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import numpy as np

from ..ops import UFUNC_OPS, reducer_of_ufunc, scan_of_ufunc
from . import complex as complex_values
from . import composites, context
from . import numpy_api as api
from .build import check_where, known_value, normalize_axes, unsupported
from ..errors import ConcretizationError, UnsupportedOperationError, with_location


def numpy_name(func: Any) -> str:
    """``np.concatenate``, ``np.linalg.norm``, ``np.fft.rfft``: the name users write."""
    if isinstance(func, np.ufunc):
        return f"np.{func.__name__}"
    module = getattr(func, "__module__", None) or "numpy"
    name = getattr(func, "__name__", repr(func))
    if module.startswith("numpy"):
        parts = [p for p in module.split(".")[1:] if not p.startswith("_")]
        public = [p for p in parts if p in ("linalg", "fft", "random", "ma", "polynomial",
                                            "lib", "strings", "char", "testing")]
        prefix = ".".join(["np"] + [p for p in public if p != "lib"])
        return f"{prefix}.{name}"
    return f"{module}.{name}"


# ============================================================================================
# ufuncs
# ============================================================================================

_IGNORED_KW = {"order": ("K", "C", "A", "F", None), "subok": (True, False)}
# ufuncs whose .reduce is a composite (``composites.ufuncs.logaddexp_reduce``)
REDUCE_COMPOSITES = (np.logaddexp, np.logaddexp2)


def _composite_in_dtype(uf: np.ufunc, impl: Callable, inputs: tuple, kwargs: dict,
                        dtype: Any, casting: str, name: str) -> Any:
    """A ufunc tracearray computes as a composite, called with ``dtype=``: the loop NumPy
    selects for that output dtype (``signature=(..., dtype)``), its inputs cast to the loop's
    input dtypes and the results to its output dtypes (np.fabs(int8, dtype=np.float64) is the
    float64 loop, not float16's)."""
    from .build import dtype_key
    from .composites import as_tracer
    keys = tuple(x.dtype if hasattr(x, "dtype") else
                 np.asarray(x).dtype if isinstance(x, (list, tuple)) else dtype_key(x)
                 for x in inputs)
    from .numpy_api import numpy_error, resolve_loop
    sig = (None,) * uf.nin + (np.dtype(dtype),) * uf.nout
    try:
        loop = resolve_loop(uf, keys, inputs, signature=sig, casting=casting)
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise numpy_error(e, f"{name}: {e}") from None
    cast = [(x if complex_values.is_complex(x) else as_tracer(x)).astype(dt)
            for x, dt in zip(inputs, loop[:uf.nin])]
    # (a complex loop of a real composite, np.matmul(f8, f8, dtype=complex64): the ufunc
    # again, on the complex operands, which dispatch to the complex rules)
    result = (uf if any(dt.kind == "c" for dt in loop) else impl)(*cast, **kwargs)
    outs = loop[uf.nin:]

    def to(r: Any, dt: np.dtype) -> Any:
        return (r if complex_values.is_complex(r) else as_tracer(r)).astype(dt)
    if isinstance(result, tuple):
        return tuple(to(r, dt) for r, dt in zip(result, outs))
    return to(result, outs[0])


def ufunc(uf: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    from .tracer import Tracer, unwrap, weak_operands
    if method == "__call__":   # Python numbers among the operands, cast as NumPy casts them
        inputs, _weak = weak_operands(uf, inputs)
    if any(complex_values.is_complex(x) for x in inputs) or \
            complex_values.is_complex_dtype_kw(kwargs):
        return complex_values.apply_ufunc(uf, method, inputs, kwargs)
    name = f"np.{uf.__name__}" + (f".{method}" if method != "__call__" else "")
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (out,)
    if any(o is not None for o in outs):
        return _with_out(uf, method, name, inputs, kwargs, outs)
    for k, allowed in _IGNORED_KW.items():
        if k in kwargs and kwargs[k] in allowed:
            kwargs.pop(k)
    if method == "__call__":
        where = check_where(kwargs.pop("where", True))
        if where is not True:
            # Without out=, NumPy leaves the elements where the mask is False uninitialised.
            raise unsupported(f"{name}(..., where=...) without out=",
                              "NumPy leaves the masked elements uninitialised; use np.where")
        if uf in UFUNC_OPS and uf is not np.matmul:
            dtype = kwargs.pop("dtype", None)
            sig = kwargs.pop("signature", kwargs.pop("sig", None))
            if sig is not None:
                sigs = sig if isinstance(sig, tuple) else (sig,)
                if dtype is None and len(sigs) == uf.nin + uf.nout and sigs[-1] is not None:
                    dtype = sigs[-1]
                elif any(s is not None for s in sigs):
                    raise unsupported(f"{name}(signature={sig!r})")
            casting = kwargs.pop("casting", "same_kind")
            if kwargs:
                raise unsupported(f"{name}({', '.join(sorted(kwargs))}=...)")
            from .tracer import operands_layout
            args = [unwrap(x) for x in inputs]
            if uf is np.power and dtype is None and casting == "same_kind":
                return operands_layout(Tracer(api.power(*args)), inputs)
            return operands_layout(Tracer(api.apply_ufunc(uf, *args, dtype=dtype,
                                                          casting=casting)), inputs)
        entry = composites.lookup(uf)
        if entry is not None:
            dtype = kwargs.pop("dtype", None)
            casting = kwargs.pop("casting", "same_kind")
            from .tracer import operands_layout
            if dtype is None:
                return operands_layout(entry.impl(*inputs, **kwargs), inputs)
            return operands_layout(
                _composite_in_dtype(uf, entry.impl, inputs, kwargs, dtype, casting, name), inputs)
        if uf.__name__.endswith(" (vectorized)"):   # np.frompyfunc's object ufunc
            raise unsupported(f"a ufunc made by np.frompyfunc ({uf.__name__})",
                              "it calls a Python function on object elements; np.vectorize "
                              "of the function, or whole-array NumPy code, is traced")
        raise unsupported(name)
    if uf in (np.fmax, np.fmin) and method in ("reduce", "reduceat", "accumulate") and \
            inputs and (inputs[0].dtype if hasattr(inputs[0], "dtype") else
                        np.asarray(inputs[0]).dtype).kind not in "fc":
        # integers and bools have no NaN: fmax is maximum (whose fold starts from the
        # lowest value; fmax's starts from NaN, which an integer cannot hold)
        uf = np.maximum if uf is np.fmax else np.minimum
    if method in ("at", "reduceat"):
        context.note_sizes_read()   # (positions into the operand)
    if method == "reduce" and uf in REDUCE_COMPOSITES:
        from .composites.ufuncs import logaddexp_reduce
        (x,) = inputs
        allowed = {"axis", "dtype", "keepdims"}
        if set(kwargs) - allowed:
            raise unsupported(f"{name}({', '.join(sorted(set(kwargs) - allowed))}=...)")
        return logaddexp_reduce(uf, x, **kwargs)
    if method == "reduce":
        kind = reducer_of_ufunc(uf)
        if kind is None:
            raise unsupported(name, "tracearray reduces with add, multiply, maximum, minimum, "
                              "fmax, fmin, logical_and/or/xor and bitwise_and/or/xor")
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        dtype = kwargs.pop("dtype", None)
        keepdims = kwargs.pop("keepdims", False)
        initial = kwargs.pop("initial", np._NoValue)
        where = check_where(kwargs.pop("where", True))
        if kwargs:
            raise unsupported(f"{name}({', '.join(sorted(kwargs))}=...)")
        return Tracer(api.reduce_with(kind, unwrap(x), axis, keepdims, dtype, initial,
                                      unwrap(where)))
    if method == "accumulate" and uf in (np.logical_or, np.logical_and, np.fmax, np.fmin):
        return _accumulate_by_scans(uf, name, inputs, kwargs)
    if method == "accumulate":
        kind = scan_of_ufunc(uf)
        if kind is None:
            raise unsupported(name, "tracearray accumulates with add, multiply, maximum, "
                              "minimum, fmax, fmin, logical_or and logical_and")
        (x,) = inputs
        axis = _accumulate_axis(np.ndim(x), kwargs.pop("axis", 0))
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise unsupported(f"{name}({', '.join(sorted(kwargs))}=...)")
        return Tracer(api.scan(kind, unwrap(x), axis, dtype, ufunc_method=True))
    if method == "at":
        return _ufunc_at(uf, name, inputs, kwargs)
    if method == "reduceat":
        return _reduceat(uf, name, inputs, kwargs)
    if method == "outer":
        a, b = inputs
        na = np.ndim(a)
        a2 = composites.as_tracer(a)
        b2 = composites.as_tracer(b)
        a2 = a2.reshape(a2.shape + (1,) * b2.ndim) if na or b2.ndim else a2
        return uf(a2, b2, **kwargs)
    raise unsupported(name)


def _accumulate_axis(ndim: int, axis: Any) -> Any:
    """ufunc.accumulate's one axis, with NumPy's errors."""
    if ndim == 0:
        raise TypeError(with_location("cannot accumulate on a scalar"))
    if isinstance(axis, tuple) and len(axis) == 1:
        (axis,) = axis
    if axis is None and ndim == 1:
        axis = 0   # (None is all of the axes: of a vector, its one)
    if axis is None or isinstance(axis, tuple):
        raise ValueError(with_location("accumulate does not allow multiple axes"))
    return axis


def _accumulate_by_scans(uf: np.ufunc, name: str, inputs: tuple, kwargs: dict) -> Any:
    """``logical_or / logical_and .accumulate`` (a flag that stays set: the running maximum
    / minimum of the elements' truth, bool as NumPy's) and ``fmax / fmin .accumulate`` of
    floats (the running maximum / minimum of the elements that are not NaN, NaN until the
    first of them), by the scans tracearray has."""
    if len(inputs) != 1:
        raise TypeError(with_location(f"{name} takes one array"))
    x = composites.as_tracer(inputs[0])
    axis = _accumulate_axis(x.ndim, kwargs.pop("axis", 0))
    dtype = kwargs.pop("dtype", None)
    if kwargs or (dtype is not None and uf in (np.fmax, np.fmin)):
        raise unsupported(f"{name}({', '.join(sorted(kwargs) or ['dtype'])}=...)")
    if uf in (np.logical_or, np.logical_and):
        if dtype is not None and np.dtype(dtype) != np.dtype(bool):
            raise TypeError(with_location(f"No loop matching the specified signature and "
                                          f"casting was found for ufunc {uf.__name__}"))
        truth = x.astype(bool)
        out = (np.maximum if uf is np.logical_or else np.minimum).accumulate(truth, axis=axis)
        return out if dtype is None else out.astype(dtype)
    if x.dtype.kind not in "fc":     # (no NaN: the running maximum / minimum)
        return (np.maximum if uf is np.fmax else np.minimum).accumulate(x, axis=axis)
    missing = np.isnan(x)
    fill = -np.inf if uf is np.fmax else np.inf
    running = (np.maximum if uf is np.fmax else np.minimum).accumulate(
        np.where(missing, x.dtype.type(fill), x), axis=axis)
    seen = np.maximum.accumulate(~missing, axis=axis)
    return np.where(seen, running, x.dtype.type(np.nan))


def _ufunc_at(uf: np.ufunc, name: str, inputs: tuple, kwargs: dict) -> None:
    """``uf.at(a, indices[, b])``: an unbuffered in-place update of ``a``, which must be an
    array the trace holds (an argument, or one the function made)."""
    from .indexing import ufunc_at
    from .tracer import Tracer, unwrap
    if kwargs or len(inputs) not in (2, 3):
        raise TypeError(with_location(f"{name} takes (a, indices[, b])"))
    a = inputs[0]
    if not isinstance(a, Tracer):
        raise unsupported(f"{name} into an array the compiled function does not hold",
                          "update an argument or an array the function made")
    a._write(ufunc_at(uf, a.node, unwrap(inputs[1]),
                      unwrap(inputs[2]) if len(inputs) == 3 else None))
    return None


def _reduceat(uf: np.ufunc, name: str, inputs: tuple, kwargs: dict) -> Any:
    """``uf.reduceat(a, indices, axis=0, dtype=None)``: for each index i, ``uf.reduce`` of
    ``a[indices[i]:indices[i + 1]]`` along ``axis`` (to the end for the last index; of
    ``a[indices[i]]`` alone where the next index is not larger), side by side along
    ``axis``. Each segment is tracearray's reduce of that slice: NumPy's result exactly for
    integers, bools and order-free folds (max, min, logical and bitwise ones), float products
    in NumPy's order, float sums within the float-sum-reassociation tolerance as every sum
    (NumPy adds a segment's first element to the pairwise sum of the others). The indices
    shape the result, so they must be known when tracing."""
    from .tracer import Tracer
    if len(inputs) != 2:
        raise TypeError(with_location(f"{name} takes (array, indices)"))
    a, indices = inputs
    axis = kwargs.pop("axis", 0)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise unsupported(f"{name}({', '.join(sorted(kwargs))}=...)")
    if context._holds_traced_list(indices):
        indices = composites.as_tracer(indices)
    if isinstance(indices, Tracer):     # an array the function made: its value if known
        known = known_value(indices.node)
        if known is None:
            return _reduceat_traced(uf, name, a, indices, axis, dtype)
        indices = known
    idx = np.asarray(indices)
    _check_reduceat_indices(idx)
    idx = idx.astype(np.intp)       # NumPy force-casts them (0.5 is 0)
    x = composites.as_tracer(a)
    ax = _reduceat_axis(uf, name, x, axis)
    n = x.shape[ax]
    starts = [int(i) for i in idx]
    for i in starts:
        if not 0 <= i < n:
            raise IndexError(with_location(
                f"index {i} out-of-bounds in {uf.__name__}.reduceat [0, {n})"))
    if not starts:   # an empty result of the reduce's dtype (NumPy's, from one element)
        dt = uf.reduce(np.frombuffer(bytes(x.dtype.itemsize), x.dtype), dtype=dtype).dtype
        shape = x.shape[:ax] + (0,) + x.shape[ax + 1:]
        return composites.as_tracer(np.zeros(shape, dt))
    return _segment_reduce(uf, x, ax, np.asarray(starts, np.intp), n, dtype)


def _check_reduceat_indices(idx: Any) -> None:
    """NumPy's errors for reduceat's indices that are not one-dimensional."""
    if idx.ndim != 1:
        raise ValueError(with_location(
            "setting an array element with a sequence. The requested array would exceed the "
            "maximum number of dimension of 1." if idx.ndim > 1 else
            "object of too small depth for desired array"))


def _reduceat_axis(uf: np.ufunc, name: str, x: Any, axis: Any) -> int:
    """reduceat's one axis (NumPy's checks), and the refusal of a ufunc without a fold."""
    if axis is None and x.ndim == 1:
        axis = 0   # (NumPy's "all axes" is the one axis of a vector)
    if axis is None or (isinstance(axis, (tuple, list)) and len(axis) != 1):
        raise ValueError(with_location("reduceat does not allow multiple axes"))
    (ax,) = normalize_axes(axis[0] if isinstance(axis, (tuple, list)) else axis, x.ndim, name)
    if reducer_of_ufunc(uf) is None:
        raise unsupported(name, "tracearray reduces with add, multiply, maximum, minimum, "
                          "fmax, fmin, logical_and/or/xor and bitwise_and/or/xor")
    return ax


def _reduceat_traced(uf: np.ufunc, name: str, a: Any, indices: Any, axis: Any,
                     dtype: Any) -> Any:
    """``uf.reduceat`` with indices read at run time (a group-by's segment starts from
    np.flatnonzero): every element ``a[j]`` (along the axis) from ``indices[0]`` on is
    folded, in order, into the segment of the last index not above ``j``
    (``np.searchsorted(indices, j, 'right') - 1``) by ``uf.at``, each segment starting
    from the fold's identity (-0.0 for float sums, which leaves every sum's sign as it is);
    an index equal to the next one takes ``a[index]`` alone, as NumPy's reduceat does.
    That is NumPy's result when the indices do not decrease (the segments are the runs
    between them, in order); indices that decrease make overlapping segments, refused at
    run time (UnsupportedOperationError), as are indices out of range (NumPy's
    IndexError). Float sums are in order, within the float-sum-reassociation tolerance of
    NumPy's (which adds a segment's first element to the pairwise sum of the others): an
    ``order_free`` scatter (trace/indexing.py ``scatter``)."""
    from .indexing import ufunc_at
    from .tracer import unwrap
    x = composites.as_tracer(a)
    idx = composites.as_tracer(indices)
    _check_reduceat_indices(idx)
    if not np.can_cast(idx.dtype, np.intp, "safe"):   # (an array: cast safely, as NumPy)
        raise TypeError(with_location(
            f"Cannot cast array data from {idx.dtype!r} to {np.dtype(np.intp)!r} according "
            f"to the rule 'safe'"))
    idx = idx.astype(np.intp)
    ax = _reduceat_axis(uf, name, x, axis)
    n, m = x.shape[ax], idx.shape[0]
    dt = uf.reduce(np.frombuffer(bytes(x.dtype.itemsize), x.dtype), dtype=dtype).dtype
    if m == 0:
        shape = x.shape[:ax] + (0,) + x.shape[ax + 1:]
        return composites.as_tracer(np.zeros(shape, dt))
    context.require(np.all((idx >= 0) & (idx < n)).node, IndexError, with_location(
        f"an index out-of-bounds in {uf.__name__}.reduceat [0, {n})"))
    if m > 1:
        context.require(np.all(idx[1:] >= idx[:-1]).node, UnsupportedOperationError,
                        with_location(
                            f"{name} with indices read at run time that decrease (segments "
                            f"that overlap) is not supported by tracearray: its run-time "
                            f"indices must not decrease"))
    xt = np.moveaxis(x, ax, 0).astype(dt)
    if n == 0:      # (every index is out of range: the check above raises)
        return np.moveaxis(np.zeros((m,) + xt.shape[1:], dt), 0, ax)
    positions = np.arange(n)
    segment = np.searchsorted(idx, positions, side="right") - 1
    inside = segment >= 0
    acc = _reduceat_accumulator(uf, dt)
    float_sum = uf is np.add and dt.kind in "fc"
    if float_sum:
        identity = np.asarray(-0.0).astype(acc)
    else:
        identity = np.asarray(reduce_identity(uf, acc))
    expand = (slice(None),) + (None,) * (xt.ndim - 1)
    terms = np.where(inside[expand], xt.astype(acc), identity)
    out = composites.as_tracer(np.full((m,) + xt.shape[1:], identity, dtype=acc)).copy()
    # (a float sum in order, float16 and float32 ones in float64: NumPy adds a segment's
    # first element to the pairwise sum of the others in the data's precision, which the
    # comparator's bound of an order-free scatter covers)
    out._write(ufunc_at(uf, out.node, unwrap(np.maximum(segment, 0)), unwrap(terms),
                        order_free=dt.str if float_sum else None))
    out = out.astype(dt)
    if m > 1:       # an index equal to the next: that element alone
        alone = np.concatenate([idx[:-1] >= idx[1:], np.zeros(1, bool)])
        out = np.where(alone[expand], np.take(xt, idx, axis=0, mode="clip"), out)
    return np.moveaxis(out, 0, ax)


def _reduceat_accumulator(uf: np.ufunc, dt: np.dtype) -> np.dtype:
    """The dtype a run-time reduceat's segments accumulate in: float16 and float32 sums (and
    complex64 ones) in float64 (complex128), where NumPy's pairwise sums keep the error of
    a few roundings and an in-order sum of a long segment drifts (10**6 additions of 0.1 in
    float32: 0.35 % off); float16 products in float32, as NumPy's float16 loop keeps its
    running product (300 * 300 / 300 / 300 is 1, not inf); others in ``dt``."""
    if uf is np.add and dt.kind == "f" and dt.itemsize < 8:
        return np.dtype(np.float64)
    if uf is np.add and dt.kind == "c" and dt.itemsize < 16:
        return np.dtype(np.complex128)
    if uf is np.multiply and dt == np.dtype(np.float16):
        return np.dtype(np.float32)
    return dt


def reduce_identity(uf: np.ufunc, dt: np.dtype) -> Any:
    """The value ``uf``'s fold starts from in dtype ``dt`` (the lowest / highest value for
    maximum / minimum, NaN for fmax / fmin, whose folds skip it)."""
    if uf.identity is not None:
        return np.asarray(uf.identity).astype(dt)[()]
    low = uf in (np.maximum, np.fmax)
    if uf in (np.fmax, np.fmin) and dt.kind in "fc":
        return dt.type(np.nan)
    if dt.kind in "fc":
        return dt.type(-np.inf if low else np.inf)
    if dt.kind == "b":
        return dt.type(not low)
    info = np.iinfo(dt)
    return dt.type(info.min if low else info.max)


# folds that give the same result when an element is folded in twice
_IDEMPOTENT = frozenset({np.maximum, np.minimum, np.fmax, np.fmin, np.logical_and,
                         np.logical_or, np.bitwise_and, np.bitwise_or})


def _segment_reduce(uf: np.ufunc, x: Any, ax: int, starts: np.ndarray, n: int,
                    dtype: Any) -> Any:
    """``uf.reduce`` of the segments ``x[starts[i]:ends[i]]`` along ``ax`` (reduceat's), in
    a few kernels whatever their number: segments of similar length (up to 8 elements, then
    by powers of two) are gathered into a matrix of rows as wide as the longest of them, the
    short rows padded with the segment's last element (a fold that ignores repeats) or the
    fold's identity (-0.0 for float sums, which leaves every sum's sign as it is), and each
    matrix is reduced along its rows; the results go back to the segments' order. The work
    is at most twice the segments' elements plus 8 a segment."""
    ends = np.append(starts[1:], n)
    lengths = np.where(ends > starts, ends - starts, 1)
    classes = np.maximum(3, np.ceil(np.log2(lengths)).astype(np.intp))
    pieces, order = [], []
    for c in np.unique(classes):
        sel = np.flatnonzero(classes == c)
        width = int(lengths[sel].max())
        first = composites.as_tracer(starts[sel].reshape(-1, 1))
        last = composites.as_tracer((lengths[sel] - 1).reshape(-1, 1))
        k = composites.as_tracer(np.arange(width, dtype=np.intp))
        rows = np.take(x, first + np.minimum(k, last), axis=ax)   # (.., segments, width, ..)
        if uf not in _IDEMPOTENT:
            fill = np.float64(-0.0) if uf is np.add and x.dtype.kind in "fc" else uf.identity
            inside = (k <= last).reshape((1,) * ax + (len(sel), width) +
                                         (1,) * (x.ndim - ax - 1))
            rows = np.where(inside, rows, np.asarray(fill).astype(x.dtype))
        pieces.append(uf.reduce(rows, axis=ax + 1, dtype=dtype))
        order.append(sel)
    out = np.concatenate(pieces, axis=ax) if len(pieces) > 1 else pieces[0]
    perm = np.concatenate(order)
    if np.array_equal(perm, np.arange(len(perm))):
        return out
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(len(perm))
    return np.take(out, composites.as_tracer(inverse), axis=ax)


def _with_out(uf: np.ufunc, method: str, name: str, inputs: tuple, kwargs: dict,
              outs: tuple) -> Any:
    """``ufunc(..., out=o)``: computed as without it, then written into ``o`` (NumPy's
    casting rule for ufunc outputs, same_kind unless ``casting=``; reductions and scans cast
    unsafely); ``where=`` leaves o's other elements as they are."""
    from .tracer import Tracer, store_out, unwrap
    where = check_where(kwargs.pop("where", True)) if method == "__call__" else True
    casting = kwargs.get("casting", "same_kind") if method == "__call__" else "unsafe"
    o = outs[0] if len(outs) == 1 else None
    first = inputs[0] if inputs else None
    in_dtype = first.dtype if hasattr(first, "dtype") else np.asarray(first).dtype \
        if first is not None and method in ("reduce", "accumulate", "reduceat") else None
    if method in ("reduce", "accumulate", "reduceat") and kwargs.get("dtype") is None and \
            o is not None and hasattr(o, "dtype") and in_dtype is not None and \
            np.can_cast(in_dtype, o.dtype, "same_kind") and uf in (np.add, np.multiply):
        # (NumPy runs a reduction's loop in its out='s dtype: np.add.reduce of float32 into
        # a float64 out= sums in float64; a maximum's or a logical_or's values are the same
        # in any dtype that holds them, and the cast into out= follows)
        kwargs["dtype"] = o.dtype
    results = ufunc(uf, method, inputs, kwargs)
    results = results if isinstance(results, tuple) else (results,)
    if len(outs) != len(results):
        raise ValueError(with_location(
            f"{name}: The 'out' tuple must have exactly {len(results)} entries: one per "
            f"ufunc output"))
    written = []
    for r, o in zip(results, outs):
        if o is None:
            written.append(r)
            continue
        if where is not True:
            if isinstance(o, Tracer) and not np.can_cast(r.dtype, o.dtype, casting=casting):
                raise api.output_cast_error(uf, r.dtype, o.dtype, casting)
            if isinstance(o, Tracer):
                mask = composites.as_tracer(where).node
                r = Tracer(api.where(mask, api.cast(unwrap(r), o.dtype), o.node))
            written.append(store_out(name, r, o, "unsafe"))
            continue
        written.append(store_out(name, r, o, casting,
                                 exact=method in ("reduce", "accumulate", "reduceat")))
    return tuple(written) if len(written) > 1 else written[0]


# ============================================================================================
# NumPy functions
# ============================================================================================

@functools.lru_cache(maxsize=None)
def _signature(func: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def function(func: Callable, args: tuple, kwargs: dict) -> Any:
    from .selection import compact_args
    context.note_integer_arguments(_signature(func), args, kwargs)
    state = context.current()
    if state is not None and state.captured is not None:
        # an array the function reached (self.bins) given to np.digitize, np.put, ...: its
        # values are fixed by the trace unless it becomes a graph input (trace/captured.py)
        for a in (*args, *kwargs.values()):
            state.captured.note_use(a)
    args, kwargs = compact_args(args), compact_args(kwargs)   # x[mask] as an argument
    if func in _OUT_BY_STORE:
        stored = _with_out_stored(func, args, kwargs)
        if stored is not _NO_OUT:
            return stored
    if func in _PROMOTING_FUNCTIONS:
        args, kwargs = _weak_values_cast(args, kwargs)
    if complex_values.holds_complex(args, kwargs):
        return _operands_layout(func, complex_values.apply_function(func, args, kwargs),
                                args, kwargs)
    entry = composites.lookup(func)
    if entry is not None and entry.impl is not composites.NUMPY_IMPLEMENTATION:
        # (a composite may make its result from numbers alone, as NumPy's code may:
        # np.vander of a one-element array is np.ones((1, 1)); NumPy's own code passes
        # np._NoValue for what was not given: np.nanmean's np.sum(..., where=where))
        given = {k: v for k, v in kwargs.items() if v is not np._NoValue}
        return _operands_layout(func, _new_memory_results(
            func, _traced_results(entry.impl(*args, **given), args, kwargs), args, kwargs),
            args, kwargs)
    reason = refusal(func)
    if reason is not None:
        raise unsupported(numpy_name(func), reason)
    counts = _COUNT_ARGUMENTS.get(func)
    if counts is not None:    # (np.tril(m, k) of a traced k: NumPy's code makes sizes of it)
        args = tuple(context.index_value(a) if i in counts[0] else a
                     for i, a in enumerate(args))
        kwargs = {k: context.index_value(v) if k in counts[1] else v
                  for k, v in kwargs.items()}
    return run_numpy_implementation(func, func._implementation, args, kwargs)


# NumPy functions run by their own implementation whose integer arguments (positions,
# names) set sizes or diagonals: traced ones (NumPy integers passed in) are staged by value
_COUNT_ARGUMENTS = {np.tril: ({1}, {"k"}), np.triu: ({1}, {"k"}),
                    np.tril_indices_from: ({1}, {"k"}), np.triu_indices_from: ({1}, {"k"})}


# NumPy's reductions and scans written by NumPy's own code into an ``out=`` (by np.mean, a
# ufunc's out=): the result computed, then stored as NumPy stores it (``store_out``, exact
# shape), with the casting rule of NumPy's last step
_OUT_BY_STORE = {
    np.ptp: "same_kind", np.nanmean: "unsafe", np.nanmax: "unsafe", np.nanmin: "unsafe",
    np.nanstd: "unsafe", np.nanvar: "unsafe", np.median: "unsafe", np.nanmedian: "unsafe",
    np.nancumsum: "unsafe", np.nancumprod: "unsafe", np.percentile: "same_kind",
    np.quantile: "same_kind", np.nanpercentile: "unsafe", np.nanquantile: "unsafe"}
_NO_OUT = object()
# (NumPy's own check in these; as imported: a trace replaces some of NumPy's names)
_INEXACT_OUT = frozenset({np.nanmean, np.nanstd, np.nanvar})


def _with_out_stored(func: Callable, args: tuple, kwargs: dict) -> Any:
    """``func(..., out=o)`` of ``_OUT_BY_STORE``: computed without it, stored into ``o``
    (``_NO_OUT`` when no out= is given)."""
    sig = _signature(func)
    try:
        bound = sig.bind(*args, **kwargs) if sig is not None else None
    except TypeError:
        return _NO_OUT   # (NumPy's own TypeError comes from the call)
    if bound is None or bound.arguments.get("out") is None:
        return _NO_OUT
    out = bound.arguments.pop("out")
    from .tracer import store_out
    data = bound.arguments.get("a")
    if func in _INEXACT_OUT and hasattr(data, "dtype") and \
            hasattr(out, "dtype") and np.dtype(data.dtype).kind in "fc" and \
            np.dtype(out.dtype).kind not in "fc":
        raise TypeError(with_location("If a is inexact, then out must be inexact"))
    result = function(func, bound.args, bound.kwargs)
    return store_out(numpy_name(func), result, out, _OUT_BY_STORE[func], exact=True)


# NumPy functions that promote their values together as a ufunc does, Python numbers weakly
# (np.concatenate / stack / append convert each item with np.asarray: a Python number
# there is a strong float64 / int64; np.interp computes in float64 or complex128)
_PROMOTING_FUNCTIONS = frozenset({np.where, np.clip, np.select, np.linspace, np.piecewise,
                                  np.full_like})


def _weak_values_cast(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The weakly typed traced values among a promoting function's arguments (a random draw
    without a size: ``Tracer._weak``) cast as NumPy casts a Python number there: to the
    dtype the function's other arrays give with it (np.where(c, float32, w) is float32)."""
    from .tracer import Tracer

    def values(x: Any) -> list:
        return [v for y in x for v in values(y)] if type(x) in (list, tuple) else [x]
    every = values(args) + values(list(kwargs.values()))
    if not any(isinstance(v, Tracer) and v._weak is not None for v in every):
        return args, kwargs
    strong = [np.dtype(v.dtype) for v in every
              if isinstance(v, (Tracer, complex_values.ComplexTracer, np.ndarray, np.generic))
              and not (isinstance(v, Tracer) and v._weak is not None)]

    def cast(x: Any) -> Any:
        if type(x) in (list, tuple):
            return type(x)(cast(y) for y in x)
        if isinstance(x, Tracer) and x._weak is not None and strong:
            return x.astype(np.result_type(*strong, x._weak(1)))
        return x
    return cast(args), {k: cast(v) for k, v in kwargs.items()}


def refusal(func: Callable) -> str | None:
    """Why ``function`` refuses ``func`` (a NumPy function without a composite, or with one
    that runs NumPy's implementation) before running any of its code: ``""`` when it has no
    Python implementation to run, None when NumPy's implementation is tried on the tracers.
    ``registry.py`` reads it for the supported-operations table."""
    impl = getattr(func, "_implementation", None)
    if impl is None or inspect.isbuiltin(impl) or not _is_numpy(func):
        return ""
    module = getattr(func, "__module__", "") or ""
    if composites.lookup(func) is None and module.startswith(("numpy.linalg", "numpy.fft")):
        # Their Python code is a thin wrapper around LAPACK / pocketfft gufuncs, which reach
        # tracearray only as the external ops it registers (nor are there complex dtypes):
        # refuse the others by name, before NumPy's code fails somewhere inside.
        what = ("this np.linalg function yet (the supported ones are listed in "
                "docs/supported.md)" if "linalg" in module else "this np.fft function yet")
        return f"tracearray does not implement {what}"
    return None


def _is_numpy(func: Any) -> bool:
    return (getattr(func, "__module__", "") or "").startswith("numpy")


# NumPy functions whose results are views of their arguments (or the arguments themselves);
# every other function's results are new memory (np.resize, np.repeat(x, 1), np.delete(x,
# []), np.tile: a composite may build them from views of its operand, which must not see
# later writes to it nor write into it)
_VIEW_RESULTS = frozenset(getattr(mod, n) for mod, names in (
    (np, ("transpose", "swapaxes", "moveaxis", "rollaxis", "squeeze", "expand_dims",
          "broadcast_to", "broadcast_arrays", "atleast_1d", "atleast_2d", "atleast_3d",
          "ravel", "reshape", "diagonal", "flip", "fliplr", "flipud", "rot90", "real", "imag",
          "trim_zeros", "split", "array_split", "hsplit", "vsplit", "dsplit",
          "matrix_transpose", "permute_dims", "unstack", "einsum", "require", "diag")),
    (np.linalg, ("diagonal", "matrix_transpose")),
    (np.lib.stride_tricks, ("sliding_window_view", "as_strided"))) for n in names
    if hasattr(mod, n))


def _new_memory_results(func: Callable, result: Any, args: tuple, kwargs: dict) -> Any:
    """A composite's results in the memory NumPy gives them: a result that is a view of an
    argument's memory (``Tracer._buf``) becomes new memory, unless ``func`` returns views
    (``_VIEW_RESULTS``), it is the ``out=`` array, or ``copy=False`` was asked for."""
    from .tracer import Tracer
    copy = kwargs.get("copy")
    if (func in _VIEW_RESULTS and copy is not True) or copy is False:
        return result
    buffers = {id(a._buf) for a in (*args, *kwargs.values()) if isinstance(a, Tracer)}
    buffers |= {id(b._buf) for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))
                for b in a if isinstance(b, Tracer)}
    out = kwargs.get("out")
    if not buffers:
        return result

    def own(r: Any) -> Any:
        if isinstance(r, Tracer) and id(r._buf) in buffers and r is not out:
            return r._new_memory(r.node)
        if type(r) in (tuple, list):
            return type(r)(own(x) for x in r)
        return r
    return own(result)


def _operands_layout(func: Callable, result: Any, args: tuple, kwargs: dict) -> Any:
    """A composite's new-memory results laid out, as far as the trace knows, as NumPy lays
    them out, however the composite built them: the functions that keep their operands'
    order ('K': np.where of Fortran-ordered arrays is Fortran-ordered) as a ufunc's
    (``tracer.operands_layout``); those that always make C-ordered memory as C; any other
    as not known where an operand is out of C order (``tracer.follows_layout``: whether a
    reshape of it is a view is then not decided by a guess)."""
    from .tracer import Tracer, follows_layout, operands_layout, unmodelled_layout
    unique_axis = kwargs.get("axis", args[4] if len(args) > 4 else None) \
        if func is _UNIQUE else None
    if func in _UNMODELLED_LAYOUT_FUNCTIONS or unique_axis not in (None, 0) or \
            func is _WHERE and len(args) + len(kwargs) == 1:
        return unmodelled_layout(result)
    if func in _OWN_ORDER_FUNCTIONS:
        return result
    if func in _C_ORDER_FUNCTIONS or func is _UNIQUE:   # (np.unique(axis=0) is C-ordered)
        return c_ordered_results(result)
    sources = [a for a in (*args, *kwargs.values()) if isinstance(a, Tracer)] + \
        [b for a in (*args, *kwargs.values()) if type(a) in (list, tuple)
         for b in a if isinstance(b, Tracer)]
    if not sources:
        return result
    if func in _ORDER_K_FUNCTIONS:
        return operands_layout(result, sources)
    out = kwargs.get("out")
    return follows_layout(result, sources, (out,) if out is not None else ())


def c_ordered_results(result: Any) -> Any:
    """``result`` (a composite's new-memory results) as NumPy's C-ordered new memory: a view
    the composite made of memory of its own becomes such memory, and what its operations
    took from the arguments' layout is forgotten (np.kron of a Fortran-ordered argument is
    C-ordered whatever the composite computed it through)."""
    from .tracer import Tracer
    if type(result) in (tuple, list):
        return type(result)(c_ordered_results(r) for r in result)
    if not isinstance(result, Tracer) or result._trace is None or \
            result._buf.argument is not None:
        return result
    if result._path:
        return result._new_memory(result.node, order="C")
    result._buf.layout_known, result._buf.from_arguments = True, frozenset()
    return result


# NumPy functions whose results follow their operands' memory order ('K') as a ufunc's do;
# ufuncs are laid out in ``ufunc``
_ORDER_K_FUNCTIONS = frozenset({np.where, np.clip, np.concatenate, np.sort, np.nan_to_num,
                                np.round, np.around})
# NumPy functions whose results NumPy lays out in ways the trace does not model (strided
# views of an (n, ndim) index array, Fortran-ordered columns, LAPACK's real parts of complex
# memory): whether a reshape or ravel of them is a view is not guessed
_UNMODELLED_LAYOUT_FUNCTIONS = frozenset({np.nonzero, np.argwhere, np.linalg.eig,
                                          np.linalg.eigvals})
# (as imported: a trace replaces some of NumPy's names by its own versions while it runs)
_UNIQUE, _WHERE = np.unique, np.where
# NumPy functions that lay their results out by their own ``order=`` (np.copy, *_like:
# composites/shapes.py, the conversions: context.py)
_OWN_ORDER_FUNCTIONS = frozenset({
    np.copy, np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray,
    np.require, np.empty_like, np.zeros_like, np.ones_like, np.full_like})
# NumPy functions whose new results are C-ordered whatever their operands' layout (checked
# against NumPy 2.4)
_C_ORDER_FUNCTIONS = frozenset({
    np.matmul, np.dot, np.vdot, np.inner, np.outer, np.kron, np.tensordot, np.repeat,
    np.tile, np.take, np.compress, np.argsort, np.interp, np.searchsorted, np.digitize,
    np.corrcoef, np.cov, np.cross, np.linalg.inv, np.linalg.solve, np.linalg.pinv,
    np.linalg.matrix_power, np.linalg.cholesky, np.linalg.qr, np.linalg.svd, np.linalg.eigh,
    np.linalg.lstsq})


def _traced_results(result: Any, args: tuple, kwargs: dict) -> Any:
    """NumPy's code, or a composite, may return a new ndarray made from shapes alone
    (``np.iscomplex`` of a real array is ``np.zeros(x.shape, bool)``; ``np.vander`` of one
    element ``np.ones((1, 1))``): it becomes a traced constant, so that the
    function can go on to index it with traced indices or write into it, as into any array
    it made (soak cpu-2026-12-01-n, program 2117). An array the caller passed in is returned
    as it is (NumPy returns it, not a copy)."""
    passed = {id(a) for a in (*args, *kwargs.values())}
    passed |= {id(b) for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple))
               for b in a}

    def convert(r: Any) -> Any:
        if isinstance(r, np.ndarray) and r.dtype.kind == "c" and id(r) not in passed:
            return complex_values.as_complex(r)   # (np.average(z, returned=True)'s sum)
        if isinstance(r, np.ndarray) and r.dtype.kind not in "OVSUMm" and id(r) not in passed:
            return composites.as_tracer(r)
        if type(r) in (tuple, list):
            return type(r)(convert(x) for x in r)
        return r
    return convert(result)


def run_numpy_implementation(func: Callable, impl: Callable, args: tuple, kwargs: dict) -> Any:
    """NumPy's own Python implementation of ``func`` on tracers. It is built from ufuncs,
    methods and other NumPy functions, which trace; where it needs something that does not
    (item assignment, a data-dependent size), the error names ``func`` and the user's line."""
    state = context.current()
    if state is not None:
        state.numpy_implementations += 1
    try:
        return _traced_results(impl(*args, **kwargs), args, kwargs)
    except UnsupportedOperationError as e:
        first = str(e).splitlines()[0]
        raise UnsupportedOperationError(with_location(
            f"{numpy_name(func)} is not supported by tracearray: NumPy's own implementation, "
            f"run on traced values, needs something tracearray does not support: "
            f"{first}")) from None
    except AttributeError as e:
        # NumPy's code asked a traced value for something only an ndarray has
        raise UnsupportedOperationError(with_location(
            f"{numpy_name(func)} is not supported by tracearray: NumPy's own implementation, "
            f"run on traced values, needs an ndarray attribute tracers lack ({e})")) from None
    except ConcretizationError as e:
        # what needed the value (Tracer._concrete's "<what> needs the concrete value ...")
        first = str(e).splitlines()[0].split(" needs the concrete value")[0]
        raise UnsupportedOperationError(with_location(
            f"{numpy_name(func)} is not supported by tracearray: NumPy's own implementation "
            f"branches on array values ({first}), which are only known when the compiled "
            f"function runs")) from None
    finally:
        if state is not None:
            state.numpy_implementations -= 1
