"""The GPU's sort of long rows: an LSD radix sort of the whole array over all the blocks
(``sort``/``argsort`` of rows longer than the block sort's ``max_row``, and so the median of
such rows).

Every element becomes an unsigned key whose integer order is NumPy's order of the values
(``_keys``): floats by their bits with the sign folded (negative values inverted, the others
with the sign bit set), -0.0 as +0.0 (equal values: they keep their positions' order), every
NaN the largest key (after +inf); signed integers with the sign bit flipped; unsigned and bool
as they are. Each element carries its position in the C order of the rows (the sorted axis
last). Passes of 8 bits from the lowest sort the (key, position) pairs by key; when there are
several rows, further passes sort them by row (the row is the position divided by the row's
length), so the pairs end grouped by row, each row's pairs in key order. Every pass is stable
and its ranks come from counting, never from thread timing: a warp per chunk (a run of
consecutive slots, read 32 at a time) counts its digits (``_hist``), an exclusive scan of the digit-major table
(``_tiles``, ``_totals``, ``_apply``: integers, exact) gives where each chunk's first key of
each digit goes, and each chunk moves its pairs there in slot order (``_place``: a lane's
place is its digit's next slot plus the number of lanes before it with the same digit, from
the warp's ``match.any``; the digit's last lane then moves that slot on). Equal keys so
keep the order of their positions: the sort is stable (NumPy's ``kind="stable"``, and a valid
order for its default kind: divergence ``gpu-sort-ties``). Finally a thread per slot writes the
value at its position and/or the position within its row (``_out``).

The chunking (``radix_chunks``) is a function of the element count only. A row that is not the
last axis of a contiguous array is gathered first and the results scattered back by the
strided copies of ``gpu/copy.py``.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Sequence

import numpy as np
from llvmlite import ir

from .array import _c_strides
from .copy import strided_copy
from .sort import _Loop, _key_type, _launch, sortable
from ..tile.gpu import RADIX, RADIX_BITS

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
ENTRIES = ("keys", "hist", "tiles", "totals", "apply", "place", "out")
SCAN_TILE = 1024      # table entries per thread of the scan's first and last step
CHUNK = 2048          # slots per chunk at least (a warp's run: 64 steps of 32)
MAX_CHUNKS = 1 << 15


def radix_chunks(n: int) -> int:
    """Chunks of the sort of n elements: a function of n only, so the work split (and so
    nothing at all: the order is by counting) does not depend on the device."""
    return max(1, min(MAX_CHUNKS, -(-n // CHUNK)))
BLOCK = 256
_KERNELS: dict[str, tuple[list[str], str, str]] = {}   # dtype -> (entry names, ir, ptx)
_lock = threading.Lock()


def key_bits(dtype: np.dtype) -> int:
    """Bits of the key type (a 32-bit key for items of up to 4 bytes)."""
    return 64 if np.dtype(dtype).itemsize == 8 else 32


class _Builder:
    """One kernel of the module: its IRBuilder, grid-stride loops and special registers."""

    def __init__(self, module: ir.Module, name: str, args: Sequence[ir.Type]):
        self.module = module
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), list(args)), name=name)
        self.fn.calling_convention = "ptx_kernel"
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        tid, ntid, ctaid, nctaid = (self.sreg(r) for r in
                                    ("tid.x", "ntid.x", "ctaid.x", "nctaid.x"))
        self.gid = self.b.add(self.b.mul(ctaid, ntid), tid)
        self.gstride = self.b.mul(nctaid, ntid)
        # warps (blocks are whole warps): the global warp number, the lane, the warp count
        self.warp = self.b.lshr(self.gid, _c(5))
        self.lane = self.b.and_(tid, _c(31))
        self.nwarps = self.b.lshr(self.gstride, _c(5))

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        return self.module.globals.get(name) or ir.Function(
            self.module, ir.FunctionType(ret, list(args)), name)

    def match_any(self, v: ir.Value) -> ir.Value:
        """The mask of the warp's lanes whose ``v`` (i32) equals this lane's."""
        fn = self.intrinsic("llvm.nvvm.match.any.sync.i32", I32, [I32, I32])
        return self.b.call(fn, [ir.Constant(I32, -1), v])

    def syncwarp(self) -> None:
        """The warp's lanes wait for each other; their memory accesses before it are
        visible to each other after it."""
        self.b.call(self.intrinsic("llvm.nvvm.bar.warp.sync", ir.VoidType(), [I32]),
                    [ir.Constant(I32, -1)])

    def sreg(self, reg: str) -> ir.Value:
        name = f"llvm.nvvm.read.ptx.sreg.{reg}"
        f = self.module.globals.get(name) or ir.Function(self.module,
                                                         ir.FunctionType(I32, []), name)
        return self.b.zext(self.b.call(f, []), I64)

    def loop(self, start: ir.Value, stop: ir.Value, step: ir.Value, body) -> None:
        """``for (i = start; i < stop; i += step) body(i)`` (unsigned compare)."""
        b = self.b
        loop = _Loop(b, self.fn, start, lambda i: b.icmp_unsigned("<", i, stop), "loop")
        body(loop.var)
        loop.close(b.add(loop.var, step))

    def umin(self, a: ir.Value, c: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_unsigned("<", a, c), a, c)

    def done(self) -> None:
        self.b.ret_void()


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def radix_module_ir(dtype: Any, name: str) -> str:
    """The kernels ``{name}_{entry}`` for each of ``ENTRIES`` (arguments in the code below;
    pointers are global, counts and strides i64)."""
    dtype = np.dtype(dtype)
    vt = _key_type(dtype)   # the value's own LLVM type (sort.py's)
    kbits = key_bits(dtype)
    kt = ir.IntType(kbits)
    vbits = 8 * dtype.itemsize
    module = ir.Module(name=name)
    vp, kp, ip = vt.as_pointer(1), kt.as_pointer(1), I64.as_pointer(1)

    def digit(g: _Builder, key: ir.Value, pos: ir.Value, shift: ir.Value, rowmode: ir.Value,
              n: ir.Value) -> ir.Value:
        """The pass's digit: of the key, or (``rowmode``) of the position's row."""
        b = g.b
        of_key = b.and_(b.lshr(b.zext(key, I64) if kbits < 64 else key, shift), _c(RADIX - 1))
        of_row = b.and_(b.lshr(b.udiv(pos, n), shift), _c(RADIX - 1))
        return b.select(b.icmp_unsigned("!=", rowmode, _c(0)), of_row, of_key)

    def each_chunk_group(g: _Builder, total: ir.Value, chunks: ir.Value, body) -> None:
        """``body(c, i, valid)`` for the slots of each chunk, a warp per chunk, 32 consecutive
        slots at a time (lane l at slot ``i``; ``valid``: i is in the chunk); every lane of
        the warp runs every step (``match.any`` needs the whole warp)."""
        b = g.b
        length = b.udiv(b.add(total, b.sub(chunks, _c(1))), chunks)

        def chunk(c: ir.Value) -> None:
            start = b.mul(c, length)
            stop = g.umin(b.add(start, length), total)

            def group(base: ir.Value) -> None:
                i = b.add(base, g.lane)
                body(c, g.umin(i, b.sub(stop, _c(1))), b.icmp_unsigned("<", i, stop))
            g.loop(start, stop, _c(32), group)
        g.loop(g.warp, chunks, g.nwarps, chunk)

    def rank(g: _Builder, d: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(lanes before this one with the same digit, whether this lane is the last with
        its digit): the lanes with its digit (``match.any``) before and after it; ``d`` is
        RADIX on lanes without a slot (they match only each other)."""
        b = g.b
        peers = b.zext(g.match_any(b.trunc(d, I32)), I64)
        below = b.sub(b.shl(_c(1), g.lane), _c(1))            # lanes before this one
        above = b.xor(b.sub(b.shl(_c(2), g.lane), _c(1)), _c(0xFFFFFFFF))   # lanes after
        popc = g.intrinsic("llvm.ctpop.i64", I64, [I64])
        r = b.call(popc, [b.and_(peers, below)])
        last = b.icmp_unsigned("==", b.and_(peers, above), _c(0))
        return r, last

    def entry(g: _Builder, c: ir.Value, d: ir.Value, chunks: ir.Value) -> ir.Value:
        """Chunk c's counter of digit d: the table is digit-major, so the scan reads it in
        memory order."""
        return g.b.add(g.b.mul(d, chunks), c)

    # keys(src, keys, pos, total): the order-preserving key of each value, and its position
    g = _Builder(module, f"{name}_keys", [vp, kp, ip, I64])
    src, keys, pos, total = g.fn.args
    b = g.b

    def make_key(i: ir.Value) -> None:
        v = b.load(b.gep(src, [i]))
        if dtype.kind == "f":
            bits = b.bitcast(b.select(b.fcmp_ordered("==", v, ir.Constant(vt, 0.0)),
                                      ir.Constant(vt, 0.0), v), kt)
            sign = ir.Constant(kt, 1 << (kbits - 1))
            neg = b.icmp_unsigned("!=", b.and_(bits, sign), ir.Constant(kt, 0))
            k = b.select(neg, b.not_(bits), b.or_(bits, sign))
            k = b.select(b.fcmp_unordered("uno", v, v), ir.Constant(kt, (1 << kbits) - 1), k)
        else:
            k = v if vbits == kbits else b.zext(v, kt)
            if dtype.kind == "i":
                k = b.xor(k, ir.Constant(kt, 1 << (vbits - 1)))
        b.store(k, b.gep(keys, [i]))
        b.store(i, b.gep(pos, [i]))
    g.loop(g.gid, total, g.gstride, make_key)
    g.done()

    # hist(keys, pos, table, shift, rowmode, n, total, chunks): each chunk's digit counts,
    # a warp per chunk: the last lane of each digit of 32 slots adds their number
    g = _Builder(module, f"{name}_hist", [kp, ip, ip] + [I64] * 5)
    keys, pos, table, shift, rowmode, n, total, chunks = g.fn.args
    b = g.b

    def clear(c: ir.Value) -> None:
        g.loop(g.lane, _c(RADIX), _c(32),
               lambda d: b.store(_c(0), b.gep(table, [entry(g, c, d, chunks)])))
    g.loop(g.warp, chunks, g.nwarps, clear)
    g.syncwarp()

    def count(c: ir.Value, i: ir.Value, valid: ir.Value) -> None:
        d = b.select(valid, digit(g, b.load(b.gep(keys, [i])), b.load(b.gep(pos, [i])), shift,
                                  rowmode, n), _c(RADIX))
        r, last = rank(g, d)
        with b.if_then(b.and_(valid, last)):
            at = b.gep(table, [entry(g, c, d, chunks)])
            b.store(b.add(b.load(at), b.add(r, _c(1))), at)
        g.syncwarp()
    each_chunk_group(g, total, chunks, count)
    g.done()

    def add_to(g: _Builder, acc: ir.Value, ptr: ir.Value, i: ir.Value) -> None:
        """acc += ptr[i]"""
        g.b.store(g.b.add(g.b.load(acc), g.b.load(g.b.gep(ptr, [i]))), acc)

    def exclusive_step(g: _Builder, acc: ir.Value, ptr: ir.Value, i: ir.Value) -> None:
        """ptr[i], acc = acc, acc + ptr[i]: one step of an exclusive scan"""
        b = g.b
        at = b.gep(ptr, [i])
        v = b.load(at)
        b.store(b.load(acc), at)
        b.store(b.add(b.load(acc), v), acc)

    def each_tile(g: _Builder, chunks: ir.Value, body) -> None:
        """``body(t, start, stop)`` for each tile of SCAN_TILE entries of the table."""
        b = g.b
        m = b.mul(chunks, _c(RADIX))
        ntiles = b.udiv(b.add(m, _c(SCAN_TILE - 1)), _c(SCAN_TILE))

        def tile(t: ir.Value) -> None:
            start = b.mul(t, _c(SCAN_TILE))
            body(t, start, g.umin(b.add(start, _c(SCAN_TILE)), m))
        g.loop(g.gid, ntiles, g.gstride, tile)

    # tiles(table, totals, chunks): each tile's sum
    g = _Builder(module, f"{name}_tiles", [ip, ip, I64])
    table, totals, chunks = g.fn.args

    def tile_sum(t: ir.Value, start: ir.Value, stop: ir.Value, g=g, table=table,
                 totals=totals) -> None:
        acc = g.b.alloca(I64)
        g.b.store(_c(0), acc)
        g.loop(start, stop, _c(1), lambda i: add_to(g, acc, table, i))
        g.b.store(g.b.load(acc), g.b.gep(totals, [t]))
    each_tile(g, chunks, tile_sum)
    g.done()

    # totals(totals, ntiles): one warp, the tile sums into each tile's start (an exclusive
    # scan): each lane sums a run of tiles into the 32 words after them, lane 0 scans those,
    # then each lane scans its run from its start
    g = _Builder(module, f"{name}_totals", [ip, I64])
    totals, ntiles = g.fn.args
    b = g.b
    with b.if_then(b.icmp_unsigned("<", g.gid, _c(32))):
        run = b.udiv(b.add(ntiles, _c(31)), _c(32))
        first = b.mul(g.lane, run)
        last = g.umin(b.add(first, run), ntiles)
        lane_sum = b.add(ntiles, g.lane)
        acc = b.alloca(I64)
        b.store(_c(0), acc)
        g.loop(first, last, _c(1), lambda t: add_to(g, acc, totals, t))
        b.store(b.load(acc), b.gep(totals, [lane_sum]))
        g.syncwarp()
        with b.if_then(b.icmp_unsigned("==", g.lane, _c(0))):
            b.store(_c(0), acc)
            g.loop(_c(0), _c(32), _c(1),
                   lambda t: exclusive_step(g, acc, totals, b.add(ntiles, t)))
        g.syncwarp()
        b.store(b.load(b.gep(totals, [lane_sum])), acc)
        g.loop(first, last, _c(1), lambda t: exclusive_step(g, acc, totals, t))
    g.done()

    # apply(table, totals, chunks): each entry becomes where its chunk's keys of its digit go
    g = _Builder(module, f"{name}_apply", [ip, ip, I64])
    table, totals, chunks = g.fn.args

    def tile_apply(t: ir.Value, start: ir.Value, stop: ir.Value, g=g, table=table,
                   totals=totals) -> None:
        acc = g.b.alloca(I64)
        g.b.store(g.b.load(g.b.gep(totals, [t])), acc)
        g.loop(start, stop, _c(1), lambda i: exclusive_step(g, acc, table, i))
    each_tile(g, chunks, tile_apply)
    g.done()

    # place(keys, pos, out_keys, out_pos, table, shift, rowmode, n, total, chunks): a warp
    # per chunk, 32 slots at a time: each pair to its digit's next slot plus its rank among
    # the lanes before it with that digit; the digit's last lane then moves the next slot on
    g = _Builder(module, f"{name}_place", [kp, ip, kp, ip, ip] + [I64] * 5)
    keys, pos, out_keys, out_pos, table, shift, rowmode, n, total, chunks = g.fn.args
    b = g.b

    def place(c: ir.Value, i: ir.Value, valid: ir.Value) -> None:
        k, p = b.load(b.gep(keys, [i])), b.load(b.gep(pos, [i]))
        d = b.select(valid, digit(g, k, p, shift, rowmode, n), _c(RADIX))
        r, last = rank(g, d)
        at = b.gep(table, [entry(g, c, b.select(valid, d, _c(0)), chunks)])
        slot = b.add(b.load(at), r)
        with b.if_then(valid):
            b.store(k, b.gep(out_keys, [slot]))
            b.store(p, b.gep(out_pos, [slot]))
        g.syncwarp()   # every lane has read its digit's next slot
        with b.if_then(b.and_(valid, last)):
            b.store(b.add(slot, _c(1)), at)
        g.syncwarp()   # the next 32 slots read the moved ones
    each_chunk_group(g, total, chunks, place)
    g.done()

    # out(src, pos, vals, idx, n, total, want_vals, want_idx): slot s is element s % n of
    # row s // n (each row has n elements, the rows in order)
    g = _Builder(module, f"{name}_out", [vp, ip, vp, ip] + [I64] * 4)
    src, pos, vals, idx, n, total, want_vals, want_idx = g.fn.args
    b = g.b

    def out(s: ir.Value) -> None:
        p = b.load(b.gep(pos, [s]))
        with b.if_then(b.icmp_unsigned("!=", want_vals, _c(0))):
            b.store(b.load(b.gep(src, [p])), b.gep(vals, [s]))
        with b.if_then(b.icmp_unsigned("!=", want_idx, _c(0))):
            b.store(b.urem(p, n), b.gep(idx, [s]))
    g.loop(g.gid, total, g.gstride, out)
    g.done()
    return str(module)


def _module(dtype: np.dtype) -> tuple[list[str], str, str]:
    from . import ptx as ptxmod
    from .driver import current_target
    key = np.dtype(dtype).str
    with _lock:
        if key not in _KERNELS:
            name = f"ta_radix_{np.dtype(dtype).name}"
            text = radix_module_ir(dtype, name)
            _KERNELS[key] = ([f"{name}_{e}" for e in ENTRIES], text,
                             ptxmod.compile_ptx(text, current_target()))
        return _KERNELS[key]


def sort_rows(dev: Any, src: Any, vals: Any, idx: Any, axis: int,
              dst_strides: Sequence[int] | None = None) -> Any:
    """``src``'s rows along ``axis`` sorted into ``vals`` and/or their positions into
    ``idx`` (as ``sort._sort_rows``: pointers of arrays of src's shape, C-contiguous or laid
    out by ``dst_strides``); NotImplemented for a dtype it does not sort."""
    dtype = np.dtype(src.dtype)
    shape = tuple(src.shape)
    if not shape or not sortable(dtype) or not hasattr(dev, "load"):
        return NotImplemented
    total = math.prod(shape)
    if total == 0:
        return None
    n = shape[axis]
    rows = total // n
    item = dtype.itemsize
    # the rows in C order of the other axes, the sorted axis last
    order = [d for d in range(len(shape)) if d != axis] + [axis]
    moved = tuple(shape[d] for d in order)
    keep: list[Any] = []

    def block(nbytes: int) -> int:
        keep.append(dev.allocator.allocate(max(nbytes, 8)))
        return keep[-1].ptr

    contiguous = tuple(src.strides[d] for d in order) == _c_strides(moved, 1)
    if contiguous:
        data = src.ptr
    else:
        data = block(total * item)
        keep.append(strided_copy(dev, data, src.ptr, moved, [src.strides[d] for d in order],
                                 0, item))
    kbytes = key_bits(dtype) // 8
    keys = [block(total * kbytes), block(total * kbytes)]
    pos = [block(total * 8), block(total * 8)]
    chunks = radix_chunks(total)
    table = block(chunks * RADIX * 8)
    ntiles = -(-chunks * RADIX // SCAN_TILE)
    totals = block((ntiles + 32) * 8)   # (and the lanes' sums of the scan of the totals)
    names, text, ptx = _module(dtype)
    fns = dev.load(ptx, names, text)
    fn = dict(zip(ENTRIES, (fns[nm] for nm in names)))
    from .driver import sm_count
    grid = max(1, min(-(-total // BLOCK), 32 * sm_count()))
    chunk_grid = max(1, min(-(-chunks * 32 // BLOCK), 32 * sm_count()))   # a warp per chunk
    tile_grid = max(1, min(-(-ntiles // BLOCK), 32 * sm_count()))
    _launch(dev, fn["keys"], grid, BLOCK, [data, keys[0], pos[0], total])
    passes = [(s, 0) for s in range(0, 8 * item, RADIX_BITS)]
    passes += [(s, 1) for s in range(0, max(rows - 1, 0).bit_length(), RADIX_BITS)]
    for p, (shift, rowmode) in enumerate(passes):
        k_in, k_out, p_in, p_out = keys[p % 2], keys[1 - p % 2], pos[p % 2], pos[1 - p % 2]
        _launch(dev, fn["hist"], chunk_grid, BLOCK,
                [k_in, p_in, table, shift, rowmode, n, total, chunks])
        _launch(dev, fn["tiles"], tile_grid, BLOCK, [table, totals, chunks])
        _launch(dev, fn["totals"], 1, 32, [totals, ntiles])   # one warp
        _launch(dev, fn["apply"], tile_grid, BLOCK, [table, totals, chunks])
        _launch(dev, fn["place"], chunk_grid, BLOCK,
                [k_in, p_in, k_out, p_out, table, shift, rowmode, n, total, chunks])
    sorted_pos = pos[len(passes) % 2]
    # the results, C-contiguous (rows, n) in place, or scattered into their layout by a
    # strided copy
    for out, width in ((vals, item), (idx, 8)):
        if out is None:
            continue
        dst = list(dst_strides) if dst_strides is not None else list(_c_strides(shape, 1))
        direct = tuple(dst[d] for d in order) == _c_strides(moved, 1)
        target = out.ptr if direct else block(total * width)
        args = [data, sorted_pos, target if out is vals else 0, target if out is idx else 0,
                n, total, int(out is vals), int(out is idx)]
        _launch(dev, fn["out"], grid, BLOCK, args)
        if not direct:
            keep.append(strided_copy(dev, out.ptr, target, moved, [dst[d] for d in order],
                                     0, width, scatter=True))
    return None
