"""tracearray's own loader of kernel objects (``tracearray/cpu/loader.py``) and their entries.

A kernel object is loaded without LLVM: sections placed, external symbols resolved in the C
library's libraries, relocations applied, code made executable. It must run exactly what MCJIT
ran, refuse what it does not implement (MCJIT then loads the object), and an object read from
the disk gets issue 11's checks before it is loaded: a refused entry is deleted, warned about
and compiled again; nothing of it runs.
"""
from __future__ import annotations

import gc
import os
import struct
import sys
import threading
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray.cpu import codecache, elf, loader
from tracearray.cpu.jit import get_jit
from tracearray.diskcache import (CacheWarning, decode_entry, encode_entry, key_record,
                                  record_key)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks import workloads as W  # noqa: E402
from benchmarks.overhead import inputs_for  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"),
                       reason="the loader knows x86-64 ELF objects only"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
]


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(root))
    # a kernel cache of this test's own: every lookup below reaches the disk
    monkeypatch.setattr(codecache, "_memory", weakref.WeakValueDictionary())
    return root


def _object_of(fn, *args) -> tuple[bytes, str]:
    (ck,) = [k for k in tracearray.compile(fn, device="cpu").lower(*args).executable.kernels
             if k is not None]
    return get_jit().emit_object(ck.ir), ck.symbol


# --------------------------------------------------------------------- what it runs

def test_loaded_kernels_compute_what_mcjit_computes() -> None:
    """Every kernel of the 13 workloads, loaded both ways, gives bit-identical results."""
    jit = get_jit()
    for name in W.names():
        w = W.get(name)
        args = inputs_for(w, w.dims("check"))
        exe = tracearray.compile(w.fn, device="cpu").lower(*args).executable
        results = []
        for use_loader in (True, False):
            keep = []
            for ck in exe.kernels:
                if ck is None:
                    continue
                obj = jit.emit_object(ck.ir)
                elf.check_object(obj, elf.EM_X86_64)
                if use_loader:
                    code = loader.load_object(obj)
                    address = code.address
                else:
                    code = jit.load_object(obj, [ck.symbol])
                    address = code.engine.get_function_address
                keep.append(code)
                ck.entry = type(ck.entry)(address(ck.symbol))
                if ck.combine is not None:
                    ck.combine = type(ck.combine)(address(ck.symbol + "_combine"))
            exe._plan_call(exe._template_buffers(args))
            results.append([r.copy() for r in W.as_outputs(exe.run(args))])
            del keep
        for a, b in zip(*results):
            assert a.tobytes() == b.tobytes(), name


def test_the_code_is_unmapped_when_closed() -> None:
    obj, name = _object_of(lambda x: np.exp(x) * 2 - 1, np.ones(5))
    # Other tests of this process drop loaded code (a replaced memory cache): collect it now,
    # not between the counts.
    gc.collect()
    gc.disable()
    try:
        before = loader.live_objects()
        code = loader.load_object(obj)
        assert code.address(name) and code.address("no_such_function") is None
        assert loader.live_objects() == before + 1
        code.close()
        code.close()      # (twice is fine)
        assert loader.live_objects() == before
    finally:
        gc.enable()


def _retype_first_relocation(obj: bytes, new_type: int) -> bytes:
    """The object with its first RELA entry's type replaced."""
    data = bytearray(obj)
    ehdr = elf._EHDR.unpack_from(data)
    shoff, shnum = ehdr[6], ehdr[12]
    for i in range(shnum):
        sh = elf._SHDR.unpack_from(data, shoff + i * elf._SHDR.size)
        if sh[1] == elf.SHT_RELA and sh[5]:
            r_offset, r_info, addend = elf._RELA.unpack_from(data, sh[4])
            struct.pack_into("<QQq", data, sh[4], r_offset, (r_info >> 32 << 32) | new_type,
                             addend)
            return bytes(data)
    raise AssertionError("no relocation")


def test_what_it_does_not_implement_is_refused() -> None:
    obj, _name = _object_of(lambda x: np.exp(x) * 2 - 1, np.ones(5))
    with pytest.raises(loader.CannotLoad, match="relocation type 10"):
        loader.load_object(_retype_first_relocation(obj, 10))      # R_X86_64_32


def test_an_unknown_external_symbol_is_refused(monkeypatch) -> None:
    obj, _name = _object_of(lambda x: np.exp(x) * 2 - 1, np.ones(5))
    assert b"expf" in obj or b"exp" in obj
    monkeypatch.setattr(loader, "_LIBRARIES", ())
    monkeypatch.setattr(loader, "_libs", [])
    monkeypatch.setattr(loader, "_libc", None)
    with pytest.raises(loader.CannotLoad, match="lack"):
        loader.load_object(obj)


def test_a_finalizer_inside_the_loaders_setup_does_not_deadlock(monkeypatch) -> None:
    """A loaded object collected while the same thread sets up the loader's libraries
    (``_system`` holds its lock and allocates; the garbage collector may run a finalizer
    right there) unmaps with its own ``munmap``: taking the loader's lock again hung the
    default suite twice (2026-12-06, in ``test_an_unknown_external_symbol_is_refused``)."""
    obj, _name = _object_of(lambda x: np.exp(x) * 2 - 1, np.ones(5))
    doomed = [loader.load_object(obj)]
    gone = weakref.ref(doomed[0])
    real_cdll = loader.ctypes.CDLL

    def cdll(*args, **kwargs):     # the collector, at the worst moment
        doomed.clear()
        gc.collect()
        return real_cdll(*args, **kwargs)
    monkeypatch.setattr(loader, "_libs", [])
    monkeypatch.setattr(loader, "_libc", None)
    monkeypatch.setattr(loader.ctypes, "CDLL", cdll)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (loader._system(), done.set()), daemon=True)
    thread.start()
    thread.join(30)
    assert done.is_set(), "the loader deadlocked on its own lock"
    assert gone() is None      # collected (and unmapped) inside the setup


# ----------------------------------------------------------------- entries on the disk

def _key_of(f, x) -> tuple[str, bytes]:
    (ck,) = f.lower(x).executable.kernels
    record = key_record(codecache.key_components(ck.description),
                        codecache.KERNEL_KEY_COMPONENTS, "kernel_key")
    return record_key(record), record


@pytest.mark.parametrize("damage", ["garbage", "truncated-object", "retyped-relocation"])
def test_a_valid_entry_holding_a_bad_object_is_refused(cache_root, damage) -> None:
    """An entry whose header, digest and full key are right but whose object is not one we
    would load: refused before the loader sees it, deleted with a warning, compiled again."""
    def body(x):
        return np.exp(x) + 0.25     # (a call of expf: relocations)
    x = np.linspace(0, 4, 33)
    f = tracearray.compile(body, device="cpu")
    key, record = _key_of(f, x)
    path = cache_root / "cpu" / f"{key}.bin"
    obj, _name = _object_of(body, x)
    del f
    gc.collect()
    if damage == "garbage":
        bad = os.urandom(len(obj))
    elif damage == "truncated-object":
        bad = obj[:len(obj) // 2]
    else:    # a type neither MCJIT nor the loader implements (3: R_X86_64_GOT32)
        bad = _retype_first_relocation(obj, 3)
    path.write_bytes(encode_entry(key, codecache.PAYLOAD_MAGIC + b"O" + bytes(32) + bad, record))
    path.chmod(0o600)
    with pytest.warns(CacheWarning, match="refused"):
        got = tracearray.compile(body, device="cpu")(x)
    np.testing.assert_allclose(got, body(x))
    # rewritten with the kernel's own object
    assert decode_entry(key, path.read_bytes(), record).endswith(obj)


def test_a_damaged_entry_is_rebuilt(cache_root) -> None:
    def body(x):
        return np.tanh(x) * 3
    x = np.linspace(-2, 2, 17)
    np.testing.assert_allclose(tracearray.compile(body, device="cpu")(x), body(x))
    gc.collect()
    (path,) = (cache_root / "cpu").glob("*.bin")
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 100])
    with pytest.warns(CacheWarning, match="refused"):
        got = tracearray.compile(body, device="cpu")(x)
    np.testing.assert_allclose(got, body(x))
    assert path.read_bytes() == data


def test_a_folder_others_can_write_is_not_used(cache_root) -> None:
    (cache_root / "cpu").mkdir(parents=True)
    os.chmod(cache_root / "cpu", 0o777)
    with pytest.warns(CacheWarning, match="writable by group and others"):
        got = tracearray.compile(lambda x: x * 7 + 1, device="cpu")(np.arange(4.0))
    np.testing.assert_array_equal(got, np.arange(4.0) * 7 + 1)
    assert list((cache_root / "cpu").iterdir()) == []


_OPS = (np.sin, np.cos, np.exp, np.tanh, np.arctan, np.log1p)


def _same_named_kernels(k: int, alive: list) -> None:
    """Four different kernels, all named "_lambda__k0", kept alive, each checked."""
    for second in (np.abs, np.negative, np.floor, np.ceil):
        def body(x, op=_OPS[k], second=second):
            return op(x) + second(x)
        f = tracearray.compile(lambda x, body=body: body(x), device="cpu")
        alive.append(f)
        x = np.linspace(0, 1, 64 + k)
        # (atol: tanh(x) - |x| cancels; libm's last-ulp difference from NumPy's is absolute)
        np.testing.assert_allclose(f(x), body(x), rtol=1e-12, atol=1e-14)


def test_threads_loading_kernels_at_once_get_their_own_code(cache_root) -> None:
    """Same-named kernels of different programs, compiled and loaded from several threads at
    once and kept alive together: each runs its own code."""
    errors, alive = [], []

    def work(k: int) -> None:
        try:
            _same_named_kernels(k, alive)
        except BaseException as e:   # noqa: BLE001 -- reported below
            errors.append(e)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(_OPS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not errors, errors
    assert loader.live_objects() >= 4 * len(_OPS)


@pytest.mark.parametrize("far", [False, True])
def test_position_independent_objects_load_through_stubs_and_slots(monkeypatch, far) -> None:
    """An object of the small code model (PIC) calls libm through PLT32 relocations (through
    a jump stub each when libm is more than 2 GiB away: ``far`` makes every call so) and may
    read addresses from GOT slots: loaded, it computes what MCJIT's large-model object
    computes."""
    if far:
        monkeypatch.setattr(loader, "_NEAR", 0)
    jit = get_jit()
    x = np.linspace(-3, 3, 1001)
    f = tracearray.compile(lambda x: np.exp(x) * np.sin(x) - np.log1p(np.abs(x)), device="cpu")
    want = f(x)
    exe = f.lower(x).executable
    (ck,) = exe.kernels
    from tracearray.cpu import mathlib
    tm = jit._target.create_target_machine(cpu=jit.cpu_name, features=jit.features, opt=3,
                                           reloc="pic", codemodel="default")
    llvm = __import__("llvmlite.binding", fromlist=["binding"])
    context = llvm.create_context()
    mod = jit._parse_and_optimize(mathlib.apply_vector_abi(ck.ir, jit.vector_variants),
                                  context, tm)
    obj = tm.emit_object(mod)
    mod.close()
    context.close()
    elf.check_object(obj, elf.EM_X86_64)
    assert b".rela.text" in obj
    code = loader.load_object(obj)
    ck.entry = type(ck.entry)(code.address(ck.symbol))
    exe._plan_call(exe._template_buffers([x]))
    np.testing.assert_array_equal(exe.run([x])[0], want)
    code.close()
