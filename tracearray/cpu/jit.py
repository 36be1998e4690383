"""Host JIT: LLVM IR text -> optimised machine code (llvmlite MCJIT).

One ``CpuJit`` per process (``get_jit()``), created on first use so that
importing tracearray does not load or initialise LLVM.  Every module goes
through the same pipeline, shared by ``compile``, ``asm`` and
``optimized_ir``:

1. ``mathlib.apply_vector_abi`` attaches libmvec vector variants to libm
   declarations (text rewrite, see ``tracearray.cpu.mathlib``);
2. parse into a context private to the JIT (llvmlite's global context is not
   thread safe and other backends use it), set the host triple and data
   layout, verify - bad IR raises ``JitError`` with an excerpt instead of
   reaching the code generator, where LLVM errors abort the process;
3. O3 with loop and SLP vectorisation (the tuning-option default leaves SLP
   off);
4. MCJIT, one engine per module, kept alive for the life of the process.

Compiled modules are cached in memory keyed by sha256 of the text, the host
CPU, its features and the llvmlite version.  All LLVM work happens under one
lock, so every method may be called from any thread.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
from typing import TYPE_CHECKING

from . import mathlib

if TYPE_CHECKING:  # pragma: no cover
    import llvmlite.binding as llvm_binding


class JitError(RuntimeError):
    """LLVM rejected a module (parse or verification error)."""


_init_lock = threading.Lock()
_llvm_module = None


def _llvm() -> "llvm_binding":
    """llvmlite.binding with the native target initialised (once, lazily)."""
    global _llvm_module
    with _init_lock:
        if _llvm_module is None:
            import llvmlite.binding as llvm
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _llvm_module = llvm
        return _llvm_module


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

    Disposing the context first would free the module under the engine;
    ``__del__`` closes the engine before the context reference is dropped.
    """

    def __init__(self, engine, context) -> None:
        self.engine = engine
        self.context = context

    # ``sys.is_finalizing`` is bound here: at interpreter exit module globals (``sys``) may
    # already be None when the last engines are collected, which printed an ignored
    # AttributeError per engine.
    def __del__(self, _is_finalizing=sys.is_finalizing) -> None:
        if not _is_finalizing():  # at exit the process takes everything down anyway
            self.engine.close()


def _env_vector_math() -> bool:
    return os.environ.get("TRACEARRAY_VECTOR_MATH", "1").strip().lower() not in ("0", "false", "no", "off")


class CpuJit:
    """Optimising JIT for the host CPU.

    ``vector_math`` enables libmvec vector variants (default: on unless
    ``TRACEARRAY_VECTOR_MATH=0``).
    """

    def __init__(self, vector_math: bool | None = None) -> None:
        llvm = _llvm()
        import llvmlite
        self.triple: str = llvm.get_process_triple()
        self.cpu_name: str = llvm.get_host_cpu_name()
        self.features: str = llvm.get_host_cpu_features().flatten()
        self._target = llvm.Target.from_triple(self.triple)
        self._tm = self._target_machine()
        self.data_layout: str = str(self._tm.target_data)
        use_vector = _env_vector_math() if vector_math is None else vector_math
        self.vector_variants = mathlib.host_vector_variants(self.features, self.triple) if use_vector else {}
        self._context = llvm.create_context()
        self._lock = threading.RLock()
        self._engines: dict[str, _Engine] = {}
        # Modules compiled to machine code so far (cache misses of ``compile``): tests assert
        # that calling with new sizes compiles nothing new.
        self.modules_compiled = 0
        self._key_salt = f"\0{self.cpu_name}\0{self.features}\0{llvmlite.__version__}\0{sorted(self.vector_variants.items())}"

    @property
    def has_vector_math(self) -> bool:
        return bool(self.vector_variants)

    def _target_machine(self):
        # A fresh one per engine: MCJIT takes ownership of its target machine.
        return self._target.create_target_machine(
            cpu=self.cpu_name, features=self.features, opt=3, jit=True, codemodel="jitdefault")

    def cache_key(self, module_text: str) -> str:
        return hashlib.sha256((module_text + self._key_salt).encode()).hexdigest()

    def _optimized_module(self, module_text: str):
        """Steps 1-3 of the pipeline; the caller holds the lock."""
        llvm = _llvm()
        text = mathlib.apply_vector_abi(module_text, self.vector_variants)
        try:
            mod = llvm.parse_assembly(text, context=self._context)
        except RuntimeError as e:
            raise JitError(f"LLVM could not parse the module: {e}\n{_excerpt(text, str(e))}") from None
        mod.triple = self.triple
        mod.data_layout = self.data_layout
        try:
            mod.verify()
        except RuntimeError as e:
            raise JitError(f"LLVM rejected the module: {e}\n{_excerpt(text, str(e))}") from None
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self._tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod

    def compile(self, module_text: str, names: list[str]) -> dict[str, int]:
        """JIT the module (or reuse the cached one); addresses of ``names``."""
        key = self.cache_key(module_text)
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                llvm = _llvm()
                mod = self._optimized_module(module_text)
                engine = _Engine(llvm.create_mcjit_compiler(mod, self._target_machine()), self._context)
                engine.engine.finalize_object()
                self._engines[key] = engine
                self.modules_compiled += 1
            addresses = {}
            for name in names:
                addr = engine.engine.get_function_address(name)
                if not addr:
                    raise JitError(f"function {name!r} is not defined by the compiled module")
                addresses[name] = addr
            return addresses

    def asm(self, module_text: str) -> str:
        """Host assembly of the optimised module."""
        with self._lock:
            return self._tm.emit_assembly(self._optimized_module(module_text))

    def optimized_ir(self, module_text: str) -> str:
        with self._lock:
            return str(self._optimized_module(module_text))


_jit: CpuJit | None = None
_jit_lock = threading.Lock()


def get_jit() -> CpuJit:
    """The process-wide CpuJit, created on first use."""
    global _jit
    with _jit_lock:
        if _jit is None:
            _jit = CpuJit()
        return _jit
