"""The scalar IR toolkit of the op registry: LLVM types and constants of NumPy dtypes, loads
and stores, casts with ``ndarray.astype`` semantics, and the helpers every scalar emitter uses.

An emitter (``OpSpec.lower``) receives a ``ScalarCtx``: the builder, the operands (already in
the ufunc loop's input dtypes), their dtypes, the output dtype and the target's ``MathLib``. It
returns one value and never creates basic blocks in the caller's function (an op that needs a
loop, integer ``power``, calls an internal helper function it adds to the module once).

Only portable IR is emitted (integer and float arithmetic, fcmp/icmp/select and the intrinsics
fabs, floor, ceil, trunc, rint, sqrt, copysign), so the same code lowers on the host and on
NVPTX; everything that would be a libm call goes through ``MathLib.call`` (the symbols are the
ops' ``MathFn`` entries). No ``frem`` is emitted (it becomes an ``fmod`` libcall that NVPTX
cannot resolve), and no ``nsw``/``nuw``/``exact`` flag or poison-on-overflow intrinsic
argument: NumPy's integer arithmetic wraps (``tests/test_int_extremes.py`` checks the IR).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np
from llvmlite import ir

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
BOOL = np.dtype(np.bool_)


class MathLib(Protocol):
    """Provider of math-library functions for one target (``cpu.mathlib``, ``gpu.mathlib``).

    ``name`` is the name of a registered op with a ``MathFn`` (``ops.MATH``: NumPy spelling,
    e.g. "exp", "fmod"), ``dtype`` is float32 or float64 and ``args`` have the matching LLVM
    type. float16 never reaches a MathLib: emitters widen it to float32 first.
    """

    def call(self, b: ir.IRBuilder, name: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value: ...


def kind_of(dt: np.dtype) -> str:
    """'b' bool, 'i' signed, 'u' unsigned, 'f' float; anything else is rejected."""
    if dt.kind in "biuf" and dt.isnative and not (dt.kind == "f" and dt.itemsize > 8):
        return dt.kind
    raise TypeError(f"tracearray: unsupported dtype {dt}")


def llvm_type(dtype) -> ir.Type:
    """Register type of a dtype (bool is i1)."""
    dt = np.dtype(dtype)
    k = kind_of(dt)
    if k == "b":
        return ir.IntType(1)
    if k in "iu":
        return ir.IntType(8 * dt.itemsize)
    return {2: ir.HalfType(), 4: ir.FloatType(), 8: ir.DoubleType()}[dt.itemsize]


def memory_type(dtype) -> ir.Type:
    """In-memory type: NumPy stores bool as one byte holding 0 or 1."""
    dt = np.dtype(dtype)
    return ir.IntType(8) if kind_of(dt) == "b" else llvm_type(dt)


def load_value(b: ir.IRBuilder, ptr: ir.Value, dtype, align: int | None = None) -> ir.Value:
    """Load one element; bool bytes become i1 (any non-zero byte is True)."""
    dt = np.dtype(dtype)
    typ = memory_type(dt) if ptr.type.is_opaque else None
    v = b.load(ptr, align=align, typ=typ)
    if kind_of(dt) == "b":
        return b.icmp_unsigned("!=", v, ir.Constant(ir.IntType(8), 0))
    return v


def store_value(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, dtype, align: int | None = None) -> None:
    """Store one element; i1 is widened to the 0/1 byte NumPy expects."""
    dt = np.dtype(dtype)
    if kind_of(dt) == "b":
        value = b.zext(value, ir.IntType(8))
    b.store(value, ptr, align=align)


def float_bits(value, dt: np.dtype) -> int:
    arr = np.asarray(value)
    if arr.dtype != dt:
        with np.errstate(all="ignore"):  # 1e300 -> float32 is inf, as NumPy casts it
            arr = arr.astype(dt)
    return int(arr.reshape(()).view(f"u{dt.itemsize}"))


def f32_bits_as_f64_bits(bits: int) -> int:
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
    k = kind_of(dt)
    if k == "b":
        return ir.Constant(ty, int(bool(value)))
    if k in "iu":
        nbits = 8 * dt.itemsize
        v = int(value) & ((1 << nbits) - 1)
        if v >= 1 << (nbits - 1):  # print as signed: unambiguous for the parser
            v -= 1 << nbits
        return ir.Constant(ty, v)
    bits = float_bits(value, dt)
    if dt.itemsize == 2:
        return ir.FormattedConstant(ty, f"0xH{bits:04X}")
    if dt.itemsize == 4:
        bits = f32_bits_as_f64_bits(bits)
    return ir.FormattedConstant(ty, f"0x{bits:016X}")


def int_min(dt: np.dtype) -> ir.Constant:
    return constant(np.iinfo(dt).min, dt)


def type_suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(ty)]


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name)
    return fn


def intrinsic(b: ir.IRBuilder, base: str, args: Sequence[ir.Value]) -> ir.Value:
    """Call an intrinsic overloaded on its (single) operand type, e.g. llvm.floor.f32."""
    ty = args[0].type
    fn = declare(b.module, f"{base}.{type_suffix(ty)}", ty, [a.type for a in args])
    return b.call(fn, list(args))


def select_const(b: ir.IRBuilder, cond: ir.Value, t, f, dt: np.dtype) -> ir.Value:
    return b.select(cond, constant(t, dt), constant(f, dt))


def truth(b: ir.IRBuilder, v: ir.Value, dt: np.dtype) -> ir.Value:
    """C truthiness: x != 0 (NaN is truthy)."""
    k = kind_of(dt)
    if k == "b":
        return v
    if k == "f":
        return b.fcmp_unordered("!=", v, constant(0, dt))
    return b.icmp_unsigned("!=", v, constant(0, dt))


def fcmp(b: ir.IRBuilder, op: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """NumPy float comparison: ordered, except != which is true for NaN."""
    if op == "!=":
        return b.fcmp_unordered("!=", x, y)
    return b.fcmp_ordered(op, x, y)


def isnan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


def widen_f16(b: ir.IRBuilder, args: Sequence[ir.Value], dt: np.dtype):
    """NumPy computes float16 ops in float32 and rounds once: widen the operands."""
    if dt == F16:
        return [b.fpext(a, ir.FloatType()) for a in args], F32
    return list(args), dt


def narrow_f16(b: ir.IRBuilder, v: ir.Value, dt: np.dtype) -> ir.Value:
    return b.fptrunc(v, ir.HalfType()) if dt == F16 else v


def float_op(b: ir.IRBuilder, args: Sequence[ir.Value], dt: np.dtype,
              fn: Callable[[ir.IRBuilder, list[ir.Value], np.dtype], ir.Value]) -> ir.Value:
    """Apply fn in float32 for float16 (one rounding at the end), natively otherwise."""
    wide, wdt = widen_f16(b, args, dt)
    return narrow_f16(b, fn(b, wide, wdt), dt)


@dataclass
class ScalarCtx:
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
        return kind_of(self.dts[0])


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
    rounded_up = b.fcmp_ordered(">", intrinsic(b, "llvm.fabs", [back]), intrinsic(b, "llvm.fabs", [v]))
    bits = b.select(rounded_up, b.sub(bits, ir.Constant(i32, 1)), bits)
    inexact = b.zext(b.fcmp_ordered("!=", back, v), i32)
    odd = b.bitcast(b.or_(bits, inexact), f32)
    return b.fptrunc(odd, ir.HalfType())


def _float_to_float(b: ir.IRBuilder, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    if src.itemsize < dst.itemsize:
        if src == F16 and dst == F64:  # via float: both steps are exact
            v = b.fpext(v, ir.FloatType())
        return b.fpext(v, llvm_type(dst))
    if src == F64 and dst == F16:
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
    if src == F16:
        v, src = b.fpext(v, ir.FloatType()), F32
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
    ks, kd = kind_of(src), kind_of(dst)
    if src == dst:
        return value
    if kd == "b":
        return truth(b, value, src)
    if ks == "b":
        if kd == "f":
            return select_const(b, value, 1, 0, dst)
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
        if dst == F16:
            # Exact equivalent of one rounding: ints below 2**24 convert to float
            # exactly, anything larger rounds past half's range (inf) either way.
            return b.fptrunc(conv(value, ir.FloatType()), ir.HalfType())
        return conv(value, llvm_type(dst))
    if kd == "f":
        return _float_to_float(b, value, src, dst)
    return _float_to_int(b, value, src, dst)
