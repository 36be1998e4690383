"""The CPU's kernel cache: machine code found by the kernel's description, not by its IR.

``load_kernel(description, names, make_ir)`` returns a kernel's machine code. Its key hashes
the kernel's description (``tile.describe.describe_kernel``: everything the LLVM IR depends on,
no sizes) with the target as ``host.py`` reads it without LLVM, the vector-math setting,
``jit.CODEGEN_OPTIONS``, llvmlite's identity, tracearray's version and the digest of the
code-generating sources. So the IR is generated only when the code must be compiled
(issue 12):

1. **memory**: code loaded in this process for that key, while a kernel still uses it (held
   weakly) - a new input size whose kernels are the same size-generic kernels generates no IR;
2. **disk** (``diskcache.ObjectCache`` in ``config.cache_dir()/cpu``, the same checks as every
   entry: a trusted folder and file, the header, digest and *full key* compared): the kernel's
   relocatable object, structure-checked by ``elf.check_object`` and loaded by ``loader``
   (Python: no LLVM at all);
3. **compile**: ``make_ir()``, optimised and emitted as the same kind of object by LLVM
   (``CpuJit.emit_object``), loaded by ``loader`` like a cached one (one code path), and
   written to the disk.

Where ``loader`` cannot load an object (``CannotLoad``: a relocation type or an external
symbol it does not handle, not seen in our kernels; or the system refused the mapping), MCJIT
loads the same object, as before.
An entry's payload is ``PAYLOAD_MAGIC``, its kind (``O``: a relocatable object), the sha256 of
the IR it was compiled from, then the object. ``TRACEARRAY_CHECK_KERNEL_KEYS=1``
generates the IR on every hit too and raises ``KernelKeyMismatch`` if it is not the IR the code
was compiled from (a description missing something the IR depends on).

Counters go to ``options.PROCESS_STATS`` (``get_jit().stats``): memory hits, disk hits, compiles,
disk writes and discarded entries, whichever path ran. Thread safety: the maps are guarded
by a lock renewed at fork (never held around LLVM or user code); two threads missing the same
key both compile it, and the last one's code is kept (both work).
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .. import config, forksafe
from ..diskcache import ObjectCache, key_record, record_key, tracearray_version
from . import host, loader
from .elf import EM_X86_64, MalformedObject, check_object
from .options import CODEGEN_OPTIONS, PROCESS_STATS, JitError

PAYLOAD_MAGIC = b"TAKCODE1"
_OBJECT = b"O"
_PAYLOAD_HEADER = len(PAYLOAD_MAGIC) + 1 + 32

# The inputs of the kernel key, in hashing order.
KERNEL_KEY_COMPONENTS = ("kernel", "host_cpu", "platform", "llvm", "vector_math",
                         "codegen_options", "tracearray", "pipeline")


class KernelKeyMismatch(RuntimeError):
    """TRACEARRAY_CHECK_KERNEL_KEYS: a kernel's description key found code compiled from other
    IR than the kernel's (the description misses something the IR depends on)."""


class LoadedCode:
    """Machine code of one kernel module: its functions' addresses, valid while this lives
    (it holds the loaded object or MCJIT engine they point into)."""

    def __init__(self, addresses: Mapping[str, int], holder: Any, ir_digest: bytes) -> None:
        self.addresses = dict(addresses)
        self.holder = holder
        self.ir_digest = ir_digest
        self.kind = "loaded" if isinstance(holder, loader.LoadedObject) else "MCJIT"


@dataclass(frozen=True)
class KernelCode:
    """What ``load_kernel`` returns: the code (kept alive by this) and where it came from:
    "memory", "disk" or "compiled"; ``disk_miss``: the disk was asked in vain."""
    code: LoadedCode
    origin: str
    disk_miss: bool = False

    @property
    def addresses(self) -> Mapping[str, int]:
        return self.code.addresses


_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_lock")
_memory: "weakref.WeakValueDictionary[str, LoadedCode]" = weakref.WeakValueDictionary()
_disk_caches: dict[str, ObjectCache] = {}
_key_base: dict[str, str] = {}


def live_kernels() -> int:
    """Kernel modules of the cache alive now (used by a kernel of some executable)."""
    with _lock:
        return len(_memory)


def key_components(description: str) -> dict[str, str]:
    """The kernel key's inputs (``KERNEL_KEY_COMPONENTS``) for a description."""
    return {"kernel": description, **_target_components()}


def _target_components() -> dict[str, str]:
    jit_module = sys.modules.get(f"{__package__}.jit")   # (not imported by a warm process)
    # the setting of the process's JIT, which compiles; before there is one, what it will read
    made = jit_module._jit if jit_module is not None else None
    vector = made.vector_math_setting if made is not None else config.vector_math()
    with _lock:
        base = _key_base.get(str(vector))
    if base is None:
        cpu = host.host_cpu()
        if cpu is None:   # no /proc/cpuinfo: LLVM's own answer (this loads LLVM)
            cpu_jit = get_jit()
            cpu = f"llvm: {cpu_jit.cpu_name} {cpu_jit.features}"
        base = {
            "host_cpu": cpu,
            "platform": host.platform_identity(),
            "llvm": host.llvm_identity(),
            "vector_math": str(vector),
            "codegen_options": repr(sorted(CODEGEN_OPTIONS.items())),
            "tracearray": tracearray_version(),
            "pipeline": host.pipeline_digest(),
        }
        with _lock:
            _key_base[str(vector)] = base
    return dict(base)


def load_kernel(description: str, names: list[str], make_ir: Callable[[], str]) -> KernelCode:
    """The machine code of the kernel ``description`` describes, defining ``names``
    (``make_ir()`` gives its LLVM IR, called only when it must be compiled or checked)."""
    components = key_components(description)
    record = key_record(components, KERNEL_KEY_COMPONENTS, "kernel_key")
    key = record_key(record)
    check = config.check_kernel_keys()
    with _lock:
        code = _memory.get(key)
    if code is not None:
        PROCESS_STATS.memory_hits += 1
        if check:
            _check_ir(code, make_ir, key)
        return KernelCode(code, "memory")
    cache = _disk_cache()
    if cache is not None:
        code = _from_disk(cache, key, record, names)
        if code is not None:
            if check:
                _check_ir(code, make_ir, key)
            with _lock:
                _memory[key] = code
            return KernelCode(code, "disk")
    code = _compile(make_ir(), names, key, record, cache)
    with _lock:
        _memory[key] = code
    return KernelCode(code, "compiled", disk_miss=cache is not None)


def _check_ir(code: LoadedCode, make_ir: Callable[[], str], key: str) -> None:
    text = make_ir()
    if hashlib.sha256(text.encode()).digest() != code.ir_digest:
        raise KernelKeyMismatch(
            f"tracearray: the kernel key {key[:16]}... found code compiled from other LLVM IR "
            f"than this kernel's (a bug of tracearray's kernel description: please report "
            f"it with this kernel's IR, TRACEARRAY_DEBUG=6):\n{text[:2000]}")


# ------------------------------------------------------------------------------ the disk

def _disk_cache() -> ObjectCache | None:
    root = config.cache_dir()
    if not root or not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"):
        return None   # (elf.py and loader.py know x86-64 ELF only)
    folder = os.path.join(str(root), "cpu")
    with _lock:
        cache = _disk_caches.get(folder)
        if cache is None:
            cache = _disk_caches[folder] = ObjectCache(folder, config.disk_cache_bound(),
                                                       root=str(root))
        return cache


def _from_disk(cache: ObjectCache, key: str, record: bytes, names: list[str]
               ) -> LoadedCode | None:
    start = time.perf_counter()
    discarded = cache.counts.discarded
    payload = cache.load(key, record)
    if payload is None:
        if cache.counts.discarded != discarded:
            _note_discard(key, cache.last_error)
        return None
    try:
        code = _load_payload(payload, names)
    except (MalformedObject, JitError, OSError) as e:
        cache.refuse(key, str(e))
        _note_discard(key, cache.last_error)
        return None
    PROCESS_STATS.disk_hits += 1
    config.log(config.COMPILES, "cpu kernel cache: loaded %s (%s) from %s in %.2f ms",
               key[:12], code.kind, cache.folder, 1e3 * (time.perf_counter() - start))
    return code


def _load_payload(payload: bytes, names: list[str]) -> LoadedCode:
    """The code of a payload read from the disk (its entry's checks passed); raises
    ``MalformedObject`` (or ``JitError``, ``OSError``) naming why it cannot be used."""
    if len(payload) < _PAYLOAD_HEADER or not payload.startswith(PAYLOAD_MAGIC):
        raise MalformedObject("not a kernel entry of this format")
    kind = payload[len(PAYLOAD_MAGIC):len(PAYLOAD_MAGIC) + 1]
    if kind != _OBJECT:
        raise MalformedObject(f"unknown kind {kind!r}")
    digest = payload[len(PAYLOAD_MAGIC) + 1:_PAYLOAD_HEADER]
    return _load_object(payload[_PAYLOAD_HEADER:], names, digest)


def _load_object(data: bytes, names: list[str], digest: bytes) -> LoadedCode:
    """Load an object: its structure checked, then ``loader``; MCJIT where it cannot."""
    try:    # the loader (like MCJIT's) trusts the structure: a malformed object would crash it
        check_object(data, EM_X86_64)
    except MalformedObject as e:
        raise MalformedObject(f"not a well-formed object: {e}") from None
    try:
        obj = loader.load_object(data)
    except (loader.CannotLoad, OSError) as e:   # (OSError: the system refused the mapping)
        config.log(config.COMPILES, "cpu kernel cache: %s; loading it with MCJIT", e)
        cpu_jit = get_jit()
        engine = cpu_jit.load_object(data, names)
        return LoadedCode(cpu_jit.engine_addresses(engine, names), engine, digest)
    addresses = {}
    for name in names:
        addr = obj.address(name)
        if not addr:
            obj.close()
            raise MalformedObject(f"the object does not define {name!r}")
        addresses[name] = addr
    return LoadedCode(addresses, obj, digest)


def _note_discard(key: str, reason: str | None) -> None:
    PROCESS_STATS.disk_discarded += 1
    config.log(config.COMPILES, "cpu kernel cache: discarded disk entry %s: %s; recompiling",
               key[:12], reason)


# ---------------------------------------------------------------------------- compiling

def _compile(ir_text: str, names: list[str], key: str, record: bytes,
             cache: ObjectCache | None) -> LoadedCode:
    start = time.perf_counter()
    digest = hashlib.sha256(ir_text.encode()).digest()
    data = get_jit().emit_object(ir_text)
    try:
        code = _load_object(data, names, digest)
    except MalformedObject as e:   # (LLVM's own object: cannot happen)
        raise JitError(f"the compiled kernel cannot be loaded: {e}") from None
    PROCESS_STATS.compiles += 1
    written = cache is not None and \
        cache.store(key, PAYLOAD_MAGIC + _OBJECT + digest + data, record)
    PROCESS_STATS.disk_writes += bool(written)
    config.log(config.COMPILES, "cpu kernel cache: compiled %s (%s) in %.1f ms%s", key[:12],
               code.kind, 1e3 * (time.perf_counter() - start),
               f", wrote {cache.folder}" if written else "")
    return code


def get_jit():   # noqa: ANN201 -- jit.CpuJit
    """The process's LLVM JIT, imported and made when first needed (to compile)."""
    from .jit import get_jit as process_jit
    return process_jit()
