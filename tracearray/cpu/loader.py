"""A loader of the relocatable objects LLVM emits for kernels, written in Python: no LLVM.

Why (issue 12): MCJIT needs ``llvmlite.binding``, whose import maps the 179 MB
``libllvmlite.so`` (about 50 ms), more than the whole budget of a first call whose kernels are
all on the disk. What MCJIT's runtime linker does with one of our kernel objects is small:
place its sections in memory, resolve its few external symbols (libm and libmvec functions,
libgcc's half-precision conversions, ``memset``/``memcpy``), apply its relocations, and make the
code executable. ``load_object`` does exactly that, for the objects ``CpuJit.emit_object``
makes (x86-64 ELF, the large code model MCJIT uses: absolute 64-bit relocations for every
address, so any placement works), after ``elf.check_object`` has checked their structure.

- **Layout**: one anonymous mapping; executable sections first, then the jump stubs and GOT
  slots relocations need, then the other sections, each at its alignment; the code pages
  (stubs and slots included) become read + execute once relocated, the rest stays read +
  write (never both writable and executable). ``.eh_frame`` is not loaded: nothing unwinds
  through a kernel.
- **Symbols**: defined ones are section address + value; undefined ones are looked up with
  ``dlsym`` in the C library's libraries (libc, libm, libmvec, libgcc_s) only. A name found in
  none of them refuses the object (the caller compiles it again), as MCJIT would have left it
  pointing at address 0.
- **Relocations** (x86-64 psABI, S symbol, A addend, P place): ``R_X86_64_64`` S + A,
  ``R_X86_64_PC32``/``PLT32`` S + A - P (a call through a jump stub in the mapping when its
  target is more than 2 GiB away), ``R_X86_64_PC64`` S + A - P, ``R_X86_64_GOTPCREL`` and the relaxable
  ``GOTPCRELX`` forms G + A - P with G a slot holding S. Any other type refuses the object.
- **Lifetime**: the mapping is unmapped when the ``LoadedObject`` is closed or collected (the
  kernels hold theirs); it stays in a forked child like all memory.
"""
from __future__ import annotations

import ctypes
import mmap
import struct
import sys
import threading
import weakref
from typing import Any

from .. import forksafe
from .elf import _EHDR, _RELA, _SHDR, _SYM, SHN_ABS, SHN_UNDEF, SHT_NOBITS, SHT_RELA

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
R_NONE, R_64, R_PC32, R_PLT32, R_GOTPCREL, R_PC64, R_GOTPCRELX, R_REX_GOTPCRELX = \
    0, 1, 2, 4, 9, 24, 41, 42
_STUB = struct.Struct("<6sQ")      # jmp *0(%rip); .quad target
_STUB_CODE = b"\xff\x25\x00\x00\x00\x00"
_PAGE = mmap.PAGESIZE
_NEAR = 2**31        # what a 32-bit displacement reaches (tests lower it to force stubs)
_LIBRARIES = ("libc.so.6", "libm.so.6", "libmvec.so.1", "libgcc_s.so.1")


class CannotLoad(ValueError):
    """The object needs something this loader does not do (the caller compiles it again)."""


_libs_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_libs_lock")
_libs: list[ctypes.CDLL] = []
_libc = None


def _system() -> tuple[list[ctypes.CDLL], object]:
    """The libraries external symbols resolve in, and libc (mmap, mprotect, munmap)."""
    global _libc
    with _libs_lock:
        if _libc is None:
            for name in _LIBRARIES:
                try:
                    _libs.append(ctypes.CDLL(name))
                except OSError:   # (libmvec: glibc only)
                    pass
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_long]
            libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            _libc = libc
        return _libs, _libc


def _external(name: str) -> int:
    libs, _ = _system()
    for lib in libs:
        try:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            continue
    raise CannotLoad(f"the object calls {name!r}, which the C library's libraries lack")


_live: "weakref.WeakSet[LoadedObject]" = weakref.WeakSet()


def live_objects() -> int:
    """Objects loaded and not yet unmapped."""
    return len(_live)


class LoadedObject:
    """An object's code in memory: ``address(name)`` of its functions, valid until
    ``close``.

    ``munmap`` is libc's, kept by the object so that ``close``, which its finalizer calls,
    takes no lock of the module's: a finalizer runs wherever the garbage collector
    happens to run, and that may be inside ``_system`` holding ``_libs_lock`` (it allocates
    while setting up libc); closing through ``_system`` there deadlocked a thread on
    itself (the default test suite hung at 89-90 % twice on 2026-12-06, both pytest
    workers idle: ``py-spy`` showed ``LoadedObject.__del__`` -> ``_system`` inside
    ``_system``)."""

    def __init__(self, base: int, size: int, symbols: dict[str, int], munmap: Any) -> None:
        self._base, self._size, self._symbols = base, size, symbols
        self._munmap = munmap
        self._lock = threading.Lock()
        _live.add(self)

    def address(self, name: str) -> int | None:
        return self._symbols.get(name)

    def close(self) -> None:
        with self._lock:
            base, self._base = self._base, 0
        if base:
            _live.discard(self)
            self._munmap(base, self._size)

    def __del__(self, _is_finalizing=sys.is_finalizing) -> None:
        if not _is_finalizing():
            self.close()


def load_object(data: bytes) -> LoadedObject:
    """Load an object ``elf.check_object`` accepted; ``CannotLoad`` (or ``OSError``) when
    this loader cannot (module doc)."""
    ehdr = _EHDR.unpack_from(data)
    shoff, shnum, shstrndx = ehdr[6], ehdr[12], ehdr[13]
    sections = [_SHDR.unpack_from(data, shoff + i * _SHDR.size) for i in range(shnum)]
    names = _strings(data, sections[shstrndx])

    def section_name(i: int) -> bytes:
        start = sections[i][0]
        return names[start:names.index(b"\0", start)]

    def loaded(i: int) -> bool:   # (.eh_frame: nothing unwinds through a kernel)
        return bool(sections[i][2] & SHF_ALLOC) and section_name(i) != b".eh_frame"

    relocations = [(i, s) for i, s in enumerate(sections) if s[1] == SHT_RELA
                   and loaded(s[7])]
    n_slots = sum(s[5] // _RELA.size for _i, s in relocations)
    # layout (offsets from the mapping's start): executable sections, then the jump stubs and
    # GOT slots (a stub is code, a slot is only read: both go in the code pages), then the
    # other sections
    placed: dict[int, int] = {}
    offset = slots_at = code_size = 0
    for executable in (True, False):
        for i, (_n, _t, flags, _a, _o, size, _l, _i, align, _e) in enumerate(sections):
            if not loaded(i) or bool(flags & SHF_EXECINSTR) != executable:
                continue
            offset = -(-offset // max(align, 1)) * max(align, 1)
            placed[i] = offset
            offset += size
        if executable:
            slots_at = offset = -(-offset // 16) * 16
            offset += 16 * n_slots
            code_size = offset = -(-offset // _PAGE) * _PAGE
    symtab = next((s for s in sections if s[1] == 2), None)     # SHT_SYMTAB
    symbols = _symbols(data, sections, symtab) if symtab is not None else []
    size = max(-(-offset // _PAGE) * _PAGE, _PAGE)

    _, libc = _system()
    base = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap failed for a kernel's code")
    loaded = LoadedObject(base, size, {}, libc.munmap)
    try:
        for i, at in placed.items():
            sh_type, section_offset, section_size = sections[i][1], sections[i][4], sections[i][5]
            if sh_type != SHT_NOBITS:      # (NOBITS: the mapping is zero-filled)
                ctypes.memmove(base + at, data[section_offset:section_offset + section_size],
                               section_size)
        addresses = []
        for name, shndx, value, st_type in symbols:
            if shndx == SHN_UNDEF:
                addresses.append(_external(name) if name else 0)
            elif shndx == SHN_ABS:
                addresses.append(value)
            elif shndx in placed:
                addresses.append(base + placed[shndx] + value)
            else:
                addresses.append(None)     # a symbol of a section not loaded (.eh_frame)
        slots = [base + slots_at]
        for _i, rela in relocations:
            where = base + placed[rela[7]]
            for k in range(rela[5] // _RELA.size):
                r_offset, r_info, addend = _RELA.unpack_from(data, rela[4] + k * _RELA.size)
                _relocate(where + r_offset, r_info & 0xFFFFFFFF, addresses[r_info >> 32],
                          addend, slots, symbols[r_info >> 32][0])
        if code_size and libc.mprotect(base, code_size, mmap.PROT_READ | mmap.PROT_EXEC):
            raise OSError(ctypes.get_errno(), "mprotect refused to make a kernel executable")
        loaded._symbols = {name: addresses[k] for k, (name, shndx, _v, st_type) in
                           enumerate(symbols) if name and shndx not in (SHN_UNDEF, SHN_ABS)
                           and st_type == 2 and addresses[k]}       # STT_FUNC
    except BaseException:
        loaded.close()
        raise
    return loaded


def _relocate(place: int, r_type: int, symbol: int | None, addend: int, slots: list[int],
              name: str) -> None:
    if r_type == R_NONE:
        return
    if symbol is None:
        raise CannotLoad(f"a relocation refers to a section that is not loaded ({name!r})")
    if r_type == R_64:
        ctypes.c_uint64.from_address(place).value = (symbol + addend) & (2**64 - 1)
    elif r_type == R_PC64:
        ctypes.c_int64.from_address(place).value = symbol + addend - place
    elif r_type in (R_PC32, R_PLT32):
        value = symbol + addend - place
        if r_type == R_PLT32 and not -_NEAR <= value < _NEAR:
            # a call too far for 32 bits: through a jump stub of the mapping (data references,
            # PC32, have no such way round: refused below)
            stub = _new_slot(slots)
            ctypes.memmove(stub, _STUB.pack(_STUB_CODE, symbol), _STUB.size)
            value = stub + addend - place
        ctypes.c_int32.from_address(place).value = _int32(value, name)
    elif r_type in (R_GOTPCREL, R_GOTPCRELX, R_REX_GOTPCRELX):
        slot = _new_slot(slots)
        ctypes.c_uint64.from_address(slot).value = symbol
        ctypes.c_int32.from_address(place).value = _int32(slot + addend - place, name)
    else:
        raise CannotLoad(f"relocation type {r_type} (for {name!r}) is not implemented here")


def _new_slot(slots: list[int]) -> int:
    slot = slots[0]
    slots[0] += 16
    return slot


def _int32(value: int, name: str) -> int:
    if not -2**31 <= value < 2**31:
        raise CannotLoad(f"a 32-bit relocation for {name!r} does not reach its target")
    return value


def _strings(data: bytes, section: tuple) -> bytes:
    return data[section[4]:section[4] + section[5]]


def _symbols(data: bytes, sections: list[tuple], symtab: tuple) -> list[tuple[str, int, int, int]]:
    """(name, section index, value, type) of each symbol."""
    strings = _strings(data, sections[symtab[6]])
    out = []
    for k in range(symtab[5] // _SYM.size):
        st_name, st_info, _other, shndx, value, _size = _SYM.unpack_from(
            data, symtab[4] + k * _SYM.size)
        name = strings[st_name:strings.index(b"\0", st_name)].decode("ascii", "replace")
        out.append((name, shndx, value, st_info & 0xF))
    return out
