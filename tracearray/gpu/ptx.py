"""LLVM IR -> PTX through llvmlite's NVPTX target; libdevice; ptxas / nvJitLink.

Everything here needs only llvmlite (plus libdevice for kernels that call math functions):
PTX can be produced on a machine without a GPU or a driver.

Pipeline of ``compile_ptx`` (one lock; LLVM work in a context private to this module):

1. parse the module, set the NVPTX triple and data layout, ``verify()``;
2. ``check_lowerable``: every function the module declares must be an NVPTX intrinsic, a
   libdevice function or an LLVM intrinsic known to lower on NVPTX (``LOWERABLE``). The NVPTX
   backend *aborts the process* on an op it cannot select (``llvm.exp.f32``, ``llvm.sin.f32``
   without ``afn``, an unresolved ``expf``), so anything else raises ``GpuCodegenError`` here;
3. libdevice is linked only when the module calls ``__nv_*``; its functions are internalised
   and GlobalDCE drops the ~570 unused ones before O3 (about 60 ms instead of 1.2 s);
4. O3 (NVVMReflect runs inside; ``nvvm-reflect-ftz`` is 0: no flush-to-zero, as NumPy);
5. ``emit_assembly``.

PTX is cached in memory and on disk (``tracearray.diskcache``, folder
``config.cache_dir()/ptx``: atomic writes, a digest, the folder's ownership and mode checked),
keyed by ``PTX_KEY_COMPONENTS``: the IR text, the triple, the target (architecture and PTX
version), ``PTX_OPTIONS``, the llvmlite, LLVM, libdevice (content digest, when the kernel calls
it) and tracearray identities, ``PIPELINE_REVISION`` and a digest of this file (the pipeline
and the ptxas workarounds are code; an editable install keeps its version).  The full key is
stored in each entry and compared on load, and a loaded entry must be UTF-8 PTX for the
target's architecture; anything else is refused with a warning and compiled again.

Cubins (``cubin_for``: PTX assembled by nvJitLink or ptxas, which the driver loads without
its JIT) are cached the same way in ``config.cache_dir()/cubin``, keyed by
``CUBIN_KEY_COMPONENTS`` (the PTX, the architecture, the assembler's identity, its options,
tracearray's); a loaded entry must be an ELF64 file for ``EM_CUDA``. A new process then loads
its kernels without running an assembler.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .. import config, forksafe
from ..diskcache import ObjectCache, key_record, llvm_identity, record_key, tracearray_version
from ..errors import TracearrayError

TRIPLE = "nvptx64-nvidia-cuda"

# The lowest PTX ISA version LLVM accepts for each architecture (its own default), and the
# highest version each CUDA driver's JIT accepts (driver version // 10 -> PTX ISA x10).
ARCH_MIN_PTX = {70: 60, 72: 61, 75: 63, 80: 70, 86: 71, 87: 74, 89: 78, 90: 78, 100: 86,
                101: 86, 120: 87}
DRIVER_MAX_PTX = {(11, 0): 70, (11, 1): 71, (11, 2): 72, (11, 3): 73, (11, 4): 74, (11, 5): 75,
                  (11, 6): 76, (11, 7): 77, (11, 8): 78, (12, 0): 80, (12, 1): 81, (12, 2): 82,
                  (12, 3): 83, (12, 4): 84, (12, 5): 85, (12, 6): 85, (12, 8): 87, (12, 9): 88,
                  (13, 0): 90}
LLVM_MAX_PTX = 90          # LLVM 22 ignores +ptx91 and later
PREFERRED_PTX = 80         # TOOLCHAIN.md: PTX 8.0 for sm_90 (loads on R525+ drivers)


class GpuCodegenError(TracearrayError):
    """The GPU code generator refused or failed to build a kernel."""


class LibdeviceNotFoundError(GpuCodegenError):
    pass


class PtxasError(GpuCodegenError):
    pass


@dataclass(frozen=True)
class GpuTarget:
    """What PTX is generated for: ``sm_XY`` and the PTX ISA version (x10, e.g. 80 = 8.0)."""
    cc: int = 90
    ptx_version: int = PREFERRED_PTX

    @property
    def arch(self) -> str:
        return f"sm_{self.cc}"

    @property
    def features(self) -> str:
        return f"+ptx{self.ptx_version}"

    def __str__(self) -> str:
        return f"{self.arch}/ptx{self.ptx_version}"


DEFAULT_TARGET = GpuTarget()


def target_for(major: int, minor: int, driver_version: int | None = None) -> GpuTarget:
    """The target for a device of compute capability ``major.minor``: the highest
    architecture LLVM knows that is not newer than the device (PTX is forward compatible),
    and the preferred PTX version capped to what the driver's JIT accepts."""
    cc = major * 10 + minor
    known = [a for a in sorted(ARCH_MIN_PTX) if a <= cc]
    if not known:
        raise GpuCodegenError(f"compute capability {major}.{minor} is older than sm_70, the "
                              f"oldest architecture tracearray generates code for")
    arch = known[-1]
    want = max(ARCH_MIN_PTX[arch], min(PREFERRED_PTX, LLVM_MAX_PTX))
    if driver_version is not None:
        dmaj, dmin = driver_version // 1000, (driver_version % 1000) // 10
        caps = [v for (ma, mi), v in DRIVER_MAX_PTX.items() if (ma, mi) <= (dmaj, dmin)]
        cap = max(caps) if caps else 60
        if (dmaj, dmin) > max(DRIVER_MAX_PTX):
            cap = LLVM_MAX_PTX
        want = min(want, cap)
        if want < ARCH_MIN_PTX[arch]:
            raise GpuCodegenError(
                f"the CUDA driver ({dmaj}.{dmin}) is too old for sm_{arch}: it accepts PTX "
                f"{cap / 10:.1f}, the architecture needs {ARCH_MIN_PTX[arch] / 10:.1f}; "
                f"update the NVIDIA driver")
    return GpuTarget(arch, want)


# ------------------------------------------------------------------------------------------
# What the NVPTX backend lowers (checked in a child process by tests/test_gpu_ptx.py)
# ------------------------------------------------------------------------------------------

# LLVM intrinsics we may hand to NVPTX, by base name (type suffixes stripped). Everything
# transcendental goes to libdevice instead.
LOWERABLE = frozenset({
    "fabs", "floor", "ceil", "trunc", "rint", "nearbyint", "round", "roundeven", "sqrt",
    "copysign", "maximum", "minimum", "maxnum", "minnum", "maximumnum", "minimumnum", "fma",
    "fmuladd", "fptosi.sat", "fptoui.sat", "smax", "smin", "umax", "umin", "abs", "ctpop",
    "ctlz", "cttz", "bswap", "lifetime.start", "lifetime.end", "assume", "expect",
})
_TYPE_SUFFIX = re.compile(r"(\.(f16|f32|f64|bf16|i\d+|p\d+|p\d+i8|v\d+[a-z]\d+))+$")


def check_lowerable(mod) -> None:
    """Raise GpuCodegenError for any declared function NVPTX might not lower."""
    bad = []
    for fn in mod.functions:
        if not fn.is_declaration:
            continue
        name = fn.name
        if name.startswith("llvm.nvvm.") or name.startswith("__nv_"):
            continue
        if name.startswith("llvm."):
            base = _TYPE_SUFFIX.sub("", name[5:])
            if base in LOWERABLE:
                continue
        bad.append(name)
    if bad:
        raise GpuCodegenError(
            f"the kernel calls {', '.join(sorted(bad))}, which the NVPTX backend cannot lower "
            f"(LLVM would abort the process); math functions must go through libdevice "
            f"(tracearray.gpu.mathlib.GpuMath)")


# ------------------------------------------------------------------------------------------
# libdevice
# ------------------------------------------------------------------------------------------

_LIBDEVICE = "libdevice.10.bc"
INSTALL_HINT = ("install it with `pip install nvidia-nvvm` (or `pip install 'tracearray[cuda]'`), "
                "or point CUDA_HOME at a CUDA toolkit")


def libdevice_candidates() -> list[tuple[str, Path]]:
    """Where libdevice may be, in search order: (how it was found, path)."""
    out: list[tuple[str, Path]] = []
    env = config.libdevice_path()
    if env:
        out.append(("TRACEARRAY_LIBDEVICE", Path(env)))
    try:  # cuda-pathfinder: site-packages wheels, conda, CUDA_HOME/CUDA_PATH
        from cuda.pathfinder import find_bitcode_lib
        out.append(("cuda-pathfinder", Path(find_bitcode_lib("device"))))
    except Exception:
        pass
    for var, root in config.cuda_toolkit_roots():
        out.append((var, Path(root) / "nvvm" / "libdevice" / _LIBDEVICE))
    for sp in sys.path:  # the nvidia-nvvm (CUDA 13) and nvidia-cuda-nvcc-cu12 wheels
        for rel in ("nvidia/cu13/nvvm/libdevice", "nvidia/cuda_nvcc/nvvm/libdevice"):
            out.append(("site-packages", Path(sp) / rel / _LIBDEVICE))
    for tool in ("ptxas", "nvcc"):
        import shutil   # (these three: not imported by a process whose kernels are on disk)
        found = shutil.which(tool)
        if found:
            root = Path(os.path.realpath(found)).parent.parent
            out.append((f"{tool} on PATH", root / "nvvm" / "libdevice" / _LIBDEVICE))
    out.append(("/usr/local/cuda", Path("/usr/local/cuda/nvvm/libdevice") / _LIBDEVICE))
    return out


_libdevice_path: Path | None = None


def find_libdevice() -> Path:
    """The path of ``libdevice.10.bc``; a clear error naming the install command if none."""
    global _libdevice_path
    if _libdevice_path is None:
        for _how, path in libdevice_candidates():
            if path.is_file():
                _libdevice_path = path
                break
        else:
            raise LibdeviceNotFoundError(
                f"this kernel calls math functions, which on the GPU come from NVIDIA's "
                f"libdevice ({_LIBDEVICE}), and it was not found; {INSTALL_HINT}")
    return _libdevice_path


# ------------------------------------------------------------------------------------------
# Compilation
# ------------------------------------------------------------------------------------------

_lock = threading.RLock()
forksafe.wait_at_fork(sys.modules[__name__], "_lock", 10)   # LLVM work: waited for at fork
_llvm_state: dict = {}
_memory_cache: dict[str, str] = {}
_MODULE_FLAGS = '!llvm.module.flags = !{!9000}\n!9000 = !{i32 4, !"nvvm-reflect-ftz", i32 0}\n'

# Every option given to LLVM below; part of the disk key, so the key cannot miss one.
PTX_OPTIONS: Mapping[str, object] = {
    "opt": 3,                       # target machine
    "speed_level": 3,               # new pass manager pipeline: O3
    "module_flags": _MODULE_FLAGS,  # appended to modules without flags (no flush-to-zero)
}


def _llvm():
    """llvmlite.binding with the NVPTX target initialised, and our private context."""
    if not _llvm_state:
        import llvmlite.binding as llvm
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _llvm_state["llvm"] = llvm
        _llvm_state["context"] = llvm.create_context()
        _llvm_state["machines"] = {}
    return _llvm_state["llvm"]


def _machine(target: GpuTarget):
    llvm = _llvm()
    tms = _llvm_state["machines"]
    if target not in tms:
        tms[target] = llvm.Target.from_triple(TRIPLE).create_target_machine(
            cpu=target.arch, features=target.features, opt=PTX_OPTIONS["opt"])
    return tms[target]


def cache_dir() -> Path | None:
    """PTX cache folder (``<config.cache_dir()>/ptx``), None when the disk cache is off."""
    root = config.cache_dir()
    return None if root is None else Path(root) / "ptx"


# The inputs of the PTX cache key, in hashing order.
PTX_KEY_COMPONENTS = ("module", "triple", "target", "options", "llvmlite", "llvm", "libdevice",
                      "tracearray", "pipeline", "pipeline_source")


def key_components(ir_text: str, target: GpuTarget) -> dict[str, str]:
    """Everything that changes the PTX made from ``ir_text`` for ``target`` (and so the cubin
    assembled from it), each as a string."""
    uses_libdevice = "@__nv_" in ir_text or '@"__nv_' in ir_text
    return {
        "module": ir_text,
        "triple": TRIPLE,
        "target": f"{target.arch} {target.features}",
        "options": repr(sorted(PTX_OPTIONS.items())),
        # named without loading LLVM: a warm process whose PTX is on disk never needs it
        "llvmlite": _llvmlite_version(),
        "llvm": llvm_identity(),
        "libdevice": _libdevice_digest() if uses_libdevice else "",
        "tracearray": tracearray_version(),
        "pipeline": str(PIPELINE_REVISION),
        "pipeline_source": _source_digest(),
    }


def _llvmlite_version() -> str:
    import llvmlite     # its __init__ reads the version only (not the binding)
    return llvmlite.__version__


def _key(ir_text: str, target: GpuTarget) -> tuple[str, bytes]:
    """The cache key of a module and the full key (record) it hashes."""
    record = key_record(key_components(ir_text, target), PTX_KEY_COMPONENTS, "PTX cache key")
    return record_key(record), record


_libdevice_hash: str | None = None
_source_hash: str | None = None


def _libdevice_digest() -> str:
    """Content hash of libdevice (the same file found elsewhere reuses cached PTX)."""
    global _libdevice_hash
    if _libdevice_hash is None:
        _libdevice_hash = hashlib.sha256(find_libdevice().read_bytes()).hexdigest()
    return _libdevice_hash


def _source_digest() -> str:
    """sha256 of this file: the pipeline and the ptxas workarounds below are code."""
    global _source_hash
    if _source_hash is None:
        try:
            _source_hash = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
        except OSError:  # pragma: no cover - e.g. run from a zip without sources
            _source_hash = "unavailable"
    return _source_hash


_disk_caches: dict[str, ObjectCache] = {}


def _disk_cache() -> ObjectCache | None:
    """The PTX folder's cache (one per folder; ``TRACEARRAY_CACHE_DIR`` is read each time)."""
    folder = cache_dir()
    if folder is None:
        return None
    cache = _disk_caches.get(str(folder))
    if cache is None:
        cache = _disk_caches[str(folder)] = ObjectCache(str(folder), config.disk_cache_bound(),
                                                        root=str(folder.parent))
    return cache


def _disk_get(key: str, record: bytes, target: GpuTarget) -> str | None:
    cache = _disk_cache()
    payload = cache.load(key, record) if cache is not None else None
    if payload is None:
        return None
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        text = ""
    header = text[:4096]
    if (".version" in header and f".target {target.arch}" in header
            and text.rstrip().endswith("}")):
        config.log(config.COMPILES, "gpu ptx: loaded %s from %s", key[:12], cache.folder)
        return text
    cache.refuse(key, f"not PTX for {target.arch}")
    return None


def _disk_put(key: str, record: bytes, ptx: str) -> None:
    cache = _disk_cache()
    if cache is not None:
        cache.store(key, ptx.encode(), record)


def _optimized_module(ir_text: str, target: GpuTarget):
    """Steps 1-4 of the pipeline (caller holds the lock)."""
    llvm = _llvm()
    ctx = _llvm_state["context"]
    tm = _machine(target)
    text = ir_text if "!llvm.module.flags" in ir_text else ir_text + "\n" + PTX_OPTIONS["module_flags"]
    try:
        mod = llvm.parse_assembly(text, context=ctx)
    except RuntimeError as e:
        raise GpuCodegenError(f"LLVM could not parse the kernel: {e}") from None
    mod.triple = TRIPLE
    mod.data_layout = str(tm.target_data)
    try:
        mod.verify()
    except RuntimeError as e:
        raise GpuCodegenError(f"LLVM rejected the kernel: {e}") from None
    check_lowerable(mod)
    pto = llvm.create_pipeline_tuning_options(speed_level=PTX_OPTIONS["speed_level"])
    pb = llvm.create_pass_builder(tm, pto)
    if any(f.name.startswith("__nv_") and f.is_declaration for f in mod.functions):
        lib = llvm.parse_bitcode(find_libdevice().read_bytes(), context=ctx)
        lib.triple, lib.data_layout = mod.triple, mod.data_layout
        mod.link_in(lib)
        for f in mod.functions:
            if f.name.startswith("__nv_") and not f.is_declaration:
                f.linkage = llvm.Linkage.internal
        dce = llvm.create_new_module_pass_manager()
        dce.add_global_dead_code_eliminate_pass()
        dce.run(mod, pb)
        missing = [f.name for f in mod.functions
                   if f.is_declaration and f.name.startswith("__nv_")]
        if missing:
            raise GpuCodegenError(f"libdevice has no {', '.join(missing)}")
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


# ------------------------------------------------------------------------------------------
# ptxas workarounds: PTX that is correct as written but that ptxas 13.0 miscompiles
# ------------------------------------------------------------------------------------------

# Integer instructions whose wrap-around result ptxas does not respect (read off the SASS of
# ptxas 13.0 for sm_90, and seen as wrong results on an H200; tests/test_gpu_ptx.py keeps the
# cases, tests/test_gpu_cuda.py runs them):
#
# - ``abs.s16/s32/s64``: PTX's abs of the most negative value is that value (NumPy's wrap),
#   but ptxas treats the result as non-negative (IABS), so ``abs(x) < 0`` folds to false:
#   ``np.sign(abs(int32 INT_MIN))`` gave 0 instead of -1. LLVM forms ``llvm.abs`` from any
#   select idiom (``np.where(x < 0, -x, x)`` too), so every one is rewritten here.
# - ``neg.s16`` (and ``sub.s16 d, 0, x``, which ptxas turns into it): when the result is
#   widened (a 16-bit compare is done in 32-bit registers), ptxas sign-extends the operand and
#   negates in 32 bits, so ``-(-32768)`` compared as +32768: ``np.argmin(-x)`` on int16 was
#   wrong. ``not`` + ``add`` wraps correctly (the sum is sign-extended from 16 bits again).
# - ``neg.s32`` feeding ``max.s32``/``min.s32`` chains: ptxas fuses three operands into one
#   ``VIMNMX3`` and drops the negation of one of them (folded as an operand modifier the
#   instruction does not have): ``np.max(-x, axis=1)`` over [0, -7, -4] gave 4 (GPU soak
#   gpu-2026-12-01-b, program 2691). The same ``not`` + ``add`` is compiled correctly
#   (``VIADDMNMX``).
#
# The replacements are written so that ptxas cannot recognise them as abs / neg again.
_GUARD = r"(?P<guard>@!?%\w+\s+)?"
_ABS = re.compile(r"^(?P<ind>[ \t]*)" + _GUARD +
                  r"abs\.s(?P<bits>16|32|64)\s+(?P<d>%\w+),\s*(?P<s>%\w+);", re.MULTILINE)
_NEG = re.compile(r"^(?P<ind>[ \t]*)" + _GUARD +
                  r"neg\.s(?P<bits>16|32)\s+(?P<d>%\w+),\s*(?P<s>%\w+);", re.MULTILINE)
_INT_ABS_LEFT = re.compile(r"^\s*(@!?%\w+\s+)?(abs\.s(16|32|64)|neg\.s(16|32))\b",
                           re.MULTILINE)


def _rewrite_abs(m: re.Match) -> str:
    ind, g, n, d, s = m["ind"], m["guard"] or "", m["bits"], m["d"], m["s"]
    return (f"{ind}{{\n{ind}.reg .pred %ta_p;\n{ind}.reg .b{n} %ta_t;\n"
            f"{ind}{g}setp.lt.s{n} %ta_p, {s}, 0;\n{ind}{g}not.b{n} %ta_t, {s};\n"
            f"{ind}{g}add.s{n} %ta_t, %ta_t, 1;\n{ind}{g}selp.b{n} {d}, %ta_t, {s}, %ta_p;\n"
            f"{ind}}}")


def _rewrite_neg(m: re.Match) -> str:
    ind, g, n, d, s = m["ind"], m["guard"] or "", m["bits"], m["d"], m["s"]
    return (f"{ind}{{\n{ind}.reg .b{n} %tn_t;\n{ind}{g}not.b{n} %tn_t, {s};\n"
            f"{ind}{g}add.s{n} {d}, %tn_t, 1;\n{ind}}}")


def ptxas_workarounds(ptx: str) -> str:
    """``ptx`` with the integer instructions ptxas miscompiles replaced by equivalents."""
    if "abs.s" not in ptx and "neg.s16" not in ptx and "neg.s32" not in ptx:
        return ptx
    out = _NEG.sub(_rewrite_neg, _ABS.sub(_rewrite_abs, ptx))
    left = _INT_ABS_LEFT.search(out)
    if left:   # a form the patterns do not know: refuse rather than risk a wrong result
        raise GpuCodegenError(f"unexpected PTX form {left.group(0).strip()!r}: the ptxas "
                              f"workaround for wrapping integer abs/neg does not cover it")
    return out


# Bumped whenever the PTX produced for the same IR changes (the disk cache key includes it).
PIPELINE_REVISION = 3


def compile_ptx(ir_text: str, target: GpuTarget = DEFAULT_TARGET, counts: Any = None) -> str:
    """PTX for an LLVM module (cached in memory and on disk).

    ``counts``, when given, is an object whose ``compiles``, ``disk_hits`` and
    ``disk_misses`` are incremented for what this lookup did (an executable's counters, read
    by ``CompiledFunction.cache_info()``)."""
    key, record = _key(ir_text, target)
    with _lock:
        ptx = _memory_cache.get(key)
        if ptx is None:
            looked_up = _disk_cache() is not None
            ptx = _disk_get(key, record, target)
            if ptx is None:
                mod, tm = _optimized_module(ir_text, target)
                ptx = ptxas_workarounds(tm.emit_assembly(mod))
                _disk_put(key, record, ptx)
                if counts is not None:
                    counts.compiles += 1
                    counts.disk_misses += looked_up
            elif counts is not None:
                counts.disk_hits += 1
            _memory_cache[key] = ptx
        return ptx


def optimized_ir(ir_text: str, target: GpuTarget = DEFAULT_TARGET) -> str:
    with _lock:
        return str(_optimized_module(ir_text, target)[0])


# ------------------------------------------------------------------------------------------
# PTX -> cubin (optional: the driver JIT-compiles PTX too)
# ------------------------------------------------------------------------------------------

def ptxas_path() -> str | None:
    import shutil
    found = shutil.which("ptxas")
    if found:
        return found
    for _var, root in config.cuda_toolkit_roots():
        p = Path(root) / "bin" / "ptxas"
        if p.is_file():
            return str(p)
    return None


def ptxas(ptx: str, arch: str = "sm_90", verbose: bool = False) -> tuple[bytes, str]:
    """Assemble with ptxas: (cubin, ptxas's messages). Raises PtxasError."""
    exe = ptxas_path()
    if exe is None:
        raise PtxasError("ptxas was not found (PATH, CUDA_HOME)")
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tracearray-ptxas-") as d:
        src, out = Path(d) / "k.ptx", Path(d) / "k.cubin"
        src.write_text(ptx)
        cmd = [exe, f"-arch={arch}", *CUBIN_OPTIONS, str(src), "-o", str(out)] + \
            (["-v"] if verbose else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise PtxasError(f"ptxas -arch={arch} failed:\n{r.stderr.strip()}")
        return out.read_bytes(), r.stderr


# ------------------------------------------------------------------------------------------
# The cubin cache: the same ObjectCache as PTX and CPU objects, folder ``<cache>/cubin``
# ------------------------------------------------------------------------------------------

CUBIN_OPTIONS = ("-O3",)    # given to nvJitLink and ptxas alike; part of the key
# The inputs of the cubin cache key, in hashing order: the PTX text, the architecture, the
# assembler (nvJitLink's version, or ptxas's path, size and modification time: a toolkit
# update changes them), the options, and tracearray's identity and this file's digest.
CUBIN_KEY_COMPONENTS = ("ptx", "arch", "assembler", "options", "tracearray", "pipeline_source")
EM_CUDA = 190               # the ELF machine of a cubin


def cubin_key_components(ptx: str, arch: str, assembler: str) -> dict[str, str]:
    return {"ptx": ptx, "arch": arch, "assembler": assembler,
            "options": " ".join(CUBIN_OPTIONS), "tracearray": tracearray_version(),
            "pipeline_source": _source_digest()}


def subfolder_cache(name: str) -> ObjectCache | None:
    """The cache of ``<config.cache_dir()>/<name>`` (one per folder), None when it is off."""
    root = config.cache_dir()
    if root is None:
        return None
    folder = os.path.join(root, name)
    cache = _disk_caches.get(folder)
    if cache is None:
        cache = _disk_caches[folder] = ObjectCache(folder, config.disk_cache_bound(), root=root)
    return cache


def _cubin_cache() -> ObjectCache | None:
    return subfolder_cache("cubin")


def _assembler() -> tuple[str, Any] | None:
    """The tool that assembles PTX here, as (its identity for the key, assemble(ptx, arch)),
    nvJitLink first; None when neither it nor ptxas is installed.

    Finding nvJitLink imports its binding, which locates ``libnvJitLink`` through
    ``cuda.pathfinder`` (25 ms on the H200, most of a warm process's first GPU call), so the
    answer is remembered in the cache's ``toolchain`` folder with the files it came from
    (path, size, modification time) and the settings it was found under
    (``_resolution_key``), and used while they are unchanged."""
    found = _recorded_assembler()
    if found is None:
        found, files = _resolve_assembler()
        if found is not None and files:
            _record_assembler(found[0], files)
    return found


def _resolve_assembler() -> tuple[tuple[str, Any] | None, list[str]]:
    """(identity, assemble) as ``_assembler`` describes, and the files that decide it."""
    try:
        from cuda.bindings import nvjitlink
        version = "nvjitlink " + ".".join(map(str, nvjitlink.version()))
    except Exception:   # noqa: BLE001 - not installed, or its library is missing
        version = None
    if version is not None:
        library = _loaded_library("libnvJitLink")
        files = [nvjitlink.__file__, library] if library else []
        return (version, nvjitlink_cubin), files
    exe = ptxas_path()
    if exe is None:
        return None, []
    try:
        st = os.stat(exe)
    except OSError:
        return None, []
    return (f"ptxas {os.path.realpath(exe)} {st.st_size} {st.st_mtime_ns}", _ptxas_cubin), \
        [os.path.realpath(exe)]


def _ptxas_cubin(ptx: str, arch: str) -> bytes | None:
    try:
        return ptxas(ptx, arch)[0]
    except Exception:   # noqa: BLE001 - the driver's JIT is tried next, and reports it
        return None


def _loaded_library(stem: str) -> str | None:
    """The path of a shared library of this process whose name starts with ``stem``
    (``/proc/self/maps``; None elsewhere or when it is not loaded)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        pass
    return None


# Where the assembler is looked for besides the files themselves: a record made under
# other settings is not used.
def _resolution_key() -> tuple[str, bytes]:
    env = config.tool_search_environment()
    record = key_record({"what": "assembler", "environment": repr(sorted(env.items())),
                         "sys_path": repr(sys.path), "tracearray": tracearray_version()},
                        ("what", "environment", "sys_path", "tracearray"), "assembler record")
    return record_key(record), record


def file_identity(path: str) -> list:
    """[path, size, modification time]: how a remembered file is recognised unchanged."""
    st = os.stat(path)
    return [path, st.st_size, st.st_mtime_ns]


def _toolchain_cache() -> ObjectCache | None:
    """``<cache>/toolchain``: what was found where (the assembler), not code."""
    return subfolder_cache("toolchain")


def _record_assembler(identity: str, files: list[str]) -> None:
    cache = _toolchain_cache()
    if cache is None:
        return
    try:
        data = {"identity": identity, "files": [file_identity(f) for f in files]}
    except OSError:
        return
    key, record = _resolution_key()
    cache.store(key, json.dumps(data, sort_keys=True).encode(), record)


def _recorded_assembler() -> tuple[str, Any] | None:
    """The remembered assembler, if its files are as they were (read as JSON data)."""
    cache = _toolchain_cache()
    if cache is None:
        return None
    key, record = _resolution_key()
    payload = cache.load(key, record)
    if payload is None:
        return None
    try:
        data = json.loads(payload)
        identity, files = data["identity"], data["files"]
        same = isinstance(identity, str) and files and \
            all(file_identity(f[0]) == list(f) for f in files)
    except (ValueError, TypeError, KeyError, IndexError, OSError):
        same = False
    if not same:
        return None
    return identity, (nvjitlink_cubin if identity.startswith("nvjitlink ") else _ptxas_cubin)


def cubin_for(ptx: str, arch: str) -> bytes | None:
    """A cubin of ``ptx`` for ``arch`` (``sm_90``), from the disk cache or assembled (and
    then stored); None when no assembler is installed or it failed (the driver's JIT then
    loads the PTX). A cached entry must be an ELF64 file for ``EM_CUDA``."""
    tool = _assembler()
    if tool is None:
        return None
    identity, assemble = tool
    record = key_record(cubin_key_components(ptx, arch, identity), CUBIN_KEY_COMPONENTS,
                        "cubin cache key")
    key = record_key(record)
    cache = _cubin_cache()
    cubin = cache.load(key, record) if cache is not None else None
    if cubin is not None:
        if _is_cubin(cubin):
            return cubin
        cache.refuse(key, "not a cubin (ELF64 for EM_CUDA)")
    cubin = assemble(ptx, arch)
    if cubin is not None and cache is not None:
        cache.store(key, cubin, record)
    return cubin


def _is_cubin(data: bytes) -> bool:
    return (len(data) >= 64 and data[:4] == b"\x7fELF" and data[4] == 2
            and int.from_bytes(data[18:20], "little") == EM_CUDA)


def nvjitlink_cubin(ptx: str, arch: str) -> bytes | None:
    """cubin via nvJitLink (the nvidia-nvjitlink wheel), or None when it is unavailable."""
    try:
        from cuda.bindings import nvjitlink
    except Exception:
        return None
    try:
        h = nvjitlink.create(1 + len(CUBIN_OPTIONS), [f"-arch={arch}", *CUBIN_OPTIONS])
        try:
            data = ptx.encode()
            nvjitlink.add_data(h, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(h)
            buf = bytearray(nvjitlink.get_linked_cubin_size(h))
            nvjitlink.get_linked_cubin(h, buf)
            return bytes(buf)
        finally:
            nvjitlink.destroy(h)
    except Exception:
        return None
