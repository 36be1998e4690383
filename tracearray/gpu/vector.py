"""Vector loads and stores along the innermost axis of GPU sweeps (up to 16 bytes each).

A grid-stride loop that moves one 4-byte element per load keeps too few bytes in flight to
reach an H200's bandwidth: with ~2,000 resident threads per multiprocessor, one outstanding
float per thread is about 1 MB for the whole GPU, where Little's law at 4.3 TB/s and ~600 ns
of latency asks for 2-3 MB. (gelu_tanh, one input, ran at 68 % of the copy bandwidth while
ew_chain, four inputs per element, ran at the floor.) A *vector trip* handles ``lanes``
consecutive positions of the innermost loop dimension at once: every access that is
contiguous along that dimension (built-in stride 1, no loaded index) is read by one
``<lanes x T>`` load, the lanes are evaluated one after another from the extracted elements
(the expression code is the scalar one, unchanged), and every contiguous store is written
by one vector store after the last lane. Results are those of the scalar loop: the same
positions, the same operations per position; reductions take the lanes' terms in order.

A vector trip is only correct when every vector access is aligned to its vector's size at
every chunk, so the kernel tests that once at its start (``vector_ok``): each base address
aligned, every other stride the access uses a multiple of ``lanes`` and, unless the sweep is
one flat dimension with a scalar tail, the innermost extent a multiple of ``lanes``. When
the test fails (an odd row length, a view starting at an odd element), the same kernel runs
its scalar loop: no new code variant, no launch-time decision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llvmlite import ir

from ..codegen import scalar
from ..fuse.index import loaded_indices
from ..fuse.kexpr import KExpr, KLoad

I32 = ir.IntType(32)
I64 = ir.IntType(64)
VECTOR_BYTES = 16    # the widest global load (ld.global.v4.b32 / v2.b64)
MAX_LANES = 4        # more lanes only lengthen the trip (8 halves: two 8-byte halves' worth)


@dataclass(frozen=True)
class VectorPlan:
    """Which accesses and stores of a kernel move as vectors, and how many lanes."""
    lanes: int
    vdim: int                  # the loop dimension the lanes run along
    loads: frozenset[int]      # access numbers
    stores: frozenset[int]     # store numbers
    flat: bool                 # one flat loop dimension: a scalar tail, no divisibility


class VectorSweepMixin:
    """Vector trips for a ``GpuKernelLowering`` (``_ev_one`` and ``store`` consult the
    lane state set by ``vector_trip``)."""

    def _vector_init(self) -> None:
        self._lane_vectors: dict[int, ir.Value] | None = None
        self._lane: int = 0
        self._lane_stores: dict[int, list[ir.Value]] | None = None
        # L2 policies of the current sweep's global vector loads (by access) and vector
        # stores (codegen.ROW_L2_HINTS); none: plain loads and stores
        self._load_policies: dict[int, ir.Value] = {}
        self._store_policy: ir.Value | None = None

    def vector_plan(self, exprs: list[KExpr], stores: list[int], flat: bool
                    ) -> VectorPlan | None:
        """The plan for sweeps evaluating ``exprs`` (loads at the sweep's position) and
        writing ``stores``; None when nothing would move as a vector."""
        geo, k = self.geo, self.kernel
        vdim = geo.vector_dim
        if vdim is None:
            return None
        loads = frozenset(a for a in self._loads_of(exprs)
                          if geo.load_vstrides[a] == 1
                          and not loaded_indices(k.body.accesses[a].index))
        vstores = frozenset(i for i in stores if geo.store_vstrides[i] == 1)
        sizes = [k.body.accesses[a].top.dtype.itemsize for a in loads] + \
            [k.stores[i].dest.dtype.itemsize for i in vstores]
        if not sizes:
            return None
        lanes = min(MAX_LANES, VECTOR_BYTES // max(sizes))
        if lanes < 2:
            return None
        return VectorPlan(lanes, vdim, loads, vstores, flat)

    def vector_ok(self, plan: VectorPlan) -> ir.Value:
        """i1: every vector access of ``plan`` is aligned at every chunk of this launch."""
        b, k = self.b, self.kernel
        lanes = plan.lanes
        mask = self.const(lanes - 1)
        ok = ir.Constant(ir.IntType(1), 1)

        def multiple(v: ir.Value, m: ir.Value) -> ir.Value:
            return b.icmp_unsigned("==", b.and_(v, m), self.const(0))

        items = [(self.ptrs[a], self.layout.load_slots[a], k.body.accesses[a].top.dtype)
                 for a in sorted(plan.loads)]
        items += [(self.ptrs[len(k.body.accesses) + i], self.layout.store_slots[i],
                   k.stores[i].dest.dtype) for i in sorted(plan.stores)]
        for ptr, (base, strides, _dyn), dt in items:
            addr = b.ptrtoint(b.gep(ptr, [self.slots[base]]), I64)
            ok = b.and_(ok, multiple(addr, self.const(lanes * dt.itemsize - 1)))
            for d, s in enumerate(strides):
                if s is not None and d != plan.vdim:
                    ok = b.and_(ok, multiple(self.slots[s], mask))
        if not plan.flat:
            ok = b.and_(ok, multiple(self.extent(plan.vdim), mask))
        return ok

    def vector_trip(self, plan: VectorPlan, exprs: list[KExpr], body: Callable[[], None]
                    ) -> None:
        """``body()`` for the ``plan.lanes`` positions starting at the current value of the
        vector dimension's loop variable (a multiple of the lanes): the vector loads of
        ``exprs`` first, then the lanes in order, then the vector stores."""
        b = self.b
        vdim, lanes = plan.vdim, plan.lanes
        start = self.loop_vars[vdim]
        row_pos = getattr(self, "_row_pos", None)
        vectors = {a: self._vector_load(a, lanes)
                   for a in sorted(plan.loads & self._loads_of(exprs))}
        self._lane_vectors, self._lane_stores = vectors, {i: [] for i in plan.stores}
        try:
            for u in range(lanes):
                self._lane = u
                self.loop_vars[vdim] = b.add(start, self.const(u)) if u else start
                if row_pos is not None:
                    self._row_pos = b.add(row_pos, self.const(u)) if u else row_pos
                body()
            self.loop_vars[vdim] = start
            self._row_pos = row_pos
            pending, self._lane_stores = self._lane_stores, None
            for i, values in sorted(pending.items()):
                if values:
                    self._vector_store(i, values)
        finally:
            self._lane_vectors, self._lane_stores, self._lane = None, None, 0

    # ------------------------------------------------------------------ pieces
    def _vector_load(self, a: int, lanes: int) -> ir.Value:
        """The ``lanes`` elements of access ``a`` from the current position: from the row
        cache in its read phases, else from global memory (and into the cache in its
        write phase)."""
        b, k = self.b, self.kernel
        dt = k.body.accesses[a].top.dtype
        vty = ir.VectorType(scalar.memory_type(dt), lanes)
        align = lanes * dt.itemsize
        mode = self._row_cache_mode if a in self._row_cache and not self._nesting else None
        if mode == "write" and a in self._prefetched:   # copied in by cp.async already
            mode = "read"
        if mode == "read":
            src = b.bitcast(b.gep(self._row_cache[a], [self._row_pos]), vty.as_pointer(3))
            return b.load(src, align=align)
        addr = self._address(self.ptrs[a], self.layout.load_slots[a],
                             self.geo.load_vstrides[a])
        policy = self._load_policies.get(a) if mode is None else None
        if policy is not None:      # an L2 eviction priority (codegen.ROW_L2_HINTS)
            v = self.nv.load_hinted(b, addr, vty, policy)
        else:
            v = b.load(b.bitcast(addr, vty.as_pointer(1)), align=align)
        if mode == "write":
            dst = b.bitcast(b.gep(self._row_cache[a], [self._row_pos]), vty.as_pointer(3))
            b.store(v, dst, align=align)
        return v

    def lane_value(self, e: KLoad) -> ir.Value:
        """The current lane's element of a vector-loaded access (bool bytes as i1)."""
        b = self.b
        v = b.extract_element(self._lane_vectors[e.access], ir.Constant(I32, self._lane))
        if e.dtype.kind == "b":
            return b.icmp_unsigned("!=", v, ir.Constant(ir.IntType(8), 0))
        return v

    def _vector_store(self, i: int, values: list[ir.Value]) -> None:
        b, k = self.b, self.kernel
        dt = k.stores[i].dest.dtype
        ety = scalar.memory_type(dt)
        vec = ir.Constant(ir.VectorType(ety, len(values)), ir.Undefined)
        for u, v in enumerate(values):
            if dt.kind == "b":
                v = b.zext(v, ety)
            vec = b.insert_element(vec, v, ir.Constant(I32, u))
        addr = self._address(self.ptrs[len(k.body.accesses) + i], self.layout.store_slots[i],
                             self.geo.store_vstrides[i])
        if self._store_policy is not None:     # codegen.ROW_L2_HINTS
            self.nv.store_hinted(b, vec, addr, self._store_policy)
            return
        b.store(vec, b.bitcast(addr, vec.type.as_pointer(1)), align=len(values) * dt.itemsize)
