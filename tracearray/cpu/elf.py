"""Structure check of a relocatable ELF object before a runtime linker sees it.

(The runtime linkers: LLVM's MCJIT, and tracearray's own ``loader.py``, which loads every CPU
kernel and makes the same assumptions about the object's shape.)

MCJIT's loader (RuntimeDyld) trusts the object it is given: a section offset past the end of
the file, a relocation that points outside its section or names a symbol that does not exist,
an unterminated string table - each reads or writes out of bounds, and LLVM segfaults or aborts
the process.  A disk-cache entry passes its digest and key checks only if it is the bytes we
wrote, but those are checks of integrity, not of shape; ``check_object`` makes sure that what
reaches LLVM is a well-formed object of the kind MCJIT emits here, so that a damaged or crafted
entry is refused with a message instead of crashing.

Checked, by the ELF specification (the System V gABI and the x86-64 psABI): identification
(64-bit, the host's byte order, version 1), a relocatable object (``ET_REL``) for the host's
machine, no program headers, the header and section-header sizes, the section table inside the
file, every section's contents inside the file (``SHT_NOBITS`` excepted, whose size is bounded),
alignments powers of two, the section-name and symbol string tables present, inside the file
and NUL-terminated, every name inside its table, symbol and relocation tables with their entry
sizes, links and infos naming sections of the right type, every symbol's section existing and
its value inside that section, no thread-local or indirect-function symbols (MCJIT emits none
here), every relocation of a type the x86-64 runtime linker implements, naming an existing
symbol, and patching bytes inside its section; an ``.eh_frame`` (which the loader hands to the
unwinder) made of records that fit and FDEs that point at CIEs.

Only ELF64 objects for x86-64 are known; on other hosts ``host_machine`` returns None and the
JIT does not read objects from the disk.
"""
from __future__ import annotations

import struct

EM_X86_64 = 62

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")
_REL = struct.Struct("<QQ")

ET_REL = 1
SHT_NULL, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 0, 2, 3, 4, 8, 9
SHT_SYMTAB_SHNDX, SHT_DYNSYM, SHT_DYNAMIC = 18, 11, 6
SHN_UNDEF, SHN_LORESERVE, SHN_ABS, SHN_COMMON = 0, 0xFF00, 0xFFF1, 0xFFF2
STT_TLS, STT_GNU_IFUNC = 6, 10

# Bytes each x86-64 relocation type patches, for the types LLVM's RuntimeDyldELF implements
# (others reach an "unimplemented relocation" abort); TLS and COPY/GLOB_DAT-style dynamic
# relocations are left out: MCJIT objects of ours have none.
X86_64_RELOCATION_BYTES = {
    0: 0,    # R_X86_64_NONE
    1: 8,    # R_X86_64_64
    2: 4,    # R_X86_64_PC32
    4: 4,    # R_X86_64_PLT32
    9: 4,    # R_X86_64_GOTPCREL
    10: 4,   # R_X86_64_32
    11: 4,   # R_X86_64_32S
    12: 2,   # R_X86_64_16
    14: 1,   # R_X86_64_8
    15: 1,   # R_X86_64_PC8
    24: 8,   # R_X86_64_PC64
    25: 8,   # R_X86_64_GOTOFF64
    26: 4,   # R_X86_64_GOTPC32
    27: 8,   # R_X86_64_GOT64
    28: 8,   # R_X86_64_GOTPCREL64
    29: 8,   # R_X86_64_GOTPC64
    41: 4,   # R_X86_64_GOTPCRELX
    42: 4,   # R_X86_64_REX_GOTPCRELX
}

MAX_SECTIONS = 4096
MAX_ALIGN = 1 << 16
MAX_ZERO_FILL = 1 << 28        # SHT_NOBITS and common symbols together: the loader allocates them


class MalformedObject(ValueError):
    """The bytes are not a well-formed relocatable object for this host."""


def host_machine(triple: str) -> int | None:
    """The ELF ``e_machine`` of objects MCJIT emits for ``triple``; None when they are not
    ELF64 objects this module knows (then no object may be loaded from the disk)."""
    arch, _, rest = triple.partition("-")
    not_elf = ("darwin", "macos", "windows", "win32")        # Mach-O and COFF objects
    if arch in ("x86_64", "amd64") and not any(s in rest for s in not_elf):
        return EM_X86_64
    return None


def check_object(data: bytes, machine: int) -> None:
    """Raise ``MalformedObject`` unless ``data`` is a well-formed ELF64 little-endian
    relocatable object for ``machine`` (see the module docstring for what is checked)."""
    if machine != EM_X86_64:
        raise MalformedObject(f"no structure check for ELF machine {machine}")
    size = len(data)
    if size < _EHDR.size:
        raise MalformedObject(f"{size} bytes, shorter than an ELF header")
    (ident, e_type, e_machine, e_version, _entry, e_phoff, e_shoff, _flags, e_ehsize,
     _phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx) = _EHDR.unpack_from(data)
    if ident[:4] != b"\x7fELF":
        raise MalformedObject("not an ELF file")
    if ident[4] != 2 or ident[5] != 1 or ident[6] != 1:
        raise MalformedObject(f"not 64-bit little-endian ELF version 1 (ident {ident[4:7].hex()})")
    if e_type != ET_REL or e_machine != machine or e_version != 1:
        raise MalformedObject(f"type {e_type}, machine {e_machine}, version {e_version}: expected "
                              f"a relocatable object ({ET_REL}) for machine {machine}, version 1")
    if e_ehsize != _EHDR.size or e_shentsize != _SHDR.size:
        raise MalformedObject(f"header sizes {e_ehsize}/{e_shentsize}, expected "
                              f"{_EHDR.size}/{_SHDR.size}")
    if e_phnum or e_phoff:
        raise MalformedObject("a relocatable object with program headers")
    if not 1 <= e_shnum <= MAX_SECTIONS or not 0 < e_shstrndx < e_shnum:
        raise MalformedObject(f"{e_shnum} sections, names in section {e_shstrndx}")
    _inside(size, e_shoff, e_shnum * _SHDR.size, "the section table")
    sections = [_SHDR.unpack_from(data, e_shoff + i * _SHDR.size) for i in range(e_shnum)]
    if any(sections[0]):
        raise MalformedObject("section 0 is not the null section")
    zero_fill = 0
    for i, (_n, sh_type, _f, _a, offset, sh_size, _l, _i, align, _e) in enumerate(sections[1:], 1):
        if sh_type in (SHT_NULL, SHT_SYMTAB_SHNDX, SHT_DYNSYM, SHT_DYNAMIC):
            raise MalformedObject(f"section {i} has type {sh_type}, not found in a relocatable "
                                  f"object")
        if align & (align - 1) or align > MAX_ALIGN:
            raise MalformedObject(f"section {i} is aligned to {align}")
        if sh_type == SHT_NOBITS:
            zero_fill += sh_size
        else:
            _inside(size, offset, sh_size, f"section {i}")
    if zero_fill > MAX_ZERO_FILL:
        raise MalformedObject(f"{zero_fill} bytes of zero-filled sections")
    names = _string_table(data, sections, e_shstrndx, "the section names")
    for i, section in enumerate(sections[1:], 1):
        if section[0] >= len(names):
            raise MalformedObject(f"section {i}'s name is outside the section-name table")
        if names[section[0]:names.index(b"\0", section[0])] == b".eh_frame":
            _check_eh_frame(data[section[4]:section[4] + section[5]], i)
    symtabs = [i for i, s in enumerate(sections) if s[1] == SHT_SYMTAB]
    if len(symtabs) > 1:
        raise MalformedObject(f"{len(symtabs)} symbol tables")
    n_symbols = _check_symbols(data, sections, symtabs[0], zero_fill) if symtabs else 0
    for i, section in enumerate(sections):
        if section[1] in (SHT_RELA, SHT_REL):
            _check_relocations(data, sections, i, symtabs[0] if symtabs else None, n_symbols)


def _inside(size: int, offset: int, length: int, what: str) -> None:
    if offset > size or length > size - offset:
        raise MalformedObject(f"{what} ({length} bytes at {offset}) extends past the end of the "
                              f"{size}-byte object")


def _string_table(data: bytes, sections: list[tuple], index: int, what: str) -> bytes:
    if not 0 < index < len(sections) or sections[index][1] != SHT_STRTAB:
        raise MalformedObject(f"{what} (section {index}) is not a string table")
    offset, length = sections[index][4], sections[index][5]
    table = data[offset:offset + length]
    if not table or table[-1] != 0:
        raise MalformedObject(f"{what} (section {index}) is not NUL-terminated")
    return table


def _check_symbols(data: bytes, sections: list[tuple], index: int, zero_fill: int) -> int:
    """Check the symbol table; the number of symbols."""
    _n, _t, _f, _a, offset, length, link, info, _al, entsize = sections[index]
    if entsize != _SYM.size or length % _SYM.size:
        raise MalformedObject(f"symbol table entries of {entsize} bytes in {length}")
    count = length // _SYM.size
    if count == 0 or info > count:
        raise MalformedObject(f"{count} symbols, the first global at {info}")
    strings = _string_table(data, sections, link, "the symbol names")
    for k in range(count):
        st_name, st_info, _other, shndx, value, sym_size = _SYM.unpack_from(
            data, offset + k * _SYM.size)
        if st_name >= len(strings):
            raise MalformedObject(f"symbol {k}'s name is outside the symbol-name table")
        if st_info & 0xF in (STT_TLS, STT_GNU_IFUNC):
            raise MalformedObject(f"symbol {k} is thread-local or an indirect function")
        if shndx == SHN_COMMON:
            zero_fill += sym_size
            if value & (value - 1) or value > MAX_ALIGN or zero_fill > MAX_ZERO_FILL:
                raise MalformedObject(f"common symbol {k}: {sym_size} bytes aligned to {value}")
        elif shndx in (SHN_UNDEF, SHN_ABS):
            continue
        elif shndx >= len(sections) or shndx >= SHN_LORESERVE:
            raise MalformedObject(f"symbol {k} is in section {shndx}, which does not exist")
        elif value > sections[shndx][5] or sym_size > sections[shndx][5] - value:
            raise MalformedObject(f"symbol {k} ({sym_size} bytes at {value}) is outside its "
                                  f"section")
    return count


def _check_relocations(data: bytes, sections: list[tuple], index: int, symtab: int | None,
                       n_symbols: int) -> None:
    _n, sh_type, _f, _a, offset, length, link, target, _al, entsize = sections[index]
    entry = _RELA if sh_type == SHT_RELA else _REL
    if entsize != entry.size or length % entry.size:
        raise MalformedObject(f"relocation section {index}: entries of {entsize} bytes in {length}")
    if link != symtab or symtab is None:
        raise MalformedObject(f"relocation section {index} does not use the symbol table")
    if not 0 < target < len(sections) or sections[target][1] in (SHT_NULL, SHT_NOBITS):
        raise MalformedObject(f"relocation section {index} applies to section {target}")
    target_size = sections[target][5]
    for k in range(length // entry.size):
        r_offset, r_info = entry.unpack_from(data, offset + k * entry.size)[:2]
        symbol, r_type = r_info >> 32, r_info & 0xFFFFFFFF
        width = X86_64_RELOCATION_BYTES.get(r_type)
        if width is None:
            raise MalformedObject(f"relocation {k} of section {index} has type {r_type}, which "
                                  f"the runtime linker does not implement")
        if symbol >= n_symbols:
            raise MalformedObject(f"relocation {k} of section {index} names symbol {symbol} of "
                                  f"{n_symbols}")
        if r_offset > target_size or width > target_size - r_offset:
            raise MalformedObject(f"relocation {k} of section {index} patches {width} bytes at "
                                  f"{r_offset}, outside its {target_size}-byte section")


def _check_eh_frame(frame: bytes, index: int) -> None:
    """The loader registers ``.eh_frame`` with the unwinder, which walks it record by record:
    every record must lie inside the section and every FDE point back at a CIE."""
    offset, cies = 0, set()
    while offset + 4 <= len(frame):
        length = int.from_bytes(frame[offset:offset + 4], "little")
        if length == 0:                  # terminator
            return
        if length == 0xFFFFFFFF or length < 4 or length > len(frame) - offset - 4:
            raise MalformedObject(f".eh_frame (section {index}): a record of {length} bytes at "
                                  f"{offset} does not fit")
        cie_pointer = int.from_bytes(frame[offset + 4:offset + 8], "little")
        if cie_pointer == 0:
            cies.add(offset)
        elif offset + 4 - cie_pointer not in cies:
            raise MalformedObject(f".eh_frame (section {index}): the record at {offset} points "
                                  f"at no CIE")
        offset += 4 + length
    if offset != len(frame):
        raise MalformedObject(f".eh_frame (section {index}) ends inside a record")
