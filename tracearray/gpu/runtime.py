"""The GPU executable: PTX for every kernel of a plan, their arguments, and the call path.

A ``GpuExecutable`` mirrors the CPU ``Executable`` (``kernels``, ``run(inputs)``). It is built
once per argument signature (shapes, dtypes, strides, and which inputs live on the device):

- it needs only llvmlite: every kernel is lowered (``codegen.py``) and turned into PTX
  (``ptx.py``) for the device's target, or sm_90 when there is no GPU, so
  ``lower(...).as_text("ptx")`` works anywhere;
- every kernel's parameters (extents, element strides and offsets, scalar constants) and its
  launch shape are computed here, from the sizes;
- a matmul whose result is read elementwise by the next map kernel (and by no kernel before
  that one) absorbs it as an epilogue: one kernel, the product never stored unless it is
  also needed elsewhere;
- an external op (``ops.external``: sorts, LAPACK, FFTs) runs its device implementation for
  "cuda" (``External.device["cuda"]``: the FFTs' is cuFFT, ``gpu/fft.py``) on the stream; an
  op with none, or whose implementation returns ``NotImplemented`` for these operands, runs on
  the host (``ExternalStep``): its operands are copied to the host on tracearray's stream
  (which waits for the kernels before), the host function runs, and its results are copied
  back into their device buffers before the kernels after it.

A call (``run``) initialises CUDA on first use, loads the modules, copies NumPy inputs to the
device (device arrays are used in place), takes intermediate and output buffers from the
caching allocator, queues every kernel on the stream and returns ``Array``s (device inputs)
or NumPy arrays (host inputs: the only synchronisation, when results are copied back).
"""
from __future__ import annotations

import ctypes
import math
import threading
import time
from typing import Any, Sequence

import numpy as np

from .. import config
from ..fuse.epilogue import matmul_epilogues
from ..fuse.plan import Kernel, Plan, view_chain
from ..tile import TileSpec
from ..tile.bind import BoundKernel, Launch, bind_kernel, matmul_launches
from ..tile.gpu import entry_names
from ..tile.layout import affine_params
from ..tile.lifetimes import lifetimes, share_memory
from ..tile.policy import GpuTiling, gpu_tiling, policy_for
from ..tile.tune import TUNED_FIELDS, candidates
from ..errors import TracearrayError, run_time_error, stage_error
from ..trace.graph import Node
from ..ops import EXTERNALS, OPS, constant_value
from ..ops.external import DeviceBuffer
from . import ptx as ptxmod
from .array import Array, fast_signature, is_device_array
from .libraries import PendingInfo
from .memory import Block, round_size
from . import tuning
from .kernelcache import lowered_kernel
from .copy import strided_copy
from .driver import (CudaError, current_target, device_name, get_device, sm_count,
                     smem_per_block_optin)

_libraries_lock = threading.Lock()
_libraries_registered = False


def register_device_libraries() -> None:
    """The device implementations of external ops (``External.device["cuda"]``): cuFFT for
    the FFT ops (``gpu/fft.py``), cuBLAS's batched LU for solve, inv, det and slogdet
    (``gpu/linalg.py``), block kernels for cholesky and qr (``gpu/factorizations.py``) and
    for eigh, eigvalsh and svd (Jacobi rotations, ``gpu/jacobi.py``) and pinv and lstsq
    over that SVD (``gpu/least_squares.py``), cuSOLVER behind them for larger matrices and
    for eig (``gpu/dense.py``), the block and radix sorts for sort, argsort,
    the partitions and the order statistics (``gpu/sort.py``), and unique (``gpu/unique.py``,
    along an axis ``gpu/unique_axis.py``).
    Registered when an executable first has an external call: a program of kernels alone never
    imports them (about a third of the GPU backend's import, paid by a first call)."""
    global _libraries_registered
    if _libraries_registered:
        return
    with _libraries_lock:
        if not _libraries_registered:
            from . import (dense, factorizations, fft, jacobi, least_squares, linalg, sort,
                           unique)
            factorizations.register()
            fft.register()
            jacobi.register()
            least_squares.register()
            linalg.register()
            sort.register()
            unique.register()
            dense.register()      # (last: it wraps the implementations above)
            _libraries_registered = True

def _c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(out))


# ------------------------------------------------------------------------------------------
# Views of device buffers, worked out on stand-in NumPy arrays (no data is touched)
# ------------------------------------------------------------------------------------------

class _Record:
    """A plain record with slots. The GPU backend's records are not dataclasses: creating a
    dataclass costs about 0.4 ms (its methods are compiled from source), and a first call in a
    new process imports this module (issue 12: a first call within 20 ms)."""
    __slots__ = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__
                           if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


class CopyStep(_Record):
    """Gather a strided view into a fresh C-contiguous buffer (a reshape that is not a view);
    strides and offset in elements."""
    __slots__ = ("shape", "strides", "offset", "itemsize")

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
                 itemsize: int):
        self.shape, self.strides, self.offset, self.itemsize = shape, strides, offset, itemsize


class ViewPlan(_Record):
    __slots__ = ("copies", "shape", "strides", "offset")

    def __init__(self, copies: tuple[CopyStep, ...], shape: tuple[int, ...],
                 strides: tuple[int, ...], offset: int):
        self.copies, self.shape, self.strides, self.offset = copies, shape, strides, offset


def _stand_in(shape: Sequence[int], strides: Sequence[int], dtype: np.dtype) -> np.ndarray:
    base = np.zeros(1, dtype=dtype)
    return np.lib.stride_tricks.as_strided(base, tuple(shape),
                                           tuple(s * dtype.itemsize for s in strides))


def _offset(view: np.ndarray, base: np.ndarray) -> int:
    if view.size == 0:
        return 0
    return (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) \
        // view.itemsize


def plan_view(shape: Sequence[int], strides: Sequence[int], dtype: np.dtype,
              chain: Sequence[Node]) -> ViewPlan:
    """The view ``chain`` of a buffer of this shape and element strides: its strides and
    offset, and the gathers needed first where a reshape cannot be a view."""
    if not chain:   # (most accesses: the buffer itself)
        return ViewPlan((), tuple(shape), tuple(strides), 0)
    dtype = np.dtype(dtype)
    arr = base = _stand_in(shape, strides, dtype)
    copies = []
    for node in chain:
        attrs = dict(node.attrs)
        if node.op == "reshape":
            try:
                arr = arr.reshape(attrs["shape"], copy=False)
            except ValueError:
                copies.append(CopyStep(arr.shape, tuple(s // dtype.itemsize for s in arr.strides),
                                       _offset(arr, base), dtype.itemsize))
                arr = base = _stand_in(arr.shape, _c_strides(arr.shape), dtype)
                arr = arr.reshape(attrs["shape"], copy=False)
        else:
            arr = OPS[node.op].numpy_ref(arr, **attrs)
    return ViewPlan(tuple(copies), arr.shape, tuple(s // dtype.itemsize for s in arr.strides),
                    _offset(arr, base))


# ------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------

class GpuKernel(_Record):
    """One compiled kernel and how to call it. Pointer sources, in order: ("buf", node,
    copies) for buffers (copies: gathers before the launch), ("partial", i), ("scratch", i),
    ("flag",), ("null",).

    ``source``: the LLVM IR, or a kernelcache.LoweredKernel that generates it when asked (a
    kernel found by its description has PTX only until then). ``scratch``: the scratch arrays
    of a multi-pass strategy (scratch_dtypes), taken from the caching allocator for each call
    (the stream orders their reuse), and their lengths. ``checks``: bounds checks
    (fuse.kexpr.IndexCheck). ``bound_kernel``: the binding its launches come from
    (``tile.bind``). ``loaded``: per launch, once the module is loaded
    (GpuExecutable._load_launches): (function, grid, block, shared bytes, argument buffer,
    address of its void*[]); ``_buffers`` the buffers they point into."""
    __slots__ = ("name", "strategy", "source", "ptx", "names", "ptr_sources", "params",
                 "launches", "partial_dtypes", "nslots", "scratch", "spec", "geometry",
                 "bound_kernel", "functions", "_partials", "checks", "loaded", "_buffers",
                 "tuning")

    def __init__(self, name: str, strategy: str, source: Any, ptx: str, names: list[str],
                 ptr_sources: list[tuple], params: np.ndarray, launches: list[Launch],
                 partial_dtypes: list[np.dtype] | None = None, nslots: int = 0,
                 scratch: list[tuple[np.dtype, int]] | None = None, spec: Any = None,
                 geometry: Any = None, bound_kernel: Any = None):
        self.name, self.strategy, self.source, self.ptx = name, strategy, source, ptx
        self.names, self.ptr_sources, self.params, self.launches = names, ptr_sources, params, \
            launches
        self.partial_dtypes = [] if partial_dtypes is None else partial_dtypes
        self.nslots = nslots
        self.scratch = [] if scratch is None else scratch
        self.spec, self.geometry = spec, geometry
        self.bound_kernel = bound_kernel   # tile.bind.BoundKernel (None: a matmul kernel)
        # autotuning pending for the first run (GpuExecutable._tune): (key, record,
        # candidate policies, rebind(policy) -> BoundKernel)
        self.tuning: tuple | None = None
        self.functions: dict = {}
        self._partials: list = []
        self.checks: list = []
        self.loaded: list | None = None
        self._buffers: list = []

    @property
    def ir(self) -> str:
        return self.source if isinstance(self.source, str) else self.source.ir


class _MatmulLayout(_Record):
    """A matmul's operands: pointer sources, M, N, K, (row, column) element strides and
    offsets of A and B, batch dims, where M and N are in C, C's strides, and each batch
    dim's strides in A and B (0 where broadcast)."""
    __slots__ = ("sources", "M", "N", "K", "a_rc", "a_off", "b_rc", "b_off", "nb", "m_dim",
                 "n_dim", "c_str", "batch_strides")

    def __init__(self, sources: list, M: int, N: int, K: int, a_rc: tuple[int, int],
                 a_off: int, b_rc: tuple[int, int], b_off: int, nb: int, m_dim: int | None,
                 n_dim: int | None, c_str: tuple[int, ...],
                 batch_strides: list[tuple[int, int]]):
        self.sources, self.M, self.N, self.K = sources, M, N, K
        self.a_rc, self.a_off, self.b_rc, self.b_off = a_rc, a_off, b_rc, b_off
        self.nb, self.m_dim, self.n_dim = nb, m_dim, n_dim
        self.c_str, self.batch_strides = c_str, batch_strides


class BlasStep(_Record):
    """A matrix product run by cuBLAS (``gpu/blas.py``) between the kernels: ``gemm`` a
    blas.Gemm, ``a``, ``b``, ``c`` the stored buffers the operands view."""
    __slots__ = ("name", "blas", "gemm", "a", "b", "c")

    def __init__(self, name: str, blas: Any, gemm: Any, a: Node, b: Node, c: Node):
        self.name, self.blas, self.gemm, self.a, self.b, self.c = name, blas, gemm, a, b, c

    def run(self, ptrs: dict[Node, int]) -> None:
        self.blas.gemm(self.gemm, ptrs[self.a], ptrs[self.b], ptrs[self.c])


def _collapse(dims: Sequence[int], strides: Sequence[int]) -> int | None:
    """The one stride that walks batch dims ``dims`` of these strides in C order (0 when
    every one broadcasts), or None when they are not one arithmetic progression."""
    live = [(n, st) for n, st in zip(dims, strides) if n != 1]
    if not live:
        return 0
    for (n0, s0), (n1, s1) in zip(live, live[1:]):
        if s0 != s1 * n1:
            return None
    return live[-1][1]


class _MatmulGeometry:
    """Stands in for a Geometry where a matmul has no epilogue (for logs and explain)."""
    strategy = "matmul"


_MATMUL_GEOMETRY = _MatmulGeometry()


class ExternalStep(_Record):
    """An external op between the kernels. With a device implementation (``device``, from
    ``External.device["cuda"]``), it is called as ``device(dev, operands, results, **attrs)``
    with ``DeviceBuffer``s (pointer, shape, element strides, dtype: each operand a view of a
    device buffer, each result a fresh C-contiguous buffer, None for one the graph does not
    use) and queues its work on ``dev``'s stream, or returns ``NotImplemented`` for operands
    it does not take. Without one (or then), the op runs on the host: each
    operand copied to the host, the host function, each result copied into its device
    buffer -- correct, not fast. ``operands``: each stored base and its view chain
    (bottom-up); ``dead``: operand buffers nothing reads after this step (intermediates: see
    GpuExecutable)."""
    __slots__ = ("op", "operands", "attrs", "results", "types", "device", "dead")

    def __init__(self, op: str, operands: list[tuple[Node, tuple[Node, ...]]], attrs: dict,
                 results: list[Node | None], types: list[tuple[tuple[int, ...], np.dtype]],
                 device: Any = None, dead: frozenset = frozenset()):
        self.op, self.operands, self.attrs, self.results = op, operands, attrs, results
        self.types, self.device, self.dead = types, device, dead


class _PtxTools:
    """What ``Lowered.as_text`` asks of an executable's ``jit``."""

    def __init__(self, target: ptxmod.GpuTarget):
        self.target = target

    def optimized_ir(self, ir_text: str) -> str:
        return ptxmod.optimized_ir(ir_text, self.target)

    def asm(self, ir_text: str) -> str:
        return ptxmod.compile_ptx(ir_text, self.target)


class GpuExecutable:
    """Everything needed to run one plan on the GPU for arrays of one signature.
    ``matmul_precision``: ``compile``'s option ("tf32": cuBLAS's float32 products may use
    TF32 tensor cores)."""

    takes_matmul_precision = True   # (api.py passes compile's option)

    def __init__(self, plan: Plan, specs: list[TileSpec], inputs: Sequence[Any],
                 name: str = "k", matmul_precision: str = "float32"):
        self.plan, self.graph, self.specs = plan, plan.graph, specs
        self.matmul_precision = matmul_precision
        self.target = current_target()
        self.jit = _PtxTools(self.target)
        # the frozen launch policy of this device (tile/policy.py), read once, and whether
        # tunable kernels time candidate policies on their first run (tile/tune.py)
        self.tiling = policy_for(gpu_tiling(device_name(), sm_count(), smem_per_block_optin()))
        self.autotune = config.autotune_mode()
        self.name = name
        # What building cost (CompiledFunction.cache_info()): PTX compiled by LLVM, loaded
        # from the disk cache, and looked up there in vain.
        self.compiles = self.disk_hits = self.disk_misses = 0
        self.layouts: dict[Node, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for node, x in zip(self.graph.inputs, inputs):
            if is_device_array(x):
                self.layouts[node] = (tuple(x.shape), tuple(s // x.dtype.itemsize
                                                            for s in x.strides))
            else:
                self.layouts[node] = (node.shape, _c_strides(node.shape))
        self.in_place: dict[Node, Node] = {}   # (below, once the matmul epilogues are known)
        for node in plan.stored:
            self.layouts.setdefault(node, (node.shape, _c_strides(node.shape)))
        # float matrix products cuBLAS can take (gpu/blas.py): a library call each, never
        # absorbing an epilogue (which then runs as its own map kernel over C)
        self._blas: dict[int, BlasStep] = self._blas_steps()
        self._absorbed, self._fused = self._matmul_epilogues()
        # an argument's final value that its map kernel writes into the argument's own
        # device memory (Plan.in_place: the kernel reads the argument only at the element
        # it writes, no later kernel reads it), through the argument's strides
        self.in_place = self._in_place_updates(specs)
        for value, arg in self.in_place.items():
            self.layouts[value] = self.layouts[arg]
        self.not_stored: set[Node] = {mm for i, (j, mm, store_c) in self._fused.items()
                                      if not store_c}
        self.kernels: list[GpuKernel] = []   # in run order
        self.steps: list[GpuKernel | ExternalStep] = []   # kernels and library calls, in order
        for i, spec in enumerate(specs):
            if i in self._absorbed:
                continue   # runs with its epilogue, at the epilogue's position
            if i in self._blas:
                self.steps.append(self._blas[i])
                continue
            if spec.strategy == "external":
                self.steps.append(self._external_step(spec.kernel))
                continue
            try:
                if i in self._fused:
                    gk = self._prepare_matmul(specs[self._fused[i][0]], i)
                elif spec.strategy == "matmul":
                    gk = self._prepare_matmul(spec, None)
                else:
                    gk = self._prepare(spec, f"{name}{i}")
            except TracearrayError:
                raise
            except Exception as e:   # noqa: BLE001 -- named with the kernel's ops and lines
                raise stage_error(f"compiling kernel {name}{i} for the GPU", spec.kernel.nodes,
                                  e, plan.graph.locations) from e
            self.kernels.append(gk)
            self.steps.append(gk)
        self._mark_dead_operands()
        self._constants: dict[Node, Array] = {}
        self.produced = [n for n in plan.stored if n.op not in ("input", "constant")
                         and n not in self.not_stored and n not in self.in_place]
        # Resolved once, not on every call: the constants to upload (once) and where each
        # output comes from ("array": a produced buffer, "input": that input, else a constant).
        self._constant_nodes = [n for n in plan.stored if n.op == "constant"]
        produced = set(self.produced)
        # What a call allocates for each produced buffer (C-contiguous), worked out once.
        self._produced_layouts = []
        for n in self.produced:
            shape, dtype = tuple(int(d) for d in n.shape), np.dtype(n.dtype)
            size = math.prod(shape)
            strides = tuple(dtype.itemsize * st for st in _c_strides(shape))
            self._produced_layouts.append((n, size * dtype.itemsize, shape, dtype, strides, size))
        self._shared = self._share_intermediates()
        self._checking = [gk for gk in self.kernels if gk.checks and gk.launches]
        self._run_lock = threading.RLock()
        self._direct: Any = None   # _plan_direct's plan (None: not planned yet)
        # the warm path of the commonest executable, one launch of one kernel writing one
        # new array (``_single_launch``); None until planned, or for any other executable
        self._single: Any = None
        self._output_sources: list[tuple[str, Any]] = [
            ("array", o) if o in produced else
            ("in_place", self.graph.inputs.index(self.in_place[o])) if o in self.in_place else
            ("input", self.graph.inputs.index(o)) if o in self.graph.inputs else ("constant", o)
            for o in self.graph.outputs]

    def _share_intermediates(self) -> list[tuple[Node, Node]]:
        """Let intermediates whose last step is queued lend their memory to later ones of
        the same byte size (``tile.lifetimes``; the stream runs the steps in order): the
        (node, owner) pairs of the buffers that use another's memory, which
        ``_produced_layouts`` then no longer allocates."""
        touched: list[list[Node]] = []
        for step in self.steps:
            if type(step) is BlasStep:
                touched.append([step.a, step.b, step.c])
            elif type(step) is ExternalStep:
                touched.append([b for b, _chain in step.operands] +
                               [n for n in step.results if n is not None])
            else:
                touched.append([src[1] for src in step.ptr_sources if src[0] == "buf"])
        kept = set(self.graph.outputs)
        number = {n: j for j, (n, *_r) in enumerate(self._produced_layouts)}
        sizes = {number[n]: nbytes for n, nbytes, *_r in self._produced_layouts
                 if n not in kept and nbytes > 0}
        owner = share_memory(sizes, lifetimes([[number[n] for n in t if n in number]
                                               for t in touched], sizes))
        nodes = [n for n, *_r in self._produced_layouts]
        shared = [(nodes[j], nodes[o]) for j, o in owner.items() if o != j]
        self._produced_layouts = [lay for j, lay in enumerate(self._produced_layouts)
                                  if owner.get(j, j) == j]
        return shared

    def _in_place_updates(self, specs: list[TileSpec]) -> dict[Node, Node]:
        """``plan.in_place``, less the values a matmul kernel would write as its epilogue
        (its tiles store C-contiguous rows)."""
        out = {}
        for value, arg in self.plan.in_place.items():
            writer = next((i for i, spec in enumerate(specs)
                           if any(st.dest is value for st in spec.kernel.stores)), None)
            if writer is None or writer in self._fused:
                continue
            out[value] = arg
        return out

    def _mark_dead_operands(self) -> None:
        """Each external step's operand buffers that no later step reads and that are not
        the function's inputs, outputs or constants: its implementation may overwrite them
        (cuFFT's C2R without a copy first)."""
        keep = set(self.graph.inputs) | set(self.graph.outputs)
        later: set[Node] = set()
        for step in reversed(self.steps):
            if isinstance(step, ExternalStep):
                bases = [base for base, _chain in step.operands]
                step.dead = frozenset(
                    b for b in bases if b not in later and b not in keep and
                    b.op not in ("input", "constant") and bases.count(b) == 1)
                later.update(bases)
            elif isinstance(step, BlasStep):
                later.update((step.a, step.b))
            else:
                later.update(src[1] for src in step.ptr_sources if src[0] == "buf")

    # ----------------------------------------------------------------- matmul fusion
    def _matmul_epilogues(self) -> tuple[set[int], dict[int, tuple[int, Node, bool]]]:
        """Map kernels absorbed by matmuls (``fuse.epilogue``): (absorbed indices, {epilogue
        index: (matmul index, matmul node, whether C must still be stored)}); a matmul that
        cuBLAS runs takes none."""
        return matmul_epilogues(self.plan, self._blas)

    def kernel_notes(self) -> dict[int, str]:
        """What runs each matmul kernel and its epilogue, by kernel index (``explain``)."""
        notes = {i: "cuBLAS (a library call; the next kernel runs after it)"
                 for i in self._blas}
        for j, (i, _mm, store_c) in self._fused.items():
            notes[i] = (f"tracearray's matmul kernel, computing kernel {j} as its epilogue"
                        + ("; the product is stored too" if store_c else
                           " (the product is never stored)"))
            notes[j] = f"runs inside kernel {i} (its matmul's epilogue)"
        return notes

    def bound_kernels(self) -> dict[int, Any]:
        """Each fused kernel's binding (``tile.bind.BoundKernel``), by plan position: what
        runs, for ``explain()`` (a matmul kernel of ours, or a library call, has none)."""
        position = {id(spec): i for i, spec in enumerate(self.specs)}
        return {position[id(gk.spec)]: gk.bound_kernel for gk in self.kernels
                if gk.bound_kernel is not None}

    # ----------------------------------------------------------------- build
    def _access_views(self, kernel: Kernel) -> tuple[list, list]:
        """(pointer sources, per-access (base, strides)) of a kernel's loads."""
        rank = len(kernel.space) + len(kernel.body.nested_extents)
        sources, loads = [], []
        for acc in kernel.body.accesses:
            shape, strides = self.layouts[acc.buffer]
            vp = plan_view(shape, strides, acc.buffer.dtype, acc.chain)
            loads.append(affine_params(vp.strides, vp.offset, acc.index, rank))
            sources.append(("buf", acc.buffer, vp.copies))
        return sources, loads

    def _store_views(self, kernel: Kernel) -> list:
        rank = len(kernel.space) + len(kernel.body.nested_extents)
        out = []
        for st in kernel.stores:
            # C-contiguous buffers of the call's own, or an argument's memory (in_place)
            strides = self.layouts[st.dest][1] if st.dest in self.in_place else \
                _c_strides(st.dest.shape)
            offset = st.offset * strides[st.axis] if st.dest is not st.node else 0
            out.append(affine_params(strides, offset, st.index, rank))
        return out

    def _prepare(self, spec: TileSpec, name: str) -> GpuKernel:
        """The kernel bound to this executable's layouts (``tile.bind_kernel``, which
        decides every launch), its code found or generated, and its pointer sources."""
        kernel = spec.kernel
        sources, loads = self._access_views(kernel)
        sources += [("buf", st.dest, ()) for st in kernel.stores]
        stores = self._store_views(kernel)

        def rebind(policy: GpuTiling) -> BoundKernel:
            return bind_kernel(spec, loads, stores, policy, name,
                               lambda geo, strategy, wide: lowered_kernel(
                                   geo, self.name, strategy, wide, self.target, self))
        bound = rebind(self.tiling)
        lowered = bound.code
        pending = None
        if self.autotune != "off" and self._tunable(bound):
            key, record = tuning.tuning_key(lowered.ptx, bound, self._device_name())
            winner = tuning.cached_winner(key, record, bound.strategy, self.tiling)
            if winner is not None:
                bound = rebind(winner)
            else:
                pending = (key, record, candidates(bound.strategy, self.tiling), rebind)
        gk = GpuKernel(name, bound.strategy, lowered, lowered.ptx,
                       entry_names(bound.strategy, lowered.symbol), sources, bound.params,
                       bound.launches, bound.partial_dtypes, bound.nslots,
                       list(bound.scratch), spec=spec, geometry=bound.geometry,
                       bound_kernel=bound)
        # after the stores: scratch arrays, then any partials, then the error flag (last)
        gk.ptr_sources += [("scratch", i) for i in range(len(bound.scratch))]
        gk.ptr_sources += [("partial", i) for i in range(len(gk.partial_dtypes))]
        if kernel.body.checks:
            gk.checks = list(kernel.body.checks)
            gk.ptr_sources.append(("flag",))
        gk.tuning = pending
        return gk

    def _tunable(self, bound: BoundKernel) -> bool:
        """Whether a kernel may be timed with candidate policies on its first run: a tuned
        driver (tile/tune.py), no index checks, scratch or partial results, and running it
        again gives the same result (it writes no buffer it reads, and no argument in place)."""
        kernel = bound.spec.kernel
        if bound.strategy not in TUNED_FIELDS or kernel.body.checks or bound.scratch or \
                bound.partial_dtypes:
            return False
        read = {a.buffer for a in kernel.body.accesses}
        return not any(st.dest in read or st.dest in self.in_place or
                       st.dest in self.plan.in_place for st in kernel.stores)

    def _device_name(self) -> str:
        dev = get_device()
        return f"{getattr(dev, 'name', type(dev).__name__)} {self.target.arch}"

    def _prepare_matmul(self, spec: TileSpec, epi_j: int | None) -> GpuKernel:
        """A matmul kernel, with the map kernel ``epi_j`` as its epilogue when given."""
        mm = spec.kernel.matmul
        name = f"{self.name}{self.specs.index(spec) if epi_j is None else epi_j}"
        store_c = True if epi_j is None else self._fused[epi_j][2]
        lay = self._matmul_layout(mm)
        sources = list(lay.sources)
        out, nb, M, N, K = mm.shape, lay.nb, lay.M, lay.N, lay.K
        m_dim, n_dim, c_str = lay.m_dim, lay.n_dim, lay.c_str
        mmp = [M, N, K, lay.a_off, lay.a_rc[0], lay.a_rc[1], lay.b_off, lay.b_rc[0],
               lay.b_rc[1], 0, c_str[m_dim] if m_dim is not None else 0,
               c_str[n_dim] if n_dim is not None else 0]
        for d in range(nb):
            mmp += [out[d], lay.batch_strides[d][0], lay.batch_strides[d][1], c_str[d]]
        epi_geo = None
        epi_params = np.zeros(0, dtype=np.int64)
        if store_c:
            sources.append(("buf", mm, ()))
        if epi_j is not None:
            epi_kernel = self.specs[epi_j].kernel
            epi_sources, epi_loads = self._access_views(epi_kernel)
            epi_sources += [("buf", st.dest, ()) for st in epi_kernel.stores]
            # the epilogue's geometry and parameters (bound without code: the matmul's
            # lowering writes its body into the tiles' store)
            epi = bind_kernel(self.specs[epi_j], epi_loads, self._store_views(epi_kernel),
                              self.tiling, name)
            epi_geo, epi_params = epi.geometry, epi.params
            # the epilogue's loads of C read the accumulators: no pointer needed
            epi_sources = [("null",) if s[0] == "buf" and s[1] is mm else s for s in epi_sources]
            sources += epi_sources
        from .codegen import MatmulLowering
        lowering = MatmulLowering(mm, name, epi_geo, store_c, (m_dim, n_dim))
        ir_text = lowering.lower()
        ptx = ptxmod.compile_ptx(ir_text, self.target, self)
        params = np.concatenate([epi_params, np.asarray(mmp, dtype=np.int64)])
        launches = matmul_launches(name, math.prod(int(d) for d in out[:nb]), M, N)
        return GpuKernel(name, "matmul", ir_text, ptx, [name], sources, params, launches,
                         spec=spec, geometry=epi_geo or _MATMUL_GEOMETRY)

    def _matmul_layout(self, mm: Node) -> "_MatmulLayout":
        """Where a matmul's operands are and how they are laid out (1-d operands as a
        1 x K row or a K x 1 column with a zero stride on the added axis)."""
        views, sources = [], []
        for arg in mm.args:
            base, chain = self._view_chain(arg)
            shape, strides = self.layouts[base]
            vp = plan_view(shape, strides, base.dtype, chain)
            views.append(vp)
            sources.append(("buf", base, vp.copies))
        (a_shape, a_str, a_off), (b_shape, b_str, b_off) = \
            [(v.shape, v.strides, v.offset) for v in views]
        a2, a2s = (a_shape, a_str) if len(a_shape) >= 2 else ((1,) + a_shape, (0,) + a_str)
        b2, b2s = (b_shape, b_str) if len(b_shape) >= 2 else (b_shape + (1,), b_str + (0,))
        out = mm.shape
        nb = len(out) - (len(a_shape) >= 2) - (len(b_shape) >= 2)
        m_dim = nb if len(a_shape) >= 2 else None
        n_dim = nb + (m_dim is not None) if len(b_shape) >= 2 else None

        def batch_stride(shape2, strides2, d):
            k = d - (nb - (len(shape2) - 2))
            if k < 0 or shape2[k] == 1:
                return 0
            return strides2[k]

        return _MatmulLayout(
            sources, a2[-2], b2[-1], a2[-1], (a2s[-2], a2s[-1]), a_off, (b2s[-2], b2s[-1]),
            b_off, nb, m_dim, n_dim, _c_strides(out),
            [(batch_stride(a2, a2s, d), batch_stride(b2, b2s, d)) for d in range(nb)])

    def _blas_steps(self) -> dict[int, "BlasStep"]:
        """The matmul kernels that cuBLAS runs (``gpu/blas.py`` says which can)."""
        from . import driver
        steps: dict[int, BlasStep] = {}
        matmuls = [i for i, s in enumerate(self.specs) if s.strategy == "matmul"]
        dev = driver._device
        if not matmuls or dev is None:
            return steps
        from .blas import blas_for, plan_gemm   # (imported by programs with a matmul only)
        blas = blas_for(dev)
        if blas is None:
            return steps
        for i in matmuls:
            mm = self.specs[i].kernel.matmul
            lay = self._matmul_layout(mm)
            if any(src[2] for src in lay.sources):
                continue   # an operand needs a gather first: the own kernel does that
            batch_dims = mm.shape[:lay.nb]
            strides = [_collapse(batch_dims, [bs[0] for bs in lay.batch_strides]),
                       _collapse(batch_dims, [bs[1] for bs in lay.batch_strides]),
                       _collapse(batch_dims, list(lay.c_str[:lay.nb]))]
            if any(st is None for st in strides):
                continue
            g = plan_gemm(mm.dtype, lay.M, lay.N, lay.K, (*lay.a_rc, lay.a_off),
                          (*lay.b_rc, lay.b_off), math.prod(batch_dims), tuple(strides),
                          tf32=self.matmul_precision == "tf32")
            if g is not None:
                steps[i] = BlasStep(f"{self.name}{i}", blas, g, lay.sources[0][1],
                                    lay.sources[1][1], mm)
                config.log(config.COMPILES, "%s%d: matmul %s in cuBLAS%s", self.name, i,
                           "x".join(map(str, mm.shape)), " (TF32)" if g.tf32 else "")
        return steps

    def _external_step(self, kernel: Kernel) -> ExternalStep:
        register_device_libraries()
        call = kernel.call
        ext = EXTERNALS[call.op]
        types = ext.results([a.shape for a in call.operands], [a.dtype for a in call.operands],
                            dict(call.attrs))
        return ExternalStep(call.op, [self._view_chain(a) for a in call.operands],
                            dict(call.attrs), list(call.results),
                            [(tuple(sh), np.dtype(dt)) for sh, dt in types],
                            ext.device.get("cuda"))

    def _run_on_device(self, dev: Any, step: ExternalStep, ptrs: dict[Node, int],
                       keep: list[Any]) -> None:
        """One external call by its device implementation, on the stream."""
        operands = []
        for base, chain in step.operands:
            shape, strides = self.layouts[base]
            vp = plan_view(shape, strides, base.dtype, chain)
            p = ptrs[base]
            for copy in vp.copies:
                p = self._gather(dev, p, copy, keep)
            operands.append(DeviceBuffer(p + vp.offset * base.dtype.itemsize, vp.shape,
                                         vp.strides, base.dtype,
                                         bool(vp.copies) or base in step.dead))
        results = [DeviceBuffer(ptrs[n], shape, _c_strides(shape), dt)
                   if n is not None and n in ptrs else None
                   for n, (shape, dt) in zip(step.results, step.types)]
        try:
            done = step.device(dev, operands, results, **step.attrs)
        except Exception as e:   # noqa: BLE001 -- the op's error, at the user's line
            raise run_time_error(e, step.results, self.graph.locations) from None
        if done is NotImplemented:   # a layout or dtype the library does not take
            self._run_on_host(dev, step, ptrs)
        elif isinstance(done, PendingInfo):   # validity known on the device: read later
            _PENDING.append(DeviceInfo(done.block, done.count, done.error, step.results,
                                       self.graph.locations))

    def _run_on_host(self, dev: Any, step: ExternalStep, ptrs: dict[Node, int]) -> None:
        """One external call on the host (see ExternalStep). ``dtoh`` waits for the kernels
        queued before; ``htod`` of pageable memory returns once the data is staged, so the
        kernels after it read the results."""
        operands = []
        for base, chain in step.operands:
            shape, strides = self.layouts[base]
            host = _to_host(dev, ptrs[base], shape, strides, base.dtype)
            operands.append(_apply_views(host, chain))
        outs = [np.empty(shape, dt) for shape, dt in step.types]
        try:
            EXTERNALS[step.op].host(operands, outs, **step.attrs)
        except Exception as e:   # noqa: BLE001 -- NumPy's error, at the user's line
            raise run_time_error(e, step.results, self.graph.locations) from None
        for node, out in zip(step.results, outs):
            if node is not None and node in ptrs and out.nbytes:
                out = np.ascontiguousarray(out)
                dev.htod(ptrs[node], out.ctypes.data, out.nbytes)

    def _view_chain(self, node: Node) -> tuple[Node, tuple[Node, ...]]:
        """(stored base, view chain bottom-up) of a matmul operand."""
        return view_chain(node, self.plan.stored)

    # ----------------------------------------------------------------- text
    def ptx(self) -> str:
        return "\n".join(k.ptx for k in self.kernels)

    # ----------------------------------------------------------------- run
    def run(self, inputs: Sequence[Any]) -> list[Any]:
        single = self._single
        if single is not None:
            outs = single(inputs)
            if outs is not None:
                return outs
        return self._run_any(inputs)

    def _run_any(self, inputs: Sequence[Any]) -> list[Any]:
        """``run`` without the single-launch path (which declined these inputs)."""
        dev = get_device()
        dev.make_current()
        # The launches' argument buffers are the executable's own (filled, then copied by
        # the driver at the launch): one thread at a time queues this executable's kernels.
        # (Not renewed at fork: a forked child cannot use the GPU, get_device says so.)
        with self._run_lock:
            if self._direct is not None:
                outs = self._run_direct(dev, inputs)
                if outs is not None:
                    return outs
            outs = self._run(dev, inputs)
            if self._direct is None:
                self._direct = self._plan_direct()
                if self._direct:
                    self._single = self._single_launch(dev)
            return outs

    @property
    def fast_run(self) -> Any:
        """What the call fast path calls (``api._FastCall``, made after a first run): the
        single-launch function when there is one, with ``_run_any`` for what it declines;
        else ``run``."""
        single = self._single
        if single is None:
            return self.run
        any_path = self._run_any   # (held by the caller's entry, not by self: no cycle)

        def single_or_any(inputs: Sequence[Any]) -> list[Any]:
            return single(inputs) or any_path(inputs)
        return single_or_any

    def _single_launch(self, dev: Any) -> Any:
        """``_run_direct`` for an executable of one launch of one kernel whose one result is
        a new array (a map, a row reduction: most programs), with nothing looked up per call:
        the warm call on device arrays is host overhead alone (issue 12: 10 us a call). None
        for any other executable, and the function returns None for inputs the general path
        must take (not plain ``Array``s of ours, pending streams, per-kernel timing)."""
        fixed, kernels, outputs = self._direct
        if len(kernels) != 1 or len(kernels[0][1]) != 1 or len(self._produced_layouts) != 1 \
                or outputs != [(True, 0)]:
            return None
        (idx, ((fn, grid, block, smem, vals, addrs),)), = kernels
        (_node, nbytes, shape, dtype, strides, size), = self._produced_layouts
        n_inputs, n = len(self.graph.inputs), len(idx)
        allocator, launch = dev.allocator, dev.launch
        lock, make_current, timed = self._run_lock, dev.make_current, config.logger.isEnabledFor
        level = config.TIMES_LEVEL
        # the output's block: its rounded size and free list looked up once
        rounded = round_size(nbytes) if nbytes > 0 else 0
        free_list = allocator.free_list(rounded) if rounded else None
        allocate = allocator.allocate_rounded
        # the output Array is made here field by field (``Array._of_block``, inlined)
        new_array, sig = Array.__new__, fast_signature(dtype, shape, strides)
        # the pointers in launch order are the slots in order (inputs, the output, the
        # fixed ones) in most kernels: then no reordering per call
        in_order = idx == tuple(range(n))

        def run(inputs: Sequence[Any]) -> list[Any] | None:
            if len(inputs) != n_inputs or timed(level) or get_device() is not dev:
                return None
            slots = []
            for x in inputs:
                if type(x) is not Array or x._stream:
                    return None
                slots.append(x.ptr)
            make_current()
            blk = allocate(rounded, free_list) if rounded else Block(0, 0, None)
            slots.append(blk.ptr)
            slots += fixed
            with lock:
                vals[0:n] = slots if in_order else [slots[i] for i in idx]
                launch(fn, grid, block, addrs, smem)
            a = new_array(Array)
            a.ptr, a.shape, a.dtype, a.strides = blk.ptr, shape, dtype, strides
            a._owner, a._stream, a._size, a._sig = blk, 0, size, sig
            return [a]
        return run

    def _plan_direct(self) -> Any:
        """The warm path of an executable that is only kernels (no gathers, scratch arrays,
        error flags or library calls) for device-array inputs: each pointer a slot of one
        list (inputs, then produced buffers, then the fixed constants and partials), each
        kernel the slots of its pointers; False when the executable is not of that kind.
        Planned after a first run, when every kernel is bound."""
        if self._checking or any(type(gk) is not GpuKernel or gk.scratch or
                                 (gk.launches and gk.loaded is None) for gk in self.steps):
            return False
        slot = {node: i for i, node in enumerate(self.graph.inputs)}
        if len(slot) != len(self.graph.inputs):
            return False   # one node for two inputs: the general path
        for node, *_rest in self._produced_layouts:
            slot[node] = len(slot)
        n_slots = len(slot)
        for node, owner in self._shared:
            slot[node] = slot[owner]
        for value, arg in self.in_place.items():
            slot[value] = slot[arg]
        fixed: list[int] = []
        kernels = []
        for gk in self.steps:
            if not gk.launches:
                continue
            idx = []
            for src in gk.ptr_sources:
                if src[0] == "buf" and not src[2] and src[1] in slot:
                    idx.append(slot[src[1]])
                    continue
                if src[0] == "buf" and not src[2] and src[1] in self._constants:
                    ptr = self._constants[src[1]].ptr
                elif src[0] == "partial":
                    ptr = gk._partials[src[1]].ptr
                elif src[0] == "null":
                    ptr = 0
                else:
                    return False
                fixed.append(ptr)
                idx.append(-len(fixed))   # fixed pointer j as -(j + 1), placed below
            kernels.append((tuple(idx), gk.loaded))
        kernels = [(tuple(i if i >= 0 else n_slots - i - 1 for i in idx), bound)
                   for idx, bound in kernels]
        produced = {node: j for j, (node, *_r) in enumerate(self._produced_layouts)}
        outputs = []
        for kind, source in self._output_sources:
            if kind == "array":
                outputs.append((True, produced[source]))
            elif kind in ("input", "in_place"):
                outputs.append((False, source))
            else:
                return False
        return (fixed, kernels, outputs)

    def _run_direct(self, dev: Any, inputs: Sequence[Any]) -> list[Any] | None:
        """``_run`` for device arrays through the planned slots; None when an input is not
        a plain ``Array`` of ours (the general path takes it)."""
        if self._direct is False:
            return None
        if config.logger.isEnabledFor(config.TIMES_LEVEL):
            return None   # the general path times every step
        fixed, kernels, outputs = self._direct
        slots = []
        for x in inputs:
            if type(x) is not Array or x._stream:
                return None
            slots.append(x.ptr)
        allocate = dev.allocator.allocate
        arrays = []
        for _node, nbytes, shape, dtype, strides, size in self._produced_layouts:
            block = allocate(nbytes)
            slots.append(block.ptr)
            arrays.append(Array._of_block(block, shape, dtype, strides, size))
        slots += fixed
        launch = dev.launch
        for idx, bound in kernels:
            pointers = [slots[i] for i in idx]
            n = len(pointers)
            for fn, grid, block, smem, vals, addrs in bound:
                vals[0:n] = pointers
                launch(fn, grid, block, addrs, smem)
        return [arrays[j] if produced else inputs[j] for produced, j in outputs]

    def _run(self, dev: Any, inputs: Sequence[Any]) -> list[Any]:
        device_mode = False
        ptrs: dict[Node, int] = {}
        keep: list[Any] = []   # what must live until the launches are queued
        held: dict[Node, Array] = {}   # the Arrays of inputs that are not plain Arrays
        for node, x in zip(self.graph.inputs, inputs):
            if type(x) is Array:
                device_mode = True
                if x._stream:
                    dev.wait_for_stream(x._stream)
                ptrs[node] = x.ptr
                continue
            if is_device_array(x):
                device_mode = True
                from .array import as_array
                arr = as_array(x)
                if arr._stream:
                    dev.wait_for_stream(arr._stream)
            else:
                arr = Array.from_numpy(x)
            keep.append(arr)
            held[node] = arr
            ptrs[node] = arr.ptr
        for value, arg in self.in_place.items():
            ptrs[value] = ptrs[arg]
        for node in self._constant_nodes:
            if node not in self._constants:
                self._constants[node] = Array.from_numpy(constant_value(node))
            ptrs[node] = self._constants[node].ptr
        arrays: dict[Node, Array] = {}
        allocate = dev.allocator.allocate
        for node, nbytes, shape, dtype, strides, size in self._produced_layouts:
            block = allocate(nbytes)
            arrays[node] = Array._of_block(block, shape, dtype, strides, size)
            ptrs[node] = block.ptr
        for node, owner in self._shared:   # memory of an intermediate that has died
            ptrs[node] = ptrs[owner]
        flag_ptrs: dict[int, int] = {}
        if self._checking:
            # one pair of int64 per checking kernel, cleared before the kernels run
            flags = Array.empty((2 * len(self._checking),), np.int64)
            zeros = np.zeros(2 * len(self._checking), np.int64)
            dev.htod(flags.ptr, zeros.ctypes.data, zeros.nbytes)
            flag_ptrs = {id(gk): flags.ptr + 16 * j for j, gk in enumerate(self._checking)}
        timed = config.logger.isEnabledFor(config.TIMES_LEVEL)   # ~0.1 us
        for gk in self.steps:
            if timed:   # host-timed to completion: each step waits for the one before
                dev.synchronize()
                start = time.perf_counter()
            if type(gk) is GpuKernel:
                self._launch(dev, gk, ptrs, keep, flag_ptrs.get(id(gk), 0))
            elif type(gk) is BlasStep:
                gk.run(ptrs)
            elif gk.device is not None:
                self._run_on_device(dev, gk, ptrs, keep)
            else:
                self._run_on_host(dev, gk, ptrs)
            if timed:
                dev.synchronize()
                config.log(config.TIMES, "%s: %.3f ms (GPU, synchronised)",
                           getattr(gk, "name", "external"), 1e3 * (time.perf_counter() - start))
        if self._checking:
            # read when the host next waits for the device (see raise_pending_index_errors)
            _PENDING.append(_IndexFlags(flags, [gk.checks for gk in self._checking],
                                        self.graph.locations))
        outs: list[Any] = []
        constants: dict[int, Any] = {}
        for kind, source in self._output_sources:
            if kind == "array":
                outs.append(arrays[source])
            elif kind == "input":
                outs.append(inputs[source])
            elif kind == "in_place":   # written into the argument's device memory
                x = inputs[source]
                outs.append(x if type(x) is Array else held[self.graph.inputs[source]])
            else:   # (a constant returned twice is one array, as NumPy's)
                value = constants.get(id(source))
                if value is None:
                    value = constant_value(source)
                    value = constants[id(source)] = Array.from_numpy(value) if device_mode \
                        else np.array(value)
                outs.append(value)
        if not device_mode:
            host: dict[int, Any] = {}
            for k, o in enumerate(outs):
                if isinstance(o, Array):
                    if id(o) not in host:
                        host[id(o)] = o.numpy()
                    outs[k] = host[id(o)]
            raise_pending_index_errors()
        return outs

    def _launch(self, dev: Any, gk: GpuKernel, ptrs: dict[Node, int], keep: list[Any],
                flag_ptr: int = 0) -> None:
        if not gk.launches:
            return
        if gk.loaded is None:
            self._load_launches(dev, gk)
        if gk.scratch:
            scratch = [Array.empty((size,), dt) for dt, size in gk.scratch]
            keep += scratch
        pointers: list[int] = []
        for src in gk.ptr_sources:
            kind = src[0]
            if kind == "buf":
                p = ptrs[src[1]]
                for step in src[2]:
                    p = self._gather(dev, p, step, keep)
                pointers.append(p)
            elif kind == "partial":
                pointers.append(gk._partials[src[1]].ptr)
            elif kind == "scratch":
                pointers.append(scratch[src[1]].ptr)
            elif kind == "flag":
                pointers.append(flag_ptr)
            else:
                pointers.append(0)
        if gk.tuning is not None:
            self._tune(dev, gk, pointers)
        n = len(pointers)
        launch = dev.launch
        for fn, grid, block, smem, vals, addrs in gk.loaded:
            vals[0:n] = pointers
            launch(fn, grid, block, addrs, smem)

    def _load_launches(self, dev: Any, gk: GpuKernel) -> None:
        """Load the kernel's module and make, once, each launch's argument buffer: the
        pointers (filled at every call), then the parameters and the launch's extras, and
        the ``void*[]`` of their addresses that ``cuLaunchKernel`` takes."""
        if not gk.functions:
            gk.functions = dev.load(gk.ptx, gk.names, lambda: gk.ir)
        if gk.nslots and not gk._partials:
            gk._partials = [Array.empty((gk.nslots,), dt) for dt in gk.partial_dtypes]
        gk.loaded, buffers = self._loaded(dev, gk, gk.launches)
        gk._buffers += buffers

    def _tune(self, dev: Any, gk: GpuKernel, pointers: list[int]) -> None:
        """Time the kernel's candidate policies (tile/tune.py) on this run's buffers, keep
        the fastest for the kernel and remember it (gpu/tuning.py); a candidate that fails
        to launch scores infinity (the default is the first candidate: a tie keeps it).
        When every candidate fails, the default's launches (loaded already) stay and
        nothing is remembered."""
        key, record, policies, rebind = gk.tuning
        gk.tuning = None
        results, best = [], None
        for policy in policies:
            try:
                launches = rebind(policy).launches
                loaded, buffers = self._loaded(dev, gk, launches)
                ms = tuning.time_launches(dev, loaded, pointers)
            except CudaError:
                results.append((math.inf, policy))
                continue
            results.append((ms, policy))
            if best is None or ms < best[0]:
                best = (ms, policy, launches, loaded, buffers)
        winner = policies[0]
        if best is not None:
            _ms, winner, gk.launches, gk.loaded, buffers = best
            gk._buffers += buffers
            gk.bound_kernel = rebind(winner)
            tuning.remember(key, record, gk.strategy, winner)
        if self.autotune == "print":
            tuning.report(gk.name, gk.strategy, results, winner if best is not None else None)

    def _loaded(self, dev: Any, gk: GpuKernel, launches: list[Launch]
                ) -> tuple[list[tuple], list[Any]]:
        """The loaded form of ``launches`` of the kernel (its module loaded), and the
        argument buffers it points into (the caller keeps them alive)."""
        loaded, buffers = [], []
        for ln in launches:
            fn = gk.functions[ln.entry]
            if ln.smem:
                dev.allow_smem(fn, ln.smem)
            block = min(ln.block, fn.max_threads)
            block = 1 << (block.bit_length() - 1)   # a power of two (block reductions' tree)
            if gk.strategy == "matmul" and block != ln.block:   # (its tile needs them all)
                raise RuntimeError(f"kernel {ln.entry} cannot run {ln.block} threads per "
                                   f"block on this GPU (limit {fn.max_threads})")
            packed = _pack([0] * len(gk.ptr_sources), gk.params, ln.extra)
            vals = (ctypes.c_uint64 * len(packed))(*packed.tolist())
            base = ctypes.addressof(vals)
            addrs = (ctypes.c_uint64 * len(packed))(*range(base, base + 8 * len(packed), 8))
            # the caller keeps the buffers; the launch takes the addresses' address
            buffers.append((vals, addrs))
            loaded.append((fn, ln.grid, max(block, 32), ln.smem, vals,
                           ctypes.addressof(addrs)))
        return loaded, buffers

    def _gather(self, dev: Any, src: int, step: CopyStep, keep: list[Any]) -> int:
        out = Array.empty(step.shape, np.dtype(f"u{step.itemsize}"))
        keep.append(out)
        keep.append(strided_copy(dev, out.ptr, src, step.shape, step.strides, step.offset,
                                 step.itemsize, counts=self))
        return out.ptr


# Errors found on the device, not read yet: the host reads them when it next waits for the
# device -- at the end of a call with NumPy inputs, and in Array.numpy() (so also np.asarray
# of a result) for calls on device arrays. Each entry's ``error(dev)`` reads its flags and
# returns NumPy's exception at the user's line, or None.
_PENDING: list[Any] = []


class _IndexFlags(_Record):
    """A call's index-check flags: one pair of int64 per checking kernel (check, index)."""
    __slots__ = ("flags", "checks", "locations")

    def __init__(self, flags: Array, checks: list[list], locations: dict):
        self.flags, self.checks, self.locations = flags, checks, locations

    def error(self, dev: Any) -> Exception | None:
        from ..cpu.runtime import index_error
        host = np.empty(self.flags.shape, np.int64)
        dev.dtoh(host.ctypes.data, self.flags.ptr, host.nbytes)
        for j, kernel_checks in enumerate(self.checks):
            if host[2 * j]:
                return index_error(kernel_checks[int(host[2 * j]) - 1], int(host[2 * j + 1]),
                                   self.locations)
        return None


class DeviceInfo(_Record):
    """A library call's per-matrix ``info`` words (int32; non-zero: the matrix is singular,
    or not positive definite for cholesky), raised as ``error`` at the nodes' line
    (``errors.run_time_error``); ``info`` is the memory Block holding them."""
    __slots__ = ("info", "count", "error_value", "nodes", "locations")

    def __init__(self, info: Any, count: int, error_value: Exception, nodes: list,
                 locations: dict):
        self.info, self.count, self.error_value, self.nodes, self.locations = \
            info, count, error_value, nodes, locations

    def error(self, dev: Any) -> Exception | None:
        host = np.empty(self.count, np.int32)
        dev.dtoh(host.ctypes.data, self.info.ptr, host.nbytes)
        if host.any():
            return run_time_error(self.error_value, self.nodes, self.locations)
        return None


def raise_pending_index_errors() -> None:
    """Read the error flags of the calls queued so far (the stream has just been waited for)
    and raise the first error found: NumPy's IndexError for a bad index, LinAlgError for a
    singular matrix, at the user's line."""
    from .driver import get_device
    found = None
    while _PENDING:
        entry = _PENDING.pop(0)
        err = entry.error(get_device())
        if found is None:
            found = err
    if found is not None:
        raise found


_OFFSETS: dict[int, np.ndarray] = {}


def _arg_offsets(n: int) -> np.ndarray:
    """Byte offsets of ``n`` packed 8-byte kernel arguments (read-only, made once per n)."""
    offsets = _OFFSETS.get(n)
    if offsets is None:
        offsets = np.arange(n, dtype=np.uint64) * np.uint64(8)
        offsets.flags.writeable = False
        _OFFSETS[n] = offsets
    return offsets


def _to_host(dev: Any, ptr: int, shape: Sequence[int], strides: Sequence[int],
             dtype: np.dtype) -> np.ndarray:
    """A device buffer of this layout (element strides, negative ones too: ``ptr`` is the
    first element's) as a host array of the same layout: the memory it spans is copied,
    after the work queued on the stream."""
    dtype = np.dtype(dtype)
    if any(n == 0 for n in shape):
        return np.empty(shape, dtype)
    low = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)    # (<= 0)
    high = sum((n - 1) * st for n, st in zip(shape, strides) if st > 0)
    flat = np.empty(high - low + 1, dtype)
    dev.dtoh(flat.ctypes.data, ptr + low * dtype.itemsize, flat.nbytes)
    return np.lib.stride_tricks.as_strided(flat[-low:], tuple(shape),
                                           tuple(st * dtype.itemsize for st in strides))


def _apply_views(array: np.ndarray, chain: Sequence[Node]) -> np.ndarray:
    for node in chain:
        array = OPS[node.op].numpy_ref(array, **dict(node.attrs))
    return array


def _pack(pointers: Sequence[int], params: np.ndarray, extra: Sequence[int]) -> np.ndarray:
    vals = np.empty(len(pointers) + len(params) + len(extra), dtype=np.uint64)
    vals[:len(pointers)] = np.asarray(pointers, dtype=np.uint64)
    vals[len(pointers):len(pointers) + len(params)] = params.view(np.uint64)
    if extra:
        vals[len(pointers) + len(params):] = np.asarray(extra, dtype=np.uint64)
    return vals
