"""Complex arithmetic and elementary functions as real formulas on (re, im) pairs.

Every function takes and returns pairs of real arrays and uses only NumPy operations, so the
same code runs on tracers (recording real graph nodes) and on NumPy arrays (which is how
``tests/test_complex.py`` checks the formulas against NumPy's complex loops element by
element). The formulas follow what NumPy computes: its own loops for the arithmetic
(``loops.c.src``: Smith's division, its reciprocal), and for the elementary functions the C
library's complex functions it calls (glibc's ``cexp``, ``clog``, ``csqrt``, ``ccosh``, ...),
with the special values and branch cuts of C99 Annex G: signed zeros select the side of a
cut, and infinities and NaNs give Annex G's results.
"""
from __future__ import annotations

from typing import Any

import numpy as np

Pair = tuple[Any, Any]


def _where(c: Any, a: Any, b: Any) -> Any:
    return np.where(c, a, b)


def _const(x: Any, value: float) -> Any:
    """``value`` in the dtype of ``x`` (a NumPy scalar: strong, so float32 stays float32)."""
    return np.asarray(x).dtype.type(value) if isinstance(x, np.ndarray) else x.dtype.type(value)


# ============================================================================================
# Arithmetic (NumPy's loops)
# ============================================================================================

def fma(a: Any, b: Any, c: Any) -> Any:
    """a * b + c rounded once: the ``fma`` primitive on tracers, its exact reference on
    NumPy arrays."""
    from ..ops.elementwise import exact_fma
    from .tracer import Tracer
    if not any(isinstance(v, Tracer) for v in (a, b, c)):
        return exact_fma(a, b, c)
    from .build import make
    from .composites import as_tracer
    dt = np.result_type(*(v.dtype for v in (a, b, c) if hasattr(v, "dtype")))
    nodes = [as_tracer(v).astype(dt, copy=False).node for v in (a, b, c)]
    return Tracer(make("fma", nodes))


def mul(a: Pair, b: Pair) -> Pair:
    """NumPy's complex multiplication as its SIMD loops compute it (the contiguous, strided
    and broadcast loops of loops_arithm_fp.dispatch.c.src on x86-64 with FMA): the first
    product of each part fused, fma(ar, br, -(ai bi)) + i fma(ar, bi, ai br)."""
    ar, ai = a
    br, bi = b
    return fma(ar, br, -(ai * bi)), fma(ar, bi, ai * br)


def div(a: Pair, b: Pair) -> Pair:
    """Smith's algorithm, as NumPy's complex division loop computes it (a zero divisor gives
    the quotient of each part by +0: an infinity or NaN)."""
    ar, ai = a
    br, bi = b
    abr, abi = np.abs(br), np.abs(bi)
    real_larger = abr >= abi
    both_zero = (abr == 0) & (abi == 0)
    # |br| >= |bi|: the ratio bi/br; otherwise br/bi (each guarded so that the unused side
    # cannot divide by zero)
    br_safe = _where(real_larger & ~both_zero, br, 1)
    bi_safe = _where(real_larger, 1, bi)
    rat1 = bi / br_safe
    scl1 = 1 / (br_safe + bi * rat1)
    rat2 = br / bi_safe
    scl2 = 1 / (bi_safe + br * rat2)
    zr = _where(both_zero, ar / abr, (ar + ai * rat1) * scl1)
    zi = _where(both_zero, ai / abr, (ai - ar * rat1) * scl1)
    return (_where(real_larger, zr, (ar * rat2 + ai) * scl2),
            _where(real_larger, zi, (ai * rat2 - ar) * scl2))


def reciprocal(a: Pair) -> Pair:
    """NumPy's complex reciprocal loop (a Smith-style 1/z)."""
    ar, ai = a
    real_larger = np.abs(ai) <= np.abs(ar)
    ar_safe = _where(real_larger, ar, 1)
    ai_safe = _where(real_larger, 1, ai)
    r1 = ai / ar_safe
    d1 = ar_safe + ai * r1
    r2 = ar / ai_safe
    d2 = ar * r2 + ai_safe
    return (_where(real_larger, 1 / d1, r2 / d2),
            _where(real_larger, -r1 / d1, -1 / d2))


def sign(a: Pair) -> Pair:
    """NumPy 2's complex sign: z / |z|, 0 for 0, the direction of an infinite part (even
    beside a NaN), NaN when both parts are infinite or |z| is NaN."""
    ar, ai = a
    m = np.hypot(ar, ai)
    inf_r, inf_i = np.isinf(ar), np.isinf(ai)
    finite_m = np.isfinite(m) & (m != 0)
    m_safe = _where(finite_m, m, 1)
    nan = _const(ar, np.nan)
    zero = _const(ar, 0.0)
    one = _const(ar, 1.0)
    any_nan = np.isnan(m) | (inf_r & inf_i)   # (hypot(inf, nan) is inf: a direction)
    re = _where(finite_m, ar / m_safe,
                _where(inf_r, np.copysign(one, ar), zero))
    im = _where(finite_m, ai / m_safe,
                _where(inf_i, np.copysign(one, ai), zero))
    return _where(any_nan, nan, re), _where(any_nan, nan, im)


# ============================================================================================
# exp, log, sqrt, power
# ============================================================================================

def _exp_threshold(x: Any) -> float:
    """glibc's overflow threshold of exp for x's dtype, ``(int) ((MAX_EXP - 1) * M_LN2)``:
    an integer (88, 709), so that ``|x| - t`` is exact and ``exp(t)`` rounds once (a
    fractional t rounded to float32 moved exp(|x| - t) by tens of ulp: soak
    cpu-2026-12-02-v, program 813)."""
    info = np.finfo(np.asarray(x).dtype if isinstance(x, np.ndarray) else x.dtype)
    return float(int((info.maxexp - 1) * np.log(2.0)))


def _cis_scaled(x: Any, y: Any) -> tuple[Any, Any, Any]:
    """(e, c, s) with e*c, e*s = exp(x)*cos(y), exp(x)*sin(y) without overflowing early:
    a real part past the overflow threshold t is split as exp(x - t) * exp(t) (glibc)."""
    t = _exp_threshold(x)
    big = x > t
    e = np.exp(_where(big, x - t, x))
    factor = _where(big, _const(x, np.exp(t)), _const(x, 1.0))
    y_zero = y == 0
    c = _where(y_zero, _const(x, 1.0), np.cos(y)) * factor
    s = _where(y_zero, y, np.sin(y)) * factor
    return e, c, s


def exp(a: Pair) -> Pair:
    x, y = a
    e, c, s = _cis_scaled(x, y)
    re, im = e * c, e * s
    inf_x_bad_y = np.isinf(x) & ~np.isfinite(y)
    pos = x > 0
    re = _where(inf_x_bad_y, _where(pos, _const(x, np.inf), _const(x, 0.0)), re)
    im = _where(inf_x_bad_y, _where(pos, _const(x, np.nan), np.copysign(_const(x, 0.0), y)),
                im)
    im = _where(y == 0, y, im)   # exp(x + 0i) = exp(x) + 0i, NaN x included
    return re, im


def expm1(a: Pair) -> Pair:
    """NumPy's nc_expm1: expm1(x)cos(y) - 2 sin^2(y/2) + i exp(x)sin(y)."""
    x, y = a
    h = np.sin(y / 2)
    return np.expm1(x) * np.cos(y) - 2 * h * h, np.exp(x) * np.sin(y)


def exp2(a: Pair) -> Pair:
    ln2 = _const(a[0], np.log(2.0))
    return exp((a[0] * ln2, a[1] * ln2))


def log(a: Pair) -> Pair:
    """log|z| + i arg z: the real part near |z| = 1 from log1p of |z|^2 - 1 (computed as
    (x - 1)(x + 1) + y^2), elsewhere log(hypot(x, y)); the imaginary part atan2(y, x)
    (the cut along the negative real axis, its side chosen by the sign of y's zero)."""
    x, y = a
    m = np.hypot(x, y)
    ax, ay = np.abs(x), np.abs(y)
    near_one = (m > 0.5) & (m < 2) & np.isfinite(m)
    # far from 1, as the C library's clog: where both parts are subnormal the modulus is
    # taken of the parts scaled by 2**p (a subnormal hypot has lost digits: log|z| of
    # 5e-324(1 + i) was 0.35 off), and past max/4 of their halves (the hypot would overflow)
    info = np.finfo(_dtype(x))
    p = info.nmant + 1
    quarter = _const(x, float(info.max) / 4)
    tiny = _const(x, float(info.tiny))
    big = (ax > quarter) | (ay > quarter)
    small = (ax < tiny) & (ay < tiny)
    scale = _where(big, _const(x, 0.5), _where(small, _const(x, 2.0 ** p), _const(x, 1.0)))
    shift = _where(big, _const(x, np.log(2.0)),
                   _where(small, _const(x, -p * np.log(2.0)), _const(x, 0.0)))
    far = np.log(np.hypot(x * scale, y * scale)) + shift
    xs = _where(near_one, x, 1)
    ys = _where(near_one, y, 0)
    # the larger part carries the 1: |z|^2 - 1 = (u - 1)(u + 1) + v^2
    u = _where(ax >= ay, np.abs(xs), np.abs(ys))
    v = _where(ax >= ay, ys, xs)
    near = 0.5 * np.log1p(_x2y2m1(u, v))
    return _where(near_one, near, far), np.arctan2(y, x)


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """a + b as s + err exactly (Knuth's TwoSum; no reassociation: LLVM keeps IEEE order)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _x2y2m1(u: Any, v: Any) -> Any:
    """u^2 + v^2 - 1 from exact products (an fma gives each rounding error) and exact sums,
    as glibc's __x2y2m1 computes it: where |z| is near 1 the terms cancel, and the rounding
    of (u - 1)(u + 1) + v^2 was several ulps of log|z| (soak cpu-2026-12-01-p, program 347:
    log10 of -0.683(1 + i), 8 ulps off NumPy's)."""
    a = u * u
    a_lo = fma(u, u, -a)
    b = v * v
    b_lo = fma(v, v, -b)
    s, s_lo = _two_sum(a, _const(a, -1.0))
    t, t_lo = _two_sum(s, b)
    return t + (t_lo + s_lo + a_lo + b_lo)


def log2(a: Pair) -> Pair:
    re, im = log(a)
    k = _const(re, 1 / np.log(2.0))
    return re * k, im * k


def log10(a: Pair) -> Pair:
    re, im = log(a)
    k = _const(re, 1 / np.log(10.0))
    return re * k, im * k


def log1p(a: Pair) -> Pair:
    """NumPy's nc_log1p: log(hypot(x + 1, y)) + i atan2(y, x + 1)."""
    x, y = a
    return np.log(np.hypot(x + 1, y)), np.arctan2(y, x + 1)


def sqrt(a: Pair) -> Pair:
    """glibc's csqrt: the principal root (real part >= 0), the cut along the negative real
    axis, Annex G's special values; scaled near overflow and underflow."""
    x, y = a
    dt_info = np.finfo(np.asarray(x).dtype if isinstance(x, np.ndarray) else x.dtype)
    big = (np.abs(x) > dt_info.max / 4) | (np.abs(y) > dt_info.max / 4)
    small = (np.abs(x) < dt_info.tiny * 4) & (np.abs(y) < dt_info.tiny * 4)
    k = 2 * ((dt_info.nmant + 3) // 2)
    up, down = _const(x, 2.0 ** k), _const(x, 2.0 ** (-k // 2))
    scale_in = _where(big, _const(x, 0.25), _where(small, up, _const(x, 1.0)))
    scale_out = _where(big, _const(x, 2.0), _where(small, down, _const(x, 1.0)))
    xs, ys = x * scale_in, y * scale_in
    d = np.hypot(xs, ys)
    pos = xs > 0
    r_pos = np.sqrt(0.5 * (d + xs))
    s_neg = np.sqrt(0.5 * (d - xs))
    r_pos_safe = _where(r_pos == 0, 1, r_pos)
    s_neg_safe = _where(s_neg == 0, 1, s_neg)
    re = _where(pos, r_pos, np.abs(0.5 * (ys / s_neg_safe)))
    im = _where(pos, 0.5 * (ys / r_pos_safe), s_neg)
    re, im = re * scale_out, np.copysign(im * scale_out, y)
    # zeros: sqrt(x + 0i) for x >= 0 is sqrt(x) + 0i, for x < 0 0 + sqrt(-x) i
    y0 = y == 0
    re = _where(y0, _where(x < 0, _const(x, 0.0), np.sqrt(np.abs(x))), re)
    im = _where(y0, np.copysign(_where(x < 0, np.sqrt(-x), _const(x, 0.0)), y), im)
    x0 = (x == 0) & ~y0
    # glibc's: 0.5 |y| underflows for |y| below 2 * tiny (5e-324j gave 0 for 1.57e-162 (1 + j):
    # soak cpu-2026-12-02-f, program 8173), where 0.5 sqrt(2 |y|) does not
    ay = np.abs(y)
    r0 = _where(ay >= _const(x, 2 * dt_info.tiny), np.sqrt(0.5 * ay),
                0.5 * np.sqrt(2 * ay))
    re = _where(x0, r0, re)
    im = _where(x0, np.copysign(r0, y), im)
    # infinities and NaNs (Annex G)
    inf = _const(x, np.inf)
    nan = _const(x, np.nan)
    y_inf, x_inf, y_nan = np.isinf(y), np.isinf(x), np.isnan(y)
    re = _where(x_inf & (x < 0), _where(y_nan, nan, _const(x, 0.0)), re)
    im = _where(x_inf & (x < 0), np.copysign(inf, y), im)
    re = _where(x_inf & (x > 0), x, re)
    im = _where(x_inf & (x > 0), _where(y_nan, nan, np.copysign(_const(x, 0.0), y)), im)
    other_nan = (np.isnan(x) | y_nan) & ~x_inf
    re = _where(other_nan, nan, re)
    im = _where(other_nan, nan, im)
    re = _where(y_inf, inf, re)
    im = _where(y_inf, y, im)
    return re, im


def mul_plain(a: Pair, b: Pair) -> Pair:
    """The unfused complex product of NumPy's scalar C code (nc_pow's multiplications)."""
    ar, ai = a
    br, bi = b
    return ar * br - ai * bi, ar * bi + ai * br


def mul_c99(a: Pair, b: Pair) -> Pair:
    """C's complex product (GCC's __muldc3, C11 Annex G.5.1): the unfused product, and
    where both parts are NaN although an operand is infinite (or a product overflowed), the
    infinities recovered: (inf + inf i)(3 + 3.1i) is -inf + inf i, not NaN + NaN i."""
    ar, ai = a
    br, bi = b
    re, im = mul_plain(a, b)
    zero = _const(ar, 0.0)
    one = zero + 1
    both_nan = np.isnan(re) & np.isnan(im)

    def box(x: Any, y: Any) -> tuple[Any, Any, Any]:
        """(an infinite operand's parts as +-1 / +-0, whether it is infinite)"""
        inf = np.isinf(x) | np.isinf(y)
        return (_where(inf, np.copysign(_where(np.isinf(x), one, zero), x), x),
                _where(inf, np.copysign(_where(np.isinf(y), one, zero), y), y), inf)

    def unnan(x: Any, cond: Any) -> Any:
        return _where(cond & np.isnan(x), np.copysign(zero, x), x)
    p, q, a_inf = box(ar, ai)
    r, t, b_inf = box(br, bi)
    r, t = unnan(r, a_inf), unnan(t, a_inf)
    p, q = unnan(p, b_inf), unnan(q, b_inf)
    overflow = ~a_inf & ~b_inf & (np.isinf(ar * br) | np.isinf(ai * bi) | np.isinf(ar * bi) |
                                  np.isinf(ai * br))
    p, q, r, t = (unnan(v, overflow) for v in (p, q, r, t))
    recover = both_nan & (a_inf | b_inf | overflow)
    inf = _const(ar, np.inf)
    return (_where(recover, inf * (p * r - q * t), re),
            _where(recover, inf * (p * t + q * r), im))


def power(a: Pair, b: Pair) -> Pair:
    """np.power of complex values as NumPy's nc_pow computes it (funcs.inc.src): z**0 = 1;
    0**w = 0 when Re w > 0, else NaN; a real integer exponent n with |n| < 100 by
    unfused multiplications (n = 1, 2, 3 directly, others by binary powering from 1, a
    negative n as 1 / z**|n| with Smith's division); anything else C's cpow, exp(w log z)."""
    ar, ai = a
    br, bi = b
    zero = _const(ar, 0.0)
    one = zero + 1
    nan = _const(ar, np.nan)
    gr, gi = exp(mul_c99(b, log(a)))   # glibc's cpow: cexp(w * clog(z)), C's product
    is_int = (bi == 0) & (br == np.round(br))
    small = is_int & (np.abs(br) < 100)
    n = np.abs(_where(small, br, zero)).astype(np.int64)
    ones = (np.zeros_like(ar) + one, np.zeros_like(ar))
    acc, p = ones, (ar, ai)
    for bit in range(7):   # 2**7 > 99
        use = (n >> bit) & 1 == 1
        step = mul_plain(acc, p)
        acc = (_where(use, step[0], acc[0]), _where(use, step[1], acc[1]))
        p = mul_plain(p, p)
    inv = div(ones, acc)
    neg = br < 0
    binary = (_where(neg, inv[0], acc[0]), _where(neg, inv[1], acc[1]))
    sq = mul_plain(a, a)
    cube = mul_plain(a, sq)
    re, im = gr, gi
    for cond, (vr, vi) in ((small, binary), (is_int & (br == 3), cube),
                           (is_int & (br == 2), sq), (is_int & (br == 1), (ar, ai))):
        re, im = _where(cond, vr, re), _where(cond, vi, im)
    b_zero = (br == 0) & (bi == 0)
    a_zero = (ar == 0) & (ai == 0)
    zero_pos = a_zero & (br > 0)
    zero_bad = a_zero & ~b_zero & ~zero_pos
    re = _where(zero_pos, zero, _where(zero_bad, nan, re))
    im = _where(zero_pos, zero, _where(zero_bad, nan, im))
    re = _where(b_zero, one, re)
    im = _where(b_zero, zero, im)
    return re, im


# ============================================================================================
# Hyperbolic and trigonometric functions
# ============================================================================================

def _hyperbolic(x: Any, y: Any) -> tuple[Any, Any, Any, Any]:
    """sinh(x)cos(y), cosh(x)cos(y), sinh(x)sin(y), cosh(x)sin(y), computed past the
    overflow threshold t of exp as exp(|x| - t) * (exp(t)/2 * cos y) (glibc), so that a
    tiny sine or cosine still gives a finite part."""
    t = _exp_threshold(x)
    big = np.abs(x) > t
    e = np.exp(_where(big, np.abs(x) - t, 0))
    half = _const(x, np.exp(t) / 2)
    y_zero = y == 0
    c = _where(y_zero, _const(x, 1.0), np.cos(y))
    s = _where(y_zero, y, np.sin(y))
    sh, ch = np.sinh(x), np.cosh(x)
    sgn = np.copysign(_const(x, 1.0), x)
    return (_where(big, sgn * (e * (c * half)), sh * c),
            _where(big, e * (c * half), ch * c),
            _where(big, sgn * (e * (s * half)), sh * s),
            _where(big, e * (s * half), ch * s))


def sinh(a: Pair) -> Pair:
    """sinh(x + iy) = sinh(x)cos(y) + i cosh(x)sin(y), Annex G's special values."""
    x, y = a
    sh_c, _ch_c, _sh_s, ch_s = _hyperbolic(x, y)
    re, im = sh_c, _where(y == 0, y, ch_s)
    nan = _const(x, np.nan)
    y_bad = ~np.isfinite(y)
    # y inf/nan: x = ±0 gives ±0 + NaN i, x = ±inf gives +inf + NaN i, else NaN + NaN i
    re = _where(y_bad, _where(x == 0, x, _where(np.isinf(x), _const(x, np.inf), nan)), re)
    im = _where(y_bad, nan, im)
    return re, im


def cosh(a: Pair) -> Pair:
    """cosh(x + iy) = cosh(x)cos(y) + i sinh(x)sin(y), Annex G's special values."""
    x, y = a
    _sh_c, ch_c, sh_s, _ch_s = _hyperbolic(x, y)
    re = ch_c
    # cosh(x ± 0i): the imaginary part is a zero signed by x and y (NaN x: y itself)
    im = _where(y == 0, _where(np.isnan(x), y, y * np.copysign(_const(x, 1.0), x)), sh_s)
    nan = _const(x, np.nan)
    zero = _const(x, 0.0)
    y_bad = ~np.isfinite(y)
    re = _where(y_bad, _where(np.isinf(x), _const(x, np.inf), nan), re)
    im = _where(y_bad, _where(x == 0, zero, nan), im)
    return re, im


def tanh(a: Pair) -> Pair:
    """tanh(x + iy) = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y) in the stable form
    (Kahan): t = tan y, b = 1 + t^2, s = sinh x, r = sqrt(1 + s^2):
    tanh z = (b r s + i t) / (1 + b s^2); |x| large gives ±1 + i 0 sin(2y)."""
    x, y = a
    t = np.tan(y)
    b = 1 + t * t
    s = np.sinh(x)
    r = np.sqrt(1 + s * s)
    d = 1 + b * s * s
    re = b * r * s / d
    im = t / d
    big = np.abs(x) >= _const(x, 22.0 if np.finfo(_dtype(x)).bits == 64 else 9.0)
    e = np.exp(-2 * np.abs(_where(big, x, 0)))
    re = _where(big, np.copysign(_const(x, 1.0), x), re)
    im = _where(big, 4 * np.sin(y) * np.cos(y) * e, im)
    nan = _const(x, np.nan)
    zero = _const(x, 0.0)
    y_bad = ~np.isfinite(y)
    # x inf: ±1 + i 0 (sign of sin 2y, or +0 for a non-finite y); x finite, y inf/nan: NaN
    x_inf = np.isinf(x)
    re = _where(x_inf, np.copysign(_const(x, 1.0), x), re)
    im = _where(x_inf, _where(y_bad, zero,
                              np.copysign(zero, np.sin(y) * np.cos(y))), im)
    re = _where(y_bad & ~x_inf, _where(x == 0, x, nan), re)
    im = _where(y_bad & ~x_inf, nan, im)
    im = _where(y == 0, y, im)
    re = _where(np.isnan(x) & (y == 0), nan, re)
    return re, im


def _dtype(x: Any) -> np.dtype:
    return np.asarray(x).dtype if isinstance(x, np.ndarray) else x.dtype


def _times_i(a: Pair) -> Pair:        # i z
    return -a[1], a[0]


def _times_minus_i(a: Pair) -> Pair:  # -i z
    return a[1], -a[0]


def sin(a: Pair) -> Pair:
    re, im = _times_minus_i(sinh(_times_i(a)))    # sin z = -i sinh(iz)
    # an infinite imaginary part beside a non-finite real part: NaN + inf i (glibc's csin)
    x, y = a
    return re, _where(np.isinf(y) & ~np.isfinite(x), _const(x, np.inf), im)


def cos(a: Pair) -> Pair:
    return cosh(_times_i(a))                      # cos z = cosh(iz)


def tan(a: Pair) -> Pair:
    return _times_minus_i(tanh(_times_i(a)))      # tan z = -i tanh(iz)


# ============================================================================================
# Inverse functions: Hull, Fairgrieve and Tang's algorithm (ACM TOMS 23(3), 1997), the one
# glibc and FreeBSD's catrig implement, then C99 Annex G's infinities and NaNs
# ============================================================================================

def _hull(a: Any, b: Any) -> tuple[Any, Any, Any]:
    """For w = a + ib with a, b >= 0: the real parts of asin(w) and acos(w) and
    L = log(alpha + sqrt(alpha^2 - 1)) (|Im| of both), alpha = (|w + 1| + |w - 1|) / 2,
    each computed without cancellation (the crossovers 0.6417 and 1.5 are Hull's)."""
    info = np.finfo(_dtype(a))
    one = _const(a, 1.0)
    half = _const(a, 0.5)
    r = np.hypot(b, a + 1)
    s = np.hypot(b, a - 1)
    alpha = half * (r + s)
    beta = a / alpha
    b2 = b * b
    small_a = a < 1
    am1 = _where(small_a, half * (b2 / (r + a + 1) + b2 / (s + (1 - a))),
                 half * (b2 / (r + a + 1) + (s + (a - 1))))
    log_term = _where(alpha <= 1.5, np.log1p(am1 + np.sqrt(am1 * (alpha + 1))),
                      np.log(alpha + np.sqrt((alpha - 1) * (alpha + 1))))
    # b tiny beside 1 - a (b^2 underflows): L = b / sqrt((1 - a)(1 + a))
    tiny_b = small_a & (b < info.eps * (1 - a))
    log_term = _where(tiny_b, b / np.sqrt((1 - a) * (1 + a)), log_term)
    inner = _where(small_a | (a == 1), np.sqrt(half * (alpha + a) * (b2 / (r + a + 1) + (s + (1 - a)))),
                   b * np.sqrt(half * ((alpha + a) / (r + a + 1) + (alpha + a) / (s + (a - 1)))))
    far = beta > 0.6417
    asin_re = _where(far, np.arctan(a / inner), np.arcsin(np.minimum(beta, one)))
    acos_re = _where(far, np.arctan(inner / a), np.arccos(np.minimum(beta, one)))
    # |w| huge (alpha overflows): asin = atan2(a, b), L = log(2|w|); tiny: asin w = w
    big = (a > 1 / info.eps) | (b > 1 / info.eps)
    ln2 = _const(a, np.log(2.0))
    big_log = np.log(np.hypot(a * half, b * half)) + 2 * ln2
    asin_re = _where(big, np.arctan2(a, b), asin_re)
    acos_re = _where(big, np.arctan2(b, a), acos_re)
    log_term = _where(big, big_log, log_term)
    tiny = (a < np.sqrt(info.eps) / 4) & (b < np.sqrt(info.eps) / 4)
    asin_re = _where(tiny, a, asin_re)
    acos_re = _where(tiny, _const(a, np.pi / 2) - a, acos_re)
    log_term = _where(tiny, b, log_term)
    return asin_re, acos_re, log_term


def arcsinh(a: Pair) -> Pair:
    """asinh(x + iy): -i asin(i z) by Hull's algorithm on |x|, |y| (asinh is odd and
    commutes with conjugation, so the signs come back from x and y, zeros included)."""
    x, y = a
    ax, ay = np.abs(x), np.abs(y)
    asin_re, _acos_re, log_term = _hull(ay, ax)
    re, im = np.copysign(log_term, x), np.copysign(asin_re, y)
    nan = _const(x, np.nan)
    x_nan, y_nan = np.isnan(x), np.isnan(y)
    any_nan = x_nan | y_nan
    # Annex G: asinh(±inf + i NaN) = ±inf + i NaN, asinh(NaN + i ±inf) = ±inf + i NaN with
    # glibc's sign, the NaN's (x86's default NaN, from inf * 0, is negative: soak
    # cpu-2026-12-02-i, programs 4551 and 5450), asinh(NaN + 0i) = NaN + 0i, other NaNs
    # NaN + i NaN
    re = _where(any_nan, _where(np.isinf(x), x, _where(np.isinf(y),
                                                        np.copysign(np.abs(y), x), nan)), re)
    im = _where(any_nan, _where(y == 0, y, nan), im)
    return re, im


def arcsin(a: Pair) -> Pair:
    re, im = _times_minus_i(arcsinh(_times_i(a)))   # asin z = -i asinh(iz)
    # glibc's casin: asin(±inf + i NaN) = NaN + i inf (the sign of a NaN is not promised)
    x, y = a
    return re, _where(np.isinf(x) & np.isnan(y), _const(x, np.inf), im)


def arccos(a: Pair) -> Pair:
    """acos(x + iy): Hull's real part acos_re(|x|, |y|) (pi - it for a negative x) and
    imaginary part -L signed against y."""
    x, y = a
    _asin_re, acos_re, log_term = _hull(np.abs(x), np.abs(y))
    re = _where(np.signbit(x), _const(x, np.pi) - acos_re, acos_re)
    im = _where(np.signbit(y), log_term, -log_term)
    nan = _const(x, np.nan)
    x_nan, y_nan = np.isnan(x), np.isnan(y)
    # Annex G: acos(±inf + i NaN) = NaN ± i inf, acos(NaN + i inf) = NaN - i inf,
    # acos(±0 + i NaN) = pi/2 + i NaN, other NaNs NaN + i NaN
    re = _where(x_nan | y_nan, _where((x == 0) & y_nan, _const(x, np.pi / 2), nan), re)
    im = _where(x_nan | y_nan, _where(np.isinf(x) & y_nan, _const(x, -np.inf),
                                      _where(np.isinf(y), -y, nan)), im)
    return re, im


def arccosh(a: Pair) -> Pair:
    """acosh z = ±i acos z, the sign making the real part >= 0 (a negative-signed
    imaginary part of acos, zero included, takes +i)."""
    p, q = arccos(a)
    neg = np.signbit(q)
    re = _where(neg, -q, q)
    im = _where(neg, p, -p)
    x, y = a
    # Annex G: acosh(NaN + i ±inf) and acosh(±inf + i NaN) are +inf + i NaN
    nan_inf = (np.isnan(x) & np.isinf(y)) | (np.isinf(x) & np.isnan(y))
    re = _where(nan_inf, _const(x, np.inf), _where(np.isnan(q) & ~np.isnan(p), np.abs(q), re))
    im = _where(nan_inf, _const(x, np.nan), im)
    # acosh(±0 + i NaN) = NaN + i pi/2
    im = _where((x == 0) & np.isnan(y), _const(x, np.pi / 2), im)
    return re, im


def arctanh(a: Pair) -> Pair:
    """atanh(x + iy) = log1p(4x / ((1 - x)^2 + y^2)) / 4 + i atan2(2y, (1 - x)(1 + x) - y^2) / 2
    (the cuts along the real axis beyond ±1, their side set by the sign of y's zero); for a
    huge |z| the real part x / |z|^2 scaled, the imaginary part ±pi/2."""
    x, y = a
    info = np.finfo(_dtype(x))
    ax = np.abs(x)
    one = _const(x, 1.0)
    d = (one - ax) * (one - ax) + y * y
    re = 0.25 * np.log1p(4 * ax / _where(d == 0, one, d))
    # near ±1 (d small, may underflow): log(|1 + z| / |1 - z|) / 2 with hypots
    near_one = d < 0.5
    re = _where(near_one, 0.5 * (np.log(np.hypot(one + ax, y)) - np.log(np.hypot(one - ax, y))),
                re)
    im = 0.5 * np.arctan2(2 * y, (one - ax) * (one + ax) - y * y)
    m = np.maximum(ax, np.abs(y))
    big = m > _const(x, 2.0 ** (info.maxexp // 2 - 2))
    m_safe = _where(big, m, one)
    u, v = ax / m_safe, y / m_safe
    half_pi = _const(x, np.pi / 2)
    re = _where(big, u / (u * u + v * v) / m_safe, re)
    im = _where(big, np.copysign(half_pi, y), im)
    re = np.copysign(re, x)
    nan = _const(x, np.nan)
    zero = _const(x, 0.0)
    x_inf, y_inf, x_nan, y_nan = np.isinf(x), np.isinf(y), np.isnan(x), np.isnan(y)
    # Annex G: an infinite part gives ±0 + i ±pi/2 (NaN y: NaN imaginary part); a NaN part
    # NaN + i NaN, except atanh(±0 + i NaN) = ±0 + i NaN
    re = _where(x_inf | y_inf, np.copysign(zero, x), re)
    im = _where(x_inf | y_inf, _where(y_nan, nan, np.copysign(half_pi, y)), im)
    nan_case = (x_nan | y_nan) & ~(x_inf | y_inf)
    re = _where(nan_case, _where(x == 0, x, nan), re)
    im = _where(nan_case, nan, im)
    return re, im


def arctan(a: Pair) -> Pair:
    return _times_minus_i(arctanh(_times_i(a)))   # atan z = -i atanh(iz)
