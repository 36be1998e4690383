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
            alloc._free[self.size].append(self.ptr)

    def __del__(self) -> None:
        # (free() inlined: every output of the warm call path ends here)
        alloc = self._allocator
        if alloc is not None and self.size:
            try:
                alloc._free[self.size].append(self.ptr)
            except Exception:   # noqa: BLE001 - interpreter shutdown
                pass


def _format(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return str(n)


class CachingAllocator:
    """Free lists per rounded size, taken from and returned to without a lock: a list's
    ``pop`` and ``append`` are atomic under the GIL, and a size's list, once made (under
    the lock, with the driver allocation that first needs it), is never replaced, so the
    call path can hold it (``free_list``). The byte counts are derived from the lists."""

    def __init__(self, device: Any):
        self.device = device
        self._free: dict[int, list[int]] = {}
        self._lock = threading.Lock()
        forksafe.renew_at_fork(self, "_lock")
        self._held = 0           # bytes obtained from the driver and not returned
        self.driver_allocs = 0   # cuMemAlloc calls (observable: tests check reuse)

    @property
    def cached(self) -> int:
        """Bytes held in free lists."""
        return sum(size * len(lst) for size, lst in list(self._free.items()))

    @property
    def in_use(self) -> int:
        """Bytes handed out and not yet freed."""
        return self._held - self.cached

    def free_list(self, size: int) -> list[int]:
        """The free list of blocks of ``size`` bytes (a rounded size), made if new."""
        lst = self._free.get(size)
        if lst is None:
            with self._lock:
                lst = self._free.setdefault(size, [])
        return lst

    def allocate(self, nbytes: int) -> Block:
        if nbytes <= 0:
            return Block(0, 0, None)
        size = round_size(nbytes)
        return self.allocate_rounded(size, self._free.get(size, ()), nbytes)

    def allocate_rounded(self, size: int, lst: Any, nbytes: int = 0) -> Block:
        """A block of ``size`` bytes (a rounded size) from its free list ``lst`` (the call
        path holds it: ``free_list``), else from the driver."""
        if lst:
            try:
                return Block(lst.pop(), size, self)
            except IndexError:   # another thread took the last one
                pass
        return Block(self._driver_alloc(size, nbytes or size), size, self)

    def _driver_alloc(self, size: int, nbytes: int) -> int:
        from .driver import CudaError
        for attempt in range(2):
            try:
                ptr = self.device.mem_alloc(size)
                with self._lock:
                    self.driver_allocs += 1
                    self._held += size
                    self._free.setdefault(size, [])
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

    def empty_cache(self) -> None:
        """Return every cached block to the driver (waits for the stream first). The lists
        are emptied in place (a list is never replaced: the call path holds them)."""
        self.device.synchronize()
        with self._lock:
            blocks = []
            for size, lst in self._free.items():
                while True:
                    try:
                        blocks.append((lst.pop(), size))
                    except IndexError:
                        break
            self._held -= sum(size for _p, size in blocks)
        for ptr, _size in blocks:
            self.device.mem_free(ptr)
