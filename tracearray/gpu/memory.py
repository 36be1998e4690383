"""A caching device allocator: ``cuMemAlloc`` only when no cached block fits.

Sizes are rounded up (512 B granules below 1 MiB, 2 MiB granules above) and freed blocks are
kept in per-size free lists for reuse. Everything tracearray runs is queued on one stream, so
a block freed by the host can be handed to the next allocation at once: stream order makes
the new user's kernels run after the old user's.

When ``cuMemAlloc`` reports out-of-memory, the cache is returned to the driver (after the
stream finishes) and the allocation is retried once; if that fails too, ``MemoryError``
says how much was asked for, in use and cached.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from .. import forksafe

SMALL = 1 << 20
SMALL_GRANULE = 512
LARGE_GRANULE = 2 << 20


def round_size(nbytes: int) -> int:
    g = SMALL_GRANULE if nbytes <= SMALL else LARGE_GRANULE
    return max(g, -(-nbytes // g) * g)


class Block:
    """One device allocation; returns itself to the allocator when garbage-collected."""

    __slots__ = ("ptr", "size", "_allocator", "__weakref__")

    def __init__(self, ptr: int, size: int, allocator: "CachingAllocator | None"):
        self.ptr, self.size, self._allocator = ptr, size, allocator

    def free(self) -> None:
        alloc, self._allocator = self._allocator, None
        if alloc is not None and self.size:
            alloc._release(self.ptr, self.size)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:   # noqa: BLE001 - interpreter shutdown
            pass


def _format(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return str(n)


class CachingAllocator:
    def __init__(self, device: Any):
        self.device = device
        self._free: dict[int, list[int]] = defaultdict(list)
        self._lock = threading.Lock()
        forksafe.renew_at_fork(self, "_lock")
        self.in_use = 0          # bytes handed out and not yet freed
        self.cached = 0          # bytes held in free lists
        self.driver_allocs = 0   # cuMemAlloc calls (observable: tests check reuse)

    def allocate(self, nbytes: int) -> Block:
        if nbytes <= 0:
            return Block(0, 0, None)
        size = round_size(nbytes)
        with self._lock:
            lst = self._free.get(size)
            if lst:
                ptr = lst.pop()
                self.cached -= size
                self.in_use += size
                return Block(ptr, size, self)
        ptr = self._driver_alloc(size, nbytes)
        with self._lock:
            self.in_use += size
        return Block(ptr, size, self)

    def _driver_alloc(self, size: int, nbytes: int) -> int:
        from .driver import CudaError
        for attempt in range(2):
            try:
                ptr = self.device.mem_alloc(size)
                self.driver_allocs += 1
                return ptr
            except CudaError as e:
                if e.name != "CUDA_ERROR_OUT_OF_MEMORY":
                    raise
                if attempt == 0:
                    self.empty_cache()
                    continue
                raise MemoryError(
                    f"CUDA out of memory: tracearray asked for {_format(nbytes)} on "
                    f"{getattr(self.device, 'name', 'the GPU')}; it holds {_format(self.in_use)} "
                    f"in live arrays and had returned its cache to the driver (other "
                    f"processes and libraries may hold the rest). Free arrays you no longer "
                    f"need (del, or drop references) and retry.") from None
        raise AssertionError("unreachable")

    def _release(self, ptr: int, size: int) -> None:
        with self._lock:
            self.in_use -= size
            self.cached += size
            self._free[size].append(ptr)

    def empty_cache(self) -> None:
        """Return every cached block to the driver (waits for the stream first)."""
        self.device.synchronize()
        with self._lock:
            blocks = [(p, s) for s, lst in self._free.items() for p in lst]
            self._free.clear()
            self.cached = 0
        for ptr, _size in blocks:
            self.device.mem_free(ptr)
