"""The disk cache's files as a user sees them: where, how big, and clearing it.

The cache root (``config.cache_dir()``) holds one subfolder per backend (``cpu/``, ``ptx/``),
each holding entries named ``<64 hex digits>.bin`` (``diskcache.ObjectCache``) and
temporary files of writes in flight (``*.tmp``). Only such files are counted or deleted: the
root is a user setting and may be a folder that holds other things too.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from . import config
from .diskcache import SUFFIX

_HEX = set("0123456789abcdef")
STALE_TEMPORARY_S = 3600.0


def is_entry_name(name: str) -> bool:
    stem = name[:-len(SUFFIX)] if name.endswith(SUFFIX) else None
    return stem is not None and len(stem) == 64 and set(stem) <= _HEX


@dataclass
class CacheUsage:
    """Entries and bytes per backend subfolder of the cache root."""
    root: str | None
    folders: dict[str, tuple[int, int]] = field(default_factory=dict)   # name -> (entries, bytes)

    @property
    def entries(self) -> int:
        return sum(n for n, _ in self.folders.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.folders.values())


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")   # diskcache's mkstemp names


def _cache_files(root: str):
    """(subfolder name, path, size, modification time) of every entry and temporary file in
    the subfolders of ``root``."""
    try:
        with os.scandir(root) as it:
            subs = sorted((e for e in it if e.is_dir(follow_symlinks=False)),
                          key=lambda e: e.name)
    except OSError:
        return
    for sub in subs:
        try:
            with os.scandir(sub.path) as it:
                for entry in it:
                    if not entry.is_file(follow_symlinks=False) or \
                            not (is_entry_name(entry.name) or _is_temporary(entry.name)):
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    yield sub.name, entry.path, st.st_size, st.st_mtime
        except OSError:
            continue


def usage(root: str | None = None) -> CacheUsage:
    """What the disk cache holds (``root``: the configured cache folder by default)."""
    root = config.cache_dir() if root is None else root
    out = CacheUsage(root)
    if root is None:
        return out
    for name, _path, size, _mtime in _cache_files(root):
        n, b = out.folders.get(name, (0, 0))
        out.folders[name] = (n + 1, b + size)
    return out


def clear(root: str | None = None) -> tuple[int, int]:
    """Delete every cache entry, and temporary files left by killed writers (older than an
    hour; a younger one may be a write in flight): (files deleted, bytes freed). Other files
    are left alone; running processes keep the kernels they loaded and write new entries as
    they compile."""
    root = config.cache_dir() if root is None else root
    files = freed = 0
    if root is None:
        return files, freed
    now = time.time()
    for _name, path, size, mtime in list(_cache_files(root)):
        if not is_entry_name(os.path.basename(path)) and now - mtime < STALE_TEMPORARY_S:
            continue
        try:
            os.remove(path)
        except OSError:
            continue
        files += 1
        freed += size
    return files, freed


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
