"""What the registry records about a primitive: ``OpSpec`` and its parts.

One frozen ``OpSpec`` per graph primitive holds every fact any stage needs about it:

- tracing: ``kind``, ``numpy_ref``, ``shape_rule``, ``dtype_rule``, ``arity``, ``ufunc``, and
  ``operand_dtypes`` (what the tracer guarantees about the operands; the verifier checks it);
- fusion: ``cost`` (1 cheap, 4 medium, 16 transcendental);
- code generation: ``lower`` (the scalar emitter of an elementwise op, see ``ops.ir``),
  ``reducer`` (identity and combine step of a reduction), ``math`` (the C library and
  libdevice symbols of a function the target's math library provides);
- testing: ``domain`` (dtypes and value class Hypothesis draws), ``accuracy`` (how close to
  NumPy a compiled result must be: exact, or within the ulps of an accuracy family), ``bounds``
  (what the comparator's interval evaluator must know beyond monotonicity: jumps, critical
  points, branch cuts) and ``divergences`` (ids in ``ops.divergences``).

Nothing here imports a pipeline stage: the registry sits below all of them.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

Shape = tuple[int, ...]


class Kind(enum.Enum):
    SOURCE = "source"            # inputs, constants: leaves of the graph
    ELEMENTWISE = "elementwise"  # NumPy ufuncs (with broadcasting), where, cast
    REDUCE = "reduce"            # reductions over axes, always keepdims in the graph
    MOVEMENT = "movement"        # views: reshape, transpose, slice, broadcast, squeeze, expand
    SCAN = "scan"                # cumsum, cumprod
    CONTRACT = "contract"        # matmul
    CONCAT = "concat"            # concatenate
    GATHER = "gather"            # integer-array indexing: an index map computed from data
    SCATTER = "scatter"          # writes at positions loaded from data (x[idx] = v, ufunc.at)
    EXTERNAL = "external"        # a library call over whole arrays (sorts, LAPACK): ops.external


ALL_DTYPES = tuple(np.dtype(t) for t in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.kind == "f")
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.kind in "iu")

CHEAP, MEDIUM, TRANSCENDENTAL_COST = 1, 4, 16


@dataclass(frozen=True)
class Domain:
    """Which inputs Hypothesis draws for an op: accepted dtypes and a value range.
    ``values`` is one of "any", "positive" (> 0), "unit" (in [-1, 1]), "ge1" (>= 1),
    "small" (|x| < 8, e.g. exponents and shift amounts). ``operands``: for an op whose
    operands have different dtypes (``ldexp(float, int)``), the operands' dtypes for a domain
    dtype (by default every operand has it)."""
    dtypes: tuple[np.dtype, ...]
    values: str = "any"
    operands: Callable[[np.dtype], tuple[np.dtype, ...]] | None = None

    def operand_dtypes(self, dtype: np.dtype, arity: int) -> tuple[np.dtype, ...]:
        return self.operands(dtype) if self.operands else (np.dtype(dtype),) * arity


@dataclass(frozen=True)
class Accuracy:
    """How a compiled float result may differ from NumPy's: ``family`` "exact" (bit for bit,
    the sign of zeros included) or the name of a row of the tolerance table
    (``tracearray.testing.compare.TOLERANCES``: "transcendental" is a few ulp)."""
    family: str = "exact"

    @property
    def exact(self) -> bool:
        return self.family == "exact"


EXACT = Accuracy("exact")
LIBM = Accuracy("transcendental")


@dataclass(frozen=True)
class MathFn:
    """A function the target's math library computes: the C library's float32 and float64
    symbols (the CPU: glibc, vectorised through libmvec) and libdevice's base name (the GPU:
    ``__nv_<base>f`` / ``__nv_<base>``)."""
    libm: tuple[str, str]
    libdevice: str
    nargs: int = 1


@dataclass(frozen=True)
class BoundsHint:
    """What the comparator's interval evaluator must know about an op beyond "monotone in
    each argument between critical points" (``tracearray.testing.bounds``):

    - ``jump``: a step function of the arguments (the quotient of a remainder); where its
      value changes inside the inputs' intervals the result jumps and is not compared;
    - ``critical``: "extrema" (sin, cos: +-1 at ``shift + k*pi``) or "poles" (tan);
    - ``special``: a named rule of the evaluator ("power-base", "atan2-cut")."""
    jump: Callable[..., Any] | None = None
    critical: str | None = None
    shift: float = 0.0
    special: str | None = None


@dataclass(frozen=True)
class OpSpec:
    name: str
    kind: Kind
    numpy_ref: Callable[..., Any]                        # (arrays..., **attrs) -> ndarray
    shape_rule: Callable[[Sequence[Shape], dict], Shape]
    dtype_rule: Callable[[Sequence[np.dtype], dict], np.dtype]
    domain: Domain = field(default_factory=lambda: Domain(ALL_DTYPES))
    arity: int = 1
    cost: int = CHEAP
    ufunc: np.ufunc | None = None
    # (node) -> the operand dtypes the tracer guarantees (checked by trace.verify)
    operand_dtypes: Callable[[Any], tuple[np.dtype, ...]] | None = None
    # code generation (see ops.ir for the emitter protocol)
    lower: Callable[[Any], Any] | None = None
    reducer: Any = None                                  # ops.reductions.Reducer
    math: MathFn | None = None
    # testing
    accuracy: Accuracy = EXACT
    bounds: BoundsHint | None = None
    divergences: tuple[str, ...] = ()

    @property
    def inexact(self) -> bool:
        return not self.accuracy.exact


OPS: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.name in OPS:
        raise ValueError(f"op {spec.name!r} is registered twice")
    OPS[spec.name] = spec
    return spec


def ops_of_kind(kind: Kind) -> frozenset[str]:
    return frozenset(n for n, s in OPS.items() if s.kind is kind)
