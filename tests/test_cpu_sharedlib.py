"""Kernels as shared libraries (``tracearray/cpu/sharedlib.py``) and their disk entries.

The disk cache holds machine code, so a library read from it gets issue 11's checks (a
trusted folder and file, the header, digest and full key) and a structure check before
``dlopen`` sees it: nothing that would run code when loaded, no foreign dependency, no search
path. A refused entry is deleted, warned about and compiled again; nothing of it runs.
"""
from __future__ import annotations

import gc
import os
import subprocess
import threading
import warnings
import weakref

import numpy as np
import pytest

import tracearray
from tracearray.cpu import codecache, sharedlib
from tracearray.cpu.elf import MalformedObject
from tracearray.diskcache import CacheWarning, encode_entry, key_record, record_key

DRIVER = sharedlib.linker()
pytestmark = [pytest.mark.skipif(DRIVER is None, reason="no C compiler driver to link with"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(root))
    # a kernel cache of this test's own: every lookup below reaches the disk
    monkeypatch.setattr(codecache, "_memory", weakref.WeakValueDictionary())
    return root


def _c_library(tmp_path, source: str, *flags: str) -> bytes:
    src, out = tmp_path / "lib.c", tmp_path / "lib.so"
    src.write_text(source)
    subprocess.run([DRIVER, "-shared", "-fPIC", "-o", str(out), str(src), *flags], check=True,
                   capture_output=True)
    return out.read_bytes()


def _kernel_library(tmp_path) -> bytes:
    """The shared library of a real kernel, as the cache stores it."""
    f = tracearray.compile(lambda x: np.exp(x) * 2 - 1, device="cpu")
    (ck,) = f.lower(np.ones(5)).executable.kernels
    from tracearray.cpu.jit import get_jit
    return sharedlib.link(get_jit().emit_pic_object(ck.ir), DRIVER)


# ------------------------------------------------------------------ the structure check

def test_a_kernel_library_passes_the_check_and_loads(tmp_path) -> None:
    data = _kernel_library(tmp_path)
    sharedlib.check_library(data)
    lib = sharedlib.SharedLibrary(data)
    assert lib.address("_lambda__k0") and lib.address("no_such_function") is None
    before = sharedlib.live_libraries()
    lib.close()
    assert sharedlib.live_libraries() == before - 1


@pytest.mark.parametrize("what, source, flags, refused", [
    ("a constructor", "__attribute__((constructor)) static void boom(void) {}\n", (),
     "runs code when loaded"),
    ("a search path", "int k(void) { return 1; }\n", ("-nostartfiles", "-Wl,-rpath,/tmp"),
     "search paths"),
])
def test_libraries_that_would_run_or_find_code_are_refused(tmp_path, what, source, flags,
                                                           refused) -> None:
    with pytest.raises(MalformedObject, match=refused):
        sharedlib.check_library(_c_library(tmp_path, source, *flags))


def test_a_library_needing_another_library_is_refused(tmp_path) -> None:
    dep = tmp_path / "dep"
    dep.mkdir()
    (dep / "libdep.so").write_bytes(_c_library(dep, "int d(void) { return 2; }\n",
                                               "-nostartfiles"))
    data = _c_library(tmp_path, "int d(void);\nint k(void) { return d(); }\n", "-nostartfiles",
                      f"-L{dep}", "-ldep")
    with pytest.raises(MalformedObject, match="needs 'libdep.so'"):
        sharedlib.check_library(data)


@pytest.mark.parametrize("damage", ["truncated", "relocatable", "garbage", "empty"])
def test_malformed_libraries_are_refused(tmp_path, damage) -> None:
    data = _kernel_library(tmp_path)
    bad = {"truncated": data[:300], "garbage": os.urandom(len(data)), "empty": b"",
           "relocatable": data[:16] + b"\x01\x00" + data[18:]}[damage]
    with pytest.raises(MalformedObject):
        sharedlib.check_library(bad)


# ----------------------------------------------------------------- entries on the disk

def _entry_for(f, x) -> tuple[str, bytes]:
    (ck,) = f.lower(x).executable.kernels
    record = key_record(codecache.key_components(ck.description),
                        codecache.KERNEL_KEY_COMPONENTS, "kernel_key")
    return record_key(record), record


def test_an_entry_that_would_run_code_is_refused_and_never_loaded(cache_root, tmp_path) -> None:
    """A valid entry (header, digest, full key) holding a library with a constructor: refused
    by the structure check, deleted with a warning, compiled again; the constructor never
    ran."""
    def body(x):
        return np.sqrt(x) + 0.25
    x = np.linspace(0, 4, 33)
    key, record = _entry_for(tracearray.compile(body, device="cpu"), x)
    gc.collect()
    marker = tmp_path / "ran"
    evil = _c_library(tmp_path, '#include <stdio.h>\n__attribute__((constructor)) static void '
                      f'boom(void) {{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n'
                      "void _lambda__k0(void) {}\n")
    payload = codecache.PAYLOAD_MAGIC + b"S" + bytes(32) + evil
    path = cache_root / "cpu" / f"{key}.bin"
    path.write_bytes(encode_entry(key, payload, record))
    path.chmod(0o600)
    with pytest.warns(CacheWarning, match="runs code when loaded"):
        got = tracearray.compile(body, device="cpu")(x)
    np.testing.assert_allclose(got, body(x))
    assert not marker.exists()
    assert b"TAKCODE1S" in path.read_bytes() and evil not in path.read_bytes()   # rewritten


def test_a_damaged_library_entry_is_rebuilt(cache_root) -> None:
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


def test_a_link_failure_runs_the_kernel_through_mcjit(cache_root, monkeypatch) -> None:
    def refuse(obj, driver):
        raise sharedlib.LinkError("no linking today")
    monkeypatch.setattr(sharedlib, "link", refuse)
    x = np.linspace(-1, 1, 9)
    np.testing.assert_allclose(tracearray.compile(lambda x: np.arctan(x) - 2, device="cpu")(x),
                               np.arctan(x) - 2)
    (path,) = (cache_root / "cpu").glob("*.bin")
    assert b"TAKCODE1O" in path.read_bytes()     # an MCJIT object, loaded by MCJIT later


_OPS = (np.sin, np.cos, np.exp, np.tanh, np.arctan, np.log1p)


def _same_named_kernels(k: int, alive: list) -> None:
    """Four different kernels, all named "_lambda__k0", kept alive, each checked."""
    for second in (np.abs, np.negative, np.floor, np.ceil):
        def body(x, op=_OPS[k], second=second):
            return op(x) + second(x)
        f = tracearray.compile(lambda x, body=body: body(x), device="cpu")
        alive.append(f)
        x = np.linspace(0, 1, 64 + k)
        np.testing.assert_allclose(f(x), body(x), rtol=1e-12)


def test_libraries_loaded_one_after_another_get_their_own_code(cache_root) -> None:
    """Libraries are opened through /proc/self/fd/N, fd numbers are reused, and dlopen returns
    a library already loaded under the same name: each one gets a name of its own (a second
    kernel named like the first ran the first one's code)."""
    alive: list = []
    for k in range(len(_OPS)):
        _same_named_kernels(k, alive)
    assert sharedlib.live_libraries() >= 4 * len(_OPS)


def test_threads_loading_libraries_at_once_get_their_own_code(cache_root) -> None:
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
