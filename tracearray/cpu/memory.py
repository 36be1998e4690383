"""Recycled memory for large CPU outputs and intermediates.

Why: a fresh multi-megabyte ``np.empty`` is usually fresh pages from the kernel, and the
first write to each page takes a fault and a zero-fill. glibc hands large blocks back to the
OS on free (its trim threshold is twice its mmap threshold), so a compiled function called in
a loop paid those faults on every call: for adam_step (4 inputs, 3 outputs of 4 MiB) they
were 2-3 ms of a 3 ms call whose kernel runs in 0.8 ms.

How: every large block stays owned by the arena. A caller gets an ndarray viewing the block
(its ``.base`` is the block); the block is free again once no view of it is alive, which is
exactly when nothing but the arena references it (NumPy collapses every view's ``base`` to the
owning array, so slices, reshapes and transposes of a result count as uses). Freeness is read
from the reference count at the next allocation; nothing is freed behind a live array.

Bounded: blocks the arena keeps (in use or idle) total at most ``config.output_arena_bytes()``
(``TRACEARRAY_OUTPUT_ARENA_MB``, default 512; 0 turns recycling off). Beyond it, allocations
are plain ``np.empty`` after the idle blocks have been released. ``release()`` drops every idle
block now.
"""
from __future__ import annotations

import ctypes
import math
import os
import sys
import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from .. import config

MIN_BYTES = 1 << 20     # below this malloc reuses memory well by itself
_PAGE = 4096
_ALIGN = 64             # one cache line: vector loads of a block never split a line


class _Block:
    """One owned allocation: the uint8 array and where its aligned start is."""
    __slots__ = ("array", "offset", "address")

    def __init__(self, size: int) -> None:
        self.array = np.empty(size + _ALIGN, dtype=np.uint8)
        base = self.array.ctypes.data
        self.offset = -base % _ALIGN
        self.address = base + self.offset


class _Arena:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        # size class (bytes) -> blocks; most recently used size class last.
        self.blocks: "OrderedDict[int, list[_Block]]" = OrderedDict()
        self.bytes_held = 0
        self.idle_refs = _idle_refcount()

    def take(self, shape: tuple[int, ...], dtype: np.dtype, nbytes: int, cap: int
             ) -> tuple[np.ndarray, int] | None:
        size = -(-nbytes // _PAGE) * _PAGE
        with self.lock:
            same = self.blocks.get(size)
            if same is not None:
                for block in same:
                    if _refs(block.array) <= self.idle_refs:
                        self.blocks.move_to_end(size)
                        return np.ndarray(shape, dtype, block.array, block.offset), block.address
            if self.bytes_held + size > cap:
                self._release_idle(size, cap)
                if self.bytes_held + size > cap:
                    return None
            block = _Block(size)
            self.blocks.setdefault(size, []).append(block)
            self.blocks.move_to_end(size)
            self.bytes_held += size
            return np.ndarray(shape, dtype, block.array, block.offset), block.address

    def _release_idle(self, need: int, cap: int) -> None:
        """Drop idle blocks, least recently used size class first, until ``need`` fits."""
        for size in list(self.blocks):
            kept = []
            for block in self.blocks[size]:
                if self.bytes_held + need > cap and _refs(block.array) <= self.idle_refs:
                    self.bytes_held -= size
                else:
                    kept.append(block)
            if kept:
                self.blocks[size] = kept
            else:
                del self.blocks[size]

    def release(self) -> int:
        """Drop every idle block; returns the bytes released."""
        with self.lock:
            before = self.bytes_held
            self._release_idle(0, -1)
            return before - self.bytes_held


def _refs(array: np.ndarray) -> int:
    return sys.getrefcount(array)


def _idle_refcount() -> int:
    """What ``_refs`` reports for a block's array held by the arena alone, measured on this
    interpreter with the loop shape ``take`` uses (reference counting differs between versions)."""
    blocks = [_Block(_PAGE)]
    for block in blocks:
        return _refs(block.array)
    raise AssertionError("unreachable")


_arena = _Arena()


def _reset_after_fork() -> None:
    global _arena
    _arena = _Arena()   # a lock held by another thread at fork time would never be released


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _data_address_reader() -> Callable[[np.ndarray], int]:
    """A function returning an ndarray's data address, as cheap as this interpreter allows.

    ``a.ctypes.data`` and ``a.__array_interface__`` build a helper object or a dict (about
    1.2 us each here), which a call path that passes several arrays to a kernel pays per array.
    The address is the ``data`` field of NumPy's object struct (``PyArrayObject_fields``:
    ``PyObject_HEAD``, then ``char *data``), the field ``PyArray_DATA`` reads in every compiled
    extension, so its place is part of NumPy's ABI; on CPython ``id`` is the object's address.
    Read through ctypes it costs about 0.2 us. The reader is checked here against
    ``ctypes.data`` on arrays, views with offsets and subclasses, and ``ctypes.data`` is used
    instead on any interpreter where the check fails."""
    offset = object.__basicsize__          # sizeof(PyObject): where PyObject_HEAD ends
    read = ctypes.c_void_p.from_address

    def fast(a: np.ndarray) -> int:
        return read(id(a) + offset).value

    def slow(a: np.ndarray) -> int:
        return a.ctypes.data

    if sys.implementation.name != "cpython":   # ``id`` is not an address: never read it
        return slow   # pragma: no cover

    class Subclass(np.ndarray):
        pass

    base = np.arange(64, dtype=np.float64)
    samples = [base, base[3:], base[::-2], base.reshape(8, 8).T[1:], base.view(Subclass)[5:],
               np.zeros((2, 3), np.int8)[1:, 1:], np.ones(5, np.float32).view(np.int32)]
    try:
        if all(fast(a) == a.ctypes.data for a in samples):
            return fast
    except (ValueError, OverflowError, OSError):   # pragma: no cover - not CPython's layout
        pass
    return slow   # pragma: no cover


data_address = _data_address_reader()


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array, from recycled memory when it is large."""
    return empty_at(shape, dtype)[0]


def empty_at(shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, int]:
    """``empty`` and the array's data address (known for recycled blocks without asking
    NumPy, which costs microseconds on a call path)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes >= MIN_BYTES:
        got = _arena.take(tuple(shape), dtype, nbytes, config.output_arena_bytes())
        if got is not None:
            return got
    out = np.empty(shape, dtype=dtype)
    return out, data_address(out)


def release() -> int:
    """Give every idle recycled block back to the allocator now; returns the bytes released."""
    return _arena.release()


def bytes_held() -> int:
    """Bytes of blocks the arena owns (in use by live results or idle)."""
    return _arena.bytes_held
