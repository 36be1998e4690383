"""The CPU's kernel key: a kernel's description (``tile/describe.py``) in place of its IR.

The key is computed without generating the kernel's LLVM IR (issue 12), so it must be shown
to hold everything the IR depends on:

- ``test_equal_descriptions_have_identical_ir``: over every registry case (primitives and
  composites, two draws each: dtypes, shapes, layouts) and the 13 benchmark workloads at
  several sizes, kernels with equal descriptions always have identical IR text, and the key is
  size-free (a workload's kernels at a new size have the descriptions they had);
- ``test_each_thing_the_ir_depends_on_changes_the_description``: pairs of programs whose IR
  differs in one respect each (op, dtype, cast, strategy, built-in stride, nested extent,
  arg-reduction axis, scatter ufunc, gather mode, parameters, outputs, name) differ in their
  descriptions; ``test_each_target_component_changes_the_key``: so do the target parts;
- ``TRACEARRAY_CHECK_KERNEL_KEYS=1`` catches a description that misses something;
- a new size generates no IR; a warm-disk first call in a new process imports neither
  ``llvmlite.binding`` nor the code generator.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import weakref
from pathlib import Path

import numpy as np
import pytest

import tracearray
from test_registry import CASES, _seed, draw_inputs, program
from tracearray.cpu import codecache, host, loader
from tracearray.diskcache import CacheWarning
from tracearray.cpu import runtime as cpu_runtime
from tracearray.tile import describe as tile_describe

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks import workloads as W  # noqa: E402
from benchmarks.overhead import grown_dims, inputs_for  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture
def recorded(monkeypatch):
    """Every kernel built meanwhile, as (description, its IR generated for this test)."""
    seen: list[tuple[str, str]] = []
    real = codecache.load_kernel

    def record_kernel(description, names, make_ir):
        seen.append((description, make_ir()))
        return real(description, names, make_ir)

    monkeypatch.setattr(codecache, "load_kernel", record_kernel)
    return seen


def _lower(fn, args) -> bool:
    try:
        tracearray.compile(fn, device="cpu").lower(*args)
        return True
    except Exception:   # noqa: BLE001 -- NumPy's errors, mirrored: no kernel to look at
        return False


def _lower_workloads(lower, recorded) -> dict[str, list]:
    """Each benchmark workload lowered at three sizes; the kernels recorded for each."""
    per_workload = {}
    for name in W.names():
        w = W.get(name)
        start = len(recorded)
        for k in (0, 1, 5):
            assert lower(w.fn, inputs_for(w, grown_dims(w, k), seed=k)), name
        per_workload[name] = recorded[start:]
    return per_workload


def _ir_by_description(seen):
    by: dict[str, set[str]] = {}
    for description, ir in seen:
        by.setdefault(description, set()).add(ir)
    return by


# ------------------------------------------------------------------ equal key, equal IR

DRAWS = 1 if os.environ.get("CI") else 3     # inputs drawn per registry case


def test_equal_descriptions_have_identical_ir(recorded) -> None:
    lowered = 0
    for case in CASES:
        fn = program(case[1], case[2])
        for k in range(DRAWS):
            lowered += _lower(fn, draw_inputs(_seed(case, k), case))
    per_workload = _lower_workloads(_lower, recorded)
    assert lowered > 0.8 * DRAWS * len(CASES)      # most cases lowered
    by = _ir_by_description(recorded)
    clashes = {d: irs for d, irs in by.items() if len(irs) > 1}
    assert not clashes, f"{len(clashes)} descriptions with several IRs, e.g.:\n" + \
        next(iter(clashes))
    # shared: far fewer descriptions than kernels built (sizes, layouts, repeated draws)
    assert len(by) < len(recorded) - 40, (len(by), len(recorded))
    # size-free: each workload's three sizes describe the same kernels
    for name, seen in per_workload.items():
        descriptions = [d for d, _ir in seen]
        assert len(set(descriptions)) * 3 == len(descriptions), name


# ------------------------------------------------------- one component at a time

def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _idx(n, size=5):
    return np.random.default_rng(1).integers(0, n, size)


_X = _f32(6, 20)
_PAIRS = {
    "op": ((lambda x: np.exp(x) + 1, [_X]), (lambda x: np.log(x) + 1, [_X])),
    "dtype": ((lambda x: x * x, [_X]), (lambda x: x * x, [_X.astype(np.float64)])),
    "cast": ((lambda x: x * np.float32(2), [_X.astype(np.int32)]),
             (lambda x: x * np.float32(2), [_X.astype(np.int64)])),
    "strategy (a transposed read)": ((lambda x, y: x + y, [_f32(64, 64), _f32(64, 64)]),
                                     (lambda x, y: x + y, [_f32(64, 64).T, _f32(64, 64)])),
    "built-in stride (broadcast)": ((lambda x, y: x + y, [_X, _f32(6, 20)]),
                                    (lambda x, y: x + y, [_X, _f32(1, 20)])),
    "built-in stride (strided)": ((lambda x: x * 2, [_f32(6, 20)]),
                                  (lambda x: x * 2, [_f32(6, 40)[:, ::3]])),
    "nested extent": ((lambda a, b: np.min(np.sum((a[:, None] - b[None]) ** 2, -1), -1),
                       [_f32(10, 3), _f32(12, 3)]),
                      (lambda a, b: np.min(np.sum((a[:, None] - b[None]) ** 2, -1), -1),
                       [_f32(10, 4), _f32(12, 4)])),
    "reduction strategy": ((lambda x: x.sum(axis=1), [_X]), (lambda x: x.sum(axis=0), [_X])),
    "arg-reduction axis": ((lambda x: np.argmax(x, axis=1), [_f32(6, 20, 3)]),
                           (lambda x: np.argmax(x, axis=2), [_f32(6, 20, 3)])),
    "scatter ufunc": ((lambda x, i, v: _at(np.add, x, i, v), [_f32(9), _idx(9), _f32(5)]),
                      (lambda x, i, v: _at(np.maximum, x, i, v), [_f32(9), _idx(9), _f32(5)])),
    "gather mode": ((lambda x, i: np.take(x, i, mode="clip") * 2, [_f32(9), _idx(12)]),
                    (lambda x, i: np.take(x, i, mode="wrap") * 2, [_f32(9), _idx(12)])),
    "bounds check": ((lambda x, i: np.take(x, i, mode="clip") * 2, [_f32(9), _idx(9)]),
                     (lambda x, i: x[i] * 2, [_f32(9), _idx(9)])),
    "parameters": ((lambda x: x * 2.0, [_X]), (lambda x: x * 2.0 + 3.0, [_X])),
    "outputs": ((lambda x: np.exp(x), [_X]), (lambda x: (np.exp(x), np.exp(x) + 1), [_X])),
    "full reduction": ((lambda x: x.sum(), [_X]), (lambda x: x.max(), [_X])),
}


def _at(ufunc, x, i, v):
    y = x.copy()
    ufunc.at(y, i, v)
    return y


def _named(fn, name):
    fn.__name__ = name
    return fn


@pytest.mark.parametrize("what", sorted(_PAIRS) + ["name"])
def test_each_thing_the_ir_depends_on_changes_the_description(recorded, what) -> None:
    if what == "name":
        a = (_named(lambda x: x + 1, "first"), [_X])
        b = (_named(lambda x: x + 1, "second"), [_X])
    else:
        a, b = _PAIRS[what]
    assert _lower(*a)
    first = list(recorded)
    recorded.clear()
    assert _lower(*b)
    second = list(recorded)
    assert {ir for _d, ir in first} != {ir for _d, ir in second}, "the pair's IR is the same"
    differing = {d for d, _ir in first} ^ {d for d, _ir in second}
    assert differing, f"{what}: different IR, the same descriptions"
    # and every description still has one IR
    assert all(len(irs) == 1 for irs in _ir_by_description(first + second).values())


@pytest.mark.parametrize("component", ["host_cpu", "platform", "llvm", "vector_math",
                                       "tracearray", "pipeline"])
def test_each_target_component_changes_the_key(monkeypatch, component) -> None:
    base = codecache.key_components("k")
    assert set(base) == set(codecache.KERNEL_KEY_COMPONENTS)
    monkeypatch.setattr(codecache, "_key_base", {})
    if component == "vector_math":
        monkeypatch.setenv("TRACEARRAY_VECTOR_MATH", "0" if base["vector_math"] == "True" else "1")
        monkeypatch.setattr("tracearray.cpu.jit._jit", None)
    elif component == "tracearray":
        monkeypatch.setattr(codecache, "tracearray_version", lambda: "0.0.0-other")
    else:
        fn = {"host_cpu": "host_cpu", "platform": "platform_identity", "llvm": "llvm_identity",
              "pipeline": "pipeline_digest"}[component]
        monkeypatch.setattr(host, fn, lambda: "something else")
    changed = codecache.key_components("k")
    assert changed[component] != base[component]
    assert [k for k in base if base[k] != changed[k]] == [component]


@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_pipeline_digest_covers_the_code_generator(target, monkeypatch) -> None:
    """The digest of the code-generating sources in each target's kernel key covers the
    files between a description and the code, and an edited file is a new digest."""
    from tracearray import diskcache
    from tracearray.gpu import kernelcache
    package = ROOT / "tracearray"
    packages = host._PIPELINE_PACKAGES if target == "cpu" else kernelcache.PIPELINE_PACKAGES
    files = {Path(p).relative_to(package).as_posix() for p in diskcache.source_files(packages)}
    needed = ["codegen/kernel.py", "codegen/scalar.py", "tile/describe.py", "tile/layout.py",
              "ops/elementwise.py", "fuse/kexpr.py"]
    needed += ["cpu/mathlib.py", "cpu/jit.py", "cpu/loader.py"] if target == "cpu" else \
        ["gpu/codegen.py", "gpu/vector.py", "gpu/mathlib.py", "gpu/ptx.py", "tile/gpu.py"]
    for name in needed:
        assert name in files
    # and an edited file (a new modification time) is a new digest
    before = diskcache.sources_digest(packages)
    real_stat = os.stat

    def edited(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if str(path).endswith(os.path.join("codegen", "scalar.py")):
            return types.SimpleNamespace(st_size=st.st_size, st_mtime_ns=st.st_mtime_ns + 1)
        return st
    monkeypatch.setattr(diskcache.os, "stat", edited)
    assert diskcache.sources_digest(packages) != before


# -------------------------------------------------------------------- the debug check

def test_check_kernel_keys_catches_a_description_that_misses_something(monkeypatch) -> None:
    """A description that leaves out the op: exp's and log's kernels share a key. With the
    check on, the second one is refused instead of running exp's code."""
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "off")
    monkeypatch.setenv("TRACEARRAY_CHECK_KERNEL_KEYS", "1")
    monkeypatch.setattr(codecache, "_memory", weakref.WeakValueDictionary())
    real = tile_describe.describe_kernel
    monkeypatch.setattr(tile_describe, "describe_kernel",
                        lambda geo, name, math="CpuMath":
                        real(geo, name, math).replace("log(", "exp("))
    x = _f32(50) ** 2 + 0.5
    f = tracearray.compile(lambda x: np.exp(x) + 1, device="cpu")
    np.testing.assert_allclose(f(x), np.exp(x) + 1, rtol=1e-6)
    g = tracearray.compile(lambda x: np.log(x) + 1, device="cpu")
    with pytest.raises(tracearray.errors.CompileError, match="other LLVM IR") as caught:
        g(x)      # (named with the kernel, its ops and the user's lines)
    assert isinstance(caught.value.__cause__, codecache.KernelKeyMismatch)
    del f


# ---------------------------------------------------------------- what it saves

def test_a_new_size_generates_no_ir(monkeypatch) -> None:
    from tracearray.codegen import kernel as codegen_kernel
    calls = []
    real = codegen_kernel.lower_kernel

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(codegen_kernel, "lower_kernel", counted)
    # (where the runtime binds the generator's name itself)
    monkeypatch.setattr(cpu_runtime, "lower_kernel", counted, raising=False)
    for name in W.names():
        w = W.get(name)
        f = tracearray.compile(w.fn, device="cpu")
        W.as_outputs(f(*inputs_for(w, grown_dims(w, 0))))
        before = len(calls)
        for k in (1, 2, 7):
            args = inputs_for(w, grown_dims(w, k), seed=k)
            for got, want in zip(W.as_outputs(f(*args)), W.as_outputs(w.fn(*args))):
                assert np.linalg.norm(got - want) <= w.tol * np.linalg.norm(want), name
        assert len(calls) == before, f"{name}: a new size generated LLVM IR"
        # the second size is traced (checking the size template), the third re-derived
        # (templates.py); a size class change traces again (linear_relu's first dimension
        # passes resize.EXACT_DIMS at k = 1)
        assert f.cache_info().traces + f.stats.resizes == 4, name


_WARM_CHILD = """
import json, sys, time
import numpy as np, tracearray
sys.path.insert(0, {root!r})
from benchmarks import workloads as W
from benchmarks.overhead import inputs_for
out = {{}}
for name in {names!r}:
    w = W.get(name)
    f = tracearray.compile(w.fn, device="cpu")
    args = inputs_for(w, w.dims("check"))
    got = W.as_outputs(f(*args))
    ok = all(np.linalg.norm(g - r) <= w.tol * np.linalg.norm(r)
             for g, r in zip(got, W.as_outputs(w.fn(*args))))
    out[name] = [list(f.cache_info()), bool(ok)]
print(json.dumps({{"results": out, "binding": "llvmlite.binding" in sys.modules,
                  "codegen": "tracearray.codegen" in sys.modules,
                  "jit_imported": "tracearray.cpu.jit" in sys.modules}}))
"""


def _child(cache: Path, names, extra_env=None) -> dict:
    env = {**os.environ, "TRACEARRAY_CACHE_DIR": str(cache), **(extra_env or {})}
    code = _WARM_CHILD.format(root=str(ROOT), names=list(names))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"),
                    reason="kernel objects are read from the disk on x86-64 Linux only")
def test_warm_disk_first_call_loads_no_llvm(tmp_path) -> None:
    """A new process whose kernels are all on disk loads them with tracearray's own loader:
    llvmlite's binding (LLVM itself), the code generator and the JIT are never imported."""
    names = W.names()
    cold = _child(tmp_path, names)
    assert cold["binding"] and cold["codegen"]
    warm = _child(tmp_path, names)
    for name, ((traces, compiles, disk_hits, disk_misses), ok) in warm["results"].items():
        assert ok and compiles == 0 and disk_misses == 0 and disk_hits >= 1, (name, warm)
    assert not warm["binding"] and not warm["codegen"] and not warm["jit_imported"], warm


def test_objects_the_loader_cannot_load_run_through_mcjit(monkeypatch) -> None:
    """Where ``loader`` refuses an object (``CannotLoad``), MCJIT loads the same object."""
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "off")
    monkeypatch.setattr(codecache, "_memory", weakref.WeakValueDictionary())

    def cannot(data):
        raise loader.CannotLoad("not today")
    monkeypatch.setattr(loader, "load_object", cannot)
    x = np.linspace(-2, 2, 101)
    f = tracearray.compile(lambda x: np.arctan(x) * 3 - np.exp(x), device="cpu")
    np.testing.assert_allclose(f(x), np.arctan(x) * 3 - np.exp(x), rtol=1e-12)
    (ck,) = f.lower(x).executable.kernels
    assert ck.code.code.kind == "MCJIT"


_CPUINFO = """processor\t: {n}
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9004
stepping\t: 1
microcode\t: 0xa101148
cpu MHz\t\t: {mhz}
flags\t\t: fpu sse2 avx avx2 {extra}
bogomips\t: 4792.{n}
core id\t\t: {n}
"""


def test_host_cpu_is_what_decides_llvms_host_answers() -> None:
    """Clock speeds, core numbers and bogomips do not change the host part of the key; a
    feature flag, the model or the microcode does; every distinct processor is kept."""
    same = host.parse_cpuinfo("\n".join(_CPUINFO.format(n=n, mhz=1000 + 37 * n, extra="avx512f")
                                        for n in range(4)))
    assert same == host.parse_cpuinfo(_CPUINFO.format(n=0, mhz=3700, extra="avx512f"))
    assert "cpu MHz" not in same and "bogomips" not in same and "avx512f" in same
    assert host.parse_cpuinfo(_CPUINFO.format(n=0, mhz=3700, extra="")) != same
    assert host.parse_cpuinfo(_CPUINFO.format(n=0, mhz=1, extra="avx512f")
                              .replace("model\t\t: 17", "model\t\t: 18")) != same
    mixed = host.parse_cpuinfo(_CPUINFO.format(n=0, mhz=1, extra="avx512f") + "\n" +
                               _CPUINFO.format(n=1, mhz=1, extra=""))
    assert mixed.count("vendor_id") == 2
    assert host.parse_cpuinfo("") is None


# ------------------------------------------------------------------ the GPU's kernel key

@pytest.fixture
def gpu_recorded(monkeypatch):
    """Every GPU kernel lowered meanwhile (device='cuda': no GPU needed to lower), as
    ((description, strategy, index width), its IR), with ``gpu/kernelcache.py`` off (memory
    and disk: every kernel generated) and no PTX made (the key is for the IR; PTX follows
    from the IR through the PTX cache's own key)."""
    from tracearray.gpu import codegen as gcodegen
    from tracearray.gpu import kernelcache
    seen: list[tuple[tuple, str]] = []
    described: list[str] = []
    real_describe, real_lower = tile_describe.describe_kernel, gcodegen.GpuKernelLowering.lower

    def describe(*args):
        described.append(real_describe(*args))
        return described[-1]

    def lower(self):
        ir_text = real_lower(self)
        seen.append(((described[-1], self.strategy, self.wide), ir_text))
        return ir_text
    monkeypatch.setattr(kernelcache, "MEMORY_MAX", 0)
    monkeypatch.setattr(kernelcache, "_memory", type(kernelcache._memory)())   # (earlier tests')
    monkeypatch.setattr(kernelcache, "_disk_cache", lambda: None)
    monkeypatch.setattr(tile_describe, "describe_kernel", describe)
    monkeypatch.setattr(gcodegen.GpuKernelLowering, "lower", lower)
    monkeypatch.setattr(kernelcache.ptxmod, "compile_ptx", lambda ir, target, counts=None: "")
    return seen


def _lower_cuda(fn, args) -> bool:
    try:
        tracearray.compile(fn, device="cuda").lower(*args)
        return True
    except Exception:   # noqa: BLE001 -- NumPy's errors, mirrored, or a host-only program
        return False


def test_gpu_equal_keys_have_identical_ir(gpu_recorded) -> None:
    """The GPU's kernel key (``gpu/kernelcache.py``: the description, the
    strategy, the index width; the target is one here) holds everything its IR depends on:
    over every registry case and the 13 workloads at three sizes, equal keys have identical
    IR text, and a workload's kernels at a new size have the keys they had."""
    lowered = sum(_lower_cuda(program(case[1], case[2]), draw_inputs(_seed(case, 0), case))
                  for case in CASES)
    assert lowered > 0.8 * len(CASES)      # most cases lowered
    per_workload = _lower_workloads(_lower_cuda, gpu_recorded)
    by = _ir_by_description(gpu_recorded)
    clashes = {k: irs for k, irs in by.items() if len(irs) > 1}
    assert not clashes, f"{len(clashes)} keys with several IRs, e.g.:\n{next(iter(clashes))[0]}"
    assert len(by) < len(gpu_recorded) - 40, (len(by), len(gpu_recorded))
    for name, seen in per_workload.items():
        keys = [k for k, _ir in seen]
        assert len(set(keys)) * 3 == len(keys), name


def test_gpu_new_size_generates_no_ir(monkeypatch) -> None:
    """A new size of a GPU function's arguments lowers no kernel again (PTX from memory)."""
    from tracearray.gpu import codegen as gcodegen
    calls = []
    real = gcodegen.GpuKernelLowering.lower
    monkeypatch.setattr(gcodegen.GpuKernelLowering, "lower",
                        lambda self: calls.append(1) or real(self))
    for name in ("softmax", "layernorm", "black_scholes"):
        w = W.get(name)
        f = tracearray.compile(w.fn, device="cuda")
        f.lower(*inputs_for(w, grown_dims(w, 0)))
        before = len(calls)
        for k in (1, 2):
            f.lower(*inputs_for(w, grown_dims(w, k), seed=k))
        assert len(calls) == before, f"{name}: a new size generated IR"


# ---------------------------------------------------- the GPU's kernel cache on disk

@pytest.fixture
def gpu_disk(monkeypatch, tmp_path):
    """A fresh GPU kernel cache (memory and a disk folder of its own), and a list that
    records every kernel lowered to IR meanwhile (device='cuda' lowers without a GPU)."""
    from tracearray.gpu import codegen as gcodegen
    from tracearray.gpu import kernelcache
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(kernelcache, "_memory", type(kernelcache._memory)())
    lowered: list[str] = []
    real = gcodegen.GpuKernelLowering.lower
    monkeypatch.setattr(gcodegen.GpuKernelLowering, "lower",
                        lambda self: lowered.append(self.name) or real(self))
    return kernelcache, lowered


def _cuda_kernels(fn, *args):
    f = tracearray.compile(fn, device="cuda")
    return f, f.lower(*args).executable.kernels


def _softplus(x):
    return np.log1p(np.exp(x)) / np.sum(x)   # libdevice's exp and log1p, a full reduction


def test_gpu_kernels_found_by_description_on_disk_generate_no_ir(gpu_disk) -> None:
    """A process whose GPU kernels are on disk (the memory forgotten: as a new process)
    finds each kernel's PTX by its description: no IR generated, the same PTX, a disk hit
    counted; the IR is made when asked, and is the IR the PTX came from."""
    kernelcache, lowered = gpu_disk
    x = _f32(1000)
    _f, first = _cuda_kernels(_softplus, x)
    assert lowered and all(isinstance(k.source.ir, str) for k in first)
    irs = [k.ir for k in first]
    kernelcache.clear_memory()
    del lowered[:]
    f, again = _cuda_kernels(_softplus, x)
    assert lowered == []
    assert [k.ptx for k in again] == [k.ptx for k in first]
    info = f.cache_info()
    assert info.disk_hits == len(first) and info.compiles == 0
    assert [k.ir for k in again] == irs      # generated now, on demand
    assert len(lowered) == len(first)


def test_gpu_kernel_entry_of_a_changed_libdevice_is_not_used(gpu_disk, monkeypatch) -> None:
    """An entry made with libdevice names its file; when that file has changed (a new
    modification time), the entry is refused and the kernel lowered again."""
    kernelcache, lowered = gpu_disk
    x = _f32(1000)
    _cuda_kernels(_softplus, x)
    kernelcache.clear_memory()
    libdevice = str(kernelcache.ptxmod.find_libdevice())
    real_stat = os.stat

    def touched(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if str(path) == libdevice:
            return types.SimpleNamespace(st_size=st.st_size, st_mtime_ns=st.st_mtime_ns + 1)
        return st
    monkeypatch.setattr(os, "stat", touched)
    del lowered[:]
    with pytest.warns(CacheWarning, match="libdevice"):
        _cuda_kernels(_softplus, x)
    assert lowered


@pytest.mark.parametrize("payload", [b"", b"TAGPUK1\n{not json\n.version", b"TAGPUK1\n{}\nx",
                                     b"TAGPUK1\n" + json.dumps({"facts": {
                                         "row_cache_itemsize": 4, "row_cache_limit": 0, "row_cache_buffers": 1,
                                         "smem_static": 0, "rows_per_warp": 1},
                                         "ir_sha256": "0"}).encode() + b"\nnot ptx"])
def test_gpu_kernel_entry_damaged_inside_is_rebuilt(gpu_disk, payload) -> None:
    """An entry whose file checks out but whose content is not a kernel (truncated header,
    broken JSON, missing facts, not PTX) is refused with a warning and rebuilt."""
    kernelcache, lowered = gpu_disk
    x = _f32(300)
    _f, first = _cuda_kernels(_softplus, x)
    cache = kernelcache._disk_cache()
    keys = [name[:-4] for name in os.listdir(cache.folder) if name.endswith(".bin")]
    assert keys
    for key in keys:   # the same key and record, another payload
        path = cache.path(key)
        record = _stored_record(path)
        cache.store(key, payload, record)
    kernelcache.clear_memory()
    del lowered[:]
    with pytest.warns(CacheWarning):
        _f, again = _cuda_kernels(_softplus, x)
    assert lowered and [k.ptx for k in again] == [k.ptx for k in first]


def _stored_record(path: str) -> bytes:
    """The key record stored in a cache entry (diskcache's file format)."""
    import struct
    import zlib
    data = Path(path).read_bytes()
    (n,) = struct.unpack_from("<I", data, 8 + 2 + 2 + 32)
    start = 8 + 2 + 2 + 32 + 4 + 8 + 32
    return zlib.decompress(data[start:start + n]) if n else b""


def test_gpu_kernel_key_components(monkeypatch) -> None:
    """The GPU kernel key has every component it names, and where libdevice is looked for
    (TRACEARRAY_LIBDEVICE, CUDA_HOME) changes it: another libdevice may be found."""
    from tracearray.gpu import kernelcache
    target = kernelcache.ptxmod.DEFAULT_TARGET
    base = kernelcache.key_components("k", "map", False, target)
    assert set(base) == set(kernelcache.KEY_COMPONENTS)
    for var in ("TRACEARRAY_LIBDEVICE", "CUDA_HOME"):
        with monkeypatch.context() as m:
            m.setenv(var, "/somewhere/else")
            assert kernelcache.key_components("k", "map", False, target)["libdevice_search"] \
                != base["libdevice_search"]
    other = kernelcache.key_components("k", "map", True, target)
    assert [k for k in base if base[k] != other[k]] == ["wide"]
    other = kernelcache.key_components("k", "map", False,
                                       kernelcache.ptxmod.GpuTarget(80, 78))
    assert [k for k in base if base[k] != other[k]] == ["target"]


def test_gpu_check_kernel_keys_catches_a_description_that_misses_something(
        gpu_disk, monkeypatch) -> None:
    """TRACEARRAY_CHECK_KERNEL_KEYS=1: a GPU description that leaves out the op makes exp's
    and log's kernels share a key; the second is refused instead of running exp's PTX."""
    kernelcache, _lowered = gpu_disk
    real = tile_describe.describe_kernel
    monkeypatch.setattr(tile_describe, "describe_kernel",
                        lambda geo, name, math: real(geo, name, math).replace("log(", "exp("))
    monkeypatch.setenv("TRACEARRAY_CHECK_KERNEL_KEYS", "1")
    x = _f32(50) ** 2 + 0.5
    _cuda_kernels(lambda x: np.exp(x) + 1, x)
    kernelcache.clear_memory()
    with pytest.raises(Exception, match="other LLVM IR"):
        _cuda_kernels(lambda x: np.log(x) + 1, x)


def test_identical_kernels_of_a_function_compile_once(monkeypatch) -> None:
    """A loop's steps, unrolled by the trace, are identical kernels: one description (the
    function's name, not the kernel's position) and one piece of code whose functions are
    named after it, compiled once (200 steps of a stencil compiled 230 kernels, 14 s)."""
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "off")
    monkeypatch.setattr(codecache, "_memory", weakref.WeakValueDictionary())

    def heat(u):
        for _ in range(40):
            u = u.copy()
            u[1:-1, 1:-1] += 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                    - 4 * u[1:-1, 1:-1])
        return u
    u = np.random.default_rng(3).random((20, 24))
    f = tracearray.compile(heat, device="cpu")
    np.testing.assert_allclose(f(u), heat(u), rtol=1e-12)
    kernels = [k for k in f.lower(u).executable.kernels if k is not None]
    assert len(kernels) >= 40 and f.cache_info().compiles <= 3
    assert len({k.symbol for k in kernels}) == f.cache_info().compiles
    assert all(k.symbol.startswith("heat_k_") for k in kernels)
