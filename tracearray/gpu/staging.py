"""Small host <-> device copies through one pinned (page-locked) host buffer.

Why: a copy from pageable memory (a NumPy array) makes the driver stage it through its own
pinned buffer; doing that ourselves is cheaper for small copies. Measured on an H100 host
(2026-12-06, ``benchmarks/gpu_staging.py``, us per copy, minimum): host -> device enqueue of
16 / 1,024 / 100,000 float32 3.8 / 4.5 / 28.3 pageable, 2.8 / 3.1 / 16.5 staged; device ->
host 11.0 / 11.7 / 53.6 pageable, 8.2 / 8.7 / 44.9 staged. From a million elements on, the
host's own copy into the buffer costs more than the driver's path (374 against 308 us), so
only copies of at most ``LIMIT`` bytes are staged.

How: the buffer is a ring of regions handed out in order. A region holds a host -> device
copy's data until the copy has run, so regions are only reused after the stream has been
synchronised: ``synchronize`` (which the device's own ``synchronize`` is) waits for the
stream and starts the ring again, and a full ring does the same before handing out more.
Everything that hands out a region or starts the ring again holds one lock, with the copy
queued before the lock is released, so a synchronisation under the lock covers every region
in use. A device -> host copy waits for its data under the lock and copies it out before
releasing it.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Callable

from .. import forksafe

LIMIT = 1 << 17        # copies of at most this many bytes are staged
CAPACITY = 1 << 21     # the pinned buffer (allocated at the first staged copy)
ALIGN = 256            # regions start on this boundary (the DMA engines' preference)


class HostStaging:
    """The staging ring of one device. ``pinned_alloc(nbytes) -> address`` allocates
    page-locked host memory; ``htod_async(dst, src_addr, n)`` / ``dtoh_async(dst_addr, src,
    n)`` queue copies on the device's stream; ``stream_sync()`` waits for it. A failed
    allocation turns staging off (``limit`` 0: every copy goes the pageable way)."""

    def __init__(self, pinned_alloc: Callable[[int], int],
                 htod_async: Callable[[int, int, int], None],
                 dtoh_async: Callable[[int, int, int], None],
                 stream_sync: Callable[[], None],
                 capacity: int = CAPACITY, limit: int = LIMIT) -> None:
        assert limit <= capacity
        self._pinned_alloc, self._htod, self._dtoh = pinned_alloc, htod_async, dtoh_async
        self._sync = stream_sync
        self.capacity, self.limit = capacity, limit
        self._base = 0
        self._used = 0
        self._lock = threading.Lock()
        forksafe.renew_at_fork(self, "_lock")

    def _take(self, nbytes: int) -> int:
        """A region of ``nbytes`` (the lock is held); 0 when staging could not start."""
        if not self._base:
            try:
                self._base = self._pinned_alloc(self.capacity)
            except Exception:   # noqa: BLE001 - no pinned memory: the pageable path serves
                self.limit = 0
                return 0
        size = -(-nbytes // ALIGN) * ALIGN
        if self._used + size > self.capacity:
            self._sync()     # every region's copy has run: start the ring again
            self._used = 0
        addr = self._base + self._used
        self._used += size
        return addr

    def htod(self, dst: int, src_addr: int, nbytes: int) -> bool:
        """Queue a copy of ``nbytes`` at host ``src_addr`` to device ``dst``; the host data
        may change as soon as this returns. False when not staged (the caller copies)."""
        with self._lock:
            addr = self._take(nbytes)
            if not addr:
                return False
            ctypes.memmove(addr, src_addr, nbytes)
            self._htod(dst, addr, nbytes)
            return True

    def dtoh(self, dst_addr: int, src: int, nbytes: int) -> bool:
        """Copy ``nbytes`` at device ``src`` to host ``dst_addr`` after everything queued on
        the stream; waits. False when not staged (the caller copies)."""
        with self._lock:
            addr = self._take(nbytes)
            if not addr:
                return False
            self._dtoh(addr, src, nbytes)
            self._sync()
            self._used = 0
            ctypes.memmove(dst_addr, addr, nbytes)
            return True

    def synchronize(self) -> None:
        """Wait for the stream; the ring starts again."""
        with self._lock:
            self._sync()
            self._used = 0
