"""The op table: one ``OpSpec`` per graph operation, with its kind, NumPy reference, shape rule,
dtype rule, fusion cost and Hypothesis input domain.

Graph ops are *primitives*: every node in a graph names one of them. NumPy-level functions
that are compositions (``mean``, ``var``, ``clip``, ``linalg.norm``, ``swapaxes``, ...) are
listed in ``COMPOSITES`` in ``trace/numpy_api.py`` with their own NumPy references; they expand
into primitives while tracing.

Lowerings live with the lowering stages (``codegen/``), keyed by the same names; a meta-test
checks that every op here has one.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .graph import Node, Shape


class Kind(enum.Enum):
    SOURCE = "source"            # inputs, constants: leaves of the graph
    ELEMENTWISE = "elementwise"  # NumPy ufuncs (with broadcasting), where, cast
    REDUCE = "reduce"            # reductions over axes, always keepdims in the graph
    MOVEMENT = "movement"        # views: reshape, transpose, slice, broadcast, squeeze, expand
    SCAN = "scan"                # cumsum, cumprod
    CONTRACT = "contract"        # matmul
    CONCAT = "concat"            # concatenate


ALL_DTYPES = tuple(np.dtype(t) for t in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.kind == "f")
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.kind in "iu")


@dataclass(frozen=True)
class Domain:
    """Which inputs Hypothesis draws for an op: accepted dtypes and a value range.
    ``values`` is one of "any", "positive" (> 0), "unit" (in [-1, 1]), "ge1" (>= 1),
    "small" (|x| < 8, e.g. exponents and shift amounts)."""
    dtypes: tuple[np.dtype, ...]
    values: str = "any"


@dataclass(frozen=True)
class OpSpec:
    name: str
    kind: Kind
    numpy_ref: Callable[..., Any]                        # (arrays..., **attrs) -> ndarray
    shape_rule: Callable[[Sequence[Shape], dict], Shape]
    dtype_rule: Callable[[Sequence[np.dtype], dict], np.dtype]
    domain: Domain = field(default_factory=lambda: Domain(ALL_DTYPES))
    arity: int = 1
    cost: int = 1                                        # fusion weight: 1 cheap, 4 medium, 16 transcendental
    ufunc: np.ufunc | None = None


OPS: dict[str, OpSpec] = {}


def _register(spec: OpSpec) -> OpSpec:
    assert spec.name not in OPS, spec.name
    OPS[spec.name] = spec
    return spec


# --------------------------------------------------------------------------------------------
# Shape rules
# --------------------------------------------------------------------------------------------

def broadcast_shape(shapes: Sequence[Shape], attrs: dict | None = None) -> Shape:
    return tuple(np.broadcast_shapes(*shapes))


def reduce_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    axes = attrs["axes"]
    return tuple(1 if i in axes else s for i, s in enumerate(shapes[0]))


def same_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(shapes[0])


def attr_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(attrs["shape"])


def transpose_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(shapes[0][p] for p in attrs["perm"])


def slice_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(len(range(start, stop, step)) for start, stop, step in attrs["slices"])


def squeeze_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(s for i, s in enumerate(shapes[0]) if i not in attrs["axes"])


def expand_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    out: list[int] = []
    src = iter(shapes[0])
    for i in range(len(shapes[0]) + len(attrs["axes"])):
        out.append(1 if i in attrs["axes"] else next(src))
    return tuple(out)


def matmul_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    a, b = shapes
    a2, b2 = (a if len(a) > 1 else (1,) + a), (b if len(b) > 1 else b + (1,))
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def concat_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    axis = attrs["axis"]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Dtype rules
# --------------------------------------------------------------------------------------------

def ufunc_dtype_rule(ufunc: np.ufunc) -> Callable[[Sequence[np.dtype], dict], np.dtype]:
    def rule(dtypes: Sequence[Any], attrs: dict) -> np.dtype:
        return ufunc.resolve_dtypes(tuple(dtypes) + (None,) * ufunc.nout)[-1]
    return rule


def same_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(dtypes[0])


def attr_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(attrs["dtype"])


def index_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(np.intp)


def bool_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(bool)


def where_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.result_type(*dtypes[1:])


# --------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------

def _input_ref(**attrs: Any) -> Any:
    raise AssertionError("inputs are bound by the evaluator, not computed")


def constant_value(node: Node) -> np.ndarray:
    """The array held by a ``constant`` or ``size`` node."""
    return np.frombuffer(node.attr("value"), dtype=node.dtype).reshape(node.shape)


def _constant_ref(*, value: bytes, shape: Shape, dtype: str, **_: Any) -> np.ndarray:
    return np.frombuffer(value, dtype=np.dtype(dtype)).reshape(shape).copy()


_register(OpSpec("input", Kind.SOURCE, _input_ref, attr_shape, attr_dtype, arity=0, cost=0))
_register(OpSpec("constant", Kind.SOURCE, _constant_ref, attr_shape, attr_dtype, arity=0, cost=0))
# A scalar that depends on sizes (the element count of a mean): a run-time kernel argument,
# never an immediate, so that kernels stay size-generic.
_register(OpSpec("size", Kind.SOURCE, _constant_ref, attr_shape, attr_dtype, arity=0, cost=0))


# --------------------------------------------------------------------------------------------
# Elementwise: the NumPy ufuncs we lower, with their cost weights and input domains.
# --------------------------------------------------------------------------------------------

_CHEAP, _MEDIUM, _TRANSCENDENTAL = 1, 4, 16

# name: (cost, value domain)
_UFUNCS: dict[str, tuple[int, str]] = {
    "add": (_CHEAP, "any"), "subtract": (_CHEAP, "any"), "multiply": (_CHEAP, "any"),
    "true_divide": (_MEDIUM, "any"), "floor_divide": (_MEDIUM, "any"),
    "remainder": (_MEDIUM, "any"), "power": (_TRANSCENDENTAL, "small"),
    "negative": (_CHEAP, "any"), "positive": (_CHEAP, "any"), "absolute": (_CHEAP, "any"),
    "sign": (_CHEAP, "any"), "square": (_CHEAP, "any"), "sqrt": (_MEDIUM, "positive"),
    "cbrt": (_TRANSCENDENTAL, "any"), "reciprocal": (_MEDIUM, "any"),
    "exp": (_TRANSCENDENTAL, "small"), "exp2": (_TRANSCENDENTAL, "small"),
    "expm1": (_TRANSCENDENTAL, "small"), "log": (_TRANSCENDENTAL, "positive"),
    "log2": (_TRANSCENDENTAL, "positive"), "log10": (_TRANSCENDENTAL, "positive"),
    "log1p": (_TRANSCENDENTAL, "positive"), "sin": (_TRANSCENDENTAL, "any"),
    "cos": (_TRANSCENDENTAL, "any"), "tan": (_TRANSCENDENTAL, "any"),
    "arcsin": (_TRANSCENDENTAL, "unit"), "arccos": (_TRANSCENDENTAL, "unit"),
    "arctan": (_TRANSCENDENTAL, "any"), "arctan2": (_TRANSCENDENTAL, "any"),
    "sinh": (_TRANSCENDENTAL, "small"), "cosh": (_TRANSCENDENTAL, "small"),
    "tanh": (_TRANSCENDENTAL, "any"), "arcsinh": (_TRANSCENDENTAL, "any"),
    "arccosh": (_TRANSCENDENTAL, "ge1"), "arctanh": (_TRANSCENDENTAL, "unit"),
    "hypot": (_MEDIUM, "any"), "floor": (_CHEAP, "any"), "ceil": (_CHEAP, "any"),
    "trunc": (_CHEAP, "any"), "rint": (_CHEAP, "any"), "maximum": (_CHEAP, "any"),
    "minimum": (_CHEAP, "any"), "fmax": (_CHEAP, "any"), "fmin": (_CHEAP, "any"),
    "copysign": (_CHEAP, "any"), "isnan": (_CHEAP, "any"), "isinf": (_CHEAP, "any"),
    "isfinite": (_CHEAP, "any"), "signbit": (_CHEAP, "any"),
    "logical_and": (_CHEAP, "any"), "logical_or": (_CHEAP, "any"),
    "logical_xor": (_CHEAP, "any"), "logical_not": (_CHEAP, "any"),
    "bitwise_and": (_CHEAP, "any"), "bitwise_or": (_CHEAP, "any"),
    "bitwise_xor": (_CHEAP, "any"), "invert": (_CHEAP, "any"),
    "left_shift": (_CHEAP, "small"), "right_shift": (_CHEAP, "small"),
    "greater": (_CHEAP, "any"), "greater_equal": (_CHEAP, "any"), "less": (_CHEAP, "any"),
    "less_equal": (_CHEAP, "any"), "equal": (_CHEAP, "any"), "not_equal": (_CHEAP, "any"),
}

TRANSCENDENTAL = frozenset(n for n, (c, _) in _UFUNCS.items() if c >= _TRANSCENDENTAL)


def ufunc_input_dtypes(ufunc: np.ufunc) -> tuple[np.dtype, ...]:
    """Dtypes (of ours) for which the ufunc has a loop taking that dtype for every input."""
    out = []
    for dt in ALL_DTYPES:
        try:
            loop = ufunc.resolve_dtypes((dt,) * ufunc.nin + (None,) * ufunc.nout)
        except TypeError:
            continue
        if all(d == dt for d in loop[:ufunc.nin]):
            out.append(dt)
    return tuple(out)


for _name, (_cost, _values) in _UFUNCS.items():
    _uf = getattr(np, _name)
    _register(OpSpec(_name, Kind.ELEMENTWISE, _uf, broadcast_shape, ufunc_dtype_rule(_uf),
                     Domain(ufunc_input_dtypes(_uf), _values), arity=_uf.nin, cost=_cost,
                     ufunc=_uf))


def _where_ref(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(c, x, y)


def _cast_ref(x: np.ndarray, *, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(dtype)


_register(OpSpec("where", Kind.ELEMENTWISE, _where_ref, broadcast_shape, where_dtype, arity=3))
_register(OpSpec("cast", Kind.ELEMENTWISE, _cast_ref, same_shape, attr_dtype))


# --------------------------------------------------------------------------------------------
# Reductions. In the graph a reduction always keeps its reduced axes (size 1); the tracer
# adds a ``squeeze`` for keepdims=False. ``dtype`` is the result dtype; the accumulation
# dtype is the same except float16, which accumulates in float32 (see divergences).
# --------------------------------------------------------------------------------------------

def _reduce_ref(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, *, axes: tuple[int, ...], dtype: str | None = None, **_: Any) -> np.ndarray:
        kwargs = {"dtype": dtype} if dtype is not None and fn in (np.sum, np.prod) else {}
        return np.asarray(fn(x, axis=axes, keepdims=True, **kwargs))
    return ref


def _arg_reduce_ref(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, *, axes: tuple[int, ...], **_: Any) -> np.ndarray:
        (axis,) = axes
        return np.asarray(fn(x, axis=axis, keepdims=True))
    return ref


REDUCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
              "any": np.any, "all": np.all}
for _name, _fn in REDUCTIONS.items():
    _rule = attr_dtype if _name in ("sum", "prod") else (
        bool_dtype if _name in ("any", "all") else same_dtype)
    _register(OpSpec(_name, Kind.REDUCE, _reduce_ref(_fn), reduce_shape, _rule))
_register(OpSpec("argmax", Kind.REDUCE, _arg_reduce_ref(np.argmax), reduce_shape, index_dtype))
_register(OpSpec("argmin", Kind.REDUCE, _arg_reduce_ref(np.argmin), reduce_shape, index_dtype))


# --------------------------------------------------------------------------------------------
# Movement (views). Attributes hold everything needed to map indices.
# --------------------------------------------------------------------------------------------

def _reshape_ref(x: np.ndarray, *, shape: Shape) -> np.ndarray:
    return x.reshape(shape)


def _transpose_ref(x: np.ndarray, *, perm: tuple[int, ...]) -> np.ndarray:
    return x.transpose(perm)


def _slice_ref(x: np.ndarray, *, slices: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    # (start, stop, step) are range() bounds from slice.indices(n). With a negative step,
    # stop == -1 means "through index 0" (Python's None), and start == -1 only occurs for an
    # empty range (slice(-2, None, -1) of a length-1 axis): Python would read that -1 as the
    # last element, so such an axis is sliced empty explicitly.
    return x[tuple(slice(0, 0) if (c < 0 and a < 0) else
                   slice(a, None if (c < 0 and b < 0) else b, c) for a, b, c in slices)]


def _broadcast_ref(x: np.ndarray, *, shape: Shape) -> np.ndarray:
    return np.broadcast_to(x, shape)


def _squeeze_ref(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    return np.squeeze(x, axis=axes) if axes else x


def _expand_ref(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    return np.expand_dims(x, axes) if axes else x


_register(OpSpec("reshape", Kind.MOVEMENT, _reshape_ref, attr_shape, same_dtype, cost=0))
_register(OpSpec("transpose", Kind.MOVEMENT, _transpose_ref, transpose_shape, same_dtype, cost=0))
_register(OpSpec("slice", Kind.MOVEMENT, _slice_ref, slice_shape, same_dtype, cost=0))
_register(OpSpec("broadcast_to", Kind.MOVEMENT, _broadcast_ref, attr_shape, same_dtype, cost=0))
_register(OpSpec("squeeze", Kind.MOVEMENT, _squeeze_ref, squeeze_shape, same_dtype, cost=0))
_register(OpSpec("expand_dims", Kind.MOVEMENT, _expand_ref, expand_shape, same_dtype, cost=0))


# --------------------------------------------------------------------------------------------
# Scans, contractions, concatenation.
# --------------------------------------------------------------------------------------------

def _scan_ref(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, *, axis: int, dtype: str) -> np.ndarray:
        return fn(x, axis=axis, dtype=dtype)
    return ref


def _matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.matmul(a, b))


def _concat_ref(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def _matmul_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.matmul.resolve_dtypes(tuple(dtypes) + (None,))[-1]


def _concat_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.result_type(*dtypes)


_register(OpSpec("cumsum", Kind.SCAN, _scan_ref(np.cumsum), same_shape, attr_dtype))
_register(OpSpec("cumprod", Kind.SCAN, _scan_ref(np.cumprod), same_shape, attr_dtype))
_register(OpSpec("matmul", Kind.CONTRACT, _matmul_ref, matmul_shape, _matmul_dtype,
                 Domain(tuple(d for d in ALL_DTYPES if d != np.dtype(bool))), arity=2))
_register(OpSpec("concatenate", Kind.CONCAT, _concat_ref, concat_shape, _concat_dtype, arity=-1))


def ops_of_kind(kind: Kind) -> frozenset[str]:
    return frozenset(n for n, s in OPS.items() if s.kind is kind)


ELEMENTWISE = ops_of_kind(Kind.ELEMENTWISE)
REDUCE = ops_of_kind(Kind.REDUCE)
MOVEMENT = ops_of_kind(Kind.MOVEMENT)
SOURCE = ops_of_kind(Kind.SOURCE)


def infer(op: str, args: Sequence[Node], attrs: dict) -> tuple[Shape, np.dtype]:
    """Shape and dtype of ``op`` applied to ``args`` according to the table."""
    spec = OPS[op]
    shape = spec.shape_rule([a.shape for a in args], attrs)
    dtype = spec.dtype_rule([a.dtype for a in args], attrs)
    return shape, dtype


def numel(shape: Shape) -> int:
    return math.prod(shape)
