"""The GPU's sorts: ``sort`` and ``argsort`` of rows that fit a block's shared memory, as a
bitonic network per row (the device implementations of the two external ops), and the order
statistics that read sorted rows: ``np.median`` and ``np.nanmedian`` here, ``np.quantile``,
``np.percentile`` and their nan* variants in ``quantile.py``.

A block takes a row (grid-stride over rows), loads it into shared memory beside each
element's position, pads it to a power of two ``P`` and runs the log2(P)(log2(P)+1)/2
compare-exchange steps of a bitonic sort, most of them in registers and across a warp's
lanes, the rest in shared memory (``sort_kernel_ir``). The order is NumPy's: NaN
after every number, and an element goes before another when its value is smaller or, equal
values (+0.0 and -0.0 included), when its position is (so the sort is stable: argsort's ties
come in their original order, which is NumPy's ``kind="stable"`` and a valid order for its
default kind; divergence ``gpu-sort-ties``). The padding's positions are past the row's end, so
it sorts after everything and is never stored.

Rows longer than ``max_row(dtype)`` (4096 elements of up to 4 bytes, 2048 of 8: 32 or 24 KiB
of shared memory) are sorted by the radix sort over all the blocks (``radix_sort.py``); the
host (NumPy's sorts) takes float16 rows longer than that and a machine without a GPU (the
emulator runs these kernels too).
"""
from __future__ import annotations

import ctypes
import math
import threading
from typing import Any, Callable, Sequence

import numpy as np
from llvmlite import ir

from ..ops import EXTERNALS
from ..ops.external import DeviceBuffer
from .array import _c_strides
from .libraries import row_groups

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
_KERNELS: dict[str, tuple[str, str, str]] = {}   # dtype -> (name, ir, ptx)
_lock = threading.Lock()


# The block sort's threads each hold PER_THREAD elements; a row's network is at least
# MIN_NETWORK elements (a warp of threads), padded; shared memory only for steps of j >= WARP_SPAN.
PER_THREAD = 8
WARP_SPAN = 32 * PER_THREAD
MIN_NETWORK = WARP_SPAN


def max_row(dtype: np.dtype) -> int:
    """The longest row a block sorts in shared memory."""
    return 4096 if np.dtype(dtype).itemsize <= 4 else 2048


def _key_type(dtype: np.dtype) -> ir.Type:
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return ir.HalfType()
    if dtype == np.float32:
        return ir.FloatType()
    if dtype == np.float64:
        return ir.DoubleType()
    return ir.IntType(8 * dtype.itemsize)


def sortable(dtype: Any) -> bool:
    """The dtypes of the radix sort and the order statistics (and of the block sort)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iub" or dtype in (np.dtype(np.float32), np.dtype(np.float64))


def block_sortable(dtype: Any) -> bool:
    """The dtypes of the block sort: ``sortable``'s and float16 (its rows longer than a
    block, and its medians and quantiles, which NumPy rounds through float32, run on the
    host)."""
    return sortable(dtype) or np.dtype(dtype) == np.float16


class _Loop:
    """``for (i = start; i < stop; i = step(i))`` on an IRBuilder."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, start: ir.Value,
                 cond: Callable[[ir.Value], ir.Value], name: str):
        self.b, self.fn = b, fn
        self.pre = b.block
        self.head = fn.append_basic_block(f"{name}_head")
        self.body = fn.append_basic_block(f"{name}_body")
        self.done = fn.append_basic_block(f"{name}_done")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.var = b.phi(start.type)
        self.var.add_incoming(start, self.pre)
        b.cbranch(cond(self.var), self.body, self.done)
        b.position_at_end(self.body)

    def close(self, nxt: ir.Value) -> None:
        self.var.add_incoming(nxt, self.b.block)
        self.b.branch(self.head)
        self.b.position_at_end(self.done)

    def carry(self, start: ir.Value) -> ir.Instruction:
        """A value carried around the loop, ``start`` (defined before it) on entry: a phi in
        its header, which the caller gives the body's value with ``add_incoming(value,
        b.block)`` before ``close``; readable after the loop too. Leaves the builder where
        it was."""
        here = self.b.block
        self.b.position_at_start(self.head)
        phi = self.b.phi(start.type)
        phi.add_incoming(start, self.pre)
        self.b.position_at_end(here)
        return phi


def sreg(b: ir.IRBuilder, reg: str) -> ir.Value:
    """The PTX special register ``reg`` (``tid.x``, ``ntid.x``, ...) as an i64."""
    module = b.module
    name = f"llvm.nvvm.read.ptx.sreg.{reg}"
    f = module.globals.get(name) or ir.Function(module, ir.FunctionType(I32, []), name)
    return b.zext(b.call(f, []), I64)


def valid_count(b: ir.IRBuilder, fn: ir.Function, src: ir.Value, base: ir.Value, n: ir.Value,
                nanrows: ir.Value, tag: str) -> ir.Value:
    """The values of the sorted row at ``src[base:base + n]`` before its first NaN (NaN
    sorts last), by a binary search; ``n`` unless ``nanrows``."""
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    lo0 = b.select(b.icmp_signed("!=", nanrows, zero), zero, n)
    pre = b.block
    head = fn.append_basic_block(f"{tag}_head")
    body = fn.append_basic_block(f"{tag}_body")
    done = fn.append_basic_block(f"{tag}_done")
    b.branch(head)
    b.position_at_end(head)
    lo, hi = b.phi(I64), b.phi(I64)
    lo.add_incoming(lo0, pre)
    hi.add_incoming(n, pre)
    b.cbranch(b.icmp_signed("<", lo, hi), body, done)
    b.position_at_end(body)
    mid = b.ashr(b.add(lo, hi), one)
    v = b.load(b.gep(src, [b.add(base, mid)]))
    isnan = b.fcmp_unordered("uno", v, v)
    lo.add_incoming(b.select(isnan, lo, b.add(mid, one)), body)
    hi.add_incoming(b.select(isnan, mid, hi), body)
    b.branch(head)
    b.position_at_end(done)
    return lo


def _ordered_key(b: ir.IRBuilder, v: ir.Value, dtype: np.dtype, width: int) -> ir.Value:
    """``v`` as an unsigned ``width``-bit integer whose order is NumPy's sort order: numbers
    by value (-0.0 and +0.0 the same key: their order is their positions'), every NaN after
    +inf with the all-ones key (which the padding shares; positions order them)."""
    it = ir.IntType(width)
    sign = ir.Constant(it, -(1 << (width - 1)))   # (LLVM's integer constants are signed)
    if dtype.kind == "f":   # in the float's own width, then widened (float16: 16 bits)
        own = ir.IntType(8 * dtype.itemsize)
        top = ir.Constant(own, -(1 << (own.width - 1)))
        u = b.bitcast(v, own)
        negative = b.icmp_unsigned("!=", b.and_(u, top), ir.Constant(own, 0))
        key = b.select(negative, b.not_(u), b.or_(u, top))
        zero = b.icmp_unsigned("==", b.and_(u, ir.Constant(own, (1 << (own.width - 1)) - 1)),
                               ir.Constant(own, 0))
        key = b.select(zero, top, key)
        key = b.select(b.fcmp_unordered("uno", v, v), ir.Constant(own, -1), key)
        return b.zext(key, it) if own.width < width else key
    if v.type.width < width:
        v = b.sext(v, it) if dtype.kind == "i" else b.zext(v, it)
    return b.xor(v, sign) if dtype.kind == "i" else v


def sort_kernel_ir(dtype: Any, name: str) -> str:
    """The kernel ``name(src, vals, idx, nrows, n, P, s_row, s_el, d_row, d_el, want_vals,
    want_idx)``: rows of ``n`` elements at ``src + row * s_row + i * s_el`` sorted into
    ``vals`` / their positions into ``idx`` (int64) at ``row * d_row + i * d_el``; ``P`` the
    power of two at least n (at most ``max_row``); strides in elements.

    Each element is sorted as one unsigned key (``_ordered_key``) with its position beside it:
    for dtypes of up to 4 bytes one 64-bit word, key above position, so that a single
    unsigned compare orders by value, then position (stable, and every key distinct); for
    8-byte dtypes a 64-bit key and a 32-bit position compared in turn. The padding is the
    largest key at positions past the row's end. Each compare-exchange of (i, i + j) puts
    the one that goes first at i (or at i + j in a descending run) and the other at the other
    place, with no branch. At the end each value is read again from the row at its position (the keys do
    not keep -0.0's sign or a NaN's payload), into shared memory first, then stored (the
    output may be the row itself).

    The network: launched with exactly max(P, MIN_NETWORK) / PER_THREAD threads (whole
    warps), thread t holding elements t * PER_THREAD + e in registers; a row shorter than a
    warp's MIN_NETWORK slots runs only the steps of its own P. A step of
    j < PER_THREAD compares two of a thread's own elements; j < WARP_SPAN, element e of lane
    l and of lane l ^ (j / PER_THREAD), exchanged by a shuffle, each lane keeping the one
    its place gets; only the steps of j >= WARP_SPAN (the first log2(P / WARP_SPAN) steps of
    each run of length k > WARP_SPAN) go through shared memory, a barrier after each: 10 of
    the 78 steps at P = 4096, where a network in shared memory has 78 barriers."""
    dtype = np.dtype(dtype)
    kt = _key_type(dtype)
    wide = dtype.itemsize == 8
    cap = max_row(dtype)
    module = ir.Module(name=name)
    ptr = kt.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, I64.as_pointer(1)] +
                                             [I64] * 9), name=name)
    fn.calling_convention = "ptx_kernel"
    src, vals, idx, nrows, n, P, s_row, s_el, d_row, d_el, want_vals, want_idx = fn.args
    keys_t = ir.ArrayType(I64, cap)
    keys_g = ir.GlobalVariable(module, keys_t, f"{name}_keys", addrspace=3)
    shared = [(keys_g, keys_t)]
    if wide:
        pos_t = ir.ArrayType(I32, cap)
        pos_g = ir.GlobalVariable(module, pos_t, f"{name}_pos", addrspace=3)
        shared.append((pos_g, pos_t))
    for g, t in shared:
        g.linkage, g.initializer, g.align = "internal", ir.Constant(t, ir.Undefined), 16
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    low32 = ir.Constant(I64, 0xFFFFFFFF)
    value_bits = ir.IntType(8 * dtype.itemsize)

    def barrier() -> None:
        f = module.globals.get("llvm.nvvm.barrier.cta.sync.aligned.all") or \
            ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]),
                        "llvm.nvvm.barrier.cta.sync.aligned.all")
        b.call(f, [ir.Constant(I32, 0)])

    def key_at(i: ir.Value) -> ir.Value:
        return b.gep(keys_g, [ir.Constant(I32, 0), i])

    def pos_at(i: ir.Value) -> ir.Value:
        return b.gep(pos_g, [ir.Constant(I32, 0), i])

    tid, ntid, ctaid, nctaid = (sreg(b, r) for r in ("tid.x", "ntid.x", "ctaid.x", "nctaid.x"))
    half = b.lshr(P, one)
    rows = _Loop(b, fn, ctaid, lambda r: b.icmp_signed("<", r, nrows), "row")
    row = rows.var
    base_s, base_d = b.mul(row, s_row), b.mul(row, d_row)
    # the keys (and positions); the padding's is the largest key
    # (the block's PER_THREAD * ntid slots: P's, or a warp's when P is smaller, the slots past
    # P padding that the network's runs of length k <= P never mix with the first P)
    slots = b.mul(ntid, ir.Constant(I64, PER_THREAD))
    load = _Loop(b, fn, tid, lambda i: b.icmp_signed("<", i, slots), "load")
    i = load.var
    inside = b.icmp_signed("<", i, n)
    here = b.block
    with b.if_then(inside):
        v = b.load(b.gep(src, [b.add(base_s, b.mul(i, s_el))]))
        loaded = _ordered_key(b, v, dtype, 64 if wide else 32)
        from_row = b.block
    key = b.phi(loaded.type)
    key.add_incoming(loaded, from_row)
    key.add_incoming(ir.Constant(loaded.type, -1), here)
    if wide:
        b.store(key, key_at(i))
        b.store(b.trunc(i, I32), pos_at(i))
    else:
        b.store(b.or_(b.shl(b.zext(key, I64), ir.Constant(I64, 32)), i), key_at(i))
    load.close(b.add(i, ntid))
    barrier()
    # the bitonic network: a thread holds PER_THREAD consecutive elements in registers
    # (steps of j < PER_THREAD inside a thread, of j < WARP_SPAN across a warp's lanes by
    # shuffles); only the steps of j >= WARP_SPAN go through shared memory
    entry = ir.IRBuilder(fn.entry_basic_block)
    entry.position_at_start(fn.entry_basic_block)
    reg_k = [entry.alloca(I64, name=f"k{e}") for e in range(PER_THREAD)]
    reg_p = [entry.alloca(I32, name=f"p{e}") for e in range(PER_THREAD)] if wide else None
    first = b.mul(tid, ir.Constant(I64, PER_THREAD))   # this thread's first element
    lane = b.trunc(b.and_(tid, ir.Constant(I64, 31)), I32)
    span = ir.Constant(I64, WARP_SPAN)

    def to_registers() -> None:
        for e in range(PER_THREAD):
            at = b.add(first, ir.Constant(I64, e))
            b.store(b.load(key_at(at)), reg_k[e])
            if wide:
                b.store(b.load(pos_at(at)), reg_p[e])

    def to_shared() -> None:
        for e in range(PER_THREAD):
            at = b.add(first, ir.Constant(I64, e))
            b.store(b.load(reg_k[e]), key_at(at))
            if wide:
                b.store(b.load(reg_p[e]), pos_at(at))

    def goes_first(ka, pa, kb, pb) -> ir.Value:
        less = b.icmp_unsigned("<", ka, kb)
        if wide:
            less = b.or_(less, b.and_(b.icmp_unsigned("==", ka, kb),
                                      b.icmp_signed("<", pa, pb)))
        return less

    def shuffle(v: ir.Value, src_lane: ir.Value) -> ir.Value:
        words = [v] if v.type == I32 else [b.trunc(v, I32),
                                          b.trunc(b.lshr(v, ir.Constant(I64, 32)), I32)]
        f = module.globals.get("llvm.nvvm.shfl.sync.idx.i32") or ir.Function(
            module, ir.FunctionType(I32, [I32] * 4), "llvm.nvvm.shfl.sync.idx.i32")
        got = [b.call(f, [ir.Constant(I32, -1), w, src_lane, ir.Constant(I32, 31)])
               for w in words]
        if v.type == I32:
            return got[0]
        return b.or_(b.zext(got[0], I64), b.shl(b.zext(got[1], I64), ir.Constant(I64, 32)))

    to_registers()
    ks = _Loop(b, fn, ir.Constant(I64, 2), lambda k: b.icmp_signed("<=", k, P), "k")
    k = ks.var
    j0 = b.lshr(k, one)
    with b.if_then(b.icmp_signed(">=", j0, span)):   # (uniform over the block)
        to_shared()
        barrier()
        js = _Loop(b, fn, j0, lambda j: b.icmp_signed(">=", j, span), "j")
        j = js.var
        pairs = _Loop(b, fn, tid, lambda p: b.icmp_signed("<", p, half), "pair")
        p = pairs.var
        lo = b.sub(b.shl(p, one), b.and_(p, b.sub(j, one)))
        hi = b.add(lo, j)
        ka, kb = b.load(key_at(lo)), b.load(key_at(hi))
        pa, pb = (b.load(pos_at(lo)), b.load(pos_at(hi))) if wide else (None, None)
        ascending = b.icmp_signed("==", b.and_(lo, k), zero)
        a_first = b.icmp_unsigned("==", goes_first(ka, pa, kb, pb), ascending)
        b.store(b.select(a_first, ka, kb), key_at(lo))
        b.store(b.select(a_first, kb, ka), key_at(hi))
        if wide:
            b.store(b.select(a_first, pa, pb), pos_at(lo))
            b.store(b.select(a_first, pb, pa), pos_at(hi))
        pairs.close(b.add(p, ntid))
        barrier()
        js.close(b.lshr(j, one))
        to_registers()   # (this thread's own elements: no other thread writes them now)
    # across the lanes of a warp: the partner of element i is the same element of lane ^ m
    top = b.select(b.icmp_signed("<", j0, span), j0, b.lshr(span, one))
    ws = _Loop(b, fn, top, lambda j: b.icmp_signed(">=", j, ir.Constant(I64, PER_THREAD)),
               "warp")
    j = ws.var
    m = b.lshr(j, ir.Constant(I64, PER_THREAD.bit_length() - 1))
    src_lane = b.xor(lane, b.trunc(m, I32))
    lower = b.icmp_signed("==", b.and_(tid, m), zero)
    for e in range(PER_THREAD):
        i = b.add(first, ir.Constant(I64, e))
        mine_k = b.load(reg_k[e])
        other_k = shuffle(mine_k, src_lane)
        mine_p = b.load(reg_p[e]) if wide else None
        other_p = shuffle(mine_p, src_lane) if wide else None
        ascending = b.icmp_signed("==", b.and_(i, k), zero)
        keep_first = b.icmp_unsigned("==", lower, ascending)   # the one that goes first
        take_mine = b.icmp_unsigned("==", goes_first(mine_k, mine_p, other_k, other_p),
                                    keep_first)
        b.store(b.select(take_mine, mine_k, other_k), reg_k[e])
        if wide:
            b.store(b.select(take_mine, mine_p, other_p), reg_p[e])
    ws.close(b.lshr(j, one))
    # inside a thread (j = PER_THREAD / 2, ..., 1, those below k)
    jj = PER_THREAD // 2
    while jj >= 1:
        with b.if_then(b.icmp_signed(">=", k, ir.Constant(I64, 2 * jj))):
            for e in range(PER_THREAD):
                if e & jj:
                    continue
                f = e | jj
                ka, kb = b.load(reg_k[e]), b.load(reg_k[f])
                pa, pb = (b.load(reg_p[e]), b.load(reg_p[f])) if wide else (None, None)
                i = b.add(first, ir.Constant(I64, e))
                ascending = b.icmp_signed("==", b.and_(i, k), zero)
                a_first = b.icmp_unsigned("==", goes_first(ka, pa, kb, pb), ascending)
                b.store(b.select(a_first, ka, kb), reg_k[e])
                b.store(b.select(a_first, kb, ka), reg_k[f])
                if wide:
                    b.store(b.select(a_first, pa, pb), reg_p[e])
                    b.store(b.select(a_first, pb, pa), reg_p[f])
        jj //= 2
    ks.close(b.shl(k, one))
    to_shared()
    barrier()
    # each value read again at its position, kept in shared memory beside the position
    gather = _Loop(b, fn, tid, lambda i: b.icmp_signed("<", i, n), "gather")
    i = gather.var
    where = b.sext(b.load(pos_at(i)), I64) if wide else b.and_(b.load(key_at(i)), low32)
    v = b.load(b.gep(src, [b.add(base_s, b.mul(where, s_el))]))
    bits = b.bitcast(v, value_bits) if dtype.kind == "f" else v
    if wide:
        b.store(bits, key_at(i))
    else:
        b.store(b.or_(b.shl(where, ir.Constant(I64, 32)), b.zext(bits, I64)), key_at(i))
    gather.close(b.add(i, ntid))
    barrier()   # (every read of the row is done: the output may be the row)
    stores = _Loop(b, fn, tid, lambda i: b.icmp_signed("<", i, n), "store")
    i = stores.var
    at = b.add(base_d, b.mul(i, d_el))
    word = b.load(key_at(i))
    where = b.sext(b.load(pos_at(i)), I64) if wide else b.lshr(word, ir.Constant(I64, 32))
    with b.if_then(b.icmp_signed("!=", want_vals, zero)):
        bits = word if wide else b.trunc(word, value_bits)
        b.store(b.bitcast(bits, kt) if dtype.kind == "f" else bits, b.gep(vals, [at]))
    with b.if_then(b.icmp_signed("!=", want_idx, zero)):
        b.store(where, b.gep(idx, [at]))
    stores.close(b.add(i, ntid))
    barrier()   # the next row reuses the shared arrays
    rows.close(b.add(row, nctaid))
    b.ret_void()
    return str(module)


def _kernel(dtype: np.dtype, kind: str = "sort") -> tuple[str, str, str]:
    """(entry name, IR, PTX) of the ``kind`` ("sort", "median") kernel for ``dtype``,
    made once per process (the PTX through the disk cache)."""
    from . import ptx as ptxmod
    from .driver import current_target
    key = kind + np.dtype(dtype).str
    with _lock:
        if key not in _KERNELS:
            name = f"ta_{kind}_{np.dtype(dtype).name}"
            make = sort_kernel_ir if kind == "sort" else median_kernel_ir
            text = make(dtype, name)
            _KERNELS[key] = (name, text, ptxmod.compile_ptx(text, current_target()))
        return _KERNELS[key]


def _sort_rows(dev: Any, src: Any, vals: Any, idx: Any, axis: int,
               dst_strides: Sequence[int] | None = None) -> Any:
    """Sort ``src``'s rows along ``axis`` into ``vals`` and/or their positions into ``idx``
    (pointers of C-contiguous arrays of src's shape, or laid out by ``dst_strides``)."""
    dtype = src.dtype
    shape = tuple(src.shape)
    if not shape:
        return NotImplemented
    n = shape[axis]
    if not block_sortable(dtype) or not hasattr(dev, "load"):
        return NotImplemented
    if n > max_row(dtype):   # longer than a block's shared memory: over all the blocks
        if not sortable(dtype):
            return NotImplemented
        from .radix_sort import sort_rows
        return sort_rows(dev, src, vals, idx, axis, dst_strides)
    if math.prod(shape) == 0:
        return None
    out = vals if vals is not None else idx
    dst = list(dst_strides) if dst_strides is not None else list(_c_strides(out.shape, 1))
    group = row_groups([(shape[d], src.strides[d], dst[d]) for d in range(len(shape))
                        if d != axis])
    rows, s_row, d_row, starts = group if group is not None else (1, 0, 0, [(0, 0)])
    name, text, ptx = _kernel(dtype)
    fn = dev.load(ptx, [name], text)[name]
    P = 1 << max(n - 1, 0).bit_length()
    # (a warp at least: a multiple of the warp; at most max_row / PER_THREAD)
    block = max(P, MIN_NETWORK) // PER_THREAD
    if block > fn.max_threads:   # (never on sm_90: 48 registers a thread at 512 threads)
        return NotImplemented
    from .driver import sm_count
    grid = max(1, min(rows, 32 * sm_count()))
    item, d_el = dtype.itemsize, dst[axis]
    for s_off, d_off in starts:
        _launch(dev, fn, grid, block,
                [src.ptr + s_off * item, (vals.ptr + d_off * item) if vals is not None else 0,
                 (idx.ptr + d_off * 8) if idx is not None else 0, rows, n, P, s_row,
                 src.strides[axis], d_row, d_el, int(vals is not None), int(idx is not None)])
    return None


def _launch(dev: Any, fn: Any, grid: int, block: int, args: Sequence[int]) -> None:
    """One launch with 8-byte arguments (the driver copies them at the call)."""
    packed = (ctypes.c_uint64 * len(args))(*[a & ((1 << 64) - 1) for a in args])
    base = ctypes.addressof(packed)
    addrs = (ctypes.c_uint64 * len(args))(*range(base, base + 8 * len(args), 8))
    dev.launch(fn, grid, block, ctypes.addressof(addrs))


def median_kernel_ir(dtype: Any, name: str) -> str:
    """``name(sorted, out, nrows, n, nanrows, odd_mean)``: NumPy's median of each sorted row
    of ``n`` (C-contiguous rows): the middle element, or the mean of the two middle ones,
    ``(a + b) / 2`` in the dtype (``np.mean`` of two elements); NaN when the row's last
    element is (a NaN anywhere: NumPy's ``_median_nancheck``). ``nanrows`` (np.nanmedian):
    the median of the values before the row's first NaN, NaN for none; ``odd_mean``: an odd
    count's middle ``a`` as ``(a + a) / 2`` (NumPy's masked median, which np.nanmedian takes
    along an axis of fewer than 600 of an array of several dimensions: infinite past half
    the dtype's largest value). Integer and bool rows give float64 medians, as NumPy's mean
    of the middle values does (each converted to float64, then ``(a + b) / 2``); they hold
    no NaN."""
    dtype = np.dtype(dtype)
    kt = _key_type(dtype)
    floats = dtype.kind == "f"
    rt = kt if floats else ir.DoubleType()
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [
        kt.as_pointer(1), rt.as_pointer(1)] + [I64] * 4), name=name)
    fn.calling_convention = "ptx_kernel"
    src, out, nrows, n, nanrows, odd_mean = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)

    tid, ntid, ctaid, nctaid = (sreg(b, r) for r in ("tid.x", "ntid.x", "ctaid.x", "nctaid.x"))
    rows = _Loop(b, fn, b.add(b.mul(ctaid, ntid), tid), lambda r: b.icmp_signed("<", r, nrows),
                 "row")
    base = b.mul(rows.var, n)
    valid = valid_count(b, fn, src, base, n, nanrows, "valid") if floats else n
    none = b.icmp_signed("==", valid, zero)
    count = b.select(none, one, valid)            # (an all-NaN row reads position 0)
    lo = b.sdiv(b.sub(count, one), ir.Constant(I64, 2))
    hi = b.sdiv(count, ir.Constant(I64, 2))
    odd = b.icmp_signed("!=", b.srem(count, ir.Constant(I64, 2)), zero)
    a = b.load(b.gep(src, [b.add(base, lo)]))
    c = b.load(b.gep(src, [b.add(base, hi)]))
    if not floats:   # NumPy's mean of integers: in float64
        convert = b.sitofp if dtype.kind == "i" else b.uitofp
        a, c = convert(a, rt), convert(c, rt)
    mean = b.fdiv(b.fadd(a, c), ir.Constant(rt, 2.0))
    m = b.select(b.and_(odd, b.icmp_signed("==", odd_mean, zero)), a, mean)
    if floats:
        last = b.load(b.gep(src, [b.add(base, b.sub(n, one))]))
        nan = b.select(b.icmp_signed("!=", nanrows, zero), none,
                       b.fcmp_unordered("uno", last, last))
        m = b.select(nan, ir.Constant(rt, float("nan")), m)
    b.store(m, b.gep(out, [rows.var]))
    rows.close(b.add(rows.var, b.mul(nctaid, ntid)))
    b.ret_void()
    return str(module)


# np.nanquantile's plan has an entry per (row length, q), 40 bytes each, copied to the device
# with each call: rows of up to 65536 values for one q on the device, longer ones on the host
NAN_QUANTILE_MAX_ENTRIES = 1 << 16


def _sorted_rows(dev: Any, src: Any, axis: tuple | None) -> Any:
    """``src``'s rows along ``axis`` (a tuple of axes, None: all of them) sorted into a
    scratch block, the rows in C order of the other axes and each row contiguous:
    ``(scratch, rows, n, keep)``, ``keep`` the scratch blocks to hold until the sort is
    queued; or NotImplemented (empty rows, a dtype the sorts do not take). Several axes
    (NumPy's ``_ureduce`` merges them into one, last) are first gathered into a contiguous
    copy, the kept axes first; their order within a row does not matter to a sort."""
    from .copy import COPY_MAX_RANK, strided_copy
    shape = tuple(src.shape)
    reduced = tuple(range(len(shape))) if axis is None else tuple(axis)
    n = math.prod(shape[d] for d in reduced)
    if n == 0:
        return NotImplemented
    rows = math.prod(shape) // n
    keep: list = []
    if len(reduced) == 1:
        ax = reduced[0]
    else:
        kept = [d for d in range(len(shape)) if d not in reduced]
        order = kept + list(reduced)
        view_shape = [shape[d] for d in order]
        view_strides = [src.strides[d] for d in order]
        if view_strides != list(_c_strides(tuple(view_shape), 1)):
            if len(order) > COPY_MAX_RANK:
                return NotImplemented
            gathered = dev.allocator.allocate(rows * n * src.dtype.itemsize)
            keep += [gathered, strided_copy(dev, gathered.ptr, src.ptr, view_shape,
                                            view_strides, 0, src.dtype.itemsize)]
            ptr = gathered.ptr
        else:
            ptr = src.ptr
        src = DeviceBuffer(ptr, (rows, n), (n, 1), src.dtype)
        shape, ax = (rows, n), 1
    moved = [shape[d] for d in range(len(shape)) if d != ax] + [n]
    c = _c_strides(tuple(moved), 1)
    dst = [0] * len(shape)
    for k, d in enumerate(d for d in range(len(shape)) if d != ax):
        dst[d] = c[k]
    dst[ax] = 1
    scratch = dev.allocator.allocate(max(rows * n, 1) * src.dtype.itemsize)
    if rows and _sort_rows(dev, src, scratch, None, ax, dst) is NotImplemented:
        return NotImplemented
    return scratch, rows, n, keep


def order_statistic(dev: Any, operands: list, results: list, *, func: str, q: Any,
                    q_shape: Any, q_dtype: Any, weak: bool, axis: Any, method: str,
                    keepdims: bool, ndim: int) -> Any:
    """``np.median``, ``np.quantile``, ``np.percentile`` and their nan* variants of
    float32/float64 over any axes: the rows sorted
    by the block sort (or the radix sort) into a scratch array (the axis last), then a
    thread per row picks the middle, or per (q, row) reads and interpolates as NumPy does
    (``gpu/quantile.py``). Weights, other dtypes, empty rows and nan* quantile plans past
    NAN_QUANTILE_MAX_ENTRIES run on the host."""
    out = results[0]
    if out is None:
        return None
    from ..ops.sorting import QUANTILE_FUNCS, numpy_moves_q_axes, quantile_plan
    if len(operands) != 1 or func not in ("median", "nanmedian") + QUANTILE_FUNCS or \
            numpy_moves_q_axes(dict(func=func, q_shape=q_shape, axis=axis, ndim=ndim)):
        return NotImplemented   # (NumPy's own layout: the host)
    src = operands[0]
    median = func in ("median", "nanmedian")
    if not sortable(src.dtype):   # (float16: the host)
        return NotImplemented
    plan = None
    nanrows = func.startswith("nan") and src.dtype.kind == "f"   # (integers hold no NaN)
    # NumPy's nan* functions see the array with the reduced axes merged, last: a 1-d array
    # when every axis is reduced (np.nanmedian's 1-d median), else (kept..., n)
    rows_kept = axis is not None and len(axis) < len(src.shape)
    if not median:
        n = math.prod(src.shape) if axis is None else \
            math.prod(src.shape[d] for d in axis)
        nq = math.prod(q_shape)
        # the nan* variants' plan has an entry per row length: uploaded with the call
        if nanrows and n * nq > NAN_QUANTILE_MAX_ENTRIES:
            return NotImplemented
        plan = quantile_plan(n, src.dtype, func=func, q=q, q_shape=q_shape, q_dtype=q_dtype,
                             weak=weak, method=method, lengths=nanrows)
        if plan is None or plan.dtype != out.dtype:
            return NotImplemented
    elif out.dtype != (src.dtype if src.dtype.kind == "f" else np.dtype(np.float64)):
        return NotImplemented
    sorted_ = _sorted_rows(dev, src, axis)
    if sorted_ is NotImplemented:
        return NotImplemented
    scratch, rows, n, _held = sorted_
    if rows == 0:
        return None
    if plan is not None:
        from .quantile import launch_quantiles
        launch_quantiles(dev, scratch, out, rows, n, nq, plan, src.dtype, nanrows)
        return None
    name, text, ptx = _kernel(src.dtype, "median")
    fn = dev.load(ptx, [name], text)[name]
    from .driver import sm_count
    _launch(dev, fn, max(1, min(-(-rows // 128), 32 * sm_count())), 128,
            [scratch.ptr, out.ptr, rows, n, int(nanrows),
             int(nanrows and rows_kept and n < 600)])
    return None


def sort(dev: Any, operands: list, results: list, *, axis: int, kind: str) -> Any:
    if results[0] is None:
        return None
    return _sort_rows(dev, operands[0], results[0], None, axis)


def argsort(dev: Any, operands: list, results: list, *, axis: int, kind: str) -> Any:
    if results[0] is None:
        return None
    if np.dtype(results[0].dtype) != np.dtype(np.int64):
        return NotImplemented
    return _sort_rows(dev, operands[0], None, results[0], axis)


def partition(dev: Any, operands: list, results: list, *, kth: Any, axis: int) -> Any:
    """``np.partition``: the rows sorted (stably), an arrangement NumPy's contract allows for
    every kth at once: each kth element in its sorted place, none larger before it, none
    smaller after. NumPy's introselect leaves the others in an order of its own (divergence
    gpu-partition-order)."""
    return sort(dev, operands, results, axis=axis, kind="stable")


def argpartition(dev: Any, operands: list, results: list, *, kth: Any, axis: int) -> Any:
    """``np.argpartition``: the stable argsort of the rows (see ``partition``)."""
    return argsort(dev, operands, results, axis=axis, kind="stable")


def register() -> None:
    """Make the block sort the "cuda" implementation of sort, argsort, partition and
    argpartition."""
    EXTERNALS["sort"].device["cuda"] = sort
    EXTERNALS["argsort"].device["cuda"] = argsort
    EXTERNALS["partition"].device["cuda"] = partition
    EXTERNALS["argpartition"].device["cuda"] = argpartition
    EXTERNALS["order_statistic"].device["cuda"] = order_statistic
