"""The CPU executable: compiled kernels, their arguments, and the call path.

An ``Executable`` is built once per argument signature (shapes, dtypes, strides): it finds
each kernel's machine code by the kernel's description (``codecache``: a new size, or a new
process with the kernels on disk, generates no LLVM IR; the code generator is imported only
when a kernel must be compiled), and precomputes every kernel's parameter array (extents,
strides and offsets in elements, scalar constants). A call then only allocates the stored
values, fills the pointer arrays and runs the kernels over chunks of their parallel range on
the thread pool.
"""
from __future__ import annotations

import ctypes
import math
import operator
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .. import config
from ..errors import TracearrayError, node_location, run_time_error, stage_error
from ..fuse.plan import Plan, view_chain
from ..tile import Geometry, TileSpec
from ..tile.bind import bind_kernel, split_range
from ..tile.describe import code_identity
from ..tile.layout import affine_params, entry_names
from ..tile.lifetimes import lifetimes, share_memory
from ..tile.policy import CpuTiling, policy_for
from ..trace.graph import Node
from ..ops import EXTERNALS, OPS, constant_value
from . import codecache, memory, pool

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64)
_COMBINE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def apply_chain(array: np.ndarray, chain: Sequence[Node]) -> np.ndarray:
    """The view ``chain`` (bottom-up) of ``array``, computed by NumPy's own view functions."""
    for node in chain:
        array = OPS[node.op].numpy_ref(array, **dict(node.attrs))
    return array


def element_strides(a: np.ndarray) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


def element_offset(view: np.ndarray, base: np.ndarray) -> int:
    if view.size == 0 or base.size == 0:
        return 0
    return (view.ctypes.data - base.ctypes.data) // base.itemsize


@dataclass
class CompiledKernel:
    spec: TileSpec
    geometry: Geometry
    name: str
    description: str          # the kernel's description (tile/describe.py): its cache key
    params: np.ndarray                                  # int64 parameter array
    load_views: list[tuple[Node, tuple[Node, ...], bool]]   # buffer, chain, needs a copy per call
    store_views: list[tuple[Node, int, int, int]]           # dest, axis, offset, length
    chunks: list[tuple[int, int]] = field(default_factory=list)
    entry: Any = None
    combine: Any = None
    partial_dtypes: list[np.dtype] = field(default_factory=list)
    load_slots: list[tuple[int, tuple[Node, ...], bool]] = field(default_factory=list)
    store_slots: list[int] = field(default_factory=list)
    pointer_array: Any = None     # ctypes array type of the kernel's buffer pointers
    params_address: int = 0
    # Slots of the loads and stores, in pointer order, when no load is a per-call copy (the
    # common case: the pointers are then read from the call's addresses in one C call).
    direct_slots: list[int] | None = None
    slot_of_chunk: dict[int, int] = field(default_factory=dict)   # full: chunk begin -> slot
    checks: list = field(default_factory=list)   # bounds checks (fuse.kexpr.IndexCheck)
    code: Any = None   # the codecache.KernelCode ``entry`` and ``combine`` point into: keeps it alive
    choice: Any = None   # pool.ThreadChoice: the chunks on the pool or in the calling thread
    native: Any = None   # pool.KernelChunks: the chunks as the pool's native loop runs them
    bound: Any = None    # tile.bind.BoundKernel: the geometry, parameters and chunks above
    symbol: str = ""     # the name the code's functions have (tile/describe.code_identity)

    @property
    def ir(self) -> str:
        """The kernel's LLVM IR (generated again: the executable keeps only the description)."""
        return _lower(self.geometry, self.symbol or self.name)


class Executable:
    """Everything needed to run one plan on arrays of one signature."""

    def __init__(self, plan: Plan, specs: list[TileSpec], inputs: Sequence[np.ndarray],
                 name: str = "k"):
        self.plan = plan
        self.graph = plan.graph
        self.specs = specs
        self.threads = pool.num_threads()
        # the frozen work-split policy (tile/policy.py), read once
        self.tiling = policy_for(CpuTiling(self.threads))
        # What building cost, for CompiledFunction.cache_info(): modules compiled by LLVM,
        # loaded from the disk cache, and looked up there in vain.
        self.compiles = self.disk_hits = self.disk_misses = 0
        buffers = self._template_buffers(inputs)
        self.kernels: list[CompiledKernel | None] = []
        for i, spec in enumerate(specs):
            if spec.kernel.call is not None:   # a library call: no code of ours
                self.kernels.append(None)
                continue
            try:
                self.kernels.append(self._prepare(spec, buffers, f"{name}{i}", name))
            except TracearrayError:
                raise
            except Exception as e:   # noqa: BLE001 -- named with the kernel's ops and lines
                raise stage_error(f"compiling kernel {name}{i} for the CPU",
                                  spec.kernel.nodes, e, plan.graph.locations) from e
        self._plan_call(buffers)

    @property
    def jit(self) -> Any:
        """The process's LLVM JIT (``lower().as_text`` asks it for optimised IR and assembly;
        running kernels does not need it)."""
        from .jit import get_jit
        return get_jit()

    def _plan_call(self, buffers: dict[Node, np.ndarray]) -> None:
        """Resolve every buffer to a slot of a per-call list once, so that a call indexes
        lists instead of hashing graph nodes (the call path is paid on every call)."""
        slot: dict[Node, int] = {node: i for i, node in enumerate(self.graph.inputs)}
        # an argument's final value computed in the argument's own memory (plan.in_place):
        # its slot is the argument's
        for value, arg in self.plan.in_place.items():
            slot[value] = slot[arg]
        n_inputs = len(self.graph.inputs)
        # The slots after the inputs as a call starts: constants (kept by the executable, so
        # their addresses are fixed) in place, None where a call allocates.
        self._tail: list[Any] = []
        self._tail_addrs: list[int | None] = []
        # (slot, shape, dtype, from the arena): what a call allocates
        self._allocs: list[tuple[int, tuple[int, ...], np.dtype, bool]] = []
        for node in self.plan.stored:
            if node in slot:
                continue
            slot[node] = n_inputs + len(self._tail)
            if node.op == "constant":
                self._tail.append(buffers[node])
                self._tail_addrs.append(memory.data_address(buffers[node]))
            else:
                self._tail.append(None)
                self._tail_addrs.append(None)
                nbytes = math.prod(node.shape) * node.dtype.itemsize
                self._allocs.append((slot[node], node.shape, node.dtype,
                                     nbytes >= memory.MIN_BYTES))
        self._steps: list[tuple[str, Any]] = []
        for spec, ck in zip(self.specs, self.kernels):
            if ck is None:
                self._steps.append(("call", HostCall.of(spec.kernel.call, slot)))
            else:
                ck.load_slots = [(slot[b], chain, copied) for b, chain, copied in ck.load_views]
                ck.store_slots = [slot[dest] for dest, _a, _o, _l in ck.store_views]
                n_ptrs = len(ck.load_slots) + len(ck.store_slots) + len(ck.partial_dtypes) \
                    + bool(ck.checks)
                ck.pointer_array = ctypes.c_void_p * max(n_ptrs, 1)
                ck.params_address = ck.params.ctypes.data
                if not any(copied for _i, _c, copied in ck.load_slots):
                    ck.direct_slots = [i for i, _c, _copied in ck.load_slots] + ck.store_slots
                ck.slot_of_chunk = {begin: s for s, (begin, _end) in enumerate(ck.chunks)}
                self._steps.append(("kernel", ck))
        self._share_intermediates({slot[o] for o in self.graph.outputs if o in slot})
        # Executables of map-like kernels only (no per-call copies, partial sums, index
        # checks or matmuls: most of them) run a flat loop over these, with no per-kernel
        # function calls: (entry, pointer array type, a pointer array of the step's own and
        # the lock of its use, the pointer slots, params, chunks, the one chunk or None, the
        # thread choice). Filling the step's own array costs a quarter of making one; a call
        # that finds it in use by another thread (the lock is held while the kernel runs)
        # makes a fresh one.
        self._direct_steps: list[tuple[Any, Any, Any, Any, Any, int, list, Any, Any]] | None = [
            (step.entry, step.pointer_array, step.pointer_array(), threading.Lock(),
             _getter(step.direct_slots), step.params_address, step.chunks,
             step.chunks[0] if len(step.chunks) == 1 else None, step.choice, step.native)
            for kind, step in self._steps] if all(
            kind == "kernel" and step.direct_slots is not None and not step.partial_dtypes
            and not step.checks and step.geometry.strategy != "full"
            for kind, step in self._steps) else None
        # Constants returned as outputs are fresh, writable arrays (as NumPy would return).
        # Scalar constants (``f(True)`` returning ``np.max(True)``) are kernel parameters, never
        # buffers: read them from the node.
        self._outputs: list[tuple[bool, Any]] = [
            (True, o) if o.op == "constant" or o not in slot else (False, slot[o])
            for o in self.graph.outputs]
        # the outputs when none is a constant: a tuple of slots read in one call
        self._output_slots = None if any(c for c, _o in self._outputs) else \
            _getter([o for _c, o in self._outputs])
        # what the call fast path runs (api._FastCall): ``run``, or its specialisation
        self.fast_run = self._one_kernel_run() or self.run

    def _share_intermediates(self, kept: set[int]) -> None:
        """Let intermediates whose last step has run lend their memory to later ones of
        the same byte size (``tile.lifetimes``): ``_allocs`` keeps the buffers a call
        allocates, ``_shared`` the (slot, owner's slot, shape, dtype) of the others."""
        touched = []
        for kind, step in self._steps:
            if kind == "kernel":
                touched.append([i for i, _c, _copied in step.load_slots] + step.store_slots)
            else:
                touched.append([i for i, _chain in step.operands] +
                               [i for i, _s, _d in step.results if i is not None])
        sizes = {i: math.prod(shape) * dtype.itemsize for i, shape, dtype, _l in self._allocs
                 if i not in kept and math.prod(shape) > 0}
        owner = share_memory(sizes, lifetimes(touched, sizes))
        self._shared = [(i, owner[i], shape, dtype) for i, shape, dtype, _l in self._allocs
                        if owner.get(i, i) != i]
        self._allocs = [a for a in self._allocs if owner.get(a[0], a[0]) == a[0]]

    # ----------------------------------------------------------------- build
    def _template_buffers(self, inputs: Sequence[np.ndarray]) -> dict[Node, np.ndarray]:
        """Buffers with the strides calls will have (inputs as given; others C-contiguous).
        Only their layouts are read while building, so the stored values share one scratch
        block of the largest one's size (a loop of 1,000 steps needs no 1,000 grids here)."""
        buffers: dict[Node, np.ndarray] = dict(zip(self.graph.inputs, inputs))
        for value, arg in self.plan.in_place.items():
            buffers[value] = buffers[arg]       # (its strides are the argument's)
        values = [n for n in self.plan.stored if n not in buffers and n.op != "constant"]
        scratch = memory.empty((max((math.prod(n.shape) * n.dtype.itemsize for n in values),
                                    default=0),), np.dtype(np.uint8))
        for node in self.plan.stored:
            if node not in buffers:
                buffers[node] = constant_value(node) if node.op == "constant" else \
                    np.ndarray(node.shape, node.dtype, scratch)
        return buffers

    def _prepare(self, spec: TileSpec, buffers: dict[Node, np.ndarray], name: str,
                 base: str) -> CompiledKernel:
        kernel = spec.kernel
        rank = len(kernel.space) + len(kernel.body.nested_extents)
        # Per access and store: base offset and stride per space dim, in elements.
        load_views, loads = [], []
        for acc in kernel.body.accesses:
            buf = buffers[acc.buffer]
            view = apply_chain(buf, acc.chain)
            copied = view.size > 0 and not np.may_share_memory(view, buf)
            origin = view if copied else buf
            loads.append(affine_params(element_strides(view), element_offset(view, origin),
                                       acc.index, rank))
            load_views.append((acc.buffer, acc.chain, copied))
        store_views, stores = [], []
        for st in kernel.stores:
            dest = buffers[st.dest]
            length = st.node.shape[st.axis] if st.dest is not st.node else 0
            view = dest if st.dest is st.node else _slab(dest, st.axis, st.offset, length)
            stores.append(affine_params(element_strides(view), element_offset(view, dest),
                                        st.index, rank))
            store_views.append((st.dest, st.axis, st.offset, length))
        # the description (the code's cache key) and the code's symbol, made once
        described: list[tuple[str, str]] = []

        def lower(geo: Geometry, _strategy: str, _wide: bool) -> Any:
            described.append(code_identity(geo, base))
            return self._code(geo, described[0][1], described[0][0])
        bound = bind_kernel(spec, loads, stores, self.tiling, name, lower)
        geo = bound.geometry
        description, symbol = described[0]
        ck = CompiledKernel(spec, geo, name, description, bound.params,
                            load_views, store_views, checks=list(kernel.body.checks),
                            symbol=symbol)
        ck.bound = bound
        ck.code = bound.code
        addresses = ck.code.addresses
        ck.entry = _ENTRY(addresses[symbol])
        if geo.strategy == "full":
            ck.combine = _COMBINE(addresses[f"{symbol}_combine"])
            ck.partial_dtypes = bound.partial_dtypes
        ck.chunks = bound.chunks
        # (a full reduction's chunks are its partial sums' slots: never one range)
        whole = (ck.chunks[0][0], ck.chunks[-1][1]) \
            if ck.chunks and geo.strategy != "full" and _contiguous(ck.chunks) else None
        ck.choice = pool.ThreadChoice(self.threads, name, whole)
        # (a full reduction's empty chunks run after the others: see _run_kernel)
        # (a full reduction's chunk writes its partial sums' slot; its empty chunks run after
        # the others: see _run_kernel. Other kernels get slot 0.)
        full = geo.strategy == "full"
        ck.native = pool.KernelChunks(addresses[symbol], [
            (b, e, s if full else 0) for s, (b, e) in enumerate(ck.chunks) if e > b or not full])
        return ck

    def bound_kernels(self) -> dict[int, Any]:
        """Each fused kernel's binding (``tile.bind.BoundKernel``), by plan position:
        what runs, for ``explain()``."""
        return {i: ck.bound for i, ck in enumerate(self.kernels) if ck is not None}

    def _code(self, geo: Geometry, name: str, description: str) -> Any:
        """The kernel's machine code (``description``: its key, tile/describe.py): from
        memory, the disk cache, or compiled now."""
        code = codecache.load_kernel(description, entry_names(geo, name),
                                     lambda: _lower(geo, name))
        self.compiles += code.origin == "compiled"
        self.disk_hits += code.origin == "disk"
        self.disk_misses += code.disk_miss
        return code

    def _one_kernel_run(self) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]] | None:
        """``run`` for the commonest executable, specialised for the warm call path (where a
        call on small arrays is all overhead): one map-like kernel of one chunk whose only
        stored value is its one output, no constants. The same steps as ``run``'s, with
        nothing looked up per call; None for any other executable."""
        steps = self._direct_steps
        if steps is None or len(steps) != 1 or steps[0][7] is None or \
                len(self._tail) != 1 or self._tail[0] is not None or \
                len(self._allocs) != 1 or self._allocs[0][3] or \
                self._outputs != [(False, self._allocs[0][0])]:
            return None
        entry, pointer_array, own, lock, pointers_of, params, _chunks, (begin, end), _choice, \
            _native = steps[0]
        (out_slot, shape, dtype, _large), = self._allocs
        if out_slot != len(self.graph.inputs):
            return None
        address, empty, logger, general = memory.data_address, np.empty, config.logger, self.run

        def run(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
            if logger.isEnabledFor(config.TIMES_LEVEL):   # per-kernel times: the general loop
                return general(inputs)
            out = empty(shape, dtype)
            addrs = list(map(address, inputs))
            addrs.append(address(out))
            if lock.acquire(False):
                try:
                    own[:] = pointers_of(addrs)
                    entry(own, params, begin, end, 0)
                finally:
                    lock.release()
            else:   # another thread runs this executable now
                entry(pointer_array(*pointers_of(addrs)), params, begin, end, 0)
            return [out]
        return run

    # ----------------------------------------------------------------- run
    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        # Paid on every call (microseconds matter: a warm call on small arrays is all
        # overhead): slots and addresses are lists indexed by precomputed positions, data
        # addresses are read once per array through ``memory.data_address``.
        address = memory.data_address
        slots: list[Any] = list(inputs)
        slots += self._tail
        addrs: list[int | None] = list(map(address, inputs))
        addrs += self._tail_addrs
        for i, shape, dtype, large in self._allocs:
            if large:
                slots[i], addrs[i] = memory.empty_at(shape, dtype)
            else:
                out = slots[i] = np.empty(shape, dtype)
                addrs[i] = address(out)
        for i, owner, shape, dtype in self._shared:   # memory of an intermediate that has died
            slots[i] = np.ndarray(shape, dtype, slots[owner])
            addrs[i] = addrs[owner]
        # (per-kernel times, DEBUG step 2, are taken by the general loop: ~0.1 us to ask)
        if self._direct_steps is not None and \
                not config.logger.isEnabledFor(config.TIMES_LEVEL):
            for entry, pointer_array, own, lock, pointers_of, params, chunks, one, choice, \
                    native in self._direct_steps:
                if lock.acquire(False):
                    try:
                        own[:] = pointers_of(addrs)
                        if one is not None:   # one chunk (``_run_chunks``, inlined)
                            entry(own, params, one[0], one[1], 0)
                        else:
                            self._run_chunks(entry, own, params, chunks, choice, native)
                    finally:
                        lock.release()
                else:   # another thread runs this executable now
                    self._run_chunks(entry, pointer_array(*pointers_of(addrs)), params, chunks,
                                     choice, native)
        else:
            self._run_steps(slots, addrs)
        if self._output_slots is not None:
            return list(self._output_slots(slots))
        constants: dict[int, np.ndarray] = {}   # (a constant returned twice is one array)
        return [constants.setdefault(id(o), np.array(constant_value(o))) if is_const
                else slots[o] for is_const, o in self._outputs]

    def _run_chunks(self, entry: Any, bufs: Any, params: int, chunks: list,
                    choice: pool.ThreadChoice, native: pool.KernelChunks) -> None:
        if len(chunks) == 1:   # small work runs in this thread: no pool, no closure
            entry(bufs, params, chunks[0][0], chunks[0][1], 0)
        else:
            choice.run(lambda b, e: entry(bufs, params, b, e, 0), chunks,
                       (native, bufs, params))

    def _run_steps(self, slots: list[Any], addrs: list[int | None]) -> None:
        keep_alive: list[Any] = []
        timed = config.logger.isEnabledFor(config.TIMES_LEVEL)   # ~0.1 us
        for kind, step in self._steps:
            start = time.perf_counter() if timed else 0.0
            if kind == "kernel":
                self._launch(step, slots, addrs, keep_alive)
            else:
                step.run(slots, self.graph.locations)
            if timed:
                config.log(config.TIMES, "%s: %.3f ms", step.name if kind == "kernel" else
                           step.op, 1e3 * (time.perf_counter() - start))

    def _launch(self, ck: CompiledKernel, slots: list[Any], addrs: list[int | None],
                keep_alive: list[Any]) -> None:
        if ck.direct_slots is not None:
            ptrs = [addrs[i] for i in ck.direct_slots]
        else:
            ptrs = []
            for i, chain, copied in ck.load_slots:
                if copied:
                    arr = apply_chain(slots[i], chain)
                    keep_alive.append(arr)
                    ptrs.append(memory.data_address(arr))
                else:
                    ptrs.append(addrs[i])
            ptrs += [addrs[i] for i in ck.store_slots]
        if ck.partial_dtypes:
            partials = [np.empty(len(ck.chunks), dtype=dt) for dt in ck.partial_dtypes]
            keep_alive.extend(partials)
            ptrs.extend(memory.data_address(p) for p in partials)
        flag = None
        if ck.checks:
            flag = np.zeros(2, dtype=np.int64)
            ptrs.append(memory.data_address(flag))
        self._run_kernel(ck, ck.pointer_array(*ptrs))
        if flag is not None and flag[0]:
            raise index_error(ck.checks[int(flag[0]) - 1], int(flag[1]), self.graph.locations)

    def _run_kernel(self, ck: CompiledKernel, bufs: Any) -> None:
        params = ck.params_address
        entry = ck.entry
        chunks = ck.chunks
        if ck.geometry.strategy == "full":
            slots_of = ck.slot_of_chunk
            ck.choice.run(lambda b, e: entry(bufs, params, b, e, slots_of[b]),
                          [c for c in chunks if c[1] > c[0]], (ck.native, bufs, params))
            for s, (b, e) in enumerate(chunks):
                if e == b:   # an empty slot still holds the identity
                    entry(bufs, params, b, e, s)
            ck.combine(bufs, params, len(chunks))
        elif len(chunks) == 1:   # small work runs in this thread: no pool, no closure
            entry(bufs, params, chunks[0][0], chunks[0][1], 0)
        else:
            ck.choice.run(lambda b, e: entry(bufs, params, b, e, 0), chunks,
                          (ck.native, bufs, params))


def _lower(geometry: Geometry, name: str) -> str:
    """LLVM IR of a kernel (the code generator, imported when first needed)."""
    from ..codegen.kernel import lower_kernel
    from .mathlib import CpuMath
    return lower_kernel(geometry, CpuMath(), name)


def _getter(positions: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """``lambda xs: tuple(xs[i] for i in positions)``, as one C call (``itemgetter``)."""
    if len(positions) == 1:
        one = operator.itemgetter(positions[0])
        return lambda xs: (one(xs),)
    if not positions:
        return lambda xs: ()
    return operator.itemgetter(*positions)


@dataclass
class HostCall:
    """A library call (``ops.external``, and matmul) on the buffers of one call: its operands
    as views of their slots, each result written into its slot (or into a scratch array, for
    a result the graph does not use)."""
    op: str
    operands: tuple[tuple[int, list[Node]], ...]     # slot and view chain of each operand
    attrs: dict
    results: list[tuple[int | None, tuple[int, ...], np.dtype]]
    nodes: list[Node | None]

    @classmethod
    def of(cls, call: Any, slot: dict[Node, int]) -> "HostCall":
        ext = EXTERNALS[call.op]
        operands = tuple(_chain_to_buffer(a, slot) for a in call.operands)
        types = ext.results([a.shape for a in call.operands], [a.dtype for a in call.operands],
                            dict(call.attrs))
        results = [(slot.get(n) if n is not None else None, shape, np.dtype(dt))
                   for n, (shape, dt) in zip(call.results, types)]
        return cls(call.op, operands, dict(call.attrs), results, list(call.results))

    def run(self, slots: list[Any], locations: dict | None = None) -> None:
        operands = [apply_chain(slots[i], chain) for i, chain in self.operands]
        outs = [slots[i] if i is not None else np.empty(shape, dt)
                for i, shape, dt in self.results]
        ext = EXTERNALS[self.op]
        try:
            axis = ext.split(self.attrs, operands[0].ndim) if ext.split else None
            size = operands[0].size
            if axis is None or size < HOST_SPLIT_MIN or pool.num_threads() <= 1:
                ext.host(operands, outs, **self.attrs)
                return
            # independent rows: pieces on the pool (NumPy's sorts release the GIL); each row
            # is computed exactly as in one call

            def piece(begin: int, end: int) -> None:
                cut = (slice(None),) * axis + (slice(begin, end),)
                ext.host([a[cut] for a in operands], [o[cut] for o in outs], **self.attrs)
            n = operands[0].shape[axis]
            pool.parallel_for(piece, split_range(n, size // max(n, 1),
                                                 policy_for(CpuTiling(pool.num_threads()))))
        except Exception as e:   # noqa: BLE001 -- NumPy's error, at the user's line
            raise run_time_error(e, self.nodes, locations) from None


# A library call over at least this many elements is cut into independent pieces for the
# pool (smaller ones cost more in hand-offs than they gain)
HOST_SPLIT_MIN = 1 << 16


def index_error(check: Any, index: int, locations: dict | None = None) -> IndexError:
    """NumPy's IndexError for an out-of-range index a kernel found, at the user's line (of
    the trace: ``locations``, the graph's)."""
    where = (locations or {}).get(check.node) or node_location(check.node)
    message = check.message.format(index)
    return IndexError(f"{message}\n  at {where}" if where else message)


def _contiguous(chunks: Sequence[tuple[int, int]]) -> bool:
    """Whether ``chunks`` are consecutive pieces of one range."""
    return all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))


def _slab(dest: np.ndarray, axis: int, offset: int, length: int) -> np.ndarray:
    key = [slice(None)] * dest.ndim
    key[axis] = slice(offset, offset + length)
    return dest[tuple(key)]


def _chain_to_buffer(node: Node, slot: dict[Node, int]) -> tuple[int, list[Node]]:
    """The slot of the buffer ``node`` is a view of, and the view chain (bottom-up) to it."""
    base, chain = view_chain(node, slot)
    return slot[base], list(chain)
