"""The op registry: every graph primitive with everything any stage knows about it.

A primitive is one ``OpSpec`` (``spec.py``), registered beside its scalar emitter, its reducer
or its view rule in the module of its family:

- ``elementwise.py``: NumPy's ufuncs for real dtypes (emitters, math-library symbols, accuracy,
  comparator hints), ``where`` and ``cast``;
- ``numeric.py``: exact bit-level ufuncs (fmod, frexp, ldexp, nextafter, gcd, lcm,
  bitwise_count);
- ``reductions.py``: reductions and scans with their ``Reducer`` (identity, combine step,
  accumulator dtype, carried index);
- ``structure.py``: sources, views, matmul, concatenate;
- ``indexing.py``: indexing with data (``gather``);
- ``external.py``: external kernels (library calls over whole arrays), registered by
  ``sorting.py`` (NumPy's sorts) and ``linalg.py`` (LAPACK through ``numpy.linalg``);
- ``random.py``: the counter-based random bit generator (``philox``);
- ``divergences.py``: THE list of deliberate divergences from NumPy, which ops cite by id;
- ``ir.py``: the scalar IR toolkit the emitters are written with.

Every stage reads the registry and none is imported by it: the tracer reads shape and dtype
rules, the planner costs and kinds, the code generators emitters, reducers and math symbols,
``tracearray.testing`` domains, accuracy families, bounds hints and divergences. NumPy-level
functions built from primitives (``mean``, ``logaddexp``, ``diff``, ...) are the *composites*
of ``tracearray.trace.composites``; ``tracearray.trace.registry`` lists both kinds together.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from . import elementwise, indexing, numeric, random, reductions, structure  # noqa: F401  (registration)
from . import fft, linalg, sorting  # noqa: F401  (registration of external ops)
from .external import EXTERNALS, External, call_key, result_index
from .reductions import Reducer, reducer_of_ufunc, scan_of_ufunc
from .spec import (ALL_DTYPES, EXACT, FLOAT_DTYPES, INT_DTYPES, LIBM, OPS, TRANSCENDENTAL_COST,
                   Accuracy, BoundsHint, Domain, Kind, MathFn, OpSpec, Shape, ops_of_kind)
from .structure import constant_value

ELEMENTWISE = ops_of_kind(Kind.ELEMENTWISE)
REDUCE = ops_of_kind(Kind.REDUCE)
MOVEMENT = ops_of_kind(Kind.MOVEMENT)
SOURCE = ops_of_kind(Kind.SOURCE)
SCAN = ops_of_kind(Kind.SCAN)
# Ops costly enough that a value used twice is stored rather than recomputed (fusion).
TRANSCENDENTAL = frozenset(n for n, s in OPS.items() if s.cost >= TRANSCENDENTAL_COST)
# Ops whose value the target's math library computes: name -> its symbols.
MATH: dict[str, MathFn] = {n: s.math for n, s in OPS.items() if s.math is not None}
# ufunc object -> primitive name (np.divide is np.true_divide, np.abs is np.absolute, ...).
UFUNC_OPS = {s.ufunc: n for n, s in OPS.items() if s.ufunc is not None}


def infer(op: str, args: Sequence[Any], attrs: dict) -> tuple[Shape, Any]:
    """Shape and dtype of ``op`` applied to ``args`` (graph nodes) according to its rules."""
    spec = OPS[op]
    shape = spec.shape_rule([a.shape for a in args], attrs)
    dtype = spec.dtype_rule([a.dtype for a in args], attrs)
    return shape, dtype


def numel(shape: Shape) -> int:
    return math.prod(shape)


from . import divergences  # noqa: E402  (reads the registered ops)

__all__ = ["OPS", "OpSpec", "Kind", "Domain", "Accuracy", "MathFn", "BoundsHint", "Reducer",
           "ALL_DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "EXACT", "LIBM", "ELEMENTWISE", "REDUCE",
           "MOVEMENT", "SOURCE", "SCAN", "TRANSCENDENTAL", "MATH", "UFUNC_OPS", "infer", "numel",
           "constant_value", "reducer_of_ufunc", "scan_of_ufunc", "ops_of_kind", "divergences",
           "EXTERNALS", "External", "call_key", "result_index"]
