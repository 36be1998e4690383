"""NumPy's functions expressed as graph primitives, with NumPy 2's dtype and shape semantics.

Each function takes nodes, Python scalars or concrete arrays and returns a node. The tracer
(``tracer.py``) maps operators, ufuncs, ``__array_function__`` calls and methods onto these.
Where NumPy computes in a particular dtype (``mean`` of float32 divides in float64, ``var``
of ints works in float64, float16 ``mean`` sums in float32), the expansion follows
``numpy/_core/_methods.py`` step by step so that results round the same way.
"""
from __future__ import annotations

import importlib
import operator
import weakref
from typing import Any, Sequence

import numpy as np

from .build import (as_node, cast, check_dtype, check_python_int, constant, dtype_key,
                    known_value, make, normalize_axes,
                    result_type, shape_str, size_scalar, to_dtype, unsupported)
from ..errors import with_location
from .graph import Node, any_ancestor
from ..ops import OPS, UFUNC_OPS, Kind, numel
from ..ops.rules import broadcast_shape


# ------------------------------------------------------------------------------------------
# Elementwise
# ------------------------------------------------------------------------------------------

def apply_ufunc(ufunc: np.ufunc, *operands: Any, dtype: Any = None,
                casting: str = "same_kind") -> Node:
    """``ufunc(*operands)`` with NumPy's loop selection (weak Python scalars, NEP 50)."""
    op = UFUNC_OPS.get(ufunc)
    if op is None:
        raise unsupported(f"ufunc np.{ufunc.__name__}")
    keys = tuple(dtype_key(x) for x in operands)
    # dtype= is NumPy's signature=(None, ..., dtype): it selects the loop (inputs are cast to
    # it under ``casting``). Passing it as the output operand's dtype instead would keep the
    # inputs' loop (resolve_dtypes((i8, i8, f4)) is (i8, i8, i8)).
    sig: dict[str, Any] = {} if dtype is None else {
        "signature": (None,) * ufunc.nin + (check_dtype(dtype, ufunc.__name__),)}
    sig["casting"] = casting
    try:
        loop = resolve_loop(ufunc, keys, operands, **sig)
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        names = ", ".join(str(k if isinstance(k, np.dtype) else k.__name__) for k in keys)
        raise numpy_error(e, f"np.{ufunc.__name__}({names}): {e}") from None
    folded = _compare_out_of_range_int(ufunc, operands, loop)
    if folded is not None:
        return folded
    args = [to_dtype(x, dt) for x, dt in zip(operands, loop[:ufunc.nin])]
    return make(op, args)


def resolve_loop(ufunc: np.ufunc, keys: tuple, operands: Sequence[Any],
                 signature: tuple | None = None, casting: str = "same_kind") -> tuple:
    """``ufunc.resolve_dtypes`` of the operands' keys (``dtype_key``: Python scalars weak)
    under ``casting``, raising NumPy's errors. NumPy 2.4's resolve_dtypes crashes the
    interpreter for a Python int under 'equiv': that rule is checked by a call on
    stand-ins (zero arrays of the operands' dtypes, the Python scalars themselves), and
    the loop found after it."""
    sig: dict[str, Any] = {} if signature is None else {"signature": signature}
    if casting == "equiv" and any(isinstance(k, type) for k in keys):
        ufunc(*(np.zeros(1, k) if isinstance(k, np.dtype) else x
                for k, x in zip(keys, operands)), casting="equiv",
              **({} if signature is None else {"signature": signature}))
        casting = "unsafe"
    return ufunc.resolve_dtypes(keys + (None,) * ufunc.nout, casting=casting, **sig)


def _ufunc_homes() -> tuple:
    homes = []
    for name in ("numpy._core.umath", "numpy.fft._pocketfft_umath"):
        try:
            homes.append(importlib.import_module(name))
        except ImportError:   # (another NumPy's private modules)
            pass
    return tuple(homes)


_UFUNC_HOMES = _ufunc_homes()


def output_cast_error(ufunc: Any, from_dtype: Any, to_dtype: Any,
                      casting: str = "same_kind") -> BaseException:
    """NumPy's error for a ufunc's result that ``casting`` does not let into out= (its class,
    UFuncTypeError, which code may catch), at the user's line. ``ufunc``: the ufunc or its
    name (``"np.add"``, ``"add"``)."""
    if isinstance(ufunc, str):
        name = ufunc.split(".")[-1]
        found = getattr(np, name, None)
        # (np.clip is a Python function over the ufunc of its name in numpy's umath)
        # (np.fft's functions are Python functions over the gufuncs of pocketfft)
        ufunc = found if isinstance(found, np.ufunc) else next(
            (u for m in _UFUNC_HOMES for u in [getattr(m, name, None)]
             if isinstance(u, np.ufunc)), found)
    frm, to = np.dtype(from_dtype), np.dtype(to_dtype)
    message = (f"Cannot cast ufunc '{getattr(ufunc, '__name__', ufunc)}' output from {frm!r} "
               f"to {to!r} with casting rule {casting!r}")
    try:
        from numpy._core._exceptions import _UFuncOutputCastingError
        if isinstance(ufunc, np.ufunc):
            return numpy_error(_UFuncOutputCastingError(ufunc, casting, frm, to, 0), message)
    except (ImportError, TypeError):   # (another NumPy's private class)
        pass
    return TypeError(with_location(message))


def numpy_error(e: BaseException, message: str) -> BaseException:
    """NumPy's own exception (its class, e.g. UFuncTypeError, which code may catch), with the
    user's line: as a note where exceptions have notes (Python 3.11), else a TypeError with
    the message."""
    if hasattr(e, "add_note"):
        where = with_location("").strip()
        if where:
            e.add_note(where)
        return e
    return TypeError(with_location(message))


def _where_operand(v: Any, dt: np.dtype) -> Node:
    """np.where converts a Python int with ``np.asarray`` (int64, or uint64 from 2**63) and
    casts it unsafely to the result dtype: ``np.where(c, u8, 300)`` is uint8 with 300 wrapped
    to 44, not NEP 50's OverflowError. Mirror that instead of raising."""
    if type(v) is int and dt.kind in "iu":
        return constant(np.asarray(v).astype(dt))
    return to_dtype(v, dt)


_COMPARISONS = {np.equal: operator.eq, np.not_equal: operator.ne, np.less: operator.lt,
                np.less_equal: operator.le, np.greater: operator.gt,
                np.greater_equal: operator.ge}


def _compare_out_of_range_int(ufunc: np.ufunc, operands: Sequence[Any],
                              loop: Sequence[np.dtype]) -> Node | None:
    """NumPy 2 compares an integer array with a Python int outside the array's dtype exactly
    (``int8_array < 128`` is all True, ``uint8_array == -1`` all False) instead of raising
    NEP 50's OverflowError as the arithmetic ufuncs do. The answer is the same for every
    element, so the comparison folds to a broadcast constant."""
    if ufunc not in _COMPARISONS:
        return None
    for i, v in enumerate(operands):
        dt = loop[i]
        if type(v) is not int or dt.kind not in "iu":
            continue
        info = np.iinfo(dt)
        if info.min <= v <= info.max:
            continue
        if as_node(operands[1 - i]).dtype.kind == "b":   # (exact only for integer arrays)
            raise OverflowError(with_location("Python int too large to convert to C long"))
        # 0 lies in every integer dtype's range, so it stands for every element.
        compare = _COMPARISONS[ufunc]
        value = compare(0, v) if i == 1 else compare(v, 0)
        other = as_node(operands[1 - i])
        return broadcast_to(constant(np.bool_(value)), other.shape)
    return None


def where(cond: Any, x: Any, y: Any) -> Node:
    c = cast(as_node(cond), bool)
    dt = result_type(x, y)
    return make("where", [c, _where_operand(x, dt), _where_operand(y, dt)])


def clip(a: Any, a_min: Any = None, a_max: Any = None) -> Node:
    """np.clip: maximum then minimum, in the dtype NumPy's clip resolves to."""
    a_dtype = as_node(a).dtype
    if a_dtype.kind in "iu":
        # As numpy/_core/_methods.py::_clip: a Python int bound beyond the integer dtype's
        # range is dropped (NumPy returns the array unchanged on that side instead of
        # raising NEP 50's OverflowError for e.g. np.clip(u8, -1, 300)).
        info = np.iinfo(a_dtype)
        if type(a_min) is int and a_min <= info.min:
            a_min = None
        if type(a_max) is int and a_max >= info.max:
            a_max = None
    if a_min is None and a_max is None:
        # NumPy 2 returns np.positive(a) when no bound is left (or none was given).
        return apply_ufunc(np.positive, a)
    dt = result_type(*[v for v in (a, a_min, a_max) if v is not None])
    out = to_dtype(a, dt)
    if a_min is not None:
        out = make("maximum", [out, to_dtype(a_min, dt)])
    if a_max is not None:
        out = make("minimum", [out, to_dtype(a_max, dt)])
    return out


def astype(x: Node, dtype: Any) -> Node:
    return cast(x, check_dtype(dtype, "astype"))


def power(x: Any, y: Any, operator: bool = False) -> Node:
    """``np.power(x, y)``, or ``x ** y`` when ``operator`` is set.

    Two NumPy fast paths change results (sqrt(-inf) is nan and sqrt(-0.0) is -0.0, where
    pow gives inf and +0.0; square(bool) is int8 where power(bool, 2) is int64):

    - ``ndarray.__pow__`` / ``__ipow__`` (``fast_scalar_power`` in numpy/_core/src/multiarray/
      number.c) compute ``x ** 2`` with np.square for any dtype, and for float arrays
      ``x ** -1`` with np.reciprocal and ``x ** 0.5`` with np.sqrt -- only for an exact
      Python int 2 / -1 or float 0.5;
    - np.power's float32 and float64 loops compute a scalar exponent of 0.5 with sqrt (the
      float16 loop does not). A scalar exponent of 2 or -1 in any float loop is computed with
      square / reciprocal, which round exactly as pow does.
    """
    x_dtype = as_node(x).dtype
    if operator and type(y) is int and y == 2:
        return apply_ufunc(np.square, x)
    if operator and x_dtype.kind == "f":
        if type(y) is int and y == -1:
            return apply_ufunc(np.reciprocal, x)
        if type(y) is float and y == 0.5:
            return apply_ufunc(np.sqrt, x)
    if isinstance(y, (int, float, np.integer, np.floating)) and not isinstance(y, bool):
        loop = np.power.resolve_dtypes((dtype_key(x), dtype_key(y), None))
        fast = {2.0: np.square, -1.0: np.reciprocal}.get(float(y))
        if float(y) == 0.5 and loop[0] in (np.dtype(np.float32), np.dtype(np.float64)):
            fast = np.sqrt
        if loop[0].kind == "f" and fast is not None:
            return apply_ufunc(fast, to_dtype(x, loop[0]))
        if loop[1].kind == "i" and y < 0 and as_node(x).size > 0:
            # NumPy's integer power loop raises on a negative exponent; with a trace-time
            # constant exponent we can say so while tracing (after NEP 50's OverflowError for
            # a Python int that does not fit, which NumPy raises first).
            to_dtype(y, loop[1])
            raise ValueError(with_location("Integers to negative integer powers are not allowed."))
    elif isinstance(y, Node) and y.size == 1 and known_value(y) is None:
        # a one-element exponent known only when the kernel runs (x ** np.float64(e) with e
        # an argument): NumPy's float32 / float64 loops test it for 0.5 then, and use sqrt
        loop = np.power.resolve_dtypes((dtype_key(x), y.dtype, None))
        if loop[0] in (np.dtype(np.float32), np.dtype(np.float64)):
            general = apply_ufunc(np.power, x, y)
            half = apply_ufunc(np.equal, y, 0.5)
            root = apply_ufunc(np.sqrt, to_dtype(x, loop[0]))
            return make("where", [broadcast_to(half, general.shape),
                                  broadcast_to(to_dtype(root, general.dtype), general.shape),
                                  general])
    return apply_ufunc(np.power, x, y)


# ------------------------------------------------------------------------------------------
# Reductions
# ------------------------------------------------------------------------------------------

def _result_dtype_of(fn: Any, dtype: Any, node: Node, **kw: Any) -> np.dtype:
    """The dtype NumPy's reduction returns, asked of NumPy on a one-element array (the
    answers remembered: they depend only on the function, the dtypes and the options)."""
    try:
        key = (fn, dtype, node.dtype, tuple(sorted(kw.items())))
        hit = _RESULT_DTYPES.get(key)
    except TypeError:   # an unhashable dtype= argument: ask every time
        key, hit = None, None
    if hit is None:
        probe = np.ones((1,), dtype=node.dtype)
        hit = np.asarray(fn(probe, dtype=dtype, **kw) if dtype is not None
                         else fn(probe, **kw)).dtype
        if key is not None:
            _RESULT_DTYPES[key] = hit
    return hit


_RESULT_DTYPES: dict[tuple, np.dtype] = {}
_REDUCE_DTYPES: dict[tuple, np.dtype] = {}   # (ufunc, operand dtype) -> reduce's dtype


def _zero_d_int_axis(x: Node, axis: Any) -> bool:
    """NumPy accepts a plain int axis of 0 or -1 on a 0-d array in ufunc reductions,
    argmax/argmin, cumsum/cumprod and squeeze (``PyArray_ConvertMultiAxis`` /
    ``PyArray_CheckAxis`` treat the 0-d array as having one axis), but not a tuple."""
    return x.ndim == 0 and isinstance(axis, (int, np.integer)) and int(axis) in (0, -1)


def reduce(kind: str, x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None,
           allow_empty: bool = False) -> Node:
    """A reduction primitive (sum, prod, max, min, any, all, ``reduce_<ufunc>``) over ``axis``
    (None, int or tuple), with the dtype NumPy's reduction gives. ``allow_empty``: an
    ``initial`` value will be combined, so reducing nothing is fine for any reduction."""
    x = as_node(x)
    if _zero_d_int_axis(x, axis):
        axis = ()   # np.sum(0-d, axis=0) reduces nothing
    axes = normalize_axes(axis, x.ndim, kind)
    spec = OPS[kind]
    ufunc = spec.reducer.ufunc
    if ufunc.identity is None and not allow_empty and any(x.shape[a] == 0 for a in axes):
        raise ValueError(with_location(
            f"zero-size array to reduction operation {ufunc.__name__} which has no identity"))
    if kind in ("sum", "prod"):
        fn = np.sum if kind == "sum" else np.prod
        out_dt = _result_dtype_of(fn, dtype, x)
        src = x if out_dt == x.dtype else cast(x, out_dt)
        node = make(kind, [src], axes=axes, dtype=out_dt.str)
    else:
        if dtype is not None:
            raise unsupported(f"{kind}(dtype=...)")
        # NumPy's own answer for the operand dtype: a TypeError where the ufunc has no loop
        # (bitwise_and.reduce of floats), else the result dtype.
        want = _REDUCE_DTYPES.get((ufunc, x.dtype))
        if want is None:
            try:
                want = np.asarray(ufunc.reduce(np.ones((1,), x.dtype))).dtype
            except TypeError as e:
                raise TypeError(with_location(f"np.{ufunc.__name__}.reduce: {e}")) from None
            _REDUCE_DTYPES[(ufunc, x.dtype)] = want
        operand = spec.operand_dtypes(x)[0] if spec.operand_dtypes else x.dtype
        node = make(kind, [cast(x, operand)], axes=axes)
        if node.dtype != want:
            raise unsupported(f"np.{ufunc.__name__}.reduce of {x.dtype}",
                              f"NumPy computes it in {want}")
    return node if keepdims else squeeze(node, axes)


def reduce_with(kind: str, x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None,
                initial: Any = np._NoValue, where: Any = True) -> Node:
    """A reduction with NumPy's ``initial=`` (the start value, combined with the result) and
    ``where=`` (a mask broadcast against ``x``: masked-out elements are the identity, or
    ``initial`` for reductions without one)."""
    x = as_node(x)
    spec = OPS[kind]
    ufunc = spec.reducer.ufunc
    has_initial = initial is not np._NoValue and initial is not None
    if initial is None and ufunc.identity is not None:
        has_initial = False
    if where is not True:
        if not has_initial and ufunc.identity is None:
            raise ValueError(with_location(
                f"reduction operation '{ufunc.__name__}' does not have an identity, so to use "
                f"a where mask one has to specify 'initial'"))
        mask = broadcast_to(cast(as_node(where), bool), x.shape)
        # the identity where there is one (initial is combined once, below: soak
        # cpu-2026-12-02-h programs 3678, 7862 added it once per masked-out element);
        # initial for max/min, which have none (combining it again changes nothing)
        fill = ufunc.identity if ufunc.identity is not None else initial
        x = make("where", [mask, x, _where_operand(fill, x.dtype)])
    out = reduce(kind, x, axis, keepdims, dtype, allow_empty=has_initial)
    if has_initial:
        combine = spec.reducer.combine_op
        init = to_dtype(initial, out.dtype)
        out = make(combine, [out, broadcast_to(init, out.shape)])
    return out


def count_where(x: Node, where: Any, axes: tuple[int, ...], keepdims: bool) -> Node | int:
    """Elements counted by a reduction over ``axes`` with a ``where`` mask (an int when the
    mask is True)."""
    if where is True:
        return _count(x, axes)
    mask = broadcast_to(cast(as_node(where), bool), x.shape)
    return reduce("sum", mask, axes, keepdims, dtype=np.intp)


def arg_reduce(kind: str, x: Any, axis: Any = None, keepdims: bool = False) -> Node:
    """argmax / argmin: first index of the extreme value (the first NaN, if any)."""
    x = as_node(x)
    if isinstance(axis, (tuple, list)):   # argmax takes one axis
        raise TypeError(with_location(
            f"'{type(axis).__name__}' object cannot be interpreted as an integer"))
    if axis is None or _zero_d_int_axis(x, axis):
        flat = reshape(x, (-1,))
        out = arg_reduce(kind, flat, 0, keepdims=False)
        return reshape(out, (1,) * x.ndim) if keepdims else out
    (ax,) = normalize_axes(axis, x.ndim, kind)
    if x.shape[ax] == 0:
        raise ValueError(with_location(f"attempt to get {kind} of an empty sequence"))
    node = make(kind, [x], axes=(ax,))
    return node if keepdims else squeeze(node, (ax,))


def _count(x: Node, axes: tuple[int, ...]) -> int:
    return numel(tuple(x.shape[a] for a in axes))


def _count_dims(x: Node, axes: tuple[int, ...]) -> tuple[int, ...]:
    """The dimensions whose product ``_count`` is (a size node records them)."""
    return tuple(x.shape[a] for a in axes)


def _divide_by_count(total: Node, count: float | Node, dims: tuple[int, ...] | None,
                     less: float = 0) -> Node:
    """``true_divide(total, intp(count), out=total, casting='unsafe')``: NumPy divides by an
    intp count (a number, or an array of counts with ``where=``), which selects the float64
    loop, then casts back into the sum's dtype. A number count is ``max(prod(dims) - less,
    0)`` (``size_scalar``)."""
    divisor = size_scalar(count, np.float64, dims, less) if not isinstance(count, Node) else \
        cast(count, np.float64)
    q = make("true_divide", [cast(total, np.float64), broadcast_to(divisor, total.shape)
                             if divisor.shape != total.shape and divisor.ndim else divisor])
    return cast(q, total.dtype)


def mean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False,
         where: Any = True) -> Node:
    """numpy/_core/_methods.py::_mean: the sum in float64 for integers (float32 for float16,
    cast back), divided by the element count (of the ``where`` mask)."""
    x = as_node(x)
    if where is not True and _zero_d_int_axis(x, axis):
        axis = None   # NumPy counts a where= mask with np.add.reduce, which accepts it
    axes = normalize_axes(axis, x.ndim, "mean")
    acc = dtype
    if acc is None:
        if x.dtype.kind in "biu":
            acc = np.float64
        elif x.dtype == np.float16:
            acc = np.float32
    total = reduce_with("sum", x, axes, keepdims=keepdims, dtype=acc, where=where)
    out = _divide_by_count(total, count_where(x, where, axes, keepdims), _count_dims(x, axes))
    if dtype is None and x.dtype == np.float16:
        out = cast(out, np.float16)
    return out


def var(x: Any, axis: Any = None, dtype: Any = None, ddof: float = 0,
        keepdims: bool = False, where: Any = True, mean: Any = np._NoValue) -> Node:
    """numpy/_core/_methods.py::_var: the mean (kept dims), squared deviations, their sum
    divided by ``max(count - ddof, 0)``."""
    x = as_node(x)
    if where is not True and _zero_d_int_axis(x, axis):
        axis = None   # as in mean
    axes = normalize_axes(axis, x.ndim, "var")
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.float64
    n = count_where(x, where, axes, True)
    if mean is not np._NoValue:
        arrmean = as_node(mean)
    else:
        arrmean = _divide_by_count(reduce_with("sum", x, axes, keepdims=True, dtype=dtype,
                                               where=where), n, _count_dims(x, axes))
    dev = apply_ufunc(np.subtract, x, arrmean)
    sq = apply_ufunc(np.multiply, dev, dev)
    total = reduce_with("sum", sq, axes, keepdims=keepdims, dtype=dtype, where=where)
    if isinstance(n, Node):
        kept = n if keepdims else squeeze(n, axes)
        rcount = apply_ufunc(np.maximum, apply_ufunc(np.subtract, kept, ddof), 0)
    else:
        rcount = max(n - ddof, 0)
    return _divide_by_count(total, rcount, _count_dims(x, axes), ddof)


def std(x: Any, axis: Any = None, dtype: Any = None, ddof: float = 0,
        keepdims: bool = False, where: Any = True, mean: Any = np._NoValue) -> Node:
    v = var(x, axis, dtype, ddof, keepdims, where, mean)
    out = apply_ufunc(np.sqrt, v)
    if out.dtype != v.dtype:
        # An integer or bool dtype=: NumPy's _std computes um.sqrt(ret, out=ret) for an array
        # result (same_kind casting refuses the float result) and ret.dtype.type(sqrt(ret))
        # for a scalar one.
        if v.ndim > 0:
            raise output_cast_error(np.sqrt, out.dtype, v.dtype)
        out = cast(out, v.dtype)
    return out


def _matrix_axes(axis: Any, ndim: int) -> tuple[int, int]:
    """The (row, column) axes of a matrix norm, in the order given (default: the last two)."""
    if axis is None:
        return ndim - 2, ndim - 1
    a, b = (normalize_axes(int(v), ndim, "norm")[0] for v in axis)
    if a == b:
        raise ValueError(with_location("Duplicate axes given."))
    return a, b


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Node:
    """np.linalg.norm: vector norms along an axis, and the Frobenius norm of 2 axes, following
    numpy/linalg/_linalg.py::norm case by case."""
    x = as_node(x)
    if x.dtype.kind not in "f":
        x = cast(x, np.float64)
    if axis is None:
        if ord is None or (ord in ("fro", "f") and x.ndim == 2) or (ord == 2 and x.ndim == 1):
            # NumPy: sqrt(dot(x.ravel(), x.ravel())) -- summed in another order (DIVERGENCES).
            return apply_ufunc(np.sqrt, reduce("sum", apply_ufunc(np.multiply, x, x),
                                               tuple(range(x.ndim)), keepdims))
        axes = tuple(range(x.ndim))
    else:
        axes = normalize_axes(axis, x.ndim, "norm")
    if len(axes) == 2:
        if ord in (None, "fro", "f"):
            return apply_ufunc(np.sqrt, reduce("sum", apply_ufunc(np.multiply, x, x), axes,
                                               keepdims))
        if ord in (1, -1, np.inf, -np.inf):
            # numpy/linalg/_linalg.py::norm: the largest (smallest) absolute column sum for
            # ord=+-1, row sum for ord=+-inf, in the axis order the user gave.
            row, col = _matrix_axes(axis, x.ndim)
            if ord in (np.inf, -np.inf):
                row, col = col, row
            absx = apply_ufunc(np.absolute, x)
            sums = reduce("sum", absx, (row,), keepdims=True)
            # (NumPy's max has initial=0: an empty matrix has norm 0; its min has none)
            out = reduce_with("max", sums, (col,), True, None, 0.0) if ord > 0 else \
                reduce("min", sums, (col,), keepdims=True)
            return out if keepdims else squeeze(out, tuple(sorted((row, col))))
        if ord in (2, -2, "nuc"):
            raise unsupported(f"np.linalg.norm(ord={ord!r}) of a matrix",
                              "it needs singular values (np.linalg.svd)")
        raise ValueError(with_location("Invalid norm order for matrices."))
    if len(axes) != 1:
        raise ValueError(with_location("Improper number of dimensions to norm."))
    if isinstance(ord, str):
        raise ValueError(with_location(f"Invalid norm order '{ord}' for vectors"))
    if ord is None or ord == 2:
        return apply_ufunc(np.sqrt, reduce("sum", apply_ufunc(np.multiply, x, x), axes, keepdims))
    absx = apply_ufunc(np.absolute, x)
    if ord == np.inf:
        if _count(x, axes) == 0:   # NumPy: abs(x).max(axis, initial=0)
            return full_like(reduce("sum", absx, axes, keepdims), 0)
        return reduce("max", absx, axes, keepdims)
    if ord == -np.inf:
        return reduce("min", absx, axes, keepdims)
    if ord == 0:
        nz = cast(apply_ufunc(np.not_equal, x, 0), x.dtype)
        return reduce("sum", nz, axes, keepdims)
    if ord == 1:
        return reduce("sum", absx, axes, keepdims)
    p = apply_ufunc(np.power, absx, float(ord))
    total = reduce("sum", p, axes, keepdims)
    return apply_ufunc(np.power, total, apply_ufunc(np.reciprocal, constant(float(ord), x.dtype)))


# ------------------------------------------------------------------------------------------
# Movement
# ------------------------------------------------------------------------------------------

def reshape(x: Any, shape: Any, order: str = "C") -> Node:
    x = as_node(x)
    if order == "F":
        # Fortran order is C order on the reversed axes: a.reshape(s, 'F') is
        # a.T.reshape(s[::-1]).T (each a view exactly when NumPy's F reshape is one)
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        return transpose(reshape(transpose(x), tuple(shape)[::-1]))
    if order != "C":
        raise unsupported(f"reshape(order={order!r})",
                          "'A' and 'K' follow the caller's memory layout, which is not "
                          "known when tracing: use 'C' or 'F'")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise ValueError(with_location("can only specify one unknown dimension"))
    if -1 in shape:
        known = numel(tuple(s for s in shape if s != -1))
        if known == 0 or x.size % known:
            raise ValueError(with_location(
                f"cannot reshape array of size {x.size} into shape {shape_str(shape)}"))
        shape[shape.index(-1)] = x.size // known
    shape_t = tuple(shape)
    if numel(shape_t) != x.size or any(s < 0 for s in shape_t):
        raise ValueError(with_location(
            f"cannot reshape array of size {x.size} into shape {shape_str(shape_t)}"))
    if shape_t == x.shape:
        return x
    return make("reshape", [x], shape=shape_t)


def transpose(x: Any, axes: Any = None) -> Node:
    x = as_node(x)
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        if len(axes) != x.ndim:
            raise ValueError(with_location("axes don't match array"))
        # Each axis checked like NumPy (5 % 2 must be an AxisError, not axis 1).
        perm = tuple(normalize_axes(int(a), x.ndim, "transpose")[0] for a in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(with_location("repeated axis in transpose"))
    if perm == tuple(range(x.ndim)):
        return x
    return make("transpose", [x], perm=perm)


def swapaxes(x: Any, a: int, b: int) -> Node:
    x = as_node(x)
    (a,), (b,) = normalize_axes(a, x.ndim, "swapaxes"), normalize_axes(b, x.ndim, "swapaxes")
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def moveaxis(x: Any, source: Any, destination: Any) -> Node:
    x = as_node(x)
    src = [normalize_axes(s, x.ndim, "moveaxis")[0] for s in np.atleast_1d(source)]
    dst = [normalize_axes(d, x.ndim, "moveaxis")[0] for d in np.atleast_1d(destination)]
    if len(src) != len(dst):
        raise ValueError(with_location(
            "`source` and `destination` arguments must have the same number of elements"))
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def squeeze(x: Any, axis: Any = None) -> Node:
    x = as_node(x)
    if _zero_d_int_axis(x, axis):
        return x
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = normalize_axes(axis, x.ndim, "squeeze")
        if any(x.shape[a] != 1 for a in axes):
            raise ValueError(with_location(
                "cannot select an axis to squeeze out which has size not equal to one"))
    return make("squeeze", [x], axes=axes) if axes else x


def expand_dims(x: Any, axis: Any) -> Node:
    x = as_node(x)
    axes = normalize_axes(axis, x.ndim + len(axis if isinstance(axis, (tuple, list)) else (0,)),
                          "expand_dims")
    return make("expand_dims", [x], axes=axes)


def broadcast_to(x: Any, shape: Any) -> Node:
    x = as_node(x)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(with_location("all elements of broadcast shape must be non-negative"))
    try:
        if broadcast_shape([x.shape, shape]) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(with_location(
            f"operands could not be broadcast together with remapped shapes "
            f"[original->remapped]: {shape_str(x.shape)}  and requested shape "
            f"{shape_str(shape)}")) from None
    return x if shape == x.shape else make("broadcast_to", [x], shape=shape)


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Node:
    """A view of the diagonal with the given offset of the plane (axis1, axis2), which NumPy
    appends as the last axis."""
    x = as_node(x)
    if x.ndim < 2:
        raise ValueError(with_location("diag requires an array of at least two dimensions"))
    (a1,), (a2,) = (normalize_axes(axis1, x.ndim, "diagonal"),
                    normalize_axes(axis2, x.ndim, "diagonal"))
    if a1 == a2:
        raise ValueError(with_location("axis1 and axis2 cannot be the same"))
    return make("diagonal", [x], offset=operator.index(offset), axis1=a1, axis2=a2)


def sliding_window(x: Any, size: int, axis: int) -> Node:
    """``sliding_window_view(x, size, axis)``: a view of every window of ``size`` elements
    along ``axis``, the window as a new last axis."""
    x = as_node(x)
    (ax,) = normalize_axes(axis, x.ndim, "sliding_window_view")
    if not 0 <= size <= x.shape[ax]:
        raise ValueError(with_location("window shape cannot be larger than input array shape"))
    return make("sliding_window", [x], size=int(size), axis=ax)


def ravel(x: Any, order: str = "C") -> Node:
    return reshape(x, (-1,), order)


def flip(x: Any, axis: Any = None) -> Node:
    x = as_node(x)
    axes = normalize_axes(axis, x.ndim, "flip")
    key = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))
    return getitem(x, key)


def getitem(x: Node, key: Any) -> Node:
    """``x[key]``: NumPy's basic and advanced indexing (``trace/indexing.py``)."""
    from .indexing import getitem as _getitem
    return _getitem(x, key)


# ------------------------------------------------------------------------------------------
# Scans, matmul, joins
# ------------------------------------------------------------------------------------------

_SCAN_FUNCTIONS = {"cumsum": np.cumsum, "cumprod": np.cumprod}


def scan(kind: str, x: Any, axis: Any = None, dtype: Any = None, ufunc_method: bool = False
         ) -> Node:
    """A scan primitive (cumsum, cumprod, cummax, cummin) along ``axis``, in the dtype NumPy
    gives: np.cumsum / np.cumprod widen small integers as np.sum does, ``ufunc.accumulate``
    (``ufunc_method``) keeps the operand's dtype."""
    x = as_node(x)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    elif x.ndim == 0:
        x = reshape(x, (1,))   # NumPy scans a 0-d array as a 1-d one (result shape (1,))
    try:
        axis = operator.index(axis)   # NumPy: a scan's axis is one int, never a tuple
    except TypeError as e:
        raise TypeError(with_location(f"np.{kind}: {e}")) from None
    (ax,) = normalize_axes(axis, x.ndim, kind)
    ufunc = OPS[kind].reducer.ufunc
    fn = ufunc.accumulate if ufunc_method or kind not in _SCAN_FUNCTIONS else \
        _SCAN_FUNCTIONS[kind]
    try:
        out_dt = np.asarray(fn(np.ones((1,), x.dtype), dtype=dtype)).dtype
    except TypeError as e:
        raise TypeError(with_location(f"np.{ufunc.__name__}.accumulate: {e}")) from None
    return make(kind, [cast(x, out_dt)], axis=ax, dtype=out_dt.str)


def matmul(a: Any, b: Any) -> Node:
    a, b = as_node(a), as_node(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(with_location(
            "matmul: Input operand does not have enough dimensions"))
    loop = np.matmul.resolve_dtypes((a.dtype, b.dtype, None))
    a2, b2 = cast(a, loop[0]), cast(b, loop[1])
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ValueError(with_location(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n?,k),(k,m?)->(n?,m?) (size {kb} is different from {ka})"))
    return make("matmul", [a2, b2])


def dot(a: Any, b: Any) -> Node:
    a, b = as_node(a), as_node(b)
    if a.ndim == 0 or b.ndim == 0:
        return apply_ufunc(np.multiply, a, b)
    if a.ndim > 2 or b.ndim > 2:
        raise unsupported("np.dot of arrays with more than 2 dimensions", "use np.matmul")
    return matmul(a, b)


def concatenate(arrays: Sequence[Any], axis: Any = 0, dtype: Any = None,
                casting: str = "same_kind") -> Node:
    nodes = [as_node(a) for a in arrays]
    if not nodes:
        raise ValueError(with_location("need at least one array to concatenate"))
    if axis is None:
        nodes = [reshape(n, (-1,)) for n in nodes]
        axis = 0
    nd = nodes[0].ndim
    if nd == 0:
        raise ValueError(with_location("zero-dimensional arrays cannot be concatenated"))
    (ax,) = normalize_axes(axis, nd, "concatenate")
    for i, n in enumerate(nodes):
        if n.ndim != nd:
            raise ValueError(with_location(
                "all the input array dimensions except for the concatenation axis must match "
                f"exactly, but along dimension 0, the array at index 0 has {nd} dimension(s) "
                f"and the array at index {i} has {n.ndim} dimension(s)"))
        for d in range(nd):
            if d != ax and n.shape[d] != nodes[0].shape[d]:
                raise ValueError(with_location(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {d}, the array at index 0 has size "
                    f"{nodes[0].shape[d]} and the array at index {i} has size {n.shape[d]}"))
    dt = check_dtype(dtype, "concatenate") if dtype is not None else np.result_type(
        *[n.dtype for n in nodes])
    for n in nodes:   # NumPy checks the cast of each input into the result
        if not np.can_cast(n.dtype, dt, casting=casting):
            raise TypeError(with_location(
                f"Cannot cast array data from {n.dtype!r} to {dt!r} according to the rule "
                f"{casting!r}"))
    nodes = [cast(n, dt) for n in nodes]
    if len(nodes) == 1:
        return nodes[0]
    parts = [n for n in nodes if n.shape[ax] > 0]
    if 2 <= len(parts) <= MAX_SELECTED_PARTS and not any(_reads_selected(n) for n in parts):
        return _concatenate_by_selects(parts, ax)
    return make("concatenate", nodes, axis=ax)


# A concatenation of at most this many (non-empty) parts is a select between gathers of its
# parts, computed where it is read (fused into its consumer, like Inductor's pointwise cat);
# longer ones are a concatenation kernel (one copy per part).
MAX_SELECTED_PARTS = 4


# Concatenations made as selects (interned nodes, so a set is enough). A concatenation of
# parts that read one is a concatenation kernel: nested selects (np.pad pads each axis with a
# concatenation of views of the previous one) multiply the loads of one kernel, past what a
# GPU kernel's parameters can hold.
_SELECTED: "weakref.WeakSet[Node]" = weakref.WeakSet()


def _reads_selected(node: Node, budget: int = 64) -> bool:
    found = any_ancestor(node, _SELECTED.__contains__, budget)
    return found is not False   # too deep to tell: assume it does


def _concatenate_by_selects(parts: Sequence[Node], ax: int) -> Node:
    """Position p along ``ax`` reads part i at p - offset_i (clipped into the part, so every
    read is in bounds) and the select keeps the part whose range holds p."""
    total = sum(n.shape[ax] for n in parts)
    pos = np.arange(total, dtype=np.int64)
    shape_ax = tuple(total if d == ax else 1 for d in range(parts[0].ndim))
    out = None
    offset = total
    for n in reversed(parts):
        offset -= n.shape[ax]
        idx = np.clip(pos - offset, 0, n.shape[ax] - 1).astype(
            np.int32 if total < 2**31 else np.int64)
        g = make("gather", [n, constant(idx)], axes=(ax,), at=ax, mode="valid",
                 messages=("",))
        if out is None:
            out = g
            continue
        inside = constant(((pos >= offset) & (pos < offset + n.shape[ax])).reshape(shape_ax))
        out = make("where", [inside, g, out])
    _SELECTED.add(out)
    return out


def stack(arrays: Sequence[Any], axis: int = 0, dtype: Any = None,
          casting: str = "same_kind") -> Node:
    nodes = [as_node(a) for a in arrays]
    if not nodes:
        raise ValueError(with_location("need at least one array to stack"))
    if len({n.shape for n in nodes}) != 1:
        raise ValueError(with_location("all input arrays must have the same shape"))
    (ax,) = normalize_axes(axis, nodes[0].ndim + 1, "stack")
    return concatenate([make("expand_dims", [n], axes=(ax,)) for n in nodes], ax, dtype,
                       casting)


def full_like(x: Node, fill: Any, dtype: Any = None, shape: Any = None) -> Node:
    dt = check_dtype(dtype if dtype is not None else x.dtype, "full_like")
    shp = x.shape if shape is None else tuple(np.atleast_1d(shape))
    check_python_int(fill, dt)
    return broadcast_to(constant(np.asarray(fill).astype(dt)), shp)


def is_elementwise(op: str) -> bool:
    return OPS[op].kind is Kind.ELEMENTWISE



def array_from_nested(a: Any) -> Node:
    """``np.array`` of a tracer or of nested lists/tuples holding tracers and numbers: the
    leaves stacked level by level, in the dtype NumPy's array construction gives (Python
    numbers count as int64/float64/bool here: no weak promotion)."""
    if isinstance(a, Node):
        return a
    if not isinstance(a, (list, tuple)):
        from .tracer import Tracer
        if isinstance(a, Tracer):
            return a.node
        return constant(np.asarray(a))
    if not a:
        return constant(np.asarray(a, dtype=np.float64))
    parts = [array_from_nested(v) for v in a]
    shapes = {p.shape for p in parts}
    if len(shapes) != 1:
        raise ValueError(with_location(
            "setting an array element with a sequence. The requested array has an "
            "inhomogeneous shape after 1 dimensions."))
    dt = np.result_type(*[p.dtype for p in parts])
    return stack([cast(p, dt) for p in parts], 0)
