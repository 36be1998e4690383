"""Disk cache of compiled kernels: one file per key, raw bytes behind a checked header.

``ObjectCache(folder, root=...)`` maps a key (64 hex digits) to bytes: relocatable objects for
the CPU (``tracearray.cpu.jit``), PTX for the GPU (``tracearray.gpu.ptx``).  Nothing here knows
LLVM; each backend decides what the key covers (its *record*, below) and checks what the bytes
are before using them.

Provenance (``secure_folder``): a loaded entry is machine code, so whoever can write the cache
folder can run code as the user.  As ssh and pip do, a folder that is not owned by the user, or
that group or others may write, is refused: one ``CacheWarning`` per folder per process, and
the cache is off for it (kernels are still cached in memory).  The checks cover the backend's
folder, the configured cache root, and every parent this module creates (created with mode
0700); folders above the root that already existed are the user's choice.  An entry file must
be a regular file (not a symlink, not a FIFO that would block the read) owned by the user and
not writable by group or others.

File format (``<folder>/<key>.bin``), little-endian::

    magic    8 bytes   b"TRCARRAY"
    format   u16       FORMAT_VERSION
    reserved u16       0
    key      32 bytes  the key, raw (so a renamed or misplaced file is rejected)
    record   u32       length of the stored key record
    length   u64       payload length (a truncated file is rejected)
    digest   32 bytes  sha256 of record + payload (a damaged file is rejected)
    record   zlib-compressed full key: the exact bytes the key hashes (``key_record``)
    payload  length bytes

The key is a hash; the record is what was hashed (for the CPU, the module text and every
target and option string), compared in full on load.  So an entry that is valid in itself but
was made for another key - a file copied or renamed, its header key rewritten - is refused
rather than run.  (The record is decompressed with a bound: at most the expected length plus
one byte is ever produced.)

Nothing is unpickled or executed before the header, digest and record check out.  An entry
that fails a check gets one ``CacheWarning`` naming the file (once per file per process), is
deleted (only if the file is still the one that was read), and the caller rebuilds and
rewrites it.  An entry of another format version is replaced quietly: it is stale, not
damaged.

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
import stat
import struct
import threading
import time
import warnings
import zlib
from dataclasses import dataclass
from typing import Mapping, Sequence

from . import forksafe

MAGIC = b"TRCARRAY"
FORMAT_VERSION = 2
_HEADER = struct.Struct("<8sHH32sIQ32s")
HEADER_SIZE = _HEADER.size
SUFFIX = ".bin"
_STALE_TEMP_S = 3600.0
_EVICT_TO = 0.9
_RESCAN_EVERY = 64      # writes between folder scans while the running total stays under the bound
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_CHECKS_OWNER = hasattr(os, "geteuid")      # POSIX; Windows has no owner or mode bits to check


class CacheWarning(UserWarning):
    """The disk cache could not be used, or an entry in it was refused; compiling goes on."""


class CorruptEntry(ValueError):
    """A cache file failed a header, length, digest or key check."""


class StaleEntry(CorruptEntry):
    """A cache file of another format version: replaced without a warning."""


# ---------------------------------------------------------------------------------- keys

def key_record(components: Mapping[str, str], names: Sequence[str], what: str = "key") -> bytes:
    """The bytes a cache key hashes: each of ``names`` as ``name:length:value``, in that order.

    Length-prefixed, so no two different component tuples give the same bytes; ``components``
    must hold exactly ``names``, each a str.
    """
    if set(components) != set(names):
        missing = sorted(set(names) - set(components))
        extra = sorted(set(components) - set(names))
        raise ValueError(f"{what}: missing {missing}, unexpected {extra}")
    parts = []
    for name in names:
        value = components[name]
        if not isinstance(value, str):
            raise TypeError(f"{what}: {name} must be a str, got {type(value).__name__}")
        data = value.encode()
        parts += [f"{name}:{len(data)}:".encode(), data]
    return b"".join(parts)


def record_key(record: bytes) -> str:
    """The key (64 hex digits) of a key record."""
    return hashlib.sha256(record).hexdigest()


_llvm_identity: str | None = None


def llvm_identity() -> str:
    """llvmlite's version and its shared library's path, size and modification time: the
    LLVM that compiles a cached entry, named without loading it (importing
    ``llvmlite.binding`` maps the 179 MB ``libllvmlite.so``, which a process whose kernels
    are all on disk never needs). A cache-key component of both targets."""
    global _llvm_identity
    if _llvm_identity is None:
        import llvmlite     # its __init__ reads the version only (not the binding)
        folder = os.path.join(os.path.dirname(llvmlite.__file__), "binding")
        library = "unknown"
        for name in ("libllvmlite.so", "libllvmlite.dylib", "llvmlite.dll"):
            try:
                st = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            library = f"{os.path.join(folder, name)} {st.st_size} {st.st_mtime_ns}"
            break
        _llvm_identity = f"llvmlite {llvmlite.__version__}; {library}"
    return _llvm_identity


def source_files(packages: Sequence[str]) -> list[str]:
    """The .py files of the tracearray subpackages ``packages``, sorted (``__pycache__``
    skipped)."""
    root = os.path.dirname(os.path.abspath(__file__))
    out = []
    for package in packages:
        found = []
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, package)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            found += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
        out += sorted(found)
    return out


def sources_digest(packages: Sequence[str]) -> str:
    """sha256 over the path, size and modification time of every source file of the
    tracearray subpackages ``packages``, for keys of the code they generate. (Python reuses
    a module's compiled bytecode by the same test, so this digest changes whenever the code
    that runs does; reading the 400 KB of sources instead cost 2 ms of every new process's
    first call.)"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for path in source_files(packages):
        st = os.stat(path)
        h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def tracearray_version() -> str:
    """tracearray's version, for keys (``_version.py``: no import of the package root and api.py)."""
    from ._version import __version__
    return __version__


# ----------------------------------------------------------------------------- entries

def encode_entry(key: str, payload: bytes, record: bytes = b"") -> bytes:
    """Header + stored record + payload for ``key``."""
    stored = zlib.compress(record, 1) if record else b""
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, bytes.fromhex(key), len(stored),
                          len(payload), hashlib.sha256(stored + payload).digest())
    return header + stored + payload


def decode_entry(key: str, data: bytes, record: bytes | None = b"") -> bytes:
    """The payload of an entry written by ``encode_entry(key, ..., record)``; ``CorruptEntry``
    (``StaleEntry`` for another format version) otherwise.  ``record=None`` checks everything
    but the stored full key (to inspect an entry whose key record one does not have)."""
    if len(data) < 12:
        raise CorruptEntry(f"{len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    magic, version = data[:8], int.from_bytes(data[8:10], "little")
    if magic != MAGIC:
        raise CorruptEntry(f"bad magic {magic!r}")
    if version != FORMAT_VERSION:
        raise StaleEntry(f"format {version}, expected {FORMAT_VERSION}")
    if len(data) < HEADER_SIZE:
        raise CorruptEntry(f"{len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    _, _, _, raw_key, stored_length, length, digest = _HEADER.unpack_from(data)
    if raw_key != bytes.fromhex(key):
        raise CorruptEntry(f"written for key {raw_key.hex()[:16]}..., not {key[:16]}...")
    body = memoryview(data)[HEADER_SIZE:]
    if len(body) != stored_length + length:
        raise CorruptEntry(f"record and payload of {len(body)} bytes, header says "
                           f"{stored_length} + {length}")
    if hashlib.sha256(body).digest() != digest:
        raise CorruptEntry("digest mismatch")
    stored = bytes(body[:stored_length])
    if record is not None and _decompress_bounded(stored, len(record)) != record:
        raise CorruptEntry("written for another key (the full key stored in the entry differs "
                           "from the one looked up)")
    return bytes(body[stored_length:])


def _decompress_bounded(stored: bytes, expected: int) -> bytes | None:
    """``stored`` decompressed, or None when it is not zlib data or exceeds ``expected`` bytes."""
    if not stored:
        return b""
    d = zlib.decompressobj()
    try:
        out = d.decompress(stored, expected + 1)
    except zlib.error:
        return None
    return out if len(out) <= expected and d.eof and not d.unused_data else None


# ---------------------------------------------------------------------------- provenance

_warned: set[str] = set()           # folders and files already warned about, in this process
_warned_lock = threading.Lock()


def warn_once(subject: str, message: str) -> None:
    """One ``CacheWarning`` per ``subject`` (a path) per process."""
    with _warned_lock:
        if subject in _warned:
            return
        _warned.add(subject)
    warnings.warn(f"tracearray: {message}", CacheWarning, stacklevel=3)


def unsafe_reason(st: os.stat_result, what: str) -> str | None:
    """Why a folder or file with this status may not be trusted, or None."""
    if not _CHECKS_OWNER:
        return None
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"{what} is owned by uid {st.st_uid}, not by this user (uid {uid})"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH))
               if st.st_mode & bit]
    if writers:
        return f"{what} is writable by {' and '.join(writers)} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def secure_folder(folder: str, root: str | None = None) -> str | None:
    """Check ``folder`` and create it (mode 0700, parents too) if needed; why it may not be
    trusted, or None.

    Checked: ``folder``, each folder between ``root`` and it, and every parent created here;
    the existing ones before anything is created in them.  OSError from creating or reading a
    folder propagates.
    """
    chain = [os.path.abspath(folder)]          # the folder, then each parent up to "/"
    while os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    existing = next((i for i, path in enumerate(chain) if os.path.exists(path)), len(chain) - 1)
    top = os.path.abspath(root) if root else chain[0]
    depth = max(existing, chain.index(top) + 1 if top in chain else 1)
    reason = _unsafe_folders(reversed(chain[existing:depth]))
    if reason:
        return reason
    for path in reversed(chain[:existing]):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:      # made by another process meanwhile: checked below
            pass
    return _unsafe_folders(reversed(chain[:existing]))


def _unsafe_folders(paths) -> str | None:
    for path in paths:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(f"{path} is not a folder")
        reason = unsafe_reason(st, f"the cache folder {path}")
        if reason:
            return reason
    return None


# ------------------------------------------------------------------------------- the cache

@dataclass
class CacheEvent:
    """Counters of one ObjectCache (observability and tests)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    discarded: int = 0     # refused entries deleted (damaged, another key's, untrusted)
    evicted: int = 0       # entries deleted by the size bound
    errors: int = 0        # I/O failures (each degraded to "no cache")


class ObjectCache:
    """Key -> bytes in one folder (see the module docstring).

    ``root`` is the configured cache folder that ``folder`` lies in (checked with it).
    """

    def __init__(self, folder: str, max_bytes: int | None = None, root: str | None = None) -> None:
        self.folder = folder
        self.root = root
        self.max_bytes = max_bytes
        self.counts = CacheEvent()
        self.last_error: str | None = None      # the last refused entry or I/O failure
        self.refused: str | None = None         # why the folder is not used, if it is not
        self._usable: bool | None = None        # folder created and checked (once)
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

    @property
    def usable(self) -> bool:
        """The folder exists (created here if needed) and may be trusted; checked once."""
        if self._usable is None:
            with self._lock:
                if self._usable is None:
                    self._usable = self._check_folder()
        return self._usable

    def _check_folder(self) -> bool:
        try:
            reason = secure_folder(self.folder, self.root)
        except OSError as e:
            self._fail(f"cannot create {self.folder}: {e}", stop_writing=True)
            return False
        if reason is None:
            return True
        self.refused = self.last_error = reason
        warn_once(self.root or self.folder,
                  f"not using the disk cache: {reason}; kernels are cached in memory only "
                  f"(fix with `chmod go-w` or `chown`, or set TRACEARRAY_CACHE_DIR to a folder "
                  f"of your own)")
        return False

    # ------------------------------------------------------------------ read
    def load(self, key: str, record: bytes = b"") -> bytes | None:
        """The payload stored for ``key`` (whose full key is ``record``), or None: absent,
        unreadable, or refused (warned about and deleted)."""
        path = self.path(key)
        if not self.usable:
            self.counts.misses += 1
            return None
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            self.counts.misses += 1
            return None
        except OSError as e:        # ELOOP: a symlink; EACCES: not ours to read
            self.refuse(key, f"cannot open it: {e}")
            self.counts.misses += 1
            return None
        data, identity = None, None
        try:   # (checked before Python's file object is made: it refuses a directory)
            st = os.fstat(fd)
            identity = _identity(st)
            reason = unsafe_reason(st, "the entry") if stat.S_ISREG(st.st_mode) else \
                "the entry is not a regular file"
            if not reason:
                with os.fdopen(fd, "rb", closefd=False) as f:
                    data = f.read()
        except OSError as e:
            reason = f"cannot read it: {e}"
        finally:
            os.close(fd)
        try:
            if reason:
                raise CorruptEntry(reason)
            payload = decode_entry(key, data, record)
        except CorruptEntry as e:
            self.refuse(key, str(e), identity, quiet=isinstance(e, StaleEntry))
            self.counts.misses += 1
            return None
        self.counts.hits += 1
        try:
            os.utime(path)            # least recently *used* goes first when evicting
        except OSError:
            pass
        return payload

    def refuse(self, key: str, reason: str, identity: tuple[int, int, int, int] | None = None,
               quiet: bool = False) -> None:
        """Refuse ``key``'s entry: one warning naming the file (unless ``quiet``), and delete it
        (when ``identity`` is given: only if it is still that file); the caller rebuilds it."""
        path = self.path(key)
        self.last_error = f"refused {path}: {reason}"
        self.counts.discarded += 1
        if not quiet:
            warn_once(path, f"refused the disk cache entry {path}: {reason}; compiling it again")
        try:
            if identity is None or _identity(os.stat(path, follow_symlinks=False)) == identity:
                os.remove(path)
        except OSError:   # already gone, replaced by a good entry, or a read-only folder
            pass

    # ----------------------------------------------------------------- write
    def store(self, key: str, payload: bytes, record: bytes = b"") -> bool:
        """Write the entry atomically; False (and a one-time warning) if the disk refuses."""
        if not self._writable or not self.usable:
            return False
        path = self.path(key)
        data = encode_entry(key, payload, record)
        tmp = None
        try:
            import tempfile   # (here: a process that only reads entries never imports it)
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
