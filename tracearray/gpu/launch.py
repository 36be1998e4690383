"""What the runtime needs to launch a GPU kernel without generating it: the strategy that
drives a geometry, its entry points, its scratch arrays, the block shapes.

Split from ``codegen.py`` so that a process whose kernels are all in the disk cache
(``gpu/kernelcache.py``) never imports the code generator: these choices are functions of
the geometry and the sizes, and the code generator reads them from here too.
"""
from __future__ import annotations

import math

import numpy as np

from ..codegen.kernel import atomic_combine
from ..fuse.index import loaded_indices
from ..fuse.kexpr import KIndex, KLoad, KNested, KOp
from ..fuse.plan import Kernel
from ..tile import ordered_in_parallel
from ..tile.geometry import Geometry
from .sorted_scatter import ENTRIES as SORT_ENTRIES
from .sorted_scatter import SCRATCH as SORT_SCRATCH

WARP = 32
MAX_WARPS = 32
MAX_BLOCK = 256      # threads per block of block reductions (the runtime launches no more)
THREAD_ROW_MAX = 32   # rows of at most this many elements: a thread per row, not a block
# rows of at most this many elements: a warp per row (warp_row), longer ones a block per row
# (block_row). A short row's block spends its time in barriers (l2_normalize's 128-element
# rows ran at 23 % of the copy bandwidth as block_row on the H200, 2026-12-01).
WARP_ROW_MAX = 1024
WARP_ROW_WARPS = 8    # warps (rows at a time) per block of warp_row
ROW_STRATEGIES = ("block_row", "warp_row")
# block_rows: BLOCK_ROWS rows per block, for a one-reduction row kernel whose reduction reads
# an array that does not depend on the row (``shares_row_loads``: pairwise_min's Y, read in
# full for every row of X). block_row re-reads it once per row from L2 (32768 rows x 393 KB
# on the H200: 12.9 TB, L2-bound at 1.12 ms); a block of BLOCK_ROWS rows loads each element
# once for all of them. Only with at least BLOCK_ROWS_MIN rows, so the grid still fills the
# device.
BLOCK_ROWS = 8
BLOCK_ROWS_MIN = 4096
# scan_tiled's shortest tile (``scan_tile_length``)
SCAN_TILE_MIN = 128


def gpu_strategy(geo: Geometry, inner_size: int | None = None, rows: int | None = None) -> str:
    """The GPU driver for a geometry (``inner_size``: elements per row, ``rows``: the rows
    of the parallel range, when known)."""
    s = geo.strategy
    if s in ("map", "map2d"):
        return "map"
    if s == "col":
        return "thread_row"
    if s == "row" and inner_size is not None and inner_size <= THREAD_ROW_MAX:
        return "thread_row"
    if s == "row" and inner_size is not None and inner_size <= WARP_ROW_MAX:
        return "warp_row"
    if s == "row" and rows is not None and rows >= BLOCK_ROWS_MIN and shares_row_loads(geo):
        return "block_rows"
    if s == "row":
        return "block_row"
    if s == "scatter" and atomic_combine(geo.kernel.scatter) is not None:
        return "scatter_atomic"
    if s == "scatter" and geo.kernel.scatter.attr("combine") is None and \
            ordered_in_parallel(rows, inner_size):
        return "scatter_last"
    if s == "scatter" and ordered_in_parallel(rows, inner_size):   # an order-dependent combine
        return "scatter_sorted"
    if s == "scan" and ordered_in_parallel(rows, inner_size):
        return "scan_tiled"
    return s   # full, scan, scatter


def shares_row_loads(geo: Geometry) -> bool:
    """Whether ``geo`` is a row kernel of one reduction and per-row stores only, whose
    reduction loads, along the row, an array that is the same for every row (no parallel
    dimension in its index, no data-dependent index)."""
    k = geo.kernel
    if len(k.reductions) != 1 or not geo.inner_dims:
        return False
    if any(any(u and r for u, r in zip(uses, geo.reduced)) for uses in geo.store_uses):
        return False    # a store over the whole space (softmax's output): block_row's cache
    stack, seen = [k.red_exprs[0]], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KLoad):
            index = k.body.accesses[e.access].index
            uses = geo.load_uses[e.access]
            if not loaded_indices(index) and not any(uses[d] for d in geo.par_dims) and \
                    any(uses[d] for d in geo.inner_dims):
                return True
            stack.extend(loaded_indices(index))
        elif isinstance(e, KOp):
            stack.extend(e.args)
        elif isinstance(e, KIndex):
            stack.extend((e.expr, e.bound))
        elif isinstance(e, KNested):
            stack.append(e.expr)
    return False


# The entry points of the multi-pass strategies, in launch order (suffixes of the name).
PASSES = {"full": ("", "_combine"), "scatter_last": ("_init", "_claim", ""),
          "scan_tiled": ("_tiles", "_totals", ""), "scatter_sorted": SORT_ENTRIES}


def entry_names(strategy: str, name: str) -> list[str]:
    """The kernel's entry points, in launch order."""
    return [name + suffix for suffix in PASSES.get(strategy, ("",))]


def scratch_dtypes(strategy: str, kernel: Kernel, wide: bool) -> list[np.dtype]:
    """Scratch arrays a strategy's passes share (after the stores, before the error flag):
    ``scatter_last``'s winning positions, one per element of the target (int64 when the
    space may have 2^31 elements or more, ``wide``); ``scan_tiled``'s tile totals, one per
    tile of each row, in the scan's dtype; ``scatter_sorted``'s keys, positions and digit
    table (``sorted_scatter.SCRATCH``)."""
    if strategy == "scatter_last":
        return [np.dtype(np.int64 if wide else np.int32)]
    if strategy == "scatter_sorted":
        return [np.dtype(np.int64 if wide else np.int32)] * len(SORT_SCRATCH)
    if strategy == "scan_tiled":
        return [np.dtype(kernel.reductions[0].dtype)]
    return []


def scan_tile_length(length: int) -> int:
    """Elements per tile of a ``scan_tiled`` row of ``length``: about its square root, so
    neither the tiles (a thread each) nor the per-row scan of their totals is long. A
    function of the length only: the association of a float scan does not depend on the
    device."""
    return max(SCAN_TILE_MIN, math.isqrt(max(length - 1, 0)) + 1)
