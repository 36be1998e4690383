"""A shared or hostile disk cache (issue 11): provenance, full keys, object structure, PTX.

Whoever can write the cache folder can make tracearray run their code, so the folder must be
the user's own and writable by no one else (as ssh and pip require); an entry must be the one
made for the key looked up (the full key is stored and compared); a CPU object must be a
well-formed ELF relocatable before LLVM's loader sees it (a crafted one crashed the process);
the PTX cache has a digest and a complete key.  Every refusal is one ``CacheWarning`` and a
recompile.  Loads that could crash run in a child process.
"""
from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import textwrap
import warnings

import pytest

from test_cpu_diskcache import entries, exp_module, run_exp
from tracearray import diskcache
from tracearray.cpu import elf
from tracearray.cpu.jit import KEY_COMPONENTS, CpuJit
from tracearray.diskcache import CacheWarning, CorruptEntry, decode_entry, encode_entry, key_record
from tracearray.gpu import ptx as P

_KEY_FIELD = slice(12, 44)       # the raw key in an entry's header (magic, format, reserved, key)


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch):
    """Each test sees its own "once per process" warnings and PTX caches."""
    monkeypatch.setattr(diskcache, "_warned", set())
    monkeypatch.setattr(P, "_memory_cache", {})
    monkeypatch.setattr(P, "_disk_caches", {})


@pytest.fixture
def cache_root(tmp_path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(root))
    monkeypatch.delenv("TRACEARRAY_CACHE_MAX_MB", raising=False)
    return root


def cache_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, CacheWarning)]


def cpu_record(jit: CpuJit, text: str) -> bytes:
    return key_record(jit.key_components(text), KEY_COMPONENTS)


# ------------------------------------------------------------------ the full key

def test_entry_planted_under_another_key_is_refused(cache_root) -> None:
    """A valid entry of one kernel, relabelled in its header as another's, is not run."""
    jit = CpuJit()
    run_exp(jit, exp_module(2.0))
    (name,) = entries(cache_root)
    folder = cache_root / "cpu"
    other = jit.cache_key(exp_module(3.0))
    data = bytearray((folder / name).read_bytes())
    data[_KEY_FIELD] = bytes.fromhex(other)          # header, length and digest all still valid
    planted = folder / f"{other}.bin"
    planted.write_bytes(bytes(data))
    fresh = CpuJit()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run_exp(fresh, exp_module(3.0), scale=3.0)    # the scale-2 kernel would fail this
    (message,) = cache_warnings(record)
    assert str(planted) in message and "another key" in message
    assert (fresh.stats.disk_hits, fresh.stats.compiles, fresh.stats.disk_discarded) == (0, 1, 1)
    again = CpuJit()                                   # overwritten with the right entry
    run_exp(again, exp_module(3.0), scale=3.0)
    assert again.stats.disk_hits == 1


def test_stored_full_key_is_compared() -> None:
    key, payload = "ab" * 32, b"\x7fELF" + bytes(100)
    record = b"module:3:abc" + b"x" * 500
    data = encode_entry(key, payload, record)
    assert decode_entry(key, data, record) == payload
    with pytest.raises(CorruptEntry, match="another key"):
        decode_entry(key, data, record[:-1] + b"y")
    with pytest.raises(CorruptEntry, match="another key"):
        decode_entry(key, data, record + b"x")         # a longer expected key: bounded inflate
    with pytest.raises(CorruptEntry, match="another key"):
        decode_entry(key, encode_entry(key, payload), record)


# -------------------------------------------------------------------- the folder

def test_world_writable_folder_is_refused_with_one_warning(cache_root) -> None:
    cache_root.mkdir()
    os.chmod(cache_root, 0o777)
    jit = CpuJit()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run_exp(jit, exp_module(2.0))
        run_exp(jit, exp_module(2.0))
        run_exp(jit, exp_module(3.0), scale=3.0)
        run_exp(CpuJit(), exp_module(2.0))             # another JIT: no second warning
    (message,) = cache_warnings(record)
    assert str(cache_root) in message and "writable by group and others" in message
    assert (jit.stats.compiles, jit.stats.memory_hits, jit.stats.disk_writes) == (2, 1, 0)
    assert not (cache_root / "cpu").exists()           # nothing written, nothing created


def test_group_writable_backend_folder_is_refused(cache_root) -> None:
    (cache_root / "cpu").mkdir(parents=True)
    os.chmod(cache_root, 0o700)
    os.chmod(cache_root / "cpu", 0o770)
    jit = CpuJit()
    with pytest.warns(CacheWarning, match="writable by group"):
        run_exp(jit, exp_module())
    assert jit.stats.disk_writes == 0 and entries(cache_root) == []


def test_foreign_owned_folder_is_refused(cache_root, monkeypatch) -> None:
    """Ownership is emulated: the tests may run as root, who cannot be a stranger to a folder."""
    run_exp(CpuJit(), exp_module())                    # a good entry, made by "someone else"
    assert len(entries(cache_root)) == 1
    owner = os.stat(cache_root).st_uid
    monkeypatch.setattr(diskcache.os, "geteuid", lambda: owner + 1000)
    jit = CpuJit()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run_exp(jit, exp_module())
        run_exp(jit, exp_module(3.0), scale=3.0)
    (message,) = cache_warnings(record)
    assert f"owned by uid {owner}" in message and str(cache_root) in message
    assert (jit.stats.disk_hits, jit.stats.compiles, jit.stats.disk_writes) == (0, 2, 0)


def test_created_folders_are_private_whatever_the_umask(tmp_path, monkeypatch) -> None:
    root = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(root))
    old = os.umask(0)
    try:
        jit = CpuJit()
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheWarning)
            run_exp(jit, exp_module())
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", root, root / "cpu"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
    assert jit.stats.disk_writes == 1


def test_untrusted_entry_files_are_refused(cache_root) -> None:
    """An entry writable by others, or a symlink, is refused even inside a good folder."""
    run_exp(CpuJit(), exp_module(2.0))
    run_exp(CpuJit(), exp_module(3.0), scale=3.0)
    folder = cache_root / "cpu"
    writable, linked = (folder / name for name in entries(cache_root))
    os.chmod(writable, 0o666)
    target = cache_root / "elsewhere.bin"
    os.replace(linked, target)
    os.symlink(target, linked)
    jit = CpuJit()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run_exp(jit, exp_module(2.0))
        run_exp(jit, exp_module(3.0), scale=3.0)
    messages = cache_warnings(record)
    assert len(messages) == 2
    assert any(str(writable) in m and "writable by group and others" in m for m in messages)
    assert any(str(linked) in m for m in messages)
    assert (jit.stats.disk_hits, jit.stats.compiles, jit.stats.disk_writes) == (0, 2, 2)
    assert not os.path.islink(linked) and stat.S_IMODE(os.stat(writable).st_mode) == 0o600


# ----------------------------------------------------------- the object's structure

def _sections(obj: bytes) -> list[tuple]:
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shnum, = struct.unpack_from("<H", obj, 0x3C)
    return [(shoff + 64 * i, *struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * i))
            for i in range(shnum)]


def _first(obj: bytes, sh_type: int) -> tuple:
    return next(s for s in _sections(obj) if s[2] == sh_type)


def _relocation_offset(obj: bytearray) -> None:
    struct.pack_into("<Q", obj, _first(obj, elf.SHT_RELA)[5], 1 << 40)


def _relocation_symbol(obj: bytearray) -> None:
    rela = _first(obj, elf.SHT_RELA)[5]
    struct.pack_into("<Q", obj, rela + 8, (0xFFFFFF << 32) | 1)


def _section_table(obj: bytearray) -> None:
    struct.pack_into("<Q", obj, 0x28, 1 << 40)


def _section_offset(obj: bytearray) -> None:
    code = next(s for s in _sections(obj) if s[2] == 1 and s[3] & 4 and s[6])   # executable
    struct.pack_into("<Q", obj, code[0] + 24, 1 << 40)


def _symbol_names(obj: bytearray) -> None:
    strtab = _sections(obj)[_first(obj, elf.SHT_SYMTAB)[7]]
    obj[strtab[5] + strtab[6] - 1] = ord("x")          # no terminating NUL


def _truncated(obj: bytearray) -> None:
    del obj[len(obj) // 2:]


def _other_machine(obj: bytearray) -> None:
    struct.pack_into("<H", obj, 18, 183)               # EM_AARCH64


CRAFTED = {"relocation-offset": _relocation_offset, "relocation-symbol": _relocation_symbol,
           "section-table": _section_table, "section-offset": _section_offset,
           "unterminated-names": _symbol_names, "truncated": _truncated,
           "other-machine": _other_machine}


@pytest.fixture(scope="module")
def good_object(tmp_path_factory) -> bytes:
    root = tmp_path_factory.mktemp("object")
    jit = CpuJit(cache_dir=str(root))
    run_exp(jit, exp_module())
    (name,) = entries(root)
    return decode_entry(name[:-4], (root / "cpu" / name).read_bytes(), None)


def test_objects_the_jit_writes_are_well_formed(good_object) -> None:
    elf.check_object(good_object, elf.EM_X86_64)
    assert elf.host_machine("x86_64-unknown-linux-gnu") == elf.EM_X86_64
    assert elf.host_machine("x86_64-apple-darwin23") is None      # Mach-O: never read from disk


@pytest.mark.parametrize("craft", CRAFTED.values(), ids=CRAFTED.keys())
def test_malformed_objects_are_refused_by_the_validator(good_object, craft) -> None:
    obj = bytearray(good_object)
    craft(obj)
    with pytest.raises(elf.MalformedObject):
        elf.check_object(bytes(obj), elf.EM_X86_64)


_LOAD_ALL = textwrap.dedent("""
    import json, sys, warnings
    sys.path.insert(0, {tests!r})
    from test_cpu_diskcache import exp_module, run_exp
    from tracearray.cpu.jit import CpuJit
    jit = CpuJit()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for scale in {scales!r}:
            run_exp(jit, exp_module(scale), scale=scale)
    print(json.dumps({{"stats": vars(jit.stats), "warnings": [str(w.message) for w in record]}}))
""")


def test_crafted_entries_are_refused_without_a_crash(cache_root, good_object) -> None:
    """Valid entries (digest and full key right) around crafted objects, and a FIFO where an
    entry should be, loaded in a child: each is refused with a warning and recompiled."""
    jit = CpuJit(cache_dir=None)
    folder = cache_root / "cpu"
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(cache_root, 0o700)
    scales, paths = [], []
    for i, craft in enumerate(CRAFTED.values()):
        scale = 2.0 + i
        text = exp_module(scale)
        obj = bytearray(good_object)
        craft(obj)
        key = jit.cache_key(text)
        (folder / f"{key}.bin").write_bytes(encode_entry(key, bytes(obj), cpu_record(jit, text)))
        scales.append(scale)
        paths.append(str(folder / f"{key}.bin"))
    fifo_scale = 2.0 + len(CRAFTED)
    fifo = folder / f"{jit.cache_key(exp_module(fifo_scale))}.bin"
    os.mkfifo(fifo, 0o600)                  # opening it for reading would wait for a writer
    scales.append(fifo_scale)
    paths.append(str(fifo))
    tests = os.path.dirname(__file__)
    proc = subprocess.run([sys.executable, "-c", _LOAD_ALL.format(tests=tests, scales=scales)],
                          capture_output=True, text=True, timeout=120, env=os.environ)
    assert proc.returncode == 0, f"child died ({proc.returncode}):\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["stats"]["disk_hits"] == 0 and out["stats"]["compiles"] == len(scales)
    assert out["stats"]["disk_discarded"] == len(scales)
    for path in paths:
        assert sum(path in m for m in out["warnings"]) == 1, path
        assert stat.S_ISREG(os.lstat(path).st_mode)               # rewritten with a good entry


# ----------------------------------------------------------------------- PTX

def ptx_module(value: float = 1.0) -> str:
    return textwrap.dedent(f"""
        define void @k(ptr addrspace(1) %p) {{
          %x = load float, ptr addrspace(1) %p
          %y = fadd float %x, {value:.6e}
          store float %y, ptr addrspace(1) %p
          ret void
        }}""")


def ptx_entries(root) -> list:
    folder = root / "ptx"
    return sorted(folder.glob("*.bin")) if folder.is_dir() else []


@pytest.fixture(scope="module")
def ptx_components() -> dict[str, str]:
    return P.key_components(ptx_module(), P.DEFAULT_TARGET)


def test_ptx_key_covers_exactly_the_listed_components(ptx_components) -> None:
    import llvmlite
    assert set(ptx_components) == set(P.PTX_KEY_COMPONENTS)
    # LLVM named without loading it: llvmlite's version and its shared library's identity
    # (the CPU's kernel key has the same component)
    assert ptx_components["llvm"] == diskcache.llvm_identity()
    assert ptx_components["llvm"].startswith(f"llvmlite {llvmlite.__version__}; ")
    assert "libllvmlite" in ptx_components["llvm"]
    assert ptx_components["llvmlite"] == llvmlite.__version__
    assert "sm_90" in ptx_components["target"] and "+ptx80" in ptx_components["target"]
    assert ptx_components["libdevice"] == ""           # this module calls no libdevice function
    assert str(P.PIPELINE_REVISION) == ptx_components["pipeline"]
    assert P.key_components(ptx_module(), P.GpuTarget(80, 78))["target"] != ptx_components["target"]


@pytest.mark.parametrize("component", P.PTX_KEY_COMPONENTS)
def test_each_ptx_component_changes_the_key(ptx_components, component) -> None:
    def key(components):
        return diskcache.record_key(key_record(components, P.PTX_KEY_COMPONENTS))
    altered = {**ptx_components, component: ptx_components[component] + " "}
    assert key(altered) != key(ptx_components), f"{component} does not reach the PTX key"


def test_ptx_cache_round_trip_and_refusals(cache_root) -> None:
    first = P.compile_ptx(ptx_module(1.0))
    (entry,) = ptx_entries(cache_root)
    P._memory_cache.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert P.compile_ptx(ptx_module(1.0)) == first           # a disk hit
    assert P._disk_cache().counts.hits == 1
    # A damaged byte of the PTX: the digest refuses it.
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0x01
    entry.write_bytes(bytes(data))
    P._memory_cache.clear()
    with pytest.warns(CacheWarning, match="digest") as record:
        assert P.compile_ptx(ptx_module(1.0)) == first
    assert any(str(entry) in m for m in cache_warnings(record))
    # Another module's valid entry, relabelled in its header: the full key refuses it.
    other_key, _ = P._key(ptx_module(2.0), P.DEFAULT_TARGET)
    relabelled = bytearray(entry.read_bytes())
    relabelled[_KEY_FIELD] = bytes.fromhex(other_key)
    planted = cache_root / "ptx" / f"{other_key}.bin"
    planted.write_bytes(bytes(relabelled))
    P._memory_cache.clear()
    with pytest.warns(CacheWarning, match="another key") as record:
        second = P.compile_ptx(ptx_module(2.0))
    assert second != first and "0f40000000" in second           # 2.0, as PTX writes it
    assert any(str(planted) in m for m in cache_warnings(record))


def test_ptx_entry_that_is_not_ptx_is_refused(cache_root) -> None:
    key, record = P._key(ptx_module(), P.DEFAULT_TARGET)
    folder = cache_root / "ptx"
    folder.mkdir(parents=True)
    (folder / f"{key}.bin").write_bytes(encode_entry(key, b"\xff\xfe not text", record))
    with pytest.warns(CacheWarning, match="not PTX"):
        text = P.compile_ptx(ptx_module())
    assert ".target sm_90" in text


def test_ptx_cache_in_a_world_writable_folder_is_refused(cache_root) -> None:
    cache_root.mkdir()
    os.chmod(cache_root, 0o757)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = P.compile_ptx(ptx_module(1.0))
        P.compile_ptx(ptx_module(2.0))
        run_exp(CpuJit(), exp_module())                # the CPU cache: the same folder, no warning
    (message,) = cache_warnings(record)
    assert "writable by others" in message
    assert ".entry" in first or ".func" in first or ".visible" in first
    assert not (cache_root / "ptx").exists() and not (cache_root / "cpu").exists()


# ------------------------------------------------------------------- the cubin cache

needs_ptxas = pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas is not installed")


def cubin_entries(root) -> list:
    folder = root / "cubin"
    return sorted(folder.glob("*.bin")) if folder.is_dir() else []


def test_cubin_key_covers_exactly_the_listed_components() -> None:
    components = P.cubin_key_components(".version 8.0", "sm_90", "ptxas /x 1 2")
    assert set(components) == set(P.CUBIN_KEY_COMPONENTS)
    assert components["options"] == "-O3"


@pytest.mark.parametrize("component", P.CUBIN_KEY_COMPONENTS)
def test_each_cubin_component_changes_the_key(component) -> None:
    base = P.cubin_key_components(".version 8.0", "sm_90", "ptxas /x 1 2")

    def key(components):
        return diskcache.record_key(key_record(components, P.CUBIN_KEY_COMPONENTS))
    assert key({**base, component: base[component] + " "}) != key(base)
    assert key(dict(base)) == key(base)                 # a no-op change keeps the key


@needs_ptxas
def test_cubin_cache_round_trip_and_refusals(cache_root, monkeypatch) -> None:
    ptx = P.compile_ptx(ptx_module(1.0))
    first = P.cubin_for(ptx, "sm_90")
    assert first is not None and first[:4] == b"\x7fELF"
    (entry,) = cubin_entries(cache_root)
    assert stat.S_IMODE(entry.stat().st_mode) & 0o077 == 0      # owner-only

    def no_assembler(*args, **kwargs):
        raise P.PtxasError("assembled again instead of loading the cached cubin")

    with monkeypatch.context() as m:
        m.setattr(P, "ptxas", no_assembler)   # a failed assembly would return None
        assert P.cubin_for(ptx, "sm_90") == first                # a disk hit
    # A valid entry whose payload is not a cubin: refused, assembled again, rewritten.
    key = entry.name[:-4]
    components = P.cubin_key_components(ptx, "sm_90", P._assembler()[0])
    record = key_record(components, P.CUBIN_KEY_COMPONENTS)
    assert diskcache.record_key(record) == key
    entry.write_bytes(encode_entry(key, b"MZ not an ELF file at all" * 4, record))
    with pytest.warns(CacheWarning, match="not a cubin"):
        assert P.cubin_for(ptx, "sm_90") == first
    assert P.cubin_for(ptx, "sm_90") == first
    # A truncated entry: refused by its length check (no second warning for the same
    # file in one process), rebuilt.
    data = entry.read_bytes()
    entry.write_bytes(data[:len(data) // 2])
    cache = P._cubin_cache()
    discarded = cache.counts.discarded
    assert P.cubin_for(ptx, "sm_90") == first
    assert cache.counts.discarded == discarded + 1 and "header says" in cache.last_error
    assert entry.read_bytes() == data


def test_cubin_cache_off_assembles_every_time(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "off")
    calls = []
    monkeypatch.setattr(P, "_assembler",
                        lambda: ("fake 1", lambda ptx, arch: calls.append(arch) or
                                 b"\x7fELF\x02" + bytes(59)))
    assert P.cubin_for(".version 8.0", "sm_90") is not None
    assert P.cubin_for(".version 8.0", "sm_90") is not None
    assert calls == ["sm_90", "sm_90"] and not any(tmp_path.iterdir())


@needs_ptxas
def test_assembler_found_once_is_remembered_while_its_files_are_unchanged(cache_root,
                                                                           monkeypatch) -> None:
    """Which tool assembles cubins (nvJitLink, whose binding locates its library through
    cuda.pathfinder: 25 ms; else ptxas) is remembered in the cache's toolchain folder with
    the files it came from: used again without looking, unless a file or the search
    settings changed."""
    first = P._assembler()
    assert first is not None
    looked = []
    real = P._resolve_assembler
    monkeypatch.setattr(P, "_resolve_assembler", lambda: looked.append(1) or real())
    assert P._assembler()[0] == first[0] and looked == []      # remembered
    entries = [p for p in (cache_root / "toolchain").iterdir() if p.name.endswith(".bin")]
    assert len(entries) == 1 and stat.S_IMODE(entries[0].stat().st_mode) & 0o077 == 0
    with monkeypatch.context() as m:     # another PATH may find another ptxas
        m.setenv("PATH", os.environ.get("PATH", "") + os.pathsep + "/elsewhere")
        assert P._assembler()[0] == first[0] and looked == [1]
    with monkeypatch.context() as m:     # the tool was replaced (another size and time)
        m.setattr(P, "file_identity", lambda path: [path, 0, 0])
        P._assembler()
    assert looked == [1, 1]
