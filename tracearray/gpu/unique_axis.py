"""``np.unique`` along an axis on the GPU: the slices along ``axis`` (rows, once the axis is
moved first and the rest flattened) made unique, as NumPy makes them.

NumPy views each row as one record of ``r`` fields, sorts the records (field by field, each
in its dtype's order, NaN last; a stable sort when it is asked for ``return_index``), and
marks where a record differs from the one before it (``!=`` on records: any field differs,
so a NaN field always differs and ``equal_nan`` changes nothing). Here:

1. the rows' lexicographic order, as ``np.lexsort`` finds it: a stable sort of the last
   field, then of each field before it through the order so far (the device's stable sorts,
   ``sort._sort_rows``; the fields read in place through a table of their offsets, so any
   strides and any axis need no copy), ``r`` sorts in all (``MAX_FIELDS`` at most);
2. ``rowdiff``: a 1 where a sorted row differs from the one before it (the first row too);
   the unique kernels' one-block scan (``unique.py``) makes those the group numbers of the
   sorted rows, and their total the number of unique rows (``unique_count``'s result);
3. the group numbers go through ``unique.py``'s count/write/counts kernels as the sorted
   values of a flattened unique, with the lexicographic order as its permutation: the first
   row of each group (``return_index``: NumPy's, its sort being stable then), the inverse
   and the counts;
4. ``take``: each group's first row copied into the values result, the axis where it was.

A stable sort keeps equal rows in their order, so without ``return_index`` a row of zeros
may have another row's signs (divergence gpu-sort-ties, as for the flattened array). A 1-d
operand is NumPy's flattened unique (its ``axis=0`` takes that path). Float rows with
``return_inverse`` but not ``return_index`` run on the host: NumPy's quicksort may order
two rows with NaNs in the same places either way there, and with them their inverse.
"""
from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
from llvmlite import ir

from ..ops.external import DeviceBuffer

I64 = ir.IntType(64)
THREADS = 256
MAX_FIELDS = 64             # one stable sort per field of a row
_KERNELS: dict[tuple, tuple[str, str, str]] = {}
_lock = threading.Lock()


def _grid_stride(b: ir.IRBuilder, fn: ir.Function, count: Any, tag: str):
    from .sort import _Loop, sreg
    start = b.add(b.mul(sreg(b, "ctaid.x"), sreg(b, "ntid.x")), sreg(b, "tid.x"))
    step = b.mul(sreg(b, "nctaid.x"), sreg(b, "ntid.x"))
    loop = _Loop(b, fn, start, lambda i: b.icmp_unsigned("<", i, count), tag)
    return loop, step


def take_kernel_ir(itemsize: int, name: str) -> str:
    """``name(src, rows, nrows, r, src_rs, src_off, dst, dst_rs, dst_off)``: for g < nrows
    and j < r, ``dst[g * dst_rs + dst_off[j]] = src[rows[g] * src_rs + src_off[j]]`` (in
    elements of ``itemsize`` bytes; ``rows`` null: g itself)."""
    et = ir.IntType(8 * itemsize)
    module = ir.Module(name=name)
    P, Q = et.as_pointer(1), I64.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, Q, I64, I64, I64, Q, P, I64,
                                                             Q]), name=name)
    fn.calling_convention = "ptx_kernel"
    src, rows, nrows, r, src_rs, src_off, dst, dst_rs, dst_off = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    loop, step = _grid_stride(b, fn, b.mul(nrows, r), "take")
    g, j = b.udiv(loop.var, r), b.urem(loop.var, r)
    has_rows = b.icmp_unsigned("!=", b.ptrtoint(rows, I64), ir.Constant(I64, 0))
    with b.if_else(has_rows) as (given, identity):
        with given:
            picked, given_block = b.load(b.gep(rows, [g])), b.block
        with identity:
            identity_block = b.block
    row = b.phi(I64)
    row.add_incoming(picked, given_block)
    row.add_incoming(g, identity_block)
    x = b.load(b.gep(src, [b.add(b.mul(row, src_rs), b.load(b.gep(src_off, [j])))]))
    b.store(x, b.gep(dst, [b.add(b.mul(g, dst_rs), b.load(b.gep(dst_off, [j])))]))
    loop.close(b.add(loop.var, step))
    b.ret_void()
    return str(module)


def rowdiff_kernel_ir(dtype: Any, name: str) -> str:
    """``name(src, perm, n, r, rs, off, flags)``: ``flags[i]`` 1 where row ``perm[i]``
    differs from row ``perm[i - 1]`` in a field (floats: unequal or either NaN, as NumPy's
    ``!=``; -0.0 equals 0.0), and for i = 0; ``flags[n]`` 0 (the scan's last slot)."""
    from .sort import _key_type
    dtype = np.dtype(dtype)
    kt = _key_type(dtype)
    module = ir.Module(name=name)
    P, Q = kt.as_pointer(1), I64.as_pointer(1)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [P, Q, I64, I64, I64, Q, Q]),
                     name=name)
    fn.calling_convention = "ptx_kernel"
    src, perm, n, r, rs, off, flags = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    loop, step = _grid_stride(b, fn, b.add(n, one), "rows")
    i = loop.var
    first = b.icmp_unsigned("==", i, zero)
    with b.if_else(b.icmp_unsigned("<", i, n)) as (real, end):
        with real:
            prev_i = b.select(first, zero, b.sub(i, one))
            here = b.mul(b.load(b.gep(perm, [i])), rs)
            there = b.mul(b.load(b.gep(perm, [prev_i])), rs)
            from .sort import _Loop
            fields = _Loop(b, fn, zero, lambda j: b.icmp_unsigned("<", j, r), "fields")
            differs = fields.carry(ir.Constant(ir.IntType(1), 0))
            o = b.load(b.gep(off, [fields.var]))
            x = b.load(b.gep(src, [b.add(here, o)]))
            y = b.load(b.gep(src, [b.add(there, o)]))
            ne = b.fcmp_unordered("!=", x, y) if dtype.kind == "f" else \
                b.icmp_unsigned("!=", x, y)
            differs.add_incoming(b.or_(differs, ne), b.block)
            fields.close(b.add(fields.var, one))
            b.store(b.zext(b.or_(first, differs), I64), b.gep(flags, [i]))
        with end:
            b.store(zero, b.gep(flags, [i]))
    loop.close(b.add(i, step))
    b.ret_void()
    return str(module)


def _kernel(kind: str, key: Any, make: Any) -> tuple[str, str, str]:
    from . import ptx as ptxmod
    from .driver import current_target
    with _lock:
        if (kind, key) not in _KERNELS:
            name = f"ta_{kind}_{key}"
            text = make(key, name)
            _KERNELS[(kind, key)] = (name, text, ptxmod.compile_ptx(text, current_target()))
        return _KERNELS[(kind, key)]


def _launch_over(dev: Any, kind: str, key: Any, make: Any, count: int, args: list) -> None:
    from .driver import sm_count
    from .sort import _launch
    name, text, ptx = _kernel(kind, key, make)
    fn = dev.load(ptx, [name], text)[name]
    _launch(dev, fn, max(1, min(-(-count // THREADS), 32 * sm_count())), THREADS, args)


def _upload(dev: Any, host: np.ndarray, keep: list) -> int:
    host = np.ascontiguousarray(host, dtype=np.int64)
    block = dev.allocator.allocate(max(host.nbytes, 8))
    if host.nbytes:
        dev.htod(block.ptr, host.ctypes.data, host.nbytes)
    keep.append(block)
    return block.ptr


def _field_offsets(shape: tuple, strides: tuple, axis: int) -> np.ndarray:
    """Each field's element offset (the other axes' positions, in C order, times their
    strides)."""
    rest = [d for d in range(len(shape)) if d != axis]
    off = np.zeros([shape[d] for d in rest], dtype=np.int64)
    for k, d in enumerate(rest):
        ix = np.arange(shape[d], dtype=np.int64) * strides[d]
        off = off + ix.reshape([-1 if q == k else 1 for q in range(len(rest))])
    return off.reshape(-1)


class _Rows:
    """The lexicographic order of ``src``'s rows along ``axis`` and the sorted rows' group
    marks, scanned: ``perm`` (int64, n), ``groups`` (the scanned marks, n + 1), ``total``
    (the number of groups, when given a device pointer for it)."""

    def __init__(self, dev: Any, src: DeviceBuffer, axis: int, total: int, keep: list):
        from . import unique as flat
        from .sort import _launch, _sort_rows
        dt = np.dtype(src.dtype)
        shape, strides = tuple(src.shape), tuple(src.strides)
        self.n, self.rs = shape[axis], strides[axis]
        self.r = math.prod(shape) // self.n
        self.off = _field_offsets(shape, strides, axis)
        self.off_ptr = _upload(dev, self.off, keep)
        zero = _upload(dev, np.zeros(1), keep)
        n, size = self.n, dt.itemsize
        key = dev.allocator.allocate(n * size)
        vals = dev.allocator.allocate(n * size)
        step = dev.allocator.allocate(n * 8)
        perm = dev.allocator.allocate(n * 8)
        nxt = dev.allocator.allocate(n * 8)
        keep += [key, vals, step, perm, nxt]
        self.ok = True
        for c in range(self.r - 1, -1, -1):     # the last field first, as np.lexsort
            first = c == self.r - 1
            _launch_over(dev, "take", size, take_kernel_ir, n,
                         [src.ptr, 0 if first else perm.ptr, n, 1, self.rs,
                          self.off_ptr + 8 * c, key.ptr, 1, zero])
            got = _sort_rows(dev, DeviceBuffer(key.ptr, (n,), (1,), dt),
                             DeviceBuffer(vals.ptr, (n,), (1,), dt),
                             DeviceBuffer(step.ptr if not first else perm.ptr, (n,), (1,),
                                          np.dtype(np.int64)), 0)
            if got is NotImplemented:
                self.ok = False
                return
            if not first:                           # perm = perm[step]
                _launch_over(dev, "take", 8, take_kernel_ir, n,
                             [perm.ptr, step.ptr, n, 1, 1, zero, nxt.ptr, 1, zero])
                perm, nxt = nxt, perm
        self.perm = perm.ptr
        groups = dev.allocator.allocate((n + 1) * 8)
        keep.append(groups)
        _launch_over(dev, "rowdiff", dt.name, rowdiff_kernel_ir, n + 1,
                     [src.ptr, self.perm, n, self.r, self.rs, self.off_ptr, groups.ptr])
        fns = flat._functions(dev, np.dtype(np.int64))
        names = flat._kernels(np.dtype(np.int64))[0]
        _launch(dev, fns[names[1]], 1, flat.SCAN_THREADS, [groups.ptr, n + 1, total])
        self.fns, self.names = fns, names
        self.groups = groups.ptr + 8     # the scanned marks up to each row: its group + 1


def takes(src: DeviceBuffer, axis: Any, sorted: bool) -> bool:
    """Whether the device makes the rows along ``axis`` unique (see the module's text)."""
    from .sort import sortable
    if axis is None or not sorted or not sortable(src.dtype) or len(src.shape) < 2:
        return False
    from .unique import MAX_CHUNKS
    n = src.shape[axis]
    r = math.prod(src.shape) // n if n else 0
    return 0 < n < MAX_CHUNKS and 0 < r <= MAX_FIELDS


def unique_count(dev: Any, src: DeviceBuffer, out: Any, axis: int) -> Any:
    keep: list = []
    rows = _Rows(dev, src, axis, out.ptr, keep)
    return None if rows.ok else NotImplemented


def unique(dev: Any, src: DeviceBuffer, axis: int, count: int, values: Any, index: Any,
           inverse: Any, counts: Any, return_index: bool) -> Any:
    from . import unique as flat
    from .driver import sm_count
    from .sort import _launch
    if inverse is not None and not return_index and np.dtype(src.dtype).kind == "f":
        return NotImplemented
    keep: list = []
    rows = _Rows(dev, src, axis, 0, keep)
    if not rows.ok:
        return NotImplemented
    n, i64 = rows.n, np.dtype(np.int64)
    tcount, nchunks, length = flat._marks(dev, rows.fns, i64, rows.groups, n, False, 0, keep)
    first = index
    if first is None and values is not None:
        first = dev.allocator.allocate(max(count, 1) * 8)
        keep.append(first)
    starts = dev.allocator.allocate(max(count, 1) * 8) if counts is not None else None
    keep.append(starts)
    grid = max(1, min(-(-nchunks // flat.THREADS), 32 * sm_count()))
    _launch(dev, rows.fns[rows.names[2]], grid, flat.THREADS,
            [rows.groups, rows.perm, n, 0, nchunks, length, tcount, count, 0,
             first.ptr if first is not None else 0,
             inverse.ptr if inverse is not None else 0,
             starts.ptr if starts is not None else 0])
    if counts is not None and count:
        _launch(dev, rows.fns[rows.names[3]], max(1, min(-(-count // flat.THREADS),
                                                         32 * sm_count())),
                flat.THREADS, [starts.ptr, n, count, counts.ptr])
    if values is not None and count:
        dst_off = _upload(dev, _field_offsets(tuple(values.shape), tuple(values.strides),
                                              axis), keep)
        _launch_over(dev, "take", np.dtype(src.dtype).itemsize, take_kernel_ir,
                     count * rows.r, [src.ptr, first.ptr, count, rows.r, rows.rs,
                                      rows.off_ptr, values.ptr, values.strides[axis],
                                      dst_off])
    return None
