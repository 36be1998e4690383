"""Elementwise functions, comparisons of arrays, finite differences, polynomials, convolution,
statistics of two arrays, selection and the function-applying helpers, each following NumPy's
own definition (numpy/lib/_function_base_impl.py, numpy/_core/numeric.py)."""
from __future__ import annotations

import itertools
import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ...ops import Kind, OPS
from .. import context, numpy_api as api
from ..build import normalize_axes, unsupported
from ...errors import with_location
from ..graph import toposort
from ..tracer import Tracer, store_out, unwrap
from . import ALL, FLOATS, NUMERIC, NUMPY_IMPLEMENTATION as NUMPY, as_tracer, composite

# ------------------------------------------------------------------------------------------
# Selection
# ------------------------------------------------------------------------------------------


# np.where is with nonzero (composites/indexing.py): one argument is np.nonzero


@composite(np.select, calls=['np.select([{0} < 0, {0} > 2], [-{0}, {0} * 2], 7)'], dtypes=NUMERIC)
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Tracer:
    """The first true condition's choice, else ``default`` (in the choices' result dtype)."""
    if len(condlist) != len(choicelist):
        raise ValueError(with_location("list of cases must be same length as list of "
                                       "conditions"))
    if len(condlist) == 0:   # (a traced array of conditions too: its first axis)
        raise ValueError(with_location("select with an empty condition list is not possible"))
    choices = [as_tracer(c) for c in choicelist] + [as_tracer(np.asarray(default))]
    # The result dtype as NumPy works it out (Python scalars, in the list or as the default,
    # are weak there): asked of NumPy on one-element stand-ins, the scalars as given.
    dt = np.select([np.zeros(1, bool)] * len(choicelist),
                   [_dtype_stand_in(c, t) for c, t in zip(choicelist, choices)],
                   _dtype_stand_in(default, choices[-1])).dtype
    conds = [as_tracer(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != np.dtype(bool):
            raise TypeError(with_location(
                f"invalid entry {i} in condlist: should be boolean ndarray"))
    out = choices[-1].astype(dt)
    for cond, choice in zip(reversed(conds), reversed(choices[:-1])):
        out = np.where(cond, choice.astype(dt), out)
    shape = np.broadcast_shapes(*[c.shape for c in conds + choices])
    return np.broadcast_to(out, shape) if out.shape != shape else out


def _dtype_stand_in(value: Any, traced: Tracer) -> Any:
    """What NumPy's dtype rules see of an operand: a Python scalar itself (weak), else a
    one-element array of its dtype."""
    if isinstance(value, (bool, int, float, complex)):
        return value
    return np.zeros(1, traced.dtype)


@composite(np.piecewise, calls=['np.piecewise({0}, [{0} < 0, {0} >= 0], [lambda v: -v, lambda v: v * 2])',
                                'np.piecewise({0}, [{0} < 1], [3, lambda v: v + 1])',
                                'np.piecewise({0}, [{0} < 0], [lambda v: v - v.min(), '
                                'lambda v: np.cumsum(v)])'],
           dtypes=NUMERIC)
def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Tracer:
    """Each function's values where its condition holds (the last true condition wins, as in
    NumPy's loop of assignments); an extra function is the default where none holds. NumPy
    calls each function on the selected elements only. A function that acts elementwise runs
    on the whole array instead (the same values, in one fused kernel, no data-dependent
    size); any other one is called as NumPy calls it, on ``x[cond]`` (its length found by a
    probe when the compiled function runs), when that selects anything, its values written
    into ``y[cond]``."""
    t = as_tracer(x)
    if isinstance(condlist, Tracer) or not isinstance(condlist, (list, tuple)):
        condlist = [condlist]
    conds = [as_tracer(c) for c in condlist]
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(with_location(
            f"with {n} condition(s), either {n} or {n + 1} functions are expected"))
    if len(funclist) == n + 1:
        none = ~np.any(np.stack(np.broadcast_arrays(*conds)), axis=0) if n else \
            np.ones(t.shape, bool)
        conds = conds + [none]
    out = context.owned(np.zeros(t.shape, t.dtype), uniform=True)   # (NumPy's zeros_like)
    for cond, func in zip(conds, funclist):
        if callable(func):
            try:
                vals = as_tracer(func(t, *args, **kw))
                whole = vals.shape == t.shape and _elementwise_of(vals.node, t.node)
            except Exception:   # noqa: BLE001 -- e.g. a function of 1-d arrays: NumPy's way
                whole = False
            if not whole:
                mask = np.broadcast_to(cond, t.shape) if cond.shape != t.shape else cond
                selected = t[mask]
                if selected.size > 0:   # (the probe's count: as NumPy's `if vals.size > 0`)
                    out[mask] = func(selected, *args, **kw)
                continue
        else:
            vals = as_tracer(np.asarray(func))
        out = np.where(cond, vals.astype(t.dtype), out)
    return out


def _elementwise_of(result: Any, source: Any) -> bool:
    """Whether ``result`` is computed from ``source`` by elementwise ops (and broadcast
    constants) only, so that each element depends on the same element of ``source``."""
    for n in toposort([result]):
        if n is source:
            continue
        kind = OPS[n.op].kind
        if kind is Kind.SOURCE:
            if n.op == "input":
                return False
            continue
        if kind is Kind.ELEMENTWISE:
            continue
        if kind is Kind.MOVEMENT and n.op == "broadcast_to" and source not in toposort([n]):
            continue
        return False
    return True


@composite(np.clip, calls=['np.clip({0}, -1, 3)', 'np.clip({0}, None, 2)',
                           'np.clip({0}, {1}, None)'], arrays=2, dtypes=NUMERIC,
           divergences=("clip-signed-zero",))
def clip(a: Any, a_min: Any = np._NoValue, a_max: Any = np._NoValue, out: Any = None, *,
         min: Any = np._NoValue, max: Any = np._NoValue, **kw: Any) -> Tracer:
    lo = min if min is not np._NoValue else (None if a_min is np._NoValue else a_min)
    hi = max if max is not np._NoValue else (None if a_max is np._NoValue else a_max)
    # out=: written as a ufunc's output is (NumPy's clip is one), same_kind unless casting=
    return store_out("np.clip", Tracer(api.clip(unwrap(as_tracer(a)), unwrap(lo), unwrap(hi))),
                     out, kw.get("casting", "same_kind"))


# ------------------------------------------------------------------------------------------
# Rounding and special values
# ------------------------------------------------------------------------------------------

def _round(a: Any, decimals: int = 0, out: Any = None) -> Tracer:
    """PyArray_Round: integers are returned for decimals >= 0, else rounded in float64 and
    cast back; floats are scaled by 10**decimals (divided for decimals < 0), rounded half to
    even and scaled back, in their own dtype; bool rounds only with decimals=0. ``out=``:
    the result written into it as NumPy's ``rint`` writes its output (same_kind)."""
    t = as_tracer(a)
    if isinstance(decimals, (float, np.floating)):   # (NumPy: an integer is required)
        raise TypeError(with_location(
            f"'{type(decimals).__name__}' object cannot be interpreted as an integer"))
    if out is not None and t.dtype.kind in "iu" and int(decimals) < 0 and \
            not np.can_cast(np.float64, getattr(out, "dtype", np.float64), "same_kind"):
        # NumPy divides into out (float64 by then): an integer out cannot take it
        raise api.output_cast_error(np.divide, np.float64, out.dtype)
    if not -2**31 <= int(decimals) < 2**31:      # (NumPy's C int)
        raise OverflowError(with_location(
            f"signed integer is {'greater than maximum' if decimals > 0 else 'less than minimum'}"))
    o = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    d = int(decimals)
    if o is not None and hasattr(o, "dtype") and o.dtype != t.dtype and \
            o.dtype.kind == "f" and np.can_cast(t.dtype, o.dtype, "same_kind") and \
            d != 0 and not (t.dtype.kind in "iu" and d >= 0):
        # NumPy's PyArray_Round into a wider out: the scaling in the input's own loop (a
        # float32's in float32, an integer's division in float64), cast into out, then
        # rint and the scaling back in out's dtype
        f = _power_of_ten(abs(d))
        scaled = (t * f if d >= 0 else t / f).astype(o.dtype)
        r = np.rint(scaled)
        return store_out("np.rint", r / f if d >= 0 else r * f, out, "same_kind")
    return store_out("np.rint", _rounded(t, decimals), out, "same_kind")


def _rounded(a: Any, decimals: int) -> Tracer:
    t = as_tracer(a)
    decimals = int(decimals)
    if decimals == 0:
        return np.rint(t) if t.dtype.kind in "fb" else t.copy()
    if t.dtype.kind == "b":
        raise api.output_cast_error(np.multiply, np.float64, np.bool_)
    if t.dtype.kind in "iu":
        if decimals >= 0:
            return t.copy()
        f = _power_of_ten(-decimals)
        return (np.rint(t.astype(np.float64) / f) * f).astype(t.dtype)
    if decimals >= 0:
        f = _power_of_ten(decimals)
        return np.rint(t * f) / f
    f = _power_of_ten(-decimals)
    return np.rint(t / f) * f


def _power_of_ten(n: int) -> float:
    """NumPy's ``power_of_ten`` (PyArray_Round): a table below 10**9, then 1e9 multiplied
    by 10.0 n - 9 times, which differs from 10.0 ** n from n = 23 on and reaches inf past
    float64's range (np.round(x, 400) is NaN there, x * inf / inf)."""
    if n < 9:
        return float(10 ** n)
    r = 1e9
    for _ in range(min(n, 400) - 9):
        r *= 10.0
    return r


composite(np.round, calls=['np.round({0})', 'np.round({0}, 2)',
                           'np.round({0}, -1)'], dtypes=NUMERIC, impl=_round)
composite(np.around, calls=['np.around({0}, 1)'], dtypes=NUMERIC, impl=_round)


@composite(np.fix, calls=['np.fix({0})'], dtypes=NUMERIC)
def fix(x: Any, out: Any = None) -> Tracer:
    """Rounding towards zero: floor of the non-negative values, ceil of the others (``out=``
    as NumPy's floor/ceil write it: same_kind)."""
    t = as_tracer(x)
    return store_out("np.trunc", np.where(t >= 0, np.floor(t), np.ceil(t)), out, "same_kind")


@composite(np.nan_to_num, calls=['np.nan_to_num({0})',
                                 'np.nan_to_num({0}, nan=-1.0, posinf=9.0)'], dtypes=ALL)
def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None,
               neginf: Any = None) -> Tracer:
    """NaN -> ``nan``, +inf -> ``posinf`` (the dtype's largest value), -inf -> ``neginf``
    (its most negative); other dtypes are returned as they are."""
    t = as_tracer(x)
    if t.dtype.kind != "f":
        return t if not copy and t is x else t.copy()
    info = np.finfo(t.dtype)
    big = info.max if posinf is None else posinf
    small = info.min if neginf is None else neginf
    out = np.where(np.isnan(t), np.asarray(nan).astype(t.dtype), t)
    out = np.where(np.isposinf(t), np.asarray(big).astype(t.dtype), out)
    out = np.where(np.isneginf(t), np.asarray(small).astype(t.dtype), out)
    if not copy and t is x:   # copy=False: x itself is updated (and returned), as NumPy's
        x[...] = out
        return x
    return out


for _f in (np.isposinf, np.isneginf):
    composite(_f, calls=[f"np.{_f.__name__}({{0}})"], dtypes=FLOATS, impl=NUMPY)

composite(np.sinc, calls=['np.sinc({0})'], dtypes=FLOATS, impl=NUMPY)
for _f in (np.real, np.imag, np.iscomplex, np.isreal, np.iscomplexobj, np.isrealobj,
           np.real_if_close):
    composite(_f, calls=[f"np.asarray(np.{_f.__name__}({{0}})) * 1"], dtypes=ALL, impl=NUMPY)


# ------------------------------------------------------------------------------------------
# Comparing arrays
# ------------------------------------------------------------------------------------------

composite(np.isclose, calls=['np.isclose({0}, {1})',
                             'np.isclose({0}, {1}, atol=0.5, equal_nan=True)'],
          arrays=2, dtypes=NUMERIC, impl=NUMPY)


@composite(np.allclose, calls=['np.allclose({0}, {1})', 'np.allclose({0}, {0})'],
           arrays=2, dtypes=NUMERIC, divergences=("python-scalar-results",))
def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Tracer:
    """All of ``np.isclose``: a traced 0-d bool (NumPy returns a Python bool)."""
    return np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


@composite(np.array_equal, calls=['np.array_equal({0}, {1})',
                                  'np.array_equal({0}, {0}.copy(), equal_nan=True)'],
           arrays=2, divergences=("python-scalar-results",))
def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Tracer:
    t1, t2 = as_tracer(a1), as_tracer(a2)
    if t1.shape != t2.shape:
        return Tracer(api.constant(np.False_))
    eq = t1 == t2
    if equal_nan and t1.dtype.kind == "f" and t2.dtype.kind == "f":
        eq = eq | (np.isnan(t1) & np.isnan(t2))
    return np.all(eq)


@composite(np.array_equiv, calls=['np.array_equiv({0}, {1}[..., :1])'], arrays=2,
           divergences=("python-scalar-results",))
def array_equiv(a1: Any, a2: Any) -> Tracer:
    t1, t2 = as_tracer(a1), as_tracer(a2)
    try:
        np.broadcast_shapes(t1.shape, t2.shape)
    except ValueError:
        return Tracer(api.constant(np.False_))
    return np.all(t1 == t2)


# ------------------------------------------------------------------------------------------
# Differences, gradients, integrals
# ------------------------------------------------------------------------------------------

composite(np.diff, calls=['np.diff({0})', 'np.diff({0}, n=2, axis=0)',
                          'np.diff({0}, prepend=0)'], min_dims=1, impl=NUMPY)
composite(np.trapezoid, calls=['np.trapezoid({0})', 'np.trapezoid({0}, {1})'],
          arrays=2, dtypes=FLOATS, min_dims=1, same_shape=True, impl=NUMPY,
          divergences=("float-sum-reassociation",)) if hasattr(np, "trapezoid") else None


@composite(np.ediff1d, calls=['np.ediff1d({0})', 'np.ediff1d({0}, to_begin=-1, to_end=[5, 6])'],
           dtypes=NUMERIC)
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Tracer:
    """The flattened array's consecutive differences, with ``to_begin`` / ``to_end`` (cast
    into the array's dtype under same_kind, as NumPy checks) around them."""
    t = as_tracer(ary).ravel()
    d = t[1:] - t[:-1]
    parts = []
    for extra, name in ((to_begin, "to_begin"), (to_end, "to_end")):
        if extra is None:
            parts.append(None)
            continue
        e = as_tracer(extra if isinstance(extra, Tracer) else np.asarray(extra)).ravel()
        if not np.can_cast(e.dtype, t.dtype, casting="same_kind"):
            raise TypeError(with_location(
                f"dtype of `{name}` must be compatible with input `ary` under the "
                f"`same_kind` rule."))
        parts.append(e.astype(t.dtype))
    seq = [p for p in (parts[0], d, parts[1]) if p is not None]
    return np.concatenate(seq) if len(seq) > 1 else d


@composite(np.gradient, calls=['np.gradient({0})', 'np.gradient({0}, 0.5, axis=0)',
                               'np.gradient({0}, edge_order=2)'], dtypes=FLOATS,
           min_dims=1, max_dims=2)
def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """numpy/lib/_function_base_impl.py::gradient: central differences inside, one-sided at
    the edges (first or second order), for uniform spacings and coordinate arrays."""
    t = as_tracer(f)
    if t.dtype.kind == "b":   # (NumPy keeps bool and subtracts booleans)
        raise TypeError(with_location(
            "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, "
            "the `^` operator, or the logical_xor function instead."))
    if t.dtype.kind in "iu":
        t = t.astype(np.float64)
    axes = tuple(range(t.ndim)) if axis is None else normalize_axes(axis, t.ndim, "gradient")
    n = len(axes)
    if not varargs:
        spacing: list[Any] = [1.0] * n
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = [varargs[0]] * n
    elif len(varargs) == n:
        spacing = list(varargs)
    else:
        raise TypeError(with_location("invalid number of arguments"))
    if edge_order > 2:
        raise ValueError(with_location("'edge_order' greater than 2 not supported"))
    outs = []
    for ax, h in zip(axes, spacing):
        outs.append(_gradient_axis(t, ax, h, edge_order))
    return outs[0] if n == 1 else tuple(outs)


def _sl(t: Tracer, ax: int, start: Any, stop: Any) -> Tracer:
    key = [slice(None)] * t.ndim
    key[ax] = slice(start, stop)
    return t[tuple(key)]


def _gradient_axis(t: Tracer, ax: int, h: Any, edge_order: int) -> Tracer:
    n = t.shape[ax]
    if n < edge_order + 1:
        raise ValueError(with_location(
            "Shape of array too small to calculate a numerical gradient, at least "
            "(edge_order + 1) elements are required."))
    shape = [1] * t.ndim
    uniform = np.ndim(h) == 0
    if not uniform:
        x = as_tracer(h).astype(np.result_type(t.dtype, np.float64)
                                if as_tracer(h).dtype.kind in "biu" else as_tracer(h).dtype)
        if x.ndim != 1 or x.shape[0] != n:
            raise ValueError(with_location("when 1d, distances must match the length of the "
                                           "corresponding dimension"))
        shape[ax] = -1
        dx = np.diff(x)
    parts = []
    if uniform:
        inner = (_sl(t, ax, 2, None) - _sl(t, ax, None, -2)) / (2.0 * h)
    else:
        dx1, dx2 = dx[:-1].reshape(shape), dx[1:].reshape(shape)
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        inner = a * _sl(t, ax, None, -2) + b * _sl(t, ax, 1, -1) + c * _sl(t, ax, 2, None)
    if edge_order == 1:
        if uniform:
            first = (_sl(t, ax, 1, 2) - _sl(t, ax, 0, 1)) / h
            last = (_sl(t, ax, -1, None) - _sl(t, ax, -2, -1)) / h
        else:
            first = (_sl(t, ax, 1, 2) - _sl(t, ax, 0, 1)) / dx[0]
            last = (_sl(t, ax, -1, None) - _sl(t, ax, -2, -1)) / dx[-1]
    else:
        if uniform:
            a, b, c = -1.5 / h, 2.0 / h, -0.5 / h
            first = a * _sl(t, ax, 0, 1) + b * _sl(t, ax, 1, 2) + c * _sl(t, ax, 2, 3)
            a, b, c = 0.5 / h, -2.0 / h, 1.5 / h
            last = a * _sl(t, ax, -3, -2) + b * _sl(t, ax, -2, -1) + c * _sl(t, ax, -1, None)
        else:
            d1, d2 = dx[0], dx[1]
            a = -(2.0 * d1 + d2) / (d1 * (d1 + d2))
            b = (d1 + d2) / (d1 * d2)
            c = -d1 / (d2 * (d1 + d2))
            first = a * _sl(t, ax, 0, 1) + b * _sl(t, ax, 1, 2) + c * _sl(t, ax, 2, 3)
            d1, d2 = dx[-2], dx[-1]
            a = d2 / (d1 * (d1 + d2))
            b = -(d2 + d1) / (d1 * d2)
            c = (2.0 * d2 + d1) / (d2 * (d1 + d2))
            last = a * _sl(t, ax, -3, -2) + b * _sl(t, ax, -2, -1) + c * _sl(t, ax, -1, None)
    parts = [first] + ([inner] if n > 2 else []) + [last]
    out = np.concatenate(parts, axis=ax)
    # NumPy writes into np.empty_like(f) (float64 for integers): a float32 f with float64
    # spacings is computed in float64 and rounded once into float32
    return out.astype(t.dtype, copy=False)


# ------------------------------------------------------------------------------------------
# Polynomials, convolution, statistics of two arrays
# ------------------------------------------------------------------------------------------

composite(np.polyval, calls=['np.polyval({0}[:3], {1})'], arrays=2, dtypes=FLOATS,
          min_dims=1, max_dims=1, impl=NUMPY)


@composite(np.vander, calls=['np.vander({0})', 'np.vander({0}, 3, increasing=True)',
                             'np.vander({0}, 0)'],
           dtypes=NUMERIC, min_dims=1, max_dims=1, values="small")
def vander(x: Any, N: Any = None, increasing: bool = False) -> Tracer:
    # numpy/lib/_twodim_base_impl.py::vander: powers by a running product along each row
    # (multiply.accumulate), in the promoted type, so the roundings are NumPy's
    t = as_tracer(x)
    if t.ndim != 1:
        raise ValueError(with_location("x must be a one-dimensional array or sequence."))
    n = t.shape[0]
    cols = n if N is None else int(N)
    dt = np.promote_types(t.dtype, int)
    if cols <= 0:
        return np.zeros((n, max(cols, 0)), dt)
    parts = [np.ones((n, 1), dt)]
    if cols > 1:
        parts.append(np.cumprod(np.broadcast_to(t.astype(dt)[:, None], (n, cols - 1)), axis=1))
    v = np.concatenate(parts, axis=1)
    # (NumPy fills its C-ordered result through a reversed view and returns the result: a
    # copy here, so that a reshape of it is a view as NumPy's is)
    return v if increasing else v[:, ::-1].copy()


composite(np.polyfit, calls=['np.polyfit(np.arange({0}.shape[0]) * 0.5, {0}, 2)',
                             'np.polyfit(np.arange({0}.shape[0]) * 1.0, {0}, 1, w=np.abs({0}) + 1)'],
          dtypes=FLOATS, min_dims=1, max_dims=1, values="small", impl=NUMPY,
          notes="NumPy's implementation over np.vander and np.linalg.lstsq (on the GPU "
          "lstsq's SVD where it runs there: gpu-spectral-basis)")


def _correlate_full(a: Tracer, v: Tracer, valid_only: bool = False) -> Tracer:
    """c[k] = sum_j a[j + k] * v[j] for every overlap k, from -(len(v)-1) to len(a)-1
    (len(a) >= len(v)), summing only the products that overlap (as NumPy's dot of the
    overlapping parts: a padded 0 times an inf in ``v`` is not a NaN). In three bands: the
    middle ones, where every product overlaps, are the windows of ``a`` itself against ``v``;
    only the m - 1 outputs at each end read zeros padded on, and mask their products.
    ``valid_only``: the middle band alone (mode 'valid'). A mask over every output ran
    10x slower than NumPy (np.convolve of 100,000 by 64 elements: 10 ms, NumPy 1 ms; the
    middle band alone 0.4 ms)."""
    n, m = a.shape[0], v.shape[0]
    out_dt = np.result_type(a.dtype, v.dtype)
    # NumPy's float16 dot (HALF_dot) multiplies and adds in float32: a product that overflows
    # float16 stays finite there (234.875 * 1723), so the sum is NumPy's inf, not inf - inf
    dt = np.dtype(np.float32) if out_dt == np.float16 else out_dt
    a, v = a.astype(dt), v.astype(dt)

    def band(x: Tracer, overlap: Tracer | None) -> Tracer:
        products = Tracer(api.sliding_window(x.node, m, 0)) * v
        if overlap is not None:
            products = np.where(overlap, products, np.zeros((), products.dtype))
        return np.sum(products, axis=-1, dtype=dt).astype(out_dt)

    middle = band(a, None)
    if m == 1 or valid_only:
        return middle
    # the ends: m - 1 windows each of the padded a, their products' overlap from two traced
    # aranges broadcast in the kernel (a concrete table of positions made at trace time was
    # 35 GiB for two 48,362-element vectors: soak cpu-2026-12-04-s2, program 785)
    zeros = np.zeros(m - 1, dt)
    row, col = as_tracer(np.arange(m - 1))[:, None], as_tracer(np.arange(m))[None, :]
    left = band(np.concatenate([zeros, a[:m - 1]]), row + col >= m - 1)
    right = band(np.concatenate([a[n - m + 1:], zeros]), row + col < m - 1)
    return np.concatenate([left, middle, right])


def _correlate_mode(full: Tracer, n: int, m: int, mode: str) -> Tracer:
    if mode == "full":
        return full
    lo, hi = min(n, m), max(n, m)   # ('valid' is the middle band: correlate builds it alone)
    if mode == "same":
        start = (lo - 1) // 2 if n >= m else lo - 1 - (lo - 1) // 2 - ((lo + 1) % 2 and 0)
        return full[start:start + hi]
    raise ValueError(with_location(f"mode must be one of 'valid', 'same', or 'full' "
                                   f"(got {mode!r})"))


@composite(np.correlate, calls=['np.correlate({0}, {1}[:3])',
                                "np.correlate({0}, {1}[:4], 'full')",
                                "np.correlate({0}[:2], {1}, 'same')"],
           arrays=2, dtypes=NUMERIC, min_dims=1, max_dims=1,
           divergences=("float-sum-reassociation",))
def correlate(a: Any, v: Any, mode: str = "valid") -> Tracer:
    ta, tv = as_tracer(a), as_tracer(v)
    if ta.ndim != 1 or tv.ndim != 1:
        raise ValueError(with_location("object too deep for desired array"))
    n, m = ta.shape[0], tv.shape[0]
    if n == 0 or m == 0:
        raise ValueError(with_location("v cannot be empty" if m == 0 else "a cannot be empty"))
    valid = mode == "valid"   # (the middle band: no padded end is read)
    if m > n:   # NumPy swaps the operands and reverses: the same values, the same slices
        full = _correlate_full(tv, ta, valid)[::-1]
    else:
        full = _correlate_full(ta, tv, valid)
    return full if valid else _correlate_mode(full, n, m, mode)


@composite(np.convolve, calls=['np.convolve({0}, {1}[:3])',
                               "np.convolve({0}, {1}, 'same')",
                               "np.convolve({0}[:2], {1}, 'valid')"],
           arrays=2, dtypes=NUMERIC, min_dims=1, max_dims=1,
           divergences=("float-sum-reassociation",))
def convolve(a: Any, v: Any, mode: str = "full") -> Tracer:
    """numpy/_core/numeric.py::convolve: the correlation with the reversed kernel (the longer
    operand first)."""
    ta, tv = as_tracer(a).ravel() if as_tracer(a).ndim == 0 else as_tracer(a), as_tracer(v)
    if ta.ndim == 0:
        ta = ta.reshape(1)
    if tv.ndim == 0:
        tv = tv.reshape(1)
    if tv.shape[0] > ta.shape[0]:
        ta, tv = tv, ta
    if ta.shape[0] == 0:
        raise ValueError(with_location("a cannot be empty"))
    if tv.shape[0] == 0:
        raise ValueError(with_location("v cannot be empty"))
    return correlate(ta, tv[::-1], mode)


@composite(np.polymul, calls=['np.polymul({0}, {1}[:2])', 'np.polymul({0}[:1] * 0, {1})',
                              'np.polymul(np.concatenate([{0}[:1] * 0, {0}]), {1}[:3])'],
           arrays=2, dtypes=NUMERIC, min_dims=1, max_dims=1,
           divergences=("float-sum-reassociation",))
def polymul(a1: Any, a2: Any) -> Tracer:
    """numpy/lib/_polynomial_impl.py::polymul of arrays (NumPy makes each a poly1d, which a
    traced value cannot be: its C convolve asks for the data): the convolution of the
    coefficients with their leading zeros stripped as poly1d strips them (a size the data
    decides, staged), [0] for all zeros."""
    def stripped(a: Any) -> Tracer:
        t = as_tracer(a)
        t = t.reshape(1) if t.ndim == 0 else t
        if t.ndim != 1:
            raise ValueError(with_location("Polynomial must be 1d only."))
        t = np.trim_zeros(t, "f")
        return t if t.shape[0] else as_tracer(np.zeros(1, t.dtype))
    return np.convolve(stripped(a1), stripped(a2))


composite(np.cov, calls=['np.cov({0})', 'np.cov({0}, {1}, bias=True)'],
          arrays=2, dtypes=FLOATS, min_dims=1, max_dims=2, same_shape=True, values="small",
          impl=NUMPY, divergences=("float-sum-reassociation", "matmul-blocking"))


@composite(np.corrcoef, calls=['np.corrcoef({0})'], dtypes=FLOATS, min_dims=2,
           max_dims=2, values="small",
           divergences=("float-sum-reassociation", "matmul-blocking"))
def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Tracer:
    """numpy/lib/_function_base_impl.py::corrcoef: the covariance scaled by the standard
    deviations on both sides, clipped to [-1, 1]."""
    c = np.cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = np.diagonal(c)
    stddev = np.sqrt(d)
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


# ------------------------------------------------------------------------------------------
# Applying functions, grids
# ------------------------------------------------------------------------------------------

APPLY_MAX_CALLS = 4096


@composite(np.apply_along_axis, calls=['np.apply_along_axis(np.cumsum, -1, {0})',
                                       'np.apply_along_axis(lambda r: r.max(), 0, {0})'],
           dtypes=NUMERIC, min_dims=1, max_dims=2)
def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: Any, *args: Any,
                     **kwargs: Any) -> Tracer:
    """``func1d`` traced on every 1-d slice (at most ``APPLY_MAX_CALLS`` of them: the loop
    is unrolled), the results stacked where the axis was."""
    t = as_tracer(arr)
    (ax,) = normalize_axes(axis, t.ndim, "apply_along_axis")
    moved = np.moveaxis(t, ax, -1)
    outer = moved.shape[:-1]
    count = math.prod(outer)
    if count == 0:
        raise ValueError(with_location("Cannot apply_along_axis when any iteration dimensions "
                                       "are 0"))
    if count > APPLY_MAX_CALLS:
        raise unsupported(f"np.apply_along_axis over {count} slices",
                          f"it unrolls into one call per slice (at most {APPLY_MAX_CALLS}); "
                          f"write the function on whole arrays instead")
    results = [as_tracer(func1d(moved[idx], *args, **kwargs))
               for idx in itertools.product(*[range(n) for n in outer])]
    # NumPy's result buffer takes the first slice's result dtype and casts the later ones
    # into it (unsafely: a float result after an int one is truncated)
    stacked = np.stack([r.astype(results[0].dtype, copy=False) for r in results]
                       ).reshape(outer + results[0].shape)
    if results[0].ndim == 0:
        return stacked
    # the result's dimensions go where the axis was
    nres = results[0].ndim
    src = list(range(len(outer), len(outer) + nres))
    dst = list(range(ax, ax + nres))
    return np.moveaxis(stacked, src, dst)


@composite(np.meshgrid, calls=['np.meshgrid({0}, {1})',
                             "np.meshgrid({0}, {1}, indexing='ij', sparse=True)"],
           arrays=2, min_dims=1, max_dims=1)
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy"
             ) -> tuple[Tracer, ...]:
    """numpy/lib/_function_base_impl.py::meshgrid: each input along its own axis (the first
    two swapped for 'xy' indexing), broadcast against the others unless sparse."""
    if indexing not in ("xy", "ij"):
        raise ValueError(with_location("Valid values for `indexing` are 'xy' and 'ij'."))
    ndim = len(xi)
    s0 = (1,) * ndim
    out = [as_tracer(x).reshape(s0[:i] + (-1,) + s0[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and ndim > 1:
        out[0] = out[0].reshape((1, -1) + s0[2:])
        out[1] = out[1].reshape((-1, 1) + s0[2:])
    if not sparse:
        out = list(np.broadcast_arrays(*out))
    return tuple(o.copy() for o in out) if copy else tuple(out)


@composite(np.linspace, calls=['np.linspace({0}.min(), {0}.max(), 7)',
                               'np.linspace(0, {0}, 4, endpoint=False)'],
           dtypes=FLOATS, min_dims=1, max_dims=1, values="small")
def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """numpy/_core/function_base.py::linspace with traced end points, step by step (the
    denormal-step branch is a select: NumPy takes it for every point when any step is
    zero)."""
    num = int(num)
    if num < 0:
        raise ValueError(with_location(f"Number of samples, {num}, must be non-negative."))
    div = (num - 1) if endpoint else num
    # NumPy's computation dtype keeps Python scalars weak: asked of NumPy on stand-ins (a
    # 1-element array for each traced end point).
    def stand_in(v: Any) -> Any:
        return np.zeros(1, v.dtype) if isinstance(v, Tracer) else v
    dt = np.linspace(stand_in(start), stand_in(stop), 2).dtype
    s = as_tracer(start).astype(dt)
    e = as_tracer(stop).astype(dt)
    out_dt = dt if dtype is None else np.dtype(dtype)
    delta = np.subtract(e, s, dtype=dt)
    y = np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * delta.ndim)
    y = as_tracer(y)
    if div > 0:
        step = delta / div
        any_zero = (step == 0).any() if step.ndim else step == 0
        y = np.where(any_zero, (y / div) * delta, y * step)
    else:
        step = np.full(delta.shape, np.nan, dt)
        y = y * delta
    y = y + s
    if endpoint and num > 1:
        last = np.arange(num).reshape((-1,) + (1,) * delta.ndim) == num - 1
        y = np.where(last, e, y)
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if out_dt.kind in "iu":
        y = np.floor(y)
    y = y.astype(out_dt, copy=False)
    return (y, step) if retstep else y


composite(np.logspace, calls=['np.logspace({0}.min(), {0}.max(), 5)'], dtypes=FLOATS,
          min_dims=1, max_dims=1, values="small", impl=NUMPY)


# ------------------------------------------------------------------------------------------
# dtype queries with traced arguments
# ------------------------------------------------------------------------------------------

def _dtype_arg(x: Any) -> Any:
    return x.dtype if isinstance(x, Tracer) else x


composite(np.result_type, calls=['np.zeros(2, np.result_type({0}, 1.0))'],
          impl=lambda *arrays_and_dtypes: np.result_type(*[_dtype_arg(a)
                                                           for a in arrays_and_dtypes]))
composite(np.can_cast, calls=['np.zeros(int(np.can_cast({0}, np.float64)))'],
          impl=lambda from_, to, casting="safe": np.can_cast(_dtype_arg(from_), to, casting))
def _min_scalar_type(a: Any) -> np.dtype:
    """The dtype of an array; of a 0-d value it depends on the value, which a trace does not
    know."""
    if isinstance(a, Tracer) and a.ndim == 0:
        raise unsupported("np.min_scalar_type of a traced 0-d value", "its result depends on "
                          "the value")
    return a.dtype if isinstance(a, Tracer) else np.min_scalar_type(a)


composite(np.min_scalar_type, calls=['np.zeros(2, np.min_scalar_type({0}))'], min_dims=1,
          impl=_min_scalar_type)
composite(np.common_type, calls=['np.zeros(2, np.common_type({0}))'], dtypes=NUMERIC,
          impl=NUMPY)

__all__ = ["FLOATS", "NUMERIC", "ALL"]


# ------------------------------------------------------------------------------------------
# Bits
# ------------------------------------------------------------------------------------------

def _bit_axis(t: Tracer, axis: Any, what: str) -> tuple[Tracer, int]:
    """NumPy's pack/unpack axis: None flattens; a 0-d array counts as 1-d."""
    if axis is None or t.ndim == 0:
        t = t.ravel()
    if axis is None:
        return t, 0
    return t, normalize_axes(operator.index(axis), t.ndim, what)[0]


def _bit_weights(bitorder: Any) -> np.ndarray:
    if not isinstance(bitorder, str):
        raise TypeError(with_location(f"pack() argument 3 must be str, not "
                                      f"{type(bitorder).__name__}"))
    if bitorder not in ("big", "little"):
        raise ValueError(with_location("'order' must be either 'little' or 'big'"))
    w = np.array([1, 2, 4, 8, 16, 32, 64, 128], np.uint8)
    return w[::-1].copy() if bitorder == "big" else w


@composite(np.packbits, calls=['np.packbits({0})', 'np.packbits({0} > 0, axis=-1)',
                               "np.packbits({0}, axis=0, bitorder='little')"],
           dtypes=tuple(d for d in ALL if d.kind in "iub"))
def packbits(a: Any, axis: Any = None, bitorder: Any = "big") -> Tracer:
    """Each run of 8 elements along ``axis`` (the last run padded with zeros) as one uint8,
    a nonzero element a set bit, the first element the highest bit (``bitorder="big"``)."""
    t = as_tracer(a)
    if t.dtype.kind not in "iub":
        raise TypeError(with_location(
            "Expected an input array of integer or boolean data type"))
    weights = _bit_weights(bitorder)
    t, ax = _bit_axis(t, axis, "np.packbits")
    bits = np.moveaxis(t != 0, ax, -1)
    n = bits.shape[-1]
    pad = -n % 8
    if pad:
        bits = np.concatenate([bits, np.zeros(bits.shape[:-1] + (pad,), bool)], axis=-1)
    groups = bits.reshape(bits.shape[:-1] + ((n + pad) // 8, 8))
    packed = np.where(groups, weights, np.uint8(0)).sum(axis=-1, dtype=np.uint8)
    return np.moveaxis(packed, -1, ax)


# (an empty axis unpacked with count > 0: NumPy leaves its padding unwritten, divergence
# unpackbits-empty-padding; random programs do not draw it for an empty operand)
@composite(np.unpackbits, calls=['np.unpackbits({0})', 'np.unpackbits({0}, axis=-1, count=-3)',
                                 "np.unpackbits({0}, axis=0, count=11, bitorder='little')"],
           dtypes=(np.dtype(np.uint8),), nonempty=True,
           divergences=("unpackbits-empty-padding",))
def unpackbits(a: Any, axis: Any = None, count: Any = None, bitorder: Any = "big") -> Tracer:
    """Each uint8 along ``axis`` as 8 elements of 0 or 1 (the highest bit first with
    ``bitorder="big"``); ``count`` keeps that many (negative: all but that many), padding
    with zeros past the end."""
    t = as_tracer(a)
    if t.dtype != np.uint8:
        raise TypeError(with_location("Expected an input array of unsigned byte data type"))
    weights = _bit_weights(bitorder)
    t, ax = _bit_axis(t, axis, "np.unpackbits")
    moved = np.moveaxis(t, ax, -1)
    n = 8 * moved.shape[-1]
    keep = n if count is None else operator.index(count)
    if keep < 0:
        keep += n
        if keep < 0:
            raise ValueError(with_location("-count larger than number of elements"))
    bits = ((moved[..., None] & weights) != 0).astype(np.uint8)
    bits = bits.reshape(moved.shape[:-1] + (n,))
    if keep <= n:
        bits = bits[..., :keep]
    else:
        bits = np.concatenate([bits, np.zeros(bits.shape[:-1] + (keep - n,), np.uint8)],
                              axis=-1)
    return np.moveaxis(bits, -1, ax)
