"""The argument layout of a kernel, shared by the code generators and the runtimes.

A kernel receives an array of buffer pointers and an array of 64-bit parameters:

- pointers: one per load access, then one per store, then (full reductions) one per partial
  result array (two for argmax/argmin: values and indices);
- parameters: the extent of every loop dimension; for every access and store its base offset
  and, per loop dimension it uses, its stride (in elements); then the scalar parameters
  (constants and sizes, as bit patterns in the low bytes of their slot).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..fuse.index import Index
from ..trace.graph import Node
from ..ops import OPS, constant_value
from .geometry import Geometry


@dataclass(frozen=True)
class ParamLayout:
    rank: int
    load_slots: tuple[tuple[int, tuple[int | None, ...]], ...]   # (base slot, stride slots)
    store_slots: tuple[tuple[int, tuple[int | None, ...]], ...]
    scalar_slots: tuple[int, ...]
    size: int

    def extent_slot(self, dim: int) -> int:
        return dim


def param_layout(geometry: Geometry) -> ParamLayout:
    rank = geometry.rank + len(geometry.nested_extents)
    slot = rank

    def slots_for(uses: tuple[bool, ...]) -> tuple[int, tuple[int | None, ...]]:
        nonlocal slot
        base = slot
        slot += 1
        strides: list[int | None] = []
        for used in uses:
            strides.append(slot if used else None)
            slot += int(used)
        return base, tuple(strides)

    loads = tuple(slots_for(u) for u in geometry.load_uses)
    stores = tuple(slots_for(u) for u in geometry.store_uses)
    n_scalars = len(geometry.kernel.body.params)
    scalars = tuple(range(slot, slot + n_scalars))
    return ParamLayout(rank, loads, stores, scalars, slot + n_scalars)


def n_partial_buffers(geometry: Geometry) -> int:
    return sum(2 if OPS[r.op].reducer.index is not None else 1
               for r in geometry.kernel.reductions)


def affine_params(view_strides: Sequence[int], view_offset: int, index: Index,
                  rank: int) -> tuple[int, list[int]]:
    """Base offset and per-loop-variable strides (elements) of ``view[index]``, where ``view``
    has ``view_strides`` and starts ``view_offset`` elements after its buffer's pointer."""
    base = view_offset + sum(s * a.const for s, a in zip(view_strides, index))
    strides = [sum(s * a.coef(d) for s, a in zip(view_strides, index)) for d in range(rank)]
    return base, strides


def pack_scalar(node: Node) -> int:
    """The 64-bit parameter slot holding a scalar constant: its bytes in the low end."""
    raw = np.zeros(8, dtype=np.uint8)
    raw[:node.dtype.itemsize] = np.frombuffer(constant_value(node).tobytes(), dtype=np.uint8)
    return int(raw.view(np.int64)[0])


def fill_params(geometry: Geometry, loads: Sequence[tuple[int, list[int]]],
                stores: Sequence[tuple[int, list[int]]]) -> tuple[np.ndarray, list[int]]:
    """The kernel's parameter array, from each access's and store's (base, per-variable
    strides) in elements; also the extents of the loop dims (merged groups of space dims)."""
    kernel = geometry.kernel
    layout = param_layout(geometry)
    params = np.zeros(layout.size, dtype=np.int64)   # exactly one slot per parameter
    extents = [int(np.prod([kernel.space[d] for d in g], dtype=np.int64))
               for g in geometry.groups]
    # Loop-dim extents (size-1 space dims dropped, contiguous ones merged), then the extents
    # of nested reductions.
    params[:layout.rank] = extents + list(kernel.body.nested_extents)
    for (base, strides), (base_slot, stride_slots) in zip(
            list(loads) + list(stores), layout.load_slots + layout.store_slots):
        params[base_slot] = base
        for g, slot in enumerate(stride_slots):
            if slot is not None:
                var = (geometry.groups[g][-1] if g < geometry.rank
                       else len(kernel.space) + g - geometry.rank)
                params[slot] = strides[var]
    for slot, node in zip(layout.scalar_slots, kernel.body.params):
        params[slot] = pack_scalar(node)
    return params, extents
