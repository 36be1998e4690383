"""Host JIT: LLVM IR text -> optimised machine code (llvmlite MCJIT).

One ``CpuJit`` per process (``get_jit()``), created on first use so that
importing tracearray does not load or initialise LLVM.  Every module goes
through the same pipeline, shared by ``compile``, ``asm`` and
``optimized_ir``:

1. ``mathlib.apply_vector_abi`` attaches libmvec vector variants to libm
   declarations (text rewrite, see ``tracearray.cpu.mathlib``);
2. parse into an LLVM context of the module's own (llvmlite's global context is
   not thread safe and other backends use it; one context per module is freed
   with it, where a shared one kept every module's types and constants), set the
   host triple and data layout, verify - bad IR raises ``JitError`` with an
   excerpt instead of reaching the code generator, where LLVM errors abort the
   process;
3. O3 with loop and SLP vectorisation (the tuning-option default leaves SLP
   off);
4. MCJIT, one engine per module.

Machine code is freed when nothing uses it: ``load_module`` returns a
``NativeModule`` that holds its engine, the in-memory cache holds engines
weakly, and an engine no ``NativeModule`` refers to is closed (its code pages
unmapped, about 0.9 MB per kernel). ``compile`` (addresses only, for callers
that keep no handle) pins its engine for the life of the JIT.

The CPU runtime does not call ``load_module``: its kernels go through ``codecache`` (a key
computed without the IR, objects from ``emit_object`` loaded by ``loader``, no LLVM on a
warm start). ``load_module``/``compile`` serve callers with module text of their own.

Caches (ARCHITECTURE.md decision 7)
-----------------------------------
``compile`` looks a module up by ``object_key``: sha256 over every input that
changes the machine code - the module text after step 1, host triple, data
layout, CPU name and features, vector-math variants, ``CODEGEN_OPTIONS``, the
llvmlite, LLVM and tracearray versions, and a digest of this file (editable
installs keep one version while the pipeline below changes).  Then:

- in memory: the engine built for that key earlier in this process, while
  something still uses it;
- on disk (``tracearray.diskcache``, folder ``config.cache_dir()/cpu``):
  the relocatable object MCJIT produced for that key in an earlier process,
  stored with the full key (every component's text, compared on load) and
  checked by ``elf.check_object`` before LLVM sees it (a malformed object
  would crash LLVM's loader).  It is loaded into an engine built on an empty
  module (``add_object_file``), so neither parsing, optimisation nor code
  generation runs again; external symbols (libm, libmvec) resolve at load time
  as for a fresh compile.  Hosts whose objects ``elf`` cannot check (not
  x86-64 ELF) read nothing from the disk;
- otherwise steps 2-4, with MCJIT's object-cache hook capturing the object it
  emits, which is then written to disk.

``CpuJit.stats`` counts memory hits, disk hits and compiles.  Disk failures
never fail a compile (see ``diskcache``).  All LLVM work happens under one
lock, so every method may be called from any thread; a fork waits for that lock
(``tracearray.forksafe``), so a child forked while another thread compiles
starts with LLVM idle and compiles.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping

from .. import config, forksafe
from ..diskcache import ObjectCache, key_record, record_key, tracearray_version
from . import elf, mathlib
# (in options.py, which the kernel cache imports without this module: re-exported here)
from .options import CODEGEN_OPTIONS, PROCESS_STATS, JitError, JitStats  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    import llvmlite.binding as llvm_binding



_init_lock = threading.Lock()
_llvm_module = None
# Fork ranks (outer locks first, as the code nests them): get_jit's lock, then a JIT's own
# lock, then LLVM's one-time initialisation.
_RANK_GET_JIT, _RANK_JIT, _RANK_INIT = 0, 10, 30
forksafe.wait_at_fork(sys.modules[__name__], "_init_lock", _RANK_INIT)


def _llvm() -> "llvm_binding":
    """llvmlite.binding with the native target initialised (once, lazily)."""
    global _llvm_module
    with _init_lock:
        if _llvm_module is None:
            import llvmlite.binding as llvm
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _register_runtime_helpers(llvm)
            _llvm_module = llvm
        return _llvm_module


# Conversions the x86 backend may emit as libcalls (no instruction converts double <-> half
# without AVX512-FP16; e.g. copysign(half, fptrunc(fptrunc(double))) takes the sign from the
# double, which the backend rounds to half with __truncdfhf2). MCJIT resolves them from the
# process's symbols, where they are not: an unresolved call jumped to address 0 (soak seed
# cpu-2026-12-01-d, program 7456). libgcc provides them with the _Float16 ABI LLVM uses.
_HALF_HELPERS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2", "__extendhfdf2",
                 "__truncxfhf2", "__extendhfxf2")


def _register_runtime_helpers(llvm: "llvm_binding") -> None:
    import ctypes
    missing = [s for s in _HALF_HELPERS if not llvm.address_of_symbol(s)]
    if not missing:
        return
    for name in ("libgcc_s.so.1", "libgcc_s.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        for sym in missing:
            fn = getattr(lib, sym, None)
            if fn is not None:
                llvm.add_symbol(sym, ctypes.cast(fn, ctypes.c_void_p).value)
        return


def _excerpt(text: str, message: str, context: int = 3) -> str:
    """The IR lines around the first 'line:col' position in an LLVM message."""
    m = re.search(r":(\d+):\d+:", message)
    lines = text.splitlines()
    if m:
        line = int(m.group(1))
        lo, hi = max(1, line - context), min(len(lines), line + context)
    else:  # verifier messages quote the bad instruction instead
        quoted = [ln.strip() for ln in message.splitlines()[1:] if ln.strip()]
        idx = next((i for i, ln in enumerate(lines) if quoted and quoted[0] in ln), None)
        if idx is None:
            return "\n".join(lines[:2 * context + 1])
        line = idx + 1
        lo, hi = max(1, line - context), min(len(lines), line + context)
    return "\n".join(f"{'>' if i == line else ' '}{i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1))


class _Engine:
    """An MCJIT engine plus the LLVM context its module lives in.

    Disposing the context first would free the module under the engine, so the
    context is closed by ``close`` after the engine, and is held until then in
    ``_CONTEXTS``, outside any reference cycle the engine may be part of (the
    garbage collector finalizes a cycle's objects in no particular order: a
    context finalized first crashed in the engine's dispose). ``close`` runs
    under the JIT's lock (``lock``): the last reference may go in any thread, and
    LLVM must not run two operations at once.
    """

    def __init__(self, engine, context, lock) -> None:
        self.engine = engine
        self._lock = lock
        _CONTEXTS[id(self)] = context

    def close(self) -> None:
        """Free the machine code now (the engine must not be used afterwards)."""
        with self._lock:
            if self.engine is not None:
                self.engine.close()
                self.engine = None
                _CONTEXTS.pop(id(self)).close()

    # ``sys.is_finalizing`` is bound here: at interpreter exit module globals (``sys``) may
    # already be None when the last engines are collected, which printed an ignored
    # AttributeError per engine.
    def __del__(self, _is_finalizing=sys.is_finalizing) -> None:
        if not _is_finalizing():  # at exit the process takes everything down anyway
            self.close()


_CONTEXTS: dict[int, object] = {}   # id(_Engine) -> its LLVM context, until it is closed


@dataclass(frozen=True)
class NativeModule:
    """Compiled functions of one module: their addresses, valid while this object lives
    (it holds the engine whose code they point into)."""

    addresses: Mapping[str, int]
    engine: _Engine
    # Where the machine code came from: "memory" (an engine alive in this process), "disk"
    # (an object loaded from the disk cache) or "compiled"; ``disk_miss`` says whether the
    # disk cache was looked up without finding a usable entry (so a compile followed).
    origin: str = "memory"
    disk_miss: bool = False



# The inputs of ``object_key``, in hashing order.
KEY_COMPONENTS = ("module", "triple", "data_layout", "cpu", "features", "vector_variants",
                  "codegen_options", "llvmlite", "llvm", "tracearray", "pipeline")


def object_key(components: Mapping[str, str]) -> str:
    """sha256 (hex) over exactly the ``KEY_COMPONENTS``, each a string.

    Each value is length-prefixed, so no two different component tuples hash the same text.
    """
    return record_key(key_record(components, KEY_COMPONENTS, "object_key"))


def _pipeline_digest() -> str:
    """sha256 of this file: the optimisation pipeline is code, and a dev install keeps its version."""
    try:
        with open(__file__, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:  # pragma: no cover - e.g. run from a zip without sources
        return "unavailable"



_FROM_ENV = object()   # CpuJit(cache_dir=...) default: config.cache_dir() at each memory miss


def host_features(llvm) -> str:
    """LLVM's host feature string, with 512-bit vectors preferred wherever AVX-512 is there.
    LLVM tunes Intel's AVX-512 processors (Skylake-X to Emerald Rapids) for 256-bit vectors
    and AMD's Zen 4 for 512-bit ones; a float32 sum's block then had 32 partial sums of 32
    terms instead of 64 of 16 (``codegen/summation.py``), 4 ulps off where NumPy's 8
    accumulators of 16 terms were exact (tests/test_accuracy.py on an Emerald Rapids host).
    One vector width per instruction set: the same partial sums, and errors, on both."""
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features.split(","):
        features += ",-prefer-256-bit"
    return features


class CpuJit:
    """Optimising JIT for the host CPU.

    ``vector_math`` enables libmvec vector variants (default: on unless
    ``TRACEARRAY_VECTOR_MATH=0``).  ``cache_dir`` is the disk cache's root folder (objects
    go to its ``cpu/`` subfolder), ``None`` for no disk cache; by default
    ``config.cache_dir()`` is read at each memory miss, so ``TRACEARRAY_CACHE_DIR`` set
    after start-up applies to kernels compiled afterwards.
    """

    def __init__(self, vector_math: bool | None = None, cache_dir: str | None | object = _FROM_ENV,
                 stats: JitStats | None = None) -> None:
        llvm = _llvm()
        import llvmlite
        self.triple: str = llvm.get_process_triple()
        self.cpu_name: str = llvm.get_host_cpu_name()
        self.features: str = host_features(llvm)
        self._target = llvm.Target.from_triple(self.triple)
        self._tm = self._target_machine()
        self.data_layout: str = str(self._tm.target_data)
        use_vector = config.vector_math() if vector_math is None else vector_math
        self.vector_math_setting: bool = use_vector
        self.vector_variants = mathlib.host_vector_variants(self.features, self.triple) if use_vector else {}
        self._lock = threading.RLock()
        forksafe.wait_at_fork(self, "_lock", _RANK_JIT)
        # key -> engine, while a NativeModule uses it (see the module docstring)
        self._engines: "weakref.WeakValueDictionary[str, _Engine]" = \
            weakref.WeakValueDictionary()
        self._pinned: dict[str, _Engine] = {}   # engines of ``compile``: never freed
        self._object_tm = None
        self._cache_dir = cache_dir
        self._disk_caches: dict[str, ObjectCache] = {}
        self._machine = elf.host_machine(self.triple)    # None: objects are never read from disk
        # get_jit's JIT shares the process's counters with the kernel cache (codecache.py)
        self.stats = JitStats() if stats is None else stats
        # Everything in the key but the module text; fixed for the life of the JIT.
        self._key_base: dict[str, str] = {
            "triple": self.triple,
            "data_layout": self.data_layout,
            "cpu": self.cpu_name,
            "features": self.features,
            "vector_variants": repr(sorted(self.vector_variants.items())),
            "codegen_options": repr(sorted(CODEGEN_OPTIONS.items())),
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info)),
            "tracearray": tracearray_version(),
            "pipeline": _pipeline_digest(),
        }

    @property
    def modules_compiled(self) -> int:
        """Engines built in this process (memory misses: compiles plus disk hits).

        Tests assert that calling with new sizes builds nothing new; a disk hit still counts,
        so those assertions keep their meaning whatever the disk cache holds.
        """
        return self.stats.built

    @property
    def has_vector_math(self) -> bool:
        return bool(self.vector_variants)

    def _target_machine(self):
        # A fresh one per engine: MCJIT takes ownership of its target machine.
        return self._target.create_target_machine(
            cpu=self.cpu_name, features=self.features, opt=CODEGEN_OPTIONS["opt"],
            reloc=CODEGEN_OPTIONS["reloc"], codemodel=CODEGEN_OPTIONS["codemodel"], jit=True)

    def emit_object(self, module_text: str) -> bytes:
        """Steps 1-3, then the relocatable object MCJIT would make of the module (its target
        machine: the large code model), for ``loader.load_object``."""
        with self._lock:
            start = time.perf_counter()
            text = mathlib.apply_vector_abi(module_text, self.vector_variants)
            context = _llvm().create_context()
            try:
                mod = self._parse_and_optimize(text, context)
                try:
                    obj = self._object_target_machine().emit_object(mod)
                finally:
                    mod.close()
            finally:
                context.close()
            config.log(config.COMPILES, "cpu jit: compiled an object in %.1f ms",
                       1e3 * (time.perf_counter() - start))
            return obj

    def _object_target_machine(self):
        if self._object_tm is None:
            self._object_tm = self._target_machine()
        return self._object_tm

    def engine_addresses(self, engine: _Engine, names: list[str]) -> dict[str, int] | None:
        """The addresses of ``names`` in ``engine``, or None if one is missing."""
        with self._lock:
            return self._addresses(engine, names)

    def key_components(self, module_text: str) -> dict[str, str]:
        """The ``object_key`` inputs for a module (its text after the vector-ABI rewrite)."""
        return {"module": mathlib.apply_vector_abi(module_text, self.vector_variants), **self._key_base}

    def cache_key(self, module_text: str) -> str:
        """Key of the module in the memory and disk caches."""
        return object_key(self.key_components(module_text))

    @contextlib.contextmanager
    def _optimized_module(self, module_text: str, target_machine=None) -> Iterator[object]:
        """Steps 1-3 of the pipeline, the module freed (with its context) afterwards; the
        caller holds the lock."""
        text = mathlib.apply_vector_abi(module_text, self.vector_variants)
        context = _llvm().create_context()
        try:
            mod = self._parse_and_optimize(text, context, target_machine)
            try:
                yield mod
            finally:
                mod.close()
        finally:
            context.close()

    def _parse_and_optimize(self, text: str, context, target_machine=None):
        """Steps 2-3 on text already through step 1, into ``context`` (which the module
        keeps alive), optimised for ``target_machine`` (default: the JIT's)."""
        llvm = _llvm()
        try:
            mod = llvm.parse_assembly(text, context=context)
        except RuntimeError as e:
            raise JitError(f"LLVM could not parse the module: {e}\n{_excerpt(text, str(e))}") from None
        mod.triple = self.triple
        mod.data_layout = self.data_layout
        try:
            mod.verify()
        except RuntimeError as e:
            mod.close()   # before its context: disposing a context frees the modules left in it
            raise JitError(f"LLVM rejected the module: {e}\n{_excerpt(text, str(e))}") from None
        pto = llvm.create_pipeline_tuning_options(speed_level=CODEGEN_OPTIONS["speed_level"])
        pto.loop_vectorization = CODEGEN_OPTIONS["loop_vectorization"]
        pto.slp_vectorization = CODEGEN_OPTIONS["slp_vectorization"]
        pb = llvm.create_pass_builder(target_machine or self._tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod

    def compile(self, module_text: str, names: list[str]) -> dict[str, int]:
        """JIT the module (or reuse a cached one); addresses of ``names``. The engine stays
        for the life of the JIT: callers that keep the code only as long as they use it
        call ``load_module``."""
        with self._lock:
            module = self.load_module(module_text, names)
            self._pinned[self.cache_key(module_text)] = module.engine
            return dict(module.addresses)

    def load_module(self, module_text: str, names: list[str]) -> NativeModule:
        """JIT the module (or reuse an engine built for it that is still in use); the
        machine code is freed once no returned ``NativeModule`` refers to it."""
        with self._lock:
            components = self.key_components(module_text)
            record = key_record(components, KEY_COMPONENTS, "object_key")   # the full key
            key = record_key(record)
            engine = self._engines.get(key)
            origin, disk_miss = "memory", False
            if engine is not None:
                self.stats.memory_hits += 1
            else:
                cache = self._disk_cache()
                engine = self._load(cache, key, record, names) if cache is not None else None
                origin, disk_miss = "disk", False
                if engine is None:
                    engine = self._compile(components["module"], key, cache, record)
                    origin, disk_miss = "compiled", cache is not None
                self._engines[key] = engine
            addresses = self._addresses(engine, names)
            if addresses is None:
                missing = [n for n in names if not engine.engine.get_function_address(n)]
                raise JitError(f"function {missing[0]!r} is not defined by the compiled module")
            return NativeModule(addresses, engine, origin, disk_miss)

    @property
    def live_engines(self) -> int:
        """Modules of machine code alive now: engines in use or pinned by ``compile``, and
        the kernels of the process's kernel cache (``codecache``: loaded objects or
        engines)."""
        from .codecache import live_kernels
        with self._lock:
            return len(self._engines) + live_kernels()

    @staticmethod
    def _addresses(engine: _Engine, names: list[str]) -> dict[str, int] | None:
        addresses = {}
        for name in names:
            addr = engine.engine.get_function_address(name)
            if not addr:
                return None
            addresses[name] = addr
        return addresses

    def _disk_cache(self) -> ObjectCache | None:
        root = config.cache_dir() if self._cache_dir is _FROM_ENV else self._cache_dir
        if not root or self._machine is None:
            return None
        folder = os.path.join(str(root), "cpu")
        cache = self._disk_caches.get(folder)
        if cache is None:
            cache = self._disk_caches[folder] = ObjectCache(folder, config.disk_cache_bound(),
                                                            root=str(root))
        return cache

    def _load(self, cache: ObjectCache, key: str, record: bytes, names: list[str]) -> _Engine | None:
        """An engine running the object cached on disk for ``key``, or None."""
        discarded = cache.counts.discarded
        payload = cache.load(key, record)
        if payload is None:
            if cache.counts.discarded != discarded:     # refused: deleted by the cache
                self._note_discard(key, cache.last_error)
            return None
        start = time.perf_counter()
        try:
            engine = self.load_object(payload, names)
        except (elf.MalformedObject, JitError) as e:
            cache.refuse(key, str(e))
            self._note_discard(key, cache.last_error)
            return None
        self.stats.disk_hits += 1
        config.log(config.COMPILES, "cpu jit: loaded %s from %s (%d bytes, %.1f ms)", key[:12],
                   cache.folder, len(payload), 1e3 * (time.perf_counter() - start))
        return engine

    def load_object(self, payload: bytes, names: list[str]) -> _Engine:
        """An engine running a relocatable object read from the disk; ``elf.MalformedObject``
        or ``JitError`` (naming why) when it may not or cannot be used."""
        if self._machine is None:
            raise elf.MalformedObject(f"objects for {self.triple} are not read from the disk")
        try:    # LLVM's loader trusts the object's structure: a malformed one crashes it
            elf.check_object(payload, self._machine)
        except elf.MalformedObject as e:
            raise elf.MalformedObject(f"not a well-formed object: {e}") from None
        with self._lock:
            llvm = _llvm()
            try:
                context = llvm.create_context()
                empty = llvm.parse_assembly("", context=context)
                empty.triple = self.triple
                empty.data_layout = self.data_layout
                engine = _Engine(llvm.create_mcjit_compiler(empty, self._target_machine()),
                                 context, self._lock)
                engine.engine.add_object_file(llvm.ObjectFileRef.from_data(payload))
                engine.engine.finalize_object()
            except RuntimeError as e:   # LLVM refused it (cannot happen for our own writes)
                raise JitError(f"LLVM could not load the cached object: {e}") from None
            if self._addresses(engine, names) is None:   # a key collision or a foreign file
                raise JitError(f"the cached object lacks one of {names}")
            return engine

    def _note_discard(self, key: str, reason: str | None) -> None:
        """A bad disk entry was deleted; the caller recompiles."""
        self.stats.disk_discarded += 1
        config.log(config.COMPILES, "cpu jit: discarded disk entry %s: %s; recompiling",
                   key[:12], reason)

    def _compile(self, text: str, key: str, cache: ObjectCache | None, record: bytes) -> _Engine:
        """Steps 2-4 on rewritten text; the object goes to ``cache`` when there is one."""
        llvm = _llvm()
        start = time.perf_counter()
        context = llvm.create_context()
        mod = self._parse_and_optimize(text, context)
        engine = _Engine(llvm.create_mcjit_compiler(mod, self._target_machine()), context,
                         self._lock)
        objects: list[bytes] = []
        if cache is not None:
            # MCJIT hands every object it emits to this hook before linking it in memory.
            engine.engine.set_object_cache(lambda _module, buf: objects.append(bytes(buf)))
        engine.engine.finalize_object()
        self.stats.compiles += 1
        written = len(objects) == 1 and cache is not None and cache.store(key, objects[0], record)
        objects.clear()     # the hook's closure lives as long as the engine
        self.stats.disk_writes += written
        config.log(config.COMPILES, "cpu jit: compiled %s in %.1f ms%s", key[:12],
                   1e3 * (time.perf_counter() - start),
                   f", wrote {cache.folder}" if written else "")
        return engine

    def asm(self, module_text: str) -> str:
        """Host assembly of the optimised module."""
        with self._lock, self._optimized_module(module_text) as mod:
            return self._tm.emit_assembly(mod)

    def optimized_ir(self, module_text: str) -> str:
        with self._lock, self._optimized_module(module_text) as mod:
            return str(mod)


_jit: CpuJit | None = None
_jit_lock = threading.Lock()
forksafe.wait_at_fork(sys.modules[__name__], "_jit_lock", _RANK_GET_JIT)


def get_jit() -> CpuJit:
    """The process-wide CpuJit, created on first use."""
    global _jit
    with _jit_lock:
        if _jit is None:
            _jit = CpuJit(stats=PROCESS_STATS)
        return _jit
