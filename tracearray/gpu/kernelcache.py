"""The GPU's kernel cache: PTX found by the kernel's description, not by its IR.

``lowered_kernel(geo, name, strategy, wide, target, counts)`` returns a fused kernel's PTX
and the facts of its lowering that a launch needs (``LoweredKernel``), generating its LLVM IR
only when it must be compiled, as the CPU's ``cpu/codecache.py`` does (issue 12). Its key
hashes the kernel's description (``tile.describe.describe_kernel``: everything the IR depends
on, no sizes; ``tests/test_kernel_keys.py`` checks that equal descriptions lower to identical
IR), the GPU's own choices (strategy, index width, target), the options of the PTX pipeline,
llvmlite's identity, where libdevice is looked for, tracearray's version and the digest of
the code-generating sources (``diskcache.sources_digest``, the GPU packages included).

1. **memory**: kernels lowered in this process, by description (at most ``MEMORY_MAX``): a
   new size of an argument, whose kernels are the same size-generic ones, lowers nothing;
2. **disk** (``diskcache.ObjectCache`` in ``config.cache_dir()/gpukernel``, with every check
   of an entry: a trusted folder and file, the header, digest and full key compared): the
   PTX, with the facts as JSON (read as data: nothing is unpickled or run). An entry whose
   kernel calls libdevice names the file it was linked with (path, size, modification time,
   sha256); it is used only while that file is unchanged, so a new process whose kernels are
   on disk neither locates libdevice (``cuda.pathfinder``'s import alone took 26 ms on the
   H200) nor hashes it;
3. **lower**: ``GpuKernelLowering(...).lower()``, then ``ptx.compile_ptx`` (whose own cache,
   keyed by the IR and libdevice's content, still saves LLVM when only this key changed),
   then written to the disk.

A kernel's IR stays available (``LoweredKernel.ir``: the emulated device of the tests runs it,
``TRACEARRAY_DEBUG`` shows it), generated on first use. ``TRACEARRAY_CHECK_KERNEL_KEYS=1``
generates it on every hit and raises ``KernelKeyMismatch`` when it is not the IR the PTX was
made from.
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import config, forksafe
from ..diskcache import (ObjectCache, key_record, llvm_identity, record_key, sources_digest,
                         tracearray_version)
from ..tile.describe import code_identity
from ..tile.geometry import Geometry
from . import ptx as ptxmod

# Every package whose code decides what a description becomes on the GPU (the CPU's list
# with gpu/ instead of cpu/: the drivers, the math library, the PTX pipeline).
PIPELINE_PACKAGES = ("ops", "tile", "fuse", "codegen", "gpu")
KEY_COMPONENTS = ("kernel", "strategy", "wide", "target", "ptx_options", "llvm",
                  "libdevice_search", "tracearray", "pipeline")
PAYLOAD_MAGIC = b"TAGPUK1\n"
FACTS = ("row_cache_itemsize", "row_cache_limit", "row_cache_buffers", "smem_static",
         "rows_per_warp")
MEMORY_MAX = 256

_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_lock")
_memory: "OrderedDict[tuple, LoweredKernel]" = OrderedDict()
_pipeline: list[str] = []


@dataclass(eq=False)
class LoweredKernel:
    """A kernel's PTX, what the launch needs of its lowering (``facts``: bytes of the row
    cache per row element, the most one row's may take without opting in, how many rows it
    can hold (2: block_row's pipelined rows), the static shared memory), and its IR on
    demand."""
    ptx: str
    facts: dict[str, int]
    make_ir: Callable[[], str] = field(repr=False)
    symbol: str = ""      # the name of its functions (tile/describe.code_identity)
    _ir: str | None = field(default=None, repr=False)

    @property
    def ir(self) -> str:
        if self._ir is None:
            self._ir = self.make_ir()
        return self._ir


def lowered_kernel(geo: Geometry, base: str, strategy: str, wide: bool,
                   target: ptxmod.GpuTarget, counts: Any = None) -> LoweredKernel:
    """The kernel ``geo`` describes, lowered for ``target`` (module doc), its functions
    named after ``base`` (its function's name) and its description (``symbol``), so a
    function's identical kernels share one. ``counts``: an executable's ``compiles`` /
    ``disk_hits`` / ``disk_misses``, incremented for what ran."""
    description, name = code_identity(geo, base, "GpuMath")
    memory_key = (description, strategy, wide, target)
    with _lock:
        hit = _memory.get(memory_key)
        if hit is not None:
            _memory.move_to_end(memory_key)
            return hit

    def lowering():
        from .codegen import GpuKernelLowering    # (not imported by a warm process)
        return GpuKernelLowering(geo, name, strategy, wide, async_copy=target.cc >= 80)

    def make_ir() -> str:
        return lowering().lower()

    record = key_record(key_components(description, strategy, wide, target), KEY_COMPONENTS,
                        "GPU kernel key")
    key = record_key(record)
    cache = _disk_cache()
    found = _from_disk(cache, key, record, target, make_ir) if cache is not None else None
    if found is not None:
        if counts is not None:
            counts.disk_hits += 1
    else:
        low = lowering()
        ir_text = low.lower()
        ptx = ptxmod.compile_ptx(ir_text, target, counts)
        facts = {"row_cache_itemsize": int(low.row_cache_itemsize()),
                 "row_cache_limit": int(low.row_cache_limit()),
                 "row_cache_buffers": int(low.row_cache_buffers()),
                 "smem_static": int(low.static_smem_bytes()),
                 "rows_per_warp": int(low.rows_per_warp)}
        found = LoweredKernel(ptx, facts, make_ir, ir_text)
        if cache is not None:
            cache.store(key, _payload(found, ir_text), record)
    found.symbol = name
    with _lock:
        _memory[memory_key] = found
        while len(_memory) > MEMORY_MAX:
            _memory.popitem(last=False)
    return found


def key_components(description: str, strategy: str, wide: bool, target: ptxmod.GpuTarget
                   ) -> dict[str, str]:
    """The key's inputs (``KEY_COMPONENTS``), each a string."""
    if not _pipeline:
        _pipeline.append(sources_digest(PIPELINE_PACKAGES))
    search = [("TRACEARRAY_LIBDEVICE", config.libdevice_path() or "")]
    search += config.cuda_toolkit_roots()
    return {
        "kernel": description,
        "strategy": strategy,
        "wide": str(bool(wide)),
        "target": f"{target.arch} {target.features}",
        "ptx_options": repr(sorted(ptxmod.PTX_OPTIONS.items())) + f" {ptxmod.TRIPLE} "
                       f"{ptxmod.PIPELINE_REVISION}",
        "llvm": llvm_identity(),
        "libdevice_search": repr(search),
        "tracearray": tracearray_version(),
        "pipeline": _pipeline[0],
    }


# ------------------------------------------------------------------------------ the disk

def _disk_cache() -> ObjectCache | None:
    return ptxmod.subfolder_cache("gpukernel")


def _payload(kernel: LoweredKernel, ir_text: str) -> bytes:
    uses_libdevice = "@__nv_" in ir_text or '@"__nv_' in ir_text
    header = {"facts": kernel.facts,
              "ir_sha256": hashlib.sha256(ir_text.encode()).hexdigest(),
              "libdevice": _libdevice_record() if uses_libdevice else None}
    return PAYLOAD_MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + \
        kernel.ptx.encode()


def _libdevice_record() -> dict:
    path, size, mtime_ns = ptxmod.file_identity(str(ptxmod.find_libdevice()))
    return {"path": path, "size": size, "mtime_ns": mtime_ns,
            "sha256": ptxmod._libdevice_digest()}


def _from_disk(cache: ObjectCache, key: str, record: bytes, target: ptxmod.GpuTarget,
               make_ir: Callable[[], str]) -> LoweredKernel | None:
    payload = cache.load(key, record)
    if payload is None:
        return None
    kernel, why = _parse(payload, target)
    if kernel is None:
        cache.refuse(key, why)
        return None
    header, ptx = kernel
    if config.check_kernel_keys():
        ir_text = make_ir()
        if hashlib.sha256(ir_text.encode()).hexdigest() != header["ir_sha256"]:
            from ..cpu.codecache import KernelKeyMismatch
            raise KernelKeyMismatch(
                f"tracearray: the GPU kernel key {key[:16]}... found PTX made from other LLVM "
                f"IR than this kernel's (a bug of tracearray's kernel description: please "
                f"report it with this kernel's IR, TRACEARRAY_DEBUG=6):\n{ir_text[:2000]}")
    config.log(config.COMPILES, "gpu kernel: loaded %s from %s", key[:12], cache.folder)
    return LoweredKernel(ptx, header["facts"], make_ir)


def _parse(payload: bytes, target: ptxmod.GpuTarget) -> tuple[tuple[dict, str] | None, str]:
    """(header, PTX) of an entry, or None and why it is refused."""
    if not payload.startswith(PAYLOAD_MAGIC):
        return None, "not a GPU kernel entry"
    line, sep, body = payload[len(PAYLOAD_MAGIC):].partition(b"\n")
    try:
        header = json.loads(line) if sep else None
        ptx = body.decode()
    except (ValueError, UnicodeDecodeError):
        return None, "a damaged GPU kernel entry"
    facts = header.get("facts") if isinstance(header, dict) else None
    if not (isinstance(facts, dict) and set(facts) == set(FACTS)
            and all(type(v) is int and v >= 0 for v in facts.values())
            and isinstance(header.get("ir_sha256"), str)):
        return None, "a damaged GPU kernel entry"
    start = ptx[:4096]
    if not (".version" in start and f".target {target.arch}" in start
            and ptx.rstrip().endswith("}")):
        return None, f"not PTX for {target.arch}"
    lib = header.get("libdevice")
    if lib is not None:
        try:
            same = ptxmod.file_identity(lib["path"]) == [lib["path"], lib["size"],
                                                         lib["mtime_ns"]]
        except (OSError, TypeError, KeyError):
            same = False
        if not same:
            return None, "made with a libdevice that has changed or moved"
    return (header, ptx), ""


def clear_memory() -> None:
    """Forget the kernels lowered in this process (tests)."""
    with _lock:
        _memory.clear()
