"""``scatter_sorted``: a ``ufunc.at`` whose combine depends on the order (float add,
multiply, max/min, ...) in parallel on the GPU, with NumPy's result bit for bit.

NumPy's ``ufunc.at`` combines the contributions to each target element one after another, in
the C order of the values. Here the elements are grouped by target with a *stable* sort, so
each target's contributions stay in that order, and then a thread per target combines its
run from the target's value, exactly as NumPy's loop does (the same per-step casts and
rounding). The sort is an LSD radix sort of the targets' offsets (8 bits a pass) carrying
the elements' positions; its ranks come from counting, never from thread timing:

- ``_keys``: a thread per element writes its target's offset (the target's length for an
  index out of range: sorted last, never combined) and its position;
- per pass, ``_hist``: a thread per chunk (a fixed run of consecutive sorted slots) counts
  its keys' digits into its own row of RADIX counters (contiguous: they stay in cache);
  ``_hscan_tiles``, ``_hscan_totals``, ``_hscan_apply``: an exclusive scan of the table
  read digit-major (integers: exact), so entry (chunk, digit) becomes where that chunk's
  first key of that digit goes; ``_place``: each chunk walks its slots in order and moves
  each key and position to its digit's next slot. Digits are placed in digit order, chunks
  in chunk order, a chunk's keys in slot order: the pass is stable;
- ``<name>``: a thread per sorted slot; the first slot of each target's run combines the run
  in order into the target.

The chunk count is a function of the number of elements only, so the work split does not
depend on the device. Heavy duplication (every element on one target) makes one long run:
it is combined by one thread, in NumPy's order, as NumPy does -- correct, not parallel.
"""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from ..codegen import scalar

from ..tile.gpu import RADIX, SORT_SCRATCH as SCRATCH

I64 = ir.IntType(64)
# (the sort's chunks, radix, scratch arrays and entries are tiling: tile/gpu.py)


class SortedScatterMixin:
    """The passes of ``scatter_sorted`` for ``GpuKernelLowering``."""

    def sorted_scatter_passes(self) -> tuple[Callable[[], None], ...]:
        return (self._sort_keys, self._sort_hist, self._table_tiles, self._table_totals,
                self._table_apply, self._sort_place, self._sorted_combine)

    # -------------------------------------------------------------- helpers
    @property
    def _index_type(self) -> ir.IntType:
        return ir.IntType(64 if self.wide else 32)

    def _buf(self, name: str) -> ir.Value:
        return self.scratch_ptr(SCRATCH.index(name))

    def _ld(self, ptr: ir.Value, i: ir.Value) -> ir.Value:
        v = self.b.load(self.b.gep(ptr, [i]))
        return v if self.wide else self.b.zext(v, I64)

    def _st(self, ptr: ir.Value, i: ir.Value, v: ir.Value) -> None:
        self.b.store(v if self.wide else self.b.trunc(v, self._index_type),
                     self.b.gep(ptr, [i]))

    def _args(self) -> tuple[ir.Value, ...]:
        """(shift, parity, chunks, scan tile, targets, elements, chunk length)."""
        shift, parity, chunks, tile, targets = self._extra_args
        n = self.product(range(self.geo.rank))
        chunk = self.b.udiv(self.b.add(n, self.b.sub(chunks, self.const(1))), chunks)
        return shift, parity, chunks, tile, targets, n, chunk

    def _pair(self, parity: ir.Value, source: bool) -> tuple[ir.Value, ir.Value]:
        """The keys and positions a pass reads (``source``) or writes."""
        odd = self.b.icmp_unsigned("!=", parity, self.const(0))
        if not source:
            odd = self.b.not_(odd)
        return (self.b.select(odd, self._buf("keys1"), self._buf("keys0")),
                self.b.select(odd, self._buf("pos1"), self._buf("pos0")))

    def _digit(self, key: ir.Value, shift: ir.Value) -> ir.Value:
        return self.b.and_(self.b.lshr(key, shift), self.const(RADIX - 1))

    def _counter(self, chunk: ir.Value, digit: ir.Value) -> ir.Value:
        """A chunk's counter of a digit in the table (a row of RADIX per chunk)."""
        return self.b.add(self.b.mul(chunk, self.const(RADIX)), digit)

    def _scan_order(self, i: ir.Value, chunks: ir.Value) -> ir.Value:
        """The table entry at position i of the scan's (digit-major) order."""
        return self._counter(self.b.urem(i, chunks), self.b.udiv(i, chunks))

    def _chunk_slots(self, body: Callable[[ir.Value, ir.Value], None]) -> None:
        """``body(chunk, slot)`` for the slots of each chunk, in order."""
        _s, _p, chunks, _t, _n_t, n, chunk = self._args()
        gid, gstride = self.global_ids()
        with self.loop(gid, chunks, gstride) as c:
            start = self.b.mul(c, chunk)
            # unrolled: the next keys' loads are in flight while one is counted or placed
            self.strided_loop(start, self.smin(self.b.add(start, chunk), n), self.const(1),
                              lambda i: body(c, i))

    # -------------------------------------------------------------- passes
    def _sort_keys(self) -> None:
        *_, targets, n, _chunk = self._args()
        dims = tuple(range(self.geo.rank))
        gid, gstride = self.global_ids()

        def element(p: ir.Value) -> None:
            self.set_dims(p, dims)
            loaded, ok = self.scatter_target({})
            key = self.scatter_offset(loaded)
            if ok is not None:   # out of range (flagged): after every target, never combined
                key = self.b.select(ok, key, targets)
            self._st(self._buf("keys0"), p, key)
            self._st(self._buf("pos0"), p, p)
        self.strided_loop(gid, n, gstride, element)

    def _sort_hist(self) -> None:
        shift, parity, chunks, *_ = self._args()
        keys, _pos = self._pair(parity, source=True)
        table = self._buf("table")
        gid, gstride = self.global_ids()
        with self.loop(gid, chunks, gstride) as c:     # the chunk's counters start at 0
            with self.loop(self.const(0), self.const(RADIX)) as d:
                self._st(table, self._counter(c, d), self.const(0))

        def count(c: ir.Value, i: ir.Value) -> None:
            slot = self._counter(c, self._digit(self._ld(keys, i), shift))
            self._st(table, slot, self.b.add(self._ld(table, slot), self.const(1)))
        self._chunk_slots(count)

    def _table_tiles(self) -> None:
        """Each tile of the digit table: its sum."""
        table, totals = self._buf("table"), self._buf("totals")
        chunks = self._args()[2]

        def tile(t: ir.Value, start: ir.Value, stop: ir.Value) -> None:
            acc = self.alloca(I64)
            self.b.store(self.const(0), acc)
            with self.loop(start, stop) as i:
                v = self._ld(table, self._scan_order(i, chunks))
                self.b.store(self.b.add(self.b.load(acc), v), acc)
            self._st(totals, t, self.b.load(acc))
        self._table_each_tile(tile)

    def _table_totals(self) -> None:
        """One thread: the tile sums into each tile's start (an exclusive scan)."""
        _s, _p, chunks, tile_len, *_ = self._args()
        totals = self._buf("totals")
        b = self.b
        m = b.mul(chunks, self.const(RADIX))
        ntiles = b.udiv(b.add(m, b.sub(tile_len, self.const(1))), tile_len)
        gid, _g = self.global_ids()
        acc = self.alloca(I64)
        with b.if_then(b.icmp_unsigned("==", gid, self.const(0))):
            b.store(self.const(0), acc)

            def tile(t: ir.Value) -> None:
                v = self._ld(totals, t)
                self._st(totals, t, b.load(acc))
                b.store(b.add(b.load(acc), v), acc)
            self.strided_loop(self.const(0), ntiles, self.const(1), tile)   # loads in flight

    def _table_apply(self) -> None:
        """Each tile of the digit table: its entries into their starts."""
        table, totals = self._buf("table"), self._buf("totals")
        chunks = self._args()[2]

        def tile(t: ir.Value, start: ir.Value, stop: ir.Value) -> None:
            acc = self.alloca(I64)
            self.b.store(self._ld(totals, t), acc)
            with self.loop(start, stop) as i:
                entry = self._scan_order(i, chunks)
                v = self._ld(table, entry)
                self._st(table, entry, self.b.load(acc))
                self.b.store(self.b.add(self.b.load(acc), v), acc)
        self._table_each_tile(tile)

    def _table_each_tile(self, body: Callable[[ir.Value, ir.Value, ir.Value], None]) -> None:
        _s, _p, chunks, tile_len, *_ = self._args()
        b = self.b
        m = b.mul(chunks, self.const(RADIX))
        ntiles = b.udiv(b.add(m, b.sub(tile_len, self.const(1))), tile_len)
        gid, gstride = self.global_ids()
        with self.loop(gid, ntiles, gstride) as t:
            start = b.mul(t, tile_len)
            body(t, start, self.smin(b.add(start, tile_len), m))

    def _sort_place(self) -> None:
        shift, parity, *_ = self._args()
        keys, pos = self._pair(parity, source=True)
        out_keys, out_pos = self._pair(parity, source=False)
        table = self._buf("table")

        def place(c: ir.Value, i: ir.Value) -> None:
            key = self._ld(keys, i)
            slot = self._counter(c, self._digit(key, shift))
            at = self._ld(table, slot)
            self._st(table, slot, self.b.add(at, self.const(1)))
            self._st(out_keys, at, key)
            self._st(out_pos, at, self._ld(pos, i))
        self._chunk_slots(place)

    def _sorted_combine(self) -> None:
        """The first slot of each target's run combines the run into the target, in order
        (``_combine_at``: NumPy's ufunc loop, per step)."""
        k = self.kernel
        node = k.scatter
        _s, parity, _c, _t, targets, n, _chunk = self._args()
        keys, pos = self._pair(parity, source=True)
        dest = self.ptrs[len(k.body.accesses)]
        dims = tuple(range(self.geo.rank))
        b = self.b
        gid, gstride = self.global_ids()
        j = self.alloca(I64)
        with self.loop(gid, n, gstride) as i:
            key = self._ld(keys, i)
            prev = self._ld(keys, b.select(b.icmp_unsigned("==", i, self.const(0)),
                                           self.const(0), b.sub(i, self.const(1))))
            first = b.or_(b.icmp_unsigned("==", i, self.const(0)),
                          b.icmp_unsigned("!=", prev, key))
            with b.if_then(b.and_(first, b.icmp_unsigned("<", key, targets))):
                b.store(i, j)
                head = self.fn.append_basic_block("run.head")
                check = self.fn.append_basic_block("run.check")
                body = self.fn.append_basic_block("run.body")
                done = self.fn.append_basic_block("run.end")
                b.branch(head)
                b.position_at_end(head)
                at = b.load(j)
                b.cbranch(b.icmp_unsigned("<", at, n), check, done)
                b.position_at_end(check)
                b.cbranch(b.icmp_unsigned("==", self._ld(keys, at), key), body, done)
                b.position_at_end(body)
                self.set_dims(self._ld(pos, at), dims)
                value = self.ev(k.root_exprs[0], {}) if k.root_exprs else None
                ptr = b.gep(dest, [key])
                v = self._combine_at(node.attr("combine"), node.attr("loop"), ptr, node.dtype,
                                     value)
                scalar.store_value(b, v, ptr, node.dtype)
                b.store(b.add(at, self.const(1)), j)
                b.branch(head)
                b.position_at_end(done)


__all__ = ["SortedScatterMixin"]
