"""The one place that reads tracearray's environment variables.

- ``TRACEARRAY_DEBUG=N`` prints to stderr, cumulatively: 1 compile events and cache hits,
  3 the fusion plan, 4 the traced graph, 6 the LLVM IR of each kernel.
- ``TRACEARRAY_EXPLAIN_CACHE_MISSES=1`` prints why a call traced or built again.
- ``TRACEARRAY_DUMP_DIR=path`` writes every stage's text (graph, plan, LLVM IR) per compiled
  signature into that folder.
- ``TRACEARRAY_NUM_THREADS=N`` sets the CPU thread count (read by ``cpu/pool.py``).
- ``TRACEARRAY_VECTOR_MATH=0`` turns off libmvec vector math (read by ``cpu/jit.py``).
- ``TRACEARRAY_CACHE_DIR`` / ``TRACEARRAY_CACHE_MAX_MB``: the disk cache of compiled kernels.
- ``TRACEARRAY_LIBDEVICE``, ``TRACEARRAY_GPU_LOAD``, ``TRACEARRAY_DISABLE_GPU``: GPU backend
  (``TRACEARRAY_DISABLE_GPU`` is read when a process first resolves ``device="auto"``, not
  on every call: ``gpu.driver.is_available_memo``).
- ``TRACEARRAY_CACHE_DIR=path`` moves the disk cache of compiled kernels; ``""``, ``0`` or
  ``off`` turns it off (see ``cache_dir``).
- ``TRACEARRAY_CACHE_MAX_MB=N`` bounds the disk cache (default 256; ``unlimited`` for none).
- ``TRACEARRAY_OUTPUT_ARENA_MB=N`` bounds the recycled memory of large CPU results (default
  512; 0 turns recycling off; see ``cpu/memory.py``).
"""
from __future__ import annotations

import os
import sys

_OFF = ("", "0", "off", "false", "no", "none")


def debug_level() -> int:
    raw = os.environ.get("TRACEARRAY_DEBUG", "0").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"TRACEARRAY_DEBUG must be an integer, got {raw!r}") from None


def dump_dir() -> str | None:
    return os.environ.get("TRACEARRAY_DUMP_DIR") or None


def log(level: int, message: str) -> None:
    """Print ``message`` to stderr when the debug level is at least ``level``."""
    if debug_level() >= level:
        print(f"[tracearray] {message}", file=sys.stderr)


def dump(name: str, stage: str, text: str) -> None:
    """Write one stage's artifact for ``name`` into TRACEARRAY_DUMP_DIR, if set."""
    folder = dump_dir()
    if folder is None:
        return
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.{stage}")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)   # atomic: a reader never sees half a file


def explain_cache_misses() -> bool:
    """``TRACEARRAY_EXPLAIN_CACHE_MISSES=1``: print why each call that traces or builds
    again missed a compiled function's caches (which part of the key changed: dtype, rank,
    broadcast pattern, size, layout, a static value, the device). Read on misses only."""
    raw = os.environ.get("TRACEARRAY_EXPLAIN_CACHE_MISSES", "0").strip().lower()
    return raw not in _OFF


def vector_math() -> bool:
    """``TRACEARRAY_VECTOR_MATH``: libmvec vector variants for libm calls (default on)."""
    raw = os.environ.get("TRACEARRAY_VECTOR_MATH", "1").strip().lower()
    return raw not in ("0", "false", "no", "off")


def default_cache_dir() -> str:
    """The per-user cache folder for tracearray, following each platform's convention."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser(r"~\AppData\Local")
        return os.path.join(base, "tracearray", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/tracearray")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "tracearray")


def cache_dir() -> str | None:
    """Folder of the disk cache of compiled kernels, or None when it is off.

    ``TRACEARRAY_CACHE_DIR`` unset: the user cache folder (``$XDG_CACHE_HOME/tracearray``,
    else ``~/.cache/tracearray``; ``~/Library/Caches/tracearray`` on macOS,
    ``%LOCALAPPDATA%\\tracearray\\Cache`` on Windows). Set to a path: that folder (``~`` is
    expanded; created on first write). Set to ``""``, ``0``, ``off`` (or ``false``, ``no``,
    ``none``; any case): no disk cache at all - nothing is read or written, kernels are still
    cached in memory. An empty value means "off" rather than "default" so that
    ``TRACEARRAY_CACHE_DIR= python ...`` is a one-word way to run without the disk cache.
    Each backend keeps its own subfolder (``cpu/`` for host objects).
    """
    raw = os.environ.get("TRACEARRAY_CACHE_DIR")
    if raw is None:
        return default_cache_dir()
    raw = raw.strip()
    if raw.lower() in _OFF:
        return None
    return os.path.abspath(os.path.expanduser(raw))


def cache_max_bytes() -> int | None:
    """``TRACEARRAY_CACHE_MAX_MB``: size bound of each backend's disk cache, None for no bound.

    Default 256 MB (a CPU kernel object is 2-50 KB). Beyond the bound the least recently used
    entries are deleted after a write. ``unlimited`` (or ``none``, ``inf``) removes the bound;
    to turn the cache off use ``TRACEARRAY_CACHE_DIR=off``.
    """
    raw = os.environ.get("TRACEARRAY_CACHE_MAX_MB", "256").strip().lower()
    if raw in ("unlimited", "none", "inf"):
        return None
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb > 0:
        raise ValueError(f"TRACEARRAY_CACHE_MAX_MB must be a positive number of megabytes or "
                         f"'unlimited', got {raw!r} (TRACEARRAY_CACHE_DIR=off turns the cache off)")
    return int(mb * 1024 * 1024)


def output_arena_bytes() -> int:
    """``TRACEARRAY_OUTPUT_ARENA_MB``: bytes of large CPU result blocks kept for reuse (in use
    or idle). Default 512 MB; 0 turns recycling off (every result is a plain ``np.empty``)."""
    raw = os.environ.get("TRACEARRAY_OUTPUT_ARENA_MB", "512")
    cached = _ARENA_CACHE.get(raw)
    if cached is None:
        try:
            mb = float(raw.strip())
        except ValueError:
            mb = -1.0
        if not mb >= 0:
            raise ValueError(f"TRACEARRAY_OUTPUT_ARENA_MB must be a number of megabytes >= 0, "
                             f"got {raw!r}")
        cached = _ARENA_CACHE[raw] = int(mb * 1024 * 1024)
    return cached


_ARENA_CACHE: dict[str, int] = {}


def libdevice_path() -> str | None:
    """``TRACEARRAY_LIBDEVICE``: an explicit path to NVIDIA's ``libdevice.10.bc``."""
    return os.environ.get("TRACEARRAY_LIBDEVICE") or None


def gpu_load_mode() -> str:
    """``TRACEARRAY_GPU_LOAD``: how GPU modules are loaded: ``auto`` (cubin through nvJitLink
    or ptxas when present, else the driver's PTX JIT), ``ptx`` or ``cubin``."""
    mode = os.environ.get("TRACEARRAY_GPU_LOAD", "auto").strip().lower() or "auto"
    if mode not in ("auto", "ptx", "cubin"):
        raise ValueError(f"TRACEARRAY_GPU_LOAD must be auto, ptx or cubin, got {mode!r}")
    return mode


def gpu_disabled() -> bool:
    """``TRACEARRAY_DISABLE_GPU=1``: behave as if no GPU were present (device="auto" -> CPU)."""
    return os.environ.get("TRACEARRAY_DISABLE_GPU", "0").strip() not in ("", "0")
