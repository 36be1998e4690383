"""GPU drivers around the target-independent kernel body (``codegen.kernel.KernelLowering``).

The expressions, addresses, accumulators and stores are the CPU's (inherited); only the
parallel driver differs. Every kernel is a ``ptx_kernel`` entry taking one ``addrspace(1)
noalias`` pointer per buffer, then the kernel's 64-bit parameters by value (the layout of
``tile.layout``), then any extra 64-bit arguments; it stores the parameters in a local array
and calls the internal body, which LLVM inlines (SROA turns the array back into registers).

GPU strategies (``gpu_strategy``), all with 64-bit indices and grid-stride loops, so any grid
size is correct:

- ``map`` (geometries map and map2d): one element of the flattened space per thread;
- ``block_row`` (geometry row, long rows): a block per row (grid-stride over rows); threads
  stride along the row; each phase's partial results are combined by warp shuffles, then
  across warps through shared memory, in a fixed tree: every thread of the block gets the
  same value, which later phases and the full-space outputs read;
- ``warp_row`` (rows of THREAD_ROW_MAX < n <= WARP_ROW_MAX elements): the same phases with a
  warp per row (or per group of ``tile.gpu.WARP_ROW_GROUP`` rows, evaluated side by side),
  combined by shuffles alone (no barrier); a short row held in registers
  (``REGISTER_ROW_SLOTS``), a longer one swept once a phase with a row cache part per row;
- maps, row sweeps and the first stage of full reductions move the accesses that are
  contiguous along the innermost dimension as 16-byte vectors when the launch's alignment
  allows (``gpu/vector.py``; the scalar loop otherwise);
- ``thread_row`` (geometry col, and row with short rows): a thread per output element, which
  runs the CPU's phases over its row serially (column reductions: adjacent threads read
  adjacent columns, so loads coalesce);
- ``full``: two stages, no atomics. Stage 1: every block reduces a grid-stride share and
  writes one partial per block; stage 2 (``<name>_combine``, one block) combines the partials
  in a fixed tree and writes the outputs. For a given size, grid and alignment (16-byte
  aligned inputs take vector trips, whose terms a thread adds in the same order but whose
  threads own other positions) the result does not depend on thread timing;
- ``scan``: a thread per row, sequential along the scan axis; ``scan_tiled`` (a long axis,
  few rows: ``tile.ordered_in_parallel``): tiles scanned in parallel, then their totals,
  then the offsets added (three entries);
- ``scatter``: a thread per column of the dimensions that are not indexed, sequential along
  the index dimensions (repeated positions in NumPy's order); ``scatter_atomic``: an integer
  add/and/or/xor/max/min (exact in any order) as a thread per element with ``atomicrmw``;
  with long index dimensions, an assignment as ``scatter_last`` (the atomic max of the
  positions picks each target's last write) and any other ``ufunc.at`` as ``scatter_sorted``
  (``sorted_scatter.py``: a stable radix sort by target, then a thread per target);
- the multi-pass strategies share scratch arrays (``scratch_dtypes``) and launch their
  entries (``entry_names``) in order on the stream;
- float sums: a thread's own terms (its strided share of a row or of a full reduction, or
  its whole row) are added with Kahan's compensation (``codegen.summation``), then the
  threads' partials combine in the trees above: accurate whatever the share's length
  (warp_row's rows held in registers, a few terms a lane, are added in order);
- matmul: ``MatmulLowering``, 64x64 output tiles staged through shared memory, 4x4 per thread,
  with the consumer map kernel's expressions (bias, activation, ...) applied to the
  accumulators before the store.

Nothing here reads sizes except through ``Launch`` choices made by the runtime.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Sequence

import numpy as np
from llvmlite import ir

from ..codegen import scalar
from ..codegen.kernel import (KernelLowering, accumulator_dtype,
                              is_arg_reduction, is_float_sum, reducer, reduction_input_dtype)
from ..fuse.index import loaded_indices
from ..fuse.kexpr import KExpr, KLoad, KNested, KOp, KParam
from ..tile.geometry import Geometry
from .copy import COPY_MAX_RANK
from .mathlib import GpuMath
from ..tile import gpu as drivers
from ..tile.gpu import (MATMUL_PER_THREAD, MATMUL_THREADS, MATMUL_TILE, MAX_BLOCK,
                        MAX_WARPS, ROW_CACHE_ALIGN, ROW_STRATEGIES, SORT_N_EXTRA, WARP,
                        entry_names, gpu_strategy, scratch_dtypes)
from .sorted_scatter import SortedScatterMixin
from .vector import VectorPlan, VectorSweepMixin

I32 = ir.IntType(32)
I64 = ir.IntType(64)
# blocks per multiprocessor the row strategies ask ptxas to fit (registers budgeted to
# it); 0: ptxas's own budget
ROW_MIN_BLOCKS = 0
# block_row keeps a row's re-read inputs in dynamic shared memory when they take at most
# this many bytes, and the kernel's static shared arrays (block reductions) and they stay
# within the 48 KB a launch may use without opting in (``row_cache_limit``)
ROW_CACHE_MAX_BYTES = 40 << 10
SMEM_LAUNCH_LIMIT = 48 << 10
# L2 eviction priorities in block_row's vector sweeps (sm_80+; ``_Nvvm.l2_policy``), bits:
# 1: a row's loads from global memory (no row cache) evict_last where a later phase of the
# row reads the same elements again, evict_first at their last read; 2: the row's
# full-space stores evict_first. Only accesses that move with the row are hinted (gamma and
# beta keep the default). torch.compile's layernorm re-reads its rows from L2 under
# evict_last / evict_first; on the H100 (2026-12-06, sixth session, ms) re-reading from L2
# lost to the shared-memory row cache with hints (layernorm 2.49, rmsnorm 1.85, softmax
# 1.84) and without (1.78, 1.76, 1.75) against 1.55, 1.50, 1.54: the hinted accesses
# took 13-17 more registers (3 -> 2 blocks per multiprocessor). Hinted stores: level. Off.
# (cp.async under an evict_first policy raised CUDA_ERROR_ILLEGAL_INSTRUCTION there, with
# and without an explicit source size, although ptxas accepts it: not used.)
ROW_L2_HINTS = 0
# grid-stride loops run this many iterations per trip (``strided_loop``), and loops of
# vector trips this many trips (each of up to 16 bytes per access)
UNROLL = 4
# block_row's and full reductions' sweeps: scalar and vector trips. Registers are allocated
# for the largest of a kernel's paths, so the unrolled copies decide occupancy: unrolled 4
# times, softmax's and layernorm's rows took 95 and 120 registers (25 % occupancy on the
# H200, ncu 2026-12-02), twice 48 and 70
REDUCE_UNROLL = 2
VECTOR_UNROLL = 2
# warp_row's sweeps: a lane has at most WARP_ROW_MAX / 32 positions, so no unrolling (the
# unrolled copy costs registers: occupancy)
WARP_ROW_UNROLL = 1
# warp_row holds rows of at most 32 * slots elements in registers (``_warp_row_in_registers``),
# one code variant per entry, the fewest slots that fit chosen at run time. ptxas allocates
# registers for a kernel's largest variant: l2_normalize's kernel took 37 registers with
# (2, 4) (as many as the sweep alone), 53 with (2, 4, 8) and 72 with (8,) (sm_90, CUDA 13.0)
REGISTER_ROW_SLOTS = (2, 4)
# a map's trips per loop iteration: unrolled 4 times (scalar trips), maps ran 1.2-1.9x
# slower on the H200 (2026-12-01: a map's grid covers the array, so a thread has few trips)
MAP_UNROLL = 1
# chunks of 32 elements whose loads a scan_tiled warp issues before scanning the first
SCAN_BATCH = 8


class _Nvvm:
    """NVVM intrinsics on an IRBuilder: special registers, barrier, shuffles."""

    def __init__(self, module: ir.Module):
        self.module = module

    def _fn(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
        return fn

    def sreg(self, b: ir.IRBuilder, name: str) -> ir.Value:
        """tid.x, ntid.x, ctaid.x, nctaid.x (and .y/.z) as i64."""
        v = b.call(self._fn(f"llvm.nvvm.read.ptx.sreg.{name}", I32, []), [])
        return b.zext(v, I64)

    def barrier(self, b: ir.IRBuilder) -> None:
        b.call(self._fn("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32]),
               [ir.Constant(I32, 0)])

    def cp_async(self, b: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
        """``cp.async`` of ``nbytes`` (4, 8 or 16, both addresses aligned to it) from global
        to shared memory: issued without a register for the data (sm_80+)."""
        kind = "cg" if nbytes == 16 else "ca"   # cg (L2 only) exists for 16 bytes alone
        i8 = ir.IntType(8)
        fn = self._fn(f"llvm.nvvm.cp.async.{kind}.shared.global.{nbytes}", ir.VoidType(),
                      [i8.as_pointer(3), i8.as_pointer(1)])
        b.call(fn, [b.bitcast(dst, i8.as_pointer(3)), b.bitcast(src, i8.as_pointer(1))])

    # L2 eviction priorities (sm_80+). ``ld``/``st`` take one only as a 64-bit policy
    # operand (``.L2::cache_hint``; ptxas refuses ``.L2::evict_last`` on 16-byte loads),
    # which ``createpolicy`` makes; LLVM 22 has no intrinsic or metadata for either, so
    # they are inline PTX. The emulator (tests/gpu_emulator.py) reads them as plain
    # loads and stores.
    def l2_policy(self, b: ir.IRBuilder, priority: str) -> ir.Value:
        """A policy giving every line an access touches ``priority`` in L2 ("evict_last":
        kept while other lines go, for data read again soon; "evict_first": streaming)."""
        return b.asm(ir.FunctionType(I64, []),
                     f"createpolicy.fractional.L2::{priority}.b64 $0, 1.0;", "=l", [],
                     side_effect=False)

    def load_hinted(self, b: ir.IRBuilder, ptr: ir.Value, ty: ir.Type, policy: ir.Value
                    ) -> ir.Value:
        """A global load of ``ty`` (4, 8 or 16 bytes, ``ptr`` aligned to them) under an L2
        ``policy``: as 32-bit words, bitcast back."""
        words = _bits(ty) // 32
        wty = ir.LiteralStructType([I32] * words) if words > 1 else I32
        regs = ", ".join(f"${i}" for i in range(words))
        vec = f".v{words}" if words > 1 else ""
        out = f"{{{regs}}}" if words > 1 else regs
        v = b.asm(ir.FunctionType(wty, [I64, I64]),
                  f"ld.global.L2::cache_hint{vec}.b32 {out}, [${words}], ${words + 1};",
                  ",".join(["=r"] * words + ["l", "l"]), [b.ptrtoint(ptr, I64), policy],
                  side_effect=True)
        if words == 1:
            return b.bitcast(v, ty)
        vv = ir.Constant(ir.VectorType(I32, words), ir.Undefined)
        for i in range(words):
            vv = b.insert_element(vv, b.extract_value(v, i), ir.Constant(I32, i))
        return b.bitcast(vv, ty)

    def store_hinted(self, b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, policy: ir.Value
                     ) -> None:
        """A global store of ``value`` (4, 8 or 16 bytes) under an L2 ``policy``."""
        words = _bits(value.type) // 32
        if words > 1:
            wv = b.bitcast(value, ir.VectorType(I32, words))
            parts = [b.extract_element(wv, ir.Constant(I32, i)) for i in range(words)]
        else:
            parts = [b.bitcast(value, I32)]
        regs = ", ".join(f"${i + 1}" for i in range(words))
        vec = f".v{words}" if words > 1 else ""
        src = f"{{{regs}}}" if words > 1 else regs
        b.asm(ir.FunctionType(ir.VoidType(), [I64] + [I32] * words + [I64]),
              f"st.global.L2::cache_hint{vec}.b32 [$0], {src}, ${words + 1};",
              ",".join(["l"] + ["r"] * words + ["l"]),
              [b.ptrtoint(ptr, I64)] + parts + [policy], side_effect=True)

    def cp_async_wait_all(self, b: ir.IRBuilder) -> None:
        """Until this thread's ``cp.async`` copies are done and visible to it."""
        b.call(self._fn("llvm.nvvm.cp.async.wait.all", ir.VoidType(), []), [])

    def cp_async_commit(self, b: ir.IRBuilder) -> None:
        """This thread's ``cp.async`` copies since the last commit become one group."""
        b.call(self._fn("llvm.nvvm.cp.async.commit.group", ir.VoidType(), []), [])

    def cp_async_wait_group(self, b: ir.IRBuilder, pending: int) -> None:
        """Until at most ``pending`` of this thread's most recent committed groups are still
        in flight (every older group done and visible to it)."""
        b.call(self._fn("llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32]),
               [ir.Constant(I32, pending)])

    def shfl(self, b: ir.IRBuilder, mode: str, v: ir.Value, lane: ir.Value | int) -> ir.Value:
        """``shfl.sync.<mode>.b32`` over the full warp (mode: down, idx, bfly)."""
        c = 0 if mode == "up" else 31   # clamp: the whole warp is one segment
        lane = ir.Constant(I32, lane) if isinstance(lane, int) else lane
        fn = self._fn(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
        return b.call(fn, [ir.Constant(I32, -1), v, lane, ir.Constant(I32, c)])


def _bits(t: ir.Type) -> int:
    if isinstance(t, ir.VectorType):
        return t.count * _bits(t.element)
    if isinstance(t, ir.DoubleType):
        return 64
    if isinstance(t, ir.FloatType):
        return 32
    if isinstance(t, ir.HalfType):
        return 16
    return t.width


def _to_words(b: ir.IRBuilder, v: ir.Value) -> list[ir.Value]:
    """A scalar as one or two i32 words (for shuffles and shared memory)."""
    t = v.type
    if isinstance(t, ir.HalfType):
        return [b.zext(b.bitcast(v, ir.IntType(16)), I32)]
    if isinstance(t, ir.FloatType):
        return [b.bitcast(v, I32)]
    if isinstance(t, ir.DoubleType):
        v, t = b.bitcast(v, I64), I64
    if t.width < 32:
        return [b.zext(v, I32)]
    if t.width == 32:
        return [v]
    return [b.trunc(v, I32), b.trunc(b.lshr(v, ir.Constant(I64, 32)), I32)]


def _from_words(b: ir.IRBuilder, words: list[ir.Value], t: ir.Type) -> ir.Value:
    if isinstance(t, ir.HalfType):
        return b.bitcast(b.trunc(words[0], ir.IntType(16)), t)
    if isinstance(t, ir.FloatType):
        return b.bitcast(words[0], t)
    if isinstance(t, ir.DoubleType) or t.width == 64:
        lo, hi = b.zext(words[0], I64), b.zext(words[1], I64)
        v = b.or_(lo, b.shl(hi, ir.Constant(I64, 32)))
        return b.bitcast(v, t) if isinstance(t, ir.DoubleType) else v
    return words[0] if t.width == 32 else b.trunc(words[0], t)


class GpuLoweringMixin:
    """Block/thread indexing and block reductions for a ``KernelLowering``."""

    module: ir.Module
    b: ir.IRBuilder

    def _gpu_init(self) -> None:
        self.nv = _Nvvm(self.module)
        self._smem_vars: dict[str, ir.GlobalVariable] = {}

    def sreg(self, name: str) -> ir.Value:
        return self.nv.sreg(self.b, name)

    def thread_ids(self) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """(tid, ntid, ctaid, nctaid) along x, as i64."""
        return (self.sreg("tid.x"), self.sreg("ntid.x"), self.sreg("ctaid.x"),
                self.sreg("nctaid.x"))

    def global_ids(self) -> tuple[ir.Value, ir.Value]:
        """(global thread index, total threads of the grid)."""
        tid, ntid, ctaid, nctaid = self.thread_ids()
        return self.b.add(self.b.mul(ctaid, ntid), tid), self.b.mul(nctaid, ntid)

    def product(self, dims: Sequence[int]) -> ir.Value:
        n: ir.Value = self.const(1)
        for d in dims:
            n = self.b.mul(n, self.extent(d))
        return n

    def set_dims(self, p: ir.Value, dims: Sequence[int]) -> None:
        """Decompose a flattened index over ``dims`` (row-major) into loop variables."""
        if not dims:
            return
        for d, v in zip(dims, self.split(p, [self.extent(d) for d in dims])):
            self.loop_vars[d] = v

    def smem(self, name: str, ty: ir.Type, n: int) -> ir.Value:
        """Pointer to element 0 of a shared-memory array ``[n x ty]``."""
        gv = self._smem_vars.get(name)
        if gv is None:
            aty = ir.ArrayType(ty, n)
            gv = ir.GlobalVariable(self.module, aty, f"{self.name}_{name}", addrspace=3)
            gv.linkage = "internal"
            gv.initializer = ir.Constant(aty, ir.Undefined)
            gv.align = 16
            self._smem_vars[name] = gv
        return self.b.gep(gv, [ir.Constant(I32, 0), ir.Constant(I32, 0)])

    # -------------------------------------------------------------- reductions
    def identity(self, red) -> tuple[ir.Value, ir.Value | None]:
        acc, idx = self._new_acc(red)
        return self.b.load(acc), (self.b.load(idx) if idx is not None else None)

    def combine_partials(self, red, a: ir.Value, ai: ir.Value | None, x: ir.Value,
                         xi: ir.Value | None) -> tuple[ir.Value, ir.Value | None]:
        """Two partial results of ``red`` (in the accumulator dtype) into one. Arg-reductions
        break ties by the lower index and take the NaN of lower index (NumPy's first)."""
        op = red.op
        in_dt = reduction_input_dtype(red)
        if is_arg_reduction(op):
            return reducer(op).merge_indexed(self.b, a, ai, x, xi, in_dt)
        acc_dt = accumulator_dtype(op, in_dt)
        return self._combine(op, a, x, acc_dt, reassociate=False), None

    def warp_reduce(self, red, v: ir.Value, vi: ir.Value | None
                    ) -> tuple[ir.Value, ir.Value | None]:
        """Down-sweep tree over the warp: lane 0 ends with the warp's result."""
        b = self.b
        for off in (16, 8, 4, 2, 1):
            ov = _from_words(b, [self.nv.shfl(b, "down", w, off) for w in _to_words(b, v)],
                             v.type)
            oi = None
            if vi is not None:
                oi = _from_words(b, [self.nv.shfl(b, "down", w, off) for w in _to_words(b, vi)],
                                 I64)
            v, vi = self.combine_partials(red, v, vi, ov, oi)
        return v, vi

    def broadcast_lane0(self, v: ir.Value) -> ir.Value:
        b = self.b
        return _from_words(b, [self.nv.shfl(b, "idx", w, 0) for w in _to_words(b, v)], v.type)

    def block_reduce(self, j: int, red, v: ir.Value, vi: ir.Value | None, tid: ir.Value,
                     ntid: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        """Reduce over the block in a fixed tree; every thread returns the block's result.
        Every thread of the block must call this (it has barriers). Values of up to 32 bits
        go through warp shuffles, then one shared slot per warp; 64-bit values through a
        shared-memory tree (``block_reduce_tree``)."""
        if _bits(v.type) > 32:
            return self.block_reduce_tree(j, red, v, vi, tid, ntid)
        b = self.b
        lane = b.trunc(b.and_(tid, self.const(WARP - 1)), I32)
        warp = b.lshr(tid, self.const(5))
        nwarps = b.trunc(b.lshr(ntid, self.const(5)), I32)
        v, vi = self.warp_reduce(red, v, vi)
        words = _to_words(b, v)
        bufs = [self.smem(f"red{j}_w{k}", I32, MAX_WARPS) for k in range(len(words))]
        ibufs = []
        iwords = _to_words(b, vi) if vi is not None else []
        ibufs = [self.smem(f"red{j}_i{k}", I32, MAX_WARPS) for k in range(len(iwords))]
        with b.if_then(b.icmp_unsigned("==", lane, ir.Constant(I32, 0))):
            for buf, w in zip(bufs + ibufs, words + iwords):
                b.store(w, b.gep(buf, [warp]))
        self.nv.barrier(b)
        ident, ident_i = self.identity(red)
        present = b.icmp_unsigned("<", lane, nwarps)
        lane64 = b.zext(lane, I64)
        w = _from_words(b, [b.load(b.gep(buf, [lane64])) for buf in bufs], v.type)
        w = b.select(present, w, ident)
        wi = None
        if vi is not None:
            wi = _from_words(b, [b.load(b.gep(buf, [lane64])) for buf in ibufs], I64)
            wi = b.select(present, wi, ident_i)
        w, wi = self.warp_reduce(red, w, wi)
        w = self.broadcast_lane0(w)
        if wi is not None:
            wi = self.broadcast_lane0(wi)
        self.nv.barrier(b)   # the shared slots may be rewritten by the next reduction
        return w, wi

    def block_reduce_tree(self, j: int, red, v: ir.Value, vi: ir.Value | None, tid: ir.Value,
                          ntid: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        """Pairwise tree over one shared slot per thread (``ntid`` a power of two, at most
        ``MAX_BLOCK``): slot t
        takes slot t + s for s = ntid/2, ntid/4, ..., 1; every thread then reads slot 0."""
        b = self.b
        # One buffer for every reduction of the kernel (they run one after another and each
        # ends with a barrier); doubles use it through a bitcast pointer.
        buf = self.smem("tree", I64, MAX_BLOCK)
        if not isinstance(v.type, ir.IntType):
            buf = b.bitcast(buf, v.type.as_pointer(3))
        ibuf = self.smem("tree_i", I64, MAX_BLOCK) if vi is not None else None
        b.store(v, b.gep(buf, [tid]))
        if ibuf is not None:
            b.store(vi, b.gep(ibuf, [tid]))
        self.nv.barrier(b)
        step = self.alloca(I64)
        b.store(b.lshr(ntid, self.const(1)), step)
        head = self.fn.append_basic_block("tree.head")
        body = self.fn.append_basic_block("tree.body")
        done = self.fn.append_basic_block("tree.end")
        b.branch(head)
        b.position_at_end(head)
        s = b.load(step)
        b.cbranch(b.icmp_unsigned(">", s, self.const(0)), body, done)
        b.position_at_end(body)
        with b.if_then(b.icmp_unsigned("<", tid, s)):
            other = b.add(tid, s)
            a, x = b.load(b.gep(buf, [tid])), b.load(b.gep(buf, [other]))
            ai = b.load(b.gep(ibuf, [tid])) if ibuf is not None else None
            xi = b.load(b.gep(ibuf, [other])) if ibuf is not None else None
            r, ri = self.combine_partials(red, a, ai, x, xi)
            b.store(r, b.gep(buf, [tid]))
            if ibuf is not None:
                b.store(ri, b.gep(ibuf, [tid]))
        self.nv.barrier(b)
        b.store(b.lshr(s, self.const(1)), step)
        b.branch(head)
        b.position_at_end(done)
        w = b.load(b.gep(buf, [self.const(0)]))
        wi = b.load(b.gep(ibuf, [self.const(0)])) if ibuf is not None else None
        self.nv.barrier(b)   # the shared slots may be rewritten by the next reduction
        return w, wi

    # -------------------------------------------------------------- entry
    def emit_kernel(self, name: str, body: ir.Function, ptr_types: list[ir.Type],
                    n_params: int, n_extra: int) -> ir.Function:
        """``ptx_kernel`` entry: pointers, parameters by value, extras; calls ``body``."""
        fnty = ir.FunctionType(ir.VoidType(), ptr_types + [I64] * (n_params + n_extra))
        fn = ir.Function(self.module, fnty, name=name)
        fn.calling_convention = "ptx_kernel"
        for a in fn.args[:len(ptr_types)]:
            a.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        arr = b.alloca(ir.ArrayType(I64, max(n_params, 1)))
        np_ = len(ptr_types)
        for i in range(n_params):
            b.store(fn.args[np_ + i], b.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
        params = b.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
        b.call(body, list(fn.args[:np_]) + [params] + list(fn.args[np_ + n_params:]))
        b.ret_void()
        occupancy = self.launch_bounds()
        if occupancy is not None:   # .maxntid / .minnctapersm: ptxas budgets registers
            threads, blocks = occupancy
            for key, v in (("maxntidx", threads), ("minctasm", blocks)):
                self.module.add_named_metadata("nvvm.annotations",
                                               [fn, ir.MetaDataString(self.module, key),
                                                ir.Constant(I32, v)])
        return fn

    def launch_bounds(self) -> tuple[int, int] | None:
        """(threads per block at most, blocks per multiprocessor wanted) for the kernel's
        entries, or None: no bound (ptxas's default register budget)."""
        return None


class GpuKernelLowering(SortedScatterMixin, VectorSweepMixin, GpuLoweringMixin, KernelLowering):
    """A fused kernel (map / reduce / scan) for NVPTX."""

    def __init__(self, geometry: Geometry, name: str, strategy: str | None = None,
                 wide: bool = True, async_copy: bool = False):
        super().__init__(geometry, GpuMath(), name)
        self.strategy = strategy or gpu_strategy(geometry)
        self.wide = wide    # positions of the space may reach 2^31 (scratch arrays' width)
        # cp.async (sm_80+): block_row fills its row cache without registers (``_prefetch_row``)
        self.async_copy = async_copy
        self._prefetched: frozenset[int] = frozenset()
        self._gpu_init()
        self._row_cache: dict[int, ir.Value] = {}
        self._row_cache_var: ir.GlobalVariable | None = None
        self._row_cache_mode: str | None = None   # None | "write" | "read" (block_row)
        self._row_pos: ir.Value | None = None
        self._nesting = 0
        self._extra_args: list[ir.Value] = []
        # warp_row: rows a warp takes at a time, built into the code (the launch's block
        # follows this fact of the lowering, not the module constant: ``tile/bind.py``)
        self.rows_per_warp = max(1, drivers.WARP_ROW_GROUP) if self.strategy == "warp_row" \
            else 1
        self._vector_init()

    def launch_bounds(self) -> tuple[int, int] | None:
        if self.strategy in ROW_STRATEGIES and ROW_MIN_BLOCKS:
            return MAX_BLOCK if self.strategy == "block_row" else \
                drivers.warp_row_threads(self.rows_per_warp), \
                ROW_MIN_BLOCKS
        return None

    def buffer_dtypes(self) -> list[np.dtype]:
        dts = super().buffer_dtypes()
        k = self.kernel
        at = len(k.body.accesses) + len(k.stores)
        return dts[:at] + scratch_dtypes(self.strategy, k, self.wide) + dts[at:]

    def scratch_ptr(self, i: int) -> ir.Value:
        k = self.kernel
        return self.ptrs[len(k.body.accesses) + len(k.stores) + i]

    def lower(self) -> str:
        dts = self.buffer_dtypes()
        ptr_types = [scalar.memory_type(dt).as_pointer(1) for dt in dts]
        passes = {"scatter_last": (self._scatter_init, self._scatter_claim,
                                   self._scatter_write),
                  "scan_tiled": (self._scan_tiles, self._scan_totals, self._scan_offsets),
                  "scatter_sorted": self.sorted_scatter_passes()}
        if self.strategy in passes:
            # run-time arguments: scan_tiled's tile length, scatter_sorted's (N_EXTRA)
            n_extra = {"scan_tiled": 1, "scatter_sorted": SORT_N_EXTRA}.get(self.strategy, 0)
            for entry, emit in zip(entry_names(self.strategy, self.name),
                                   passes[self.strategy]):
                body = self._internal_function(f"{entry}_body", ptr_types, [I64] * n_extra)
                self._begin_function(body, len(dts))
                self._extra_args = list(body.args[len(dts) + 1:])
                emit()
                self._end_function()
                self.emit_kernel(entry, body, ptr_types, self.layout.size, n_extra)
            return str(self.module)
        n_extra = 1 if self.strategy in ROW_STRATEGIES else 0    # the row cache's flag
        body = self._internal_function(f"{self.name}_body", ptr_types, [I64] * n_extra)
        self._begin_function(body, len(dts))
        self._extra_args = list(body.args[len(dts) + 1:])
        {"map": self._map, "block_row": self._block_row, "warp_row": self._warp_row,
         "block_rows": self._block_rows, "thread_row": self._thread_row,
         "full": self._full_stage1, "scan": self._scan,
         "scatter": self._scatter, "scatter_atomic": self._scatter_atomic}[self.strategy]()
        self._end_function()
        self.emit_kernel(self.name, body, ptr_types, self.layout.size, n_extra)
        if self.strategy == "full":
            comb = self._internal_function(f"{self.name}_combine_body", ptr_types, [I64])
            self._begin_function(comb, len(dts))
            self._full_stage2(comb.args[len(dts) + 1])
            self._end_function()
            self.emit_kernel(f"{self.name}_combine", comb, ptr_types, self.layout.size, 1)
        return str(self.module)

    # -------------------------------------------------------------- strategies
    def strided_loop(self, start: ir.Value, stop: ir.Value, step: ir.Value,
                     body: Callable[[ir.Value], None], unroll: int | None = None) -> None:
        """``for p in range(start, stop, step): body(p)`` with UNROLL iterations per trip
        while that many remain, then one at a time: the unrolled trip is straight-line code
        whose loads do not depend on each other, so a thread has UNROLL loads in flight
        instead of one (a grid-stride loop is otherwise latency-bound: a thread's next load
        waits for the last one). Iterations run in the same order, so results are the
        same. ``unroll=1``: a plain loop; the H200 (2026-12-01, benchmarks/gpu.py, UNROLL 4
        against 1) ran element-wise maps 1.2-1.9x slower unrolled (ew_chain 2.28 against
        1.27 ms) and reductions 1.3-2x faster (softmax 1.71 against 2.26, moments 3.12
        against 6.22: the first stage of a full reduction, unrolled): a map's thread has one
        element per trip of a grid sized to cover the array, so its unrolled trip only adds
        registers and branches."""
        if unroll is None:
            unroll = UNROLL
        if unroll == 1:
            with self.loop(start, stop, step) as p:
                body(p)
            return
        b = self.b
        counter = self.alloca(I64)
        b.store(start, counter)
        head = self.fn.append_basic_block("unrolled.head")
        trip = self.fn.append_basic_block("unrolled.body")
        rest = self.fn.append_basic_block("unrolled.rest")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        last = b.add(i, b.mul(step, self.const(unroll - 1)))
        b.cbranch(b.icmp_signed("<", last, stop), trip, rest)
        b.position_at_end(trip)
        for u in range(unroll):
            body(b.add(i, b.mul(step, self.const(u))) if u else i)
        b.store(b.add(i, b.mul(step, self.const(unroll))), counter)
        b.branch(head)
        b.position_at_end(rest)
        with self.loop(b.load(counter), stop, step) as p:
            body(p)

    def _map(self) -> None:
        dims = tuple(range(self.geo.rank))
        gid, gstride = self.global_ids()
        stores = list(enumerate(self.kernel.stores))
        exprs = [e for st, e in ((st, self._root_exprs().get(st.node)) for st in
                                 self.kernel.stores) if e is not None]
        plan = self.vector_plan(exprs, [i for i, _st in stores], flat=len(dims) == 1)
        self.flat_sweep(plan, gid, self.product(dims), gstride, dims, exprs,
                        lambda: self._store_roots(stores, {}), unroll=MAP_UNROLL)

    def flat_sweep(self, plan: VectorPlan | None, start: ir.Value, n: ir.Value,
                   step: ir.Value, dims: tuple[int, ...], exprs: list[KExpr],
                   body: Callable[[], None], unroll: int | None = None) -> None:
        """``body()`` at every position p in range(start, n, step) of the flattened ``dims``
        (their loop variables set); with a vector plan whose test passes, chunks of
        ``lanes`` positions in vector trips (chunk c at position c * lanes, for c in
        range(start, n // lanes, step)), then a scalar tail from n // lanes * lanes when
        the sweep is flat (n need not be a multiple of the lanes)."""
        if unroll is None:
            unroll = UNROLL

        def element(p: ir.Value) -> None:
            self.set_dims(p, dims)
            body()
        if plan is None:
            self.strided_loop(start, n, step, element, unroll=unroll)
            return
        b = self.b
        lanes = self.const(plan.lanes)
        with b.if_else(self.vector_ok(plan)) as (vector, scalar_path):
            with vector:
                chunks = b.udiv(n, lanes)

                def chunk(c: ir.Value) -> None:
                    self.set_dims(b.mul(c, lanes), dims)
                    self.vector_trip(plan, exprs, body)
                self.strided_loop(start, chunks, step, chunk,
                                  unroll=min(unroll, VECTOR_UNROLL))
                if plan.flat:
                    self.strided_loop(b.add(b.mul(chunks, lanes), start), n, step, element,
                                      unroll=1)
            with scalar_path:
                self.strided_loop(start, n, step, element, unroll=unroll)

    def row_cached_accesses(self) -> list[int]:
        """The loads block_row keeps in shared memory: read by the first phase and again by
        a later phase or the full-space stores, varying along the row, with affine indices
        (softmax's x, read by the max, the sum and the output: read from memory once).
        Larger items first, so every access's part of the cache is aligned."""
        k = self.kernel
        if self.strategy not in ROW_STRATEGIES or not k.reductions:
            return []
        full, _rows = self._split_stores()
        exprs = self._root_exprs()
        first = self._loads_of([k.red_exprs[0]])
        later = self._loads_of(list(k.red_exprs[1:]) + [exprs[st.node] for _i, st in full
                                                         if st.node in exprs])
        inner = self.geo.inner_dims
        keep = [a for a in first & later
                if not loaded_indices(k.body.accesses[a].index)
                and any(self.geo.load_uses[a][d] for d in inner)]
        return sorted(keep, key=lambda a: (-k.body.accesses[a].top.dtype.itemsize, a))

    def static_smem_bytes(self) -> int:
        """Bytes of the (lowered) kernel's static shared memory (reductions' slots)."""
        return sum(gv.type.pointee.count * _bits(gv.type.pointee.element) // 8
                   for gv in self._smem_vars.values())

    def row_cache_limit(self) -> int:
        """Bytes one row's cache may take in a launch of this (lowered) kernel, within what a
        launch may use without opting in."""
        return max(0, min(ROW_CACHE_MAX_BYTES, SMEM_LAUNCH_LIMIT - self.static_smem_bytes()))

    def row_cache_buffers(self) -> int:
        """Rows the row cache holds: 2 when block_row prefetches its rows by cp.async (the
        next row is copied in while this one is reduced; the launch's flag 2 asks for it),
        else 1. Only kernels of two or more reductions pipeline: on the H200 it made
        softmax 7-8 % faster and rmsnorm's one reduction 2-3 % slower, in two A/Bs a day
        apart (docs/benchmarks.md, 2026-12-04), layernorm level."""
        if self.strategy != "block_row" or not self.async_copy:
            return 1
        k = self.kernel
        if len(k.reductions) < 2:
            return 1
        cached = self.row_cached_accesses()
        if not cached:
            return 1
        full, _rows = self._split_stores()
        root = self._root_exprs()
        exprs = list(k.red_exprs) + [root[st.node] for _i, st in full if st.node in root]
        plan = self.vector_plan(exprs, [i for i, _st in full], flat=False)
        return 2 if plan is not None and set(cached) & plan.loads else 1

    def row_cache_itemsize(self) -> int:
        """Shared-memory bytes per row element of the row cache (0: no cache)."""
        return sum(self.kernel.body.accesses[a].top.dtype.itemsize
                   for a in self.row_cached_accesses())

    def _loads_of(self, exprs: list[KExpr]) -> set[int]:
        """Accesses loaded by ``exprs`` at their own position (not inside nested sweeps)."""
        found, stack, seen = set(), list(exprs), set()
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if isinstance(e, KLoad):
                found.add(e.access)
            stack.extend(self._operands(e))
        return found

    def _ev_one(self, e: KExpr, memo: dict) -> ir.Value:
        """Loads of the row cache's accesses: stored to it in the first phase, read from it
        in later ones (``_row_cache_mode``), at the row position the thread visits (each
        thread reads back only what it wrote: no barrier)."""
        if self._lane_vectors is not None and isinstance(e, KLoad) and not self._nesting \
                and e.access in self._lane_vectors:
            v = self.lane_value(e)      # a vector trip's lane (gpu/vector.py)
            memo[id(e)] = v
            return v
        mode = self._row_cache_mode
        if mode is None or not isinstance(e, KLoad) or e.access not in self._row_cache \
                or self._nesting:
            return super()._ev_one(e, memo)
        if e.access in self._prefetched:
            mode = "read"
        slot = self.b.gep(self._row_cache[e.access], [self._row_pos])
        if mode == "read":
            v = scalar.load_value(self.b, slot, e.dtype)
            memo[id(e)] = v
            return v
        v = super()._ev_one(e, memo)
        scalar.store_value(self.b, v, slot, e.dtype)
        return v

    def store(self, k: int, st, value: ir.Value) -> None:
        if self._lane_stores is not None and k in self._lane_stores:
            self._lane_stores[k].append(value)   # written by the vector trip's last lane
            return
        super().store(k, st, value)

    def _nested(self, e: KNested, memo: dict) -> ir.Value:
        self._nesting += 1
        try:
            return super()._nested(e, memo)
        finally:
            self._nesting -= 1

    def _row_cache_ptrs(self, ninner: ir.Value, part: ir.Value | None = None
                        ) -> dict[int, ir.Value]:
        """Each cached access's part of the dynamic shared memory (``ninner`` elements);
        ``part``: which row's cache, of several held by one block (warp_row: a row per
        warp; block_row pipelined: the row's buffer of two)."""
        gv = self._row_cache_var
        if gv is None:      # the dynamic shared memory, sized by the launch
            gv = ir.GlobalVariable(self.module, ir.ArrayType(ir.IntType(8), 0),
                                   f"{self.name}_rowcache", addrspace=3)
            gv.linkage = "external"
            gv.align = 16
            self._row_cache_var = gv
        ptrs, offset = {}, self.const(0)
        if part is not None:    # each part starts aligned (tile/gpu.py row_cache_part_bytes)
            b, align = self.b, ROW_CACHE_ALIGN
            raw = b.mul(ninner, self.const(self.row_cache_itemsize()))
            stride = b.and_(b.add(raw, self.const(align - 1)), self.const(-align))
            offset = b.mul(part, stride)
        for a in self.row_cached_accesses():
            dt = self.kernel.body.accesses[a].top.dtype
            base = self.b.gep(gv, [ir.Constant(I32, 0), offset])
            ptrs[a] = self.b.bitcast(base, scalar.memory_type(dt).as_pointer(3))
            offset = self.b.add(offset, self.b.mul(ninner, self.const(dt.itemsize)))
        return ptrs

    def _block_row(self) -> None:
        tid, ntid, ctaid, nctaid = self.thread_ids()
        self._row_sweeps(tid, ntid, ctaid, nctaid,
                         lambda j, red, v, vi: self.block_reduce(j, red, v, vi, tid, ntid),
                         self.b.icmp_unsigned("==", tid, self.const(0)),
                         (REDUCE_UNROLL, VECTOR_UNROLL))

    def _block_rows(self) -> None:
        """A group of rows per block (tile/gpu.py shares_row_loads; block_rows_group: 8, or
        16 whose own loads are held for the sweep): the block's threads stride
        along the rows together, and at each position a thread evaluates the reduction's
        term for every one of its rows, reusing the values that do not depend on the row
        (the shared array's loads, evaluated for the first row; inside a nested reduction,
        merged by LLVM once its constant-extent loop is unrolled). Each row's terms are
        combined as block_row combines them (the same thread shares, the same tree), so the
        results are block_row's. The last group's rows past the end repeat the last row
        (valid addresses, no branch in the sweep) and store nothing."""
        b, k, geo = self.b, self.kernel, self.geo
        tid, ntid, ctaid, nctaid = self.thread_ids()
        red, e = k.reductions[0], k.red_exprs[0]
        _full, rows = self._split_stores()
        shared = self._row_invariant(e)
        nrows = self.product(geo.par_dims)
        last = b.sub(nrows, self.const(1))
        nrow = drivers.block_rows_group(geo)    # (the binding's group: tile/bind.py)
        group = self.const(nrow)
        with self.loop(b.mul(ctaid, group), nrows, b.mul(nctaid, group)) as row0:
            row_vars, valid = [], []
            for u in range(nrow):
                r = b.add(row0, self.const(u))
                valid.append(b.icmp_unsigned("<", r, nrows))
                self.set_dims(b.select(valid[-1], r, last), geo.par_dims)
                row_vars.append({d: self.loop_vars[d] for d in geo.par_dims})
            accs = [self._new_acc(red) for _u in range(nrow)]
            comps = [self._new_compensation(red) for _u in range(nrow)]

            def position(p: ir.Value) -> None:
                self.set_dims(p, geo.inner_dims)
                first: dict = {}
                for u, ((acc, idx), comp) in enumerate(zip(accs, comps)):
                    self.loop_vars.update(row_vars[u])
                    memo = first if u == 0 else {i: v for i, v in first.items() if i in shared}
                    self._thread_step(red, acc, idx, comp, self.ev(e, memo))
            self.strided_loop(tid, self.product(geo.inner_dims), ntid, position,
                              unroll=REDUCE_UNROLL)
            leader = b.icmp_unsigned("==", tid, self.const(0))
            for u, (acc, idx) in enumerate(accs):
                v, vi = self.block_reduce(0, red, b.load(acc),
                                          b.load(idx) if idx is not None else None, tid, ntid)
                b.store(v, acc)
                if idx is not None:
                    b.store(vi, idx)
                self.loop_vars.update(row_vars[u])
                self.red_values[0] = self._finalize(red, acc, idx)
                with b.if_then(b.and_(leader, valid[u])):
                    self._store_roots(rows, {})

    def _moves_with_row(self, a: int) -> bool:
        """Whether access ``a``'s elements differ from row to row (an affine index that uses
        a parallel dimension): a row's data, read by one block, where a row-invariant
        access (layernorm's gamma) is read by every row."""
        geo = self.geo
        return not loaded_indices(self.kernel.body.accesses[a].index) and \
            any(geo.load_uses[a][d] for d in geo.par_dims)

    def _row_invariant(self, e: KExpr) -> set[int]:
        """ids of the subexpressions of ``e`` (at its own position) that are the same for
        every row: loads whose index uses no parallel dimension and loads nothing,
        parameters, and operations of such values (a nested reduction counts as one
        value of the row)."""
        geo, k = self.geo, self.kernel
        out: set[int] = set()
        order, stack, seen = [], [(e, False)], set()
        while stack:        # post-order: operands before their users
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in self._operands(n))
        for n in order:
            if isinstance(n, KLoad):
                ok = not loaded_indices(k.body.accesses[n.access].index) and \
                    not any(geo.load_uses[n.access][d] for d in geo.par_dims)
            elif isinstance(n, KParam):
                ok = True
            elif isinstance(n, KOp):
                ok = all(id(a) in out for a in n.args)
            else:       # KRed, KIndex, KNested: the row's own
                ok = False
            if ok:
                out.add(id(n))
        return out

    def _warp_row(self) -> None:
        """A warp per group of ``WARP_ROW_GROUP`` rows: the block's warps take groups
        independently, the lanes stride along the rows, and at each position a lane
        evaluates every row of its group in turn (so the group's loads are in flight
        together: one row of 128 float32 is a single 4-byte load a lane); each phase's
        partials combine by shuffles alone (no barrier, no shared slots), row by row in the
        same tree, so a row's result does not depend on the group. A group's rows past the
        end repeat the last row (valid addresses, no branch in the sweeps) and store nothing
        (not the last row's values again: its own warp wrote them).

        Rows of at most ``32 * max(REGISTER_ROW_SLOTS)`` elements are held in registers
        (``_warp_row_in_registers``: each lane loads its few positions once, for every
        phase); longer ones sweep the row once per phase, each row with its part of the
        block's row cache (``WARP_ROW_BLOCK_ROWS`` parts). The sweeps are scalar: on the
        H200 (2026-12-02, two runs each) l2_normalize's rows of 128 took 1.31 ms scalar
        against 1.60 with vector trips, while block_row's long rows gained."""
        b, geo = self.b, self.geo
        group = self.rows_per_warp
        tid, ntid, ctaid, nctaid = self.thread_ids()
        lane = b.and_(tid, self.const(WARP - 1))
        warp = b.lshr(tid, self.const(5))
        nwarps = b.lshr(ntid, self.const(5))
        ninner = self.product(geo.inner_dims)
        nrows = self.product(geo.par_dims)
        caches = [{} for _u in range(group)]
        use_cache = None
        if self.row_cached_accesses():   # the launch's flag: the block's cache fits
            use_cache = b.icmp_unsigned("!=", self._extra_args[0], self.const(0))
            caches = [self._row_cache_ptrs(ninner, b.add(b.mul(warp, self.const(group)),
                                                         self.const(u)))
                      for u in range(group)]
        first_row = b.mul(b.add(b.mul(ctaid, nwarps), warp), self.const(group))
        row_step = b.mul(b.mul(nctaid, nwarps), self.const(group))

        def rows_loop(body: Callable[[Callable[[int], None], list], None]) -> None:
            """The warp's groups of rows; ``body(for_row, valid)`` emits one group's code."""
            last = b.sub(nrows, self.const(1))
            with self.loop(first_row, nrows, row_step) as row0:
                row_vars, valid = [], []
                for u in range(group):
                    r = b.add(row0, self.const(u)) if u else row0
                    valid.append(b.icmp_unsigned("<", r, nrows))
                    self.set_dims(b.select(valid[-1], r, last) if u else r, geo.par_dims)
                    row_vars.append({d: self.loop_vars[d] for d in geo.par_dims})
                red_values: list[dict] = [{} for _u in range(group)]

                def for_row(u: int) -> None:
                    self.loop_vars.update(row_vars[u])
                    self.red_values = red_values[u]
                    self._row_cache = caches[u]
                body(for_row, valid)
                self.red_values = {}
            self._row_cache = {}

        def swept(for_row, valid) -> None:
            self._warp_row_sweeps(lane, ninner, use_cache, for_row, valid)

        # the register variants, fewest slots first; a row of 0 elements sweeps (nothing
        # to load, and no position to clamp to)
        variants = [(slots, b.and_(b.icmp_unsigned("<=", ninner, self.const(WARP * slots)),
                                   b.icmp_unsigned(">", ninner, self.const(0))))
                    for slots in REGISTER_ROW_SLOTS]

        def choose(i: int) -> None:
            if i == len(variants):
                rows_loop(swept)
                return
            slots, fits = variants[i]
            with b.if_else(fits) as (then, otherwise):
                with then:
                    rows_loop(lambda for_row, valid, slots=slots: self._warp_row_in_registers(
                        slots, lane, ninner, for_row, valid))
                with otherwise:
                    choose(i + 1)
        choose(0)

    def _warp_row_sweeps(self, lane: ir.Value, ninner: ir.Value, use_cache: ir.Value | None,
                         for_row: Callable[[int], None], valid: list) -> None:
        """One group of rows, each phase a sweep of the lane's positions (the row cache
        filled by the first phase, read by later ones)."""
        b, k, geo = self.b, self.kernel, self.geo
        group = len(valid)
        full, rows = self._split_stores()
        step = self.const(WARP)

        def sweep(body: Callable[[int], None], phase: int) -> None:
            """``body(u)`` for each row of the group at every position of the lane;
            with the cache, the first phase fills it and later ones read it."""
            def run(mode) -> None:
                self._row_cache_mode = mode

                def position(p: ir.Value) -> None:
                    self._row_pos = p
                    self.set_dims(p, geo.inner_dims)
                    for u in range(group):
                        for_row(u)
                        body(u)
                self.strided_loop(lane, ninner, step, position, unroll=WARP_ROW_UNROLL)
                self._row_cache_mode = None
            if use_cache is None:
                run(None)
                return
            with b.if_else(use_cache) as (then, otherwise):
                with then:
                    run("write" if phase == 0 else "read")
                with otherwise:
                    run(None)

        for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
            parts = [(self._new_acc(red), self._new_compensation(red))
                     for _u in range(group)]

            def term(u: int, red=red, e=e, parts=parts) -> None:
                (acc, idx), comp = parts[u]
                self._thread_step(red, acc, idx, comp, self.ev(e, {}))
            sweep(term, j)
            self._warp_combine(j, red, [p[0] for p in parts], for_row)
        if full:
            def stores(u: int) -> None:
                with b.if_then(valid[u]):
                    self._store_roots(full, {})
            sweep(stores, len(k.reductions))
        self._warp_row_stores(rows, lane, for_row, valid)

    def _warp_row_in_registers(self, slots: int, lane: ir.Value, ninner: ir.Value,
                               for_row: Callable[[int], None], valid: list) -> None:
        """One group of rows of at most ``32 * slots`` elements, held in registers: the
        lane's positions lane, lane + 32, ... (``slots`` of them, each load coalesced
        across the warp) are loaded once by the first phase that reads them, and every
        later phase and the stores reuse the values (one expression memo per row and
        position, straight-line code: no loop, no row cache). Positions past the row's end
        read its last element (a valid address), add nothing and store nothing.

        A lane adds at most ``slots`` terms in order, so float sums are not compensated:
        with the warp's 5 shuffle levels a term goes through at most ``slots + 4``
        roundings, fewer than NumPy's pairwise sum of the row (8 accumulators of up to 16
        terms for a row of up to 128, then 3 levels; tile.sum_rounding_depth)."""
        b, k, geo = self.b, self.kernel, self.geo
        group = len(valid)
        full, rows = self._split_stores()
        last = b.sub(ninner, self.const(1))
        positions = []
        for s in range(slots):
            p = b.add(lane, self.const(WARP * s)) if s else lane
            inside = b.icmp_unsigned("<", p, ninner)
            positions.append((b.select(inside, p, last), inside))
        memos = [[{} for _s in range(slots)] for _u in range(group)]

        def at(u: int, s: int) -> dict:
            for_row(u)
            self.set_dims(positions[s][0], geo.inner_dims)
            return memos[u][s]

        for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
            parts = [self._new_acc(red) for _u in range(group)]
            for s in range(slots):
                for u in range(group):
                    memo = at(u, s)
                    acc, idx = parts[u]
                    self._masked_step(red, acc, idx, self.ev(e, memo), positions[s][1])
            self._warp_combine(j, red, parts, for_row)
        if full:
            root = self._root_exprs()
            for s in range(slots):
                for u in range(group):
                    memo = at(u, s)
                    values = [(i, st, self.ev(root[st.node], memo) if st.node in root
                               else self.red_value(k.reductions.index(st.node)))
                              for i, st in full]
                    with b.if_then(b.and_(valid[u], positions[s][1])):
                        for i, st, v in values:
                            self.store(i, st, v)
        self._warp_row_stores(rows, lane, for_row, valid)

    def _masked_step(self, red, acc: ir.Value, idx: ir.Value | None, x: ir.Value,
                     inside: ir.Value) -> None:
        """One term of a lane's in-order share, kept only where ``inside`` holds."""
        b = self.b
        old = b.load(acc)
        old_i = b.load(idx) if idx is not None else None
        pos = self._position(red) if idx is not None else None
        self._accumulate(red, acc, idx, x, pos, reassociate=False)
        b.store(b.select(inside, b.load(acc), old), acc)
        if idx is not None:
            b.store(b.select(inside, b.load(idx), old_i), idx)

    def _warp_combine(self, j: int, red, parts: list, for_row: Callable[[int], None]) -> None:
        """Each row's lane partials of reduction ``j`` through the warp's shuffle tree, the
        result broadcast to every lane and finalised as the row's value of ``j``."""
        b = self.b
        for u, (acc, idx) in enumerate(parts):
            for_row(u)
            v, vi = self.warp_reduce(red, b.load(acc), b.load(idx) if idx is not None else None)
            b.store(self.broadcast_lane0(v), acc)
            if idx is not None:
                b.store(self.broadcast_lane0(vi), idx)
            self.red_values[j] = self._finalize(red, acc, idx)

    def _warp_row_stores(self, rows: list, lane: ir.Value, for_row: Callable[[int], None],
                         valid: list) -> None:
        """The per-row stores (a reduction's own output), by lane 0 of each valid row."""
        if not rows:
            return
        b = self.b
        leader = b.icmp_unsigned("==", lane, self.const(0))
        for u in range(len(valid)):
            for_row(u)
            with b.if_then(b.and_(leader, valid[u])):
                self._store_roots(rows, {})

    def _row_sweeps(self, first: ir.Value, step: ir.Value, row0: ir.Value, row_step: ir.Value,
                    reduce: Callable, leader: ir.Value, unroll: tuple[int, int]) -> None:
        """block_row's rows row0, row0 + row_step, ...: per row, each reduction's phase (a
        sweep of the positions first, first + step, ... of the row, then ``reduce`` of the
        partials, which every participating thread returns), then the full-space stores'
        sweep, then the per-row stores by the ``leader``. ``unroll``: iterations per trip
        of the scalar and of the vector sweeps."""
        k, geo = self.kernel, self.geo
        full, rows = self._split_stores()
        ninner = self.product(geo.inner_dims)
        cached = self.row_cached_accesses()
        use_cache = None
        if cached:   # the runtime sets the flag when the cache fits (ROW_CACHE_MAX_BYTES)
            use_cache = self.b.icmp_unsigned("!=", self._extra_args[0], self.const(0))
            self._row_cache = self._row_cache_ptrs(ninner)
        root = self._root_exprs()
        full_exprs = [root[st.node] for _i, st in full if st.node in root]
        plan = self.vector_plan(list(k.red_exprs) + full_exprs, [i for i, _st in full],
                                flat=False)
        vector_ok = self.vector_ok(plan) if plan is not None else None
        # (cp.async copies 4, 8 or 16 bytes: a 2-lane trip of int8 values, beside an
        # 8-byte access in the plan, is read and cached by the sweep instead)
        prefetch = sorted(a for a in set(cached) & plan.loads
                          if plan.lanes * k.body.accesses[a].top.dtype.itemsize in (4, 8, 16)) \
            if plan is not None and self.async_copy else []

        phases = [self._loads_of([e]) for e in k.red_exprs] + [self._loads_of(full_exprs)]
        moving = {a for a in set().union(*phases) if self._moves_with_row(a)}

        def policies(phase: int, mode) -> None:
            """The L2 hints of ``phase``'s global vector loads and stores (ROW_L2_HINTS)."""
            self._load_policies, self._store_policy = {}, None
            if not self.async_copy or plan is None:
                return
            if ROW_L2_HINTS & 1 and mode is None:
                for a in sorted(phases[phase] & moving & plan.loads):
                    again = any(a in later for later in phases[phase + 1:])
                    self._load_policies[a] = self.nv.l2_policy(
                        self.b, "evict_last" if again else "evict_first")
            if ROW_L2_HINTS & 2 and phase == len(k.reductions):
                self._store_policy = self.nv.l2_policy(self.b, "evict_first")

        def sweep(body, phase: int, exprs: list[KExpr]) -> None:
            """``body`` over the thread's positions of the row; with the cache, the first
            phase fills it and later ones read it; with a vector plan whose test passes,
            in vector trips (every phase visits the same positions from the same thread,
            so each reads back from the cache only what it wrote: no barrier)."""
            def run(mode, vector: bool):
                self._row_cache_mode = mode
                if vector:
                    policies(phase, mode)

                def position(r: ir.Value) -> None:
                    self._row_pos = r
                    self.set_dims(r, geo.inner_dims)
                    body()

                def chunk(c: ir.Value) -> None:
                    r = self.b.mul(c, self.const(plan.lanes))
                    self._row_pos = r
                    self.set_dims(r, geo.inner_dims)
                    self.vector_trip(plan, exprs, body)
                if vector:
                    self.strided_loop(first, self.b.udiv(ninner, self.const(plan.lanes)),
                                      step, chunk, unroll=unroll[1])
                else:
                    self.strided_loop(first, ninner, step, position, unroll=unroll[0])
                self._row_cache_mode = None
                self._load_policies, self._store_policy = {}, None

            def cached_or_not(vector: bool):
                if use_cache is None:
                    run(None, vector)
                    return
                with self.b.if_else(use_cache) as (then, otherwise):
                    with then:
                        # the vector path's row was prefetched (``_prefetch_row``)
                        self._prefetched = frozenset(prefetch) if vector else frozenset()
                        run("write" if phase == 0 else "read", vector)
                        self._prefetched = frozenset()
                    with otherwise:
                        run(None, vector)
            if vector_ok is None:
                cached_or_not(False)
                return
            with self.b.if_else(vector_ok) as (then, otherwise):
                with then:
                    cached_or_not(True)
                with otherwise:
                    cached_or_not(False)

        nrows = self.product(geo.par_dims)
        pipelined = None    # i1: two row buffers, the next row copied in during this one
        if prefetch:
            b = self.b
            pipelined = b.and_(b.icmp_unsigned("==", self._extra_args[0], self.const(2)),
                               vector_ok)
            parity = self.alloca(I64)       # which buffer holds this row
            b.store(self.const(0), parity)
            with b.if_then(b.and_(pipelined, b.icmp_unsigned("<", row0, nrows))):
                self.set_dims(row0, geo.par_dims)
                self._prefetch_row(plan, prefetch, first, step, ninner,
                                   self._row_cache_ptrs(ninner, self.const(0)), barrier=False)
                self.nv.cp_async_commit(b)
        with self.loop(row0, nrows, row_step) as row:
            self.set_dims(row, geo.par_dims)
            if pipelined is not None:
                self._pipeline_rows(plan, prefetch, first, step, ninner, row, row_step, nrows,
                                    parity, pipelined, self.b.and_(use_cache, vector_ok))
            elif prefetch:
                with self.b.if_then(self.b.and_(use_cache, vector_ok)):
                    self._prefetch_row(plan, prefetch, first, step, ninner, self._row_cache)
                    self.nv.cp_async_wait_all(self.b)
            for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
                acc, idx = self._new_acc(red)
                comp = self._new_compensation(red)
                sweep(lambda: self._thread_step(red, acc, idx, comp, self.ev(e, {})), j, [e])
                v, vi = reduce(j, red, self.b.load(acc),
                               self.b.load(idx) if idx is not None else None)
                self.b.store(v, acc)
                if idx is not None:
                    self.b.store(vi, idx)
                self.red_values[j] = self._finalize(red, acc, idx)
            if full:
                sweep(lambda: self._store_roots(full, {}), len(k.reductions), full_exprs)
            if rows:
                with self.b.if_then(leader):
                    self._store_roots(rows, {})

    def _pipeline_rows(self, plan, prefetch: list[int], first: ir.Value, step: ir.Value,
                       ninner: ir.Value, row: ir.Value, row_step: ir.Value, nrows: ir.Value,
                       parity: ir.Value, pipelined: ir.Value, single: ir.Value) -> None:
        """At the top of a block_row row: the row cache's buffer for this row, and its
        copies. Pipelined (the launch's flag 2, an aligned launch): this row was copied into
        buffer ``parity`` during the last row (or before the first); the next row's copies
        go to the other buffer now, and only this row's group is waited for, so the next
        row's reads are in flight while this one is reduced and stored. Otherwise (flag 1)
        one buffer, filled and waited for here (``single``)."""
        b, geo = self.b, self.geo
        part = b.select(pipelined, b.load(parity), self.const(0))
        self._row_cache = self._row_cache_ptrs(ninner, part)
        with b.if_else(pipelined) as (then, otherwise):
            with then:
                nxt = b.add(row, row_step)
                with b.if_else(b.icmp_unsigned("<", nxt, nrows)) as (more, last):
                    with more:
                        # this row's indices back afterwards as they were (computed before
                        # the branch: decomposed again in it, with two or more parallel
                        # dimensions they would not dominate their later uses)
                        held = dict(self.loop_vars)
                        self.set_dims(nxt, geo.par_dims)
                        self._prefetch_row(plan, prefetch, first, step, ninner,
                                           self._row_cache_ptrs(ninner, b.xor(part,
                                                                              self.const(1))))
                        self.loop_vars.update(held)
                        self.nv.cp_async_commit(b)
                        self.nv.cp_async_wait_group(b, 1)
                    with last:
                        self.nv.cp_async_wait_group(b, 0)
            with otherwise:
                with b.if_then(single):
                    self._prefetch_row(plan, prefetch, first, step, ninner, self._row_cache)
                    self.nv.cp_async_wait_all(b)
        b.store(b.xor(b.load(parity), self.const(1)), parity)

    def _prefetch_row(self, plan, accesses: list[int], first: ir.Value, step: ir.Value,
                      ninner: ir.Value, cache: dict[int, ir.Value], barrier: bool = True
                      ) -> None:
        """The row's cached, vector-loaded accesses copied into the row cache ``cache`` by
        ``cp.async``, at the chunks the thread's vector sweeps visit, before the first phase
        (which then reads them from the cache like the later ones); the caller waits. A
        thread's loads of a row are otherwise a chain of two vector trips at a time: the
        H200's layernorm row (8192 float32, 256 threads) kept the memory system half busy
        at 3 blocks per multiprocessor (ncu, 2026-12-02); copies hold no register, so the
        whole row is in flight at once. Each thread reads back only what it copied, after
        its own wait; the barrier first orders the last reads of these buffers (the last
        row's, by every thread) before the copies overwrite them."""
        b, geo, k = self.b, self.geo, self.kernel
        lanes = plan.lanes
        if barrier:
            self.nv.barrier(b)

        def chunk(c: ir.Value) -> None:
            r = b.mul(c, self.const(lanes))
            self.set_dims(r, geo.inner_dims)
            for a in accesses:
                src = self._address(self.ptrs[a], self.layout.load_slots[a],
                                    self.geo.load_vstrides[a])
                dst = b.gep(cache[a], [r])
                self.nv.cp_async(b, dst, src, lanes * k.body.accesses[a].top.dtype.itemsize)
        # one copy per trip: an unrolled trip's addresses held 10-15 more registers at the
        # kernel's peak (ptxas), and a copy's issue does not wait for the last one anyway
        self.strided_loop(first, b.udiv(ninner, self.const(lanes)), step, chunk, unroll=1)

    def _thread_row(self) -> None:
        geo = self.geo
        kept = tuple(d for d in range(geo.rank) if not geo.reduced[d])
        full, rows = self._split_stores()
        gid, gstride = self.global_ids()
        with self.loop(gid, self.product(kept), gstride) as p:
            self.set_dims(p, kept)
            self._reduce_phases()
            if full:
                with self.nest(geo.inner_dims):
                    self._store_roots(full, {})
            self._store_roots(rows, {})

    def _scan(self) -> None:
        geo = self.geo
        acc = self.alloca(scalar.llvm_type(self.kernel.reductions[0].dtype))
        gid, gstride = self.global_ids()
        with self.loop(gid, self.product(geo.par_dims), gstride) as p:
            self.set_dims(p, geo.par_dims)
            self._scan_row(acc)    # the CPU's row: same start value and per-step rounding

    # scan_tiled: a long scan axis with few rows, in three passes over tiles of a run-time
    # length T (``scan_tile_length``): (tiles) a thread per tile of each row scans it in
    # order from the reducer's start value, stores the tile's prefixes and its total;
    # (totals) a thread per row turns its tile totals into each tile's offset, in order
    # (an exclusive scan); (offsets) a thread per tile after the first combines its offset
    # with each stored prefix. Integer and max/min scans are exact in any association. A
    # float sum's k-th output goes through at most k - 1 roundings, as in order (a term of
    # an earlier tile: T - 1 in its tile, t - 1 in the offsets, 1 when added; T + t - 1 <=
    # k - 1 for tile t >= 1), so it stays within the comparator's in-order cumsum bound;
    # products within their reassociation bound. The tile length depends on the length
    # only: the same bits on every device and run.
    def _scan_setup(self) -> tuple:
        """(op, dtype, scan loop dim, its length, tile length, tiles per row, rows)."""
        red = self.kernel.reductions[0]
        axis = self.geo.inner_dims[0]
        length, tile = self.extent(axis), self._extra_args[0]
        ntiles = self.b.udiv(self.b.add(length, self.b.sub(tile, self.const(1))), tile)
        return (reducer(red.op).combine_op, red.dtype, axis, length, tile, ntiles,
                self.product(self.geo.par_dims))

    def _scan_step(self, op: str, dt: np.dtype, a: ir.Value, x: ir.Value) -> ir.Value:
        return scalar.lower_op(self.b, op, [a, x], [dt, dt], dt, self.math)

    def _each_tile(self, body: Callable[[ir.Value, ir.Value, ir.Value, ir.Value, ir.Value],
                                        None], first: bool = True) -> None:
        """``body(q, tile, start, stop, lane)`` for every tile q of every row, a warp per
        tile (the row's loop variables set; ``first``: also the first tile of each row):
        the warp's 32 lanes walk the tile 32 consecutive elements at a time, so its loads
        and stores are coalesced (a thread per tile read 32 lines 4 * tile bytes apart per
        warp load: H200, 2026-12-01, 12x behind CuPy's cumsum)."""
        _op, _dt, _axis, length, tile_len, ntiles, rows = self._scan_setup()
        b = self.b
        gid, gstride = self.global_ids()
        warp, nwarps = b.udiv(gid, self.const(WARP)), b.udiv(gstride, self.const(WARP))
        lane = b.urem(gid, self.const(WARP))
        with self.loop(warp, b.mul(rows, ntiles), nwarps) as q:
            tile = b.urem(q, ntiles)
            with (nullcontext() if first else
                  b.if_then(b.icmp_unsigned("!=", tile, self.const(0)))):
                self.set_dims(b.udiv(q, ntiles), self.geo.par_dims)
                start = b.mul(tile, tile_len)
                body(q, tile, start, self.smin(b.add(start, tile_len), length), lane)

    def _shfl_idx(self, v: ir.Value, src_lane: ir.Value) -> ir.Value:
        b = self.b
        lane32 = b.trunc(src_lane, I32)
        return _from_words(b, [self.nv.shfl(b, "idx", w, lane32) for w in _to_words(b, v)],
                           v.type)

    def _scan_tiles(self) -> None:
        """Each tile's prefixes and its total: chunk by chunk of 32 elements, an inclusive
        scan across the warp's lanes (lane l adds lane l - 2^s's value for s = 0..4), then
        the carry of the chunks before (lane 31's last prefix). Float sums: a term goes
        through at most 5 roundings in its chunk and one per later chunk, within the k - 1
        of an in-order scan for every k (the comparator's cumsum bound). The loads of
        SCAN_BATCH chunks are issued before the first of them is scanned: the carry makes
        the scans a chain, and a warp waiting on one load at a time kept the H200's memory
        system a fifth busy (2^24 elements: 0.32 ms, CuPy 0.13); the association is the
        same chunk by chunk."""
        k = self.kernel
        op, dt, axis, *_ = self._scan_setup()
        ty = scalar.llvm_type(dt)
        acc = self.alloca(ty)
        vals = [self.alloca(ty) for _ in range(SCAN_BATCH)]
        b = self.b
        identity = reducer(k.reductions[0].op).identity(dt)

        def tile(q, _tile, start, stop, lane) -> None:
            b.store(identity, acc)

            def load(j: ir.Value, val: ir.Value) -> None:
                b.store(identity, val)
                with b.if_then(b.icmp_signed("<", j, stop)):
                    self.loop_vars[axis] = j
                    b.store(self.ev(k.red_exprs[0], {}), val)

            def scan(j: ir.Value, val: ir.Value) -> None:
                valid = b.icmp_signed("<", j, stop)
                v = b.load(val)
                for off in (1, 2, 4, 8, 16):   # every lane shuffles: no divergence here
                    src = b.sub(lane, self.const(off))
                    src = b.select(b.icmp_signed("<", src, self.const(0)), self.const(0), src)
                    other = self._shfl_idx(v, src)
                    v = b.select(b.icmp_signed(">=", lane, self.const(off)),
                                 self._scan_step(op, dt, other, v), v)
                v = self._scan_step(op, dt, b.load(acc), v)
                with b.if_then(valid):
                    self.loop_vars[axis] = j
                    self.store(0, k.stores[0], v)
                b.store(self._shfl_idx(v, self.const(WARP - 1)), acc)

            with self.loop(start, stop, self.const(WARP * SCAN_BATCH)) as base:
                chunks = [b.add(base, self.const(WARP * c)) for c in range(SCAN_BATCH)]
                for c, val in zip(chunks, vals):
                    load(b.add(c, lane), val)
                for c, val in zip(chunks, vals):
                    # a chunk past the tile's end is skipped (warp-uniform: the shuffles of
                    # the others are not divergent), as the chunk loop did
                    with b.if_then(b.icmp_signed("<", c, stop)):
                        scan(b.add(c, lane), val)
            with b.if_then(b.icmp_signed("==", lane, self.const(0))):
                scalar.store_value(b, b.load(acc), b.gep(self.scratch_ptr(0), [q]), dt)
        self._each_tile(tile)

    def _scan_totals(self) -> None:
        op, dt, _axis, _length, _tile, ntiles, rows = self._scan_setup()
        b = self.b
        acc = self.alloca(scalar.llvm_type(dt))
        gid, gstride = self.global_ids()
        with self.loop(gid, rows, gstride) as row:
            b.store(reducer(self.kernel.reductions[0].op).identity(dt), acc)

            def tile(t: ir.Value) -> None:
                slot = b.gep(self.scratch_ptr(0), [b.add(b.mul(row, ntiles), t)])
                total = scalar.load_value(b, slot, dt)
                scalar.store_value(b, b.load(acc), slot, dt)    # the offset of tile t
                b.store(self._scan_step(op, dt, b.load(acc), total), acc)
            # unrolled: the next totals' loads do not wait for this one's add
            self.strided_loop(self.const(0), ntiles, self.const(1), tile)

    def _scan_offsets(self) -> None:
        k = self.kernel
        op, dt, axis, *_ = self._scan_setup()

        def tile(q, _tile, start, stop, lane) -> None:
            offset = scalar.load_value(self.b, self.b.gep(self.scratch_ptr(0), [q]), dt)

            def element(j: ir.Value) -> None:
                self.loop_vars[axis] = j
                ptr = self._address(self.ptrs[len(k.body.accesses)], self.layout.store_slots[0],
                                    self.geo.store_vstrides[0])
                prefix = scalar.load_value(self.b, ptr, dt)
                scalar.store_value(self.b, self._scan_step(op, dt, offset, prefix), ptr, dt)
            self.strided_loop(self.b.add(start, lane), stop, self.const(WARP), element)
        self._each_tile(tile, first=False)

    def _scatter(self) -> None:
        """A thread per column of the not-indexed dimensions, sequential along the index
        dimensions: NumPy's order for repeated positions, on one thread (deterministic)."""
        gid, gstride = self.global_ids()
        with self.loop(gid, self.product(self.geo.par_dims), gstride) as p:
            self.set_dims(p, self.geo.par_dims)
            self._scatter_row()

    def _scatter_atomic(self) -> None:
        """An integer combine whose result does not depend on the order (``atomic_combine``):
        a thread per element, each an atomic read-modify-write -- NumPy's result, in
        parallel."""
        dims = tuple(range(self.geo.rank))
        gid, gstride = self.global_ids()
        with self.loop(gid, self.product(dims), gstride) as p:
            self.set_dims(p, dims)
            self._scatter_row(atomic=True)

    # scatter_last: NumPy's last write wins, in parallel. Three passes of a thread per
    # element, each element at its flat position p in the space (C order: for a fixed
    # target element, the elements that write it differ only along the index dims, so a
    # later one in NumPy's order has a larger p): init sets the target's winner to -1,
    # claim takes the atomic max of p, write stores the value of the element that won.
    # Exact integer atomics and a plain compare: the result does not depend on timing.
    def _each_element(self, body: Callable[[ir.Value, dict, list, ir.Value], None]) -> None:
        """``body(p, memo, loaded, winner)`` for every element p of the space whose indices
        are in range (``loaded``: its index values, ``winner``: its target's slot in the
        scratch array)."""
        dims = tuple(range(self.geo.rank))
        gid, gstride = self.global_ids()
        pos_ty = ir.IntType(64 if self.wide else 32)

        def element(p: ir.Value) -> None:
            self.set_dims(p, dims)
            memo: dict = {}
            loaded, ok = self.scatter_target(memo)
            pos = p if self.wide else self.b.trunc(p, pos_ty)
            with (self.b.if_then(ok) if ok is not None else nullcontext()):
                body(pos, memo, loaded, self.scatter_address(self.scratch_ptr(0), loaded))
        self.strided_loop(gid, self.product(dims), gstride, element, unroll=1)

    def _scatter_init(self) -> None:
        self._each_element(lambda p, memo, loaded, winner:
                           self.b.store(ir.Constant(p.type, -1), winner))

    def _scatter_claim(self) -> None:
        self._each_element(lambda p, memo, loaded, winner:
                           self.b.atomic_rmw("max", winner, p, "monotonic"))

    def _scatter_write(self) -> None:
        k = self.kernel

        def write(p: ir.Value, memo: dict, loaded: list, winner: ir.Value) -> None:
            # every element's value is computed (its gathers' bounds checks run, as NumPy
            # evaluates the whole right-hand side), only the winner's is stored
            value = self.ev(k.root_exprs[0], memo)
            with self.b.if_then(self.b.icmp_signed("==", self.b.load(winner), p)):
                scalar.store_value(self.b, value,
                                   self.scatter_address(self.ptrs[len(k.body.accesses)], loaded),
                                   k.scatter.dtype)
        self._each_element(write)

    def _full_stage1(self) -> None:
        k = self.kernel
        dims = tuple(range(self.geo.rank))
        tid, ntid, ctaid, nctaid = self.thread_ids()
        gid = self.b.add(self.b.mul(ctaid, ntid), tid)
        accs = [self._new_acc(r) for r in k.reductions]
        comps = [self._new_compensation(r) for r in k.reductions]

        def element() -> None:
            memo: dict = {}
            for red, e, (acc, idx), comp in zip(k.reductions, k.red_exprs, accs, comps):
                self._thread_step(red, acc, idx, comp, self.ev(e, memo))
        plan = self.vector_plan(list(k.red_exprs), [], flat=len(dims) == 1)
        self.flat_sweep(plan, gid, self.product(dims), self.b.mul(nctaid, ntid), dims,
                        list(k.red_exprs), element, unroll=REDUCE_UNROLL)
        is_first = self.b.icmp_unsigned("==", tid, self.const(0))
        for j, (red, (acc, idx), (pv, pi)) in enumerate(zip(k.reductions, accs,
                                                             self._partial_ptrs())):
            v, vi = self.block_reduce(j, red, self.b.load(acc),
                                      self.b.load(idx) if idx is not None else None, tid, ntid)
            acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
            with self.b.if_then(is_first):   # bool partials are bytes in memory
                scalar.store_value(self.b, v, self.b.gep(pv, [ctaid]), acc_dt)
                if vi is not None:
                    self.b.store(vi, self.b.gep(pi, [ctaid]))

    def _reduce_phases(self) -> None:
        """A thread's own row (thread_row), one term at a time: float sums of a column
        compensated, as a column of 10^5 rows is one thread's. A short row (at most
        THREAD_ROW_MAX terms) is summed in order, as NumPy sums short rows: its error is
        NumPy's, and an ill-conditioned consumer (layernorm of 3-element rows, whose variance
        cancels) sees NumPy's rounding rather than a more accurate one it would amplify."""
        k = self.kernel
        for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
            acc, idx = self._new_acc(red)
            comp = self._new_compensation(red) if self.geo.strategy == "col" else None
            with self.nest(self.geo.inner_dims):
                self._thread_step(red, acc, idx, comp, self.ev(e, {}))
            self.red_values[j] = self._finalize(red, acc, idx)

    def _new_compensation(self, red) -> ir.Value | None:
        """A float sum's Kahan compensation for a thread's strided share (0 to start):
        a thread of a long row or a large full reduction adds thousands of terms in turn."""
        if not is_float_sum(red):
            return None
        comp = self.alloca(scalar.llvm_type(accumulator_dtype(red.op,
                                                              reduction_input_dtype(red))))
        self._init_acc(red, comp, None)
        return comp

    def _thread_step(self, red, acc: ir.Value, idx: ir.Value | None, comp: ir.Value | None,
                     x: ir.Value) -> None:
        """One term of a thread's share: compensated for float sums, in order otherwise."""
        if comp is not None:
            self._accumulate_compensated(red, acc, comp, x)
            return
        pos = self._position(red) if idx is not None else None
        self._accumulate(red, acc, idx, x, pos, reassociate=False)

    def _full_stage2(self, nslots: ir.Value) -> None:
        k = self.kernel
        tid, ntid, _ctaid, _n = self.thread_ids()
        self.loop_vars = {d: self.const(0) for d in range(self.geo.rank)}
        for j, (red, (pv, pi)) in enumerate(zip(k.reductions, self._partial_ptrs())):
            acc, idx = self._new_acc(red)
            acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
            with self.loop(tid, nslots, ntid) as s:
                x = scalar.load_value(self.b, self.b.gep(pv, [s]), acc_dt)
                xi = self.b.load(self.b.gep(pi, [s])) if pi is not None else None
                a = self.b.load(acc)
                ai = self.b.load(idx) if idx is not None else None
                v, vi = self.combine_partials(red, a, ai, x, xi)
                self.b.store(v, acc)
                if idx is not None:
                    self.b.store(vi, idx)
            v, vi = self.block_reduce(j, red, self.b.load(acc),
                                      self.b.load(idx) if idx is not None else None, tid, ntid)
            self.b.store(v, acc)
            if idx is not None:
                self.b.store(vi, idx)
            self.red_values[j] = self._finalize(red, acc, idx)
        with self.b.if_then(self.b.icmp_unsigned("==", tid, self.const(0))):
            self._store_roots(list(enumerate(k.stores)), {})


# ==========================================================================================
# Matmul: shared-memory tiled, with the consumer's elementwise epilogue fused
# ==========================================================================================

BM = BN = MATMUL_TILE          # output tile (tile/gpu.py: the launch reads it there)
BK = 16                         # reduction step staged in shared memory
TM = TN = MATMUL_PER_THREAD     # outputs per thread (16 x 16 threads: MATMUL_THREADS)
A_LD = BM + 1       # padded rows of the A tile against bank conflicts


def matmul_acc_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.dtype(np.float16) else np.dtype(dtype)


def mm_param_names(n_batch: int) -> list[str]:
    names = ["M", "N", "K", "A_off", "A_sm", "A_sk", "B_off", "B_sk", "B_sn", "C_off", "C_sm",
             "C_sn"]
    for d in range(n_batch):
        names += [f"b{d}_ext", f"b{d}_A", f"b{d}_B", f"b{d}_C"]
    return names


class MatmulLowering(GpuLoweringMixin, KernelLowering):
    """``C = A @ B`` over 64x64 tiles; with ``epilogue`` (the geometry of the map kernel that
    consumes C with an identity index), the map's roots are computed from the accumulators
    and stored instead of (or besides, when ``store_c``) C.

    Buffers: A, B, [C], then the epilogue's loads and stores. Parameters: the epilogue's
    layout, then ``mm_param_names(n_batch)``."""

    def __init__(self, node, name: str, epilogue: Geometry | None, store_c: bool,
                 out_dims: tuple[int | None, int | None]):
        if epilogue is not None:
            super().__init__(epilogue, GpuMath(), name)
        else:
            self.math, self.name, self.geo, self.kernel = GpuMath(), name, None, None
            self.module = ir.Module(name=name)
            self.loop_vars, self.red_values = {}, {}
        self._gpu_init()
        self.node = node
        self.dtype = np.dtype(node.dtype)
        self.acc_dt = matmul_acc_dtype(self.dtype)
        self.store_c = store_c or epilogue is None
        self.out_dims = out_dims   # output dims holding M and N (None for a 1-D operand)
        self.n_batch = len(node.shape) - sum(d is not None for d in out_dims)
        self.n_epi = self.layout.size if epilogue is not None else 0

    def buffer_dtypes(self) -> list[np.dtype]:
        dts = [self.dtype, self.dtype] + ([self.dtype] if self.store_c else [])
        if self.geo is not None:
            dts += [a.top.dtype for a in self.kernel.body.accesses]
            dts += [s.dest.dtype for s in self.kernel.stores]
        return dts

    def lower(self) -> str:
        dts = self.buffer_dtypes()
        ptr_types = [scalar.memory_type(dt).as_pointer(1) for dt in dts]
        n_mm = len(mm_param_names(self.n_batch))
        fn = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), ptr_types + [I64.as_pointer()]), name=f"{self.name}_body")
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        for a in fn.args[:len(dts)]:
            a.add_attribute("noalias")
        self._begin_matmul(fn, len(dts), n_mm)
        self._emit_tiles()
        self._end_function()
        self.emit_kernel(self.name, fn, ptr_types, self.n_epi + n_mm, 0)
        return str(self.module)

    def _begin_matmul(self, fn: ir.Function, n_ptrs: int, n_mm: int) -> None:
        self.fn = fn
        entry = fn.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(entry)
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        ab = self.alloca_builder
        params = fn.args[n_ptrs]
        allp = [ab.load(ab.gep(params, [ir.Constant(I64, i)])) for i in range(self.n_epi + n_mm)]
        self.slots = allp[:self.n_epi]
        self.mm = dict(zip(mm_param_names(self.n_batch), allp[self.n_epi:]))
        self.a_ptr, self.b_ptr = fn.args[0], fn.args[1]
        self.c_ptr = fn.args[2] if self.store_c else None
        self.ptrs = fn.args[2 + int(self.store_c):n_ptrs]   # the epilogue's buffers

    def _load_elem(self, ptr: ir.Value, off: ir.Value, ok: ir.Value) -> ir.Value:
        """Operand element at ``off`` converted to the accumulator dtype, or 0 when not ok."""
        b = self.b
        safe = b.select(ok, off, self.const(0))
        v = scalar.load_value(b, b.gep(ptr, [safe]), self.dtype)
        if self.acc_dt != self.dtype:
            v = scalar.cast(b, v, self.dtype, self.acc_dt)
        return b.select(ok, v, scalar.constant(0, self.acc_dt))

    def _fma(self, acc: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:
        b = self.b
        if self.acc_dt.kind == "f":
            p = b.fmul(x, y)
            p.flags.append("contract")
            s = b.fadd(acc, p)
            s.flags.append("contract")
            return s
        if self.acc_dt == np.dtype(bool):
            # NumPy's boolean product: any(a & b), an OR of ANDs (the integer sum of i1
            # products wrapped to their parity: True @ True twice was False)
            return b.or_(acc, b.and_(x, y))
        return b.add(acc, b.mul(x, y))

    def _emit_tiles(self) -> None:
        b, mm, c = self.b, self.mm, self.const
        acc_ty = scalar.llvm_type(self.acc_dt)
        tid, _ntid, ctaid, nctaid = self.thread_ids()
        tx, ty = b.urem(tid, c(BN // TN)), b.udiv(tid, c(BN // TN))
        M, N, K = mm["M"], mm["N"], mm["K"]
        mt, nt = self.ceil_div(M, BM), self.ceil_div(N, BN)
        nbatch: ir.Value = c(1)
        for d in range(self.n_batch):
            nbatch = b.mul(nbatch, mm[f"b{d}_ext"])
        ntiles = b.mul(nbatch, b.mul(mt, nt))
        a_s = self.smem("As", acc_ty, BK * A_LD)
        b_s = self.smem("Bs", acc_ty, BK * BN)
        accs = [[self.alloca(acc_ty) for _ in range(TN)] for _ in range(TM)]
        with self.loop(ctaid, ntiles, nctaid) as t:
            jt = b.urem(t, nt)
            rest = b.udiv(t, nt)
            it = b.urem(rest, mt)
            bt = b.udiv(rest, mt)
            m0, n0 = b.mul(it, c(BM)), b.mul(jt, c(BN))
            # batch offsets of A, B, C
            offs = {"A": mm["A_off"], "B": mm["B_off"], "C": mm["C_off"]}
            bidx: list[ir.Value] = []
            rem = bt
            for d in reversed(range(self.n_batch)):
                ext = mm[f"b{d}_ext"]
                i = b.urem(rem, ext) if d else rem
                rem = b.udiv(rem, ext)
                bidx.insert(0, i)
                for x in "ABC":
                    offs[x] = b.add(offs[x], b.mul(i, mm[f"b{d}_{x}"]))
            for row in accs:
                for a in row:
                    b.store(scalar.constant(0, self.acc_dt), a)
            with self.loop(c(0), K, c(BK)) as k0:
                for e in range(BM * BK // MATMUL_THREADS):     # A tile: BM x BK
                    q = b.add(tid, c(e * MATMUL_THREADS))
                    kk, mi = b.urem(q, c(BK)), b.udiv(q, c(BK))
                    gm, gk = b.add(m0, mi), b.add(k0, kk)
                    ok = b.and_(b.icmp_signed("<", gm, M), b.icmp_signed("<", gk, K))
                    off = b.add(offs["A"], b.add(b.mul(gm, mm["A_sm"]), b.mul(gk, mm["A_sk"])))
                    b.store(self._load_elem(self.a_ptr, off, ok),
                            b.gep(a_s, [b.add(b.mul(kk, c(A_LD)), mi)]))
                for e in range(BK * BN // MATMUL_THREADS):     # B tile: BK x BN
                    q = b.add(tid, c(e * MATMUL_THREADS))
                    ni, kk = b.urem(q, c(BN)), b.udiv(q, c(BN))
                    gk, gn = b.add(k0, kk), b.add(n0, ni)
                    ok = b.and_(b.icmp_signed("<", gk, K), b.icmp_signed("<", gn, N))
                    off = b.add(offs["B"], b.add(b.mul(gk, mm["B_sk"]), b.mul(gn, mm["B_sn"])))
                    b.store(self._load_elem(self.b_ptr, off, ok),
                            b.gep(b_s, [b.add(b.mul(kk, c(BN)), ni)]))
                self.nv.barrier(b)
                with self.loop(c(0), c(BK)) as kk:
                    av = [b.load(b.gep(a_s, [b.add(b.mul(kk, c(A_LD)),
                                                   b.add(b.mul(ty, c(TM)), c(i)))]))
                          for i in range(TM)]
                    bv = [b.load(b.gep(b_s, [b.add(b.mul(kk, c(BN)),
                                                   b.add(b.mul(tx, c(TN)), c(j)))]))
                          for j in range(TN)]
                    for i in range(TM):
                        for j in range(TN):
                            b.store(self._fma(b.load(accs[i][j]), av[i], bv[j]), accs[i][j])
                self.nv.barrier(b)
            for i in range(TM):
                for j in range(TN):
                    gm = b.add(m0, b.add(b.mul(ty, c(TM)), c(i)))
                    gn = b.add(n0, b.add(b.mul(tx, c(TN)), c(j)))
                    ok = b.and_(b.icmp_signed("<", gm, M), b.icmp_signed("<", gn, N))
                    with b.if_then(ok):
                        v = b.load(accs[i][j])
                        if self.acc_dt != self.dtype:
                            v = scalar.cast(b, v, self.acc_dt, self.dtype)
                        self._output(v, bidx, gm, gn, offs["C"])

    def _output(self, v: ir.Value, bidx: list[ir.Value], gm: ir.Value, gn: ir.Value,
                c_off: ir.Value) -> None:
        b, mm = self.b, self.mm
        if self.store_c:
            off = b.add(c_off, b.add(b.mul(gm, mm["C_sm"]), b.mul(gn, mm["C_sn"])))
            scalar.store_value(b, v, b.gep(self.c_ptr, [off]), self.dtype)
        if self.geo is None:
            return
        # Space index of this output element, then the epilogue's (merged) loop variables.
        idx: dict[int, ir.Value] = {}
        exts: dict[int, ir.Value] = {}
        for d in range(self.n_batch):
            idx[d], exts[d] = bidx[d], mm[f"b{d}_ext"]
        m_dim, n_dim = self.out_dims
        if m_dim is not None:
            idx[m_dim], exts[m_dim] = gm, mm["M"]
        if n_dim is not None:
            idx[n_dim], exts[n_dim] = gn, mm["N"]
        for g, dims in enumerate(self.geo.groups):
            lin: ir.Value = self.const(0)
            for d in dims:
                lin = b.add(b.mul(lin, exts[d]), idx[d])
            self.loop_vars[g] = lin
        memo = {id(e): v for e in self._c_loads()}
        self._store_roots(list(enumerate(self.kernel.stores)), memo)

    def _c_loads(self) -> list[KLoad]:
        """The epilogue's loads of C (identity index): they read the accumulator instead."""
        if not hasattr(self, "_c_load_list"):
            out, seen = [], set()
            stack: list[KExpr] = list(self.kernel.root_exprs)
            while stack:
                e = stack.pop()
                if id(e) in seen:
                    continue
                seen.add(id(e))
                if isinstance(e, KLoad) and self.kernel.body.accesses[e.access].buffer is self.node:
                    out.append(e)
                elif isinstance(e, KOp):
                    stack.extend(e.args)
                elif isinstance(e, KNested):
                    stack.append(e.expr)
            self._c_load_list = out
        return self._c_load_list


# ==========================================================================================
# Strided copies: a view gathered into a C-contiguous buffer, or scattered back into one
# ==========================================================================================

def copy_kernel_ir(itemsize: int, name: str, scatter: bool = False) -> str:
    """``dst[i] = src[off + sum(idx_d(i) * stride_d)]`` for i < n (a gather), or with
    ``scatter`` ``dst[off + sum(idx_d(i) * stride_d)] = src[i]``, with ``idx`` the row-major
    decomposition of i over ``COPY_MAX_RANK`` extents (leading ones padded with 1); strides
    may be negative. Arguments: dst, src, n, off, extents..., strides... (elements, i64)."""
    module = ir.Module(name=name)
    ty = ir.IntType(8 * itemsize)
    ptr = ty.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr] + [I64] * (
        2 + 2 * COPY_MAX_RANK)), name=name)
    fn.calling_convention = "ptx_kernel"
    dst, src, n, off = fn.args[:4]
    dst.add_attribute("noalias")
    src.add_attribute("noalias")
    exts = fn.args[4:4 + COPY_MAX_RANK]
    strides = fn.args[4 + COPY_MAX_RANK:]
    entry, head, body, done = (fn.append_basic_block(x) for x in ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    nv = _Nvvm(module)
    tid, ntid, ctaid, nctaid = (nv.sreg(b, r) for r in ("tid.x", "ntid.x", "ctaid.x", "nctaid.x"))
    start, step = b.add(b.mul(ctaid, ntid), tid), b.mul(nctaid, ntid)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(start, entry)
    b.cbranch(b.icmp_signed("<", i, n), body, done)
    b.position_at_end(body)
    rem, strided = i, off
    for d in reversed(range(COPY_MAX_RANK)):
        idx = b.urem(rem, exts[d]) if d else rem
        rem = b.udiv(rem, exts[d]) if d else rem
        strided = b.add(strided, b.mul(idx, strides[d]))
    if scatter:
        b.store(b.load(b.gep(src, [i])), b.gep(dst, [strided]))
    else:
        b.store(b.load(b.gep(src, [strided])), b.gep(dst, [i]))
    nxt = b.add(i, step)
    i.add_incoming(nxt, body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


__all__ = ["GpuKernelLowering", "MatmulLowering", "copy_kernel_ir", "COPY_MAX_RANK"]
