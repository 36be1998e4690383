"""Accurate float summation inside kernels: pairwise combination of blocks, and compensated
(Kahan) accumulation where a loop cannot be blocked.

A sequential float sum of m terms has a worst-case error of (m-1)·eps·Σ|x| and, on data of
one sign, a typical error growing like sqrt(m)·eps; NumPy's ``add.reduce`` along a contiguous
axis sums pairwise (``pairwise_sum`` in numpy/_core/src/umath/loops_utils.h.src: blocks of
128 in 8 accumulators, halves combined recursively), so its error grows like log2(m)·eps.
A kernel here does as well without giving up vectorisation:

- ``PairwiseSum``: the reduction's innermost loop runs in blocks of ``SUM_BLOCK`` elements;
  a block is summed in the vectoriser's partial sums (``reassoc``: 16 lanes x 4 interleaved
  on AVX-512, so about 16 terms per lane), and each block sum goes onto a binary-counter
  stack that adds equal-sized neighbours as soon as both exist (cascade summation: the
  tree of ``pairwise_sum`` built left to right, 64 levels, for any number of blocks). The
  stack costs a few instructions per block, nothing per element. A loop over strided or
  gathered data vectorises into few lanes or none: its blocks are ``STRIDED_SUM_BLOCK``
  long, and a float32 sum's blocks and stack are float64.
- ``compensated_add``: Kahan's compensated step, where the terms come one at a time: a GPU
  thread adds its strided share, or its whole row; a column reduction adds blocks of
  ``COLUMN_SUM_BLOCK`` rows in order and each block's sums into the columns' totals. Its
  error is 2·eps·Σ|x| + O(m·eps²), whatever the number m of terms.

The worst-case depth this guarantees is ``tile.sum_rounding_depth``, which the comparator's
summation bound uses (testing/bounds.py).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..ops.ir import constant, intrinsic
from . import scalar

I64 = ir.IntType(64)
LEVELS = 64      # stack levels: 2^64 blocks


class PairwiseSum:
    """One float sum's block accumulator and block-sum stack. ``low`` is the KernelLowering
    emitting the function (its builder, allocas and loops); ``acc_dt`` the reduction's
    accumulator dtype; ``wide``: blocks and stack in float64 (a float32 sum whose loop reads
    strided or gathered data, which the vectoriser splits into few lanes if any -- there
    the wider adds cost little, and each block is exact).

    A block's sum is pushed when the next block starts (``begin_block``), so a row of one
    block (softmax's, l2_normalize's 128 elements) never touches the stack: ``total`` then
    returns the block accumulator itself."""

    def __init__(self, low, acc_dt: np.dtype, wide: bool = False):
        self.low, self.acc_dt = low, np.dtype(acc_dt)
        self.dt = np.dtype(np.float64) if wide else self.acc_dt
        ty = scalar.llvm_type(self.dt)
        self.block = low.alloca(ty)
        self.stack = low.alloca(ty, LEVELS)
        self.count = low.alloca(I64)     # blocks pushed so far
        self.pending = low.alloca(ir.IntType(1))   # the block accumulator holds a sum
        self.carry = low.alloca(ty)
        b = low.b
        b.store(constant(0, self.dt), self.block)
        b.store(low.const(0), self.count)
        b.store(ir.Constant(ir.IntType(1), 0), self.pending)

    def add(self, x: ir.Value, dt: np.dtype) -> None:
        """One term (of dtype ``dt``) into the block; ``reassoc`` lets the vectoriser keep
        several partial sums of the block."""
        b = self.low.b
        if np.dtype(dt) != self.dt:
            x = scalar.cast(b, x, dt, self.dt)
        new = b.fadd(b.load(self.block), x)
        new.flags.append("reassoc")
        b.store(new, self.block)

    def begin_block(self) -> None:
        """Before a block: the previous block's sum goes onto the stack."""
        b = self.low.b
        with b.if_then(b.load(self.pending)):
            self.push(b.load(self.block))
            b.store(constant(0, self.dt), self.block)
        b.store(ir.Constant(ir.IntType(1), 1), self.pending)

    def push(self, v: ir.Value) -> None:
        """Add the next block sum: it absorbs one stack level per trailing one bit of the
        count (the finished neighbours of its size), then takes the first free level."""
        low = self.low
        b = low.b
        c = b.load(self.count)
        ones = intrinsic(b, "llvm.cttz", [b.not_(c), ir.Constant(ir.IntType(1), 0)])
        b.store(v, self.carry)
        with low.loop(low.const(0), ones) as level:
            left = b.load(b.gep(self.stack, [level]))
            b.store(b.fadd(left, b.load(self.carry)), self.carry)
        b.store(b.load(self.carry), b.gep(self.stack, [ones]))
        b.store(b.add(c, low.const(1)), self.count)

    def total(self) -> ir.Value:
        """The sum of every block, in the accumulator dtype: the last block's (not pushed),
        then the occupied levels, smallest (latest) first; +0.0, the identity (as NumPy's),
        when there were no terms."""
        low = self.low
        b = low.b
        c = b.load(self.count)
        b.store(b.load(self.block), self.carry)
        used = b.sub(low.const(64), intrinsic(b, "llvm.ctlz", [c, ir.Constant(ir.IntType(1), 0)]))
        with low.loop(low.const(0), used) as level:
            bit = b.trunc(b.lshr(c, level), ir.IntType(1))
            with b.if_then(bit):
                part = b.load(b.gep(self.stack, [level]))
                b.store(b.fadd(part, b.load(self.carry)), self.carry)
        v = b.load(self.carry)
        return scalar.cast(b, v, self.dt, self.acc_dt) if self.dt != self.acc_dt else v


def compensated_add(b: ir.IRBuilder, s: ir.Value, c: ir.Value, x: ir.Value
                    ) -> tuple[ir.Value, ir.Value]:
    """Kahan's step ``s + x`` with the running compensation ``c`` (the negated low part lost
    so far): returns the new (s, c). IEEE arithmetic (no fast-math flags, so LLVM keeps the
    order). Once the sum is not finite (an inf operand, an overflow) the compensation is
    reset to 0, so inf stays inf rather than becoming inf - inf = NaN."""
    y = b.fsub(x, c)
    t = b.fadd(s, y)
    lost = b.fsub(b.fsub(t, s), y)
    finite = b.fcmp_ordered("<", intrinsic(b, "llvm.fabs", [t]),
                            ir.Constant(t.type, float("inf")))
    return t, b.select(finite, lost, ir.Constant(t.type, 0.0))
