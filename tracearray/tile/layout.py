"""The argument layout of a kernel, shared by the code generators and the runtimes.

A kernel receives an array of buffer pointers and an array of 64-bit parameters:

- pointers: one per load access, then one per store, then (full reductions) one per partial
  result array (two for argmax/argmin: values and indices);
- parameters: the extent of every space dimension; for every access and store its base offset
  and, per space dimension, its stride (in elements); then the scalar parameters (constants and
  sizes, bit patterns in the low bytes of their slot).

A stride is omitted (structurally zero) when the access's index does not use that loop
variable; ``stride_slot`` returns None then.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..fuse.index import Index
from ..fuse.plan import Kernel


def uses(index: Index, dim: int) -> bool:
    return any(a.coef(dim) for a in index)


@dataclass(frozen=True)
class ParamLayout:
    rank: int
    load_slots: tuple[tuple[int, tuple[int | None, ...]], ...]   # (base slot, stride slots)
    store_slots: tuple[tuple[int, tuple[int | None, ...]], ...]
    scalar_slots: tuple[int, ...]
    size: int

    def extent_slot(self, dim: int) -> int:
        return dim


def param_layout(kernel: Kernel) -> ParamLayout:
    rank = len(kernel.space)
    slot = rank

    def slots_for(index: Index) -> tuple[int, tuple[int | None, ...]]:
        nonlocal slot
        base = slot
        slot += 1
        strides = []
        for d in range(rank):
            if uses(index, d):
                strides.append(slot)
                slot += 1
            else:
                strides.append(None)
        return base, tuple(strides)

    loads = tuple(slots_for(a.index) for a in kernel.body.accesses)
    stores = tuple(slots_for(s.index) for s in kernel.stores)
    scalars = tuple(range(slot, slot + len(kernel.body.params)))
    slot += len(kernel.body.params)
    return ParamLayout(rank, loads, stores, scalars, slot)


def n_partial_buffers(kernel: Kernel) -> int:
    return sum(2 if r.op in ("argmax", "argmin") else 1 for r in kernel.reductions)
