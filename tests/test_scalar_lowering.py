"""Scalar lowering vs NumPy 2 array loops, through the real CPU JIT.

For every ufunc primitive of the op registry (``tracearray.ops``; ``where`` and ``cast`` too)
and every loop NumPy has for our dtypes, a tiny
kernel ``void f(ptr a, ptr b, ptr c, ptr out, i64 n)`` loads the operands,
casts them to the loop dtypes, applies ``lower_op`` and stores the result.
All signatures of one op share a module, so each op costs one O3 + JIT.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import platform
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest
from llvmlite import ir

from tracearray.codegen import scalar
from tracearray.cpu.jit import CpuJit, JitError
from tracearray.cpu.mathlib import CpuMath
from tracearray.ops import OPS

DTYPES = [np.dtype(c) for c in "?bBhHiIlLefd"]
FLOATS = [np.dtype(c) for c in "efd"]
X86 = platform.machine().lower() in ("x86_64", "amd64")

# Transcendentals: max ulp distance from NumPy, which uses its own SIMD code.
# glibc's libmvec and NumPy's float32 SIMD functions are each within 4 ulp of
# the exact result but can err in opposite directions (logf near 0.78: -4 and
# +3), so float32 is compared with 8 here and held to 4 ulp of the correctly
# rounded result in test_math_accuracy.  float16 results are a float32 result
# rounded once: 1 ulp covers a float32 difference straddling a rounding boundary.
MATH_ULP = {np.dtype("e"): 1, np.dtype("f"): 8, np.dtype("d"): 4}
MATH_OPS = frozenset(n for n, s in OPS.items() if not s.accuracy.exact)
# The elementwise primitives with a NumPy ufunc of their own (frexp's two halves are tested
# through the composite np.frexp in test_registry.py).
LOWERED = sorted(n for n in scalar.lowered_ops() if n in ("where", "cast") or OPS[n].ufunc)

KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


@pytest.fixture(scope="module")
def jit() -> CpuJit:
    return CpuJit()


# --------------------------------------------------------------------------
# Kernel building
# --------------------------------------------------------------------------

def _ptr(b: ir.IRBuilder, raw: ir.Value, dt: np.dtype, i: ir.Value) -> ir.Value:
    typed = b.bitcast(raw, scalar.memory_type(dt).as_pointer())
    return b.gep(typed, [i], inbounds=True)


def add_kernel(module: ir.Module, name: str, body, arg_dts: list[np.dtype], out_dt: np.dtype,
               loop: bool = True) -> None:
    """void name(a, b, c, out, n): out[i] = body(builder, [loaded args]) for i < n (n >= 1).

    With loop=False only element 0 is computed (small code for the NVPTX check).
    """
    i8p = ir.IntType(8).as_pointer()
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p] * 4 + [i64]), name)
    for a in fn.args[:4]:
        a.add_attribute("noalias")
    entry, body_block, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(body_block)
    b.position_at_end(body_block)
    i = b.phi(i64) if loop else ir.Constant(i64, 0)
    vals = [scalar.load_value(b, _ptr(b, fn.args[k], dt, i), dt) for k, dt in enumerate(arg_dts)]
    res = body(b, vals)
    scalar.store_value(b, res, _ptr(b, fn.args[3], out_dt, i), out_dt)
    if loop:
        nxt = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(ir.Constant(i64, 0), entry)
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, fn.args[4]), body_block, done)
    else:
        b.branch(done)
    b.position_at_end(done)
    b.ret_void()


def op_body(op: str, arg_dts, loop):
    *in_dts, out_dt = loop
    math = CpuMath()

    def body(b, vals):
        args = [scalar.cast(b, v, s, d) for v, s, d in zip(vals, arg_dts, in_dts)]
        return scalar.lower_op(b, op, args, in_dts, out_dt, math)
    return body


def run_kernel(addr: int, inputs: list[np.ndarray], out_dt: np.dtype) -> np.ndarray:
    n = len(inputs[0])
    out = np.zeros(n, out_dt)
    ptrs = [a.ctypes.data for a in inputs] + [0] * (3 - len(inputs))
    KERNEL_TYPE(addr)(*ptrs, out.ctypes.data, n)
    return out


# --------------------------------------------------------------------------
# Inputs and comparison
# --------------------------------------------------------------------------

def edge_values(dt: np.dtype) -> np.ndarray:
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        bits = 8 * dt.itemsize
        vals = [0, 1, 2, 3, 5, 7, 100, bits - 1, bits, bits + 1, info.max, info.max - 1, info.min, info.min + 1]
        if dt.kind == "i":
            vals += [-1, -2, -3, -7, -100, -bits]
        return np.array([v % (1 << bits) for v in vals], dtype=f"u{dt.itemsize}").view(dt)
    info = np.finfo(dt)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -3.0, 7.0, 0.3, -0.7, np.pi, 100.0, -1e4,
            np.nan, -np.nan, np.inf, -np.inf, info.max, -info.max, info.tiny, -info.tiny,
            info.smallest_subnormal, -info.smallest_subnormal, info.eps]
    with np.errstate(all="ignore"):
        return np.array(vals, dtype=dt)


def random_values(dt: np.dtype, n: int, rng: np.random.Generator) -> np.ndarray:
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        wide = rng.integers(0, 1 << (8 * dt.itemsize), n, dtype=np.uint64, endpoint=False)
        small = rng.integers(-20 if dt.kind == "i" else 0, 20, n)
        return np.where(rng.random(n) < 0.5, wide.astype(f"u{dt.itemsize}").view(dt), small.astype(dt))
    mags = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    with np.errstate(all="ignore"):
        return mags.astype(dt)


def pad64(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Repeat to a multiple of 64 elements: NumPy's SIMD body then covers everything
    (its scalar tail differs from the body on fmax/fmin signed zeros)."""
    n = len(arrays[0])
    m = -(-n // 64) * 64
    return [np.concatenate([a, a[: m - n]]) for a in arrays]


def make_inputs(dts: list[np.dtype], rng: np.random.Generator, n_random: int = 512) -> list[np.ndarray]:
    edges = [edge_values(dt) for dt in dts]
    if len(dts) == 1:
        cols = [edges[0]]
    else:  # every pair of edge values (third operand of `where` cycles)
        grid = list(itertools.product(range(len(edges[0])), range(len(edges[1]))))
        cols = [edges[0][[g[0] for g in grid]], edges[1][[g[1] for g in grid]]]
        if len(dts) == 3:
            cols.append(np.resize(edges[2], len(grid)))
    cols = [np.concatenate([c, random_values(dt, n_random, rng)]) for c, dt in zip(cols, dts)]
    return pad64(cols)


def float_keys(a: np.ndarray) -> np.ndarray:
    """Monotonic integer image of floats: ulp distance is a difference of keys."""
    i = a.view(f"i{a.itemsize}").astype(np.int64)
    mag = i & ((1 << (8 * a.itemsize - 1)) - 1)
    return np.where(i < 0, -mag, mag)


def assert_same(got: np.ndarray, want: np.ndarray, what: str, ulp: int = 0, inputs=()) -> None:
    assert got.dtype == want.dtype, what
    if want.dtype.kind == "f":
        gnan, wnan = np.isnan(got), np.isnan(want)
        bad = gnan != wnan
        both = ~gnan & ~wnan
        if ulp == 0:
            bad |= both & (got.view(f"u{got.itemsize}") != want.view(f"u{want.itemsize}"))
        else:
            kg, kw = float_keys(got), float_keys(want)
            same_sign = (kg >= 0) == (kw >= 0)  # keys differ by < 2**63: exact int64 difference
            diff = np.where(same_sign, np.abs(kg - kw), np.abs(kg.astype(float)) + np.abs(kw.astype(float)))
            bad |= both & ((diff > ulp) | (np.isinf(got) != np.isinf(want)))
    else:
        bad = got != want
    if bad.any():
        idx = np.flatnonzero(bad)[:8]
        rows = [f"  in={[x[j] for x in inputs]} got={got[j]!r} want={want[j]!r}" for j in idx]
        pytest.fail(f"{what}: {bad.sum()} mismatches of {len(bad)}\n" + "\n".join(rows))


# --------------------------------------------------------------------------
# Loops of each op
# --------------------------------------------------------------------------

def numpy_loops(op: str) -> list[tuple[np.dtype, ...]]:
    """Distinct (inputs..., output) loops NumPy selects for our dtypes."""
    if op == "where":
        return [(np.dtype("?"), dt, dt, dt) for dt in DTYPES]
    if op == "cast":
        return list(itertools.product(DTYPES, repeat=2))
    ufunc = getattr(np, op, None)
    assert isinstance(ufunc, np.ufunc), f"no test reference for op {op!r}: teach this test about it"
    loops = {}
    for combo in itertools.product(DTYPES, repeat=ufunc.nin):
        try:
            r = ufunc.resolve_dtypes(combo + (None,))
        except (TypeError, ValueError, np.exceptions.DTypePromotionError):
            continue
        loops[tuple(d.str for d in r)] = tuple(r)
    assert loops, op
    return list(loops.values())


def reference(op: str, inputs: list[np.ndarray], out_dt: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "where":
            return np.where(*inputs)
        if op == "cast":
            return inputs[0].astype(out_dt)
        return getattr(np, op)(*inputs, dtype=None).astype(out_dt, copy=False)


def power_reference(inputs: list[np.ndarray], loop) -> np.ndarray:
    """Integer power where NumPy raises for negative exponents: our documented rule."""
    x, e = inputs
    if loop[1].kind != "i":
        return reference("power", inputs, loop[-1])
    neg = e < 0
    want = reference("power", [x, np.where(neg, 0, e).astype(e.dtype)], loop[-1])
    rule = np.where(x == 1, 1, np.where(x == -1, np.where(e % 2 == 1, -1, 1), 0)).astype(x.dtype)
    return np.where(neg, rule, want)


def tolerance(op: str, out_dt: np.dtype) -> int:
    if op in MATH_OPS and out_dt.kind == "f":
        return MATH_ULP[out_dt]
    return 0


@pytest.mark.parametrize("op", LOWERED)
def test_op_matches_numpy(op: str, jit: CpuJit) -> None:
    loops = numpy_loops(op)
    module = ir.Module(name=op)
    names = []
    for k, loop in enumerate(loops):
        in_dts = list(loop[:-1])
        name = f"k{k}"
        add_kernel(module, name, op_body(op, in_dts, loop), in_dts, loop[-1])
        names.append(name)
    addrs = jit.compile(str(module), names)
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    for name, loop in zip(names, loops):
        *in_dts, out_dt = loop
        inputs = [cast_inputs(in_dts[0], rng)] if op == "cast" else make_inputs(in_dts, rng)
        got = run_kernel(addrs[name], inputs, out_dt)
        want = power_reference(inputs, loop) if op == "power" else reference(op, inputs, out_dt)
        if op == "cast":  # out-of-range float -> int is platform dependent (see cast_expected)
            ok = cast_expected(inputs[0], out_dt)[1]
            got, want, inputs = got[ok], want[ok], [x[ok] for x in inputs]
        assert_same(got, want, f"{op}{tuple(d.name for d in loop)}", tolerance(op, out_dt), inputs)


# Ops whose mixed-dtype inputs exercise the resolve_dtypes + cast path: the
# kernel loads the original dtypes and casts as NumPy's type resolution says
# (e.g. exp(int8) runs the float16 loop, square(bool) the int8 one).
MIXED_OPS = ["add", "less", "maximum", "remainder", "square", "reciprocal", "sign", "negative", "absolute", "exp", "sqrt", "rint", "floor",
             "logical_not", "isnan", "invert"]


@pytest.mark.parametrize("op", MIXED_OPS)
def test_mixed_inputs_through_casts(op: str, jit: CpuJit) -> None:
    ufunc = getattr(np, op)
    module = ir.Module(name=f"mixed_{op}")
    cases = []
    for combo in itertools.product(DTYPES, repeat=ufunc.nin):
        try:
            loop = tuple(ufunc.resolve_dtypes(combo + (None,)))
        except (TypeError, ValueError, np.exceptions.DTypePromotionError):
            continue
        name = f"k{len(cases)}"
        add_kernel(module, name, op_body(op, list(combo), loop), list(combo), loop[-1])
        cases.append((name, combo, loop))
    addrs = jit.compile(str(module), [c[0] for c in cases])
    rng = np.random.default_rng(7)
    for name, combo, loop in cases:
        inputs = make_inputs(list(combo), rng, n_random=128)
        got = run_kernel(addrs[name], inputs, loop[-1])
        want = reference(op, inputs, loop[-1])
        assert_same(got, want, f"{op}{tuple(d.name for d in combo)}", tolerance(op, loop[-1]), inputs)


def test_where_every_dtype_covered() -> None:
    assert "where" in scalar.lowered_ops()
    assert {loop[1] for loop in numpy_loops("where")} == set(DTYPES)


# --------------------------------------------------------------------------
# Specific traps called out in the design
# --------------------------------------------------------------------------

def _run_single(jit: CpuJit, op: str, loop, *arrays) -> np.ndarray:
    module = ir.Module(name=f"single_{op}")
    in_dts = list(loop[:-1])
    add_kernel(module, "k", op_body(op, in_dts, loop), in_dts, loop[-1])
    addr = jit.compile(str(module), ["k"])["k"]
    return run_kernel(addr, [np.asarray(a, d) for a, d in zip(arrays, in_dts)], loop[-1])


def test_signed_zero_max_min(jit: CpuJit) -> None:
    for dt in FLOATS:
        z, p = np.full(16, -0.0, dt), np.full(16, 0.0, dt)
        for op in ("maximum", "minimum", "fmax", "fmin"):
            for a, b in ((z, p), (p, z)):
                got = _run_single(jit, op, (dt, dt, dt), a, b)
                want = getattr(np, op)(a, b)
                assert (np.signbit(got) == np.signbit(want)).all(), (op, dt)


def test_integer_division_never_traps(jit: CpuJit) -> None:
    for dt in (np.dtype(c) for c in "bhil"):
        mn = np.iinfo(dt).min
        a, b = np.array([mn, mn, 5, -5], dt), np.array([-1, 0, 0, 0], dt)
        assert _run_single(jit, "floor_divide", (dt, dt, dt), a, b).tolist() == [mn, 0, 0, 0]
        assert _run_single(jit, "remainder", (dt, dt, dt), a, b).tolist() == [0, 0, 0, 0]


def test_integer_power_negative_exponent(jit: CpuJit) -> None:
    dt = np.dtype("i4")
    got = _run_single(jit, "power", (dt, dt, dt), [1, -1, -1, 2, 0, 7], [-5, -3, -4, -1, -2, 0])
    assert got.tolist() == [1, -1, 1, 0, 0, 1]


def test_unsupported_loops_raise() -> None:
    b = ir.IRBuilder(ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f").append_basic_block())
    one = scalar.constant(1, "?")
    bad = [("sign", ["?"], "?"), ("negative", ["?"], "?"), ("add", ["l", "L"], "l"),
           ("sqrt", ["i"], "i"), ("nonexistent_op", ["d"], "d"), ("add", ["i", "i"], "l")]
    for op, ins, out in bad:
        with pytest.raises(TypeError, match=op):
            scalar.lower_op(b, op, [one] * len(ins), [np.dtype(d) for d in ins], np.dtype(out), CpuMath())


def test_constants_are_exact(jit: CpuJit) -> None:
    cases = [(np.float64, [-0.0, np.nan, np.inf, -np.inf, 0.1, 5e-324, 1.7976931348623157e308]),
             (np.float32, [-0.0, np.float32(0.1), np.float32(1e-45), np.inf]),
             (np.float16, [-0.0, np.float16(0.1), np.float16(6e-8), 65504.0, -np.inf]),
             (np.uint64, [2**64 - 1, 2**63 + 12345]), (np.int64, [-2**63]), (np.int8, [-128, 255])]
    for t, values in cases:
        dt = np.dtype(t)
        module = ir.Module(name="consts")
        for k, v in enumerate(values):
            add_kernel(module, f"c{k}", lambda b, vals, v=v: scalar.constant(v, dt), [], dt)
        addrs = jit.compile(str(module), [f"c{k}" for k in range(len(values))])
        for k, v in enumerate(values):
            got = run_kernel(addrs[f"c{k}"], [np.zeros(1)], dt)
            want = np.array([v % 2**(8 * dt.itemsize) if dt.kind in "iu" else v]).astype(f"u{dt.itemsize}" if dt.kind in "iu" else dt)
            assert got.view(f"u{dt.itemsize}")[0] == want.view(f"u{dt.itemsize}")[0], (dt, v)


# --------------------------------------------------------------------------
# Casts ("cast" is in OPS: test_op_matches_numpy runs every dtype pair with
# these inputs and compares with astype where NumPy is deterministic)
# --------------------------------------------------------------------------

def cast_inputs(src: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Edge values plus the rounding and range boundaries of every target type."""
    extra = []
    if src.kind == "f":
        extra = [-1.5, -2.5, -0.9, 0.9, 127.5, -128.9, 255.9, 256.0, 300.0, -129.0, 65519.0, 65520.0, 2.0**24 + 1,
                 2.0**31, -2.0**31, 2.0**32 - 1, 2.0**32, 2.0**53 + 1, 2.0**63, -2.0**63, 2.0**64, 1e19, -1e19, 3e9,
                 -3e9, 1e300, 1e-300, 2.0**-25, 2.0**-25 * (1 + 2.0**-40), 65519.99]
    with np.errstate(all="ignore"):
        vals = np.concatenate([edge_values(src), np.array(extra).astype(src), random_values(src, 600, rng)])
        if src.kind in "iu":
            info = np.iinfo(src)
            near = np.array([2**24 - 1, 2**24 + 1, 2**53 + 1, 2**63 + 2**39 + 1, 65519, 65520], dtype=object)
            near = np.array([int(v) % 2**(8 * src.itemsize) for v in near], f"u{src.itemsize}").view(src)
            vals = np.concatenate([vals, near, np.array([info.min, info.max], src)])
    return pad64([vals])[0]


def cast_expected(x: np.ndarray, dst: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's astype and the mask of elements where it is deterministic."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = x.astype(dst)
    ok = np.ones(len(x), bool)
    if x.dtype.kind == "f" and dst.kind in "iu":
        xf = x.astype(np.float64)
        if not X86:  # only in-range conversions are portable
            info = np.iinfo(dst)
            ok = np.isfinite(xf) & (np.trunc(xf) >= info.min) & (np.trunc(xf) <= info.max)
        elif dst == np.dtype("u4"):  # NumPy is position dependent beyond this range
            ok = (xf > -2.0**31) & (xf < 2.0**32)
    return want, ok


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------

def add_reduce_kernel(module: ir.Module, name: str, op: str, dt: np.dtype) -> np.dtype:
    """void name(ptr x, ptr out, i64 n): out[0] = sequential reduction of x[:n]."""
    i8p, i64 = ir.IntType(8).as_pointer(), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p, i64]), name)
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    reducer = OPS[op].reducer
    init = reducer.identity(dt)
    b.branch(loop)
    b.position_at_end(loop)
    i, acc = b.phi(i64), b.phi(init.type)
    i.add_incoming(ir.Constant(i64, 0), entry)
    acc.add_incoming(init, entry)
    x = scalar.load_value(b, _ptr(b, fn.args[0], dt, i), dt)
    acc2 = reducer.combine(b, acc, x, dt, reassociate=False)
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    acc.add_incoming(acc2, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[2]), loop, done)
    b.position_at_end(done)
    out_dt = np.dtype("?") if op in ("any", "all") else dt
    scalar.store_value(b, acc2, _ptr(b, fn.args[1], out_dt, ir.Constant(i64, 0)), out_dt)
    b.ret_void()
    return out_dt


REDUCE_REF = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
              "any": np.logical_or, "all": np.logical_and}


def test_reductions(jit: CpuJit) -> None:
    rng = np.random.default_rng(11)
    module = ir.Module(name="reduce")
    cases = []
    for op in REDUCE_REF:
        for dt in DTYPES:  # bool sum/prod are logical or/and, like np.add/np.multiply
            name = f"r_{op}_{dt.char}"
            out_dt = add_reduce_kernel(module, name, op, dt)
            cases.append((name, op, dt, out_dt))
    addrs = jit.compile(str(module), [c[0] for c in cases])
    for name, op, dt, out_dt in cases:
        samples = [random_values(dt, 50, rng), edge_values(dt)]
        if dt.kind == "f":
            nan_mid = random_values(dt, 9, rng)
            nan_mid[4] = np.nan
            samples += [nan_mid, np.array([-0.0], dt), np.array([1.0, np.nan, -np.inf], dt)]
        for x in samples:
            out = np.zeros(1, out_dt)
            ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addrs[name])(
                x.ctypes.data, out.ctypes.data, len(x))
            with np.errstate(all="ignore"):
                if op in ("any", "all"):
                    want = np.array([REDUCE_REF[op].reduce(x.astype(bool))])
                else:  # accumulate is strictly sequential, like this kernel, which starts
                    # from the reducer's identity (+0.0 for sums: np.sum([-0.0]) is +0.0)
                    start = np.array([OPS[op].reducer.start(dt)], dtype=dt)
                    want = REDUCE_REF[op].accumulate(np.concatenate([start, x]), dtype=dt)[-1:]
            assert_same(out, want.astype(out_dt), f"reduce {op} {dt} {x}")


def test_reduce_max_propagates_nan_like_numpy(jit: CpuJit) -> None:
    module = ir.Module(name="reduce_nan")
    for dt in FLOATS:
        add_reduce_kernel(module, f"max_{dt.char}", "max", dt)
        add_reduce_kernel(module, f"min_{dt.char}", "min", dt)
    names = [f"{op}_{dt.char}" for dt in FLOATS for op in ("max", "min")]
    addrs = jit.compile(str(module), names)
    for dt in FLOATS:
        for x in ([np.nan, 1.0, 2.0], [1.0, 2.0, np.nan], [1.0, np.nan, 3.0], [-np.inf, -np.inf]):
            x = np.array(x, dt)
            for op, uf in (("max", np.maximum), ("min", np.minimum)):
                out = np.zeros(1, dt)
                ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addrs[f"{op}_{dt.char}"])(
                    x.ctypes.data, out.ctypes.data, len(x))
                want = uf.reduce(x)
                assert np.isnan(out[0]) == np.isnan(want) and (np.isnan(want) or out[0] == want), (op, dt, x)


def test_bad_ir_raises_instead_of_aborting(jit: CpuJit) -> None:
    with pytest.raises(JitError, match="parse"):
        jit.compile("define void @f() {\n  ret i32 0\n}\n", ["f"])
    with pytest.raises(JitError):
        jit.compile("define i32 @g(i32 %x) {\n  %y = add i32 %x, %z\n  ret i32 %y\n}\n", ["g"])


# Domains for the dense accuracy check: (low, high) of the first operand.
MATH_DOMAINS = {
    "exp": (-87, 88), "exp2": (-126, 127), "expm1": (-20, 88), "log": (1e-30, 1e30), "log2": (1e-30, 1e30),
    "log10": (1e-30, 1e30), "log1p": (-0.99, 1e10), "sin": (-100, 100), "cos": (-100, 100), "tan": (-10, 10),
    "arcsin": (-1, 1), "arccos": (-1, 1), "arctan": (-1e4, 1e4), "sinh": (-88, 88), "cosh": (-88, 88),
    "tanh": (-10, 10), "arcsinh": (-1e10, 1e10), "arccosh": (1, 1e10), "arctanh": (-1, 1), "cbrt": (-1e30, 1e30),
    "power": (0, 50), "hypot": (-1e10, 1e10), "arctan2": (-10, 10),
}


def _sample(lo: float, hi: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform on short ranges, log-uniform magnitudes on wide ones."""
    if hi - lo <= 1000:
        return rng.uniform(lo, hi, n)
    lo_mag = np.log(lo) if lo > 0 else -10.0
    mags = np.exp(rng.uniform(lo_mag, np.log(hi), n))
    return mags if lo >= 0 else mags * rng.choice([-1.0, 1.0], n)


@pytest.mark.parametrize("dt", [np.dtype("f"), np.dtype("d")], ids=["float32", "float64"])
def test_math_accuracy(dt: np.dtype, jit: CpuJit) -> None:
    """Dense check: within 4 ulp of the correctly rounded result (a float64 or
    long double evaluation), the bound glibc documents for libmvec."""
    assert set(MATH_DOMAINS) == set(MATH_OPS), "add a domain for the new math op"
    module = ir.Module(name=f"accuracy_{dt.name}")
    for op in MATH_DOMAINS:
        nin = getattr(np, op).nin
        add_kernel(module, f"k_{op}", op_body(op, [dt] * nin, (dt,) * (nin + 1)), [dt] * nin, dt)
    addrs = jit.compile(str(module), [f"k_{op}" for op in MATH_DOMAINS])
    rng = np.random.default_rng(5)
    wide = np.float64 if dt.itemsize == 4 else np.longdouble
    for op, (lo, hi) in MATH_DOMAINS.items():
        nin = getattr(np, op).nin
        inputs = [_sample(lo, hi, 100_000, rng).astype(dt)]
        if nin == 2:
            second = rng.uniform(-3, 3, 100_000) if op == "power" else _sample(lo, hi, 100_000, rng)
            inputs.append(second.astype(dt))
        got = run_kernel(addrs[f"k_{op}"], inputs, dt)
        with np.errstate(all="ignore"):
            exact = getattr(np, op)(*[x.astype(wide) for x in inputs]).astype(dt)
        finite = np.isfinite(exact)
        assert_same(got[finite], exact[finite], f"{op} {dt} vs correctly rounded", 4, [x[finite] for x in inputs])


# --------------------------------------------------------------------------
# Target independence: every op and cast must lower on NVPTX too
# --------------------------------------------------------------------------

class _ExternMath:
    """Stand-in for the GPU MathLib: declares __nv_* externs like libdevice would."""

    def call(self, b, name, args, dtype):
        sym = f"__nv_{name}{'f' if np.dtype(dtype).itemsize == 4 else ''}"
        fn = b.module.globals.get(sym) or ir.Function(b.module, ir.FunctionType(args[0].type, [a.type for a in args]), sym)
        return b.call(fn, args)


def emit_nvptx() -> str:
    """PTX of every op loop, casts included (run in a child: LLVM aborts on unsupported IR)."""
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = ir.Module(name="nvptx")
    for op in LOWERED:
        for k, loop in enumerate(numpy_loops(op)):
            body = lambda b, v, op=op, loop=loop: scalar.lower_op(b, op, v, list(loop[:-1]), loop[-1], _ExternMath())
            add_kernel(module, f"{op}_{k}", body, list(loop[:-1]), loop[-1], loop=False)
    tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu="sm_90", features="+ptx80", opt=3)
    mod = llvm.parse_assembly(str(module))
    mod.triple, mod.data_layout = "nvptx64-nvidia-cuda", str(tm.target_data)
    mod.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


def nvptx_externs() -> list[str]:
    """Names of the external functions the PTX calls (printed by the child)."""
    import re
    return sorted(set(re.findall(r"^\.extern \.func.*?(\w+)\s*$", emit_nvptx(), re.M)))


def test_lowers_on_nvptx() -> None:
    code = "import sys; sys.path.insert(0, sys.argv[1]); import test_scalar_lowering as t; print(*t.nvptx_externs())"
    proc = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__))],
                          capture_output=True, text=True)
    if "no available targets" in proc.stderr.lower():
        pytest.skip("llvmlite built without NVPTX")
    assert proc.returncode == 0, proc.stderr[-3000:]
    externs = proc.stdout.split()
    assert externs and all(name.startswith("__nv_") for name in externs), externs
