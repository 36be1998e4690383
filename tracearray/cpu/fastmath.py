"""Inline math sequences that the host CPU runs faster than the C library's calls.

``CpuMath`` (``mathlib.py``) emits these instead of a libm call. Each is straight-line IR
(arithmetic, ``llvm.fma``, selects, integer bit operations), so the loop vectoriser turns it
into full-width vector code with no call at all, and each stays within the registry's
accuracy family of the op (``ops.LIBM``, "transcendental": 4 ulp of NumPy's float32 result;
``tests/test_cpu_fastmath.py`` checks NumPy's validation data, special values and a dense
sweep of float32).

tanh, float32
    glibc's vector ``tanhf`` (libmvec) made gelu_tanh 1.9-2.5x slower than jax.jit (issue 17).
    Here ``tanh(x) = sign(x) * m / (m + 2)`` with ``m = expm1(2|x|)``: an identity, exact for
    every ``|x|``, with no cancellation (m and m + 2 are positive), so its error is that of
    ``m`` plus two roundings: at most 2 ulp of the correctly rounded tanh over a sweep of every
    third float32 in [0, 10] (NumPy's own is within 1 there, so within 3 of NumPy's).
    ``|x|`` is clamped to 10 first (m stays finite; ``m / (m + 2)`` rounds to 1 from
    |x| = 9.02 on). ``expm1(u)`` is ``2^n (expm1(r) + 1) - 1`` with ``u = n ln2 + r``,
    ``|r| <= ln2 / 2`` (Cody-Waite: ln2 in two parts, the high one with 9 trailing zero bits
    so ``n * LN2_HI`` is exact for the n <= 29 used here), ``expm1(r) = r + r^2 q(r)`` with q
    of degree 5 fitted to minimise the relative error of expm1 on that interval (least
    squares on 4000 Chebyshev nodes, float64, then rounded to float32), and ``2^n`` built in
    the exponent bits (0 <= n <= 29: always a normal number). For n = 0 (|x| < 0.17)
    the result is ``r / (r + 2)`` with ``r = 2|x|``: a tiny or subnormal x gives x, and
    ``sign(x)`` keeps -0.0 negative. NaN is returned as it came (the clamp's compare sends it
    to 10, so the arithmetic never sees it).

exp, float32
    glibc's vector ``expf`` was 0.5 of logsumexp's 0.78 ms ((2048, 2048), two threads) and
    the reason softmax and logsumexp trailed jax.jit (issue 17). Here ``exp(x) = 2^n (1 +
    expm1(r))`` with the same reduction and q(r) as tanh's expm1, x clamped to [-104, 89]
    first (beyond them the result is 0 or inf, which the scaling then produces), so
    -150 <= n <= 129. ``2^n`` is applied as two normal powers ``2^(n >> 1)`` and
    ``2^(n - (n >> 1))``: the first inside the fma that adds 1 (a normal result, one
    rounding), the second an exact product except where the result is subnormal or overflows,
    where it rounds once more as the true result would. At most 1 ulp of the correctly
    rounded exp over a sweep of every seventh float32 in [-104, 89]. NaN is returned as it
    came.

float64 tanh and exp still call glibc's; float16 is computed in float32 and rounded once
(``ops.ir.float_op``), as NumPy does.
"""
from __future__ import annotations

from llvmlite import ir

from ..ops.ir import intrinsic, isnan

_F32 = ir.FloatType()
_I32 = ir.IntType(32)

TANH_CLAMP = 10.0
EXP_LOW, EXP_HIGH = -104.0, 89.0       # exp rounds to 0 below, overflows above
INV_LN2 = 1.4426950216293335           # float32(1 / ln 2)
LN2_HI = 0.693145751953125             # ln 2 to 15 bits: n * LN2_HI is exact
LN2_LO = 1.428606765330187e-06         # float32(ln 2 - LN2_HI)
# q(r), highest degree first: expm1(r) ~ r + r^2 q(r) on [-ln2/2, ln2/2] (see the docstring).
EXPM1_Q = (0.00019869250536430627, 0.0013946326216682792, 0.008333353325724602,
           0.041666265577077866, 0.1666666716337204, 0.5)


def _c(value: float) -> ir.Constant:
    return ir.Constant(_F32, value)


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    return intrinsic(b, "llvm.fma", [x, y, z])   # one rounding, as the error bound assumes


def tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 tanh(x) as straight-line IR (the module docstring says how and how accurate)."""
    a = intrinsic(b, "llvm.fabs", [x])
    a = b.select(b.fcmp_ordered("<", a, _c(TANH_CLAMP)), a, _c(TANH_CLAMP))   # NaN -> 10
    u = b.fadd(a, a)                                                          # exact
    n = intrinsic(b, "llvm.rint", [b.fmul(u, _c(INV_LN2))])                   # 0 <= n <= 29
    r = _fma(b, n, _c(-LN2_HI), u)
    r = _fma(b, n, _c(-LN2_LO), r)
    q = _c(EXPM1_Q[0])
    for coef in EXPM1_Q[1:]:
        q = _fma(b, q, r, _c(coef))
    expm1_r = _fma(b, b.fmul(r, r), q, r)
    exponent = b.shl(b.add(b.fptosi(n, _I32), ir.Constant(_I32, 127)), ir.Constant(_I32, 23))
    two_n = b.bitcast(exponent, _F32)
    m = _fma(b, two_n, expm1_r, b.fsub(two_n, _c(1.0)))                     # expm1(u)
    t = b.fdiv(m, b.fadd(m, _c(2.0)))
    return b.select(isnan(b, x), x, intrinsic(b, "llvm.copysign", [t, x]))


def _pow2(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
    """2^n as a float32 for an i32 ``n`` in [-126, 127] (built in the exponent bits)."""
    bits = b.shl(b.add(n, ir.Constant(_I32, 127)), ir.Constant(_I32, 23))
    return b.bitcast(bits, _F32)


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float32 exp(x) as straight-line IR (the module docstring says how and how accurate)."""
    c = b.select(b.fcmp_ordered("<", x, _c(EXP_HIGH)), x, _c(EXP_HIGH))    # NaN -> EXP_HIGH
    c = b.select(b.fcmp_ordered(">", c, _c(EXP_LOW)), c, _c(EXP_LOW))
    n = intrinsic(b, "llvm.rint", [b.fmul(c, _c(INV_LN2))])               # -150 <= n <= 129
    r = _fma(b, n, _c(-LN2_HI), c)
    r = _fma(b, n, _c(-LN2_LO), r)
    q = _c(EXPM1_Q[0])
    for coef in EXPM1_Q[1:]:
        q = _fma(b, q, r, _c(coef))
    expm1_r = _fma(b, b.fmul(r, r), q, r)
    ni = b.fptosi(n, _I32)
    half = b.ashr(ni, ir.Constant(_I32, 1))                               # floor(n / 2)
    s1, s2 = _pow2(b, half), _pow2(b, b.sub(ni, half))
    y = b.fmul(_fma(b, s1, expm1_r, s1), s2)
    return b.select(isnan(b, x), x, y)
