"""What the JIT and the kernel cache share: LLVM's options, the process's counters, the error.

A module of its own so that the kernel cache (``codecache.py``), which a warm process runs
without compiling anything, does not import ``jit.py`` (and the math library) to read them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


class JitError(RuntimeError):
    """LLVM rejected a module (parse or verification error)."""


# Every option given to LLVM (jit.py); part of the cache keys, so a key cannot miss one.
CODEGEN_OPTIONS: Mapping[str, object] = {
    "opt": 3,                       # target machine (instruction selection, scheduling)
    "reloc": "default",
    "codemodel": "jitdefault",
    "speed_level": 3,               # new pass manager pipeline: O3
    "loop_vectorization": True,
    "slp_vectorization": True,      # the tuning-option default leaves SLP off
}


@dataclass
class JitStats:
    """What ``CpuJit.compile`` (and the kernel cache) did with each module it was given."""

    memory_hits: int = 0     # engine already built in this process
    disk_hits: int = 0       # object loaded from the disk cache (no LLVM optimisation or codegen)
    compiles: int = 0        # parsed, optimised and compiled
    disk_writes: int = 0     # objects written to the disk cache
    disk_discarded: int = 0  # corrupt or mismatched disk entries deleted (then recompiled)

    @property
    def built(self) -> int:
        """Engines built in this process: disk hits plus compiles."""
        return self.disk_hits + self.compiles


# The process's counters: get_jit's JIT and the kernel cache (codecache.py) count into them.
PROCESS_STATS = JitStats()
