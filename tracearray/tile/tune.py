"""Autotuning of launch policies: which candidates a bound GPU kernel is timed with, and how a
winner is keyed and written down. Opt-in (``TRACEARRAY_AUTOTUNE=1``): the default serves the
first call, and the default policy (``policy.py``) is what the devices' A/B measurements chose.

A candidate is the executable's policy with one launch field changed (``dataclasses.replace``),
so every candidate runs the same code (a policy never changes an instruction) and gives the
same bits: only fields that do not change how a value is associated are tuned (the grid of
the grid-stride drivers, the block of a map and of a thread per row), never block_row's
threads per row, whose count changes the partial sums of a float row. Full reductions,
scans and scatters are not tuned: their partial results and scratch arrays are sized by the
policy, their slots associate a sum, and a scatter may not run twice.

The winner is cached under the kernel's code (the PTX's digest), its driver, a size bucket
(the bit lengths of its parallel iterations and of the elements each touches: sizes within a
factor of two share a winner) and the device's name; ``gpu/tuning.py`` times candidates with
CUDA events and keeps the winners in memory and on disk, so only the first run pays.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from . import parallel_extent, work_per_iteration
from .policy import ROW_PER_BLOCK, GpuTiling

# The drivers tuned, and the fields their candidates vary (each alone, from the default)
TUNED_FIELDS: dict[str, dict[str, tuple[int, ...]]] = {
    "map": {"map_block": (128, 512), "grid_per_sm": (8, 64)},
    "thread_row": {"thread_block": (64, 256), "grid_per_sm": (8, 64)},
    "warp_row": {"warp_row_grid_per_sm": (32, 128, 256)},
    "block_row": {"row_grid_per_sm": (16, 32, 128, ROW_PER_BLOCK)},
    "block_rows": {"row_grid_per_sm": (8, 16, 32, ROW_PER_BLOCK),
                   "block_rows_held_block": (32, 128)},
}
PAYLOAD_MAGIC = b"TATUNE1\n"


def candidates(strategy: str, policy: GpuTiling) -> list[GpuTiling]:
    """The policies a kernel run by ``strategy`` is timed with: ``policy`` first, then each
    tuned field at each of its other values (empty for a driver that is not tuned)."""
    fields = TUNED_FIELDS.get(strategy)
    if not fields:
        return []
    out = [policy]
    for name, values in fields.items():
        for v in values:
            if v != getattr(policy, name):
                out.append(dataclasses.replace(policy, **{name: v}))
    return out


def size_bucket(bound: Any) -> tuple[int, int]:
    """Bit lengths of a bound kernel's parallel iterations and of the elements each touches."""
    geo, ext = bound.geometry, bound.extents
    return (parallel_extent(geo, ext).bit_length(), work_per_iteration(geo, ext).bit_length())


def encode_winner(strategy: str, policy: GpuTiling) -> bytes:
    """The tuned fields of ``policy`` as a cache entry (JSON of integers only)."""
    fields = {name: int(getattr(policy, name)) for name in TUNED_FIELDS[strategy]}
    return PAYLOAD_MAGIC + json.dumps(fields, sort_keys=True).encode()


def decode_winner(strategy: str, payload: bytes, policy: GpuTiling) -> GpuTiling | None:
    """``policy`` with a cached winner's fields, or None for an entry that is not exactly
    the tuned fields of ``strategy`` as positive integers (nothing else is ever used)."""
    if strategy not in TUNED_FIELDS or not payload.startswith(PAYLOAD_MAGIC):
        return None
    try:
        fields = json.loads(payload[len(PAYLOAD_MAGIC):].decode())
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(fields, dict) or set(fields) != set(TUNED_FIELDS[strategy]) or \
            not all(type(v) is int and 0 < v <= 1 << 20 for v in fields.values()):
        return None
    return dataclasses.replace(policy, **fields)


__all__ = ["TUNED_FIELDS", "candidates", "size_bucket", "encode_winner", "decode_winner"]
