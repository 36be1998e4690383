"""Launch-time tiling: the loop geometry of one kernel for the strides it meets.

The plan fixes a kernel's iteration *space* (one dimension per array dimension). At launch,
with the actual strides known, ``make_geometry``

1. drops dimensions of extent 1 and merges adjacent dimensions that every access and store
   walks contiguously (stride[d] == stride[d+1] * extent[d+1]) — a contiguous N-d elementwise
   kernel becomes one flat, vectorised loop;
2. picks the strategy: ``map`` (one loop per row of the innermost dimension), ``map2d``
   (square tiles over the last two dimensions when an operand is read transposed, so both
   sides stay in cache), ``row`` (reduced dimensions innermost: a row per iteration, swept once
   per phase), ``col`` (kept dimension innermost: a tile of accumulators, one per column,
   updated row after row — contiguous, vectorised), ``full`` (everything reduced: fixed slots
   of partial results) or ``scan``;
3. records the strides along the innermost loop that are built into the code as constants, so
   the loop vectorises: contiguous (1), broadcast (0), and interleaved by the built-in extent of
   a nested reduction.

Loop dimensions are numbered outer to inner; each is a group of original space dimensions.
Extents and strides stay run-time kernel arguments: a new size with the same structure reuses
the same code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..fuse.plan import Kernel
from ..ops import OPS, Kind

NESTED_UNROLL_MAX = 8  # nested reductions this small get their extent built in (fully unrolled)
MAP2D_TILE = 64        # square tile edge for transposed maps (64 x 64 x 4 B = 16 KiB per array)
COL_TILE = 1024       # columns per accumulator tile of a column reduction (4 KiB of f32)


@dataclass(frozen=True)
class Geometry:
    kernel: Kernel
    strategy: str                          # map | map2d | row | col | full | scan | scatter
    groups: tuple[tuple[int, ...], ...]    # original space dims of each loop dim, outer to inner
    reduced: tuple[bool, ...]              # whether each loop dim is reduced (or scanned)
    par_dims: tuple[int, ...]              # loop dims flattened into the parallel range
    inner_dims: tuple[int, ...]            # loop dims looped inside each parallel iteration
    load_uses: tuple[tuple[bool, ...], ...]   # per access: which loop dims it strides over
    store_uses: tuple[tuple[bool, ...], ...]
    # Stride along the vector dim when it is built into the code (so the loop vectorises:
    # 1 contiguous, 0 broadcast, a nested extent interleaved), else None (run-time argument).
    load_vstrides: tuple[int | None, ...]
    store_vstrides: tuple[int | None, ...]
    tile: int = 0                          # map2d tile edge / col accumulator tile
    # Loop dims rank, rank+1, ... are the variables of nested reductions (KNested), in order;
    # their extent is built into the code when small (None: a run-time argument).
    nested_extents: tuple[int | None, ...] = ()

    @property
    def rank(self) -> int:
        """Number of loop dims of the iteration space (nested-reduction dims come after)."""
        return len(self.groups)

    def nested_loop_dim(self, var: int) -> int:
        return self.rank + var - len(self.kernel.space)

    @property
    def vector_dim(self) -> int | None:
        """The innermost loop's dimension."""
        if self.strategy in ("map2d", "col"):
            return self.rank - 1
        if self.inner_dims:
            return self.inner_dims[-1]
        return self.par_dims[-1] if self.par_dims else None

    def loop_dim_of(self, space_dim: int) -> int | None:
        for g, dims in enumerate(self.groups):
            if space_dim in dims:
                return g
        return None

    def key(self) -> tuple:
        return (self.strategy, self.groups, self.reduced, self.par_dims, self.inner_dims,
                self.load_uses, self.store_uses, self.load_vstrides, self.store_vstrides, self.tile,
                self.nested_extents)


def _mergeable(d: int, e: int, extents: Sequence[int], strides: Sequence[Sequence[int]]) -> bool:
    """Can space dims d (outer) and e (inner, next kept one) be walked as one dimension?"""
    return all(s[d] == s[e] * extents[e] for s in strides)


def make_geometry(kernel: Kernel, strategy: str, load_strides: Sequence[Sequence[int]],
                  store_strides: Sequence[Sequence[int]]) -> Geometry:
    """Loop geometry of ``kernel`` (planned with base ``strategy``: map, row, full or scan)
    for the given per-space-dimension element strides of every access and store."""
    space = kernel.space
    reduced_set = set(kernel.reduce_axes)
    all_strides = list(load_strides) + list(store_strides)
    # Arg-reductions and scans report positions along their axis: keep that axis alone.
    solo = set(kernel.reduce_axes) if any(OPS[r.op].reducer.index is not None or
                                          OPS[r.op].kind is Kind.SCAN
                                          for r in kernel.reductions) else set()
    groups: list[list[int]] = []
    for d in range(len(space)):
        if space[d] == 1:
            continue
        if groups:
            prev = groups[-1]
            last = prev[-1]
            same_class = (last in reduced_set) == (d in reduced_set)
            if same_class and d not in solo and last not in solo and \
                    _mergeable(last, d, space, all_strides):
                prev.append(d)
                continue
        groups.append([d])
    groups_t = tuple(tuple(g) for g in groups)
    reduced = tuple(g[0] in reduced_set for g in groups_t)
    rank = len(groups_t)
    dims = tuple(range(rank))
    kept = tuple(g for g in dims if not reduced[g])
    red = tuple(g for g in dims if reduced[g])
    tile = 0

    if strategy == "map":
        if rank >= 2 and _transposed(load_strides, store_strides, groups_t):
            strategy, par, inner, tile = "map2d", dims[:-2], dims[-2:], MAP2D_TILE
        elif rank >= 2:
            par, inner = dims[:-1], dims[-1:]
        else:
            par, inner = dims, ()
    elif strategy in ("scan", "scatter", "full"):
        # scan, scatter: sequential along the scanned / index dims; full: parallel over the
        # first reduced dim
        par, inner = (red[:1], red[1:]) if strategy == "full" else (kept, red)
    elif kept and red and kept[-1] == rank - 1 and (not solo or len(red) == 1):
        # (an arg-reduction reduces one axis: its position is that loop's variable)
        strategy, par, inner, tile = "col", kept[:-1], red, COL_TILE
    else:
        strategy, par, inner = "row", kept, red

    n_space = len(space)

    def uses(index_uses: Sequence[bool]) -> tuple[bool, ...]:
        return tuple(any(index_uses[d] for d in g) for g in groups_t) + tuple(index_uses[n_space:])

    vdim = _vector_dim(strategy, rank, par, inner)

    nested = tuple(e if e <= NESTED_UNROLL_MAX else None for e in kernel.body.nested_extents)
    # Strides built into the code along the vector dim: 0 (broadcast), 1 (contiguous), and the
    # built-in extents of nested reductions (the interleaved rows they read, as in pairwise
    # distances), so no stride adds a variant that the sizes did not already imply.
    built_in = {0, 1} | {e for e in nested if e is not None}
    if nested and all(e is not None for e in nested):
        built_in.add(math.prod(nested))

    def vstride(strides: Sequence[int], used: Sequence[bool]) -> int | None:
        if vdim is None or not used[vdim]:
            return None
        st = strides[groups_t[vdim][-1]]
        return st if st in built_in else None

    load_uses = tuple(uses(u) for u in _index_uses(kernel, "load"))
    store_uses = tuple(uses(u) for u in _index_uses(kernel, "store"))
    load_vstrides = tuple(vstride(s, u) for s, u in zip(load_strides, load_uses))
    store_vstrides = tuple(vstride(s, u) for s, u in zip(store_strides, store_uses))
    return Geometry(kernel, strategy, groups_t, reduced, tuple(par), tuple(inner), load_uses,
                    store_uses, load_vstrides, store_vstrides, tile, nested)


def _vector_dim(strategy: str, rank: int, par: Sequence[int], inner: Sequence[int]) -> int | None:
    if strategy in ("map2d", "col"):
        return rank - 1
    if inner:
        return inner[-1]
    return par[-1] if par else None


def _index_uses(kernel: Kernel, which: str) -> list[tuple[bool, ...]]:
    indices = ([a.index for a in kernel.body.accesses] if which == "load"
               else [s.index for s in kernel.stores])
    n = len(kernel.space) + len(kernel.body.nested_extents)
    return [tuple(any(a.coef(d) for a in idx) for d in range(n)) for idx in indices]


def _transposed(load_strides: Sequence[Sequence[int]], store_strides: Sequence[Sequence[int]],
                groups: tuple[tuple[int, ...], ...]) -> bool:
    """Does some operand run contiguously along the second-to-last loop dim but not the last?"""
    inner, outer = groups[-1][-1], groups[-2][-1]
    return any(abs(s[outer]) == 1 and abs(s[inner]) != 1
               for s in list(load_strides) + list(store_strides))

