"""``np.unique`` of the flattened array on the GPU: the device implementations of the
external ops ``unique_count`` and ``unique`` (``ops/sorting.py``).

NumPy sorts the flattened array (a stable sort when it is asked for ``return_index``),
marks where the sorted values change, and reads everything off those marks: the values at
the marks, the positions the sort moved them from (``return_index``), for every element the
number of marks up to it less one (``return_inverse``, scattered back through the sort's
permutation) and the distances between marks (``return_counts``). Here the sort is the
device's stable sort (``sort._sort_rows``: a block per row or the radix sort), and the
rest is four small kernels over the sorted values, cut into chunks of consecutive elements:

- ``count``: the marks in each chunk (a mark where a value differs from the one before it;
  NaNs are equal to each other when ``equal_nan``, as NumPy's ``equal_nan=True`` makes one
  NaN of them all);
- ``scan``: one block turns the chunks' counts into the marks before each chunk and writes
  the total (``unique_count``'s result, which the trace reads as the result's size);
- ``write``: each chunk's elements again, from its first slot: the values, the positions,
  each element's slot through the permutation, and where each slot starts;
- ``counts``: the distance from each slot's start to the next one's.

A stable sort puts each group's first occurrence first, so ``return_index`` is NumPy's (it
sorts stably for it); without it NumPy's quicksort may put ``-0.0`` or ``0.0`` first among
equal zeros, so a zero among the values may have the other sign (divergence
``gpu-sort-ties``). Along an axis the rows are made unique by ``unique_axis.py`` (with
these kernels for the marks); ``sorted=False``, float16 and the other dtypes the device
sorts do not take run NumPy's unique on the host.
"""
from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
from llvmlite import ir

from ..ops import EXTERNALS
from ..ops.external import DeviceBuffer
from .array import _c_strides

I32, I64 = ir.IntType(32), ir.IntType(64)
CHUNK = 256                 # elements per chunk (more when MAX_CHUNKS would be passed)
MAX_CHUNKS = 1 << 20        # (the scan is one block's)
SCAN_THREADS = 1024
THREADS = 256
_KERNELS: dict[str, tuple[list[str], str, str]] = {}
_lock = threading.Lock()
ENTRIES = ("_count", "_scan", "_write", "_counts")


def unique_kernel_ir(dtype: Any, name: str) -> str:
    """The four entries (``ENTRIES``) for sorted values of ``dtype``:

    - ``count(s, n, equal_nan, nchunks, len, tcount)``: ``tcount[c]``, the marks in chunk
      ``c`` (elements ``c * len`` to ``min((c + 1) * len, n)``);
    - ``scan(tcount, nchunks, total)``: ``tcount`` made exclusive prefix sums; their sum to
      ``total[0]`` unless ``total`` is null (one block);
    - ``write(s, perm, n, equal_nan, nchunks, len, tcount, count, values, index, inverse,
      starts)``: each output whose pointer is not null, slots below ``count`` only;
    - ``counts(starts, n, count, counts)``.
    """
    from .sort import _Loop, _key_type, sreg
    dtype = np.dtype(dtype)
    kt = _key_type(dtype)
    floats = dtype.kind == "f"
    module = ir.Module(name=name)
    P, Q = kt.as_pointer(1), I64.as_pointer(1)
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)

    def kernel(suffix: str, args: list[ir.Type]) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=name + suffix)
        fn.calling_convention = "ptx_kernel"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def global_ids(b: ir.IRBuilder) -> tuple[ir.Value, ir.Value]:
        tid, ntid = sreg(b, "tid.x"), sreg(b, "ntid.x")
        ctaid, nctaid = sreg(b, "ctaid.x"), sreg(b, "nctaid.x")
        return b.add(b.mul(ctaid, ntid), tid), b.mul(ntid, nctaid)

    def not_null(b: ir.IRBuilder, p: ir.Value) -> ir.Value:
        return b.icmp_unsigned("!=", b.ptrtoint(p, I64), zero)

    def mark(b: ir.IRBuilder, s: ir.Value, i: ir.Value, equal_nan: ir.Value) -> ir.Value:
        """i1: the sorted value at ``i`` starts a group."""
        first = b.icmp_unsigned("==", i, zero)
        a = b.load(b.gep(s, [i]))
        p = b.load(b.gep(s, [b.select(first, zero, b.sub(i, one))]))
        if floats:
            same = b.fcmp_ordered("==", a, p)
            both_nan = b.and_(b.fcmp_unordered("uno", a, a), b.fcmp_unordered("uno", p, p))
            same = b.or_(same, b.and_(both_nan, b.icmp_unsigned("!=", equal_nan, zero)))
        else:
            same = b.icmp_unsigned("==", a, p)
        return b.or_(first, b.not_(same))

    def chunks(b: ir.IRBuilder, fn: ir.Function, nchunks: ir.Value, tag: str):
        start, step = global_ids(b)
        return _Loop(b, fn, start, lambda c: b.icmp_unsigned("<", c, nchunks), tag), step

    def bounds(b: ir.IRBuilder, c: ir.Value, length: ir.Value, n: ir.Value):
        lo = b.mul(c, length)
        hi = b.add(lo, length)
        return lo, b.select(b.icmp_unsigned("<", hi, n), hi, n)

    # count
    fn, b = kernel("_count", [P, I64, I64, I64, I64, Q])
    s, n, equal_nan, nchunks, length, tcount = fn.args
    loop, step = chunks(b, fn, nchunks, "chunk")
    lo, hi = bounds(b, loop.var, length, n)
    inner = _Loop(b, fn, lo, lambda i: b.icmp_unsigned("<", i, hi), "elem")
    acc = inner.carry(zero)
    acc.add_incoming(b.add(acc, b.zext(mark(b, s, inner.var, equal_nan), I64)), b.block)
    inner.close(b.add(inner.var, one))
    b.store(acc, b.gep(tcount, [loop.var]))
    loop.close(b.add(loop.var, step))
    b.ret_void()

    # scan (one block): each thread a contiguous run of the counts
    fn, b = kernel("_scan", [Q, I64, Q])
    tcount, m, total = fn.args
    shared_t = ir.ArrayType(I64, SCAN_THREADS + 1)
    shared = ir.GlobalVariable(module, shared_t, f"{name}_sums", addrspace=3)
    shared.linkage, shared.initializer, shared.align = "internal", \
        ir.Constant(shared_t, ir.Undefined), 8
    barrier_fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]),
                             "llvm.nvvm.barrier.cta.sync.aligned.all")
    tid, ntid = sreg(b, "tid.x"), sreg(b, "ntid.x")
    per = b.udiv(b.add(m, b.sub(ntid, one)), ntid)
    lo = b.mul(tid, per)
    lo = b.select(b.icmp_unsigned("<", lo, m), lo, m)
    hi = b.add(lo, per)
    hi = b.select(b.icmp_unsigned("<", hi, m), hi, m)

    def slot(i: ir.Value) -> ir.Value:
        return b.gep(shared, [ir.Constant(I32, 0), i])
    run = _Loop(b, fn, lo, lambda i: b.icmp_unsigned("<", i, hi), "sum")
    acc = run.carry(zero)
    acc.add_incoming(b.add(acc, b.load(b.gep(tcount, [run.var]))), run.body)
    run.close(b.add(run.var, one))
    b.store(acc, slot(tid))
    b.call(barrier_fn, [ir.Constant(I32, 0)])
    leader = b.icmp_unsigned("==", tid, zero)
    with b.if_then(leader):
        seq = _Loop(b, fn, zero, lambda j: b.icmp_unsigned("<", j, ntid), "seq")
        tot = seq.carry(zero)
        v = b.load(slot(seq.var))
        b.store(tot, slot(seq.var))
        tot.add_incoming(b.add(tot, v), seq.body)
        seq.close(b.add(seq.var, one))
        b.store(tot, slot(ir.Constant(I64, SCAN_THREADS)))
        with b.if_then(not_null(b, total)):
            b.store(tot, total)
    b.call(barrier_fn, [ir.Constant(I32, 0)])
    first = b.load(slot(tid))
    rewrite = _Loop(b, fn, lo, lambda i: b.icmp_unsigned("<", i, hi), "prefix")
    base = rewrite.carry(first)
    here = b.gep(tcount, [rewrite.var])
    v = b.load(here)
    b.store(base, here)
    base.add_incoming(b.add(base, v), rewrite.body)
    rewrite.close(b.add(rewrite.var, one))
    b.ret_void()

    # write
    fn, b = kernel("_write", [P, Q, I64, I64, I64, I64, Q, I64, P, Q, Q, Q])
    s, perm, n, equal_nan, nchunks, length, tcount, count, values, index, inverse, starts = \
        fn.args
    want = [not_null(b, p) for p in (values, index, inverse, starts)]
    loop, step = chunks(b, fn, nchunks, "chunk")
    lo, hi = bounds(b, loop.var, length, n)
    before = b.load(b.gep(tcount, [loop.var]))
    inner = _Loop(b, fn, lo, lambda i: b.icmp_unsigned("<", i, hi), "elem")
    marks = inner.carry(before)
    i = inner.var
    new = b.zext(mark(b, s, i, equal_nan), I64)
    upto = b.add(marks, new)
    k = b.sub(upto, one)
    inside = b.icmp_unsigned("<", k, count)
    with b.if_then(b.and_(b.icmp_unsigned("!=", new, zero), inside)):
        with b.if_then(want[0]):
            b.store(b.load(b.gep(s, [i])), b.gep(values, [k]))
        with b.if_then(want[1]):
            b.store(b.load(b.gep(perm, [i])), b.gep(index, [k]))
        with b.if_then(want[3]):
            b.store(i, b.gep(starts, [k]))
    with b.if_then(b.and_(want[2], inside)):
        b.store(k, b.gep(inverse, [b.load(b.gep(perm, [i]))]))
    marks.add_incoming(upto, b.block)
    inner.close(b.add(i, one))
    loop.close(b.add(loop.var, step))
    b.ret_void()

    # counts
    fn, b = kernel("_counts", [Q, I64, I64, Q])
    starts, n, count, counts = fn.args
    start, step = global_ids(b)
    loop = _Loop(b, fn, start, lambda k: b.icmp_unsigned("<", k, count), "slot")
    k = loop.var
    nxt = b.add(k, one)
    last = b.icmp_unsigned("<", nxt, count)
    with b.if_else(last) as (then, otherwise):
        with then:
            bb_then = b.block
            end_then = b.load(b.gep(starts, [nxt]))
        with otherwise:
            bb_else = b.block
    end = b.phi(I64)
    end.add_incoming(end_then, bb_then)
    end.add_incoming(n, bb_else)
    b.store(b.sub(end, b.load(b.gep(starts, [k]))), b.gep(counts, [k]))
    loop.close(b.add(k, step))
    b.ret_void()
    return str(module)


def _kernels(dtype: np.dtype) -> tuple[list[str], str, str]:
    """(entry names, IR, PTX) for ``dtype``, made once per process (the PTX through the disk
    cache)."""
    from . import ptx as ptxmod
    from .driver import current_target
    key = np.dtype(dtype).str
    with _lock:
        if key not in _KERNELS:
            name = f"ta_unique_{np.dtype(dtype).name}"
            text = unique_kernel_ir(dtype, name)
            _KERNELS[key] = ([name + e for e in ENTRIES], text,
                             ptxmod.compile_ptx(text, current_target()))
        return _KERNELS[key]


def _takes(src: DeviceBuffer, axis: Any, sorted: bool) -> bool:
    """The flattened array's unique (a 1-d operand's along axis 0 is NumPy's that too)."""
    from .sort import sortable
    return (axis is None or len(src.shape) == 1) and sorted and sortable(src.dtype)


def _sorted_flat(dev: Any, src: DeviceBuffer, with_perm: bool, keep: list) -> Any:
    """The flattened ``src`` (C order) sorted stably into scratch, and the permutation when
    ``with_perm``: ``(values, perm or None, n)`` as device pointers; NotImplemented when the
    sorts do not take it."""
    from .copy import COPY_MAX_RANK, strided_copy
    from .sort import _sort_rows
    shape, dt = tuple(src.shape), np.dtype(src.dtype)
    n = math.prod(shape)
    ptr = src.ptr
    if n and tuple(src.strides) != tuple(_c_strides(shape, 1)):
        if len(shape) > COPY_MAX_RANK:
            return NotImplemented
        gathered = dev.allocator.allocate(n * dt.itemsize)
        keep += [gathered, strided_copy(dev, gathered.ptr, src.ptr, shape, src.strides, 0,
                                        dt.itemsize)]
        ptr = gathered.ptr
    vals = dev.allocator.allocate(max(n, 1) * dt.itemsize)
    perm = dev.allocator.allocate(max(n, 1) * 8) if with_perm else None
    keep += [vals, perm]
    if n:
        flat = DeviceBuffer(ptr, (n,), (1,), dt)
        got = _sort_rows(dev, flat, DeviceBuffer(vals.ptr, (n,), (1,), dt),
                         DeviceBuffer(perm.ptr, (n,), (1,), np.dtype(np.int64))
                         if perm is not None else None, 0)
        if got is NotImplemented:
            return NotImplemented
    return vals.ptr, perm.ptr if perm is not None else 0, n


def _chunks(n: int) -> tuple[int, int]:
    nchunks = max(1, min(-(-n // CHUNK), MAX_CHUNKS))
    return nchunks, max(1, -(-n // nchunks))


def _marks(dev: Any, fns: dict, dtype: np.dtype, s: int, n: int, equal_nan: bool,
           total: int, keep: list) -> tuple[int, int, int]:
    """The count and scan kernels: ``(tcount, nchunks, length)``; the number of groups
    written to ``total`` (a device pointer) unless it is 0."""
    from .driver import sm_count
    from .sort import _launch
    nchunks, length = _chunks(n)
    tcount = dev.allocator.allocate(nchunks * 8)
    keep.append(tcount)
    names = _kernels(dtype)[0]
    grid = max(1, min(-(-nchunks // THREADS), 32 * sm_count()))
    _launch(dev, fns[names[0]], grid, THREADS,
            [s, n, int(equal_nan), nchunks, length, tcount.ptr])
    _launch(dev, fns[names[1]], 1, SCAN_THREADS, [tcount.ptr, nchunks, total])
    return tcount.ptr, nchunks, length


def _functions(dev: Any, dtype: np.dtype) -> dict:
    names, text, ptx = _kernels(dtype)
    return dev.load(ptx, names, text)


def unique_count(dev: Any, operands: list, results: list, *, axis: Any, equal_nan: bool,
                 sorted: bool, **flags: bool) -> Any:
    """The number of distinct values of the flattened operand (``np.unique``'s length)."""
    from . import unique_axis
    src, out = operands[0], results[0]
    if out is None:
        return None
    if unique_axis.takes(src, axis, sorted):
        return unique_axis.unique_count(dev, src, out, axis)
    if not _takes(src, axis, sorted):
        return NotImplemented
    keep: list = []
    got = _sorted_flat(dev, src, False, keep)
    if got is NotImplemented:
        return NotImplemented
    s, _perm, n = got
    _marks(dev, _functions(dev, src.dtype), np.dtype(src.dtype), s, n, equal_nan, out.ptr,
           keep)
    return None


def unique(dev: Any, operands: list, results: list, *, axis: Any, count: int,
           equal_nan: bool, sorted: bool, return_index: bool, return_inverse: bool,
           return_counts: bool) -> Any:
    """``np.unique`` of the flattened operand with ``count`` distinct values (the probe's):
    the values, then the results the flags ask for, in NumPy's order."""
    from .driver import sm_count
    from .sort import _launch
    from . import unique_axis
    src = operands[0]
    outs = iter(results[1:])
    values = results[0]
    index = next(outs) if return_index else None
    inverse = next(outs) if return_inverse else None
    counts = next(outs) if return_counts else None
    if unique_axis.takes(src, axis, sorted):
        return unique_axis.unique(dev, src, axis, count, values, index, inverse, counts,
                                  return_index)
    if not _takes(src, axis, sorted):
        return NotImplemented
    keep: list = []
    got = _sorted_flat(dev, src, index is not None or inverse is not None, keep)
    if got is NotImplemented:
        return NotImplemented
    s, perm, n = got
    if n == 0:
        return None
    dt = np.dtype(src.dtype)
    fns = _functions(dev, dt)
    names = _kernels(dt)[0]
    tcount, nchunks, length = _marks(dev, fns, dt, s, n, equal_nan, 0, keep)
    starts = dev.allocator.allocate(max(count, 1) * 8) if counts is not None else None
    keep.append(starts)
    grid = max(1, min(-(-nchunks // THREADS), 32 * sm_count()))
    _launch(dev, fns[names[2]], grid, THREADS,
            [s, perm, n, int(equal_nan), nchunks, length, tcount, count,
             values.ptr if values is not None else 0, index.ptr if index is not None else 0,
             inverse.ptr if inverse is not None else 0,
             starts.ptr if starts is not None else 0])
    if counts is not None and count:
        _launch(dev, fns[names[3]], max(1, min(-(-count // THREADS), 32 * sm_count())),
                THREADS, [starts.ptr, n, count, counts.ptr])
    return None


def register() -> None:
    """Make these the "cuda" implementations of ``unique_count`` and ``unique``."""
    EXTERNALS["unique_count"].device["cuda"] = unique_count
    EXTERNALS["unique"].device["cuda"] = unique
