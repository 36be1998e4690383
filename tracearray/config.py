"""The one place that reads tracearray's environment variables.

- ``TRACEARRAY_DEBUG=N`` prints to stderr, cumulatively: 1 compile events and cache hits,
  3 the fusion plan, 4 the traced graph, 6 the LLVM IR of each kernel.
- ``TRACEARRAY_DUMP_DIR=path`` writes every stage's text (graph, plan, LLVM IR) per compiled
  signature into that folder.
- ``TRACEARRAY_NUM_THREADS=N`` sets the CPU thread count (read by ``cpu/pool.py``).
- ``TRACEARRAY_VECTOR_MATH=0`` turns off libmvec vector math (read by ``cpu/jit.py``).
"""
from __future__ import annotations

import os
import sys


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
