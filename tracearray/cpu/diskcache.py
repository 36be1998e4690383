"""Disk cache of compiled kernel objects: one file per key, raw bytes behind a checked header.

``ObjectCache(folder)`` maps a key (64 hex digits, see ``tracearray.cpu.jit.object_key``) to
the bytes of a relocatable object file.  Nothing here knows LLVM; the JIT decides what the
key covers and what the bytes are.

File format (``<folder>/<key>.bin``), little-endian::

    magic    8 bytes   b"TRCARRAY"
    format   u16       FORMAT_VERSION
    reserved u16       0
    key      32 bytes  the key, raw (so a renamed or misplaced file is rejected)
    length   u64       payload length (a truncated file is rejected)
    digest   32 bytes  sha256 of the payload (a damaged file is rejected)
    payload  length bytes

Nothing is unpickled or executed before the header and digest check out: a loaded object
file is machine code, and handing damaged code to the runtime linker could crash the
process.  An entry that fails any check is deleted (only if the file is still the one that
was read) and the caller rebuilds it.

Concurrency: a write goes to a temporary file in the same folder, then ``os.replace`` -
readers see the old entry, the new entry or none, never half of one.  Two processes
writing the same key write equivalent objects and the last rename wins.  Eviction and
discarding tolerate files vanishing underneath them.  No fsync: after a power loss an
entry may be empty or garbage, which the checks above catch.

Size bound: when the folder holds more than ``max_bytes`` the least recently used entries
go (a hit refreshes the file's mtime), down to 90% of the bound.  The folder is scanned at
a process's first write, then the process adds its own writes to the total and rescans
every 64 writes or when the total crosses the bound - so a write costs no directory
listing, and writes by other processes are seen at the next scan.  Temporary files left by
killed processes are removed (by a scan) once older than an hour.

Failures of the disk (read-only folder, full disk, a path through a file) never fail a
compile: the first one in a folder issues a ``CacheWarning`` and turns writing off for that
folder for the rest of the process; reads keep working where they can.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass

from .. import forksafe

MAGIC = b"TRCARRAY"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sHH32sQ32s")
HEADER_SIZE = _HEADER.size
SUFFIX = ".bin"
_STALE_TEMP_S = 3600.0
_EVICT_TO = 0.9
_RESCAN_EVERY = 64      # writes between folder scans while the running total stays under the bound


class CacheWarning(UserWarning):
    """The disk cache could not be used; compiling goes on without it."""


class CorruptEntry(ValueError):
    """A cache file failed a header, length or digest check."""


def encode_entry(key: str, payload: bytes) -> bytes:
    """Header + payload for ``key``."""
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, bytes.fromhex(key), len(payload),
                          hashlib.sha256(payload).digest())
    return header + payload


def decode_entry(key: str, data: bytes) -> bytes:
    """The payload of an entry written by ``encode_entry(key, ...)``; ``CorruptEntry`` otherwise."""
    if len(data) < HEADER_SIZE:
        raise CorruptEntry(f"{len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    magic, version, _, raw_key, length, digest = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptEntry(f"bad magic {magic!r}")
    if version != FORMAT_VERSION:
        raise CorruptEntry(f"format {version}, expected {FORMAT_VERSION}")
    if raw_key != bytes.fromhex(key):
        raise CorruptEntry(f"written for key {raw_key.hex()[:16]}..., not {key[:16]}...")
    payload = data[HEADER_SIZE:]
    if len(payload) != length:
        raise CorruptEntry(f"payload of {len(payload)} bytes, header says {length}")
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptEntry("payload digest mismatch")
    return payload


@dataclass
class CacheEvent:
    """Counters of one ObjectCache (observability and tests)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    discarded: int = 0     # corrupt entries deleted
    evicted: int = 0       # entries deleted by the size bound
    errors: int = 0        # I/O failures (each degraded to "no cache")


class ObjectCache:
    """Key -> bytes in one folder (see the module docstring)."""

    def __init__(self, folder: str, max_bytes: int | None = None) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.counts = CacheEvent()
        self.last_error: str | None = None      # the last corrupt entry or I/O failure
        self._writable = True
        self._warned = False
        self._total: int | None = None       # bytes in the folder as of the last scan, plus ours
        self._since_scan = 0
        self._lock = threading.Lock()
        forksafe.renew_at_fork(self, "_lock")

    def path(self, key: str) -> str:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"cache key must be 64 lowercase hex digits, got {key!r}")
        return os.path.join(self.folder, key + SUFFIX)

    # ------------------------------------------------------------------ read
    def load(self, key: str) -> bytes | None:
        """The payload stored for ``key``, or None (absent, unreadable, or corrupt: deleted)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                identity = _identity(os.fstat(f.fileno()))
                data = f.read()
        except FileNotFoundError:
            self.counts.misses += 1
            return None
        except OSError as e:
            self._fail(f"cannot read {path}: {e}")
            self.counts.misses += 1
            return None
        try:
            payload = decode_entry(key, data)
        except CorruptEntry as e:
            self.discard(key, f"corrupt entry {path}: {e}", identity)
            self.counts.misses += 1
            return None
        self.counts.hits += 1
        try:
            os.utime(path)            # least recently *used* goes first when evicting
        except OSError:
            pass
        return payload

    def discard(self, key: str, reason: str, identity: tuple[int, int, int, int] | None = None) -> None:
        """Delete ``key``'s entry (when ``identity`` is given: only if it is still that file)."""
        path = self.path(key)
        self.last_error = reason
        self.counts.discarded += 1
        try:
            if identity is None or _identity(os.stat(path)) == identity:
                os.remove(path)
        except OSError:   # already gone, replaced by a good entry, or a read-only folder
            pass

    # ----------------------------------------------------------------- write
    def store(self, key: str, payload: bytes) -> bool:
        """Write the entry atomically; False (and a one-time warning) if the disk refuses."""
        if not self._writable:
            return False
        path = self.path(key)
        data = encode_entry(key, payload)
        tmp = None
        try:
            os.makedirs(self.folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=self.folder)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            self._fail(f"cannot write {path}: {e}", stop_writing=True)
            return False
        finally:
            if tmp is not None:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
        self.counts.writes += 1
        if self.max_bytes is not None:
            with self._lock:
                self._since_scan += 1
                if self._total is not None:
                    self._total += len(data)
                due = (self._total is None or self._since_scan >= _RESCAN_EVERY
                       or self._total > self.max_bytes)
            if due:
                self.evict()
        return True

    def evict(self) -> int:
        """Scan the folder: apply the size bound, sweep stale temporary files; entries deleted."""
        with self._lock:
            entries, total, now = [], 0, time.time()
            try:
                with os.scandir(self.folder) as it:
                    for entry in it:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if entry.name.endswith(".tmp"):
                            if now - st.st_mtime > _STALE_TEMP_S:
                                _remove(entry.path)
                        elif entry.name.endswith(SUFFIX):
                            entries.append((st.st_mtime, st.st_size, entry.path))
                            total += st.st_size
            except OSError:
                return 0
            removed = 0
            if self.max_bytes is not None and total > self.max_bytes:
                for _, size, path in sorted(entries):
                    if total <= self.max_bytes * _EVICT_TO:
                        break
                    if _remove(path):
                        removed += 1
                    total -= size
            self._total, self._since_scan = total, 0
            self.counts.evicted += removed
            return removed

    # ---------------------------------------------------------------- errors
    def _fail(self, message: str, stop_writing: bool = False) -> None:
        self.counts.errors += 1
        self.last_error = message
        if stop_writing:
            self._writable = False
        if not self._warned:
            self._warned = True
            what = "not writing to the disk cache in this process" if stop_writing else "disk cache"
            warnings.warn(f"tracearray: {what}: {message}; kernels compile as usual (set "
                          f"TRACEARRAY_CACHE_DIR to a writable folder, or to 'off')",
                          CacheWarning, stacklevel=4)


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _remove(path: str) -> bool:
    try:
        os.remove(path)
        return True
    except OSError:   # gone already (another process evicted it) or not ours to delete
        return False
