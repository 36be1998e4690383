"""The complex rules of ``complex.py``'s tables: each ufunc as NumPy's complex loop computes
it (``numpy/_core/src/umath/loops.c.src``, ``loops_arithm_fp.dispatch.c.src``), and the NumPy
functions that are not part-wise.

Operands arrive as (re, im) pairs of real tracers in the loop's part dtype.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import with_location
from ..interleaved import real_dtype
from .build import inexact_dtype, normalize_axes, unsupported
from . import complex_math as cm
from .complex import (PARTWISE, ComplexTracer, as_complex, complex_result_dtype,
                      discard_imaginary, function_rule,
                      is_complex, parts, ufunc_rule)

C = ComplexTracer


# ============================================================================================
# Arithmetic
# ============================================================================================

@ufunc_rule(np.add)
def _add(a: Any, b: Any) -> C:
    return C(a[0] + b[0], a[1] + b[1])


@ufunc_rule(np.subtract)
def _subtract(a: Any, b: Any) -> C:
    return C(a[0] - b[0], a[1] - b[1])


@ufunc_rule(np.multiply)
def _multiply(a: Any, b: Any) -> C:
    return C(*cm.mul(a, b))


@ufunc_rule(np.true_divide)
def _divide(a: Any, b: Any) -> C:
    return C(*cm.div(a, b))


@ufunc_rule(np.negative)
def _negative(a: Any) -> C:
    return C(-a[0], -a[1])


@ufunc_rule(np.positive)
def _positive(a: Any) -> C:
    return C(+a[0], +a[1])


@ufunc_rule(np.conjugate)
def _conjugate(a: Any) -> C:
    return C(+a[0], -a[1])


@ufunc_rule(np.square)
def _square(a: Any) -> C:
    return C(*cm.mul(a, a))


@ufunc_rule(np.reciprocal)
def _reciprocal(a: Any) -> C:
    return C(*cm.reciprocal(a))


@ufunc_rule(np.power)
def _power(a: Any, b: Any) -> C:
    return C(*cm.power(a, b))


@ufunc_rule(np.float_power)
def _float_power(a: Any, b: Any) -> C:
    # float_power computes in complex128 at least
    if a[0].dtype != np.float64:
        a = tuple(p.astype(np.float64) for p in a)
        b = tuple(p.astype(np.float64) for p in b)
    return C(*cm.power(a, b))


# ============================================================================================
# Real-valued results
# ============================================================================================

@ufunc_rule(np.absolute)
def _absolute(a: Any) -> Any:
    return np.hypot(a[0], a[1])


@ufunc_rule(np.isnan)
def _isnan(a: Any) -> Any:
    return np.isnan(a[0]) | np.isnan(a[1])


@ufunc_rule(np.isinf)
def _isinf(a: Any) -> Any:
    return np.isinf(a[0]) | np.isinf(a[1])


@ufunc_rule(np.isfinite)
def _isfinite(a: Any) -> Any:
    return np.isfinite(a[0]) & np.isfinite(a[1])


def _nonzero(a: Any) -> Any:
    return (a[0] != 0) | (a[1] != 0)


@ufunc_rule(np.logical_not)
def _logical_not(a: Any) -> Any:
    return ~_nonzero(a)


@ufunc_rule(np.logical_and)
def _logical_and(a: Any, b: Any) -> Any:
    return _nonzero(a) & _nonzero(b)


@ufunc_rule(np.logical_or)
def _logical_or(a: Any, b: Any) -> Any:
    return _nonzero(a) | _nonzero(b)


@ufunc_rule(np.logical_xor)
def _logical_xor(a: Any, b: Any) -> Any:
    return _nonzero(a) != _nonzero(b)


@ufunc_rule(np.equal)
def _equal(a: Any, b: Any) -> Any:
    return (a[0] == b[0]) & (a[1] == b[1])


@ufunc_rule(np.not_equal)
def _not_equal(a: Any, b: Any) -> Any:
    return (a[0] != b[0]) | (a[1] != b[1])


# NumPy orders complex numbers lexicographically, and a NaN imaginary part makes the
# real-part comparison false (loops.c.src, CLT / CLE / CGT / CGE).
def _ordered(op: Any, op_or_equal: Any) -> Any:
    def compare(a: Any, b: Any) -> Any:
        no_nan = ~np.isnan(a[1]) & ~np.isnan(b[1])
        return (op(a[0], b[0]) & no_nan) | ((a[0] == b[0]) & op_or_equal(a[1], b[1]))
    return compare


ufunc_rule(np.less)(_ordered(np.less, np.less))
ufunc_rule(np.less_equal)(_ordered(np.less, np.less_equal))
ufunc_rule(np.greater)(_ordered(np.greater, np.greater))
ufunc_rule(np.greater_equal)(_ordered(np.greater, np.greater_equal))
_GE = _ordered(np.greater, np.greater_equal)
_LE = _ordered(np.less, np.less_equal)


def _choose(first: Any, a: Any, b: Any) -> C:
    return C(np.where(first, a[0], b[0]), np.where(first, a[1], b[1]))


@ufunc_rule(np.maximum)
def _maximum(a: Any, b: Any) -> C:
    # the first operand when it has a NaN part or is >= the second (NaN propagates)
    return _choose(np.isnan(a[0]) | np.isnan(a[1]) | _GE(a, b), a, b)


@ufunc_rule(np.minimum)
def _minimum(a: Any, b: Any) -> C:
    return _choose(np.isnan(a[0]) | np.isnan(a[1]) | _LE(a, b), a, b)


@ufunc_rule(np.fmax)
def _fmax(a: Any, b: Any) -> C:
    # the first operand when the second has a NaN part or the first is >= (NaN ignored)
    return _choose(np.isnan(b[0]) | np.isnan(b[1]) | _GE(a, b), a, b)


@ufunc_rule(np.fmin)
def _fmin(a: Any, b: Any) -> C:
    return _choose(np.isnan(b[0]) | np.isnan(b[1]) | _LE(a, b), a, b)


@ufunc_rule(np.rint)
def _rint(a: Any) -> C:
    """NumPy's complex rint: each part rounded to the nearest integer, half to even."""
    return C(np.rint(a[0]), np.rint(a[1]))


@ufunc_rule(np.sign)
def _sign(a: Any) -> C:
    return C(*cm.sign(a))


# ============================================================================================
# Elementary functions (complex_math.py)
# ============================================================================================

for _uf, _fn in ((np.exp, cm.exp), (np.log, cm.log), (np.sqrt, cm.sqrt),
                 (np.expm1, cm.expm1), (np.log1p, cm.log1p), (np.exp2, cm.exp2),
                 (np.log2, cm.log2), (np.log10, cm.log10),
                 (np.sin, cm.sin), (np.cos, cm.cos), (np.tan, cm.tan),
                 (np.sinh, cm.sinh), (np.cosh, cm.cosh), (np.tanh, cm.tanh),
                 (np.arcsin, cm.arcsin), (np.arccos, cm.arccos), (np.arctan, cm.arctan),
                 (np.arcsinh, cm.arcsinh), (np.arccosh, cm.arccosh),
                 (np.arctanh, cm.arctanh)):
    ufunc_rule(_uf)(lambda a, _fn=_fn: C(*_fn(a)))


# ============================================================================================
# NumPy functions that act on each part alone (positions of their array arguments)
# ============================================================================================

for _f, _spec in {
        np.transpose: (0,), np.reshape: (0,), np.ravel: (0,), np.squeeze: (0,),
        np.expand_dims: (0,), np.swapaxes: (0,), np.moveaxis: (0,), np.broadcast_to: (0,),
        np.flip: (0,), np.fliplr: (0,), np.flipud: (0,), np.roll: (0,), np.rot90: (0,),
        np.tile: (0,), np.repeat: (0,), np.concatenate: (0,), np.stack: (0,),
        np.hstack: (0,), np.vstack: (0,), np.dstack: (0,), np.column_stack: (0,),
        np.atleast_1d: ("*",), np.atleast_2d: ("*",), np.atleast_3d: ("*",),
        np.take: (0,), np.take_along_axis: (0,), np.diagonal: (0,), np.triu: (0,),
        np.tril: (0,), np.copy: (0,), np.cumsum: (0,),
        np.diff: (0, "prepend", "append"), np.trace: (0,), np.ascontiguousarray: (0,),
        np.asarray: (0,), np.array: (0,), np.asanyarray: (0,), np.split: (0,),
        np.array_split: (0,), np.compress: (1,), np.extract: (1,), np.delete: (0,),
        np.append: (0, 1),
        # NumPy rounds a complex array's real and imaginary parts alone (PyArray_Round)
        np.round: (0,), np.around: (0,),
}.items():
    PARTWISE[_f] = _spec


def _out_none(name: str, out: Any) -> None:
    if out is not None:
        raise unsupported(f"{name}(out=...) of complex values",
                          "write the result with `a[...] = ...` instead")


@function_rule(np.sum)
def _sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = np._NoValue, where: Any = True) -> Any:
    _out_none("np.sum", out)
    dt = np.dtype(dtype) if dtype is not None else complex_result_dtype(a)
    if dt.kind != "c":
        # (the values cast to dt, then summed in dt, as NumPy's dtype= does)
        return np.sum(np.asarray(a).astype(dt), axis, dt, None, keepdims, initial, where)
    z = as_complex(a, dt)
    kw = dict(axis=axis, keepdims=keepdims, where=where)
    ire = iim = np._NoValue
    if initial is not np._NoValue:   # a scalar (NumPy's rule): its parts as scalars
        if isinstance(initial, ComplexTracer) or hasattr(initial, "node"):
            raise unsupported("np.sum(initial=...) with a traced start value of complex values",
                              "add the value to the sum instead")
        start = np.asarray(initial).astype(dt)[()]
        ire, iim = start.real, start.imag
    return C(np.sum(z.re, initial=ire, **kw), np.sum(z.im, initial=iim, **kw))


@function_rule(np.interp)
def _interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
            period: Any = None) -> Any:
    """Complex values to interpolate (fp, left, right): NumPy's complex loop, each part
    interpolated alone (composites/indexing.py interp_complex). x and xp must be real."""
    from .composites.indexing import interp_complex
    for v in (x, xp):
        if is_complex(v):
            raise TypeError(with_location("Cannot cast array data from dtype('complex128') "
                                          "to dtype('float64') according to the rule 'safe'"))
    if not is_complex(fp):   # a complex fill of real values: NumPy's float conversion
        raise TypeError(with_location("must be real number, not complex"))
    F = np.float64
    fills = [parts(v, F) if v is not None else (None, None) for v in (left, right)]
    re, im = interp_complex(x, xp, parts(fp, F), [fills[0][0], fills[0][1]],
                            [fills[1][0], fills[1][1]], period)
    return C(re, im)


@function_rule(np.convolve)
def _convolve(a: Any, v: Any, mode: str = "full") -> Any:
    """The complex convolution from four real ones (each NumPy's, modes and the swap of a
    longer v included): (ar*vr - ai*vi) + i(ar*vi + ai*vr), summed in another order than
    NumPy's complex loop (complex-rounding)."""
    dt = complex_result_dtype(a, v)
    za, zv = as_complex(a, dt), as_complex(v, dt)
    return C(np.convolve(za.re, zv.re, mode) - np.convolve(za.im, zv.im, mode),
             np.convolve(za.re, zv.im, mode) + np.convolve(za.im, zv.re, mode))


@function_rule(np.correlate)
def _correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    """NumPy's complex correlation, sum of a[n + k] * conj(v[n]), from four real ones:
    (ar*vr + ai*vi) + i(ai*vr - ar*vi)."""
    dt = complex_result_dtype(a, v)
    za, zv = as_complex(a, dt), as_complex(v, dt)
    return C(np.correlate(za.re, zv.re, mode) + np.correlate(za.im, zv.im, mode),
             np.correlate(za.im, zv.re, mode) - np.correlate(za.re, zv.im, mode))


@function_rule(np.where)
def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:
        return np.nonzero(condition)
    if is_complex(condition):
        condition = np.not_equal(condition, 0)
        if not (is_complex(x) or is_complex(y)):   # (only the condition was complex)
            return np.where(condition, x, y)
    dt = complex_result_dtype(x, y)
    (xr, xi), (yr, yi) = parts(x, real_dtype(dt)), parts(y, real_dtype(dt))
    return C(np.where(condition, xr, yr), np.where(condition, xi, yi))


@function_rule(np.real)
def _real(val: Any) -> Any:
    return as_complex(val).re if is_complex(val) else np.real(val)


@function_rule(np.imag)
def _imag(val: Any) -> Any:
    return as_complex(val).im if is_complex(val) else np.imag(val)


@function_rule(np.conj, np.conjugate)
def _conj(x: Any, *args: Any, **kwargs: Any) -> Any:
    return np.conjugate(as_complex(x), *args, **kwargs)


@function_rule(np.angle)
def _angle(z: Any, deg: bool = False) -> Any:
    c = as_complex(z)
    a = np.arctan2(c.im, c.re)
    return a * (180 / np.pi) if deg else a


@function_rule(np.iscomplexobj)
def _iscomplexobj(x: Any) -> bool:
    return True


@function_rule(np.isrealobj)
def _isrealobj(x: Any) -> bool:
    return False


@function_rule(np.iscomplex)
def _iscomplex(x: Any) -> Any:
    return as_complex(x).im != 0


@function_rule(np.isreal)
def _isreal(x: Any) -> Any:
    return as_complex(x).im == 0


@function_rule(np.real_if_close)
def _real_if_close(a: Any, tol: float = 100) -> Any:
    # NumPy returns the real part only when *every* imaginary part is small: a decision on
    # the data, which a trace cannot make
    raise unsupported("np.real_if_close of traced complex values",
                      "whether the result is real depends on the values; use np.real")


def _make_like(func: Any, fill: Any) -> None:
    # decided here, not in ``like``: while tracing, NumPy's namespace may hold tracearray's
    # replacement of np.full_like (trace/context.py), which ``func`` (NumPy's own) is not
    full = func is np.full_like

    def like(a: Any, *args: Any, **kwargs: Any) -> Any:
        if full:
            value = args[0] if args else kwargs.pop("fill_value")
            args = args[1:]
        else:
            value = fill
        dtype = args[0] if args else kwargs.pop("dtype", None)
        shape = kwargs.pop("shape", None)
        base = as_complex(a) if isinstance(a, ComplexTracer) else a
        dt = np.dtype(dtype) if dtype is not None else base.dtype
        ref = base.re if isinstance(base, ComplexTracer) else base
        if is_complex(value) and not isinstance(value, (complex, np.complexfloating)):
            # a traced complex fill (np.full_like(z, z[1])): broadcast and cast, as np.copyto
            shp = base.shape if shape is None else tuple(np.atleast_1d(shape))
            return np.copy(np.broadcast_to(value.astype(dt, casting="unsafe"), shp))
        if dt.kind != "c":
            # a complex fill cast as NumPy's copyto casts it: to bool, nonzero (1j is True);
            # to numbers, the real part
            fill_v = (value != 0) if dt.kind == "b" and isinstance(
                value, (complex, np.complexfloating)) else np.real(value)
            return np.full_like(ref, fill_v, dtype=dt, shape=shape)
        part = real_dtype(dt)
        v = complex(value)
        return C(np.full_like(ref, v.real, dtype=part, shape=shape),
                 np.full_like(ref, v.imag, dtype=part, shape=shape))
    from .complex import FUNCTIONS
    FUNCTIONS[func] = like


for _func, _fill in ((np.zeros_like, 0), (np.ones_like, 1), (np.empty_like, 0),
                     (np.full_like, None)):
    _make_like(_func, _fill)


# ============================================================================================
# Products, means and variances: NumPy's order and rounding
# ============================================================================================

# An axis of a product is multiplied element by element in NumPy's order: a graph node per
# step, so long axes are refused rather than traced into a huge graph.
MAX_PRODUCT_AXIS = 1024


def _sequential_axis(a: C, axis: int, what: str, step: str = "multiplication") -> list[C]:
    n = a.shape[axis]
    if n > MAX_PRODUCT_AXIS:
        raise unsupported(f"{what} of complex values along an axis of {n} elements",
                          f"{what} of complex values is traced one {step} per element, in "
                          f"NumPy's order, up to {MAX_PRODUCT_AXIS} elements")
    return [a[(slice(None),) * axis + (i,)] for i in range(n)]


def _prod_axis(a: C, axis: int) -> C:
    steps = _sequential_axis(a, axis, "np.prod")
    shape = a.shape[:axis] + a.shape[axis + 1:]
    acc = C(np.ones(shape, a.re.dtype), np.zeros(shape, a.re.dtype))
    for z in steps:
        acc = acc * z
    return acc


@function_rule(np.prod)
def _prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
          initial: Any = np._NoValue, where: Any = True) -> Any:
    _out_none("np.prod", out)
    dt = np.dtype(dtype) if dtype is not None else complex_result_dtype(a)
    if dt.kind != "c":
        return np.prod(np.asarray(a).astype(dt), axis, dt, None, keepdims, initial, where)
    z = as_complex(a, dt)
    if where is not True:
        z = np.where(where, z, 1)
    axes = normalize_axes(axis, z.ndim, "prod")
    result = z
    for ax in sorted(axes, reverse=True):
        result = _prod_axis(result, ax)
    if not axes:   # over no axes (a 0-d array, axis=()) NumPy still multiplies in the identity
        result = C(np.ones(z.shape, z.re.dtype), np.zeros(z.shape, z.re.dtype)) * z
    if initial is not np._NoValue:
        result = result * initial
    if keepdims:
        result = result.reshape(tuple(1 if i in axes else n for i, n in enumerate(z.shape)))
    return result


@function_rule(np.cumprod)
def _cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    _out_none("np.cumprod", out)
    dt = np.dtype(dtype) if dtype is not None else complex_result_dtype(a)
    z = as_complex(a, dt) if dt.kind == "c" else None
    if z is None:
        return np.cumprod(np.asarray(a).astype(dt), axis, dt)
    if axis is None:
        z, axis = z.ravel(), 0
    axis = normalize_axes(axis, z.ndim, "cumprod")[0]
    steps = _sequential_axis(z, axis, "np.cumprod")
    out_steps, acc = [], None
    for s in steps:
        acc = s if acc is None else acc * s
        out_steps.append(acc)
    if not out_steps:
        return z.copy()
    return np.stack(out_steps, axis=axis)


def _count(shape: tuple[int, ...], axis: Any) -> int:
    axes = normalize_axes(axis, len(shape), "mean")
    n = 1
    for ax in axes:
        n *= shape[ax]
    return n


@function_rule(np.mean)
def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
          *, where: Any = True) -> Any:
    # numpy/_core/_methods.py _mean: the complex sum divided by the count as a complex
    # division (Smith's algorithm with a zero imaginary part), not each part by the count
    _out_none("np.mean", out)
    if where is not True:
        raise unsupported("np.mean(..., where=...) of complex values")
    z = as_complex(a, dtype)
    total = _sum(z, axis, None, None, keepdims)
    n = _count(z.shape, axis)
    # (divided with NumPy's intp count, in complex128, then cast back: out=ret)
    return (total / np.intp(n)).astype(total.dtype)


def _var(a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: bool) -> Any:
    # _methods._var: x = a - mean(a, keepdims); |x|^2 as (x * conj(x)).real; the real sum
    # divided by max(n - ddof, 0)
    z = as_complex(a, dtype)
    total = _sum(z, axis, None, None, True)
    n = _count(z.shape, axis)
    d = z - (total / np.intp(n)).astype(total.dtype)
    sq = cm.fma(d.re, d.re, d.im * d.im)   # (d * conj(d)).real, as NumPy multiplies
    s = np.sum(sq, axis=axis, keepdims=keepdims)
    return s / max(n - ddof, 0)


@function_rule(np.var)
def _np_var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
            keepdims: bool = False, *, where: Any = True, mean: Any = np._NoValue,
            correction: Any = np._NoValue) -> Any:
    _out_none("np.var", out)
    if where is not True or mean is not np._NoValue:
        raise unsupported("np.var(..., where= / mean=) of complex values")
    ddof = _ddof(ddof, correction)
    return _as_asked(_var(a, axis, dtype, ddof, keepdims), dtype, a, axis, ddof)


def _ddof(ddof: Any, correction: Any) -> Any:
    """NumPy's choice between ``ddof`` and the array API's ``correction``."""
    if correction is np._NoValue:
        return ddof
    if ddof != 0:
        raise ValueError(with_location("ddof and correction can't be provided simultaneously."))
    return correction


def _as_asked(result: Any, dtype: Any, a: Any, axis: Any, ddof: Any) -> Any:
    """NumPy's var and std are real, except with a complex ``dtype=``: then of that dtype
    (a zero imaginary part; NaN where no degree of freedom is left, as NumPy divides the
    complex sum by a count of 0)."""
    if dtype is None or np.dtype(dtype).kind != "c":
        return result
    out = as_complex(result, np.dtype(dtype))
    if _count(np.shape(a), axis) - ddof <= 0:
        return ComplexTracer(out.re, np.full_like(out.im, np.nan))
    return out


@function_rule(np.std)
def _np_std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
            keepdims: bool = False, *, where: Any = True, mean: Any = np._NoValue,
            correction: Any = np._NoValue) -> Any:
    _out_none("np.std", out)
    if where is not True or mean is not np._NoValue:
        raise unsupported("np.std(..., where= / mean=) of complex values")
    ddof = _ddof(ddof, correction)
    return _as_asked(np.sqrt(_var(a, axis, dtype, ddof, keepdims)), dtype, a, axis, ddof)


@function_rule(np.max, np.amax)
def _max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = np._NoValue, where: Any = True) -> Any:
    return _extremum(np.maximum, "np.max", a, axis, out, keepdims, initial, where)


@function_rule(np.min, np.amin)
def _min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = np._NoValue, where: Any = True) -> Any:
    return _extremum(np.minimum, "np.min", a, axis, out, keepdims, initial, where)


def _extremum(uf: np.ufunc, name: str, a: Any, axis: Any, out: Any, keepdims: bool,
              initial: Any, where: Any) -> Any:
    _out_none(name, out)
    if where is not True or initial is not np._NoValue:
        raise unsupported(f"{name}(..., initial= / where=) of complex values")
    z = as_complex(a)
    axes = normalize_axes(axis, z.ndim, name)
    for ax in axes:
        if z.shape[ax] == 0:
            raise ValueError(with_location(
                f"zero-size array to reduction operation {uf.__name__} which has no identity"))
    result = z
    for ax in sorted(axes, reverse=True):
        steps = _sequential_axis(result, ax, name, "comparison")
        acc = steps[0]
        for s in steps[1:]:
            acc = uf(acc, s)
        result = acc
    if keepdims:
        result = result.reshape(tuple(1 if i in axes else n for i, n in enumerate(z.shape)))
    return result


def _arg_extremum(a: Any, axis: Any, out: Any, keepdims: bool, largest: bool,
                  name: str) -> Any:
    """NumPy's complex argmax / argmin loop (arraytypes.c.src): the first item with a NaN
    part if there is one, else the first of the lexicographic extremum (real part first,
    then imaginary; -0.0 equals 0.0)."""
    _out_none(name, out)
    z = as_complex(a)
    re, im = z.re, z.im
    if axis is None:
        re, im = re.ravel(), im.ravel()
        axis = 0
    nan = np.isnan(re) | np.isnan(im)
    if re.size == 0:       # NumPy's error for an empty sequence
        return getattr(np, name[3:])(nan, axis=axis, keepdims=keepdims)
    reduce, worst = (np.max, -np.inf) if largest else (np.min, np.inf)
    best_re = reduce(np.where(nan, worst, re), axis=axis, keepdims=True)
    tied = (re == best_re) & ~nan
    best_im = reduce(np.where(tied, im, worst), axis=axis, keepdims=True)
    first = np.argmax(tied & (im == best_im), axis=axis, keepdims=keepdims)
    return np.where(np.any(nan, axis=axis, keepdims=keepdims),
                    np.argmax(nan, axis=axis, keepdims=keepdims), first)


@function_rule(np.unique)
def _unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True,
            sorted: bool = True) -> Any:
    """NumPy's own np.unique of the flattened complex values (an external op on the pair
    memory, on the host), once the number of distinct values is known (probed as for real
    values: composites/sets.py)."""
    from . import context
    from .build import external
    from .tracer import Tracer
    if axis is not None:
        raise unsupported("np.unique(axis=...) of complex values")
    pair = as_complex(ar).pair_node()
    attrs = {"equal_nan": bool(equal_nan), "sorted": bool(sorted),
             "return_index": bool(return_index), "return_inverse": bool(return_inverse),
             "return_counts": bool(return_counts)}
    (count,) = external("unique_complex_count", [pair], **attrs)
    n = context.data_size(count, "np.unique's number of distinct values")
    results = external("unique_complex", [pair], count=n, **attrs)
    values = ComplexTracer.from_pair(Tracer(results[0]))
    rest = tuple(Tracer(r) for r in results[1:])
    return (values,) + rest if rest else values


@function_rule(np.argmax)
def _argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    return _arg_extremum(a, axis, out, keepdims, True, "np.argmax")


@function_rule(np.argmin)
def _argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    return _arg_extremum(a, axis, out, keepdims, False, "np.argmin")


@function_rule(np.any)
def _any(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = True) -> Any:
    z = as_complex(a)
    r = np.any((z.re != 0) | (z.im != 0), axis, None, keepdims, where=where)
    if out is None:
        return r
    out[...] = r   # (a complex out=: the bools as complex numbers)
    return out


@function_rule(np.all)
def _all(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = True) -> Any:
    z = as_complex(a)
    r = np.all((z.re != 0) | (z.im != 0), axis, None, keepdims, where=where)
    if out is None:
        return r
    out[...] = r   # (a complex out=: the bools as complex numbers)
    return out


@function_rule(np.count_nonzero)
def _count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Any:
    z = as_complex(a)
    return np.count_nonzero((z.re != 0) | (z.im != 0), axis, keepdims=keepdims)


# ============================================================================================
# Sorting
# ============================================================================================

def _complex_order(z: C, axis: int) -> Any:
    """Positions that sort ``z`` along ``axis`` in NumPy's complex order (``CFLOAT_LT`` of
    numpy/_core/src/npysort/npysort_common.h): every number with a NaN part after every one
    without, in the groups R + Rj, R + nanj, nan + Rj, nan + nanj; within a group by the real
    part, then the imaginary part (a NaN part ties). Three stable sorts (np.lexsort with the
    group as its primary key): equal numbers keep their order, where NumPy's default kind
    orders them its own way, which only +0.0 against -0.0 or NaN payloads can tell apart
    (divergence complex-sort-ties)."""
    group = np.isnan(z.re).astype(np.int8) * 2 + np.isnan(z.im).astype(np.int8)
    return np.lexsort((z.im, z.re, group), axis=axis)


def _sorted_axis(a: Any, axis: Any, kind: Any, order: Any, stable: Any,
                 what: str) -> tuple[C, int]:
    """The complex array and its sort axis, with NumPy's checks of kind, stable and order
    (the real sorts' own: composites/sorting.py; any valid kind sorts alike here)."""
    from .composites.sorting import _no_order, _sort_kind
    _sort_kind(kind, stable, what[3:])
    _no_order(order, what)
    z = as_complex(a)
    if axis is None:
        z, axis = z.reshape(-1), 0
    if isinstance(axis, (tuple, list)):
        raise TypeError(with_location(f"{what}: 'tuple' object cannot be interpreted as an "
                                      f"integer"))
    (ax,) = normalize_axes(axis, z.ndim, what)
    return z, ax


@function_rule(np.sort)
def _sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
          stable: Any = None) -> C:
    z, ax = _sorted_axis(a, axis, kind, order, stable, "np.sort")
    pos = _complex_order(z, ax)
    return C(np.take_along_axis(z.re, pos, ax), np.take_along_axis(z.im, pos, ax))


@function_rule(np.argsort)
def _argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
             stable: Any = None) -> Any:
    z, ax = _sorted_axis(a, axis, kind, order, stable, "np.argsort")
    return _complex_order(z, ax)


@function_rule(np.sort_complex)
def _sort_complex(a: Any) -> C:
    """NumPy sorts a copy along the last axis (complex input keeps its dtype)."""
    return _sort(a)


# ============================================================================================
# Products of arrays
# ============================================================================================

def _product(op: Any, a: Any, b: Any) -> C:
    """(A + iB) op (C + iD) for a bilinear ``op`` (matmul, dot, outer). NumPy converts a
    Python scalar operand to an array first: a strong int64 / float64 / complex128."""
    a, b = (np.asarray(v) if isinstance(v, (bool, int, float, complex)) else v for v in (a, b))
    dt = complex_result_dtype(a, b)
    part = real_dtype(dt)
    (ar, ai), (br, bi) = parts(a, part), parts(b, part)
    if not is_complex(b):      # a real operand: NumPy promotes it; its zero part is skipped
        return C(op(ar, br), op(ai, br))
    if not is_complex(a):
        return C(op(ar, br), op(ar, bi))
    return C(op(ar, br) - op(ai, bi), op(ar, bi) + op(ai, br))


@function_rule(np.matmul)
def _matmul(a: Any, b: Any, /, out: Any = None, **kwargs: Any) -> Any:
    _out_none("np.matmul", out)
    return _product(np.matmul, a, b)


@function_rule(np.einsum)
def _einsum(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
            **kwargs: Any) -> Any:
    """An einsum of complex operands: it is linear in each operand, so it is the sum, over
    each choice of a real or imaginary part per complex operand, of the real einsums of the
    parts, times i to the number of imaginary parts chosen."""
    import itertools
    _out_none("np.einsum", out)
    if not isinstance(subscripts, str):
        raise unsupported("np.einsum's interleaved form (operand, sublist, ...) of complex "
                          "values", "write the subscripts as a string")
    dt = complex_result_dtype(*operands) if dtype is None else np.dtype(dtype)
    if dt.kind != "c":
        raise unsupported(f"np.einsum(..., dtype={dt}) of complex values")
    part = real_dtype(dt)
    pieces = [parts(x, part) if is_complex(x) else (np.asarray(x).astype(part)
              if not hasattr(x, "astype") else x.astype(part), None) for x in operands]
    sums: list[Any] = [None, None]   # the real and imaginary sums

    def add(which: int, term: Any, sign: int) -> None:
        t = term if sign > 0 else -term
        sums[which] = t if sums[which] is None else sums[which] + t
    for choice in itertools.product(*[(0, 1) if p[1] is not None else (0,) for p in pieces]):
        term = np.einsum(subscripts, *[p[c] for p, c in zip(pieces, choice)], **kwargs)
        k = sum(choice) % 4     # i ** k: +1, +i, -1, -i
        add(k % 2, term, 1 if k < 2 else -1)
    re, im = sums
    return C(re, np.zeros_like(re) if im is None else im)


@function_rule(np.dot)
def _dot(a: Any, b: Any, out: Any = None) -> Any:
    _out_none("np.dot", out)
    return _product(np.dot, a, b)


@function_rule(np.select)
def _select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    """NumPy's select (its own code writes with np.copyto, which reads values): the first
    true condition's choice, else ``default``, in the dtype NumPy gives the choices and the
    default (Python scalars weak), over the broadcast shape of all of them."""
    if len(condlist) != len(choicelist):
        raise ValueError(with_location("list of cases must be same length as list of "
                                       "conditions"))
    if not condlist:
        raise ValueError(with_location("select with an empty condition list is not possible"))
    from .composites.functions import _dtype_stand_in

    def stand_in(v: Any) -> Any:   # (the real composite's rule; lists as NumPy arrays)
        return _dtype_stand_in(v, v if hasattr(v, "dtype") else np.asarray(v))
    dt = np.select([np.zeros(1, bool)] * len(choicelist), [stand_in(c) for c in choicelist],
                   stand_in(default)).dtype
    part = real_dtype(dt)
    shape = np.broadcast_shapes(*(np.shape(v) for v in [*condlist, *choicelist, default]))
    re, im = parts(default, part, full=True)
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        if is_complex(cond) or np.dtype(getattr(cond, "dtype", bool)) != np.dtype(bool):
            raise TypeError(with_location("invalid entry in condlist: should be boolean "
                                          "ndarray"))
        cr, ci = parts(choice, part, full=True)
        re, im = np.where(cond, cr, re), np.where(cond, ci, im)
    return C(np.broadcast_to(re, shape).copy(), np.broadcast_to(im, shape).copy())


@function_rule(np.pad)
def _pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    """Each part padded alone where a mode acts on each part alone (copies of edges,
    reflections, wraps, a constant, a mean or a linear ramp: linear in the values), the
    constant and ramp end values split into their parts. NumPy's maximum, minimum and median
    compare complex values as pairs."""
    if not isinstance(array, ComplexTracer) and np.result_type(array).kind != "c":
        # a real array with complex constant or end values: NumPy's result keeps the
        # array's dtype, the values cast to it (their real parts, with a ComplexWarning)
        real_kw = {k: (np.real(v) if k in ("constant_values", "end_values") and
                       not isinstance(v, ComplexTracer) else v) for k, v in kwargs.items()}
        if any(isinstance(v, ComplexTracer) for v in real_kw.values()):
            raise unsupported("np.pad of a real array with traced complex values")
        return np.pad(array, pad_width, mode, **real_kw)
    if callable(mode) or mode in ("maximum", "minimum", "median"):
        raise unsupported(f"np.pad(mode={getattr(mode, '__name__', mode)!r}) of complex values",
                          "pad the real and imaginary parts as you need them")
    z = as_complex(array)
    part = real_dtype(complex_result_dtype(z))
    re_kw, im_kw = dict(kwargs), dict(kwargs)
    for key in ("constant_values", "end_values"):
        if key in kwargs:
            value = kwargs[key]
            if isinstance(value, ComplexTracer) or hasattr(value, "node"):
                raise unsupported(f"np.pad({key}=...) traced, of complex values")
            value = np.asarray(value)
            re_kw[key], im_kw[key] = value.real.astype(part), (
                value.imag.astype(part) if value.dtype.kind == "c" else np.zeros_like(
                    value, part))
    return C(np.pad(z.re, pad_width, mode, **re_kw), np.pad(z.im, pad_width, mode, **im_kw))


@function_rule(np.piecewise)
def _piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    """NumPy's loop of assignments over complex values (its own code reads the list of
    traced conditions as one condition): each function called on ``x[cond]`` when that
    selects anything (the count found by a probe), a constant written where its condition
    holds; an extra function is the default where no condition holds."""
    from .context import owned
    z = as_complex(x)
    if isinstance(condlist, ComplexTracer) or hasattr(condlist, "node") or \
            not isinstance(condlist, (list, tuple)):
        condlist = [condlist]
    conds = [c.astype(bool) if hasattr(c, "node") else
             np.not_equal(c, 0) if isinstance(c, ComplexTracer) else np.asarray(c, bool)
             for c in condlist]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(with_location(
            f"with {n} condition(s), either {n} or {n + 1} functions are expected"))
    if len(funclist) == n + 1:
        conds.append(~np.any(np.stack(np.broadcast_arrays(*conds)), axis=0) if n else
                     np.ones(z.shape, bool))
    out = owned(np.zeros(z.shape, z.dtype))
    for cond, func in zip(conds, funclist):
        mask = np.broadcast_to(cond, z.shape) if np.shape(cond) != z.shape else cond
        if callable(func):
            selected = z[mask]
            if selected.size > 0:
                out[mask] = func(selected, *args, **kw)
        else:
            out = np.where(mask, np.asarray(func).astype(z.dtype), out)
    return out


@function_rule(np.broadcast_arrays)
def _broadcast_arrays(*args: Any, subok: bool = False) -> Any:
    """Each operand broadcast to their common shape, keeping its own dtype (NumPy's own
    code asks np.broadcast for the shape, which reads values)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return tuple(np.broadcast_to(a, shape, subok=subok) for a in args)


@function_rule(np.inner)
def _inner(a: Any, b: Any) -> Any:
    return _product(np.inner, a, b)


@function_rule(np.outer)
def _outer(a: Any, b: Any, out: Any = None) -> Any:
    _out_none("np.outer", out)
    return _product(np.outer, a, b)


@function_rule(np.vdot)
def _vdot(a: Any, b: Any) -> Any:
    # vdot conjugates its first argument and flattens both
    ca = np.conjugate(as_complex(a)) if is_complex(a) else a
    return _product(np.dot, np.ravel(ca), np.ravel(b))


# ============================================================================================
# Writes into an array of the function's own
# ============================================================================================

@function_rule(np.copyto)
def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """np.copyto with complex values on either side (NumPy's nan-functions replace a
    complex array's NaNs with it: np.nansum of complex values)."""
    from .tracer import Tracer
    if not isinstance(dst, (ComplexTracer, Tracer)):
        raise unsupported("np.copyto into a NumPy array the function does not trace")
    src_dt = complex_result_dtype(src) if is_complex(src) else \
        (src.dtype if isinstance(src, Tracer) else np.asarray(src).dtype)
    if not np.can_cast(src_dt, dst.dtype, casting=casting):
        raise TypeError(with_location(
            f"Cannot cast array data from {src_dt!r} to {dst.dtype!r} according to the rule "
            f"{casting!r}"))
    if is_complex(where) and not isinstance(where, (complex, np.generic, list, tuple)):
        raise TypeError(with_location(
            f"Cannot cast array data from {complex_result_dtype(where)!r} to dtype('bool') "
            f"according to the rule 'safe'"))
    if isinstance(dst, ComplexTracer):
        value = as_complex(src, dst.dtype)
    else:   # complex values into a real array (unsafe casting): their real parts
        value = discard_imaginary(as_complex(src), dst.dtype)
    if where is not True:
        value = np.where(where, value, dst)
    dst[...] = value


# ============================================================================================
# NaN-ignoring statistics of complex values (NumPy's branch on "is any slice empty" only
# warns: the same values as a select)
# ============================================================================================

def _nan_replaced(a: Any) -> tuple[Any, Any]:
    """``a`` with 0 where either part is NaN (np.isnan of complex values), and where not."""
    z = as_complex(a)
    ok = ~(np.isnan(z.re) | np.isnan(z.im))
    return np.where(ok, z, 0), ok


def _by_count(total: Any, count: Any) -> Any:
    """NumPy's _divide_by_count: the quotient in the total's dtype."""
    q = total / count
    return q.astype(total.dtype) if q.dtype != total.dtype else q


def _real_values(a: Any) -> bool:
    return not isinstance(a, ComplexTracer) and np.result_type(a).kind != "c"


@function_rule(np.nanmean)
def _nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
             keepdims: bool = False, *, where: Any = True) -> Any:
    _out_none("np.nanmean", out)
    if where is not True:
        raise unsupported("np.nanmean(where=...) of complex values")
    dt = inexact_dtype(dtype) if not _real_values(a) or np.result_type(a).kind == "f" else \
        np.dtype(dtype) if dtype is not None else None
    z, ok = _nan_replaced(a)
    count = np.sum(ok, axis=axis, keepdims=keepdims)
    if dt is not None and dt.kind == "f":   # (NumPy's sum in a real dtype: the real parts)
        return _by_count(np.sum(z.re, axis=axis, dtype=dt, keepdims=keepdims), count)
    return _by_count(np.sum(z, axis=axis, dtype=dtype, keepdims=keepdims), count)


@function_rule(np.nanvar)
def _nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
            keepdims: bool = False, *, where: Any = True, mean: Any = np._NoValue,
            correction: Any = np._NoValue) -> Any:
    _out_none("np.nanvar", out)
    if correction is not np._NoValue:
        if ddof != 0:
            raise ValueError(with_location(
                "ddof and correction can't be provided simultaneously."))
        ddof, correction = correction, np._NoValue
    if _real_values(a):   # real values, a complex dtype
        if np.result_type(a).kind != "f":   # (no NaN: NumPy's np.var)
            return np.var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                          where=where, mean=mean)
        # NumPy sums the mean and the squares in the complex dtype: their imaginary parts
        # are 0, their real parts the sums in the real dtype; the result takes the dtype
        dt = inexact_dtype(dtype)
        return np.nanvar(a, axis=axis, dtype=real_dtype(dt), ddof=ddof, keepdims=keepdims,
                         where=where, mean=mean).astype(dt)
    if where is not True or mean is not np._NoValue:
        raise unsupported("np.nanvar(where=..., mean=...) of complex values")
    dt = inexact_dtype(dtype)
    z, ok = _nan_replaced(a)
    count = np.sum(ok, axis=axis, keepdims=True)
    if dt is not None and dt.kind == "f":
        # NumPy's mean in a real dtype sums the real parts; its squares in that dtype
        avg = _by_count(np.sum(z.re, axis=axis, dtype=dt, keepdims=True), count)
    else:
        avg = _by_count(np.sum(z, axis=axis, dtype=dt, keepdims=True), count)
    d = as_complex(np.where(ok, z - avg, 0))
    sqr = cm.fma(d.re, d.re, d.im * d.im)   # (d * conj(d)).real, as NumPy multiplies (_var)
    var = np.sum(sqr, axis=axis, keepdims=keepdims,
                 dtype=None if dt is None else real_dtype(dt) if dt.kind == "c" else dt)
    dof = (count if keepdims else np.sum(ok, axis=axis)) - ddof
    var = np.where(dof <= 0, var.dtype.type(np.nan), _by_count(var, dof))
    return var.astype(dt) if dt is not None and dt.kind == "c" else var


@function_rule(np.nanstd)
def _nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
            keepdims: bool = False, *, where: Any = True, mean: Any = np._NoValue,
            correction: Any = np._NoValue) -> Any:
    return np.sqrt(_nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                           correction=correction))


# ------------------------------------------------------------------ in-place writes
def _check_place_values(values: Any, dtype: np.dtype) -> None:
    """np.place and np.putmask cast array values (0-d ones too) safely, as NumPy's: a
    complex array into a real target, int64 or complex128 into complex64 raise; NumPy's
    scalars and Python's are converted, but a Python complex into a real target raises
    as float() of it does."""
    from .tracer import Tracer
    if isinstance(values, complex) or (isinstance(values, (list, tuple)) and any(
            isinstance(v, complex) for v in values)):
        if np.dtype(dtype).kind not in "c":
            raise TypeError(with_location(
                f"{'int' if np.dtype(dtype).kind in 'biu' else 'float'}() argument must be a "
                f"string or a real number, not 'complex'"))
        return
    vdt = getattr(values, "dtype", None)
    scalar = isinstance(values, np.generic) or (
        isinstance(values, Tracer) and values.ndim == 0 and values._is_numpy_scalar()) \
        or (isinstance(values, ComplexTracer) and values.ndim == 0 and values._is_numpy_scalar())
    if vdt is not None and not scalar and not np.can_cast(vdt, dtype, "safe"):
        raise TypeError(with_location(
            f"Cannot cast array data from {np.dtype(vdt)!r} to {np.dtype(dtype)!r} "
            f"according to the rule 'safe'"))


def _write_parts(func: Any) -> Any:
    """np.put / np.place / np.putmask with a complex target or values: the function on the
    target's real parts with the values' real parts, and on its imaginary parts with theirs
    (each a view of the target's memory, so the write reaches it and its other names); a
    real target takes the values' real parts, as NumPy's cast to it drops the imaginary
    ones."""
    def rule(a: Any, where: Any, values: Any, *args: Any, **kwargs: Any) -> None:
        if func is not np.put:
            _check_place_values(values, a.dtype)
        if not isinstance(a, ComplexTracer):
            return func(a, where, parts(values, a.dtype, full=True)[0], *args, **kwargs)
        vr, vi = parts(values, a.re.dtype, full=True)
        func(a.re, where, vr, *args, **kwargs)
        func(a.im, where, vi, *args, **kwargs)
    return rule


for _f in (np.put, np.place, np.putmask):
    function_rule(_f)(_write_parts(_f))
