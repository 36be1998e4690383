"""Disk cache of compiled CPU objects (ARCHITECTURE.md decision 7, STYLE.md item 7).

Every test uses a temporary folder through ``TRACEARRAY_CACHE_DIR`` or ``CpuJit(cache_dir=)``;
none touches the user's cache.
"""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numpy as np
import pytest
from llvmlite import ir

from tracearray import config
from tracearray import diskcache
from tracearray.cpu import jit as jit_module
from tracearray.diskcache import CacheWarning, CorruptEntry, ObjectCache, decode_entry, encode_entry
from tracearray.cpu.jit import KEY_COMPONENTS, CpuJit, object_key

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def exp_module(scale: float = 2.0) -> str:
    """void k(float* x, float* out, i64 n): out[i] = expf(x[i]) * scale + 1 (libm, vectorised)."""
    f32, i64 = ir.FloatType(), ir.IntType(64)
    module = ir.Module(name="diskcache_probe")
    expf = ir.Function(module, ir.FunctionType(f32, [f32]), "expf")
    expf.attributes.add("nounwind")
    expf.attributes.add("readnone")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [f32.as_pointer(), f32.as_pointer(), i64]), "k")
    x, out, n = fn.args
    x.add_attribute("noalias")
    out.add_attribute("noalias")
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    v = b.call(expf, [b.load(b.gep(x, [i], inbounds=True))])
    r = b.fadd(b.fmul(v, ir.Constant(f32, scale)), ir.Constant(f32, 1.0))
    b.store(r, b.gep(out, [i], inbounds=True))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


def run_exp(jit: CpuJit, text: str, scale: float = 2.0) -> None:
    """Compile through ``jit`` and check the results against NumPy."""
    kernel = KERNEL(jit.compile(text, ["k"])["k"])
    x = np.linspace(-4, 4, 1003, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x.ctypes.data, out.ctypes.data, x.size)
    np.testing.assert_allclose(out, np.exp(x) * np.float32(scale) + 1, rtol=4e-6)


def entries(root) -> list[str]:
    folder = os.path.join(str(root), "cpu")
    return sorted(f for f in os.listdir(folder) if f.endswith(".bin")) if os.path.isdir(folder) else []


@pytest.fixture
def cache_root(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A private cache root; the default location points into tmp_path too, as a tripwire."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRACEARRAY_CACHE_MAX_MB", raising=False)
    return root


# --------------------------------------------------------------------------- the key

@pytest.fixture(scope="module")
def base_components() -> dict[str, str]:
    return CpuJit(cache_dir=None).key_components(exp_module())


def test_key_covers_exactly_the_listed_components(base_components) -> None:
    assert set(base_components) == set(KEY_COMPONENTS)
    assert all(isinstance(v, str) and v for v in base_components.values())
    with pytest.raises(ValueError, match="missing"):
        object_key({k: v for k, v in base_components.items() if k != "llvm"})
    with pytest.raises(ValueError, match="unexpected"):
        object_key({**base_components, "extra": "1"})


@pytest.mark.parametrize("component", KEY_COMPONENTS)
def test_each_component_changes_the_key(base_components, component: str) -> None:
    key = object_key(base_components)
    assert object_key(dict(base_components)) == key                 # deterministic
    altered = {**base_components, component: base_components[component] + " "}
    assert object_key(altered) != key, f"{component} does not reach the cache key"


def test_key_fields_are_length_prefixed(base_components) -> None:
    """Moving text from one component to its neighbour is a different key."""
    moved = {**base_components, "cpu": base_components["cpu"] + "x",
             "features": base_components["features"][:-1]}
    shifted = {**base_components, "cpu": base_components["cpu"][:-1],
               "features": base_components["cpu"][-1] + base_components["features"]}
    keys = {object_key(base_components), object_key(moved), object_key(shifted)}
    assert len(keys) == 3


def test_key_components_are_the_jits_real_inputs(base_components, monkeypatch) -> None:
    import llvmlite
    import llvmlite.binding as llvm

    import tracearray

    jit = CpuJit(cache_dir=None)
    c = base_components
    assert (c["triple"], c["cpu"], c["features"], c["data_layout"]) == (
        jit.triple, jit.cpu_name, jit.features, jit.data_layout)
    assert c["llvmlite"] == llvmlite.__version__
    assert c["llvm"] == ".".join(map(str, llvm.llvm_version_info))
    assert c["tracearray"] == tracearray.__version__
    assert c["module"].startswith(exp_module().split("\n", 1)[0])
    # Vector math changes the variants and (through the declaration rewrite) the module text.
    plain = CpuJit(vector_math=False, cache_dir=None).key_components(exp_module())
    if jit.has_vector_math:
        assert plain["vector_variants"] != c["vector_variants"] and plain["module"] != c["module"]
    # The codegen options the JIT passes to LLVM are the ones in the key.
    monkeypatch.setitem(jit_module.CODEGEN_OPTIONS, "opt", 2)
    assert CpuJit(cache_dir=None).key_components(exp_module())["codegen_options"] != c["codegen_options"]


def test_different_modules_have_different_keys() -> None:
    jit = CpuJit(cache_dir=None)
    assert jit.cache_key(exp_module(2.0)) != jit.cache_key(exp_module(3.0))


# ---------------------------------------------------------------- hits and rebuilds

def test_second_jit_loads_from_disk(cache_root) -> None:
    first = CpuJit()
    run_exp(first, exp_module())
    run_exp(first, exp_module())
    assert (first.stats.compiles, first.stats.memory_hits, first.stats.disk_writes) == (1, 1, 1)
    assert len(entries(cache_root)) == 1
    second = CpuJit()
    run_exp(second, exp_module())
    assert (second.stats.disk_hits, second.stats.compiles) == (1, 0)
    assert second.modules_compiled == 1       # an engine was built, whatever its source
    assert not (cache_root.parent / "xdg").exists()


def _truncate(path: str) -> None:
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


def _garbage(path: str) -> None:
    size = os.path.getsize(path)
    open(path, "wb").write(np.random.default_rng(0).bytes(size))


def _flip_payload_byte(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    data[diskcache.HEADER_SIZE + 40] ^= 0xFF
    open(path, "wb").write(bytes(data))


def _old_format(path: str) -> None:
    data = bytearray(open(path, "rb").read())
    data[8:10] = (diskcache.FORMAT_VERSION + 1).to_bytes(2, "little")
    open(path, "wb").write(bytes(data))


def _empty(path: str) -> None:
    open(path, "wb").close()


@pytest.mark.parametrize("damage", [_truncate, _garbage, _flip_payload_byte, _old_format, _empty],
                         ids=["truncated", "garbage", "flipped-byte", "other-format", "empty"])
def test_corrupt_entry_is_discarded_and_rebuilt(cache_root, damage) -> None:
    run_exp(CpuJit(), exp_module())
    (name,) = entries(cache_root)
    path = os.path.join(cache_root, "cpu", name)
    damage(path)
    jit = CpuJit()
    run_exp(jit, exp_module())                       # right results, no crash
    assert (jit.stats.disk_hits, jit.stats.compiles, jit.stats.disk_writes) == (0, 1, 1)
    assert jit.stats.disk_discarded == 1
    assert decode_entry(name[:-4], open(path, "rb").read(), None)     # rewritten, valid
    again = CpuJit()
    run_exp(again, exp_module())
    assert again.stats.disk_hits == 1


def test_an_entry_that_is_a_directory_is_refused(cache_root) -> None:
    # (Python's file object refuses a directory: the compile failed with an internal error)
    run_exp(CpuJit(), exp_module())
    (name,) = entries(cache_root)
    path = os.path.join(cache_root, "cpu", name)
    os.remove(path)
    os.mkdir(path)
    jit = CpuJit()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        run_exp(jit, exp_module())                   # right results, no crash
    assert (jit.stats.disk_hits, jit.stats.compiles) == (0, 1)


def test_a_bad_size_bound_warns_and_the_compile_goes_on(cache_root, monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_CACHE_MAX_MB", "lots")
    jit = CpuJit()
    with pytest.warns(CacheWarning, match="TRACEARRAY_CACHE_MAX_MB"):
        run_exp(jit, exp_module())
    assert jit.stats.compiles == 1


def test_entry_under_another_key_is_rejected(cache_root) -> None:
    """A valid entry copied to another key's file name (or a colliding file) is not loaded."""
    jit = CpuJit()
    run_exp(jit, exp_module(2.0))
    (name,) = entries(cache_root)
    other = jit.cache_key(exp_module(3.0))
    folder = os.path.join(cache_root, "cpu")
    os.link(os.path.join(folder, name), os.path.join(folder, other + ".bin"))
    fresh = CpuJit()
    run_exp(fresh, exp_module(3.0), scale=3.0)
    assert (fresh.stats.disk_hits, fresh.stats.compiles, fresh.stats.disk_discarded) == (0, 1, 1)


def test_entry_format_round_trip() -> None:
    key = "ab" * 32
    payload = b"\x7fELF" + bytes(range(256))
    data = encode_entry(key, payload)
    assert data[:8] == diskcache.MAGIC and len(data) == diskcache.HEADER_SIZE + len(payload)
    assert decode_entry(key, data) == payload
    with pytest.raises(CorruptEntry, match="key"):
        decode_entry("cd" * 32, data)
    with pytest.raises(CorruptEntry, match="payload"):
        decode_entry(key, data + b"x")
    with pytest.raises(CorruptEntry, match="header"):
        decode_entry(key, data[:10])
    with pytest.raises(ValueError, match="hex"):
        ObjectCache("/nonexistent").path("../../etc/passwd")


# ------------------------------------------------------------- configuration

@pytest.mark.parametrize("value", ["", "0", "off", "OFF", " none "])
def test_disabled_cache_writes_nothing(tmp_path, monkeypatch, value: str) -> None:
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config.cache_dir() is None
    jit = CpuJit()
    run_exp(jit, exp_module())
    assert (jit.stats.compiles, jit.stats.disk_writes) == (1, 0)
    assert list(tmp_path.iterdir()) == []


def test_default_and_explicit_locations(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TRACEARRAY_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert config.cache_dir() == str(tmp_path / "xdg" / "tracearray")
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path / "mine"))
    assert config.cache_dir() == str(tmp_path / "mine")
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "~/tc")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.cache_dir() == str(tmp_path / "tc")


def test_size_bound_setting(monkeypatch) -> None:
    monkeypatch.delenv("TRACEARRAY_CACHE_MAX_MB", raising=False)
    assert config.cache_max_bytes() == 256 << 20
    monkeypatch.setenv("TRACEARRAY_CACHE_MAX_MB", "1.5")
    assert config.cache_max_bytes() == 3 << 19
    monkeypatch.setenv("TRACEARRAY_CACHE_MAX_MB", "unlimited")
    assert config.cache_max_bytes() is None
    for bad in ("0", "-3", "lots"):
        monkeypatch.setenv("TRACEARRAY_CACHE_MAX_MB", bad)
        with pytest.raises(ValueError, match="TRACEARRAY_CACHE_MAX_MB"):
            config.cache_max_bytes()


def test_unwritable_cache_degrades_with_one_warning(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(blocker / "cache"))   # fails even for root
    jit = CpuJit()
    with pytest.warns(CacheWarning, match="TRACEARRAY_CACHE_DIR") as record:
        run_exp(jit, exp_module(2.0))
        run_exp(jit, exp_module(3.0), scale=3.0)
    assert len([w for w in record if issubclass(w.category, CacheWarning)]) == 1
    assert (jit.stats.compiles, jit.stats.disk_writes) == (2, 0)


def test_read_only_cache_still_serves_hits(cache_root, monkeypatch) -> None:
    """A folder that refuses writes (emulated: root may write anywhere) still gives hits."""
    run_exp(CpuJit(), exp_module(2.0))

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)   # (diskcache imports it when writing)
    jit = CpuJit()
    with pytest.warns(CacheWarning, match="not writing"):
        run_exp(jit, exp_module(2.0))
        run_exp(jit, exp_module(3.0), scale=3.0)
    assert (jit.stats.disk_hits, jit.stats.compiles, jit.stats.disk_writes) == (1, 1, 0)


# ------------------------------------------------------- size bound, concurrency

def _key(i: int) -> str:
    return f"{i:064x}"


def test_size_bound_evicts_least_recently_used(tmp_path) -> None:
    entry = 1000 + diskcache.HEADER_SIZE
    cache = ObjectCache(str(tmp_path), max_bytes=int(3.5 * entry))   # evicts down to 90%
    now = time.time()
    for i in range(3):
        assert cache.store(_key(i), bytes(1000))
        os.utime(cache.path(_key(i)), (now - 100 + i, now - 100 + i))
    assert cache.load(_key(0)) is not None            # a hit makes entry 0 the most recent
    stale = tmp_path / ".0000.dead.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (now - 7200, now - 7200))
    assert cache.store(_key(3), bytes(1000))          # over the bound: the oldest goes
    left = sorted(f for f in os.listdir(tmp_path))
    assert left == [_key(i) + ".bin" for i in (0, 2, 3)]
    assert cache.counts.evicted == 1


def test_folder_is_not_listed_on_every_write(tmp_path, monkeypatch) -> None:
    cache = ObjectCache(str(tmp_path), max_bytes=1 << 30)
    scans = []
    real_scandir = os.scandir
    monkeypatch.setattr(diskcache.os, "scandir", lambda p: scans.append(p) or real_scandir(p))
    for i in range(diskcache._RESCAN_EVERY + 1):
        cache.store(_key(i), bytes(100))
    assert len(scans) == 2           # the first write, then once per _RESCAN_EVERY writes


def test_concurrent_writers_and_readers(tmp_path) -> None:
    """Many writers of one key and readers of it: readers never see a partial entry."""
    payloads = [bytes([i]) * 20000 for i in range(4)]
    key, stop, seen = _key(7), threading.Event(), []
    readers = [ObjectCache(str(tmp_path)) for _ in range(2)]

    def write(i: int) -> None:
        cache = ObjectCache(str(tmp_path))              # one instance per "process"
        for _ in range(40):
            assert cache.store(key, payloads[i])

    def read(cache: ObjectCache) -> None:
        while not stop.is_set():
            got = cache.load(key)
            if got is not None:
                seen.append(got in payloads)

    threads = [threading.Thread(target=read, args=(c,)) for c in readers]
    threads += [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads[2:]:
        t.join()
    stop.set()
    for t in threads[:2]:
        t.join()
    assert seen and all(seen)
    assert sum(c.counts.discarded for c in readers) == 0
    assert os.listdir(tmp_path) == [key + ".bin"]      # no temporary files left behind


# -------------------------------------------------------------- across processes

_CHILD = """
import json, numpy as np, tracearray
from tracearray.cpu.jit import get_jit

def f(x, y):
    return np.exp(x) * y + 1

def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)

x = np.linspace(-3, 3, 40 * 33, dtype=np.float32).reshape(40, 33)
y = np.cos(x)
results = [tracearray.compile(f)(x, y), tracearray.compile(softmax)(x)]
ok = [bool(np.allclose(r, ref, rtol=1e-5)) for r, ref in zip(results, [f(x, y), softmax(x)])]
print(json.dumps({"stats": vars(get_jit().stats), "ok": ok,
                  "bytes": [r.tobytes().hex() for r in results]}))
"""


def test_new_process_loads_from_disk(cache_root) -> None:
    env = {**os.environ, "TRACEARRAY_DEBUG": "1"}

    def child() -> tuple[dict, str]:
        proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                              env=env, check=True, timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    cold, _ = child()
    assert cold["ok"] == [True, True]
    assert cold["stats"]["compiles"] >= 2 and cold["stats"]["disk_hits"] == 0
    assert cold["stats"]["disk_writes"] == cold["stats"]["compiles"]
    assert len(entries(cache_root)) == cold["stats"]["compiles"]
    warm, log = child()
    assert warm["stats"]["compiles"] == 0
    assert warm["stats"]["disk_hits"] == cold["stats"]["compiles"]
    assert warm["bytes"] == cold["bytes"]                    # bit-identical results
    assert "cpu kernel cache: loaded" in log


def test_eight_processes_compiling_the_same_functions_at_once(cache_root) -> None:
    """Eight processes start together on an empty cache and compile the same kernels: each
    gets right, bit-identical results with no warning; the folder ends with one entry per
    kernel and no temporary file; a ninth process compiles nothing."""
    env = {**os.environ, "PYTHONWARNINGS": "always::UserWarning"}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(8)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr
        assert "CacheWarning" not in stderr, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert all(o["ok"] == [True, True] for o in outs)
    assert len({json.dumps(o["bytes"]) for o in outs}) == 1
    kernels = {o["stats"]["compiles"] + o["stats"]["disk_hits"] for o in outs}
    assert len(kernels) == 1                       # every process built the same kernels
    assert len(entries(cache_root)) == kernels.pop()
    leftovers = [n for n in os.listdir(cache_root / "cpu") if not n.endswith(".bin")]
    assert leftovers == []
    ninth = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                           check=True, timeout=300)
    stats = json.loads(ninth.stdout.strip().splitlines()[-1])["stats"]
    assert stats["compiles"] == 0 and stats["disk_hits"] == len(entries(cache_root))


def test_full_disk_degrades_to_memory_with_one_warning(cache_root, monkeypatch) -> None:
    """A write that fails for lack of space (ENOSPC) warns once; compiling goes on, nothing
    half-written is left, and entries already there are still read."""
    import errno
    run_exp(CpuJit(), exp_module(2.0))            # one good entry, written before the disk fills
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.f = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(diskcache.os, "fdopen",
                        lambda fd, mode="r", *a, **k: Full(fd, mode) if "w" in mode
                        else real_fdopen(fd, mode, *a, **k))
    jit = CpuJit()
    with pytest.warns(CacheWarning, match="No space left") as record:
        run_exp(jit, exp_module(2.0))              # read: a hit
        run_exp(jit, exp_module(3.0), scale=3.0)   # compiled, its write fails
        run_exp(jit, exp_module(4.0), scale=4.0)   # compiled, not written at all
    assert len([w for w in record if issubclass(w.category, CacheWarning)]) == 1
    assert (jit.stats.disk_hits, jit.stats.compiles, jit.stats.disk_writes) == (1, 2, 0)
    assert len(entries(cache_root)) == 1
    assert [n for n in os.listdir(cache_root / "cpu") if not n.endswith(".bin")] == []
