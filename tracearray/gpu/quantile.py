"""``np.quantile`` / ``np.percentile`` and their nan* variants on the GPU: NumPy's values
from the sorted rows.

Which sorted positions a quantile reads, and with which weights it interpolates, depend on
the row's length and on q alone (``ops.sorting.quantile_plan``, computed on the host with
NumPy's own helpers). The rows are sorted by the block sort or the radix sort into a scratch
array (``sort._sorted_rows``); then one thread per (q, row) reads the one or two values and
combines them as NumPy's ``_lerp`` does: the difference in the values' dtype, then one
rounded multiply and one rounded add or subtract in the result's dtype (no fused
multiply-add: NumPy rounds the product), and the row's last value where it is NaN. The nan*
variants read a row's valid values only (NaN sorts last: a binary search counts them) with
the plan's entry for that many. Integer rows subtract in their own dtype (wrapping, as NumPy's
``b - a`` does) before converting; the methods without interpolation copy the value read.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
from llvmlite import ir

from ..ops.sorting import QuantilePlan

I64 = ir.IntType(64)
_KERNELS: dict[tuple[str, str], tuple[str, str, str]] = {}
_lock = threading.Lock()


def quantile_kernel_ir(dtype: Any, res: Any, name: str) -> str:
    """``name(sorted, out, table, weights, nrows, n, nq, ne, nanrows)``: ``out[k * nrows +
    r]``, quantile k of sorted row r (C-contiguous rows of ``n`` values of ``dtype``), in
    ``res``. ``table`` holds the plan's ``ne`` int64 ``prev``, then ``next``, then ``mode``;
    ``weights`` its ``ne`` ``t``, then ``omt``, in ``res``. ``nanrows`` (np.nanquantile): the
    plan has an entry per row length (``(valid - 1) * nq + k``), a row reads its valid values
    (counted by a binary search for its first NaN), NaN where it has none, and when the
    first row has none every value is rounded to ``dtype`` (NumPy's apply_along_axis makes
    its output in the dtype of that row's result). Integer rows: ``b - a`` in their dtype
    (wrapping, as NumPy's does), then converted; a ``res`` of ``dtype`` itself (methods
    without interpolation) copies the value read."""
    from .sort import _Loop, _key_type, sreg, valid_count
    dtype, res = np.dtype(dtype), np.dtype(res)
    kt, rt = _key_type(dtype), _key_type(res)
    floats = dtype.kind == "f"
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [
        kt.as_pointer(1), rt.as_pointer(1), I64.as_pointer(1), rt.as_pointer(1)] + [I64] * 5),
        name=name)
    fn.calling_convention = "ptx_kernel"
    src, out, table, weights, nrows, n, nq, ne, nanrows = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)

    def widen(v: ir.Value) -> ir.Value:
        if rt == kt:
            return v
        if floats:
            return b.fpext(v, rt)
        return (b.sitofp if dtype.kind == "i" else b.uitofp)(v, rt)

    tid, ntid, ctaid, nctaid = (sreg(b, r) for r in ("tid.x", "ntid.x", "ctaid.x", "nctaid.x"))
    first_none = None
    if floats and rt != kt:
        first_none = b.and_(b.icmp_signed("!=", nanrows, zero),
                            b.icmp_signed("==", valid_count(b, fn, src, zero, n, nanrows,
                                                            "first"), zero))
    total = b.mul(nq, nrows)
    loop = _Loop(b, fn, b.add(b.mul(ctaid, ntid), tid), lambda k: b.icmp_signed("<", k, total),
                 "k")
    k = loop.var
    qi = b.sdiv(k, nrows)
    base = b.mul(b.sub(k, b.mul(qi, nrows)), n)
    valid = valid_count(b, fn, src, base, n, nanrows, "valid") if floats else n
    none = b.icmp_signed("==", valid, zero)
    entry = b.select(b.icmp_signed("!=", nanrows, zero),
                     b.add(b.mul(b.select(none, zero, b.sub(valid, one)), nq), qi), qi)
    prev = b.load(b.gep(table, [entry]))
    a = b.load(b.gep(src, [b.add(base, prev)]))
    if res.kind != "f":   # (no interpolation: the value read, in its own dtype)
        r = a
    else:
        nxt = b.load(b.gep(table, [b.add(ne, entry)]))
        mode = b.load(b.gep(table, [b.add(b.add(ne, ne), entry)]))
        c = b.load(b.gep(src, [b.add(base, nxt)]))
        t = b.load(b.gep(weights, [entry]))
        omt = b.load(b.gep(weights, [b.add(ne, entry)]))
        diff = widen(b.fsub(c, a) if floats else b.sub(c, a))
        low = b.fadd(widen(a), b.fmul(diff, t))
        high = b.fsub(widen(c), b.fmul(diff, omt))
        r = b.select(b.icmp_signed("==", mode, ir.Constant(I64, 2)), high, low)
        r = b.select(b.icmp_signed("==", mode, zero), widen(a), r)
    if floats:
        # np.quantile: a row with a NaN (the last sorted value) gives it; np.nanquantile:
        # NaN for a row without valid values
        last = b.load(b.gep(src, [b.add(base, b.sub(n, one))]))
        r = b.select(b.and_(b.icmp_signed("==", nanrows, zero),
                            b.fcmp_unordered("uno", last, last)), widen(last), r)
        r = b.select(none, ir.Constant(rt, float("nan")), r)
        if first_none is not None:
            r = b.select(first_none, b.fpext(b.fptrunc(r, kt), rt), r)
    b.store(r, b.gep(out, [k]))
    loop.close(b.add(k, b.mul(nctaid, ntid)))
    b.ret_void()
    return str(module)


def _kernel(dtype: np.dtype, res: np.dtype) -> tuple[str, str, str]:
    """(entry name, IR, PTX) of the kernel for values of ``dtype`` and results of ``res``,
    made once per process (the PTX through the disk cache)."""
    from . import ptx as ptxmod
    from .driver import current_target
    key = (np.dtype(dtype).str, np.dtype(res).str)
    with _lock:
        if key not in _KERNELS:
            name = f"ta_quantile_{np.dtype(dtype).name}_{np.dtype(res).name}"
            text = quantile_kernel_ir(dtype, res, name)
            _KERNELS[key] = (name, text, ptxmod.compile_ptx(text, current_target()))
        return _KERNELS[key]


def launch_quantiles(dev: Any, scratch: Any, out: Any, rows: int, n: int, nq: int,
                     plan: QuantilePlan, dtype: np.dtype, nanrows: bool) -> None:
    """The ``nq`` quantiles of the ``rows`` sorted rows of ``n`` in ``scratch`` into ``out``
    (``nanrows``: of their valid values, the plan's entries per row length)."""
    from .driver import sm_count
    from .sort import _launch
    table = np.ascontiguousarray(np.concatenate([plan.prev, plan.next, plan.mode]), np.int64)
    weights = np.ascontiguousarray(np.concatenate([plan.t, plan.omt]), plan.dtype)
    tbuf = dev.allocator.allocate(table.nbytes)
    wbuf = dev.allocator.allocate(weights.nbytes)
    # pageable copies: staged before htod returns, so the host arrays may go
    dev.htod(tbuf.ptr, table.ctypes.data, table.nbytes)
    dev.htod(wbuf.ptr, weights.ctypes.data, weights.nbytes)
    name, text, ptx = _kernel(dtype, plan.dtype)
    fn = dev.load(ptx, [name], text)[name]
    total = nq * rows
    _launch(dev, fn, max(1, min(-(-total // 128), 32 * sm_count())), 128,
            [scratch.ptr, out.ptr, tbuf.ptr, wbuf.ptr, rows, n, nq, len(plan.prev),
             int(nanrows)])
    # the blocks go back to the caching allocator, which reuses them in stream order
    del tbuf, wbuf
