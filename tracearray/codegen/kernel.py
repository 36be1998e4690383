"""Lowering of one kernel, in one loop geometry, to an LLVM module (target independent).

The module holds an internal ``body`` function taking one ``noalias`` pointer per buffer,
the parameter array and a range ``[begin, end)`` of the geometry's parallel range (plus, for
full reductions, the slot its partial result goes to), and entry points with a uniform
signature that load the pointers and call it:

    void @<name>(i8** bufs, i64* params, i64 begin, i64 end, i64 slot)
    void @<name>_combine(i8** bufs, i64* params, i64 nslots)      ; full reductions only

The CPU runtime calls the entry on chunks of the range from a thread pool; a GPU driver wraps
``body`` with block/thread indexing. Loop counters and accumulators live in allocas that
LLVM's mem2reg turns into registers.

Strategies (see tile/geometry.py): ``map`` and ``map2d`` evaluate the stored roots at every
point; ``row`` sweeps a row once per reduction phase, then once for the full-space outputs,
then writes the row outputs; ``col`` does the same for a tile of columns at once with an
array of accumulators; ``full`` accumulates one slot's partial results, which ``combine``
merges in slot order; ``scan`` runs a sequential accumulator along its axis; ``scatter``
writes values at positions loaded from data, in order along its index dimensions. Float sums
run their innermost loop in blocks combined pairwise, and a column's sum adds blocks of rows
with compensation (``summation.py``): at least NumPy's accuracy.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np
from llvmlite import ir

from ..fuse.index import loaded_indices
from ..fuse.kexpr import KExpr, KIndex, KLoad, KNested, KOp, KParam, KRed
from ..fuse.plan import Store
from ..ops import OPS, Reducer
from ..ops.ir import declare
from ..tile import COLUMN_SUM_BLOCK, STRIDED_SUM_BLOCK, SUM_BLOCK
from ..tile.geometry import Geometry
from ..tile.gpu import atomic_combine
from ..tile.layout import ParamLayout, entry_names, param_layout, partial_dtypes
from . import scalar
from .scalar import MathLib
from .summation import PairwiseSum, compensated_add

I64 = ir.IntType(64)
I32 = ir.IntType(32)
# arg-reductions' blocks (``_arg_two_pass``): pass 2 rescans one block
ARG_BLOCK = 2048
# arg-reductions of rows of at least ARG_LANES_MIN positions (``_arg_lanes``): ARG_UNROLL
# vectors of ARG_LANES lanes; ARG_STRATEGY "two-pass" turns it off (benchmarks compare both)
ARG_LANES, ARG_UNROLL, ARG_LANES_MIN = 16, 4, 256
ARG_STRATEGY = "lanes"
I8P = ir.IntType(8).as_pointer()
_INDEX = np.dtype(np.int64)


def reducer(op: str) -> Reducer:
    return OPS[op].reducer


def is_arg_reduction(op: str) -> bool:
    """argmax / argmin: the result is the index the reducer carries along."""
    return OPS[op].reducer.index is not None


def accumulator_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """float16 sums and products accumulate in float32 (as NumPy's pairwise sum does)."""
    return reducer(op).accumulator_dtype(dtype)


def reduction_identity(op: str, acc_dt: np.dtype) -> ir.Constant:
    """Start value of a reduction's accumulator. NumPy 2's ``add.reduce`` starts from the
    identity +0.0, not from the first element: ``np.sum([-0.0])`` and an empty sum are +0.0
    (with -0.0, sums of -0.0s and empty sums came out -0.0, and ``1 / s`` -inf)."""
    return reducer(op).identity(acc_dt)


def reduction_input_dtype(red) -> np.dtype:
    """The dtype a reduction combines: its operand's for max/min/arg*, else its result's."""
    return red.args[0].dtype if reducer(red.op).operand_dtype else red.dtype


def is_float_sum(red) -> bool:
    """Whether a reduction adds floats (sum and the NumPy functions built on it): those are
    summed pairwise or compensated (codegen/summation.py)."""
    acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
    return reducer(red.op).combine_op == "add" and acc_dt.kind == "f"


class KernelLowering:
    def __init__(self, geometry: Geometry, math: MathLib, name: str):
        self.geo, self.math, self.name = geometry, math, name
        self.kernel = geometry.kernel
        self.layout: ParamLayout = param_layout(geometry)
        self.module = ir.Module(name=name)
        self.loop_vars: dict[int, ir.Value] = {}
        self.red_value: Callable[[int], ir.Value] = self._red_register
        self.red_values: dict[int, ir.Value] = {}

    # ------------------------------------------------------------------ module structure
    def buffer_dtypes(self) -> list[np.dtype]:
        k = self.kernel
        dts = [a.top.dtype for a in k.body.accesses] + [s.dest.dtype for s in k.stores]
        if self.geo.strategy == "full":
            dts += partial_dtypes(self.geo)
        if k.body.checks:
            dts.append(_INDEX)     # the error flag (tile/layout.py), always last
        return dts

    @property
    def error_flag(self) -> ir.Value:
        return self.ptrs[-1]

    def lower(self) -> str:
        dts = self.buffer_dtypes()
        ptr_types = [scalar.memory_type(dt).as_pointer() for dt in dts]
        body = self._internal_function(f"{self.name}_body", ptr_types, [I64, I64, I64])
        self._begin_function(body, len(dts))
        begin, end, slot = body.args[len(dts) + 1:]
        {"map": self._map_body, "map2d": self._map2d_body, "row": self._row_body,
         "col": self._col_body, "scan": self._scan_body, "scatter": self._scatter_body,
         "full": lambda b, e: self._full_body(b, e, slot)}[self.geo.strategy](begin, end)
        self._end_function()
        self._emit_entry(self.name, body, ptr_types, [I64, I64, I64])
        if self.geo.strategy == "full":
            comb = self._internal_function(f"{self.name}_combine_body", ptr_types, [I64])
            self._emit_combine(comb, dts)
            self._emit_entry(f"{self.name}_combine", comb, ptr_types, [I64])
        return str(self.module)

    def _internal_function(self, name: str, ptr_types: list[ir.Type], extra: list[ir.Type]
                           ) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), ptr_types + [I64.as_pointer()] + extra), name=name)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        for a in fn.args[:len(ptr_types)]:
            a.add_attribute("noalias")   # outputs are fresh buffers; inputs are only read
        return fn

    def _emit_entry(self, name: str, body: ir.Function, ptr_types: list[ir.Type],
                    extra: list[ir.Type]) -> None:
        fn = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), [I8P.as_pointer(), I64.as_pointer()] + extra), name=name)
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
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        params = fn.args[n_ptrs]
        ab = self.alloca_builder
        self.slots = [ab.load(ab.gep(params, [ir.Constant(I64, i)]))
                      for i in range(self.layout.size)]

    def _end_function(self) -> None:
        self.b.ret_void()
        self.alloca_builder.branch(self.fn.blocks[1])

    def alloca(self, ty: ir.Type, count: int | None = None) -> ir.Value:
        if count is None:
            return self.alloca_builder.alloca(ty)
        return self.alloca_builder.alloca(ty, size=ir.Constant(I64, count))

    def const(self, v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def extent(self, d: int) -> ir.Value:
        return self.slots[self.layout.extent_slot(d)]

    @contextmanager
    def loop(self, start: ir.Value, stop: ir.Value, step: ir.Value | None = None
             ) -> Iterator[ir.Value]:
        """``for i in range(start, stop, step)`` (step > 0, default 1) with the body emitted
        inside the with-block."""
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
        b.store(b.add(i, self.const(1) if step is None else step), counter)
        b.branch(head)
        b.position_at_end(done)

    @contextmanager
    def nest(self, dims: tuple[int, ...]) -> Iterator[None]:
        """Nested loops over the full extents of ``dims`` (outer to inner)."""
        if not dims:
            yield
            return
        with self.loop(self.const(0), self.extent(dims[0])) as i:
            self.loop_vars[dims[0]] = i
            with self.nest(dims[1:]):
                yield

    def split(self, p: ir.Value, extents: list[ir.Value]) -> list[ir.Value]:
        """Row-major decomposition of a flattened index (the outermost part needs no urem)."""
        out: list[ir.Value] = []
        for k, ext in enumerate(reversed(extents)):
            if k == len(extents) - 1:
                out.append(p)
            else:
                out.append(self.b.urem(p, ext))
                p = self.b.udiv(p, ext)
        return list(reversed(out))

    def set_par_index(self, p: ir.Value, extra: list[ir.Value] = ()) -> list[ir.Value]:
        """Decompose the flattened parallel index into the parallel loop dims, followed by the
        extra (tile-count) extents; returns the indices for the extras."""
        dims = self.geo.par_dims
        parts = self.split(p, [self.extent(d) for d in dims] + list(extra))
        for d, v in zip(dims, parts):
            self.loop_vars[d] = v
        return parts[len(dims):]

    def ceil_div(self, a: ir.Value, n: int) -> ir.Value:
        return self.b.udiv(self.b.add(a, self.const(n - 1)), self.const(n))

    def smin(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_signed("<", a, b), a, b)

    def _address(self, ptr: ir.Value, slots: tuple, vstride: int | None,
                 loaded: list[ir.Value] = ()) -> ir.Value:
        """``ptr + base + sum(i_d * stride_d) + sum(index_k * stride_k)``; the vector dim's
        stride is a constant when the geometry built it in (so that loop vectorises);
        ``loaded``: the values of the access's loaded indices (gathers)."""
        return self.b.gep(ptr, [self._offset(slots, vstride, loaded)])

    def _offset(self, slots: tuple, vstride: int | None, loaded: list[ir.Value] = ()
                ) -> ir.Value:
        """The element offset ``_address`` adds to its pointer."""
        base, strides, dyn = slots
        off = self.slots[base]
        for value, s in zip(loaded, dyn):
            off = self.b.add(off, self.b.mul(value, self.slots[s]))
        vdim = self.geo.vector_dim
        for d, s in enumerate(strides):
            if s is None:
                continue
            i = self.loop_vars[d]
            if d == vdim and vstride is not None:
                term = i if vstride == 1 else self.b.mul(i, self.const(vstride))
            else:
                term = self.b.mul(i, self.slots[s])
            off = self.b.add(off, term)
        return off

    # ------------------------------------------------------------------ expressions
    def ev(self, e: KExpr, memo: dict[int, ir.Value]) -> ir.Value:
        v = memo.get(id(e))
        if v is not None:
            return v
        # Operands first, in post-order with an explicit stack: an expression thousands of
        # ops deep (an unrolled Python loop) must not recurse once per op.
        order, stack, seen = [], [(e, False)], set()
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in memo or id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in self._operands(n))
        for n in order[:-1]:
            if id(n) not in memo:
                self._ev_one(n, memo)
        return self._ev_one(e, memo)

    def _operands(self, e: KExpr) -> Sequence[KExpr]:
        """The expressions ``_ev_one(e)`` evaluates at e's own position (a nested reduction's
        body runs inside its loop, so it is not one of them)."""
        if isinstance(e, KOp):
            return e.args
        if isinstance(e, KLoad):
            return loaded_indices(self.kernel.body.accesses[e.access].index)
        if isinstance(e, KIndex):
            return (e.expr, e.bound)
        return ()

    def _ev_one(self, e: KExpr, memo: dict[int, ir.Value]) -> ir.Value:
        if isinstance(e, KLoad):
            access = self.kernel.body.accesses[e.access]
            loaded = [self.ev(x, memo) for x in loaded_indices(access.index)]
            ptr = self._address(self.ptrs[e.access], self.layout.load_slots[e.access],
                                self.geo.load_vstrides[e.access], loaded)
            v = scalar.load_value(self.b, ptr, e.dtype)
        elif isinstance(e, KIndex):
            v = self._loaded_index(e, memo)
        elif isinstance(e, KParam):
            v = self._param_value(self.slots[self.layout.scalar_slots[e.param]], e.dtype)
        elif isinstance(e, KRed):
            v = self.red_value(e.reduction)
        elif isinstance(e, KNested):
            v = self._nested(e, memo)
        elif isinstance(e, KOp):
            args = [self.ev(a, memo) for a in e.args]
            if e.op == "cast":
                v = scalar.cast(self.b, args[0], e.in_dtypes[0], e.dtype)
            else:
                v = scalar.lower_op(self.b, e.op, args, list(e.in_dtypes), e.dtype, self.math)
        else:  # pragma: no cover
            raise TypeError(e)
        memo[id(e)] = v
        return v

    def _loaded_index(self, e: KIndex, memo: dict[int, ir.Value]) -> ir.Value:
        """A gather's index as a position in [0, bound): NumPy's modes (see KIndex)."""
        b = self.b
        raw = self.ev(e.expr, memo)
        in_dt = _expr_dtype(e.expr)
        v = scalar.cast(b, raw, in_dt, _INDEX) if in_dt != _INDEX else raw
        n = self.ev(e.bound, memo)
        zero = self.const(0)
        if e.mode == "valid":
            return v
        if e.mode == "clip":
            v = b.select(b.icmp_signed("<", v, zero), zero, v)
            last = b.sub(n, self.const(1))
            return b.select(b.icmp_signed(">", v, last), last, v)
        if e.mode == "wrap":
            # n > 0 (the tracer refuses a non-empty take from an empty axis)
            r = b.srem(v, n)
            return b.select(b.icmp_signed("<", r, zero), b.add(r, n), r)
        w = b.select(b.icmp_signed("<", v, zero), b.add(v, n), v)
        bad = b.icmp_unsigned(">=", w, n)      # also below -n: still negative after wrapping
        memo[("bad", id(e))] = bad             # a scatter skips the write (_scatter_row)
        with b.if_then(bad, likely=False):
            flag = self.error_flag
            res = b.cmpxchg(flag, zero, self.const(e.check + 1), "monotonic", "monotonic")
            with b.if_then(b.extract_value(res, 1)):
                b.store(v, b.gep(flag, [self.const(1)]))
        return b.select(bad, zero, w)

    def _nested(self, e: KNested, memo: dict[int, ir.Value]) -> ir.Value:
        """A small reduction evaluated in place: loops over its own variables. Values of the
        enclosing scope may be reused inside; values computed inside stay there."""
        acc_dt = accumulator_dtype(e.op, e.in_dtype)
        acc = self.alloca(scalar.llvm_type(acc_dt))
        self.b.store(reduction_identity(e.op, acc_dt), acc)
        dims = [self.geo.nested_loop_dim(v) for v in e.vars]

        def sweep(k: int) -> None:
            if k == len(dims):
                x = self.ev(e.expr, dict(memo))
                if acc_dt != e.in_dtype:
                    x = scalar.cast(self.b, x, e.in_dtype, acc_dt)
                self.b.store(self._combine(e.op, self.b.load(acc), x, acc_dt), acc)
                return
            const = self.geo.nested_extents[dims[k] - self.geo.rank]
            stop = self.const(const) if const is not None else self.extent(dims[k])
            with self.loop(self.const(0), stop) as i:
                self.loop_vars[dims[k]] = i
                sweep(k + 1)

        sweep(0)
        v = self.b.load(acc)
        return scalar.cast(self.b, v, acc_dt, e.dtype) if acc_dt != e.dtype else v

    def _combine(self, op: str, cur: ir.Value, x: ir.Value, acc_dt: np.dtype,
                 reassociate: bool = True) -> ir.Value:
        """One accumulation step of a reduction in the accumulator dtype (the reducer's;
        ``reassociate`` lets the vectoriser keep several partial float sums)."""
        return reducer(op).combine(self.b, cur, x, acc_dt, reassociate)

    def _red_register(self, j: int) -> ir.Value:
        return self.red_values[j]

    def _param_value(self, slot: ir.Value, dtype: np.dtype) -> ir.Value:
        ty = scalar.llvm_type(dtype)
        bits = dtype.itemsize * 8 if dtype != np.dtype(bool) else 1
        raw = slot if bits == 64 else self.b.trunc(slot, ir.IntType(bits))
        return raw if isinstance(ty, ir.IntType) else self.b.bitcast(raw, ty)

    def store(self, k: int, st: Store, value: ir.Value) -> None:
        ptr = self._address(self.ptrs[len(self.kernel.body.accesses) + k],
                            self.layout.store_slots[k], self.geo.store_vstrides[k])
        # (stores have affine indices; scatters are their own kernels)
        scalar.store_value(self.b, value, ptr, st.dest.dtype)

    def _root_exprs(self) -> dict:
        return {r.node: e for r, e in zip(self.kernel.roots, self.kernel.root_exprs)}

    def _split_stores(self) -> tuple[list, list]:
        """Stores over the whole space (they use a reduced dim) and per-row stores."""
        exprs = self._root_exprs()
        full, rows = [], []
        for k, st in enumerate(self.kernel.stores):
            uses_red = any(u and r for u, r in zip(self.geo.store_uses[k], self.geo.reduced))
            (full if st.node in exprs and uses_red else rows).append((k, st))
        return full, rows

    def _store_roots(self, stores: list, memo: dict) -> None:
        exprs = self._root_exprs()
        k = self.kernel
        for i, st in stores:
            if st.node in exprs:
                value = self.ev(exprs[st.node], memo)
            else:
                value = self.red_value(k.reductions.index(st.node))
            self.store(i, st, value)

    # ------------------------------------------------------------------ reductions
    def _position(self, red) -> ir.Value:
        """Index along an arg-reduction's axis (0 when that axis has extent 1)."""
        g = self.geo.loop_dim_of(red.attr("axes")[0])
        return self.loop_vars[g] if g is not None else self.const(0)

    def _init_acc(self, red, acc: ir.Value, idx: ir.Value | None) -> None:
        op, in_dt = red.op, reduction_input_dtype(red)
        if is_arg_reduction(op):
            self.b.store(reducer(op).identity(in_dt), acc)
            self.b.store(self.const(0), idx)
        else:
            self.b.store(reduction_identity(op, accumulator_dtype(op, in_dt)), acc)

    def _new_acc(self, red) -> tuple[ir.Value, ir.Value | None]:
        in_dt = reduction_input_dtype(red)
        acc = self.alloca(scalar.llvm_type(accumulator_dtype(red.op, in_dt)))
        idx = self.alloca(I64) if is_arg_reduction(red.op) else None
        self._init_acc(red, acc, idx)
        return acc, idx

    def _accumulate(self, red, acc: ir.Value, idx: ir.Value | None, x: ir.Value,
                    position: ir.Value | None, reassociate: bool = True) -> None:
        b, op, in_dt = self.b, red.op, reduction_input_dtype(red)
        acc_dt = accumulator_dtype(op, in_dt)
        cur = b.load(acc)
        if is_arg_reduction(op):
            take = reducer(op).better(b, x, cur, in_dt)
            b.store(b.select(take, x, cur), acc)
            b.store(b.select(take, position, b.load(idx)), idx)
            return
        if acc_dt != in_dt:
            x = scalar.cast(b, x, in_dt, acc_dt)
        b.store(self._combine(op, cur, x, acc_dt, reassociate), acc)

    def _accumulate_compensated(self, red, acc: ir.Value, comp: ir.Value, x: ir.Value
                                ) -> None:
        """A float sum's step with Kahan compensation (``comp`` starts at 0)."""
        in_dt = reduction_input_dtype(red)
        acc_dt = accumulator_dtype(red.op, in_dt)
        if acc_dt != in_dt:
            x = scalar.cast(self.b, x, in_dt, acc_dt)
        s, c = compensated_add(self.b, self.b.load(acc), self.b.load(comp), x)
        self.b.store(s, acc)
        self.b.store(c, comp)

    def _add_compensated(self, red, acc: ir.Value, comp: ir.Value, block: ir.Value) -> None:
        """A block's sum (in the accumulator dtype) into the total, compensated; the block
        restarts from the identity."""
        s, c = compensated_add(self.b, self.b.load(acc), self.b.load(comp), self.b.load(block))
        self.b.store(s, acc)
        self.b.store(c, comp)
        self._init_acc(red, block, None)

    def _finalize(self, red, acc: ir.Value, idx: ir.Value | None) -> ir.Value:
        if idx is not None:
            return self.b.load(idx)
        v = self.b.load(acc)
        acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
        return scalar.cast(self.b, v, acc_dt, red.dtype) if acc_dt != red.dtype else v

    # ------------------------------------------------------------------ strategies
    def _map_body(self, begin: ir.Value, end: ir.Value) -> None:
        stores = list(enumerate(self.kernel.stores))
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            with self.nest(self.geo.inner_dims):
                self._store_roots(stores, {})

    def _map2d_body(self, begin: ir.Value, end: ir.Value) -> None:
        """Square tiles over the last two loop dims, so transposed operands stay in cache."""
        t, (d0, d1) = self.geo.tile, self.geo.inner_dims
        stores = list(enumerate(self.kernel.stores))
        e0, e1 = self.extent(d0), self.extent(d1)
        with self.loop(begin, end) as p:
            ti, tj = self.set_par_index(p, [self.ceil_div(e0, t), self.ceil_div(e1, t)])
            i0, j0 = self.b.mul(ti, self.const(t)), self.b.mul(tj, self.const(t))
            i1 = self.smin(self.b.add(i0, self.const(t)), e0)
            j1 = self.smin(self.b.add(j0, self.const(t)), e1)
            with self.loop(i0, i1) as i:
                self.loop_vars[d0] = i
                with self.loop(j0, j1) as j:
                    self.loop_vars[d1] = j
                    self._store_roots(stores, {})

    def _reduce_phases(self, stash: "RowStash | None" = None) -> None:
        """Each reduction sweeps the inner dims once; its value feeds later phases. A float
        sum's innermost loop runs in blocks combined pairwise. With a ``stash`` (row
        kernels), a phase writes the values that later phases read back (``RowStash``)."""
        k, inner = self.kernel, self.geo.inner_dims

        def element(j: int, e: KExpr) -> ir.Value:
            if stash is None:
                return self.ev(e, {})
            memo = stash.reads(self, j)
            v = self.ev(e, memo)
            stash.write(self, j, memo)
            return v

        for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
            if self._two_pass_arg(red):
                self.red_values[j] = self._arg_row(red, e)
                continue
            if self._lanes_max_min(red):
                self.red_values[j] = self._max_min_lanes(red, e)
                continue
            acc, idx = self._new_acc(red)
            if not (inner and is_float_sum(red)):
                with self.nest(inner):
                    pos = self._position(red) if idx is not None else None
                    self._accumulate(red, acc, idx, element(j, e), pos)
                self.red_values[j] = self._finalize(red, acc, idx)
                continue
            pw = self._pairwise(red)
            with self.nest(inner[:-1]):
                with self.blocks(self.const(0), self.extent(inner[-1]), inner[-1], [pw]):
                    pw.add(element(j, e), reduction_input_dtype(red))
            self.b.store(pw.total(), acc)
            self.red_values[j] = self._finalize(red, acc, idx)

    def _two_pass_arg(self, red) -> bool:
        """Whether an arg-reduction's row runs as two vectorised passes (``_arg_two_pass``):
        a contiguous sweep of one loop dimension, the reduced axis, of a non-bool, non-f16
        dtype (a select carrying an index does not vectorise; the value's max does)."""
        inner = self.geo.inner_dims
        dt = reduction_input_dtype(red)
        return (is_arg_reduction(red.op) and len(inner) == 1 and dt.kind in "fiu"
                and dt != np.float16 and self.geo.loop_dim_of(red.attr("axes")[0]) == inner[0]
                and self._constant_stride_sweep())

    def own_sweep(self, red) -> bool:
        """Whether a reduction's row is swept by code of its own (``_arg_row``,
        ``_max_min_lanes``) rather than the phase loop (which a ``RowStash`` joins)."""
        return self._two_pass_arg(red) or self._lanes_max_min(red)

    def _lanes_max_min(self, red) -> bool:
        """Whether a max/min row runs in explicit vector lanes (``_max_min_lanes``): one
        loop dimension, the reduced one, swept at strides built into the code but not all
        contiguous (pairwise distances' interleaved operand), of a non-bool, non-f16 dtype.
        Measured on Zen 5 (2026-12-03): pairwise minimum distances, 4099 x 3000 float32
        points, 8.3 ms as the loop vectoriser's loop, 1.65 ms in lanes (both versions load
        the interleaved operand with AVX-512 gathers; what makes the lanes faster was not
        established)."""
        inner = self.geo.inner_dims
        dt = reduction_input_dtype(red)
        return (red.op in ("max", "min") and len(inner) == 1 and dt.kind in "fiu"
                and dt != np.float16 and not self._contiguous_sweep()
                and self._constant_stride_sweep())

    def _max_min_lanes(self, red, e: KExpr) -> ir.Value:
        """max/min of a row in ``ARG_UNROLL`` independent vectors of ``ARG_LANES`` lanes,
        each lane's term evaluated by the scalar expression code at consecutive positions
        (``_arg_lanes``' shape), combined by llvm.maximum/minimum (floats: NaN propagates,
        as NumPy's) or a compare and select (integers), then the vectors and their lanes
        merged, then the last positions one by one. max and min are exact and commutative,
        so the order of combination does not change the result."""
        b, dim, dt = self.b, self.geo.inner_dims[0], reduction_input_dtype(red)
        r = reducer(red.op)
        lanes, unroll, ty = ARG_LANES, ARG_UNROLL, scalar.llvm_type(dt)
        vty = ir.VectorType(ty, lanes)
        is_max = r.combine_op == "maximum"
        if dt.kind == "f":
            vfn = declare(self.module, f"llvm.{'maximum' if is_max else 'minimum'}."
                          f"v{lanes}f{8 * dt.itemsize}", vty, [vty, vty])

        def vcombine(a: ir.Value, x: ir.Value) -> ir.Value:
            if dt.kind == "f":
                return b.call(vfn, [a, x])
            cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
            return b.select(cmp(">" if is_max else "<", x, a), x, a)
        n = self.extent(dim)
        accs = [self.alloca(vty) for _ in range(unroll)]
        for a in accs:
            b.store(_splat(b, r.identity(dt), lanes), a)

        def lane_step(u: int, start: ir.Value) -> None:
            x = self._lane_terms(e, dim, start, vty)
            b.store(vcombine(b.load(accs[u]), x), accs[u])
        vectors = self._lane_loops(n, lanes, unroll, lane_step)
        v = b.load(accs[0])
        for u in range(1, unroll):
            v = vcombine(v, b.load(accs[u]))
        half = lanes // 2
        while half:                         # lane k against lane k + half
            shift = ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                [(k + half) % lanes for k in range(lanes)])
            v = vcombine(v, b.shuffle_vector(v, v, shift))
            half //= 2
        acc = self.alloca(ty)
        b.store(b.extract_element(v, ir.Constant(ir.IntType(32), 0)), acc)
        with self.loop(vectors, n) as i:
            self.loop_vars[dim] = i
            self._accumulate(red, acc, None, self.ev(e, {}), None)
        return self._finalize(red, acc, None)

    def _lane_terms(self, e: KExpr, dim: int, start: ir.Value, vty: ir.VectorType
                    ) -> ir.Value:
        """The vector of ``e`` at positions start, start + 1, ... of loop dim ``dim``, one
        lane each (the scalar expression code per lane; contiguous loads become one vector
        load after SLP)."""
        x = ir.Constant(vty, None)
        for k in range(vty.count):
            self.loop_vars[dim] = self.b.add(start, self.const(k))
            x = self.b.insert_element(x, self.ev(e, {}), ir.Constant(ir.IntType(32), k))
        return x

    def _lane_loops(self, n: ir.Value, lanes: int, unroll: int,
                    lane_step: Callable[[int, ir.Value], None]) -> ir.Value:
        """``lane_step(u, start)`` for the row's whole steps of ``unroll`` vectors of
        ``lanes`` (vector u at start), then its remaining whole vectors into vector 0 (its
        positions stay increasing); returns where the scalar tail starts."""
        b = self.b
        step = lanes * unroll
        whole = b.mul(b.sdiv(n, self.const(step)), self.const(step))
        with self.loop(self.const(0), whole, self.const(step)) as i0:
            for u in range(unroll):
                lane_step(u, b.add(i0, self.const(u * lanes)))
        vectors = b.mul(b.sdiv(n, self.const(lanes)), self.const(lanes))
        with self.loop(whole, vectors, self.const(lanes)) as i0:
            lane_step(0, i0)
        return vectors

    def _arg_row(self, red, e: KExpr) -> ir.Value:
        """An arg-reduction along a contiguous row: one pass of vector lanes for rows of at
        least ``ARG_LANES_MIN`` and under 2^31 positions (``_arg_lanes``, positions in i32),
        else two vectorised passes (``_arg_two_pass``: on a short row the lanes' final merge
        costs more than it saves)."""
        b = self.b
        if ARG_STRATEGY == "two-pass":
            return self._arg_two_pass(red, e)
        at = self.alloca(I64)
        n = self.extent(self.geo.inner_dims[0])
        lanes_fit = b.and_(b.icmp_signed(">=", n, self.const(ARG_LANES_MIN)),
                           b.icmp_signed("<", n, self.const(2 ** 31)))   # i32 positions
        with b.if_else(lanes_fit) as (long_row, short_row):
            with long_row:
                b.store(self._arg_lanes(red, e), at)
            with short_row:
                b.store(self._arg_two_pass(red, e), at)
        return b.load(at)

    def _arg_two_pass(self, red, e: KExpr) -> ir.Value:
        """argmax/argmin of a row in two passes that vectorise, where a select carrying an
        index does not: pass 1 takes each block's max (min) as a plain reduction
        (llvm.maximum propagates NaN) and keeps the first block holding the best one; pass 2
        finds the first position of that value in that block (the first NaN when it is NaN:
        NumPy's rule). The block is in cache for pass 2."""
        b, dim, dt = self.b, self.geo.inner_dims[0], reduction_input_dtype(red)
        arg = reducer(red.op)
        value_red = OPS["max" if arg.index == "max" else "min"].reducer
        n, step = self.extent(dim), self.const(ARG_BLOCK)
        best, best_block = self.alloca(scalar.llvm_type(dt)), self.alloca(I64)
        b.store(value_red.identity(dt), best)
        b.store(self.const(0), best_block)
        block = self.alloca(scalar.llvm_type(dt))
        with self.loop(self.const(0), n, step) as i0:
            b.store(value_red.identity(dt), block)
            with self.loop(i0, self.smin(b.add(i0, step), n)) as i:
                self.loop_vars[dim] = i
                b.store(value_red.combine(b, b.load(block), self.ev(e, {}), dt), block)
            m, cur = b.load(block), b.load(best)
            take = arg.better(b, m, cur, dt)      # strictly better, or the first NaN
            b.store(b.select(take, m, cur), best)
            b.store(b.select(take, i0, b.load(best_block)), best_block)
        v = b.load(best)
        if dt.kind == "f":
            v_nan = b.fcmp_unordered("uno", v, v)
        # the first hit as a min-reduction of positions, which vectorises (an early exit
        # or a select on "not found yet" does not)
        found = self.alloca(I64)
        start = b.load(best_block)
        stop = self.smin(b.add(start, step), n)
        b.store(stop, found)
        with self.loop(start, stop) as i:
            self.loop_vars[dim] = i
            x = self.ev(e, {})
            if dt.kind == "f":
                hit = b.select(v_nan, b.fcmp_unordered("uno", x, x), b.fcmp_ordered("==", x, v))
            else:
                hit = b.icmp_unsigned("==", x, v)
            b.store(self.smin(b.select(hit, i, stop), b.load(found)), found)
        f = b.load(found)
        return b.select(b.icmp_signed("<", f, n), f, self.const(0))

    def _arg_lanes(self, red, e: KExpr) -> ir.Value:
        """argmax/argmin of a row in one pass, as NumPy's SIMD argmax: ``ARG_UNROLL``
        independent vectors of ``ARG_LANES`` lanes (independent, so the compare-select chains
        overlap) each keep every lane's best value and its position, with one vector compare
        and two selects per step; at the end of the row the vectors, then the lanes (a tree of
        shuffles), are merged with NumPy's rule (ties to the lower position: ``_merge_lanes``),
        and the last positions are taken one by one. A float row holding a NaN or an infinity
        (flagged by one FMA per vector) is done again by ``_arg_two_pass``, which has NumPy's
        NaN rule; the loop itself never takes a NaN."""
        b, dim, dt = self.b, self.geo.inner_dims[0], reduction_input_dtype(red)
        arg = reducer(red.op)
        lanes, unroll, ty = ARG_LANES, ARG_UNROLL, scalar.llvm_type(dt)
        # positions as i32 (the caller keeps rows under 2^31): half the width of i64 lanes
        vty, ity = ir.VectorType(ty, lanes), ir.VectorType(I32, lanes)
        n = self.extent(dim)
        best = [self.alloca(vty) for _ in range(unroll)]
        best_at = [self.alloca(ity) for _ in range(unroll)]
        # floats: the loop compares with > (<) alone, which never takes a NaN; x*0 + acc,
        # one FMA per vector, turns acc NaN for a NaN or an infinity, and a row that has
        # one is done again by the exact two-pass code (rare data)
        special = [self.alloca(vty) for _ in range(unroll)] if dt.kind == "f" else []
        if special:
            suffix = f"v{lanes}f{8 * dt.itemsize}"
            fma = declare(self.module, f"llvm.fma.{suffix}", vty, [vty] * 3)
        for u in range(unroll):
            b.store(_splat(b, arg.identity(dt), lanes), best[u])
            b.store(ir.Constant(ity, [0] * lanes), best_at[u])
            if special:
                b.store(_splat(b, scalar.constant(0.0, dt), lanes), special[u])
        offsets = ir.Constant(ity, list(range(lanes)))
        op = ">" if arg.index == "max" else "<"

        def lane_step(u: int, start: ir.Value) -> None:
            x = self._lane_terms(e, dim, start, vty)
            cur = b.load(best[u])
            if dt.kind == "f":             # strictly better (never a NaN: see special)
                take = b.fcmp_ordered(op, x, cur)
                zero = _splat(b, scalar.constant(0.0, dt), lanes)
                b.store(b.call(fma, [x, zero, b.load(special[u])]), special[u])
            else:
                take = (b.icmp_signed if dt.kind == "i" else b.icmp_unsigned)(op, x, cur)
            b.store(b.select(take, x, cur), best[u])
            at = b.add(_splat(b, b.trunc(start, I32), lanes), offsets)
            b.store(b.select(take, at, b.load(best_at[u])), best_at[u])

        vectors = self._lane_loops(n, lanes, unroll, lane_step)
        v, at = b.load(best[0]), b.load(best_at[0])
        for u in range(1, unroll):
            v, at = _merge_lanes(b, op, dt, v, at, b.load(best[u]), b.load(best_at[u]))
        half = lanes // 2
        while half:                         # lane k against lane k + half
            shift = ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                [(k + half) % lanes for k in range(lanes)])
            v, at = _merge_lanes(b, op, dt, v, at, b.shuffle_vector(v, v, shift),
                                 b.shuffle_vector(at, at, shift))
            half //= 2
        acc, idx = self.alloca(ty), self.alloca(I64)
        lane0 = ir.Constant(ir.IntType(32), 0)
        b.store(b.extract_element(v, lane0), acc)
        b.store(b.sext(b.extract_element(at, lane0), I64), idx)
        with self.loop(vectors, n) as i:
            self.loop_vars[dim] = i
            self._accumulate(red, acc, idx, self.ev(e, {}), i)
        if not special:
            return b.load(idx)
        acc_special = b.load(special[0])
        for u in range(1, unroll):
            acc_special = b.fadd(acc_special, b.load(special[u]))
        flags = b.fcmp_unordered("uno", acc_special, acc_special)
        any_special = b.icmp_unsigned("!=", b.bitcast(flags, ir.IntType(lanes)),
                                      ir.Constant(ir.IntType(lanes), 0))
        with b.if_then(any_special, likely=False):   # a NaN or an infinity in the row
            b.store(self._arg_two_pass(red, e), idx)
        return b.load(idx)

    def _contiguous_sweep(self) -> bool:
        """Whether every load of the kernel is contiguous or invariant along the innermost
        loop and none is gathered (so the vectoriser keeps its full width of partial sums)."""
        vdim = self.geo.vector_dim
        for access, uses, vs in zip(self.kernel.body.accesses, self.geo.load_uses,
                                    self.geo.load_vstrides):
            if loaded_indices(access.index):
                return False
            if vdim is not None and uses[vdim] and vs != 1:
                return False
        return True

    def _constant_stride_sweep(self) -> bool:
        """Whether every load of the kernel has a stride built into the code along the
        innermost loop (contiguous, invariant, or interleaved by a nested reduction's
        extent: pairwise distances' second operand) and none is gathered: the loop
        vectoriser takes such loads as whole or interleaved vectors."""
        vdim = self.geo.vector_dim
        for access, uses, vs in zip(self.kernel.body.accesses, self.geo.load_uses,
                                    self.geo.load_vstrides):
            if loaded_indices(access.index):
                return False
            if vdim is not None and uses[vdim] and vs is None:
                return False
        return True

    def _pairwise(self, red, for_combine: bool = False) -> PairwiseSum:
        acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
        wide = not for_combine and acc_dt == np.float32 and not self._contiguous_sweep()
        return PairwiseSum(self, acc_dt, wide)

    @contextmanager
    def blocks(self, start: ir.Value, stop: ir.Value, dim: int | None,
               sums: list[PairwiseSum]) -> Iterator[None]:
        """``for i in range(start, stop)`` in blocks (loop dim ``dim`` set to i), each float
        sum of ``sums`` pushing its previous block before each block."""
        step = self.const(SUM_BLOCK if self._contiguous_sweep() else STRIDED_SUM_BLOCK)
        with self.loop(start, stop, step) as i0:
            for pw in sums:
                pw.begin_block()
            with self.loop(i0, self.smin(self.b.add(i0, step), stop)) as i:
                if dim is not None:
                    self.loop_vars[dim] = i
                yield

    def _row_body(self, begin: ir.Value, end: ir.Value) -> None:
        stash = RowStash.plan(self)
        if stash is None:
            self._rows(begin, end, None)
            return
        # Rows longer than the stash holds recompute instead (one test per call: the row
        # length is the same for every row).
        with self.b.if_else(stash.fits(self)) as (short, long):
            with short:
                self._rows(begin, end, stash)
            with long:
                self._rows(begin, end, None)

    def _rows(self, begin: ir.Value, end: ir.Value, stash: "RowStash | None") -> None:
        full, rows = self._split_stores()
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            self._reduce_phases(stash)
            if full:
                with self.nest(self.geo.inner_dims):
                    memo = stash.reads(self, len(self.kernel.reductions)) if stash else {}
                    self._store_roots(full, memo)
            self._store_roots(rows, {})

    def _col_body(self, begin: ir.Value, end: ir.Value) -> None:
        """Reductions whose innermost dim is kept: a tile of columns, one accumulator each,
        updated for every row of the reduced dims (contiguous and vectorised along the tile)."""
        k, t, last = self.kernel, self.geo.tile, self.geo.rank - 1
        full, rows = self._split_stores()
        inner = self.geo.inner_dims
        accs, sums = [], []
        for red in k.reductions:
            in_dt = reduction_input_dtype(red)
            ty = scalar.llvm_type(accumulator_dtype(red.op, in_dt))
            acc = self.alloca(ty, t)
            idx = self.alloca(I64, t) if is_arg_reduction(red.op) else None
            accs.append((acc, idx))
            # float sums: the rows are the outer loop, so each column adds a block of rows
            # in order, then the block's sum into its total with Kahan's compensation
            sums.append((self.alloca(ty, t), self.alloca(ty, t))
                        if is_float_sum(red) and inner else None)
        ext = self.extent(last)
        with self.loop(begin, end) as p:
            (tile,) = self.set_par_index(p, [self.ceil_div(ext, t)])
            q0 = self.b.mul(tile, self.const(t))
            q1 = self.smin(self.b.add(q0, self.const(t)), ext)

            @contextmanager
            def columns() -> Iterator[tuple[ir.Value, ir.Value]]:
                with self.loop(q0, q1) as q:
                    self.loop_vars[last] = q
                    yield q, self.b.sub(q, q0)

            def slot(acc: ir.Value | None, off: ir.Value) -> ir.Value | None:
                return None if acc is None else self.b.gep(acc, [off])

            def red_at_column(j: int) -> ir.Value:
                off = self.b.sub(self.loop_vars[last], q0)
                acc, idx = accs[j]
                return self._finalize(k.reductions[j], slot(acc, off), slot(idx, off))

            self.red_value = red_at_column
            for j, (red, e) in enumerate(zip(k.reductions, k.red_exprs)):
                acc, idx = accs[j]
                with columns() as (_q, off):
                    self._init_acc(red, slot(acc, off), slot(idx, off))
                    for part in sums[j] or ():
                        self._init_acc(red, slot(part, off), None)
                if sums[j] is None:
                    with self.nest(inner):
                        with columns() as (_q, off):
                            pos = self._position(red) if idx is not None else None
                            self._accumulate(red, slot(acc, off), slot(idx, off),
                                             self.ev(e, {}), pos, reassociate=False)
                    continue
                block, comp = sums[j]
                step = self.const(COLUMN_SUM_BLOCK)
                with self.nest(inner[:-1]):
                    rows_ext = self.extent(inner[-1])
                    with self.loop(self.const(0), rows_ext, step) as r0:
                        with self.loop(r0, self.smin(self.b.add(r0, step), rows_ext)) as r:
                            self.loop_vars[inner[-1]] = r
                            with columns() as (_q, off):
                                self._accumulate(red, slot(block, off), None, self.ev(e, {}),
                                                 None, reassociate=False)
                        with columns() as (_q, off):
                            self._add_compensated(red, slot(acc, off), slot(comp, off),
                                                  slot(block, off))
            if full:
                with self.nest(self.geo.inner_dims):
                    with columns():
                        self._store_roots(full, {})
            with columns():
                self._store_roots(rows, {})
            self.red_value = self._red_register

    def _scan_body(self, begin: ir.Value, end: ir.Value) -> None:
        acc = self.alloca(scalar.llvm_type(self.kernel.reductions[0].dtype))
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            self._scan_row(acc)

    def _scan_row(self, acc: ir.Value) -> None:
        """One row of a scan (the parallel indices are set). Shared with the GPU driver."""
        k = self.kernel
        red, e = k.reductions[0], k.red_exprs[0]
        op = reducer(red.op).combine_op
        dt = red.dtype
        # The reducer's start value: NumPy's accumulate starts from the first element, so a
        # float cumsum starts at -0.0 (-0.0 + x is x for every x; cumsum([-0.0]) is -0.0).
        self.b.store(reducer(red.op).identity(dt), acc)
        with self.nest(self.geo.inner_dims):
            x = self.ev(e, {})
            # Exact per-step arithmetic in the output dtype, as NumPy's accumulate does.
            v = scalar.lower_op(self.b, op, [self.b.load(acc), x], [dt, dt], dt, self.math)
            self.b.store(v, acc)
            self.store(0, k.stores[0], v)

    def _scatter_body(self, begin: ir.Value, end: ir.Value) -> None:
        with self.loop(begin, end) as p:
            self.set_par_index(p)
            self._scatter_row()

    def _scatter_row(self, atomic: bool = False) -> None:
        """One column of a scatter (the parallel indices are set): its positions in order,
        each written (assignment) or read, combined and written back (``ufunc.at``) -- so a
        repeated position sees the earlier writes, as in NumPy's loop. A position whose
        index is out of range is recorded in the error flag and not written. Shared with
        the GPU driver, which (``atomic``: every loop variable is set) may instead combine
        one element with an atomic read-modify-write (``atomic_combine``)."""
        k = self.kernel
        node = k.scatter
        combine = node.attr("combine")
        dt = node.dtype
        with (_nothing() if atomic else self.nest(self.geo.inner_dims)):
            memo: dict = {}
            loaded, ok = self.scatter_target(memo)
            value = self.ev(k.root_exprs[0], memo) if k.root_exprs else None
            ptr = self.scatter_address(self.ptrs[len(k.body.accesses)], loaded)
            with (self.b.if_then(ok) if ok is not None else _nothing()):
                if atomic:
                    self.b.atomic_rmw(atomic_combine(node), ptr, value, "monotonic")
                    return
                if combine is not None:
                    value = self._combine_at(combine, node.attr("loop"), ptr, dt, value)
                scalar.store_value(self.b, value, ptr, dt)

    def scatter_target(self, memo: dict) -> tuple[list[ir.Value], ir.Value | None]:
        """Where the scatter's element at the current loop variables goes: the values of its
        loaded indices, and whether they are all in range (None: no index is checked)."""
        terms = loaded_indices(self.kernel.stores[0].index)
        loaded = [self.ev(x, memo) for x in terms]
        ok = None
        for x in terms:
            if ("bad", id(x)) in memo:
                good = self.b.not_(memo[("bad", id(x))])
                ok = good if ok is None else self.b.and_(ok, good)
        return loaded, ok

    def scatter_offset(self, loaded: list[ir.Value]) -> ir.Value:
        """The scatter's target element, as an offset in the target's buffer."""
        return self._offset(self.layout.store_slots[0], self.geo.store_vstrides[0], loaded)

    def scatter_address(self, ptr: ir.Value, loaded: list[ir.Value]) -> ir.Value:
        """The scatter's target element in ``ptr`` (the target's buffer, or a scratch array
        of the same length indexed the same way)."""
        return self._address(ptr, self.layout.store_slots[0], self.geo.store_vstrides[0],
                             loaded)

    def _combine_at(self, op: str, loop: tuple[str, ...], ptr: ir.Value, dt: np.dtype,
                    value: ir.Value | None) -> ir.Value:
        """``ufunc.at``'s step: the ufunc's loop applied to the current element (cast to the
        loop's first dtype) and the value, the result cast back to the target's dtype."""
        loop_dts = [np.dtype(d) for d in loop]
        cur = scalar.cast(self.b, scalar.load_value(self.b, ptr, dt), dt, loop_dts[0])
        args = [cur] + ([value] if value is not None else [])
        r = scalar.lower_op(self.b, op, args, loop_dts[:len(args)], loop_dts[-1], self.math)
        return scalar.cast(self.b, r, loop_dts[-1], dt)

    def _partial_ptrs(self) -> list[tuple[ir.Value, ir.Value | None]]:
        i = len(self.kernel.body.accesses) + len(self.kernel.stores)
        out = []
        for red in self.kernel.reductions:
            if is_arg_reduction(red.op):
                out.append((self.ptrs[i], self.ptrs[i + 1]))
                i += 2
            else:
                out.append((self.ptrs[i], None))
                i += 1
        return out

    def _full_body(self, begin: ir.Value, end: ir.Value, slot: ir.Value) -> None:
        """One slot's share [begin, end) of the parallel range. Float sums run the innermost
        loop (the parallel one for a 1-D space) in blocks combined pairwise."""
        k = self.kernel
        accs = [self._new_acc(r) for r in k.reductions]
        par, inner = self.geo.par_dims, self.geo.inner_dims
        pws = [self._pairwise(red) if is_float_sum(red) else None for red in k.reductions]
        sums = [pw for pw in pws if pw is not None]

        def accumulate() -> None:
            memo: dict = {}
            for red, e, (acc, idx), pw in zip(k.reductions, k.red_exprs, accs, pws):
                if pw is not None:
                    pw.add(self.ev(e, memo), reduction_input_dtype(red))
                    continue
                pos = self._position(red) if idx is not None else None
                self._accumulate(red, acc, idx, self.ev(e, memo), pos)

        if not sums:
            with self.loop(begin, end) as p:
                if par:
                    self.loop_vars[par[0]] = p
                with self.nest(inner):
                    accumulate()
        elif not inner:
            with self.blocks(begin, end, par[0] if par else None, sums):
                accumulate()
        else:
            with self.loop(begin, end) as p:
                if par:
                    self.loop_vars[par[0]] = p
                with self.nest(inner[:-1]):
                    with self.blocks(self.const(0), self.extent(inner[-1]), inner[-1],
                                     sums):
                        accumulate()
        for (acc, _i), pw in zip(accs, pws):
            if pw is not None:
                self.b.store(pw.total(), acc)
        for red, (acc, idx), (pv, pi) in zip(k.reductions, accs, self._partial_ptrs()):
            # store_value/load_value: a bool partial (max/min/any/all/argmax of bools) is an
            # i1 register but a byte in memory; a plain store of the i1 was rejected.
            acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
            scalar.store_value(self.b, self.b.load(acc), self.b.gep(pv, [slot]), acc_dt)
            if idx is not None:
                self.b.store(self.b.load(idx), self.b.gep(pi, [slot]))

    def _emit_combine(self, fn: ir.Function, dts: list[np.dtype]) -> None:
        """Combine the partial results in slot order, then compute the outputs."""
        self._begin_function(fn, len(dts))
        nslots = fn.args[len(dts) + 1]
        k = self.kernel
        self.loop_vars = {d: self.const(0) for d in range(self.geo.rank)}
        for j, (red, (pv, pi)) in enumerate(zip(k.reductions, self._partial_ptrs())):
            acc, idx = self._new_acc(red)
            acc_dt = accumulator_dtype(red.op, reduction_input_dtype(red))
            pw = self._pairwise(red, for_combine=True) if is_float_sum(red) else None
            with self.loop(self.const(0), nslots) as s:
                x = scalar.load_value(self.b, self.b.gep(pv, [s]), acc_dt)
                if idx is not None:
                    self._accumulate(red, acc, idx, x, self.b.load(self.b.gep(pi, [s])))
                elif pw is not None:
                    pw.push(x)   # the slots pairwise, in slot order: any thread count
                elif red.op in ("sum", "prod"):
                    # in slot order, without reassociation: deterministic for any thread count
                    self.b.store(self._combine(red.op, self.b.load(acc), x, acc_dt,
                                               reassociate=False), acc)
                else:
                    self._accumulate(red, acc, idx, x, None)
            if pw is not None:
                self.b.store(pw.total(), acc)
            self.red_values[j] = self._finalize(red, acc, idx)
        self._store_roots(list(enumerate(k.stores)), {})
        self._end_function()


class RowStash:
    """Values of a row kernel that one phase computes and a later phase reads again, kept in
    a per-thread buffer of the row instead of computed twice.

    softmax's ``exp(x - max)`` is the sum's operand and the output's numerator: the row kernel
    sweeps the row once for the max, once for the sum and once for the output, and without a
    stash evaluates ``exp`` in the last two (2.2 ms for (2048, 2048) float32 on two threads,
    of which one ``np.exp`` is 0.86). Only costly ops are kept (``ops.TRANSCENDENTAL``: an
    add is cheaper than its store and load), each value at the phase that first evaluates it,
    read back by every later one where it would be evaluated again, so every phase sees the
    same value (recomputing need not: a vectorised loop's scalar tail calls the scalar libm
    function, which may differ from the vector one in the last bit). Phases are separate walks of the graph, so the same value is
    recognised by its structure (``_Structure``: op, dtypes, operands; a load by its access,
    which names buffer and index). The buffers are fixed-size stack arrays of
    ``STASH_BYTES`` in all (L1/L2-resident for the rows that fit; worker threads have
    megabyte stacks); the kernel tests the row length once and takes the recomputing sweep
    for longer rows.
    """

    STASH_BYTES = 64 * 1024

    def __init__(self, phases: list[list[KExpr]], structure: "_Structure",
                 kept: dict[int, tuple[np.dtype, int]]):
        self.phases = phases            # per phase, the expressions it evaluates per element
        self.structure = structure
        self.kept = kept                # structure id -> (dtype, phase that writes it)
        row_bytes = sum(max(dt.itemsize, 4) for dt, _ in kept.values())
        self.capacity = self.STASH_BYTES // row_bytes   # elements per row that fit
        self.buffers: dict[int, ir.Value] = {}

    @classmethod
    def plan(cls, low: "KernelLowering") -> "RowStash | None":
        from ..ops import TRANSCENDENTAL
        k = low.kernel
        if not low.geo.inner_dims:
            return None
        exprs = low._root_exprs()
        full, _ = low._split_stores()
        phases = [[e] if not low.own_sweep(red) else []
                  for red, e in zip(k.reductions, k.red_exprs)]
        phases.append([exprs[st.node] for _, st in full if st.node in exprs])
        structure = _Structure(low)
        first: dict[int, tuple[np.dtype, int]] = {}
        for j, roots in enumerate(phases[:-1]):
            for n in structure.reachable(roots, stop=()):
                key = structure.of(n)
                if isinstance(n, KOp) and n.op in TRANSCENDENTAL and key not in first:
                    first[key] = (n.dtype, j)
        if not first:
            return None
        # A value is kept if a later phase evaluates it other than inside another kept value
        # (tanh(exp(x)) read later needs tanh, not exp as well).
        kept: dict[int, tuple[np.dtype, int]] = {}
        for j in range(1, len(phases)):
            for n in structure.reachable(phases[j], stop=first):
                hit = first.get(structure.of(n))
                if hit is not None and hit[1] < j:
                    kept[structure.of(n)] = hit
        return cls(phases, structure, kept) if kept else None

    def fits(self, low: "KernelLowering") -> ir.Value:
        n = low.const(1)
        for d in low.geo.inner_dims:
            n = low.b.mul(n, low.extent(d))
        return low.b.icmp_signed("<=", n, low.const(self.capacity))

    def _slot(self, low: "KernelLowering", key: int, dtype: np.dtype) -> ir.Value:
        """The element's place in value ``key``'s buffer (row-major over the inner dims)."""
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = low.alloca(scalar.llvm_type(dtype), self.capacity)
        pos = None
        for d in low.geo.inner_dims:
            i = low.loop_vars[d]
            pos = i if pos is None else low.b.add(low.b.mul(pos, low.extent(d)), i)
        return low.b.gep(buf, [pos])

    def reads(self, low: "KernelLowering", phase: int) -> dict[int, ir.Value]:
        """A memo for ``phase``'s evaluation: each value an earlier phase kept, loaded where
        this phase's expressions would evaluate it."""
        memo: dict[int, ir.Value] = {}
        loaded: dict[int, ir.Value] = {}
        stop = {key for key, (_, j) in self.kept.items() if j < phase}
        for n in self.structure.reachable(self.phases[phase], stop=stop):
            key = self.structure.of(n)
            if key in stop:
                if key not in loaded:
                    loaded[key] = low.b.load(self._slot(low, key, self.kept[key][0]))
                memo[id(n)] = loaded[key]
        return memo

    def write(self, low: "KernelLowering", phase: int, memo: dict[int, ir.Value]) -> None:
        """After ``phase``'s evaluation (``memo``): store the values it keeps."""
        done = set()
        for n in self.structure.reachable(self.phases[phase], stop=()):
            key = self.structure.of(n)
            if key in done or self.kept.get(key, (None, -1))[1] != phase:
                continue
            done.add(key)
            low.b.store(memo[id(n)], self._slot(low, key, self.kept[key][0]))


class _Structure:
    """Structural identity of kernel expressions: equal ids evaluate to the same value at the
    same element (hash-consed, so a deep expression never builds a deep key)."""

    def __init__(self, low: "KernelLowering"):
        self.low = low
        self.ids: dict[int, int] = {}          # id(expr) -> structure id
        self.table: dict[tuple, int] = {}
        self.keep: list[KExpr] = []            # the expressions whose id() is in ids

    def of(self, e: KExpr) -> int:
        got = self.ids.get(id(e))
        if got is not None:
            return got
        order, stack = [], [(e, False)]
        while stack:
            n, done = stack.pop()
            if id(n) in self.ids:
                continue
            if done:
                order.append(n)
                continue
            stack.append((n, True))
            stack.extend((c, False) for c in self._children(n))
        for n in order:
            if id(n) not in self.ids:
                key = (type(n).__name__, self._fields(n),
                       tuple(self.ids[id(c)] for c in self._children(n)))
                self.ids[id(n)] = self.table.setdefault(key, len(self.table))
                self.keep.append(n)
        return self.ids[id(e)]

    @staticmethod
    def _children(n: KExpr) -> tuple:
        if isinstance(n, KOp):
            return n.args
        if isinstance(n, KNested):
            return (n.expr,)
        if isinstance(n, KIndex):
            return (n.expr, n.bound)
        return ()

    @staticmethod
    def _fields(n: KExpr) -> tuple:
        if isinstance(n, KOp):
            return (n.op, n.in_dtypes, n.dtype)
        if isinstance(n, KLoad):
            return (n.access, n.dtype)
        if isinstance(n, KParam):
            return (n.param, n.dtype)
        if isinstance(n, KRed):
            return (n.reduction, n.dtype)
        if isinstance(n, KNested):
            return (n.op, n.vars, n.in_dtype, n.dtype)
        if isinstance(n, KIndex):
            return (n.mode, n.check, n.dtype)
        raise TypeError(n)  # pragma: no cover

    def reachable(self, roots: list[KExpr], stop) -> list[KExpr]:
        """Expressions evaluated at the row's element (not inside nested reductions), not
        descending below those whose structure id is in ``stop`` (they are included)."""
        out, seen, todo = [], set(), list(roots)
        while todo:
            n = todo.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            out.append(n)
            if self.of(n) not in stop:
                todo.extend(self.low._operands(n))
        return out


def _splat(b: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    """A vector of ``lanes`` copies of a scalar (insertelement + shufflevector)."""
    vty = ir.VectorType(value.type, lanes)
    one = b.insert_element(ir.Constant(vty, None), value, ir.Constant(ir.IntType(32), 0))
    return b.shuffle_vector(one, ir.Constant(vty, None),
                            ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))


def _merge_lanes(b: ir.IRBuilder, op: str, dt: np.dtype, a: ir.Value, ai: ir.Value,
                 x: ir.Value, xi: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Lane by lane, two (best value, position) vectors of an arg-reduction into one, in any
    order of the partials: the better value, ties to the lower position, a NaN over any
    number, of two NaNs the lower position (``Reducer.merge_indexed``, on vectors)."""
    earlier = b.icmp_signed("<", xi, ai)
    if dt.kind == "f":
        nan_wins = b.and_(b.fcmp_unordered("uno", x, x),
                          b.or_(b.fcmp_ordered("ord", a, a), earlier))
        take = b.or_(nan_wins, b.or_(b.fcmp_ordered(op, x, a),
                                     b.and_(b.fcmp_ordered("==", x, a), earlier)))
    else:
        cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
        take = b.or_(cmp(op, x, a), b.and_(b.icmp_unsigned("==", x, a), earlier))
    return b.select(take, x, a), b.select(take, xi, ai)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _expr_dtype(e: KExpr) -> np.dtype:
    return e.dtype


def lower_kernel(geometry: Geometry, math: MathLib, name: str) -> str:
    """Entry point of the codegen stage: LLVM IR text of one kernel in one geometry."""
    return KernelLowering(geometry, math, name).lower()

