"""Elementwise primitives: NumPy's ufuncs for real dtypes, ``where`` and ``cast``.

Each op is one ``register`` call at the bottom of this file, beside its scalar emitter: the
ufunc (NumPy reference, dtype rule, loops), the cost weight, the value domain Hypothesis draws
from, the math-library symbols when the target library computes it, the accuracy family and
the hints of the comparator's interval evaluator. Results equal NumPy 2's array loops bit for
bit wherever NumPy is deterministic (NaN payloads are never promised: NumPy's own SIMD body and
scalar tail disagree on them); the exceptions are the divergences each entry lists.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np
from llvmlite import ir

from . import rules
from .ir import (BOOL, F16, F32, F64, MathLib, ScalarCtx, cast, constant, declare, fcmp,
                 float_op, int_min, intrinsic, isnan, kind_of, llvm_type, narrow_f16,
                 select_const, truth, widen_f16)
from .spec import (ALL_DTYPES, CHEAP, EXACT, LIBM, MEDIUM, TRANSCENDENTAL_COST, Accuracy,
                   BoundsHint, Domain, Kind, MathFn, OpSpec, register)

Emitter = Callable[[ScalarCtx], ir.Value]


# ============================================================================================
# Emitters. Each receives the operands in the loop's input dtypes.
# ============================================================================================



def _arith(int_op: str, fp_op: str, bool_op: str | None = None) -> Emitter:
    """Wrapping integer op / float op rounded per NumPy / bool op for ?? loops."""
    def emit(c: ScalarCtx) -> ir.Value:
        b, (x, y) = c.b, c.args
        if c.k == "b":
            return getattr(b, bool_op)(x, y)
        if c.k in "iu":
            return getattr(b, int_op)(x, y)
        return float_op(b, [x, y], c.dt, lambda bb, a, _: getattr(bb, fp_op)(*a))
    return emit


def _int_divmod(c: ScalarCtx) -> tuple[ir.Value, ir.Value]:
    """Python-style floor division and modulo that never trap.

    Division by zero yields 0 for both (NumPy's result).  MIN // -1 divides by 1
    instead, which gives the wrapped result MIN with remainder 0, as NumPy does.
    """
    b, (x, y), dt = c.b, c.args, c.dt
    zero, one = constant(0, dt), constant(1, dt)
    by_zero = b.icmp_unsigned("==", y, zero)
    if c.k == "u":
        d = b.select(by_zero, one, y)
        q, r = b.udiv(x, d), b.urem(x, d)
    else:
        overflow = b.and_(b.icmp_signed("==", x, int_min(dt)), b.icmp_signed("==", y, constant(-1, dt)))
        d = b.select(b.or_(by_zero, overflow), one, y)
        q, r = b.sdiv(x, d), b.srem(x, d)
        # C truncates toward zero; step down when the remainder's sign differs from the divisor's.
        fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, d), zero))
        q = b.select(fix, b.sub(q, one), q)
        r = b.select(fix, b.add(r, d), r)
    return b.select(by_zero, zero, q), b.select(by_zero, zero, r)


def _float_divmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value, dt: np.dtype, math: MathLib):
    """NumPy's npy_divmod (CPython's float divmod), branch-free.

    mod = fmod(x, y) is moved to the divisor's sign, the quotient (x - mod) / y is
    decremented accordingly and snapped to the nearest integer; zero results
    take their sign from y (mod) or x / y (quotient).  For y == 0 NumPy returns
    x / y and fmod(x, 0) = NaN.
    """
    zero, one, half = constant(0, dt), constant(1, dt), constant(0.5, dt)
    mod = math.call(b, "fmod", [x, y], dt)
    ratio = b.fdiv(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    mod_nonzero = b.fcmp_unordered("!=", mod, zero)
    sign_differs = b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero))
    fix = b.and_(mod_nonzero, sign_differs)
    mod = b.select(fix, b.fadd(mod, y), mod)
    div = b.select(fix, b.fsub(div, one), div)
    mod = b.select(mod_nonzero, mod, intrinsic(b, "llvm.copysign", [zero, y]))
    floor = intrinsic(b, "llvm.floor", [div])
    floor = b.select(b.fcmp_ordered(">", b.fsub(div, floor), half), b.fadd(floor, one), floor)
    div_nonzero = b.fcmp_unordered("!=", div, zero)
    floordiv = b.select(div_nonzero, floor, intrinsic(b, "llvm.copysign", [zero, ratio]))
    y_zero = b.fcmp_ordered("==", y, zero)
    return b.select(y_zero, ratio, floordiv), mod


def _floor_divide(c: ScalarCtx) -> ir.Value:
    if c.k in "iu":
        return _int_divmod(c)[0]
    return float_op(c.b, c.args, c.dt, lambda b, a, dt: _float_divmod(b, a[0], a[1], dt, c.math)[0])


def _remainder(c: ScalarCtx) -> ir.Value:
    if c.k in "iu":
        return _int_divmod(c)[1]
    return float_op(c.b, c.args, c.dt, lambda b, a, dt: _float_divmod(b, a[0], a[1], dt, c.math)[1])


def _ipow_helper(module: ir.Module, dt: np.dtype) -> ir.Function:
    """Internal function computing base**exp by squaring with wrap-around.

    A helper keeps the data-dependent loop out of the caller's control flow.
    Negative exponents (signed types only) give the exact result for base +-1
    and 0 otherwise, where NumPy would raise (see DIVERGENCES).
    """
    name = f"__tracearray_ipow_{dt.name}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    ty = llvm_type(dt)
    fn = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    base0, exp0 = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    one = constant(1, dt)
    if dt.kind == "i":
        negative = fn.append_basic_block("negative")
        b.cbranch(b.icmp_signed("<", exp0, constant(0, dt)), negative, loop)
        b.position_at_end(negative)
        odd = b.trunc(exp0, ir.IntType(1))
        minus_one_pow = b.select(odd, constant(-1, dt), one)
        res = b.select(b.icmp_signed("==", base0, one), one,
                       b.select(b.icmp_signed("==", base0, constant(-1, dt)), minus_one_pow, constant(0, dt)))
        b.ret(res)
    else:
        b.branch(loop)
    b.position_at_end(loop)
    acc, base, exp = b.phi(ty), b.phi(ty), b.phi(ty)
    odd = b.trunc(exp, ir.IntType(1))
    acc2 = b.select(odd, b.mul(acc, base), acc)
    base2 = b.mul(base, base)
    exp2 = b.lshr(exp, one)
    for phi, start, nxt in ((acc, one, acc2), (base, base0, base2), (exp, exp0, exp2)):
        phi.add_incoming(start, entry)
        phi.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("!=", exp2, constant(0, dt)), loop, done)
    b.position_at_end(done)
    b.ret(acc2)
    return fn


def _power(c: ScalarCtx) -> ir.Value:
    if c.k in "iu":
        return c.b.call(_ipow_helper(c.b.module, c.dt), c.args)
    return float_op(c.b, c.args, c.dt, lambda b, a, dt: c.math.call(b, "power", a, dt))


def _negative(c: ScalarCtx) -> ir.Value:
    (x,) = c.args
    return c.b.fneg(x) if c.k == "f" else c.b.sub(constant(0, c.dt), x)


def _positive(c: ScalarCtx) -> ir.Value:
    return c.args[0]


def _absolute(c: ScalarCtx) -> ir.Value:
    b, (x,) = c.b, c.args
    if c.k == "f":
        return intrinsic(b, "llvm.fabs", [x])
    if c.k == "i":  # abs(MIN) wraps to MIN, as in NumPy
        return b.select(b.icmp_signed("<", x, constant(0, c.dt)), b.sub(constant(0, c.dt), x), x)
    return x


def _sign(c: ScalarCtx) -> ir.Value:
    b, (x,), dt = c.b, c.args, c.dt
    zero = constant(0, dt)
    if c.k == "u":
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
    if c.k == "i":
        return b.select(b.icmp_signed(">", x, zero), constant(1, dt), b.select(b.icmp_signed("<", x, zero), constant(-1, dt), zero))
    # float: +1 / -1 / +0.0 for either zero / the NaN itself
    r = b.select(b.fcmp_ordered("==", x, zero), zero, x)
    r = b.select(b.fcmp_ordered("<", x, zero), constant(-1, dt), r)
    return b.select(b.fcmp_ordered(">", x, zero), constant(1, dt), r)


def _square(c: ScalarCtx) -> ir.Value:
    (x,) = c.args
    if c.k in "iu":
        return c.b.mul(x, x)
    return float_op(c.b, [x], c.dt, lambda b, a, _: b.fmul(a[0], a[0]))


def _reciprocal(c: ScalarCtx) -> ir.Value:
    """Floats: 1/x.  Integers: NumPy casts the double 1.0/x to the type, so only
    +-1 survive and 1/0 = inf casts to x86's indefinite integer (DIVERGENCES)."""
    b, (x,), dt = c.b, c.args, c.dt
    if c.k == "f":
        return float_op(b, [x], dt, lambda bb, a, wdt: bb.fdiv(constant(1, wdt), a[0]))
    zero = constant(0, dt)
    # (int)inf on x86: INT_MIN for 32/64-bit targets, truncated to 0 for narrower
    # ones; uint32/uint64 go through the 64-bit conversion and end up 0.
    by_zero = int_min(dt) if (dt.kind == "i" and dt.itemsize >= 4) else zero
    r = b.select(b.icmp_unsigned("==", x, constant(1, dt)), constant(1, dt), zero)
    if c.k == "i":
        r = b.select(b.icmp_signed("==", x, constant(-1, dt)), constant(-1, dt), r)
    return b.select(b.icmp_unsigned("==", x, zero), by_zero, r)


def _sqrt(c: ScalarCtx) -> ir.Value:
    return float_op(c.b, c.args, c.dt, lambda b, a, _: intrinsic(b, "llvm.sqrt", a))


def _math(name: str) -> Emitter:
    def emit(c: ScalarCtx) -> ir.Value:
        return float_op(c.b, c.args, c.dt, lambda b, a, dt: c.math.call(b, name, a, dt))
    return emit


def _rounding(name: str) -> Emitter:
    """floor/ceil/trunc/rint: exact, identity on integer and bool loops."""
    def emit(c: ScalarCtx) -> ir.Value:
        if c.k != "f":
            return c.args[0]
        return float_op(c.b, c.args, c.dt, lambda b, a, _: intrinsic(b, name, a))
    return emit


def _minmax(is_max: bool, propagate_nan: bool) -> Emitter:
    """maximum/minimum (NaN wins) and fmax/fmin (NaN loses), as NumPy's arrays do.

    Ties (equal values, i.e. also +0.0 vs -0.0) return the second operand for
    float32/float64 (the x86 max/min instruction semantics NumPy's SIMD loops
    inherit) and the first operand for float16 (NumPy's npy_half_ge/le loop).
    maximum returns the first NaN operand; fmax returns y only when x is NaN and
    y is not, so two NaNs give x.
    """
    def emit(c: ScalarCtx) -> ir.Value:
        b, (x, y), dt = c.b, c.args, c.dt
        if c.k == "b":
            return b.or_(x, y) if is_max else b.and_(x, y)
        if c.k in "iu":
            cmp = b.icmp_signed if c.k == "i" else b.icmp_unsigned
            return b.select(cmp(">" if is_max else "<", x, y), x, y)
        pred = (">" if is_max else "<") + ("=" if dt == F16 else "")
        take_x = b.fcmp_ordered(pred, x, y)
        take_x = b.or_(take_x, isnan(b, x if propagate_nan else y))
        return b.select(take_x, x, y)
    return emit


def _copysign(c: ScalarCtx) -> ir.Value:
    b, (x, y), dt = c.b, c.args, c.dt
    if dt != F16:
        return intrinsic(b, "llvm.copysign", [x, y])
    # Bit operations keep float16 exact without depending on f16 legalisation.
    i16 = ir.IntType(16)
    xi, yi = b.bitcast(x, i16), b.bitcast(y, i16)
    r = b.or_(b.and_(xi, ir.Constant(i16, 0x7FFF)), b.and_(yi, ir.Constant(i16, -0x8000)))
    return b.bitcast(r, ir.HalfType())


def _fpclass(which: str) -> Emitter:
    def emit(c: ScalarCtx) -> ir.Value:
        b, (x,), dt = c.b, c.args, c.dt
        if c.k != "f":
            return ir.Constant(ir.IntType(1), int(which == "isfinite"))
        if which == "isnan":
            return isnan(b, x)
        ax, inf = intrinsic(b, "llvm.fabs", [x]), constant(np.inf, dt)
        if which == "isinf":
            return b.fcmp_ordered("==", ax, inf)
        return b.fcmp_ordered("!=", ax, inf)  # ordered: NaN is not finite
    return emit


def _signbit(c: ScalarCtx) -> ir.Value:
    b, (x,) = c.b, c.args
    xi = b.bitcast(x, ir.IntType(8 * c.dt.itemsize))
    return b.icmp_signed("<", xi, ir.Constant(xi.type, 0))


def _logical(op: str) -> Emitter:
    def emit(c: ScalarCtx) -> ir.Value:
        b = c.b
        t = [truth(b, a, dt) for a, dt in zip(c.args, c.dts)]
        if op == "not":
            return b.not_(t[0])
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](t[0], t[1])
    return emit


def _bitwise(op: str) -> Emitter:
    def emit(c: ScalarCtx) -> ir.Value:
        b, (x, y) = c.b, c.args
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](x, y)
    return emit


def _invert(c: ScalarCtx) -> ir.Value:
    return c.b.not_(c.args[0])


def _shift(left: bool) -> Emitter:
    """Shifts by >= bit width (or a negative amount, seen as huge unsigned) give
    0, or -1 for a right shift of a negative signed value.  The amount is masked
    so the LLVM shift itself is never poison."""
    def emit(c: ScalarCtx) -> ir.Value:
        b, (x, n), dt = c.b, c.args, c.dt
        bits = 8 * dt.itemsize
        in_range = b.icmp_unsigned("<", n, constant(bits, dt))
        n = b.and_(n, constant(bits - 1, dt))
        if left:
            return b.select(in_range, b.shl(x, n), constant(0, dt))
        if c.k == "i":
            return b.select(in_range, b.ashr(x, n), b.ashr(x, constant(bits - 1, dt)))
        return b.select(in_range, b.lshr(x, n), constant(0, dt))
    return emit


_SWAPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _compare(op: str) -> Emitter:
    def emit(c: ScalarCtx) -> ir.Value:
        b, (x, y) = c.b, c.args
        kx, ky = kind_of(c.dts[0]), kind_of(c.dts[1])
        if kx == "f":
            return fcmp(b, op, x, y)
        if kx == ky:
            return (b.icmp_signed if kx == "i" else b.icmp_unsigned)(op, x, y)
        # int64 vs uint64 (NumPy's qQ/Qq loops): compare mathematically.  A
        # negative signed operand is below every unsigned value.
        signed_is_x = kx == "i"
        s = x if signed_is_x else y
        negative = b.icmp_signed("<", s, ir.Constant(s.type, 0))
        signed_op = op if signed_is_x else _SWAPPED[op]  # as "signed <op> unsigned"
        when_negative = signed_op in ("<", "<=", "!=")
        unsigned = b.icmp_unsigned(op, x, y)
        return b.select(negative, ir.Constant(ir.IntType(1), int(when_negative)), unsigned)
    return emit


def _where(c: ScalarCtx) -> ir.Value:
    cond, x, y = c.args
    return c.b.select(cond, x, y)




def _cast_emitter(c: ScalarCtx) -> ir.Value:
    return cast(c.b, c.args[0], c.dt, c.out)


def _bitcast_emitter(c: ScalarCtx) -> ir.Value:
    """The operand's bits as the result's dtype (``bitcast_allowed`` pairs): bool's byte is
    0 or 1 in memory, i1 in registers."""
    if c.dt.kind == "b":
        return c.b.zext(c.args[0], llvm_type(c.out))
    return c.b.bitcast(c.args[0], llvm_type(c.out))


def _fma(c: ScalarCtx) -> ir.Value:
    return intrinsic(c.b, "llvm.fma", c.args)   # one rounding (vfmadd / fma.rn)


# ============================================================================================
# The ufunc primitives
# ============================================================================================

def _libm(f32: str, f64: str, base: str, nargs: int = 1) -> MathFn:
    return MathFn((f32, f64), base, nargs)


# Functions the target's math library computes: NumPy name -> (libm float/double, libdevice).
MATH_SYMBOLS: dict[str, MathFn] = {
    "exp": _libm("expf", "exp", "exp"), "exp2": _libm("exp2f", "exp2", "exp2"),
    "expm1": _libm("expm1f", "expm1", "expm1"), "log": _libm("logf", "log", "log"),
    "log2": _libm("log2f", "log2", "log2"), "log10": _libm("log10f", "log10", "log10"),
    "log1p": _libm("log1pf", "log1p", "log1p"), "sin": _libm("sinf", "sin", "sin"),
    "cos": _libm("cosf", "cos", "cos"), "tan": _libm("tanf", "tan", "tan"),
    "arcsin": _libm("asinf", "asin", "asin"), "arccos": _libm("acosf", "acos", "acos"),
    "arctan": _libm("atanf", "atan", "atan"), "arctan2": _libm("atan2f", "atan2", "atan2", 2),
    "sinh": _libm("sinhf", "sinh", "sinh"), "cosh": _libm("coshf", "cosh", "cosh"),
    "tanh": _libm("tanhf", "tanh", "tanh"), "arcsinh": _libm("asinhf", "asinh", "asinh"),
    "arccosh": _libm("acoshf", "acosh", "acosh"), "arctanh": _libm("atanhf", "atanh", "atanh"),
    "power": _libm("powf", "pow", "pow", 2), "cbrt": _libm("cbrtf", "cbrt", "cbrt"),
    "hypot": _libm("hypotf", "hypot", "hypot", 2), "fmod": _libm("fmodf", "fmod", "fmod", 2),
}

_PI = math.pi
# name: (cost, value domain, emitter, comparator hint)
_UFUNCS: dict[str, tuple[int, str, Emitter, BoundsHint | None]] = {
    "add": (CHEAP, "any", _arith("add", "fadd", "or_"), None),
    "subtract": (CHEAP, "any", _arith("sub", "fsub"), None),
    "multiply": (CHEAP, "any", _arith("mul", "fmul", "and_"), None),
    "true_divide": (MEDIUM, "any", _arith("sdiv", "fdiv"), None),   # only float loops exist
    "floor_divide": (MEDIUM, "any", _floor_divide, BoundsHint(jump=np.floor_divide)),
    "remainder": (MEDIUM, "any", _remainder, BoundsHint(jump=np.floor_divide)),
    "power": (TRANSCENDENTAL_COST, "small", _power, BoundsHint(special="power-base")),
    "negative": (CHEAP, "any", _negative, None),
    "positive": (CHEAP, "any", _positive, None),
    "absolute": (CHEAP, "any", _absolute, None),
    "sign": (CHEAP, "any", _sign, None),
    "square": (CHEAP, "any", _square, None),
    "sqrt": (MEDIUM, "positive", _sqrt, None),
    "cbrt": (TRANSCENDENTAL_COST, "any", _math("cbrt"), None),
    "reciprocal": (MEDIUM, "any", _reciprocal, None),
    "exp": (TRANSCENDENTAL_COST, "small", _math("exp"), None),
    "exp2": (TRANSCENDENTAL_COST, "small", _math("exp2"), None),
    "expm1": (TRANSCENDENTAL_COST, "small", _math("expm1"), None),
    "log": (TRANSCENDENTAL_COST, "positive", _math("log"), None),
    "log2": (TRANSCENDENTAL_COST, "positive", _math("log2"), None),
    "log10": (TRANSCENDENTAL_COST, "positive", _math("log10"), None),
    "log1p": (TRANSCENDENTAL_COST, "positive", _math("log1p"), None),
    "sin": (TRANSCENDENTAL_COST, "any", _math("sin"),
            BoundsHint(critical="extrema", shift=_PI / 2)),
    "cos": (TRANSCENDENTAL_COST, "any", _math("cos"), BoundsHint(critical="extrema", shift=0.0)),
    "tan": (TRANSCENDENTAL_COST, "any", _math("tan"), BoundsHint(critical="poles", shift=_PI / 2)),
    "arcsin": (TRANSCENDENTAL_COST, "unit", _math("arcsin"), None),
    "arccos": (TRANSCENDENTAL_COST, "unit", _math("arccos"), None),
    "arctan": (TRANSCENDENTAL_COST, "any", _math("arctan"), None),
    "arctan2": (TRANSCENDENTAL_COST, "any", _math("arctan2"), BoundsHint(special="atan2-cut")),
    "sinh": (TRANSCENDENTAL_COST, "small", _math("sinh"), None),
    "cosh": (TRANSCENDENTAL_COST, "small", _math("cosh"), None),
    "tanh": (TRANSCENDENTAL_COST, "any", _math("tanh"), None),
    "arcsinh": (TRANSCENDENTAL_COST, "any", _math("arcsinh"), None),
    "arccosh": (TRANSCENDENTAL_COST, "ge1", _math("arccosh"), None),
    "arctanh": (TRANSCENDENTAL_COST, "unit", _math("arctanh"), None),
    "hypot": (MEDIUM, "any", _math("hypot"), None),
    "floor": (CHEAP, "any", _rounding("llvm.floor"), None),
    "ceil": (CHEAP, "any", _rounding("llvm.ceil"), None),
    "trunc": (CHEAP, "any", _rounding("llvm.trunc"), None),
    "rint": (CHEAP, "any", _rounding("llvm.rint"), None),
    "maximum": (CHEAP, "any", _minmax(True, True), None),
    "minimum": (CHEAP, "any", _minmax(False, True), None),
    "fmax": (CHEAP, "any", _minmax(True, False), None),
    "fmin": (CHEAP, "any", _minmax(False, False), None),
    "copysign": (CHEAP, "any", _copysign, None),
    "isnan": (CHEAP, "any", _fpclass("isnan"), None),
    "isinf": (CHEAP, "any", _fpclass("isinf"), None),
    "isfinite": (CHEAP, "any", _fpclass("isfinite"), None),
    "signbit": (CHEAP, "any", _signbit, None),
    "logical_and": (CHEAP, "any", _logical("and"), None),
    "logical_or": (CHEAP, "any", _logical("or"), None),
    "logical_xor": (CHEAP, "any", _logical("xor"), None),
    "logical_not": (CHEAP, "any", _logical("not"), None),
    "bitwise_and": (CHEAP, "any", _bitwise("and"), None),
    "bitwise_or": (CHEAP, "any", _bitwise("or"), None),
    "bitwise_xor": (CHEAP, "any", _bitwise("xor"), None),
    "invert": (CHEAP, "any", _invert, None),
    "left_shift": (CHEAP, "small", _shift(True), None),
    "right_shift": (CHEAP, "small", _shift(False), None),
    "greater": (CHEAP, "any", _compare(">"), None),
    "greater_equal": (CHEAP, "any", _compare(">="), None),
    "less": (CHEAP, "any", _compare("<"), None),
    "less_equal": (CHEAP, "any", _compare("<="), None),
    "equal": (CHEAP, "any", _compare("=="), None),
    "not_equal": (CHEAP, "any", _compare("!="), None),
}

# Divergence ids (ops.divergences) of the ops they concern.
_DIVERGENCES = {"power": ("int-power-negative-exponent",), "reciprocal": ("float-to-int-cast",),
                "fmax": ("fmax-fmin-signed-zero",), "fmin": ("fmax-fmin-signed-zero",)}


def register_ufunc(name: str, cost: int, values: str, lower: Emitter,
                   bounds: BoundsHint | None = None, divergences: tuple[str, ...] = (),
                   accuracy: Accuracy | None = None, domain: Domain | None = None) -> OpSpec:
    """Register ``np.<name>`` as a primitive: NumPy's loops give its dtypes and domain. A
    function of the math library (``MATH_SYMBOLS``) is inexact ("transcendental" accuracy)
    unless ``accuracy`` says otherwise."""
    uf = getattr(np, name)
    fn = MATH_SYMBOLS.get(name)
    if accuracy is None:
        accuracy = LIBM if fn is not None else EXACT
    return register(OpSpec(
        name, Kind.ELEMENTWISE, uf, rules.broadcast_shape, rules.ufunc_dtype_rule(uf),
        domain or Domain(rules.ufunc_input_dtypes(uf, ALL_DTYPES), values), arity=uf.nin,
        cost=cost,
        ufunc=uf, lower=lower, math=fn, accuracy=accuracy, bounds=bounds,
        divergences=divergences + _DIVERGENCES.get(name, ())
        + (("transcendental-ulps",) if not accuracy.exact else ())))


for _name, (_cost, _values, _lower, _hint) in _UFUNCS.items():
    register_ufunc(_name, _cost, _values, _lower, _hint)


def _where_ref(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(c, x, y)


def _cast_ref(x: np.ndarray, *, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(dtype)


def bitcast_allowed(src: np.dtype, dst: np.dtype) -> bool:
    """Whether ``ndarray.view(dst)`` of a ``src`` array is the ``bitcast`` op: the same item
    size, numbers of one kind read as another (float32 <-> int32 / uint32, ...), and bool
    read as its byte. A byte read as bool is not: NumPy keeps bytes other than 0 and 1 in
    such an array, which no bool here can hold."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src.itemsize != dst.itemsize or dst.kind == "b" or src == dst:
        return False
    return all(d.kind in "biuf" and d.isnative and d.itemsize <= 8 for d in (src, dst))


def _bitcast_ref(x: np.ndarray, *, dtype: str) -> np.ndarray:
    return np.array(np.asarray(x).view(np.dtype(dtype)))


def exact_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once (IEEE fusedMultiplyAdd), computed exactly with fractions: the
    reference of the ``fma`` primitive (NumPy has no fma; Python's math.fma is 3.13+)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v) for v in (a, b, c)))
    dt = np.result_type(a, b, c)
    with np.errstate(all="ignore"):
        # non-finite operands: IEEE arithmetic in float64 gives fma's inf / NaN; a zero
        # result of finite operands has the same sign unfused and fused
        out = (a.astype(F64) * b.astype(F64) + c.astype(F64)).astype(dt)
    # a finite product plus an infinite or NaN c is c (the product is never rounded)
    out = np.where(np.isfinite(a) & np.isfinite(b) & ~np.isfinite(c), c.astype(dt), out)
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    flat_a, flat_b, flat_c, flat = (np.ravel(v) for v in (a, b, c, out))
    flat = flat.copy()
    # most elements by error-free transformations, vectorised (fractions for 10^5 elements
    # took minutes); the rest, exactly, with fractions
    fast, rounded = _fma_error_free(flat_a, flat_b, flat_c, dt)
    fast &= finite.ravel()
    flat[fast] = rounded[fast]
    with np.errstate(over="ignore"):   # (a float32 past its range is inf, as rounding gives)
        for i in np.flatnonzero(finite.ravel() & ~fast):
            q = (Fraction(float(flat_a[i])) * Fraction(float(flat_b[i]))
                 + Fraction(float(flat_c[i])))
            if q != 0:
                flat[i] = _round_fraction(q, dt)
    return flat.reshape(out.shape)


def _two_sum(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s, e with s = fl(x + y) and x + y = s + e exactly (Knuth's TwoSum; no overflow)."""
    s = x + y
    v = s - x
    return s, (x - (s - v)) + (y - v)


_SPLIT = 134217729.0          # 2**27 + 1: Veltkamp's splitter for float64


def _two_product(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p, e with p = fl(x * y) and x * y = p + e exactly (Dekker's product, for
    magnitudes where neither the split nor the error underflows or overflows)."""
    p = x * y
    xs = _SPLIT * x
    xh = xs - (xs - x)
    xl = x - xh
    ys = _SPLIT * y
    yh = ys - (ys - y)
    yl = y - yh
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def _fma_error_free(a: np.ndarray, b: np.ndarray, c: np.ndarray, dt: np.dtype
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(where the result is certain, a * b + c rounded once there). float32: the product
    is exact in float64, the sum exact as s + e, rounded to odd in float64 and then to
    float32 (exact: 53 >= 2 * 24 + 2). float64: a * b = p + pe and p + c = s + e exactly;
    fl(s + (e + pe)) is the correctly rounded sum wherever e + pe is exact, for operands
    and results far from the ends of the exponent range. Zero results are left out too (their
    sign is the unfused sum's, which the caller keeps)."""
    with np.errstate(all="ignore"):
        a64, b64, c64 = (v.astype(F64) for v in (a, b, c))
        if dt == np.dtype(np.float32):
            s, e = _two_sum(a64 * b64, c64)
            odd = (s.view(np.uint64) & np.uint64(1)).astype(bool)
            nudge = (e != 0) & ~odd
            s = np.where(nudge, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
            return np.isfinite(s) & (s != 0), s.astype(np.float32)
        p, pe = _two_product(a64, b64)
        s, e = _two_sum(p, c64)
        t, t_err = _two_sum(e, pe)
        out = s + t
        tiny, huge = 2.0 ** -900, 2.0 ** 900
        safe = np.ones(out.shape, bool)
        for v in (a64, b64, c64, p, out):
            mag = np.abs(v)
            safe &= (mag == 0) | ((mag > tiny) & (mag < huge))
        return safe & (t_err == 0) & np.isfinite(out) & (out != 0), out


def _round_fraction(q: Fraction, dt: np.dtype) -> float:
    try:
        f = float(q)                     # correctly rounded to float64
    except OverflowError:
        return math.inf if q > 0 else -math.inf
    if dt == F64 or Fraction(f) == q or math.isinf(f):
        return f
    # float32: round to odd in float64 first, then to nearest float32 (exact: 53 >= 2*24+2)
    bits = np.float64(f).view(np.uint64)
    if not bits & np.uint64(1):
        f = float(np.nextafter(f, math.inf if q > Fraction(f) else -math.inf))
    return f


register(OpSpec("fma", Kind.ELEMENTWISE, exact_fma, rules.broadcast_shape, rules.result_dtype,
                Domain((F32, F64)), arity=3, lower=_fma,
                operand_dtypes=lambda n: (n.dtype, n.dtype, n.dtype)))
register(OpSpec("where", Kind.ELEMENTWISE, _where_ref, rules.broadcast_shape, rules.where_dtype,
                arity=3, lower=_where, operand_dtypes=lambda n: (BOOL, n.dtype, n.dtype)))
register(OpSpec("cast", Kind.ELEMENTWISE, _cast_ref, rules.same_shape, rules.attr_dtype,
                lower=_cast_emitter, divergences=("float-to-int-cast",)))
# ndarray.view(dtype) of another dtype of the same item size: the same bits (a view: a
# write through it reaches the base through the inverse bitcast, trace/buffers.py)
register(OpSpec("bitcast", Kind.ELEMENTWISE, _bitcast_ref, rules.same_shape, rules.attr_dtype,
                lower=_bitcast_emitter, divergences=("nan-payload",)))
