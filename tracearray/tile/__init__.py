"""Stage 3: tiling. For each kernel of the plan, how its iteration space is walked.

Entry function: ``tile_plan(plan) -> list[TileSpec]``.

A ``TileSpec`` says which space dimensions form the *parallel range* (flattened; threads take
chunks of it, a GPU grid takes blocks of it) and which are looped *inside* each iteration
(the innermost one is the contiguous, vectorised loop), and the reduction strategy:

- ``map``: parallel over all dimensions but the innermost, which is the inner loop (a 1-D map
  is a single parallel, vectorised loop).
- ``row``: reductions that keep some dimensions: parallel over the kept dimensions, each
  iteration sweeps the reduced ones once per phase (reduce, reduce, ..., full-space map), so a
  row is read from cache, not memory, after the first phase.
- ``full``: reductions over everything: parallel over the first reduced dimension in a fixed
  number of slots (partial results combined in slot order: deterministic for any thread count).
- ``scan``: parallel over the kept dimensions, sequential along the scan axis.
- ``scatter``: parallel over the dimensions that are not indexed, sequential (in C order)
  along the index dimensions, so repeated positions are written in NumPy's order.
  (A GPU runs both in parallel along the ordered dims too when ``gpu.ordered_in_parallel``
  says so, in passes that keep NumPy's order: gpu/codegen.py.)
- ``matmul``: an external BLAS call, no loops of ours (the GPU has its own matmul kernel).
- ``external``: a library call (``ops.external``: sorts, LAPACK), no loops of ours.

At launch, ``bind_kernel`` (bind.py) binds a TileSpec to the layouts of a call under the
target's frozen tiling policy (policy.py): ``make_geometry`` (geometry.py) refines it for the
strides it meets (merged dimensions, transposed-map and column-reduction tilings, which
accesses have unit stride on the innermost loop), ``fill_params`` (layout.py) makes its
parameters, and the work is split: the CPU's pool chunks, or the GPU's driver (gpu.py) and
launches. Both runtimes only allocate, load and launch what it returns. Sizes and strides are
always run-time kernel arguments.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..fuse.plan import Kernel, Plan
from .geometry import Geometry, make_geometry

# Slots of a full reduction: a function of the sizes only, so a float sum's association
# does not depend on the machine (not a policy's).
FULL_REDUCTION_SLOT_WORK = 1 << 15
MAX_FULL_REDUCTION_SLOTS = 64
# Float sums run their innermost loop in blocks of this many elements, combined pairwise
# (codegen/summation.py): about 16 terms per vector lane on AVX-512, as NumPy's 8 accumulators
# of a 128-element block, and the stack's few instructions per block are not measurable.
SUM_BLOCK = 1024
# ... and of this many when the loop reads strided or gathered data (few vector lanes, if any)
STRIDED_SUM_BLOCK = 128
# Column sums add this many rows in order per column, then the block into the column's total
# with Kahan's compensation (once per block: cheap)
COLUMN_SUM_BLOCK = 16

@dataclass(frozen=True)
class TileSpec:
    kernel: Kernel
    strategy: str     # "map" | "row" | "full" | "scan" | "scatter" | "matmul" | "external"
    par_dims: tuple[int, ...]     # flattened into the parallel range, outer to inner
    inner_dims: tuple[int, ...]   # looped inside each parallel iteration, outer to inner



def tile_kernel(kernel: Kernel) -> TileSpec:
    dims = tuple(range(len(kernel.space)))
    if kernel.call is not None:   # a library call: "matmul" or "external"
        return TileSpec(kernel, kernel.kind, (), ())
    if kernel.kind == "map":
        return TileSpec(kernel, "map", dims[:-1] if len(dims) > 1 else dims,
                        dims[-1:] if len(dims) > 1 else ())
    kept = tuple(d for d in dims if d not in kernel.reduce_axes)
    if kernel.kind in ("scan", "scatter"):
        # sequential along the scanned / index dimensions, in order
        return TileSpec(kernel, kernel.kind, kept, kernel.reduce_axes)
    if kept:
        return TileSpec(kernel, "row", kept, kernel.reduce_axes)
    return TileSpec(kernel, "full", kernel.reduce_axes[:1], kernel.reduce_axes[1:])


def tile_plan(plan: Plan) -> list[TileSpec]:
    """Entry point of the tile stage."""
    return [tile_kernel(k) for k in plan.kernels]


def full_reduction_slots(n_outer: int, inner_work: int) -> int:
    """Number of partial results of a full reduction: a function of the sizes only."""
    work = max(1, n_outer * max(1, inner_work))
    return max(1, min(MAX_FULL_REDUCTION_SLOTS, n_outer, -(-work // FULL_REDUCTION_SLOT_WORK)))


def sum_rounding_depth(n: int) -> int:
    """The most roundings any term of an n-term float sum goes through, on either target:
    the error is at most this times eps·Σ|x| (first order). A block of at most SUM_BLOCK
    (or STRIDED_SUM_BLOCK, which gives a smaller depth)
    terms is summed in any order (at most min(n, SUM_BLOCK) - 1 roundings); its row has at
    most 2n/SUM_BLOCK blocks, whose binary-counter stack adds at most floor(log2) + 1; the
    slots of a full reduction (64 on the CPU, combined by the same stack) add at most 7. The
    GPU's compensated per-thread sums (2 each), warp_row's rows held in registers (a few
    terms a lane in order: gpu/codegen.py REGISTER_ROW_SLOTS) and two 256-thread trees (8
    each) stay below that, as do column sums (COLUMN_SUM_BLOCK - 1 in a block, 2
    compensated across blocks).
    No order needs more than n - 1."""
    blocks = max(1, -(-2 * n // SUM_BLOCK))
    return max(0, min(n - 1, min(n, SUM_BLOCK) + blocks.bit_length() + 7))


def parallel_extent(geometry: Geometry, extents: list[int]) -> int:
    """Length of the parallel range of a geometry for the given loop-dimension extents."""
    n = 1
    for d in geometry.par_dims:
        n *= extents[d]
    if geometry.strategy == "col":
        n *= -(-extents[-1] // geometry.tile)
    elif geometry.strategy == "map2d":
        n *= -(-extents[-2] // geometry.tile) * -(-extents[-1] // geometry.tile)
    return n


def work_per_iteration(geometry: Geometry, extents: list[int]) -> int:
    """Elements touched by one iteration of the parallel range (for chunk sizing)."""
    n = 1
    for d in geometry.inner_dims:
        n *= extents[d]
    if geometry.strategy == "col":
        n *= min(geometry.tile, extents[-1]) if extents else 1
    elif geometry.strategy == "map2d":
        n = geometry.tile * geometry.tile
    return n


__all__ = ["TileSpec", "Geometry", "make_geometry", "tile_plan", "tile_kernel",
           "parallel_extent", "work_per_iteration", "full_reduction_slots", "SUM_BLOCK",
           "STRIDED_SUM_BLOCK", "COLUMN_SUM_BLOCK",
           "sum_rounding_depth"]
