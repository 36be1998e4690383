"""Kernels as shared libraries: linked by the system's C compiler, loaded by the C library.

Why (issue 12): loading an object with MCJIT needs ``llvmlite.binding``, whose import maps the
179 MB ``libllvmlite.so`` (about 50 ms), more than the whole budget of a first call whose
kernels are all on disk. A shared library is loaded by ``dlopen`` (through ``ctypes``), which
needs nothing of LLVM. So when a C compiler driver is found (``cc``, else ``gcc``, else
``clang``), a kernel compiled in this process is emitted as a position-independent object
(``CpuJit.emit_pic_object``), linked into a shared library (``link``), loaded with ``dlopen``
in this process too (one code path for fresh and cached kernels), and its library is what the
disk cache stores. Without a driver, or when linking fails, MCJIT runs the kernel as before.

**Symbols.** A kernel calls libm (``expf``), libmvec (``_ZGVdN8v_expf``), and the conversion
helpers LLVM lowers half-precision casts to (``__truncdfhf2``: libgcc). The link names ``-lm``
and ``-lmvec`` (``--as-needed``: only those used become ``DT_NEEDED``), the driver adds libgcc,
and ``-z defs`` makes an unresolved symbol a link error, so a library that links resolves
every call when it loads (``RTLD_NOW``). ``-nostartfiles``: no C runtime start files, so the
library has no initialisers; ``-Bsymbolic``: its own functions bind inside it, whichever
other library exports the same name (every kernel of a function is ``<name>_k0``).

**What is loaded.** ``check_library`` reads the ELF structure before ``dlopen`` sees the bytes:
an ELF64 shared object for the host's machine, program headers and dynamic section inside
the file, no code run at load or unload (no ``DT_INIT``, ``DT_INIT_ARRAY``,
``DT_PREINIT_ARRAY``, ``DT_FINI``, ``DT_FINI_ARRAY``), no text relocations, no
``DT_RPATH``/``DT_RUNPATH`` and no dependency but the C library's own (``libm``, ``libmvec``,
``libc``, ``libgcc_s``). The bytes are then written to an anonymous in-memory file
(``memfd_create``) and loaded from it: what ``dlopen`` maps is exactly what was checked (a
path in the cache folder could be replaced between the check and the load), and nothing is
left on disk.

**Unloading and threads.** ``SharedLibrary.close`` (or the last reference going) calls
``dlclose``: its code pages go when no ``NativeCode`` uses them (the kernels hold theirs).
``dlopen``/``dlclose`` are thread safe; a library stays mapped in a forked child, as all memory
does.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import weakref

from .. import forksafe
from .elf import EM_X86_64, MalformedObject

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_DYN = struct.Struct("<qQ")
ET_DYN = 3
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
DT_INIT, DT_FINI, DT_RPATH, DT_TEXTREL = 12, 13, 15, 22
DT_INIT_ARRAY, DT_FINI_ARRAY, DT_RUNPATH, DT_FLAGS, DT_PREINIT_ARRAY = 25, 26, 29, 30, 32
DF_TEXTREL = 0x4
_RUNS_CODE = {DT_INIT: "DT_INIT", DT_FINI: "DT_FINI", DT_INIT_ARRAY: "DT_INIT_ARRAY",
              DT_FINI_ARRAY: "DT_FINI_ARRAY", DT_PREINIT_ARRAY: "DT_PREINIT_ARRAY"}
ALLOWED_NEEDED = frozenset({"libm.so.6", "libmvec.so.1", "libc.so.6", "libgcc_s.so.1"})
MAX_PROGRAM_HEADERS = 64

LINK_FLAGS = ("-shared", "-nostartfiles", "-Wl,-z,defs", "-Wl,-Bsymbolic", "-Wl,--as-needed",
              "-Wl,-z,noexecstack", "-Wl,--build-id=none", "-Wl,--hash-style=gnu", "-s")
LINK_LIBRARIES = ("-lm", "-lmvec")
LINK_TIMEOUT_S = 60.0

_linker_lock = threading.Lock()
_linker: list[str | None] = []      # [] unknown, [None] none, [path]


def linker() -> str | None:
    """The C compiler driver that links kernels, or None (then MCJIT runs them). Only on
    x86-64 Linux, where ``check_library`` knows the format; ``TRACEARRAY_LINKER`` names one
    (or ``off``)."""
    from .. import config
    with _linker_lock:
        if not _linker:
            _linker.append(_find_linker(config.linker()))
        return _linker[0]


def _find_linker(chosen: str | None) -> str | None:
    import shutil
    if not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"):
        return None
    if chosen is not None:
        return shutil.which(chosen) if chosen else None
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


class LinkError(RuntimeError):
    """The system linker refused the object (the kernel then runs through MCJIT)."""


def link(obj: bytes, driver: str) -> bytes:
    """The shared library of one relocatable object (``LinkError`` if it does not link)."""
    import subprocess   # (only compiling needs these: not imported on the warm path)
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tracearray-link-") as folder:
        src, out = os.path.join(folder, "k.o"), os.path.join(folder, "k.so")
        with open(src, "wb") as f:
            f.write(obj)
        try:
            done = subprocess.run([driver, *LINK_FLAGS, "-o", out, src, *LINK_LIBRARIES],
                                  capture_output=True, text=True, timeout=LINK_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            raise LinkError(f"{driver} did not run: {e}") from None
        if done.returncode != 0:
            raise LinkError(f"{driver} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
        with open(out, "rb") as f:
            return f.read()


# ------------------------------------------------------------------------------ checking

def check_library(data: bytes, machine: int = EM_X86_64) -> None:
    """Raise ``MalformedObject`` unless ``data`` is a shared library of the shape ``link``
    makes (module doc)."""
    if machine != EM_X86_64:
        raise MalformedObject(f"no structure check for ELF machine {machine}")
    size = len(data)
    if size < _EHDR.size:
        raise MalformedObject(f"{size} bytes, shorter than an ELF header")
    (ident, e_type, e_machine, e_version, _entry, e_phoff, _shoff, _flags, e_ehsize,
     e_phentsize, e_phnum, _shentsize, _shnum, _shstrndx) = _EHDR.unpack_from(data)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1 or ident[6] != 1:
        raise MalformedObject("not a 64-bit little-endian ELF file, version 1")
    if e_type != ET_DYN or e_machine != machine or e_version != 1:
        raise MalformedObject(f"type {e_type}, machine {e_machine}: expected a shared object "
                              f"({ET_DYN}) for machine {machine}")
    if e_ehsize != _EHDR.size or e_phentsize != _PHDR.size or \
            not 1 <= e_phnum <= MAX_PROGRAM_HEADERS:
        raise MalformedObject(f"{e_phnum} program headers of {e_phentsize} bytes")
    _inside(size, e_phoff, e_phnum * _PHDR.size, "the program headers")
    headers = [_PHDR.unpack_from(data, e_phoff + i * _PHDR.size) for i in range(e_phnum)]
    loads, dynamic = [], None
    for i, (p_type, _pf, offset, vaddr, _pa, filesz, memsz, _align) in enumerate(headers):
        if p_type in (PT_LOAD, PT_DYNAMIC):
            _inside(size, offset, filesz, f"segment {i}")
            if memsz < filesz:
                raise MalformedObject(f"segment {i} is smaller in memory than in the file")
        if p_type == PT_LOAD:
            loads.append((offset, vaddr, filesz))
        elif p_type == PT_DYNAMIC:
            if dynamic is not None:
                raise MalformedObject("two dynamic sections")
            dynamic = (offset, filesz)
    if not loads or dynamic is None:
        raise MalformedObject("no loadable segment or no dynamic section")
    entries = [_DYN.unpack_from(data, dynamic[0] + k * _DYN.size)
               for k in range(dynamic[1] // _DYN.size)]
    tags: dict[int, list[int]] = {}
    for tag, value in entries:
        if tag == DT_NULL:
            break
        tags.setdefault(tag, []).append(value)
    runs = [name for tag, name in _RUNS_CODE.items() if tag in tags]
    if runs:
        raise MalformedObject(f"it runs code when loaded or unloaded ({', '.join(runs)})")
    if DT_TEXTREL in tags or any(v & DF_TEXTREL for v in tags.get(DT_FLAGS, ())):
        raise MalformedObject("it relocates its code (text relocations)")
    if DT_RPATH in tags or DT_RUNPATH in tags:
        raise MalformedObject("it names library search paths")
    needed = tags.get(DT_NEEDED, [])
    if needed:
        strtab = _file_offset(loads, tags.get(DT_STRTAB, [None])[0], "the string table")
        strsz = tags.get(DT_STRSZ, [0])[0]
        _inside(size, strtab, strsz, "the string table")
        table = data[strtab:strtab + strsz]
        for at in needed:
            end = table.find(b"\0", at)
            if at >= len(table) or end < 0:
                raise MalformedObject("a needed library's name is outside the string table")
            name = table[at:end].decode("ascii", "replace")
            if name not in ALLOWED_NEEDED:
                raise MalformedObject(f"it needs {name!r}, not one of the C library's")


def _inside(size: int, offset: int, length: int, what: str) -> None:
    if offset < 0 or length < 0 or offset + length > size:
        raise MalformedObject(f"{what} ({length} bytes at {offset}) is outside the "
                              f"{size}-byte file")


def _file_offset(loads: list[tuple[int, int, int]], vaddr: int | None, what: str) -> int:
    if vaddr is not None:
        for offset, start, filesz in loads:
            if start <= vaddr < start + filesz:
                return offset + vaddr - start
    raise MalformedObject(f"{what} is not in a loaded segment")


# ------------------------------------------------------------------------------- loading

_live: "weakref.WeakSet[SharedLibrary]" = weakref.WeakSet()


class SharedLibrary:
    """A loaded library; ``address(name)`` of its functions, valid until ``close``."""

    def __init__(self, data: bytes) -> None:
        """Load ``data`` (checked by the caller with ``check_library``) from memory;
        ``OSError`` if the system cannot."""
        fd = os.memfd_create("tracearray-kernel", os.MFD_CLOEXEC)
        self._name = None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            self._name = _unique_name(fd)
            # RTLD_LOCAL: its symbols stay out of the process's namespace
            self._lib = ctypes.CDLL(self._name, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except BaseException:
            _release_name(self._name)
            raise
        finally:
            os.close(fd)   # (the mapping keeps the memory file)
        self._handle = self._lib._handle
        self._lock = threading.Lock()
        _live.add(self)

    def address(self, name: str) -> int | None:
        try:
            return ctypes.cast(getattr(self._lib, name), ctypes.c_void_p).value
        except AttributeError:
            return None

    def close(self) -> None:
        """Unmap the code (its addresses must not be called afterwards)."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            _live.discard(self)
            _dlclose(handle)
            _release_name(self._name)

    def __del__(self, _is_finalizing=sys.is_finalizing) -> None:
        if not _is_finalizing():   # at exit the process unmaps everything anyway
            self.close()


# ``dlopen`` returns the library already loaded under the same *name* without opening the
# file, and fd numbers are reused: a second kernel loaded through "/proc/self/fd/5" got the
# first one's code (and crashed). So each loaded library is opened under a spelling of its
# path that no loaded library has: "/proc/self/fd/./5", "/proc/self/fd/././5", ...
_names_lock = threading.Lock()
_names_in_use: set[str] = set()
MAX_SPELLINGS = 1500     # "./" repeated, within PATH_MAX


forksafe.renew_at_fork(sys.modules[__name__], "_names_lock")
forksafe.renew_at_fork(sys.modules[__name__], "_linker_lock")


def _unique_name(fd: int) -> str:
    with _names_lock:
        for k in range(MAX_SPELLINGS):
            name = f"/proc/self/fd/{'./' * k}{fd}"
            if name not in _names_in_use:
                _names_in_use.add(name)
                return name
    raise OSError(f"{MAX_SPELLINGS} kernel libraries loaded through descriptor {fd}")


def _release_name(name: str | None) -> None:
    if name is not None:
        with _names_lock:
            _names_in_use.discard(name)


def _dlclose(handle: int) -> None:
    import _ctypes
    _ctypes.dlclose(handle)


def live_libraries() -> int:
    """Kernel libraries loaded now."""
    return len(_live)
