"""The counter-based random bit generator: ``philox``, Philox-4x32-10 (Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", SC'11; the generator of cuRAND and of JAX).

``philox(position, stream, key)`` (three uint64 operands, broadcast) is the first 64 bits
(words 0 and 1, word 0 low) of Philox-4x32-10 applied to the 128-bit counter
``(position, stream)`` (words ``position & 0xffffffff, position >> 32, stream & 0xffffffff,
stream >> 32``) under the 64-bit ``key`` (words low, high). It is a pure function of its
operands -- ten rounds of two 32x32->64 multiplications, xors and key additions -- so one
element's bits depend on nothing but its own counter: draws fuse into their consumers like any
elementwise op, every thread computes its own elements, and the CPU and the GPU produce the same
bits from the same integer instructions.

The distributions built on it (uniform floats, normals, integers, ...) are NumPy-level code in
``tracearray.trace.random``; ``philox_reference`` below is the NumPy implementation the evaluator
and the tests use (checked against Random123's known-answer vectors).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from . import rules
from .ir import ScalarCtx
from .spec import MEDIUM, Domain, Kind, OpSpec, register

ROUNDS = 10
# Random123's Philox-4x32 multipliers and Weyl key increments.
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85

U64 = np.dtype(np.uint64)
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter: tuple, key: tuple) -> tuple[np.ndarray, ...]:
    """All four output words (uint64 arrays holding 32-bit values) of Philox-4x32-10 for the
    counter words ``c0..c3`` and key words ``k0, k1`` (arrays or ints below 2**32)."""
    c0, c1, c2, c3 = (np.asarray(w, dtype=U64) & _MASK32 for w in counter)
    k0, k1 = (np.asarray(w, dtype=U64) & _MASK32 for w in key)
    with np.errstate(over="ignore"):
        for r in range(ROUNDS):
            if r:
                k0 = (k0 + np.uint64(W0)) & _MASK32
                k1 = (k1 + np.uint64(W1)) & _MASK32
            p0 = c0 * np.uint64(M0)
            p1 = c2 * np.uint64(M1)
            c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _MASK32,
                              (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _MASK32)
    return c0, c1, c2, c3


def philox_reference(position: np.ndarray, stream: np.ndarray, key: np.ndarray) -> np.ndarray:
    position, stream, key = np.broadcast_arrays(*(np.asarray(a, dtype=U64)
                                                  for a in (position, stream, key)))
    s32 = np.uint64(32)
    c0, c1, _c2, _c3 = philox4x32((position, position >> s32, stream, stream >> s32),
                                  (key, key >> s32))
    return np.asarray(c0 | (c1 << s32), dtype=U64)


def _philox(c: ScalarCtx) -> ir.Value:
    b = c.b
    i32, i64 = ir.IntType(32), ir.IntType(64)
    position, stream, key = c.args
    shift = ir.Constant(i64, 32)

    def words(v: ir.Value) -> tuple[ir.Value, ir.Value]:
        return b.trunc(v, i32), b.trunc(b.lshr(v, shift), i32)

    def mul_hi_lo(x: ir.Value, m: int) -> tuple[ir.Value, ir.Value]:
        p = b.mul(b.zext(x, i64), ir.Constant(i64, m))
        return b.trunc(b.lshr(p, shift), i32), b.trunc(p, i32)

    c0, c1 = words(position)
    c2, c3 = words(stream)
    k0, k1 = words(key)
    for r in range(ROUNDS):
        if r:
            k0 = b.add(k0, ir.Constant(i32, W0))
            k1 = b.add(k1, ir.Constant(i32, W1))
        hi0, lo0 = mul_hi_lo(c0, M0)
        hi1, lo1 = mul_hi_lo(c2, M1)
        c0, c1, c2, c3 = b.xor(b.xor(hi1, c1), k0), lo1, b.xor(b.xor(hi0, c3), k1), lo0
    return b.or_(b.zext(c0, i64), b.shl(b.zext(c1, i64), shift))


def _philox_dtype(dtypes, attrs) -> np.dtype:
    if any(np.dtype(d) != U64 for d in dtypes):
        raise TypeError("philox takes uint64 operands")
    return U64


# (cost MEDIUM, not transcendental: a draw read twice is recomputed, as the same element's bits,
# not stored -- ``x * x`` of a draw stays one kernel)
register(OpSpec("philox", Kind.ELEMENTWISE, philox_reference, rules.broadcast_shape,
                _philox_dtype, Domain((U64,)), arity=3, cost=MEDIUM, lower=_philox,
                operand_dtypes=lambda n: (U64, U64, U64),
                divergences=("random-bit-stream",)))
