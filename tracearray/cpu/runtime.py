"""The CPU executable: compiled kernels, their arguments, and the call path.

An ``Executable`` is built once per argument signature (shapes, dtypes, strides): it lowers
and JIT-compiles each kernel variant (cached by its IR text, so a new size reuses the same
machine code), and precomputes every kernel's parameter array (extents, strides and offsets
in elements, scalar constants). A call then only allocates the stored values, fills the
pointer arrays and runs the kernels over chunks of their parallel range on the thread pool.
"""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import config
from ..codegen.kernel import entry_names, lower_kernel, partial_dtypes
from ..errors import TracearrayError, node_location, stage_error
from ..fuse.plan import Plan
from ..tile import (MIN_TASK_WORK, Geometry, TileSpec, full_reduction_slots, make_geometry,
                    parallel_extent, work_per_iteration)
from ..tile.layout import affine_params, fill_params
from ..trace.graph import Node
from ..ops import OPS, constant_value
from . import memory, pool
from .jit import get_jit
from .mathlib import CpuMath

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
    ir: str
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
    checks: list = field(default_factory=list)   # bounds checks (fuse.kexpr.IndexCheck)
    code: Any = None   # the jit.NativeModule ``entry`` and ``combine`` point into: keeps it alive


class Executable:
    """Everything needed to run one plan on arrays of one signature."""

    def __init__(self, plan: Plan, specs: list[TileSpec], inputs: Sequence[np.ndarray],
                 name: str = "k"):
        self.plan = plan
        self.graph = plan.graph
        self.specs = specs
        self.jit = get_jit()
        self.math = CpuMath()
        self.threads = pool.num_threads()
        buffers = self._template_buffers(inputs)
        self.kernels: list[CompiledKernel | None] = []
        for i, spec in enumerate(specs):
            if spec.strategy == "matmul":
                self.kernels.append(None)
                continue
            try:
                self.kernels.append(self._prepare(spec, buffers, f"{name}{i}"))
            except TracearrayError:
                raise
            except Exception as e:   # noqa: BLE001 -- named with the kernel's ops and lines
                raise stage_error(f"compiling kernel {name}{i} for the CPU",
                                  spec.kernel.nodes, e, plan.graph.locations) from e
        self._plan_call(buffers)

    def _plan_call(self, buffers: dict[Node, np.ndarray]) -> None:
        """Resolve every buffer to a slot of a per-call list once, so that a call indexes
        lists instead of hashing graph nodes (the call path is paid on every call)."""
        slot: dict[Node, int] = {node: i for i, node in enumerate(self.graph.inputs)}
        # an argument's final value computed in the argument's own memory (plan.in_place):
        # its slot is the argument's
        for value, arg in self.plan.in_place.items():
            slot[value] = slot[arg]
        self._constants: list[tuple[int, np.ndarray]] = []
        self._allocs: list[tuple[int, tuple[int, ...], np.dtype]] = []
        for node in self.plan.stored:
            if node in slot:
                continue
            slot[node] = len(slot)
            if node.op == "constant":
                self._constants.append((slot[node], buffers[node]))
            else:
                self._allocs.append((slot[node], node.shape, node.dtype))
        self._n_slots = len(slot)
        self._steps: list[tuple[str, Any]] = []
        for spec, ck in zip(self.specs, self.kernels):
            if ck is None:
                node = spec.kernel.matmul
                operands = tuple(_chain_to_buffer(a, slot) for a in node.args)
                self._steps.append(("matmul", (operands, slot[node])))
            else:
                ck.load_slots = [(slot[b], chain, copied) for b, chain, copied in ck.load_views]
                ck.store_slots = [slot[dest] for dest, _a, _o, _l in ck.store_views]
                n_ptrs = len(ck.load_slots) + len(ck.store_slots) + len(ck.partial_dtypes) \
                    + bool(ck.checks)
                ck.pointer_array = ctypes.c_void_p * max(n_ptrs, 1)
                ck.params_address = ck.params.ctypes.data
                self._steps.append(("kernel", ck))
        # Constants returned as outputs are fresh, writable arrays (as NumPy would return).
        # Scalar constants (``f(True)`` returning ``np.max(True)``) are kernel parameters, never
        # buffers: read them from the node.
        self._outputs: list[tuple[bool, Any]] = [
            (True, o) if o.op == "constant" or o not in slot else (False, slot[o])
            for o in self.graph.outputs]

    # ----------------------------------------------------------------- build
    def _template_buffers(self, inputs: Sequence[np.ndarray]) -> dict[Node, np.ndarray]:
        """Buffers with the strides calls will have (inputs as given; others C-contiguous)."""
        buffers: dict[Node, np.ndarray] = dict(zip(self.graph.inputs, inputs))
        for value, arg in self.plan.in_place.items():
            buffers[value] = buffers[arg]       # (its strides are the argument's)
        for node in self.plan.stored:
            if node not in buffers:
                buffers[node] = self._constant_or_empty(node)
        return buffers

    def _constant_or_empty(self, node: Node) -> np.ndarray:
        if node.op == "constant":
            return constant_value(node)
        return memory.empty(node.shape, node.dtype)

    def _prepare(self, spec: TileSpec, buffers: dict[Node, np.ndarray], name: str) -> CompiledKernel:
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
        geo = make_geometry(kernel, spec.strategy, [s for _, s, _ in loads], [s for _, s, _ in stores])
        params, extents = fill_params(geo, loads, stores)
        ir_text = lower_kernel(geo, self.math, name)
        ck = CompiledKernel(spec, geo, name, ir_text, params, load_views, store_views,
                            checks=list(kernel.body.checks))
        ck.code = self.jit.load_module(ir_text, entry_names(geo, name))
        addresses = ck.code.addresses
        ck.entry = _ENTRY(addresses[name])
        if geo.strategy == "full":
            ck.combine = _COMBINE(addresses[f"{name}_combine"])
            ck.partial_dtypes = partial_dtypes(geo)
        ck.chunks = self._chunks(geo, extents)
        return ck

    def _chunks(self, geo: Geometry, extents: list[int]) -> list[tuple[int, int]]:
        n_par = parallel_extent(geo, extents)
        inner = work_per_iteration(geo, extents)
        if geo.strategy == "full":
            slots = full_reduction_slots(n_par, inner)
            edges = [n_par * s // slots for s in range(slots + 1)]
            return list(zip(edges[:-1], edges[1:]))
        if n_par == 0:
            return []
        # inner == 0 (reducing an empty axis) still runs: every row gets the identity.
        return split_range(n_par, max(inner, 1), self.threads)

    # ----------------------------------------------------------------- run
    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        slots: list[Any] = list(inputs)
        slots.extend([None] * (self._n_slots - len(slots)))
        # Data addresses per slot, filled as needed: asking NumPy costs ~2 us per array.
        addrs: list[int | None] = [None] * self._n_slots
        for i, value in self._constants:
            slots[i] = value
        for i, shape, dtype in self._allocs:
            slots[i], addrs[i] = memory.empty_at(shape, dtype)
        keep_alive: list[Any] = []
        timed = config.logger.isEnabledFor(config.TIMES_LEVEL)   # ~0.1 us
        for kind, step in self._steps:
            start = time.perf_counter() if timed else 0.0
            if kind == "kernel":
                self._launch(step, slots, addrs, keep_alive)
            else:
                operands, out = step
                a, b = (apply_chain(slots[i], chain) for i, chain in operands)
                np.matmul(a, b, out=slots[out])
            if timed:
                config.log(config.TIMES, "%s: %.3f ms", step.name if kind == "kernel" else
                           "matmul", 1e3 * (time.perf_counter() - start))
        return [np.array(constant_value(o)) if is_const else slots[o]
                for is_const, o in self._outputs]

    def _launch(self, ck: CompiledKernel, slots: list[Any], addrs: list[int | None],
                keep_alive: list[Any]) -> None:
        ptrs: list[int] = []
        for i, chain, copied in ck.load_slots:
            if copied:
                arr = apply_chain(slots[i], chain)
                keep_alive.append(arr)
                ptrs.append(arr.ctypes.data)
                continue
            addr = addrs[i]
            if addr is None:
                addr = addrs[i] = slots[i].ctypes.data
            ptrs.append(addr)
        for i in ck.store_slots:
            addr = addrs[i]
            if addr is None:
                addr = addrs[i] = slots[i].ctypes.data
            ptrs.append(addr)
        if ck.partial_dtypes:
            partials = [np.empty(len(ck.chunks), dtype=dt) for dt in ck.partial_dtypes]
            keep_alive.extend(partials)
            ptrs.extend(p.ctypes.data for p in partials)
        flag = None
        if ck.checks:
            flag = np.zeros(2, dtype=np.int64)
            ptrs.append(flag.ctypes.data)
        self._run_kernel(ck, ck.pointer_array(*ptrs))
        if flag is not None and flag[0]:
            raise index_error(ck.checks[int(flag[0]) - 1], int(flag[1]), self.graph.locations)

    def _run_kernel(self, ck: CompiledKernel, bufs: Any) -> None:
        params = ck.params_address
        entry = ck.entry
        if ck.geometry.strategy == "full":
            slots_of = {begin: s for s, (begin, _end) in enumerate(ck.chunks)}
            pool.parallel_for(lambda b, e: entry(bufs, params, b, e, slots_of[b]),
                              [c for c in ck.chunks if c[1] > c[0]] or [])
            for s, (b, e) in enumerate(ck.chunks):
                if e == b:   # an empty slot still holds the identity
                    entry(bufs, params, b, e, s)
            ck.combine(bufs, params, len(ck.chunks))
            return
        pool.parallel_for(lambda b, e: entry(bufs, params, b, e, 0), ck.chunks)


def index_error(check: Any, index: int, locations: dict | None = None) -> IndexError:
    """NumPy's IndexError for an out-of-range index a kernel found, at the user's line (of
    the trace: ``locations``, the graph's)."""
    where = (locations or {}).get(check.node) or node_location(check.node)
    message = check.message.format(index)
    return IndexError(f"{message}\n  at {where}" if where else message)


def split_range(n: int, work_per_item: int, threads: int) -> list[tuple[int, int]]:
    """Chunks of range(n) for the pool: about 4 per thread (balancing a busy core), each with
    at least MIN_TASK_WORK elements of work, independent of anything but n and threads."""
    if threads <= 1 or n * work_per_item <= MIN_TASK_WORK:
        return [(0, n)]
    size = max(-(-MIN_TASK_WORK // work_per_item), -(-n // (4 * threads)), 1)
    return [(b, min(b + size, n)) for b in range(0, n, size)]


def _slab(dest: np.ndarray, axis: int, offset: int, length: int) -> np.ndarray:
    key = [slice(None)] * dest.ndim
    key[axis] = slice(offset, offset + length)
    return dest[tuple(key)]


def _chain_to_buffer(node: Node, slot: dict[Node, int]) -> tuple[int, list[Node]]:
    """The slot of the buffer ``node`` is a view of, and the view chain (bottom-up) to it."""
    chain = []
    while node not in slot:
        chain.append(node)
        node = node.args[0]
    return slot[node], list(reversed(chain))
