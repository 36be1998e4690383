"""What a newly built executable shows on the DEBUG ladder and writes to the dump folder.

Steps (``config.LADDER``): 5 the bound tiles of each kernel (strategy, loop groups, chunks on
the CPU, grid and block on the GPU), 6 its LLVM IR, 7 its host assembly or PTX. Every text is
built only when its step is shown or ``TRACEARRAY_DUMP_DIR`` is set; dump files are named by
the kernel and a digest of the executable's signature (shapes, dtypes, static values, strides,
device), so a second signature never overwrites the first's.
"""
from __future__ import annotations

from typing import Any, Sequence

from . import config


class ShapesText:
    """``f32[4,3], i64[7]`` of arrays or of ``(shape, dtype.str)`` pairs, built only when a
    log record is formatted (it is passed as a lazy ``%s`` argument)."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items

    def __str__(self) -> str:
        parts = []
        for item in self.items:
            shape, dtype = (item.shape, item.dtype.str) if hasattr(item, "shape") else item
            parts.append(f"{dtype.lstrip('<>|=')}[{','.join(map(str, shape))}]")
        return ", ".join(parts) or "no arrays"


def tiles_text(kernel: Any) -> str:
    """One kernel's binding: its strategy, loop structure and how the work is split."""
    geo = kernel.geometry
    parts = [f"{kernel.name}: {getattr(geo, 'strategy', getattr(kernel, 'strategy', '?'))}"]
    if hasattr(geo, "groups"):
        parts.append(f"loop groups {list(geo.groups)}, parallel dims {list(geo.par_dims)}, "
                     f"inner dims {list(geo.inner_dims)}")
        if geo.tile:
            parts.append(f"tile {geo.tile}")
    chunks = getattr(kernel, "chunks", None)
    if chunks is not None:   # CPU: chunks of the parallel range on the thread pool
        shown = ", ".join(f"[{b}, {e})" for b, e in chunks[:4])
        more = f", ... ({len(chunks)} in all)" if len(chunks) > 4 else ""
        parts.append(f"{len(chunks)} chunk(s) {shown}{more}")
    for launch in getattr(kernel, "launches", ()):   # GPU
        parts.append(f"{launch.entry}<<<{launch.grid}, {launch.block}>>>")
    return "; ".join(parts)


def report_executable(fn_name: str, file_name: str, exe: Any, ekey: Any,
                      leaves: Sequence[Any]) -> None:
    """Log and dump steps 5-7 of an executable just built (``ekey``: its cache key;
    ``file_name``: the function's name as the dump files spell it)."""
    dumping = config.dump_dir() is not None
    show = {step: config.enabled(step) for step in (config.TILES, config.LLVM_IR,
                                                     config.ASSEMBLY)}
    if not (dumping or any(show.values())):
        return
    signature = config.signature_id(ekey) if dumping else ""
    describe = f"{fn_name} {ShapesText(leaves)} on {ekey[2]}" if dumping else ""
    kernels = [k for k in exe.kernels if k is not None]
    if show[config.TILES] or dumping:
        text = "\n".join(tiles_text(k) for k in kernels)
        config.log(config.TILES, "tiles of %s:\n%s", fn_name, text)
        config.dump(file_name, "tiles", text, signature, describe)
    for k in kernels:
        if show[config.LLVM_IR] or dumping:
            config.log(config.LLVM_IR, "%s (%s):\n%s", k.name, k.geometry.strategy, k.ir)
            config.dump(k.name, "ll", k.ir, signature, describe)
        if show[config.ASSEMBLY] or dumping:
            ptx = getattr(k, "ptx", None)
            text, stage = (ptx, "ptx") if ptx is not None else (exe.jit.asm(k.ir), "s")
            config.log(config.ASSEMBLY, "%s %s:\n%s", k.name,
                       "PTX" if stage == "ptx" else "assembly", text)
            config.dump(k.name, stage, text, signature, describe)
