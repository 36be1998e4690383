"""Scalar lowering, as the kernel code generator sees it: one op on one lane.

The kernel codegen loads operands (``load_value``), converts them to the op's input dtypes
(``cast``), applies ``lower_op`` and stores the result (``store_value``). ``lower_op`` checks
that the dtypes are exactly the loop NumPy resolves and calls the op's emitter from the
registry (``OpSpec.lower``, beside the op in ``tracearray/ops``); the IR helpers come from
``tracearray.ops.ir``. Reductions accumulate through their ``Reducer`` (``ops.reductions``).
"""
from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from ..ops import OPS, Kind
from ..ops.ir import (BOOL, MathLib, ScalarCtx, cast, constant, kind_of, llvm_type, load_value,
                      memory_type, store_value)

__all__ = ["lower_op", "cast", "constant", "llvm_type", "memory_type", "load_value",
           "store_value", "MathLib", "lowered_ops"]


def lowered_ops() -> frozenset[str]:
    """Elementwise ops with an emitter (a meta-test checks every elementwise op has one)."""
    return frozenset(n for n, s in OPS.items() if s.kind is Kind.ELEMENTWISE and s.lower)


@functools.lru_cache(maxsize=None)
def _numpy_loop(op: str, in_dtypes: tuple[np.dtype, ...]) -> tuple[np.dtype, ...] | None:
    """The (inputs..., output) loop NumPy selects for these inputs, or None."""
    spec = OPS[op]
    if op == "where":
        if len(in_dtypes) == 3 and in_dtypes[0] == BOOL and in_dtypes[1] == in_dtypes[2]:
            return in_dtypes + (in_dtypes[1],)
        return None
    ufunc = spec.ufunc
    if ufunc is None:   # a primitive that is part of a ufunc (frexp_mantissa): its rules
        try:
            return in_dtypes + (np.dtype(spec.dtype_rule(list(in_dtypes), {})),)
        except (TypeError, ValueError):
            return None
    if ufunc.nin != len(in_dtypes):
        return None
    try:
        return tuple(ufunc.resolve_dtypes(in_dtypes + (None,) * ufunc.nout))
    except (TypeError, ValueError, np.exceptions.DTypePromotionError):
        return None


def _has_loop(op: str, in_dtypes: tuple[np.dtype, ...], out: np.dtype) -> bool:
    if op == "cast":  # astype exists between every pair of supported dtypes
        return len(in_dtypes) == 1
    if op == "bitcast":
        from ..ops.elementwise import bitcast_allowed
        return len(in_dtypes) == 1 and bitcast_allowed(in_dtypes[0], out)
    return _numpy_loop(op, in_dtypes) == in_dtypes + (out,)


def lower_op(b: ir.IRBuilder, op: str, args: list[ir.Value], in_dtypes: list[np.dtype],
             out_dtype: np.dtype, math: MathLib) -> ir.Value:
    """Emit one elementwise op on scalars already in the loop's input dtypes.

    ``in_dtypes``/``out_dtype`` must be exactly the loop NumPy resolves for them
    (``np.<op>.resolve_dtypes``); anything else raises TypeError. ``"cast"`` (one operand,
    any out_dtype) is ``cast`` under the op interface.
    """
    dts = tuple(np.dtype(d) for d in in_dtypes)
    out = np.dtype(out_dtype)
    desc = f"{op}({', '.join(str(d) for d in dts)}) -> {out}"
    spec = OPS.get(op)
    if spec is None or spec.lower is None:
        raise TypeError(f"tracearray: unknown elementwise op {desc}")
    for d in dts + (out,):
        kind_of(d)
    if not _has_loop(op, dts, out):
        raise TypeError(f"tracearray: NumPy has no loop {desc}")
    if len(args) != len(dts):
        raise TypeError(f"tracearray: {desc} takes {len(dts)} operands, got {len(args)}")
    return spec.lower(ScalarCtx(b, list(args), list(dts), out, math))
