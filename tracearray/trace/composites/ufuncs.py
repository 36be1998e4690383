"""NumPy ufuncs that are not primitives: each one the formula of NumPy's own loop (its C code in
``numpy/_core/src/npymath`` and ``umath``), in the loop's dtype. float16 loops compute in
float32 and round once at the end, as NumPy's do."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ops import OPS
from .. import numpy_api as api
from ..build import make
from ...errors import with_location
from ..tracer import Tracer
from . import ALL, FLOATS, NUMERIC, as_tracer, composite, node

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)


def _loop(uf: np.ufunc, *xs: Any) -> tuple[np.dtype, ...]:
    """NumPy's loop for these operands (weak Python scalars kept weak)."""
    from ..build import dtype_key
    keys = tuple(dtype_key(node(x) if not isinstance(x, (int, float, bool)) else x)
                 for x in xs)
    try:
        return tuple(uf.resolve_dtypes(keys + (None,) * uf.nout))
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        from ..errors import with_location
        raise TypeError(with_location(f"np.{uf.__name__}: {e}")) from None


def _operands(uf: np.ufunc, *xs: Any) -> tuple[list[Tracer], np.dtype, np.dtype]:
    """The operands cast to the loop's input dtype, the work dtype (float32 for float16) and
    the output dtype."""
    loop = _loop(uf, *xs)
    dt = loop[0]
    work = F32 if dt == F16 else dt
    return [as_tracer(x).astype(work, copy=False) for x in xs], work, loop[uf.nin]


def _done(x: Tracer, out: np.dtype) -> Tracer:
    return x.astype(out, copy=False)


@composite(np.logaddexp, calls=['np.logaddexp({0}, {1})', 'np.logaddexp({0}, 1.5)'],
           arrays=2, dtypes=FLOATS)
def logaddexp(x1: Any, x2: Any, **kw: Any) -> Tracer:
    """npy_logaddexp: x + log1p(exp(y - x)) from the larger side; equal values (infinities of
    one sign too) give x + log(2); a NaN difference is returned as is."""
    (x, y), work, out = _operands(np.logaddexp, x1, x2)
    tmp = x - y
    r = np.where(tmp > 0, x + np.log1p(np.exp(-tmp)),
                 np.where(tmp <= 0, y + np.log1p(np.exp(tmp)), tmp))
    return _done(np.where(x == y, x + math.log(2.0), r), out)


@composite(np.logaddexp2, calls=['np.logaddexp2({0}, {1})'], arrays=2, dtypes=FLOATS)
def logaddexp2(x1: Any, x2: Any, **kw: Any) -> Tracer:
    """npy_logaddexp2: base 2, with log2(1 + 2**d) computed as log1p(2**d) / log(2)."""
    (x, y), work, out = _operands(np.logaddexp2, x1, x2)
    log2e = 1.0 / math.log(2.0)
    tmp = x - y
    r = np.where(tmp > 0, x + log2e * np.log1p(np.exp2(-tmp)),
                 np.where(tmp <= 0, y + log2e * np.log1p(np.exp2(tmp)), tmp))
    return _done(np.where(x == y, x + 1.0, r), out)


def logaddexp_reduce(uf: np.ufunc, x: Any, axis: Any = 0, dtype: Any = None,
                     keepdims: bool = False) -> Tracer:
    """``np.logaddexp.reduce`` (``uf`` np.logaddexp) and ``np.logaddexp2.reduce``: the
    largest term ``m`` factored out, ``m + log(sum(exp(x - m)))`` (base 2 for logaddexp2),
    where NumPy folds the terms in one at a time (divergence ``logaddexp-reduce``). The
    ufunc's identity, -inf, for an empty reduction or only -inf terms; +inf when a term is
    +inf; NaN when one is NaN. float16 is refused: NumPy rounds every step of its fold to
    float16, which no regrouping reproduces within its tolerance."""
    from ..build import unsupported
    x = as_tracer(x)
    # NumPy's loop: the operand's (ints: float64), or dtype='s, in which the fold runs
    dt = x.dtype if dtype is None else np.dtype(dtype)
    try:
        out = work = uf.resolve_dtypes((dt, dt, None))[-1]
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise TypeError(with_location(f"np.{uf.__name__}.reduce: {e}")) from None
    if dtype is not None and out != dt:
        raise TypeError(with_location(f"No loop matching the specified signature and casting "
                                      f"was found for ufunc {uf.__name__}"))
    if out == F16:
        raise unsupported(f"np.{uf.__name__}.reduce of float16",
                          "NumPy rounds every step of its fold to float16; reduce in float32 "
                          "(dtype=np.float32) and cast")
    x = x.astype(work, copy=False)
    exp, log = (np.exp, np.log) if uf is np.logaddexp else (np.exp2, np.log2)
    top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(top), top, np.zeros((), work))   # (inf - inf would be NaN)
    total = np.sum(exp(x - shift), axis=axis, keepdims=keepdims)
    # the shift over the reduced axes, which have length 1 in it: itself, with their shape
    shift = np.sum(shift, axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore"):
        return _done(shift + log(total), out)


def _scale(uf: np.ufunc, f32_factor: Any, f64_factor: float):
    def scale(x: Any, **kw: Any) -> Tracer:
        (v,), work, out = _operands(uf, x)
        factor = f32_factor if work == F32 else f64_factor
        return _done(v * np.asarray(factor, work), out)
    return scale


# deg2rad: x * (pi / 180), rad2deg: x * (180 / pi), the constant rounded in the loop's dtype
# from float32(pi) (as NumPy's float loop computes it).
_DEG = (np.float32(np.pi) / np.float32(180), math.pi / 180.0)
_RAD = (np.float32(180) / np.float32(np.pi), 180.0 / math.pi)
for _uf, _c in ((np.deg2rad, _DEG), (np.radians, _DEG), (np.rad2deg, _RAD), (np.degrees, _RAD)):
    composite(_uf, calls=[f"np.{_uf.__name__}({{0}})"], dtypes=ALL)(_scale(_uf, *_c))


@composite(np.heaviside, calls=['np.heaviside({0}, {1})', 'np.heaviside({0}, 0.5)'],
           arrays=2, dtypes=ALL)
def heaviside(x1: Any, x2: Any, **kw: Any) -> Tracer:
    """npy_heaviside: 0 below zero, ``x2`` at zero, 1 above, NaN for NaN."""
    (x, h), work, out = _operands(np.heaviside, x1, x2)
    r = np.where(x < 0, 0.0, np.where(x > 0, 1.0, np.where(x == 0, h, x)))
    return _done(r, out)


@composite(np.float_power, calls=['np.float_power({0}, {1})',
                                  'np.float_power({0}, 2)'],
           arrays=2, dtypes=ALL, values="small")
def float_power(x1: Any, x2: Any, **kw: Any) -> Tracer:
    """power in float64 (NumPy's float_power has only the double loop), with no fast path
    (np.power's x ** 0.5 -> sqrt differs at -0.0 and -inf)."""
    (x, y), work, out = _operands(np.float_power, x1, x2)
    return Tracer(api.apply_ufunc(np.power, x.node, y.node))


@composite(np.fabs, calls=['np.fabs({0})'], dtypes=ALL)
def fabs(x: Any, **kw: Any) -> Tracer:
    (v,), work, out = _operands(np.fabs, x)
    return _done(np.absolute(v), out)


def _conjugate(x: Any, **kw: Any) -> Tracer:
    """Real values are their own conjugate (a copy in the loop's dtype)."""
    loop = _loop(np.conjugate, x)
    return Tracer(as_tracer(x).astype(loop[0]).node)


composite(np.conjugate, calls=['np.conjugate({0})', '{0}.conj()'], dtypes=ALL,
          impl=_conjugate)


@composite(np.divmod, calls=['np.divmod({0}, {1})', 'divmod({0}, {1})'],
           arrays=2, dtypes=NUMERIC)
def divmod_(x1: Any, x2: Any, **kw: Any) -> tuple[Tracer, Tracer]:
    """(floor_divide, remainder): NumPy computes both from one npy_divmod, as ours do."""
    return np.floor_divide(x1, x2), np.remainder(x1, x2)


@composite(np.modf, calls=['np.modf({0})'], dtypes=ALL)
def modf(x: Any, **kw: Any) -> tuple[Tracer, Tracer]:
    """C's modf: the integral part trunc(x); the fractional part x - trunc(x) with x's sign
    (-0.0 for -3.0), +-0.0 for +-inf."""
    (v,), work, out = _operands(np.modf, x)
    whole = np.trunc(v)
    frac = np.copysign(np.where(np.isinf(v), 0.0, v - whole), v)
    return _done(frac, out), _done(whole, out)


@composite(np.frexp, calls=['np.frexp({0})'], dtypes=ALL)
def frexp(x: Any, **kw: Any) -> tuple[Tracer, Tracer]:
    loop = _loop(np.frexp, x)
    v = as_tracer(x).astype(loop[0], copy=False).node
    return (Tracer(make("frexp_mantissa", [v])), Tracer(make("frexp_exponent", [v])))


@composite(np.spacing, calls=['np.spacing({0})'], dtypes=ALL)
def spacing(x: Any, **kw: Any) -> Tracer:
    """npy_spacing: the distance to the next value away from zero (upwards for +-0.0); NaN for
    inf and NaN."""
    loop = _loop(np.spacing, x)
    v = as_tracer(x).astype(loop[0], copy=False)
    if np.dtype(loop[0]) == np.float16:
        # npy_half_spacing returns a magnitude: for a negative value the gap below |x| in
        # its binade (the smaller one at a power of two), the smallest subnormal for -0.0
        mag = np.abs(v)
        dt = mag.dtype
        up = np.nextafter(mag, np.asarray(np.inf, dt)) - mag
        down = np.where(mag == 0, np.nextafter(np.asarray(0, dt), np.asarray(1, dt)),
                        mag - np.nextafter(mag, np.asarray(0, dt)))
        out = np.where(np.signbit(v), down, up)
        return np.where(np.isfinite(v), out, np.asarray(np.nan, dt))
    up = np.nextafter(v, np.where(v >= 0, np.inf, -np.inf).astype(loop[0]))
    return up - v


@composite(np.vecdot, calls=['np.vecdot({0}, {1})'], arrays=2, dtypes=NUMERIC,
           min_dims=1, divergences=("float-sum-reassociation",))
def vecdot(x1: Any, x2: Any, axis: int = -1, **kw: Any) -> Tracer:
    if kw:
        from ..build import unsupported
        raise unsupported(f"np.vecdot({', '.join(sorted(kw))}=...)")
    loop = _loop(np.vecdot, x1, x2)
    a, b = (as_tracer(x).astype(loop[0], copy=False) for x in (x1, x2))
    na, nb = (t.shape[axis] if t.ndim else None for t in (a, b))
    if a.ndim == 0 or b.ndim == 0 or na != nb:
        raise ValueError(with_location(
            f"vecdot: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n),(n)->() (size {nb} is different from {na})"))
    return np.sum(a * b, axis=axis, dtype=loop[-1])


@composite(np.matvec, calls=['np.matvec({0}, {1}[..., 0, :])'], arrays=2,
           dtypes=NUMERIC, min_dims=2, same_shape=True, divergences=("matmul-blocking",))
def matvec(x1: Any, x2: Any, **kw: Any) -> Tracer:
    a, v = as_tracer(x1), as_tracer(x2)
    return np.matmul(a, v[..., None])[..., 0]


@composite(np.vecmat, calls=['np.vecmat({1}[..., 0, :], {0})'], arrays=2,
           dtypes=NUMERIC, min_dims=2, same_shape=True, divergences=("matmul-blocking",))
def vecmat(x1: Any, x2: Any, **kw: Any) -> Tracer:
    v, a = as_tracer(x1), as_tracer(x2)
    return np.matmul(v[..., None, :], a)[..., 0, :]

