"""What a cached kernel's machine code depends on besides its description, read without LLVM.

The kernel key (``tracearray.cpu.codecache``) must be computable before anything of LLVM is
loaded: importing ``llvmlite.binding`` maps the 179 MB ``libllvmlite.so`` (about 50 ms), which a
process whose kernels are all on disk never needs (issue 12). So the key names its target by
what determines LLVM's answers rather than by the answers:

- **the host CPU**: LLVM's host CPU name and feature string (``get_host_cpu_name``,
  ``get_host_cpu_features``) are functions of the processor's CPUID (vendor, family, model,
  stepping, feature bits) and of what the operating system enables (XSAVE state: AVX,
  AVX-512). On Linux, ``/proc/cpuinfo`` reports exactly those, as the kernel sees them (bits it
  or a hypervisor masks are absent): the key holds each distinct processor description it lists
  (vendor, family, model, model name, stepping, microcode, flags; clock speeds and core
  numbers left out). Elsewhere ``host_cpu`` is None and the key asks LLVM (``CpuJit``);
- **LLVM**: llvmlite's version (one LLVM per release) and the identity (path, size,
  modification time) of the ``libllvmlite.so`` that would be loaded, so a rebuilt llvmlite is a
  new target;
- **the C library**: glibc's version (libmvec's vector functions, libm's symbols);
- the platform and machine (``sys.platform``, ``platform.machine()``).

A wrong answer here could only make two hosts that LLVM tells apart share a key; the kernel
key also holds tracearray's version and a digest of every source file between the
description and the machine code (``pipeline_digest``: their paths, sizes and modification
times, the test by which Python itself reuses their bytecode), so an edited code generator is
a new key too.
"""
from __future__ import annotations

import os
import platform
import sys
import threading

# /proc/cpuinfo fields that describe the processor (the rest: clocks, core and APIC numbers)
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode",
               "flags", "Features", "CPU implementer", "CPU architecture", "CPU variant",
               "CPU part", "CPU revision", "isa", "uarch")

# Every file whose code decides what a kernel description becomes: the expression and
# op semantics (ops/), the description itself, loops and layouts (tile/), index maps and
# expressions (fuse/), the lowering (codegen/), and the CPU pipeline (cpu/: math library,
# JIT options, linking).
_PIPELINE_PACKAGES = ("ops", "tile", "fuse", "codegen", "cpu")

from .. import diskcache, forksafe

_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_lock")
_cached: dict[str, object] = {}


def host_cpu() -> str | None:
    """The processor descriptions of ``/proc/cpuinfo`` (module doc), or None without one."""
    with _lock:
        if "cpu" not in _cached:
            _cached["cpu"] = _read_cpuinfo()
        return _cached["cpu"]   # type: ignore[return-value]


def _read_cpuinfo() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return parse_cpuinfo(f.read())
    except OSError:
        return None


def parse_cpuinfo(text: str) -> str | None:
    """The distinct processor descriptions of a ``/proc/cpuinfo`` text (``_CPU_FIELDS``, in
    that order, whitespace normalised), or None when it describes none."""
    blocks = []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            key = key.strip()
            if sep and key in _CPU_FIELDS:
                fields[key] = " ".join(value.split())
        if fields:
            described = "\n".join(f"{k}: {fields[k]}" for k in _CPU_FIELDS if k in fields)
            if described not in blocks:
                blocks.append(described)
    return "\n--\n".join(blocks) if blocks else None


def llvm_identity() -> str:
    """llvmlite's version and its shared library's identity (``diskcache.llvm_identity``)."""
    return diskcache.llvm_identity()


def platform_identity() -> str:
    """Platform, machine and C library version."""
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") and \
        "CS_GNU_LIBC_VERSION" in os.confstr_names else "-".join(platform.libc_ver())
    return f"{sys.platform} {platform.machine()} {libc}"


def pipeline_digest() -> str:
    """``diskcache.sources_digest`` of ``_PIPELINE_PACKAGES``: an editable install keeps one
    version while the code generator changes."""
    with _lock:
        if "pipeline" not in _cached:
            _cached["pipeline"] = diskcache.sources_digest(_PIPELINE_PACKAGES)
        return _cached["pipeline"]   # type: ignore[return-value]
