"""Target-independent scalar lowering of NumPy 2 elementwise ops to LLVM IR.

Every function here works on one scalar lane: the kernel codegen loads
operands (``load_value``), converts them to the ufunc loop's input dtypes
(``cast``), applies ``lower_op`` and stores the result (``store_value``).
Results equal NumPy 2 array loops bit for bit wherever NumPy is deterministic
(NaN payloads are never promised: NumPy's own SIMD body and scalar tail
disagree on them).

Only portable IR is emitted (integer/float arithmetic, fcmp/icmp/select and
the intrinsics fabs, floor, ceil, trunc, rint, sqrt, copysign),
so the same code lowers on the host and on NVPTX.  Everything that would be a
libm call goes through the ``MathLib`` protocol instead; in particular no
``frem`` is emitted (it becomes an ``fmod`` libcall that NVPTX cannot
resolve).

``lower_op`` and ``cast`` never create basic blocks in the caller's function:
the builder stays in its current block.  Integer ``power`` is the one op that
needs a loop; it calls a small internal helper function that it adds to the
module once per dtype (``__tracearray_ipow_<dtype>``).

DIVERGENCES (places where we cannot or do not reproduce NumPy exactly; the
same text is available as the ``DIVERGENCES`` tuple):
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np
from llvmlite import ir

DIVERGENCES: tuple[str, ...] = (
    "power on integers with a negative exponent: NumPy raises ValueError at run "
    "time; a compiled kernel cannot, so it returns 0, except base 1 -> 1 and "
    "base -1 -> -1 or 1 depending on the exponent's parity (the exact "
    "mathematical results).",
    "float -> integer casts of NaN, inf or out-of-range values (and reciprocal "
    "of integer 0, which NumPy computes as the cast of 1.0/0): NumPy's result is "
    "platform dependent and it warns.  We reproduce NumPy on x86-64 on every "
    "target (the 'integer indefinite' value INT_MIN of int32/int64, truncated "
    "for narrower types; uint64 via the compiler's 2**63 split); out-of-range "
    "lanes are selected away before fptosi, so no poison is ever produced.  On AArch64 "
    "NumPy saturates instead.  float -> uint32 only matches NumPy on x86-64 "
    "for values in (-2**31, 2**32); beyond that NumPy is position dependent.",
    "fmax/fmin on float32/float64 with (+0.0, -0.0) operands or two NaNs: NumPy's "
    "SIMD body returns the second zero and the first NaN while its scalar tail "
    "(last len % vector-width elements) returns the first zero and the second "
    "NaN.  We always give the SIMD-body result.  Ties of maximum/minimum/fmax/"
    "fmin (+0.0 vs -0.0) follow NumPy's x86 loops (second operand for "
    "float32/float64, first for float16); other platforms' NumPy may differ.",
    "NaN payloads and NaN sign bits are not promised to match (NumPy itself "
    "differs between its SIMD body and scalar tail); NaN-ness always matches.",
    "transcendental functions (exp, log, sin, power, ...) come from the "
    "target's MathLib (glibc libm/libmvec on the host, libdevice on GPUs) "
    "while NumPy uses its own SIMD implementations: results agree within a "
    "few ulp, not bit for bit.",
)

if __doc__:  # None under python -OO
    __doc__ += "".join(f"\n- {d}" for d in DIVERGENCES) + "\n"

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)

MATH_FUNCTIONS: frozenset[str] = frozenset(
    "exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan "
    "arctan2 sinh cosh tanh arcsinh arccosh arctanh power cbrt hypot fmod".split()
)


class MathLib(Protocol):
    """Provider of transcendental functions for one target.

    ``name`` is one of ``MATH_FUNCTIONS`` (NumPy spelling), ``dtype`` is
    float32 or float64 and ``args`` have the matching LLVM type.  float16 never
    reaches a MathLib: ``lower_op`` widens it to float32 first.
    """

    def call(self, b: ir.IRBuilder, name: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value: ...


# --------------------------------------------------------------------------
# Types, memory and constants
# --------------------------------------------------------------------------

def _kind(dt: np.dtype) -> str:
    """'b' bool, 'i' signed, 'u' unsigned, 'f' float; anything else is rejected."""
    if dt.kind in "biuf" and dt.isnative and not (dt.kind == "f" and dt.itemsize > 8):
        return dt.kind
    raise TypeError(f"tracearray: unsupported dtype {dt}")


def llvm_type(dtype) -> ir.Type:
    """Register type of a dtype (bool is i1)."""
    dt = np.dtype(dtype)
    k = _kind(dt)
    if k == "b":
        return ir.IntType(1)
    if k in "iu":
        return ir.IntType(8 * dt.itemsize)
    return {2: ir.HalfType(), 4: ir.FloatType(), 8: ir.DoubleType()}[dt.itemsize]


def memory_type(dtype) -> ir.Type:
    """In-memory type: NumPy stores bool as one byte holding 0 or 1."""
    dt = np.dtype(dtype)
    return ir.IntType(8) if _kind(dt) == "b" else llvm_type(dt)


def load_value(b: ir.IRBuilder, ptr: ir.Value, dtype, align: int | None = None) -> ir.Value:
    """Load one element; bool bytes become i1 (any non-zero byte is True)."""
    dt = np.dtype(dtype)
    typ = memory_type(dt) if ptr.type.is_opaque else None
    v = b.load(ptr, align=align, typ=typ)
    if _kind(dt) == "b":
        return b.icmp_unsigned("!=", v, ir.Constant(ir.IntType(8), 0))
    return v


def store_value(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, dtype, align: int | None = None) -> None:
    """Store one element; i1 is widened to the 0/1 byte NumPy expects."""
    dt = np.dtype(dtype)
    if _kind(dt) == "b":
        value = b.zext(value, ir.IntType(8))
    b.store(value, ptr, align=align)


def _float_bits(value, dt: np.dtype) -> int:
    arr = np.asarray(value)
    if arr.dtype != dt:
        with np.errstate(all="ignore"):  # 1e300 -> float32 is inf, as NumPy casts it
            arr = arr.astype(dt)
    return int(arr.reshape(()).view(f"u{dt.itemsize}"))


def _f32_bits_as_f64_bits(bits: int) -> int:
    """Widen float32 bits to the float64 bits of the same value.

    LLVM IR spells float constants as the double with the same value.  The
    widening is done on bits so that NaN payloads survive (a hardware
    conversion would quiet signalling NaNs).
    """
    sign = (bits >> 31) & 1
    exp = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    if exp == 0xFF:
        return (sign << 63) | (0x7FF << 52) | (mant << 29)
    value = np.array([bits], np.uint32).view(np.float32).astype(np.float64)  # exact
    return int(value.view(np.uint64)[0])


def constant(value, dtype) -> ir.Constant:
    """Exact constant of a dtype (integers wrap like NumPy's C casts)."""
    dt = np.dtype(dtype)
    ty = llvm_type(dt)
    k = _kind(dt)
    if k == "b":
        return ir.Constant(ty, int(bool(value)))
    if k in "iu":
        nbits = 8 * dt.itemsize
        v = int(value) & ((1 << nbits) - 1)
        if v >= 1 << (nbits - 1):  # print as signed: unambiguous for the parser
            v -= 1 << nbits
        return ir.Constant(ty, v)
    bits = _float_bits(value, dt)
    if dt.itemsize == 2:
        return ir.FormattedConstant(ty, f"0xH{bits:04X}")
    if dt.itemsize == 4:
        bits = _f32_bits_as_f64_bits(bits)
    return ir.FormattedConstant(ty, f"0x{bits:016X}")


def _int_min(dt: np.dtype) -> ir.Constant:
    return constant(np.iinfo(dt).min, dt)


# --------------------------------------------------------------------------
# Small IR helpers
# --------------------------------------------------------------------------

def _suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(ty)]


def _declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name)
    return fn


def _intrinsic(b: ir.IRBuilder, base: str, args: Sequence[ir.Value]) -> ir.Value:
    """Call an intrinsic overloaded on its (single) operand type, e.g. llvm.floor.f32."""
    ty = args[0].type
    fn = _declare(b.module, f"{base}.{_suffix(ty)}", ty, [a.type for a in args])
    return b.call(fn, list(args))


def _select_const(b: ir.IRBuilder, cond: ir.Value, t, f, dt: np.dtype) -> ir.Value:
    return b.select(cond, constant(t, dt), constant(f, dt))


def _truth(b: ir.IRBuilder, v: ir.Value, dt: np.dtype) -> ir.Value:
    """C truthiness: x != 0 (NaN is truthy)."""
    k = _kind(dt)
    if k == "b":
        return v
    if k == "f":
        return b.fcmp_unordered("!=", v, constant(0, dt))
    return b.icmp_unsigned("!=", v, constant(0, dt))


def _fcmp(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """NumPy float comparison: ordered, except != which is true for NaN."""
    if op == "!=":
        return b.fcmp_unordered("!=", x, y)
    return b.fcmp_ordered(op, x, y)


def _isnan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


def _widen_f16(b: ir.IRBuilder, args: Sequence[ir.Value], dt: np.dtype):
    """NumPy computes float16 ops in float32 and rounds once: widen the operands."""
    if dt == _F16:
        return [b.fpext(a, ir.FloatType()) for a in args], _F32
    return list(args), dt


def _narrow_f16(b: ir.IRBuilder, v: ir.Value, dt: np.dtype) -> ir.Value:
    return b.fptrunc(v, ir.HalfType()) if dt == _F16 else v


def _float_op(b: ir.IRBuilder, args: Sequence[ir.Value], dt: np.dtype,
              fn: Callable[[ir.IRBuilder, list[ir.Value], np.dtype], ir.Value]) -> ir.Value:
    """Apply fn in float32 for float16 (one rounding at the end), natively otherwise."""
    wide, wdt = _widen_f16(b, args, dt)
    return _narrow_f16(b, fn(b, wide, wdt), dt)


# --------------------------------------------------------------------------
# Per-op emitters.  Each receives the operands in the loop's input dtypes.
# --------------------------------------------------------------------------

@dataclass
class _Ctx:
    b: ir.IRBuilder
    args: list[ir.Value]
    dts: list[np.dtype]
    out: np.dtype
    math: MathLib

    @property
    def dt(self) -> np.dtype:
        return self.dts[0]

    @property
    def k(self) -> str:
        return _kind(self.dts[0])


Emitter = Callable[[_Ctx], ir.Value]


def _arith(int_op: str, float_op: str, bool_op: str | None = None) -> Emitter:
    """Wrapping integer op / float op rounded per NumPy / bool op for ?? loops."""
    def emit(c: _Ctx) -> ir.Value:
        b, (x, y) = c.b, c.args
        if c.k == "b":
            return getattr(b, bool_op)(x, y)
        if c.k in "iu":
            return getattr(b, int_op)(x, y)
        return _float_op(b, [x, y], c.dt, lambda bb, a, _: getattr(bb, float_op)(*a))
    return emit


def _int_divmod(c: _Ctx) -> tuple[ir.Value, ir.Value]:
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
        overflow = b.and_(b.icmp_signed("==", x, _int_min(dt)), b.icmp_signed("==", y, constant(-1, dt)))
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
    mod = b.select(mod_nonzero, mod, _intrinsic(b, "llvm.copysign", [zero, y]))
    floor = _intrinsic(b, "llvm.floor", [div])
    floor = b.select(b.fcmp_ordered(">", b.fsub(div, floor), half), b.fadd(floor, one), floor)
    div_nonzero = b.fcmp_unordered("!=", div, zero)
    floordiv = b.select(div_nonzero, floor, _intrinsic(b, "llvm.copysign", [zero, ratio]))
    y_zero = b.fcmp_ordered("==", y, zero)
    return b.select(y_zero, ratio, floordiv), mod


def _floor_divide(c: _Ctx) -> ir.Value:
    if c.k in "iu":
        return _int_divmod(c)[0]
    return _float_op(c.b, c.args, c.dt, lambda b, a, dt: _float_divmod(b, a[0], a[1], dt, c.math)[0])


def _remainder(c: _Ctx) -> ir.Value:
    if c.k in "iu":
        return _int_divmod(c)[1]
    return _float_op(c.b, c.args, c.dt, lambda b, a, dt: _float_divmod(b, a[0], a[1], dt, c.math)[1])


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


def _power(c: _Ctx) -> ir.Value:
    if c.k in "iu":
        return c.b.call(_ipow_helper(c.b.module, c.dt), c.args)
    return _float_op(c.b, c.args, c.dt, lambda b, a, dt: c.math.call(b, "power", a, dt))


def _negative(c: _Ctx) -> ir.Value:
    (x,) = c.args
    return c.b.fneg(x) if c.k == "f" else c.b.sub(constant(0, c.dt), x)


def _positive(c: _Ctx) -> ir.Value:
    return c.args[0]


def _absolute(c: _Ctx) -> ir.Value:
    b, (x,) = c.b, c.args
    if c.k == "f":
        return _intrinsic(b, "llvm.fabs", [x])
    if c.k == "i":  # abs(MIN) wraps to MIN, as in NumPy
        return b.select(b.icmp_signed("<", x, constant(0, c.dt)), b.sub(constant(0, c.dt), x), x)
    return x


def _sign(c: _Ctx) -> ir.Value:
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


def _square(c: _Ctx) -> ir.Value:
    (x,) = c.args
    if c.k in "iu":
        return c.b.mul(x, x)
    return _float_op(c.b, [x], c.dt, lambda b, a, _: b.fmul(a[0], a[0]))


def _reciprocal(c: _Ctx) -> ir.Value:
    """Floats: 1/x.  Integers: NumPy casts the double 1.0/x to the type, so only
    +-1 survive and 1/0 = inf casts to x86's indefinite integer (DIVERGENCES)."""
    b, (x,), dt = c.b, c.args, c.dt
    if c.k == "f":
        return _float_op(b, [x], dt, lambda bb, a, wdt: bb.fdiv(constant(1, wdt), a[0]))
    zero = constant(0, dt)
    # (int)inf on x86: INT_MIN for 32/64-bit targets, truncated to 0 for narrower
    # ones; uint32/uint64 go through the 64-bit conversion and end up 0.
    by_zero = _int_min(dt) if (dt.kind == "i" and dt.itemsize >= 4) else zero
    r = b.select(b.icmp_unsigned("==", x, constant(1, dt)), constant(1, dt), zero)
    if c.k == "i":
        r = b.select(b.icmp_signed("==", x, constant(-1, dt)), constant(-1, dt), r)
    return b.select(b.icmp_unsigned("==", x, zero), by_zero, r)


def _sqrt(c: _Ctx) -> ir.Value:
    return _float_op(c.b, c.args, c.dt, lambda b, a, _: _intrinsic(b, "llvm.sqrt", a))


def _math(name: str) -> Emitter:
    def emit(c: _Ctx) -> ir.Value:
        return _float_op(c.b, c.args, c.dt, lambda b, a, dt: c.math.call(b, name, a, dt))
    return emit


def _rounding(intrinsic: str) -> Emitter:
    """floor/ceil/trunc/rint: exact, identity on integer and bool loops."""
    def emit(c: _Ctx) -> ir.Value:
        if c.k != "f":
            return c.args[0]
        return _float_op(c.b, c.args, c.dt, lambda b, a, _: _intrinsic(b, intrinsic, a))
    return emit


def _minmax(is_max: bool, propagate_nan: bool) -> Emitter:
    """maximum/minimum (NaN wins) and fmax/fmin (NaN loses), as NumPy's arrays do.

    Ties (equal values, i.e. also +0.0 vs -0.0) return the second operand for
    float32/float64 (the x86 max/min instruction semantics NumPy's SIMD loops
    inherit) and the first operand for float16 (NumPy's npy_half_ge/le loop).
    maximum returns the first NaN operand; fmax returns y only when x is NaN and
    y is not, so two NaNs give x.
    """
    def emit(c: _Ctx) -> ir.Value:
        b, (x, y), dt = c.b, c.args, c.dt
        if c.k == "b":
            return b.or_(x, y) if is_max else b.and_(x, y)
        if c.k in "iu":
            cmp = b.icmp_signed if c.k == "i" else b.icmp_unsigned
            return b.select(cmp(">" if is_max else "<", x, y), x, y)
        pred = (">" if is_max else "<") + ("=" if dt == _F16 else "")
        take_x = b.fcmp_ordered(pred, x, y)
        take_x = b.or_(take_x, _isnan(b, x if propagate_nan else y))
        return b.select(take_x, x, y)
    return emit


def _copysign(c: _Ctx) -> ir.Value:
    b, (x, y), dt = c.b, c.args, c.dt
    if dt != _F16:
        return _intrinsic(b, "llvm.copysign", [x, y])
    # Bit operations keep float16 exact without depending on f16 legalisation.
    i16 = ir.IntType(16)
    xi, yi = b.bitcast(x, i16), b.bitcast(y, i16)
    r = b.or_(b.and_(xi, ir.Constant(i16, 0x7FFF)), b.and_(yi, ir.Constant(i16, -0x8000)))
    return b.bitcast(r, ir.HalfType())


def _fpclass(which: str) -> Emitter:
    def emit(c: _Ctx) -> ir.Value:
        b, (x,), dt = c.b, c.args, c.dt
        if c.k != "f":
            return ir.Constant(ir.IntType(1), int(which == "isfinite"))
        if which == "isnan":
            return _isnan(b, x)
        ax, inf = _intrinsic(b, "llvm.fabs", [x]), constant(np.inf, dt)
        if which == "isinf":
            return b.fcmp_ordered("==", ax, inf)
        return b.fcmp_ordered("!=", ax, inf)  # ordered: NaN is not finite
    return emit


def _signbit(c: _Ctx) -> ir.Value:
    b, (x,) = c.b, c.args
    xi = b.bitcast(x, ir.IntType(8 * c.dt.itemsize))
    return b.icmp_signed("<", xi, ir.Constant(xi.type, 0))


def _logical(op: str) -> Emitter:
    def emit(c: _Ctx) -> ir.Value:
        b = c.b
        t = [_truth(b, a, dt) for a, dt in zip(c.args, c.dts)]
        if op == "not":
            return b.not_(t[0])
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](t[0], t[1])
    return emit


def _bitwise(op: str) -> Emitter:
    def emit(c: _Ctx) -> ir.Value:
        b, (x, y) = c.b, c.args
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](x, y)
    return emit


def _invert(c: _Ctx) -> ir.Value:
    return c.b.not_(c.args[0])


def _shift(left: bool) -> Emitter:
    """Shifts by >= bit width (or a negative amount, seen as huge unsigned) give
    0, or -1 for a right shift of a negative signed value.  The amount is masked
    so the LLVM shift itself is never poison."""
    def emit(c: _Ctx) -> ir.Value:
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
    def emit(c: _Ctx) -> ir.Value:
        b, (x, y) = c.b, c.args
        kx, ky = _kind(c.dts[0]), _kind(c.dts[1])
        if kx == "f":
            return _fcmp(b, op, x, y)
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


def _where(c: _Ctx) -> ir.Value:
    cond, x, y = c.args
    return c.b.select(cond, x, y)


_EMITTERS: dict[str, Emitter] = {
    "add": _arith("add", "fadd", "or_"),
    "subtract": _arith("sub", "fsub"),
    "multiply": _arith("mul", "fmul", "and_"),
    "true_divide": _arith("sdiv", "fdiv"),  # only float loops exist
    "floor_divide": _floor_divide,
    "remainder": _remainder,
    "power": _power,
    "negative": _negative,
    "positive": _positive,
    "absolute": _absolute,
    "sign": _sign,
    "square": _square,
    "sqrt": _sqrt,
    "reciprocal": _reciprocal,
    "floor": _rounding("llvm.floor"),
    "ceil": _rounding("llvm.ceil"),
    "trunc": _rounding("llvm.trunc"),
    "rint": _rounding("llvm.rint"),
    "maximum": _minmax(True, True),
    "minimum": _minmax(False, True),
    "fmax": _minmax(True, False),
    "fmin": _minmax(False, False),
    "copysign": _copysign,
    "isnan": _fpclass("isnan"),
    "isinf": _fpclass("isinf"),
    "isfinite": _fpclass("isfinite"),
    "signbit": _signbit,
    "logical_and": _logical("and"),
    "logical_or": _logical("or"),
    "logical_xor": _logical("xor"),
    "logical_not": _logical("not"),
    "bitwise_and": _bitwise("and"),
    "bitwise_or": _bitwise("or"),
    "bitwise_xor": _bitwise("xor"),
    "invert": _invert,
    "left_shift": _shift(True),
    "right_shift": _shift(False),
    "greater": _compare(">"),
    "greater_equal": _compare(">="),
    "less": _compare("<"),
    "less_equal": _compare("<="),
    "equal": _compare("=="),
    "not_equal": _compare("!="),
    "where": _where,
    "cast": lambda c: cast(c.b, c.args[0], c.dt, c.out),
}
for _name in MATH_FUNCTIONS - {"power", "fmod"}:
    _EMITTERS[_name] = _math(_name)

OPS: frozenset[str] = frozenset(_EMITTERS)


@functools.lru_cache(maxsize=None)
def _numpy_loop(op: str, in_dtypes: tuple[np.dtype, ...]) -> tuple[np.dtype, ...] | None:
    """The (inputs..., output) loop NumPy selects for these inputs, or None."""
    if op == "where":
        if len(in_dtypes) == 3 and in_dtypes[0] == _BOOL and in_dtypes[1] == in_dtypes[2]:
            return in_dtypes + (in_dtypes[1],)
        return None
    ufunc = getattr(np, op)
    if ufunc.nin != len(in_dtypes):
        return None
    try:
        return tuple(ufunc.resolve_dtypes(in_dtypes + (None,) * ufunc.nout))
    except (TypeError, ValueError, np.exceptions.DTypePromotionError):
        return None


def _has_loop(op: str, in_dtypes: tuple[np.dtype, ...], out: np.dtype) -> bool:
    if op == "cast":  # astype exists between every pair of supported dtypes
        return len(in_dtypes) == 1
    return _numpy_loop(op, in_dtypes) == in_dtypes + (out,)


def lower_op(b: ir.IRBuilder, op: str, args: list[ir.Value], in_dtypes: list[np.dtype],
             out_dtype: np.dtype, math: MathLib) -> ir.Value:
    """Emit one elementwise op on scalars already in the loop's input dtypes.

    ``in_dtypes``/``out_dtype`` must be exactly the loop NumPy resolves for
    them (``np.<op>.resolve_dtypes``); anything else raises TypeError.
    ``"cast"`` (one operand, any out_dtype) is ``cast`` under the op interface.
    """
    dts = tuple(np.dtype(d) for d in in_dtypes)
    out = np.dtype(out_dtype)
    desc = f"{op}({', '.join(str(d) for d in dts)}) -> {out}"
    if op not in _EMITTERS:
        raise TypeError(f"tracearray: unknown elementwise op {desc}")
    for d in dts + (out,):
        _kind(d)
    if not _has_loop(op, dts, out):
        raise TypeError(f"tracearray: NumPy has no loop {desc}")
    if len(args) != len(dts):
        raise TypeError(f"tracearray: {desc} takes {len(dts)} operands, got {len(args)}")
    return _EMITTERS[op](_Ctx(b, list(args), list(dts), out, math))


# --------------------------------------------------------------------------
# Casts (ndarray.astype semantics)
# --------------------------------------------------------------------------

def _f64_to_f16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """Correctly rounded double -> half without a __truncdfhf2 libcall.

    Round to float with round-to-odd (truncate toward zero, then set the last
    bit when inexact): float's 24 bits are more than half's 11 + 2, so the
    final float -> half rounding is then the correct one.
    """
    f32, i32 = ir.FloatType(), ir.IntType(32)
    f = b.fptrunc(v, f32)
    back = b.fpext(f, ir.DoubleType())
    bits = b.bitcast(f, i32)
    rounded_up = b.fcmp_ordered(">", _intrinsic(b, "llvm.fabs", [back]), _intrinsic(b, "llvm.fabs", [v]))
    bits = b.select(rounded_up, b.sub(bits, ir.Constant(i32, 1)), bits)
    inexact = b.zext(b.fcmp_ordered("!=", back, v), i32)
    odd = b.bitcast(b.or_(bits, inexact), f32)
    return b.fptrunc(odd, ir.HalfType())


def _float_to_float(b: ir.IRBuilder, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    if src.itemsize < dst.itemsize:
        if src == _F16 and dst == _F64:  # via float: both steps are exact
            v = b.fpext(v, ir.FloatType())
        return b.fpext(v, llvm_type(dst))
    if src == _F64 and dst == _F16:
        return _f64_to_f16(b, v)
    return b.fptrunc(v, llvm_type(dst))


def _x86_fptosi(b: ir.IRBuilder, v: ir.Value, src: np.dtype, bits: int) -> ir.Value:
    """cvttss2si/cvttsd2si: truncate; NaN and out-of-range give INT_MIN.

    Out-of-range lanes are replaced by 0.0 before the conversion, so the
    fptosi is never poison; unlike llvm.fptosi.sat this vectorises to a plain
    packed conversion plus a blend.
    """
    ity = ir.IntType(bits)
    limit = constant(2.0 ** (bits - 1), src)
    in_range = b.and_(b.fcmp_ordered("<", v, limit), b.fcmp_ordered(">=", v, constant(-(2.0 ** (bits - 1)), src)))
    safe = b.select(in_range, v, constant(0, src))
    return b.select(in_range, b.fptosi(safe, ity), ir.Constant(ity, -(1 << (bits - 1))))


def _float_to_int(b: ir.IRBuilder, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    """C's (integer)float as compiled for x86-64 by NumPy's build (DIVERGENCES)."""
    if src == _F16:
        v, src = b.fpext(v, ir.FloatType()), _F32
    bits = 8 * dst.itemsize
    if dst.kind == "u" and bits == 64:
        # x < 2**63 (or NaN): signed conversion; else convert x - 2**63 and flip the top bit.
        two63 = constant(2.0 ** 63, src)
        low = _x86_fptosi(b, v, src, 64)
        high = b.xor(_x86_fptosi(b, b.fsub(v, two63), src, 64), ir.Constant(ir.IntType(64), -(1 << 63)))
        return b.select(b.fcmp_unordered("<", v, two63), low, high)
    # 8/16-bit types go through int32, uint32 through int64; then wrap.
    wide = 64 if (bits == 64 or (dst.kind == "u" and bits == 32)) else 32
    r = _x86_fptosi(b, v, src, wide)
    return b.trunc(r, ir.IntType(bits)) if bits < wide else r


def cast(b: ir.IRBuilder, value: ir.Value, from_dtype, to_dtype) -> ir.Value:
    """Convert a scalar with ndarray.astype semantics."""
    src, dst = np.dtype(from_dtype), np.dtype(to_dtype)
    ks, kd = _kind(src), _kind(dst)
    if src == dst:
        return value
    if kd == "b":
        return _truth(b, value, src)
    if ks == "b":
        if kd == "f":
            return _select_const(b, value, 1, 0, dst)
        return b.zext(value, llvm_type(dst))
    if ks in "iu" and kd in "iu":
        sw, dw = src.itemsize, dst.itemsize
        if sw == dw:
            return value
        if sw > dw:
            return b.trunc(value, llvm_type(dst))
        return (b.sext if ks == "i" else b.zext)(value, llvm_type(dst))
    if ks in "iu":  # int -> float
        conv = b.sitofp if ks == "i" else b.uitofp
        if dst == _F16:
            # Exact equivalent of one rounding: ints below 2**24 convert to float
            # exactly, anything larger rounds past half's range (inf) either way.
            return b.fptrunc(conv(value, ir.FloatType()), ir.HalfType())
        return conv(value, llvm_type(dst))
    if kd == "f":
        return _float_to_float(b, value, src, dst)
    return _float_to_int(b, value, src, dst)


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------

_REDUCE_OPS = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}


def reduce_identity(op: str, dtype) -> ir.Constant:
    """Neutral start value for reduce_combine.

    float sum starts at -0.0 so that a sum of -0.0 stays -0.0 (NumPy starts
    from the first element).  max/min start at -inf/+inf or the integer
    extremes; NumPy raises for empty max/min and returns +0.0/0 for an empty
    sum, so the caller must special-case empty reductions.  any/all work on
    i1 whatever the element dtype.
    """
    dt = np.dtype(dtype)
    k = _kind(dt)
    if op in ("any", "all"):
        return ir.Constant(ir.IntType(1), int(op == "all"))
    if op == "sum":
        return constant(-0.0, dt) if k == "f" else constant(0, dt)
    if op == "prod":
        return constant(1, dt)
    if op in ("max", "min"):
        lowest = op == "max"
        if k == "b":
            return constant(not lowest, dt)
        if k == "f":
            return constant(-np.inf if lowest else np.inf, dt)
        info = np.iinfo(dt)
        return constant(info.min if lowest else info.max, dt)
    raise TypeError(f"tracearray: unknown reduction {op!r} for {dt}")


def reduce_combine(b: ir.IRBuilder, op: str, acc: ir.Value, x: ir.Value, dtype) -> ir.Value:
    """acc <op> x with the binary ufunc's semantics (acc first).

    max/min propagate NaN like np.maximum.reduce: once acc is NaN it stays that
    NaN.  sum/prod of float16 round per step (NumPy's float16 add.reduce
    accumulates in float32 instead: reduce in float32 and cast at the end to
    match it).  For any/all, acc is i1 and x is a value of ``dtype``.
    """
    dt = np.dtype(dtype)
    if op in ("any", "all"):
        t = _truth(b, x, dt)
        return b.or_(acc, t) if op == "any" else b.and_(acc, t)
    if op not in _REDUCE_OPS:
        raise TypeError(f"tracearray: unknown reduction {op!r} for {dt}")
    ufunc = _REDUCE_OPS[op]
    if _numpy_loop(ufunc, (dt, dt)) != (dt, dt, dt):
        raise TypeError(f"tracearray: no {op} reduction loop for {dt}")
    return _EMITTERS[ufunc](_Ctx(b, [acc, x], [dt, dt], dt, _NO_MATH))


class _NoMath:
    def call(self, b, name, args, dtype):  # pragma: no cover - reductions never need libm
        raise TypeError(f"tracearray: reductions do not call {name}")


_NO_MATH = _NoMath()
