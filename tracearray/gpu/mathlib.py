"""GPU math: NVIDIA's libdevice (``__nv_expf``, ``__nv_exp``, ...) as a ``scalar.MathLib``.

The calls are plain declarations here; ``ptx.compile_ptx`` links libdevice into the module
only when one is referenced. libdevice is within 2 ulp of the correctly rounded result for
every function used here (TOOLCHAIN.md, measured on an H200), which the comparator's
transcendental tolerance covers.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..ops import MATH

# NumPy name -> libdevice base name (float32 adds an "f": __nv_expf / __nv_exp), from the op
# registry (``OpSpec.math``).
LIBDEVICE_NAMES: dict[str, str] = {name: fn.libdevice for name, fn in MATH.items()}
_BINARY = frozenset(name for name, fn in MATH.items() if fn.nargs == 2)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def libdevice_symbol(name: str, dtype: np.dtype) -> str:
    base = LIBDEVICE_NAMES[name]
    return f"__nv_{base}f" if np.dtype(dtype) == _F32 else f"__nv_{base}"


class GpuMath:
    """MathLib for NVPTX: calls into libdevice."""

    def call(self, b: ir.IRBuilder, name: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value:
        dt = np.dtype(dtype)
        if name not in LIBDEVICE_NAMES or dt not in (_F32, _F64):
            raise TypeError(f"tracearray: GpuMath has no {name} for {dt}")
        nargs = 2 if name in _BINARY else 1
        if len(args) != nargs:
            raise TypeError(f"tracearray: {name} takes {nargs} arguments, got {len(args)}")
        symbol = libdevice_symbol(name, dt)
        ty = ir.FloatType() if dt == _F32 else ir.DoubleType()
        fnty = ir.FunctionType(ty, [ty] * nargs)
        fn = b.module.globals.get(symbol)
        if fn is None:
            fn = ir.Function(b.module, fnty, symbol)
            fn.attributes.add("nounwind")
            fn.attributes.add("readnone")
        return b.call(fn, args)
