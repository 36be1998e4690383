"""Lowering of one tiled kernel to an LLVM module (target independent).

The module holds an internal ``body`` function taking one ``noalias`` pointer per buffer,
the parameter array and a range ``[begin, end)`` of the kernel's parallel iteration range
(plus, for full reductions, the slot its partial result goes to), and an entry point with a
uniform signature that loads the pointers and calls it:

    void @<name>(i8** bufs, i64* params, i64 begin, i64 end, i64 slot)
    void @<name>_combine(i8** bufs, i64* params, i64 nslots)      ; full reductions only

The CPU runtime calls the entry on chunks of the range from a thread pool; a GPU driver
would wrap ``body`` with block/thread indexing. Loop counters and accumulators live in
allocas that LLVM's mem2reg turns into registers.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
from llvmlite import ir

from ..fuse.kexpr import KExpr, KLoad, KOp, KParam, KRed
from ..fuse.plan import Store
from ..tile import TileSpec, Variant
from ..tile.layout import ParamLayout, n_partial_buffers, param_layout
from . import scalar
from .scalar import MathLib

I64 = ir.IntType(64)
I8P = ir.IntType(8).as_pointer()
_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)
_INDEX = np.dtype(np.int64)


def accumulator_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """float16 sums and products accumulate in float32 (as NumPy's pairwise sum does)."""
    return _F32 if op in ("sum", "prod") and dtype == _F16 else dtype


class KernelLowering:
    def __init__(self, spec: TileSpec, variant: Variant, math: MathLib, name: str):
        self.spec, self.variant, self.math, self.name = spec, variant, math, name
        self.kernel = spec.kernel
        self.layout: ParamLayout = param_layout(self.kernel)
        self.module = ir.Module(name=name)
        self.loop_vars: dict[int, ir.Value] = {}
        self.red_values: dict[int, ir.Value] = {}

    # ------------------------------------------------------------------ module structure
    def buffer_dtypes(self) -> list[np.dtype]:
        k = self.kernel
        dts = [a.top.dtype for a in k.body.accesses]
        dts += [s.dest.dtype for s in k.stores]
        if self.spec.strategy == "full":
            for r in k.reductions:
                dts.append(accumulator_dtype(r.op, self._input_dtype(r)))
                if r.op in ("argmax", "argmin"):
                    dts.append(_INDEX)
        return dts

    def _input_dtype(self, red) -> np.dtype:
        return red.args[0].dtype if red.op in ("argmax", "argmin", "max", "min") else red.dtype

    def lower(self) -> str:
        dts = self.buffer_dtypes()
        ptr_types = [scalar.memory_type(dt).as_pointer() for dt in dts]
        body_ty = ir.FunctionType(ir.VoidType(), ptr_types + [I64.as_pointer(), I64, I64, I64])
        body = ir.Function(self.module, body_ty, name=f"{self.name}_body")
        body.linkage = "internal"
        body.attributes.add("alwaysinline")
        for a in body.args[:len(dts)]:
            a.add_attribute("noalias")
        self._emit_body(body, dts)
        self._emit_entry(f"{self.name}", body, ptr_types, with_range=True)
        if self.spec.strategy == "full":
            comb_ty = ir.FunctionType(ir.VoidType(), ptr_types + [I64.as_pointer(), I64])
            comb = ir.Function(self.module, comb_ty, name=f"{self.name}_combine_body")
            comb.linkage = "internal"
            comb.attributes.add("alwaysinline")
            self._emit_combine(comb, dts)
            self._emit_entry(f"{self.name}_combine", comb, ptr_types, with_range=False)
        return str(self.module)

    def _emit_entry(self, name: str, body: ir.Function, ptr_types: list[ir.Type],
                    with_range: bool) -> None:
        extra = [I64, I64, I64] if with_range else [I64]
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(),
                                                      [I8P.as_pointer(), I64.as_pointer()] + extra),
                         name=name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        bufs, params = fn.args[0], fn.args[1]
        ptrs = [b.bitcast(b.load(b.gep(bufs, [ir.Constant(I64, i)])), t)
                for i, t in enumerate(ptr_types)]
        b.call(body, ptrs + [params] + list(fn.args[2:]))
        b.ret_void()

    # ------------------------------------------------------------------ helpers
    def _begin_function(self, fn: ir.Function, n_ptrs: int) -> None:
        self.fn = fn
        self.ptrs = fn.args[:n_ptrs]
        entry = fn.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(entry)
        start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        params = fn.args[n_ptrs]
        self.slots = [self.alloca_builder.load(self.alloca_builder.gep(params, [ir.Constant(I64, i)]))
                      for i in range(self.layout.size)]
        self._entry_block = entry

    def _end_function(self) -> None:
        self.b.ret_void()
        self.alloca_builder.branch(self.fn.blocks[1])

    def alloca(self, ty: ir.Type) -> ir.Value:
        return self.alloca_builder.alloca(ty)

    def extent(self, d: int) -> ir.Value:
        return self.slots[self.layout.extent_slot(d)]

    @contextmanager
    def loop(self, start: ir.Value, stop: ir.Value) -> Iterator[ir.Value]:
        """``for i in range(start, stop)`` with the body emitted inside the with-block."""
        b = self.b
        counter = self.alloca(I64)
        b.store(start, counter)
        head = self.fn.append_basic_block("loop.head")
        body = self.fn.append_basic_block("loop.body")
        done = self.fn.append_basic_block("loop.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.load(counter)
        b.cbranch(b.icmp_signed("<", i, stop), body, done)
        b.position_at_end(body)
        yield i
        b.store(b.add(i, ir.Constant(I64, 1)), counter)
        b.branch(head)
        b.position_at_end(done)

    @contextmanager
    def nest(self, dims: tuple[int, ...]) -> Iterator[None]:
        """Nested loops over full extents of ``dims`` (outer to inner), setting loop_vars."""
        if not dims:
            yield
            return
        with self.loop(ir.Constant(I64, 0), self.extent(dims[0])) as i:
            self.loop_vars[dims[0]] = i
            with self.nest(dims[1:]):
                yield

    def set_par_index(self, p: ir.Value) -> None:
        """Decompose the flattened parallel index into the parallel dimensions."""
        dims = self.spec.par_dims
        for k, d in enumerate(reversed(dims)):
            if k == len(dims) - 1:
                self.loop_vars[d] = p
            else:
                ext = self.extent(d)
                self.loop_vars[d] = self.b.urem(p, ext)
                p = self.b.udiv(p, ext)

    def _address(self, ptr: ir.Value, slots: tuple[int, tuple[int | None, ...]], unit: bool
                 ) -> ir.Value:
        base, strides = slots
        off = self.slots[base]
        vdim = self.spec.vector_dim
        for d, s in enumerate(strides):
            if s is None:
                continue
            i = self.loop_vars[d]
            term = i if (unit and d == vdim) else self.b.mul(i, self.slots[s])
            off = self.b.add(off, term)
        return self.b.gep(ptr, [off])

    # ------------------------------------------------------------------ expressions
    def ev(self, e: KExpr, memo: dict[int, ir.Value]) -> ir.Value:
        key = id(e)
        v = memo.get(key)
        if v is not None:
            return v
        if isinstance(e, KLoad):
            ptr = self._address(self.ptrs[e.access], self.layout.load_slots[e.access],
                                self.variant.unit_loads[e.access])
            v = scalar.load_value(self.b, ptr, e.dtype)
        elif isinstance(e, KParam):
            v = self._param_value(self.slots[self.layout.scalar_slots[e.param]], e.dtype)
        elif isinstance(e, KRed):
            v = self.red_values[e.reduction]
        elif isinstance(e, KOp):
            args = [self.ev(a, memo) for a in e.args]
            if e.op == "cast":
                v = scalar.cast(self.b, args[0], e.in_dtypes[0], e.dtype)
            else:
                v = scalar.lower_op(self.b, e.op, args, list(e.in_dtypes), e.dtype, self.math)
        else:  # pragma: no cover
            raise TypeError(e)
        memo[key] = v
        return v

    def _param_value(self, slot: ir.Value, dtype: np.dtype) -> ir.Value:
        ty = scalar.llvm_type(dtype)
        bits = dtype.itemsize * 8 if dtype != np.dtype(bool) else 1
        raw = slot if bits == 64 else self.b.trunc(slot, ir.IntType(bits))
        return raw if isinstance(ty, ir.IntType) else self.b.bitcast(raw, ty)

    def store(self, k: int, st: Store, value: ir.Value) -> None:
        ptr_index = len(self.kernel.body.accesses) + k
        ptr = self._address(self.ptrs[ptr_index], self.layout.store_slots[k],
                            self.variant.unit_stores[k])
        dt = st.dest.dtype
        if st.node.dtype != dt:  # pragma: no cover - concatenation casts its operands first
            value = scalar.cast(self.b, value, st.node.dtype, dt)
        scalar.store_value(self.b, value, ptr, dt)

    # ------------------------------------------------------------------ reductions
    def _acc_init(self, red) -> tuple[ir.Value, ir.Value | None]:
        op, in_dt = red.op, self._input_dtype(red)
        acc_dt = accumulator_dtype(op, in_dt)
        acc = self.alloca(scalar.llvm_type(acc_dt))
        idx = None
        if op in ("argmax", "argmin"):
            self.b.store(_arg_identity(op, in_dt), acc)
            idx = self.alloca(I64)
            self.b.store(ir.Constant(I64, 0), idx)
        else:
            self.b.store(scalar.reduce_identity(op, acc_dt), acc)
        return acc, idx

    def _accumulate(self, red, acc: ir.Value, idx: ir.Value | None, x: ir.Value,
                    position: ir.Value | None) -> None:
        b, op, in_dt = self.b, red.op, self._input_dtype(red)
        acc_dt = accumulator_dtype(op, in_dt)
        cur = b.load(acc)
        if op in ("argmax", "argmin"):
            take = _arg_better(b, op, x, cur, in_dt)
            b.store(b.select(take, x, cur), acc)
            b.store(b.select(take, position, b.load(idx)), idx)
            return
        if acc_dt != in_dt:
            x = scalar.cast(b, x, in_dt, acc_dt)
        if op in ("sum", "prod") and acc_dt.kind == "f":
            new = b.fadd(cur, x) if op == "sum" else b.fmul(cur, x)
            new.flags.append("reassoc")   # lets the loop vectoriser keep several partial sums
        else:
            new = scalar.reduce_combine(b, op, cur, x, acc_dt)
        b.store(new, acc)

    def _finalize(self, red, acc: ir.Value, idx: ir.Value | None) -> ir.Value:
        if idx is not None:
            return self.b.load(idx)
        v = self.b.load(acc)
        acc_dt = accumulator_dtype(red.op, self._input_dtype(red))
        return scalar.cast(self.b, v, acc_dt, red.dtype) if acc_dt != red.dtype else v

    # ------------------------------------------------------------------ strategies
    def _emit_body(self, fn: ir.Function, dts: list[np.dtype]) -> None:
        self._begin_function(fn, len(dts))
        begin, end, slot = fn.args[len(dts) + 1:]
        strategy = self.spec.strategy
        if strategy == "map":
            self._map_body(begin, end)
        elif strategy == "row":
            self._row_body(begin, end)
        elif strategy == "scan":
            self._scan_body(begin, end)
        elif strategy == "full":
            self._full_body(begin, end, slot)
        else:  # pragma: no cover
            raise AssertionError(strategy)
        self._end_function()

    def _is_full_store(self, st: Store) -> bool:
        return any(st.index and a.coef(d) for a in st.index for d in self.kernel.reduce_axes)

    def _stored_values(self, exprs: dict, stores: list[tuple[int, Store]], memo: dict) -> None:
        for k, st in stores:
            self.store(k, st, self.ev(exprs[st.node], memo))

    def _root_exprs(self) -> dict:
        k = self.kernel
        return {r.node: e for r, e in zip(k.roots, k.root_exprs)}

    def _map_body(self, begin: ir.Value, end: ir.Value) -> None:
        exprs = self._root_exprs()
        stores = list(enumerate(self.kernel.stores))
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            with self.nest(self.spec.inner_dims):
                self._stored_values(exprs, stores, {})

    def _reduce_phases(self, memo_factory=dict) -> None:
        """Each reduction sweeps the inner dims once; its value feeds later phases."""
        k = self.kernel
        for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
            acc, idx = self._acc_init(red)
            with self.nest(self.spec.inner_dims):
                x = self.ev(e, memo_factory())
                pos = self.loop_vars[red.attr("axes")[0]] if idx is not None else None
                self._accumulate(red, acc, idx, x, pos)
            self.red_values[j] = self._finalize(red, acc, idx)

    def _row_body(self, begin: ir.Value, end: ir.Value) -> None:
        k = self.kernel
        exprs = self._root_exprs()
        full = [(i, s) for i, s in enumerate(k.stores) if s.node in exprs and self._is_full_store(s)]
        rows = [(i, s) for i, s in enumerate(k.stores) if (i, s) not in full]
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            self._reduce_phases()
            if full:
                with self.nest(self.spec.inner_dims):
                    self._stored_values(exprs, full, {})
            memo: dict = {}
            for i, st in rows:
                if st.node in k.reductions:
                    self.store(i, st, self.red_values[k.reductions.index(st.node)])
                else:
                    self.store(i, st, self.ev(exprs[st.node], memo))

    def _scan_body(self, begin: ir.Value, end: ir.Value) -> None:
        k = self.kernel
        red, e = k.reductions[0], k.red_exprs[0]
        op = "add" if red.op == "cumsum" else "multiply"
        dt = red.dtype
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            acc = self.alloca(scalar.llvm_type(dt))
            self.b.store(scalar.constant(0 if op == "add" else 1, dt), acc)
            with self.nest(self.spec.inner_dims):
                x = self.ev(e, {})
                # Exact per-step arithmetic in the output dtype, as NumPy's accumulate does.
                v = scalar.lower_op(self.b, op, [self.b.load(acc), x], [dt, dt], dt, self.math)
                self.b.store(v, acc)
                self.store(0, k.stores[0], v)

    def _partial_ptrs(self) -> list[tuple[ir.Value, ir.Value | None]]:
        base = len(self.kernel.body.accesses) + len(self.kernel.stores)
        out, i = [], base
        for red in self.kernel.reductions:
            if red.op in ("argmax", "argmin"):
                out.append((self.ptrs[i], self.ptrs[i + 1]))
                i += 2
            else:
                out.append((self.ptrs[i], None))
                i += 1
        return out

    def _full_body(self, begin: ir.Value, end: ir.Value, slot: ir.Value) -> None:
        k = self.kernel
        accs = [self._acc_init(r) for r in k.reductions]
        (outer,) = self.spec.par_dims
        with self.loop(begin, end) as p:
            self.loop_vars[outer] = p
            with self.nest(self.spec.inner_dims):
                memo: dict = {}
                for red, e, (acc, idx) in zip(k.reductions, k.red_exprs, accs):
                    pos = self.loop_vars[red.attr("axes")[0]] if idx is not None else None
                    self._accumulate(red, acc, idx, self.ev(e, memo), pos)
        for red, (acc, idx), (pv, pi) in zip(k.reductions, accs, self._partial_ptrs()):
            self.b.store(self.b.load(acc), self.b.gep(pv, [slot]))
            if idx is not None:
                self.b.store(self.b.load(idx), self.b.gep(pi, [slot]))

    def _emit_combine(self, fn: ir.Function, dts: list[np.dtype]) -> None:
        """Combine the partial results in slot order, then compute the row outputs."""
        self._begin_function(fn, len(dts))
        nslots = fn.args[len(dts) + 1]
        k = self.kernel
        self.loop_vars = {d: ir.Constant(I64, 0) for d in range(len(k.space))}
        for j, (red, (pv, pi)) in enumerate(zip(k.reductions, self._partial_ptrs())):
            acc, idx = self._acc_init(red)
            with self.loop(ir.Constant(I64, 0), nslots) as s:
                x = self.b.load(self.b.gep(pv, [s]))
                if idx is not None:
                    self._accumulate(red, acc, idx, x, self.b.load(self.b.gep(pi, [s])))
                else:
                    acc_dt = accumulator_dtype(red.op, self._input_dtype(red))
                    cur = self.b.load(acc)
                    if red.op in ("sum", "prod"):
                        new = scalar.lower_op(self.b, "add" if red.op == "sum" else "multiply",
                                              [cur, x], [acc_dt, acc_dt], acc_dt, self.math)
                    else:
                        new = scalar.reduce_combine(self.b, red.op, cur, x, acc_dt)
                    self.b.store(new, acc)
            self.red_values[j] = self._finalize(red, acc, idx)
        exprs = self._root_exprs()
        memo: dict = {}
        for i, st in enumerate(k.stores):
            if st.node in k.reductions:
                self.store(i, st, self.red_values[k.reductions.index(st.node)])
            else:
                self.store(i, st, self.ev(exprs[st.node], memo))
        self._end_function()


def _arg_identity(op: str, dt: np.dtype) -> ir.Constant:
    """Start value of argmax (the lowest value) / argmin (the highest)."""
    if dt.kind == "f":
        return scalar.constant(-np.inf if op == "argmax" else np.inf, dt)
    if dt.kind == "b":
        return scalar.constant(op == "argmin", dt)
    info = np.iinfo(dt)
    return scalar.constant(info.min if op == "argmax" else info.max, dt)


def _arg_better(b: ir.IRBuilder, op: str, x: ir.Value, cur: ir.Value, dt: np.dtype) -> ir.Value:
    """Whether ``x`` replaces ``cur``: strictly better, or the first NaN (NumPy's rule)."""
    if dt.kind == "f":
        if dt == _F16:
            x32, cur32 = b.fpext(x, ir.FloatType()), b.fpext(cur, ir.FloatType())
        else:
            x32, cur32 = x, cur
        better = b.fcmp_ordered(">" if op == "argmax" else "<", x32, cur32)
        x_nan = b.fcmp_unordered("uno", x32, x32)
        cur_nan = b.fcmp_unordered("uno", cur32, cur32)
        return b.and_(b.not_(cur_nan), b.or_(better, x_nan))
    cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
    return cmp(">" if op == "argmax" else "<", x, cur)


def lower_kernel(spec: TileSpec, variant: Variant, math: MathLib, name: str) -> str:
    """Entry point of the codegen stage: LLVM IR text of one kernel variant."""
    return KernelLowering(spec, variant, math, name).lower()


def entry_names(spec: TileSpec, name: str) -> list[str]:
    return [name, f"{name}_combine"] if spec.strategy == "full" else [name]


__all__ = ["lower_kernel", "entry_names", "accumulator_dtype", "n_partial_buffers"]
