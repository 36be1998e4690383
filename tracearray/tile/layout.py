"""The argument layout of a kernel, shared by the code generators and the runtimes.

A kernel receives an array of buffer pointers and an array of 64-bit parameters:

- pointers: one per load access, then one per store, then (full reductions) one per partial
  result array (two for argmax/argmin: values and indices);
- parameters: the extent of every loop dimension; for every access and store its base offset,
  per loop dimension it uses its stride (in elements), and per index it loads from data (a
  gather's) the stride that index moves by; then the scalar parameters (constants and sizes,
  as bit patterns in the low bytes of their slot);
- a kernel with bounds checks (gathers in 'raise' mode) gets one more pointer, last: its
  error flag, two int64s (check number + 1, offending index) that the runtime clears before
  and reads after the kernel.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..fuse.index import Index, loaded_indices
from ..trace.graph import Node
from ..ops import OPS, constant_value
from .geometry import Geometry


# (base slot, stride slot per loop dim or None, stride slot per loaded index)
AccessSlots = tuple[int, tuple[int | None, ...], tuple[int, ...]]
# (base offset, stride per loop variable, stride per loaded index), in elements
AccessParams = tuple[int, list[int], list[int]]


@dataclass(frozen=True)
class ParamLayout:
    rank: int
    load_slots: tuple[AccessSlots, ...]
    store_slots: tuple[AccessSlots, ...]
    scalar_slots: tuple[int, ...]
    size: int

    def extent_slot(self, dim: int) -> int:
        return dim


def param_layout(geometry: Geometry) -> ParamLayout:
    rank = geometry.rank + len(geometry.nested_extents)
    slot = rank

    def slots_for(uses: tuple[bool, ...], index: Index) -> AccessSlots:
        nonlocal slot
        base = slot
        slot += 1
        strides: list[int | None] = []
        for used in uses:
            strides.append(slot if used else None)
            slot += int(used)
        n_dyn = len(loaded_indices(index))
        dyn = tuple(range(slot, slot + n_dyn))
        slot += n_dyn
        return base, tuple(strides), dyn

    kernel = geometry.kernel
    loads = tuple(slots_for(u, a.index)
                  for u, a in zip(geometry.load_uses, kernel.body.accesses))
    stores = tuple(slots_for(u, st.index) for u, st in zip(geometry.store_uses, kernel.stores))
    n_scalars = len(geometry.kernel.body.params)
    scalars = tuple(range(slot, slot + n_scalars))
    return ParamLayout(rank, loads, stores, scalars, slot + n_scalars)


def entry_names(geometry: Geometry, name: str) -> list[str]:
    """The functions a kernel's module defines: its entry, and a full reduction's combine."""
    return [name, f"{name}_combine"] if geometry.strategy == "full" else [name]


def partial_dtypes(geometry: Geometry) -> list[np.dtype]:
    """Dtypes of the partial-result buffers of a full reduction (values in the reducer's
    accumulator dtype, then int64 positions for argmax/argmin)."""
    out = []
    for red in geometry.kernel.reductions:
        r = OPS[red.op].reducer
        operand = red.args[0].dtype if r.operand_dtype else red.dtype
        out.append(r.accumulator_dtype(operand))
        if r.index is not None:
            out.append(np.dtype(np.int64))
    return out


def n_partial_buffers(geometry: Geometry) -> int:
    return sum(2 if OPS[r.op].reducer.index is not None else 1
               for r in geometry.kernel.reductions)


def affine_params(view_strides: Sequence[int], view_offset: int, index: Index,
                  rank: int) -> AccessParams:
    """Base offset, per-loop-variable strides and per-loaded-index strides (elements) of
    ``view[index]``, where ``view`` has ``view_strides`` and starts ``view_offset`` elements
    after its buffer's pointer."""
    base = view_offset + sum(s * a.const for s, a in zip(view_strides, index))
    strides = [sum(s * a.coef(d) for s, a in zip(view_strides, index)) for d in range(rank)]
    dyn = [sum(s * c for s, a in zip(view_strides, index) for y, c in a.dyn if y is x)
           for x in loaded_indices(index)]
    return base, strides, dyn


def pack_scalar(node: Node) -> int:
    """The 64-bit parameter slot holding a scalar constant: its bytes in the low end."""
    raw = constant_value(node).tobytes()
    return int.from_bytes(raw[:8].ljust(8, b"\0"), sys.byteorder, signed=True)


def fill_params(geometry: Geometry, loads: Sequence[AccessParams],
                stores: Sequence[AccessParams]) -> tuple[np.ndarray, list[int]]:
    """The kernel's parameter array, from each access's and store's (base, per-variable
    strides) in elements; also the extents of the loop dims (merged groups of space dims)."""
    kernel = geometry.kernel
    layout = param_layout(geometry)
    params = np.zeros(layout.size, dtype=np.int64)   # exactly one slot per parameter
    extents = [math.prod([kernel.space[d] for d in g]) for g in geometry.groups]
    # Loop-dim extents (size-1 space dims dropped, contiguous ones merged), then the extents
    # of nested reductions.
    params[:layout.rank] = extents + list(kernel.body.nested_extents)
    for (base, strides, dyn), (base_slot, stride_slots, dyn_slots) in zip(
            list(loads) + list(stores), layout.load_slots + layout.store_slots):
        params[base_slot] = base
        for slot, stride in zip(dyn_slots, dyn):
            params[slot] = stride
        for g, slot in enumerate(stride_slots):
            if slot is not None:
                var = (geometry.groups[g][-1] if g < geometry.rank
                       else len(kernel.space) + g - geometry.rank)
                params[slot] = strides[var]
    for slot, node in zip(layout.scalar_slots, kernel.body.params):
        params[slot] = pack_scalar(node)
    return params, extents
