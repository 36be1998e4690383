"""Host math library: libm calls, vectorised through glibc's libmvec when possible.

``CpuMath`` implements ``tracearray.codegen.scalar.MathLib`` by calling the C
library (``expf``, ``exp``, ``atan2f``, ...).  The calls are declared
``nounwind readnone`` (we never read errno) so LLVM may hoist, CSE and
vectorise them.

Vector math (why and how)
-------------------------
LLVM turns a vectorised ``expf`` into eight scalar calls unless it knows a
vector variant.  glibc's libmvec provides them (``_ZGVdN8v_expf`` = AVX2, 8
lanes) and LLVM's loop vectoriser uses them when

1. the scalar declaration carries the string attribute
   ``"vector-function-abi-variant"="_ZGV_LLVM_N8v_expf(_ZGVdN8v_expf),..."``, and
2. the vector function is declared in the module and listed in
   ``@llvm.compiler.used`` (otherwise O3 deletes the unused declaration before
   the vectoriser runs).

llvmlite.ir cannot print string attributes or build ``llvm.compiler.used``
incrementally, so this is a text rewrite of the finished module,
``apply_vector_abi``, which ``tracearray.cpu.jit`` applies to every module it
compiles.  The rewrite replaces the libm symbols' declarations (whatever built
them) by wrappers ``ta_vm_<f>`` that call one vector variant on the argument
in every lane and carry the mapping to that variant, and points the calls at
them: vector lanes and a loop's scalar remainder then compute alike (see
``apply_vector_abi``); it is a no-op when
the module has no such calls, when libmvec is unavailable (non-glibc, or not
x86-64), or when the module already defines ``@llvm.compiler.used``.
Variants are offered only for ISAs the host supports (b = SSE, c = AVX,
d = AVX2, e = AVX-512) and only if the symbol resolves in the process after
``libmvec.so.1`` has been loaded.
"""

from __future__ import annotations

import re
import sys
import threading

import numpy as np

from .. import forksafe
from ..ops import MATH
from . import fastmath

# NumPy name -> (float32 symbol, float64 symbol): the C99 libm functions of the op registry
# (``OpSpec.math``).
_LIBM: dict[str, tuple[str, str]] = {name: fn.libm for name, fn in MATH.items()}
_BINARY = frozenset(name for name, fn in MATH.items() if fn.nargs == 2)

# libmvec ISA letter -> (host feature needed, lanes for float, lanes for double).
_ISAS = (("b", "sse4.1", 4, 2), ("c", "avx", 8, 4), ("d", "avx2", 8, 4), ("e", "avx512f", 16, 8))

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

# (op, dtype) -> an inline sequence that replaces the libm call (fastmath.py says why each
# is faster and as accurate as the op's accuracy family allows).
_INLINE = {("tanh", _F32): fastmath.tanh_f32, ("exp", _F32): fastmath.exp_f32}


class CpuMath:
    """MathLib for the host CPU (see module docstring for the vector path); the functions of
    ``_INLINE`` are emitted inline instead (``fastmath.py``)."""

    def call(self, b, name: str, args: list, dtype: np.dtype):   # (llvmlite.ir values)
        from llvmlite import ir
        dt = np.dtype(dtype)
        if name not in _LIBM or dt not in (_F32, _F64):
            raise TypeError(f"tracearray: CpuMath has no {name} for {dt}")
        nargs = 2 if name in _BINARY else 1
        if len(args) != nargs:
            raise TypeError(f"tracearray: {name} takes {nargs} arguments, got {len(args)}")
        inline = _INLINE.get((name, dt))
        if inline is not None:
            return inline(b, *args)
        symbol = _LIBM[name][dt == _F64]
        ty = ir.FloatType() if dt == _F32 else ir.DoubleType()
        fnty = ir.FunctionType(ty, [ty] * nargs)
        fn = b.module.globals.get(symbol)
        if fn is None:
            fn = ir.Function(b.module, fnty, symbol)
            fn.attributes.add("nounwind")
            fn.attributes.add("readnone")
        elif not isinstance(fn, ir.Function) or fn.ftype != fnty:
            raise TypeError(f"tracearray: the module defines {symbol!r}, which clashes with the libm function")
        return b.call(fn, args)


# --------------------------------------------------------------------------
# libmvec discovery
# --------------------------------------------------------------------------

_mvec_lock = threading.Lock()
_mvec_loaded: bool | None = None
# LLVM's dynamic-library registry is locked while a library loads: wait for it at fork (rank:
# after the JIT's locks, which may be held around it).
forksafe.wait_at_fork(sys.modules[__name__], "_mvec_lock", 20)


def _load_libmvec() -> bool:
    global _mvec_loaded
    with _mvec_lock:
        if _mvec_loaded is None:
            import llvmlite.binding as llvm
            try:
                llvm.load_library_permanently("libmvec.so.1")
                _mvec_loaded = True
            except RuntimeError:  # not glibc, or glibc without libmvec
                _mvec_loaded = False
        return _mvec_loaded


def host_vector_variants(features: str, triple: str) -> dict[str, list[tuple[int, str]]]:
    """Scalar libm symbol -> [(lanes, libmvec symbol)] usable on this host.

    ``features`` is LLVM's host feature string (``+avx2,-avx512f,...``).  When
    two ISAs give the same lane count the newer one wins (AVX2 over AVX).
    """
    if not triple.startswith("x86_64") or "linux" not in triple or not _load_libmvec():
        return {}
    import llvmlite.binding as llvm
    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    result: dict[str, list[tuple[int, str]]] = {}
    for name, symbols in _LIBM.items():
        params = "vv" if name in _BINARY else "v"
        for symbol, is_double in ((symbols[0], False), (symbols[1], True)):
            by_lanes: dict[int, str] = {}
            for isa, feature, lanes_f, lanes_d in _ISAS:
                lanes = lanes_d if is_double else lanes_f
                vector = f"_ZGV{isa}N{lanes}{params}_{symbol}"
                if feature in enabled and llvm.address_of_symbol(vector):
                    by_lanes[lanes] = vector
            if by_lanes:
                result[symbol] = sorted(by_lanes.items())
    return result


# --------------------------------------------------------------------------
# Module rewrite
# --------------------------------------------------------------------------

_DECLARE = re.compile(
    r'^declare\s+(?P<ret>float|double)\s+@"?(?P<name>[A-Za-z0-9_]+)"?\((?P<params>[^)]*)\)[^\n]*$',
    re.MULTILINE,
)


def _one_variant(choices: list[tuple[int, str]]) -> tuple[int, str]:
    """The vector variant a function uses everywhere: 8 lanes where the host has them
    (AVX2's floats, AVX-512's doubles), else the widest. One variant, because libmvec's
    versions for different ISAs round differently (2026-12-06, 2^20 random inputs each:
    SSE's 4-lane sinf differs from AVX2's and AVX-512's in 100,904 of them; AVX2's and
    AVX-512's asinf, tanhf, atanf, expm1f, asin, tanh, log1p, cbrt, log differ too), and a
    loop's main part, vectorised epilogue and remainder each took their own. Speed: level
    with offering every variant (interleaved in one process, ms: haversine 3.08 vs 3.01,
    black_scholes 4.47 vs 4.51, gelu_tanh 1.24 vs 1.22, softmax 1.44 vs 1.46); offering only
    the 4-lane double variant made a float64 exp loop 25 % slower."""
    for lanes, vector in choices:
        if lanes == 8:
            return lanes, vector
    return choices[-1]


def apply_vector_abi(module_text: str, variants: dict[str, list[tuple[int, str]]]) -> str:
    """Route the module's libm calls through libmvec (see module doc).

    Every call of a libm function ``f`` with a vector variant becomes a call of
    ``ta_vm_f``, defined here as that one variant applied to the argument in every lane,
    lane 0 returned, and mapped to the same variant for the vectoriser: a vectorised loop
    calls the variant on whole vectors and its scalar remainder (or an unvectorised loop)
    calls it through ``ta_vm_f``, so an element's result does not depend on where it lies.
    (Calling the scalar ``f`` in the remainder gave the same input two results an ulp
    apart: glibc's vector and scalar exp round differently; docs/testing.md bug 73.) One
    variant per function for the same reason: libmvec's SSE, AVX2 and AVX-512 versions may
    round differently too. ``noinline`` keeps the wrapper a call the vectoriser can widen."""
    if not variants or "@llvm.compiler.used" in module_text:
        return module_text
    used: list[str] = []
    extra: list[str] = []
    renamed: list[str] = []

    def rewrite(m: re.Match) -> str:
        name, ret = m.group("name"), m.group("ret")
        if name not in variants:
            return m.group(0)
        nargs = 1 if not m.group("params").strip() else m.group("params").count(",") + 1
        lanes, vector = _one_variant(variants[name])
        vty = f"<{lanes} x {ret}>"
        wrapper = f"ta_vm_{name}"
        renamed.append(name)
        extra.append(f'declare {vty} @"{vector}"({", ".join([vty] * nargs)}) nounwind memory(none)')
        used.append(f'ptr @"{vector}"')
        body = []
        for i in range(nargs):
            body.append(f"  %i{i} = insertelement {vty} poison, {ret} %a{i}, i64 0")
            body.append(f"  %v{i} = shufflevector {vty} %i{i}, {vty} poison, "
                        f"<{lanes} x i32> zeroinitializer")
        body.append(f'  %r = call {vty} @"{vector}"({", ".join(f"{vty} %v{i}" for i in range(nargs))})')
        body.append(f"  %s = extractelement {vty} %r, i64 0")
        body.append(f"  ret {ret} %s")
        mapping = f"_ZGV_LLVM_N{lanes}{'v' * nargs}_{wrapper}({vector})"
        extra.append(f'define internal {ret} @"{wrapper}"({", ".join(f"{ret} %a{i}" for i in range(nargs))}) '
                     f'noinline nounwind willreturn memory(none) '
                     f'"vector-function-abi-variant"="{mapping}" {{\n' + "\n".join(body) + "\n}")
        return ""       # (the wrapper replaces the declaration)

    text = _DECLARE.sub(rewrite, module_text)
    if not used:
        return module_text
    calls = "|".join(re.escape(name) for name in renamed)
    text = re.sub(rf'@"?({calls})"?(?=\()', r'@"ta_vm_\1"', text)
    extra.append(f'@llvm.compiler.used = appending global [{len(used)} x ptr] [{", ".join(used)}], '
                 f'section "llvm.metadata"')
    return text + "\n" + "\n".join(extra) + "\n"
