"""The GPU's tiling: which driver runs a geometry, its entry points and scratch arrays, and
the constants that shape the GPU's code (threads a block's reductions are written for, warps
of a warp_row block, rows of a block_rows block).

Read by the binding step (``tile/bind.py``: the launches of a bound kernel), by the code
generator (``gpu/codegen.py``: the same choices, built into the code) and by the runtime,
which never imports the code generator when every kernel comes from the disk cache
(``gpu/kernelcache.py``). The numbers that only shape a launch (threads of a map block,
blocks per multiprocessor) are the frozen ``GpuTiling`` policy's (``tile/policy.py``): they
never change the code.
"""
from __future__ import annotations

import math

import numpy as np

from ..fuse.index import loaded_indices
from ..fuse.kexpr import KIndex, KLoad, KNested, KOp
from ..fuse.plan import Kernel
from ..ops import OPS
from .geometry import Geometry

WARP = 32
MAX_WARPS = 32
MAX_BLOCK = 256      # threads per block of block reductions (the runtime launches no more)
THREAD_ROW_MAX = 32   # rows of at most this many elements: a thread per row, not a block
# rows of at most this many elements: a warp per row (warp_row), longer ones a block per row
# (block_row). A short row's block spends its time in barriers (l2_normalize's 128-element
# rows ran at 23 % of the copy bandwidth as block_row on the H200, 2026-12-01).
WARP_ROW_MAX = 1024
# warp_row: rows a block holds at a time (the parts of its row cache), and rows a warp
# takes at a time (WARP_ROW_GROUP: their loads in flight together); a block has
# WARP_ROW_BLOCK_ROWS // WARP_ROW_GROUP warps. More rows a warp cost registers: on an H100
# (2026-12-07, twelfth session, benchmarks/gpu_launch_ab.py, two rounds, ms) l2_normalize's
# rows of 128 took 1.50-1.52 with 1 (37 registers, 6 blocks of 8 warps a multiprocessor),
# 1.60 with 2 (58, 8 blocks of 4 warps), 1.86 with 4 (74, 12 blocks of 2 warps). Not yet
# measured on an H200, whose l2_normalize runs at 83 % of the copy floor.
WARP_ROW_BLOCK_ROWS = 8
WARP_ROW_GROUP = 1
ROW_STRATEGIES = ("block_row", "warp_row")
# block_rows: BLOCK_ROWS rows per block, for a one-reduction row kernel whose reduction reads
# an array that does not depend on the row (``shares_row_loads``: pairwise_min's Y, read in
# full for every row of X). block_row re-reads it once per row from L2 (32768 rows x 393 KB
# on the H200: 12.9 TB, L2-bound at 1.12 ms); a block of BLOCK_ROWS rows loads each element
# once for all of them. Only with at least BLOCK_ROWS_MIN rows, so the grid still fills the
# device.
BLOCK_ROWS = 8
BLOCK_ROWS_MIN = 4096
# ... and BLOCK_ROWS_HELD rows when no row's own load moves along the row (pairwise_min's
# X[i, :], a few values per row held in registers for the whole sweep): a position's work
# is then arithmetic on the shared loads alone, and more rows per block spread those loads'
# addressing over more of it. Such blocks take ``GpuTiling.block_rows_held_block`` threads
# at most: the rows' registers (157 a thread for pairwise_min's 16) leave few blocks per
# multiprocessor. pairwise_min on an H100 (2026-12-06, seventh session; 32768 x 32768 x 3,
# ms, two rounds each): 8 rows of 256 threads (before) 0.454-0.468; 4 rows 0.533; 8 rows of
# 128 threads 0.455-0.462; 16 rows of 256 threads 0.568-0.577 (1 block per multiprocessor),
# of 128 0.397-0.401 (3), of 64 0.392 (6); 12 rows of 128 0.426-0.428; 24 rows of 64 (247
# registers) 0.498; 16 rows of 128 with the sweep not unrolled 0.418 (torch.compile 0.405).
# Only where the held values and accumulators of BLOCK_ROWS_HELD rows are at most
# HELD_WORDS_MAX 32-bit words: pairwise_min's 3 coordinates and minimum (4 a row) fit;
# k-means' assignment over 8 coordinates (an argmin: its int64 index too) spilled 96 bytes
# a thread at 16 rows (ptxas for sm_90), none at 8.
BLOCK_ROWS_HELD = 16
HELD_WORDS_MAX = 64
# tracearray's own matmul kernel (gpu/codegen.py MatmulLowering): output tiles of
# MATMUL_TILE x MATMUL_TILE, MATMUL_PER_THREAD x MATMUL_PER_THREAD outputs a thread, so a
# block of MATMUL_THREADS; its grid strides over the tiles past MATMUL_MAX_GRID blocks
MATMUL_TILE = 64
MATMUL_PER_THREAD = 4
MATMUL_THREADS = (MATMUL_TILE // MATMUL_PER_THREAD) ** 2
MATMUL_MAX_GRID = 1 << 20
# row caches: where each row's part of the dynamic shared memory starts, in bytes
ROW_CACHE_ALIGN = 16
# scan_tiled's shortest tile (``scan_tile_length``)
SCAN_TILE_MIN = 128
# threads per block of a full reduction's two kernels (the block tree's)
FULL_BLOCK = MAX_BLOCK

# GPU scans and scatters that keep an order (cumsum, ``x[idx] = v``): in parallel along
# their ordered dims (multi-pass) only when those are longer than a short loop, and either
# the rows alone cannot fill the device or each is long; else a thread per row, sequential
GPU_SEQUENTIAL_MAX_LENGTH = 64
GPU_SEQUENTIAL_MIN_ROWS = 1 << 15
GPU_PARALLEL_MIN_LENGTH = 4096

# ``scatter_sorted`` (gpu/sorted_scatter.py): a stable LSD radix sort of the targets, 8 bits
# a pass. Elements per chunk at least, and chunks at most (the digit table has RADIX per
# chunk: 8M entries at most). A chunk is one thread's sequential walk, so more chunks mean
# more threads in flight; a bigger table means a longer scan of it. Not tuned on a GPU yet:
# at 2^26 elements, 32768 chunks of 2048.
RADIX_BITS = 8
RADIX = 1 << RADIX_BITS
SORT_CHUNK_MIN = 256
SORT_MAX_CHUNKS = 1 << 15
# its scratch arrays, in order: keys and positions (two copies: a pass reads one, writes
# the other), the digit table, its tile totals; its entries' suffixes, in launch order
SORT_SCRATCH = ("keys0", "pos0", "keys1", "pos1", "table", "totals")
SORT_ENTRIES = ("_keys", "_hist", "_hscan_tiles", "_hscan_totals", "_hscan_apply", "_place", "")
SORT_N_EXTRA = 5    # run-time arguments: shift, parity, chunks, scan tile, targets


def row_cache_part_bytes(inner: int, itemsize: int) -> int:
    """Bytes of one row's part of a row cache of ``itemsize`` bytes per row element (the
    cached accesses' item sizes added), when a block holds several rows' parts (warp_row: a
    row per warp; block_row: two buffers), rounded up to ROW_CACHE_ALIGN so that every part
    starts aligned: its accesses, largest items first, are then each aligned to their item
    size, and cp.async's 16-byte copies land aligned. (Unrounded, the parts of rows of odd
    length whose cached items differ in size began at odd addresses: an int16 load of
    warp 1's part faulted with CUDA_ERROR_MISALIGNED_ADDRESS on an H100, soak
    gpu-2026-12-06-g program 203, rows of 71.)"""
    return -(-inner * itemsize // ROW_CACHE_ALIGN) * ROW_CACHE_ALIGN


def warp_row_threads(rows_per_warp: int) -> int:
    """Threads of a warp_row block whose code takes ``rows_per_warp`` rows a warp (the
    lowering's fact, WARP_ROW_GROUP when it was lowered): a warp per group of its
    WARP_ROW_BLOCK_ROWS rows."""
    return WARP * max(1, WARP_ROW_BLOCK_ROWS // max(1, rows_per_warp))


def ordered_in_parallel(rows: int | None, length: int | None) -> bool:
    """Whether a GPU scan or ordered scatter of ``rows`` rows of ``length`` ordered elements
    runs in parallel along the rows too, rather than a thread per row. Unknown sizes (None)
    keep the thread per row."""
    if rows is None or length is None or length <= GPU_SEQUENTIAL_MAX_LENGTH:
        return False
    return rows < GPU_SEQUENTIAL_MIN_ROWS or length >= GPU_PARALLEL_MIN_LENGTH


def sort_chunks(n: int) -> int:
    """Chunks of the radix sort of n elements (a function of n only)."""
    return max(1, min(SORT_MAX_CHUNKS, -(-n // SORT_CHUNK_MIN)))


def radix_passes(n_targets: int) -> int:
    """Passes of 8 bits that sort keys in [0, n_targets] (n_targets: out of range)."""
    return max(1, -(-n_targets.bit_length() // RADIX_BITS))


_ATOMIC = {"add": "add", "bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor"}


def atomic_combine(node) -> str | None:
    """The LLVM ``atomicrmw`` operation that performs a scatter's combine exactly, in any
    order (so a GPU may run every element in parallel and still give NumPy's result), or
    None: integer add/and/or/xor/max/min of 32- or 64-bit integers whose ufunc loop is the
    target's own dtype (no cast between steps). Float sums depend on the order: never."""
    op, dt = node.attr("combine"), node.dtype
    if op is None or dt.kind not in "iu" or dt.itemsize not in (4, 8) or \
            any(np.dtype(d) != dt for d in node.attr("loop")) or len(node.attr("loop")) != 3:
        return None
    if op in ("maximum", "minimum"):
        return ("max" if op == "maximum" else "min") if dt.kind == "i" else \
            ("umax" if op == "maximum" else "umin")
    return _ATOMIC.get(op)


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


def block_rows_group(geo: Geometry) -> int:
    """Rows per block of a block_rows kernel: BLOCK_ROWS_HELD when every load whose index
    uses a parallel dimension (or loads one) uses none of the row's dimensions, only nested
    reductions' dimensions of constant extent, so that its values are held for the whole
    sweep, and the rows' held words fit HELD_WORDS_MAX; else BLOCK_ROWS (a matrix-vector
    product streams each row)."""
    k = geo.kernel
    red = k.reductions[0]
    reducer = OPS[red.op].reducer
    words = _words(red.dtype)        # the accumulator (an estimate of registers, per row)
    if reducer is not None and reducer.index is not None:
        words = 4                    # argmax / argmin: the value and an int64 index
    elif reducer is not None and reducer.combine_op == "add" and red.dtype.kind in "fc":
        words *= 2                   # a compensated sum
    for a, uses in enumerate(geo.load_uses):
        moves = loaded_indices(k.body.accesses[a].index) or any(uses[d] for d in geo.par_dims)
        if not moves:
            continue
        if any(uses[d] for d in geo.inner_dims):
            return BLOCK_ROWS
        count = 1
        for d in range(geo.rank, len(uses)):
            if uses[d]:
                extent = geo.nested_extents[d - geo.rank]
                if extent is None:
                    return BLOCK_ROWS
                count *= extent
        words += count * _words(k.body.accesses[a].top.dtype)
    return BLOCK_ROWS_HELD if words * BLOCK_ROWS_HELD <= HELD_WORDS_MAX else BLOCK_ROWS


def _words(dtype: np.dtype) -> int:
    return -(-np.dtype(dtype).itemsize // 4)


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
