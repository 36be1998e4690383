"""Binding: one kernel's tiling for the argument layouts of a call, under a target's frozen
tiling policy. Both runtimes call it; what it returns is everything they need to allocate
and launch, so a runtime only allocates, loads and launches.

Entry function: ``bind_kernel(spec, loads, stores, policy, name, lower) -> BoundKernel``.

1. ``make_geometry`` (geometry.py) refines the plan's ``TileSpec`` for the strides met
   (merged dimensions, ``map2d`` / ``col`` tilings, the strides built into the code; the GPU
   builds in only unit and zero strides, so fewer variants compile);
2. ``fill_params`` (layout.py): the kernel's run-time parameter array;
3. the driver that runs the geometry: the geometry's strategy on the CPU, the GPU's driver
   for it (``tile/gpu.py``: ``warp_row`` / ``block_row`` / ``thread_row`` for a row,
   ``scan_tiled`` for a long scan, ...) and whether positions need 64 bits;
4. ``lower(geometry, driver, wide)``: the runtime's way to get the code (a cache lookup or
   code generation); the GPU's launch shapes read a few facts of the lowered code (its row
   cache's bytes per element and buffers, its static shared memory);
5. the work split: the CPU's chunks of the parallel range (pool tasks, or a full
   reduction's fixed slots), the GPU's launches (entry, grid, block, run-time extras,
   dynamic shared memory) with their scratch and partial-result arrays.

``BoundKernel.summary()`` says what runs in words, for ``explain()``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import TileSpec, full_reduction_slots, parallel_extent, work_per_iteration
from .geometry import Geometry, make_geometry
from . import gpu as drivers
from .gpu import (FULL_BLOCK, MATMUL_MAX_GRID, MATMUL_THREADS, MATMUL_TILE,
                  MAX_BLOCK, RADIX, RADIX_BITS, SORT_ENTRIES, WARP,
                  entry_names, gpu_strategy, radix_passes, row_cache_part_bytes,
                  scan_tile_length, scratch_dtypes, sort_chunks)
from .layout import AccessParams, fill_params, partial_dtypes
from .policy import CpuTiling, GpuTiling


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the entry, grid and block, the run-time extras after the
    parameters, and the dynamic shared memory (bytes)."""
    entry: str
    grid: int
    block: int
    extra: tuple[int, ...] = ()
    smem: int = 0


@dataclass
class BoundKernel:
    """A kernel bound to one call's layouts (module doc)."""
    spec: TileSpec
    geometry: Geometry
    strategy: str                 # the driver that runs: the geometry's (CPU) or tile/gpu's
    params: np.ndarray            # int64 parameter array (layout.py)
    extents: list[int]            # of the geometry's loop dims
    wide: bool = False            # (GPU) positions in 64 bits
    code: Any = None              # what the runtime's ``lower`` returned
    # CPU: chunks of the parallel range, one pool task each (a full reduction: its slots)
    chunks: list[tuple[int, int]] = field(default_factory=list)
    # GPU: launches in order, scratch arrays (dtype, elements) the passes share
    launches: list[Launch] = field(default_factory=list)
    scratch: list[tuple[np.dtype, int]] = field(default_factory=list)
    # full reductions: dtypes of the partial-result arrays, and (GPU) their slots
    partial_dtypes: list[np.dtype] = field(default_factory=list)
    nslots: int = 0

    def summary(self) -> str:
        """How the work runs, in words: the loop dims' extents, the parallel iterations and
        the elements each touches, then the CPU's chunks or the GPU's launches."""
        geo = self.geometry
        n_par = parallel_extent(geo, self.extents)
        work = work_per_iteration(geo, self.extents)
        text = (f"loops {self.extents}: {n_par} parallel iteration{'s' if n_par != 1 else ''}"
                f" of {work} element{'s' if work != 1 else ''}")
        if self.launches:
            parts = []
            for ln in self.launches[:3]:
                part = f"grid {ln.grid} x {ln.block} threads"
                if ln.smem:
                    part += f", {ln.smem} B dynamic shared memory"
                parts.append(part)
            more = f" (+{len(self.launches) - 3} more launches)" \
                if len(self.launches) > 3 else ""
            return f"{text}; " + "; ".join(parts) + more
        if self.partial_dtypes:
            return f"{text}; {len(self.chunks)} partial-result slots"
        n = len(self.chunks)
        return f"{text}; " + (f"{n} chunk{'s' if n != 1 else ''}" if n else "no work")


def bind_kernel(spec: TileSpec, loads: Sequence[AccessParams], stores: Sequence[AccessParams],
                policy: CpuTiling | GpuTiling, name: str,
                lower: Callable[[Geometry, str, bool], Any] | None = None) -> BoundKernel:
    """Entry point of binding (module doc). ``loads`` and ``stores``: each access's and
    store's (base offset, strides per loop variable, strides per loaded index), in
    elements (``layout.affine_params``); ``name``: the kernel's function name."""
    kernel = spec.kernel
    geo = make_geometry(kernel, spec.strategy, [s for _, s, _ in loads],
                        [s for _, s, _ in stores])
    if isinstance(policy, GpuTiling):
        # Only unit and zero strides are worth building into GPU code (coalesced /
        # broadcast loads); other small strides stay run-time arguments.
        geo = dataclasses.replace(
            geo, load_vstrides=tuple(v if v in (0, 1) else None for v in geo.load_vstrides),
            store_vstrides=tuple(v if v in (0, 1) else None for v in geo.store_vstrides))
    params, extents = fill_params(geo, loads, stores)
    if isinstance(policy, CpuTiling):
        return _bind_cpu(spec, geo, params, extents, policy, lower)
    return _bind_gpu(spec, geo, params, extents, policy, name, lower)


# ------------------------------------------------------------------------------- CPU
def _bind_cpu(spec: TileSpec, geo: Geometry, params: np.ndarray, extents: list[int],
              policy: CpuTiling, lower: Callable | None) -> BoundKernel:
    code = lower(geo, geo.strategy, False) if lower is not None else None
    bound = BoundKernel(spec, geo, geo.strategy, params, extents, code=code)
    n_par = parallel_extent(geo, extents)
    inner = work_per_iteration(geo, extents)
    if geo.strategy == "full":
        # fixed slots, a function of the sizes alone: the same partial sums on any machine
        slots = full_reduction_slots(n_par, inner)
        edges = [n_par * s // slots for s in range(slots + 1)]
        bound.chunks = list(zip(edges[:-1], edges[1:]))
        bound.partial_dtypes = partial_dtypes(geo)
    elif n_par:
        # inner == 0 (reducing an empty axis) still runs: every row gets the identity
        bound.chunks = split_range(n_par, max(inner, 1), policy)
    return bound


def split_range(n: int, work_per_item: int, policy: CpuTiling) -> list[tuple[int, int]]:
    """Chunks of range(n) for the pool: about ``tasks_per_thread`` per thread, each with at
    least ``min_task_work`` elements of work; a function of n and the policy only."""
    if policy.threads <= 1 or n * work_per_item <= policy.min_task_work:
        return [(0, n)]
    size = max(-(-policy.min_task_work // work_per_item),
               -(-n // (policy.tasks_per_thread * policy.threads)), 1)
    return [(b, min(b + size, n)) for b in range(0, n, size)]


# ------------------------------------------------------------------------------- GPU
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _target_size(kernel: Any) -> int:
    """Elements of a scatter's target (0 for other kernels)."""
    if kernel.scatter is None:
        return 0
    return math.prod(kernel.stores[0].dest.shape)


def _bind_gpu(spec: TileSpec, geo: Geometry, params: np.ndarray, extents: list[int],
              policy: GpuTiling, name: str, lower: Callable | None) -> BoundKernel:
    kernel = spec.kernel

    def prod(dims: Sequence[int]) -> int:
        return math.prod([extents[d] for d in dims])      # (Python ints)
    inner, rows = prod(geo.inner_dims), prod(geo.par_dims)
    strategy = gpu_strategy(geo, inner, rows)
    # positions in the space (or a scatter's target offsets) need 64 bits
    wide = max(prod(range(geo.rank)), _target_size(kernel)) >= (1 << 31) - 1
    code = lower(geo, strategy, wide) if lower is not None else None
    facts = getattr(code, "facts", None) or {}
    bound = BoundKernel(spec, geo, strategy, params, extents, wide, code)
    # the code's functions: named after its description where the lowering says so
    name = getattr(code, "symbol", None) or name
    names = entry_names(strategy, name)
    scratch = scratch_dtypes(strategy, kernel, wide)
    grid_cap = policy.grid_per_sm * policy.sms
    launches = bound.launches
    if strategy == "scatter_last":      # a winner per target element
        bound.scratch = [(scratch[0], max(1, _target_size(kernel)))]
    if strategy == "scatter_sorted":
        sizes, sort_launches = _sorted_scatter_launches(names, prod(range(geo.rank)),
                                                        _target_size(kernel), policy)
        bound.scratch = list(zip(scratch, sizes))
        launches += sort_launches
    elif strategy == "scan_tiled":
        tile = scan_tile_length(inner)
        tiles = rows * _cdiv(inner, tile)
        bound.scratch = [(scratch[0], max(1, tiles))]    # a total per tile of each row
        # a warp per tile in the first and last passes, a thread per row between
        for entry, n in zip(names, (WARP * tiles, rows, WARP * tiles) if tiles else ()):
            launches.append(Launch(entry, min(_cdiv(n, policy.thread_block), grid_cap),
                                   policy.thread_block, (tile,)))
    elif strategy in ("map", "scatter_atomic", "scatter_last"):
        n = prod(range(geo.rank))
        if n:   # scatter_last: its three passes, a thread per element each
            launches += [Launch(entry, min(_cdiv(n, policy.map_block), grid_cap),
                                policy.map_block) for entry in names]
    elif strategy in ("thread_row", "scan", "scatter"):
        kept = [d for d in range(geo.rank) if not geo.reduced[d]] if strategy == "thread_row" \
            else list(geo.par_dims)
        n = prod(kept)
        if n:
            launches.append(Launch(name, min(_cdiv(n, policy.thread_block), grid_cap),
                                   policy.thread_block))
    elif strategy == "warp_row":
        # a row cache per warp, when the block's fit (one read of the re-read inputs)
        per_block = drivers.WARP_ROW_BLOCK_ROWS
        cache = per_block * row_cache_part_bytes(inner, facts.get("row_cache_itemsize", 0))
        use_cache = 0 < cache <= facts.get("row_cache_limit", 0)
        if rows:
            grid = min(_cdiv(rows, per_block), policy.warp_row_grid_per_sm * policy.sms)
            threads = drivers.warp_row_threads(facts.get("rows_per_warp", 1))
            launches.append(Launch(name, grid, threads, (int(use_cache),),
                                   cache if use_cache else 0))
    elif strategy in ("block_row", "block_rows"):
        # about row_elements_per_thread elements per thread (policy.py says why)
        per_thread = _cdiv(max(inner, 1), policy.row_elements_per_thread)
        block = min(MAX_BLOCK, max(WARP, 1 << max(per_thread - 1, 0).bit_length()))
        grid_rows = policy.row_grid_per_sm * policy.sms
        if strategy == "block_rows":    # a group of rows per block, no row cache
            group = drivers.block_rows_group(geo)
            if group != drivers.BLOCK_ROWS:     # held rows: registers bound the block
                block = min(block, policy.block_rows_held_block)
            if rows:
                launches.append(Launch(name, min(_cdiv(rows, group), grid_rows), block))
        elif rows:
            # the row's re-read inputs stay in shared memory when they fit (one read of
            # x): two rows' worth when the kernel pipelines its rows (flag 2: the next
            # row's copies in flight during this one) and a block has a next row, else one
            # row's (flag 1). With a block per row the second buffer only takes shared
            # memory from L1: on the H100 (2026-12-06, sixth session) layernorm's rows of
            # 8192 ran 1.547 ms with it and 1.463 without (gamma and beta are read
            # through L1), softmax level
            grid = min(rows, grid_rows)
            cache = row_cache_part_bytes(inner, facts.get("row_cache_itemsize", 0))
            flag = 0
            if 0 < cache and facts.get("row_cache_buffers", 0) == 2 and grid < rows and \
                    2 * cache <= min(policy.row_pipeline_max_bytes,
                                     policy.smem_optin - facts.get("smem_static", 0)):
                flag, cache = 2, 2 * cache
            elif 0 < cache <= facts.get("row_cache_limit", 0):
                flag = 1
            launches.append(Launch(name, grid, block, (flag,), cache if flag else 0))
    elif strategy == "full":
        n = prod(range(geo.rank))
        slots = max(1, min(_cdiv(n, FULL_BLOCK * policy.full_work_per_thread),
                           policy.full_slots_per_sm * policy.sms))
        bound.partial_dtypes = partial_dtypes(geo)
        bound.nslots = slots
        launches.append(Launch(name, slots, FULL_BLOCK))
        launches.append(Launch(f"{name}_combine", 1, FULL_BLOCK, (slots,)))
    else:  # pragma: no cover
        raise AssertionError(strategy)
    return bound


def matmul_launches(name: str, n_batch: int, m: int, n: int) -> list[Launch]:
    """The launch of tracearray's own matmul kernel (``gpu/codegen.py`` MatmulLowering, its
    epilogue fused or not) for ``n_batch`` products of (m, k) x (k, n): a block per output
    tile, grid-striding past MATMUL_MAX_GRID tiles; none for an empty product."""
    tiles = n_batch * _cdiv(m, MATMUL_TILE) * _cdiv(n, MATMUL_TILE)
    return [Launch(name, min(tiles, MATMUL_MAX_GRID), MATMUL_THREADS)] if tiles else []


def _sorted_scatter_launches(names: list[str], n: int, targets: int, policy: GpuTiling
                             ) -> tuple[list[int], list[Launch]]:
    """Scratch lengths and launches of a ``scatter_sorted`` kernel of n elements into
    ``targets`` elements (gpu/sorted_scatter.py): the keys, then per radix pass the digit
    counts, their scan and the placement, then the combine."""
    chunks = sort_chunks(n)
    table = RADIX * chunks
    tile = scan_tile_length(table)
    ntiles = _cdiv(table, tile)
    sizes = [max(1, n)] * 4 + [table, ntiles]
    if not n:
        return sizes, []
    entry = dict(zip(SORT_ENTRIES, names))
    block = policy.thread_block

    def launch(suffix: str, threads: int, shift: int, parity: int) -> Launch:
        return Launch(entry[suffix], min(_cdiv(threads, block), policy.grid_per_sm * policy.sms),
                      block, (shift, parity, chunks, tile, targets))
    passes = radix_passes(targets)
    out = [launch("_keys", n, 0, 0)]
    for r in range(passes):
        shift, parity = RADIX_BITS * r, r % 2
        out += [launch("_hist", chunks, shift, parity),
                launch("_hscan_tiles", ntiles, shift, parity),
                launch("_hscan_totals", 1, shift, parity),
                launch("_hscan_apply", ntiles, shift, parity),
                launch("_place", chunks, shift, parity)]
    out.append(launch("", n, 0, passes % 2))
    return sizes, out


__all__ = ["BoundKernel", "Launch", "bind_kernel", "matmul_launches", "split_range"]
