"""Reduction and scan primitives, with their reducers.

A ``Reducer`` says how a reduction accumulates: the elementwise op that combines two partial
results (``combine_op``: ``add`` for sum; the same op is NumPy's ``ufunc.reduce``), its
identity, the accumulator dtype, whether values of the operand's dtype are combined (max, min)
rather than of the result's (sum of int8 as int64), and for ``argmax``/``argmin`` the index
that is carried along. Code generators call ``identity`` and ``combine`` and never look at the
reduction's name; a new reduction is one ``register_reduction`` call.

In the graph a reduction always keeps its reduced axes (size 1); the tracer adds a
``squeeze`` for keepdims=False. A reduction's ``dtype`` attribute is the result dtype (sum,
prod); float16 sums and products accumulate in float32 (divergence float16-accumulation).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from . import rules
from .ir import BOOL, F16, F32, constant, intrinsic, truth
from .spec import ALL_DTYPES, Domain, Kind, OpSpec, OPS, register


@dataclass(frozen=True)
class Reducer:
    ufunc: np.ufunc | None            # the ufunc whose reduce (and accumulate) this computes
    combine_op: str | None            # elementwise op combining two partials (None: arg*)
    start: Callable[[np.dtype], Any]  # identity value in the accumulator dtype
    index: str | None = None          # "max" / "min": argmax / argmin carry the best index
    widen_f16: bool = False           # float16 accumulates in float32
    operand_dtype: bool = False       # combines the operand's values (max/min/arg*)
    bool_acc: bool = False            # any/all: an i1 accumulator whatever the operand

    def accumulator_dtype(self, dt: np.dtype) -> np.dtype:
        dt = np.dtype(dt)
        return F32 if self.widen_f16 and dt == F16 else dt

    def identity(self, acc_dt: np.dtype) -> ir.Constant:
        if self.bool_acc:
            return ir.Constant(ir.IntType(1), int(self.start(BOOL)))
        return constant(self.start(np.dtype(acc_dt)), acc_dt)

    def combine(self, b: ir.IRBuilder, acc: ir.Value, x: ir.Value, acc_dt: np.dtype,
                reassociate: bool = True) -> ir.Value:
        """``acc <combine_op> x`` in the accumulator dtype (for any/all, ``x`` of the
        operand's dtype). Float sums and products may be reassociated (several vector partial
        sums); float max/min use llvm.maximum/minimum, which propagate NaN as NumPy does and
        vectorise as reductions."""
        from .ir import ScalarCtx
        acc_dt = np.dtype(acc_dt)
        if self.bool_acc:
            t = truth(b, x, acc_dt)
            return b.or_(acc, t) if self.combine_op == "logical_or" else b.and_(acc, t)
        if acc_dt.kind == "f" and self.combine_op in ("add", "multiply"):
            new = b.fadd(acc, x) if self.combine_op == "add" else b.fmul(acc, x)
            if reassociate:
                new.flags.append("reassoc")
            return new
        if acc_dt.kind == "f" and self.combine_op in ("maximum", "minimum"):
            name = "llvm.maximum" if self.combine_op == "maximum" else "llvm.minimum"
            return intrinsic(b, name, [acc, x])
        spec = OPS[self.combine_op]
        return spec.lower(ScalarCtx(b, [acc, x], [acc_dt, acc_dt], acc_dt, _NO_MATH))

    def better(self, b: ir.IRBuilder, x: ir.Value, cur: ir.Value, dt: np.dtype) -> ir.Value:
        """arg-reductions: whether ``x`` replaces ``cur`` -- strictly better, or the first
        NaN (NumPy's rule)."""
        op = ">" if self.index == "max" else "<"
        if dt.kind == "f":
            x_nan = b.fcmp_unordered("uno", x, x)
            cur_nan = b.fcmp_unordered("uno", cur, cur)
            return b.and_(b.not_(cur_nan), b.or_(b.fcmp_ordered(op, x, cur), x_nan))
        cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
        return cmp(op, x, cur)

    def merge_indexed(self, b: ir.IRBuilder, a: ir.Value, ai: ir.Value, x: ir.Value,
                      xi: ir.Value, dt: np.dtype) -> tuple[ir.Value, ir.Value]:
        """arg-reductions: two (value, index) partial results into one, in any order of the
        partials (a tree): ties go to the lower index, and of NaNs the one of lower index
        wins (NumPy's first)."""
        op = ">" if self.index == "max" else "<"
        earlier = b.icmp_signed("<", xi, ai)
        if dt.kind == "f":
            a_nan, x_nan = b.fcmp_unordered("uno", a, a), b.fcmp_unordered("uno", x, x)
            better = b.fcmp_ordered(op, x, a)
            tie = b.fcmp_ordered("==", x, a)
            both_nan = b.and_(a_nan, x_nan)
            take = b.or_(b.and_(x_nan, b.not_(a_nan)), b.and_(both_nan, earlier))
            ordered = b.and_(b.not_(a_nan), b.not_(x_nan))
            take = b.or_(take, b.and_(ordered, b.or_(better, b.and_(tie, earlier))))
        else:
            cmp = b.icmp_signed if dt.kind == "i" else b.icmp_unsigned
            take = b.or_(cmp(op, x, a), b.and_(b.icmp_unsigned("==", x, a), earlier))
        return b.select(take, x, a), b.select(take, xi, ai)


class _NoMath:
    def call(self, b, name, args, dtype):  # pragma: no cover - reductions never need libm
        raise TypeError(f"tracearray: reductions do not call {name}")


_NO_MATH = _NoMath()


def _lowest(dt: np.dtype) -> Any:
    if dt.kind == "b":
        return False
    if dt.kind == "f":
        return -np.inf
    return np.iinfo(dt).min


def _highest(dt: np.dtype) -> Any:
    if dt.kind == "b":
        return True
    if dt.kind == "f":
        return np.inf
    return np.iinfo(dt).max


def _all_ones(dt: np.dtype) -> Any:
    return True if dt.kind == "b" else -1


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------

def _reduce_ref(fn: Callable[..., np.ndarray], start: Callable[[np.dtype], Any] | None = None
                ) -> Callable[..., np.ndarray]:
    """NumPy's reduction with keepdims; reductions without an identity (max, min) start from
    the reducer's start value, as the kernels do, so that reducing an empty axis (legal with
    ``initial=``, which the graph combines afterwards) gives that value, not NumPy's error."""
    def ref(x: np.ndarray, *, axes: tuple[int, ...], dtype: str | None = None, **_: Any) -> np.ndarray:
        kwargs = {"dtype": dtype} if dtype is not None and fn in (np.sum, np.prod) else {}
        if start is not None:
            kwargs["initial"] = start(x.dtype)
        return np.asarray(fn(x, axis=axes, keepdims=True, **kwargs))
    return ref


def _ufunc_reduce_ref(ufunc: np.ufunc, start: Callable[[np.dtype], Any] | None = None
                      ) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
        kw = {} if start is None else {"initial": start(x.dtype)}
        return np.asarray(ufunc.reduce(x, axis=axes, keepdims=True, **kw))
    return ref


def _arg_reduce_ref(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
        (axis,) = axes
        return np.asarray(fn(x, axis=axis, keepdims=True))
    return ref


def _same_operand(n: Any) -> tuple[np.dtype, ...]:
    return (n.dtype,)


def _bool_operand(n: Any) -> tuple[np.dtype, ...]:
    return (BOOL,)


def register_reduction(name: str, reducer: Reducer, numpy_ref: Callable[..., Any],
                       dtype_rule: Callable[..., np.dtype], domain: Domain | None = None,
                       operand_dtypes: Callable[[Any], tuple[np.dtype, ...]] | None = None,
                       divergences: tuple[str, ...] = ()) -> OpSpec:
    return register(OpSpec(name, Kind.REDUCE, numpy_ref, rules.reduce_shape, dtype_rule,
                           domain or Domain(ALL_DTYPES), reducer=reducer,
                           operand_dtypes=operand_dtypes, divergences=divergences))


_FLOAT_SUM = ("float-sum-reassociation", "float16-accumulation")
_FLOAT_PROD = ("float-prod-reassociation", "float16-accumulation")

register_reduction("sum", Reducer(np.add, "add", lambda dt: 0, widen_f16=True),
                   _reduce_ref(np.sum), rules.attr_dtype, operand_dtypes=_same_operand,
                   divergences=_FLOAT_SUM)
register_reduction("prod", Reducer(np.multiply, "multiply", lambda dt: 1, widen_f16=True),
                   _reduce_ref(np.prod), rules.attr_dtype, operand_dtypes=_same_operand,
                   divergences=_FLOAT_PROD)
register_reduction("max", Reducer(np.maximum, "maximum", _lowest, operand_dtype=True),
                   _reduce_ref(np.max, _lowest), rules.same_dtype,
                   divergences=("max-min-signed-zero",))
register_reduction("min", Reducer(np.minimum, "minimum", _highest, operand_dtype=True),
                   _reduce_ref(np.min, _highest), rules.same_dtype,
                   divergences=("max-min-signed-zero",))
register_reduction("any", Reducer(np.logical_or, "logical_or", lambda dt: False, bool_acc=True),
                   _reduce_ref(np.any), rules.bool_dtype, operand_dtypes=_bool_operand)
register_reduction("all", Reducer(np.logical_and, "logical_and", lambda dt: True,
                                  bool_acc=True),
                   _reduce_ref(np.all), rules.bool_dtype, operand_dtypes=_bool_operand)
register_reduction("argmax", Reducer(None, None, _lowest, index="max", operand_dtype=True),
                   _arg_reduce_ref(np.argmax), rules.index_dtype)
register_reduction("argmin", Reducer(None, None, _highest, index="min", operand_dtype=True),
                   _arg_reduce_ref(np.argmin), rules.index_dtype)

# ufunc.reduce of the other associative, commutative ufuncs (fmax.reduce is nanmax).
_FLOATS = tuple(d for d in ALL_DTYPES if d.kind == "f")
_INTS_BOOL = tuple(d for d in ALL_DTYPES if d.kind in "biu")
register_reduction("reduce_fmax", Reducer(np.fmax, "fmax", lambda dt: np.nan, operand_dtype=True),
                   _ufunc_reduce_ref(np.fmax, lambda dt: np.nan), rules.same_dtype,
                   Domain(_FLOATS),
                   operand_dtypes=_same_operand, divergences=("max-min-signed-zero",))
register_reduction("reduce_fmin", Reducer(np.fmin, "fmin", lambda dt: np.nan, operand_dtype=True),
                   _ufunc_reduce_ref(np.fmin, lambda dt: np.nan), rules.same_dtype,
                   Domain(_FLOATS),
                   operand_dtypes=_same_operand, divergences=("max-min-signed-zero",))
register_reduction("reduce_bitwise_and",
                   Reducer(np.bitwise_and, "bitwise_and", _all_ones, operand_dtype=True),
                   _ufunc_reduce_ref(np.bitwise_and), rules.same_dtype, Domain(_INTS_BOOL),
                   operand_dtypes=_same_operand)
register_reduction("reduce_bitwise_or",
                   Reducer(np.bitwise_or, "bitwise_or", lambda dt: 0, operand_dtype=True),
                   _ufunc_reduce_ref(np.bitwise_or), rules.same_dtype, Domain(_INTS_BOOL),
                   operand_dtypes=_same_operand)
register_reduction("reduce_bitwise_xor",
                   Reducer(np.bitwise_xor, "bitwise_xor", lambda dt: 0, operand_dtype=True),
                   _ufunc_reduce_ref(np.bitwise_xor), rules.same_dtype, Domain(_INTS_BOOL),
                   operand_dtypes=_same_operand)
register_reduction("reduce_logical_xor",
                   Reducer(np.logical_xor, "logical_xor", lambda dt: False, operand_dtype=True),
                   _ufunc_reduce_ref(np.logical_xor), rules.bool_dtype, Domain((BOOL,)),
                   operand_dtypes=_bool_operand)


def reducer_of_ufunc(ufunc: np.ufunc) -> str | None:
    """The reduction primitive computing ``ufunc.reduce`` (None: not one of ours)."""
    for name, spec in OPS.items():
        if spec.kind is Kind.REDUCE and spec.reducer.ufunc is ufunc:
            return name
    return None


# --------------------------------------------------------------------------------------------
# Scans: ufunc.accumulate. Exact per-step arithmetic in the output dtype, as NumPy's is.
# --------------------------------------------------------------------------------------------

def _scan_ref(ufunc: np.ufunc) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, *, axis: int, dtype: str) -> np.ndarray:
        return ufunc.accumulate(x, axis=axis, dtype=dtype)
    return ref


def register_scan(name: str, reducer: Reducer, domain: Domain | None = None,
                  divergences: tuple[str, ...] = ()) -> OpSpec:
    return register(OpSpec(name, Kind.SCAN, _scan_ref(reducer.ufunc), rules.same_shape,
                           rules.attr_dtype, domain or Domain(ALL_DTYPES), reducer=reducer,
                           operand_dtypes=_same_operand, divergences=divergences))


# NumPy's accumulate starts from the first element; a float cumsum starts at -0.0
# (-0.0 + x is x for every x) so that cumsum([-0.0]) is -0.0.
register_scan("cumsum", Reducer(np.add, "add", lambda dt: -0.0 if dt.kind == "f" else 0),
              divergences=("float16-accumulation",))
register_scan("cumprod", Reducer(np.multiply, "multiply", lambda dt: 1),
              divergences=("float16-accumulation",))
register_scan("cummax", Reducer(np.maximum, "maximum", _lowest, operand_dtype=True))
register_scan("cummin", Reducer(np.minimum, "minimum", _highest, operand_dtype=True))


def scan_of_ufunc(ufunc: np.ufunc) -> str | None:
    """The scan primitive computing ``ufunc.accumulate`` (None: not one of ours)."""
    for name, spec in OPS.items():
        if spec.kind is Kind.SCAN and spec.reducer.ufunc is ufunc:
            return name
    return None
