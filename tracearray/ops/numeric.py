"""Exact numeric primitives that work on the bits of a value: fmod, frexp, ldexp, nextafter,
gcd, lcm and bitwise_count, each as NumPy 2 computes it (the C library's definitions for the
float functions; NumPy's wrapping integer code for gcd/lcm).

Float results here are exact (no rounding, or one correct rounding), so they are compared bit
for bit; the comparator treats ``fmod`` as a function with jumps (its quotient
``trunc(x / y)``). ``frexp`` has two results and is two primitives (``frexp_mantissa``,
``frexp_exponent``): the NumPy-level ``np.frexp`` (a composite) returns both.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from . import rules
from .elementwise import MATH_SYMBOLS, Emitter, register_ufunc
from .ir import (F16, F32, F64, ScalarCtx, constant, declare, float_op, int_min, intrinsic,
                 isnan, llvm_type)
from .spec import ALL_DTYPES, CHEAP, EXACT, MEDIUM, BoundsHint, Domain, Kind, OpSpec, register

I32 = ir.IntType(32)


def _float_layout(dt: np.dtype) -> tuple[int, int, int]:
    """(mantissa bits, exponent bits, bias) of float32/float64."""
    return (23, 8, 127) if dt == F32 else (52, 11, 1023)


def _int_of(dt: np.dtype) -> ir.IntType:
    return ir.IntType(8 * dt.itemsize)


# --------------------------------------------------------------------------------------------
# fmod: C's remainder (truncated quotient, the sign of the dividend)
# --------------------------------------------------------------------------------------------

def _fmod(c: ScalarCtx) -> ir.Value:
    b, (x, y), dt = c.b, c.args, c.dt
    if c.k == "f":
        return float_op(b, [x, y], dt, lambda bb, a, wdt: c.math.call(bb, "fmod", a, wdt))
    zero, one = constant(0, dt), constant(1, dt)
    # NumPy: a zero divisor gives 0; MIN % -1 (a trap in C) gives 0 as well.
    bad = b.icmp_unsigned("==", y, zero)
    if c.k == "i":
        bad = b.or_(bad, b.and_(b.icmp_signed("==", x, int_min(dt)),
                                b.icmp_signed("==", y, constant(-1, dt))))
    d = b.select(bad, one, y)
    r = b.srem(x, d) if c.k == "i" else b.urem(x, d)
    return b.select(bad, zero, r)


# --------------------------------------------------------------------------------------------
# frexp: x = m * 2**e with 0.5 <= |m| < 1 (m = x, e = 0 for 0, inf and NaN)
# --------------------------------------------------------------------------------------------

def _frexp_parts(c: ScalarCtx) -> tuple[ir.Value, ir.Value]:
    """(mantissa in the widened float dtype, exponent as i32) of the operand."""
    b = c.b
    (x,), wdt = ([b.fpext(c.args[0], ir.FloatType())], F32) if c.dt == F16 else (c.args, c.dt)
    mbits, ebits, bias = _float_layout(wdt)
    ity = _int_of(wdt)
    emask = (1 << ebits) - 1
    # Subnormals: scale into the normal range first (exact), and take the scale off again.
    tiny = b.fcmp_ordered("<", intrinsic(b, "llvm.fabs", [x]),
                          constant(float(np.finfo(wdt).tiny), wdt))
    scale = mbits + 2
    xs = b.select(tiny, b.fmul(x, constant(2.0 ** scale, wdt)), x)
    bits = b.bitcast(xs, ity)
    field = b.and_(b.lshr(bits, ir.Constant(ity, mbits)), ir.Constant(ity, emask))
    exp = b.sub(b.trunc(field, I32) if ity.width > 32 else field, ir.Constant(I32, bias - 1))
    exp = b.sub(exp, b.select(tiny, ir.Constant(I32, scale), ir.Constant(I32, 0)))
    keep = ir.Constant(ity, ~(emask << mbits))
    mant = b.bitcast(b.or_(b.and_(bits, keep), ir.Constant(ity, (bias - 1) << mbits)), x.type)
    special = b.or_(b.fcmp_unordered("==", x, constant(0.0, wdt)),
                    b.fcmp_unordered("==", intrinsic(b, "llvm.fabs", [x]),
                                     constant(np.inf, wdt)))
    mant = b.select(special, x, mant)
    exp = b.select(special, ir.Constant(I32, 0), exp)
    return mant, exp


def _frexp_mantissa(c: ScalarCtx) -> ir.Value:
    mant, _ = _frexp_parts(c)
    return c.b.fptrunc(mant, ir.HalfType()) if c.dt == F16 else mant


def _frexp_exponent(c: ScalarCtx) -> ir.Value:
    return _frexp_parts(c)[1]


# --------------------------------------------------------------------------------------------
# ldexp: x * 2**n, rounded once (C's scalbn; float16 through float32, as NumPy's loop)
# --------------------------------------------------------------------------------------------

def _pow2(b: ir.IRBuilder, n: ir.Value, dt: np.dtype) -> ir.Value:
    """2**n for an i32 ``n`` in the normal exponent range of ``dt``, built from its bits."""
    mbits, _ebits, bias = _float_layout(dt)
    ity = _int_of(dt)
    e = b.sext(n, ity) if ity.width > 32 else n
    return b.bitcast(b.shl(b.add(e, ir.Constant(ity, bias)), ir.Constant(ity, mbits)),
                     llvm_type(dt))


def _ldexp(c: ScalarCtx) -> ir.Value:
    b, (x, n) = c.b, c.args
    wdt = F32 if c.dt == F16 else c.dt
    y = b.fpext(x, ir.FloatType()) if c.dt == F16 else x
    mbits, _ebits, bias = _float_layout(wdt)
    emax, emin = bias, 1 - bias
    # Beyond +-(2 * bias + mbits + 2) the result is 0 or inf whatever the steps: clamp in the
    # exponent's own width, then work in 32 bits.
    limit = 2 * bias + mbits + 2
    nty = n.type
    n = b.select(b.icmp_signed(">", n, ir.Constant(nty, limit)), ir.Constant(nty, limit), n)
    n = b.select(b.icmp_signed("<", n, ir.Constant(nty, -limit)), ir.Constant(nty, -limit), n)
    if nty.width > 32:
        n = b.trunc(n, I32)
    one = constant(1.0, wdt)
    # Large n: at most two steps of 2**emax, then the rest.
    for _ in range(2):
        big = b.icmp_signed(">", n, ir.Constant(I32, emax))
        y = b.fmul(y, b.select(big, constant(2.0 ** emax, wdt), one))
        n = b.select(big, b.sub(n, ir.Constant(I32, emax)), n)
    n = b.select(b.icmp_signed(">", n, ir.Constant(I32, emax)), ir.Constant(I32, emax), n)
    # Small n: steps of 2**(emin + mbits + 1) keep the intermediate normal, so that the one
    # rounding into the subnormal range happens in the last multiplication.
    step = emin + mbits + 1
    for _ in range(2):
        small = b.icmp_signed("<", n, ir.Constant(I32, emin))
        y = b.fmul(y, b.select(small, constant(2.0 ** step, wdt), one))
        n = b.select(small, b.sub(n, ir.Constant(I32, step)), n)
    n = b.select(b.icmp_signed("<", n, ir.Constant(I32, emin)), ir.Constant(I32, emin), n)
    y = b.fmul(y, _pow2(b, n, wdt))
    return b.fptrunc(y, ir.HalfType()) if c.dt == F16 else y


# --------------------------------------------------------------------------------------------
# nextafter: the next representable value after x towards y (on the dtype's own bits)
# --------------------------------------------------------------------------------------------

# Probed, not read off the version: nextafter(+0, -0) is -0 when float16 returns y.
_F16_NEXTAFTER_EQUAL_GIVES_X = not bool(np.signbit(np.nextafter(np.float16(0.0),
                                                                np.float16(-0.0))))


def _nextafter(c: ScalarCtx) -> ir.Value:
    b, (x, y), dt = c.b, c.args, c.dt
    ity = _int_of(dt)
    xb = b.bitcast(x, ity)
    # Away from zero when x > 0 and y > x, or x < 0 and y < x: one more in the magnitude.
    up = b.icmp_unsigned("==", b.fcmp_ordered(">", y, x), b.fcmp_ordered(">", x, constant(0, dt)))
    stepped = b.select(up, b.add(xb, ir.Constant(ity, 1)), b.sub(xb, ir.Constant(ity, 1)))
    out = b.bitcast(stepped, x.type)
    # From zero: the smallest subnormal with y's sign.
    ybits = b.bitcast(y, ity)
    sign = b.and_(ybits, ir.Constant(ity, -(1 << (ity.width - 1))))
    from_zero = b.bitcast(b.or_(sign, ir.Constant(ity, 1)), x.type)
    zero = b.fcmp_ordered("==", x, constant(0, dt))
    out = b.select(zero, from_zero, out)
    # Equal operands: C's nextafter returns y (so nextafter(0.0, -0.0) is -0.0); NumPy's own
    # float16 version returned x before NumPy 2.5 (numpy/numpy#31475): whichever the NumPy
    # in use does.
    equal_gives_x = dt == F16 and _F16_NEXTAFTER_EQUAL_GIVES_X
    out = b.select(b.fcmp_ordered("==", x, y), x if equal_gives_x else y, out)
    nan = b.or_(isnan(b, x), isnan(b, y))
    return b.select(nan, b.fadd(x, y), out)


# --------------------------------------------------------------------------------------------
# gcd / lcm: Euclid on the (wrapping) absolute values, in unsigned arithmetic
# --------------------------------------------------------------------------------------------

def _gcd_helper(module: ir.Module, ity: ir.IntType) -> ir.Function:
    """Internal ``gcd(a, b)`` of two unsigned values (a data-dependent loop, kept out of the
    caller's control flow like integer power)."""
    name = f"__tracearray_gcd_u{ity.width}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ity, [ity, ity]), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    a0, b0 = fn.args
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    bb = ir.IRBuilder(entry)
    zero = ir.Constant(ity, 0)
    bb.cbranch(bb.icmp_unsigned("==", b0, zero), done, loop)
    bb.position_at_end(loop)
    a, y = bb.phi(ity), bb.phi(ity)
    r = bb.urem(a, y)
    a.add_incoming(a0, entry)
    y.add_incoming(b0, entry)
    a.add_incoming(y, loop)
    y.add_incoming(r, loop)
    bb.cbranch(bb.icmp_unsigned("==", r, zero), done, loop)
    bb.position_at_end(done)
    res = bb.phi(ity)
    res.add_incoming(a0, entry)
    res.add_incoming(y, loop)
    bb.ret(res)
    return fn


def _abs_wrapping(c: ScalarCtx, v: ir.Value) -> ir.Value:
    if c.k != "i":
        return v
    neg = c.b.icmp_signed("<", v, constant(0, c.dt))
    return c.b.select(neg, c.b.sub(constant(0, c.dt), v), v)


def _gcd(c: ScalarCtx) -> ir.Value:
    a, y = (_abs_wrapping(c, v) for v in c.args)
    return c.b.call(_gcd_helper(c.b.module, a.type), [a, y])


def _lcm(c: ScalarCtx) -> ir.Value:
    b = c.b
    a, y = (_abs_wrapping(c, v) for v in c.args)
    g = b.call(_gcd_helper(b.module, a.type), [a, y])
    zero = constant(0, c.dt)
    is_zero = b.icmp_unsigned("==", g, zero)
    q = b.udiv(a, b.select(is_zero, constant(1, c.dt), g))
    return b.select(is_zero, zero, b.mul(q, y))


# --------------------------------------------------------------------------------------------
# bitwise_count: set bits of |x| (NumPy counts the absolute value of signed integers)
# --------------------------------------------------------------------------------------------

def _bitwise_count(c: ScalarCtx) -> ir.Value:
    v = _abs_wrapping(c, c.args[0])
    n = intrinsic(c.b, "llvm.ctpop", [v])
    return c.b.trunc(n, ir.IntType(8)) if n.type.width > 8 else n


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------

# fmod is computed by the math library (glibc, libdevice), and exactly.
register_ufunc("fmod", MEDIUM, "any", _fmod, BoundsHint(jump=lambda a, b: np.trunc(a / b)),
               accuracy=EXACT)
# ldexp(float, int): the domain names the float operand (the exponent is an integer).
register_ufunc("ldexp", CHEAP, "small", _ldexp,
               domain=Domain(tuple(d for d in ALL_DTYPES if d.kind == "f"), "small",
                             operands=lambda dt: (dt, np.dtype(np.int32))))
register_ufunc("nextafter", CHEAP, "any", _nextafter)
register_ufunc("gcd", MEDIUM, "any", _gcd)
register_ufunc("lcm", MEDIUM, "any", _lcm)
register_ufunc("bitwise_count", CHEAP, "any", _bitwise_count)


def _frexp_ref(output: int):
    def ref(x: np.ndarray) -> np.ndarray:
        return np.frexp(x)[output]
    return ref


_FREXP_DOMAIN = Domain(rules.ufunc_input_dtypes(np.frexp, ALL_DTYPES))
register(OpSpec("frexp_mantissa", Kind.ELEMENTWISE, _frexp_ref(0), rules.broadcast_shape,
                rules.ufunc_dtype_rule(np.frexp, 0), _FREXP_DOMAIN, lower=_frexp_mantissa,
                operand_dtypes=lambda n: (n.dtype,)))
register(OpSpec("frexp_exponent", Kind.ELEMENTWISE, _frexp_ref(1), rules.broadcast_shape,
                rules.ufunc_dtype_rule(np.frexp, 1), _FREXP_DOMAIN, lower=_frexp_exponent))
