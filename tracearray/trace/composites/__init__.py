"""NumPy-level functions built from primitives: the composites of the op registry.

A composite is one entry: the NumPy object it implements (a function, or a ufunc that is not
a primitive), its expansion, and what the generated tests draw for it. The expansion is plain
NumPy code over tracers (methods, operators and other NumPy calls, which dispatch again) or,
for ``impl=NUMPY_IMPLEMENTATION``, NumPy's own Python implementation run on tracers. Adding a
NumPy function is one ``@composite(...)`` in one module of this package: the tracer dispatches
to it, ``docs/supported.md`` lists it and ``tests/test_registry.py`` tests it, on its
``calls`` with arrays drawn from ``dtypes``/``values``/shapes, against NumPy.

``tracearray.trace.registry`` lists primitives and composites together.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ...ops import ALL_DTYPES

NUMPY_IMPLEMENTATION = "numpy"   # impl sentinel: NumPy's own Python implementation runs

ALL = ALL_DTYPES
NUMERIC = tuple(d for d in ALL_DTYPES if d.kind != "b")
FLOATS = tuple(d for d in ALL_DTYPES if d.kind == "f")
INTS = tuple(d for d in ALL_DTYPES if d.kind in "iu")
SIGNED = tuple(d for d in ALL_DTYPES if d.kind in "if")


@dataclass(frozen=True)
class Composite:
    numpy: Any                         # the NumPy function or ufunc it implements
    name: str                          # as users write it: "np.logaddexp", "np.linalg.norm"
    impl: Any                          # the expansion, or NUMPY_IMPLEMENTATION
    # Test calls: NumPy source with ``{0}``, ``{1}``, ... for the array arguments (printable,
    # so a failing case is its own reproducer; the random programs use them too).
    calls: tuple[str, ...] = ()
    arrays: int = 1                    # array arguments of each call
    dtypes: tuple[np.dtype, ...] = ALL
    values: str = "any"                # value class of the drawn arrays
    min_dims: int = 0
    max_dims: int = 3
    same_shape: bool = False           # the arrays share one shape (else broadcastable)
    notes: str = ""
    divergences: tuple[str, ...] = ()
    kind: str = "function"             # "function" | "ufunc"
    # NumPy's own result for an empty array argument is undefined (uninitialised memory):
    # random programs draw only non-empty arrays for it
    nonempty: bool = False

    @property
    def uses_numpy_implementation(self) -> bool:
        return self.impl is NUMPY_IMPLEMENTATION


COMPOSITES: dict[Any, Composite] = {}


def _name_of(obj: Any) -> str:
    from ..dispatch import numpy_name
    return numpy_name(obj)


def composite(numpy_obj: Any, *, calls: Sequence[str] = (), arrays: int = 1,
              dtypes: Sequence[np.dtype] = ALL, values: str = "any", min_dims: int = 0,
              max_dims: int = 3, same_shape: bool = False, notes: str = "",
              divergences: Sequence[str] = (), impl: Any = None, name: str | None = None,
              nonempty: bool = False) -> Any:
    """Register the composite implementing ``numpy_obj``: as a decorator of its expansion, or
    with ``impl=NUMPY_IMPLEMENTATION`` (then it returns None)."""
    def register(fn: Any) -> Any:
        if numpy_obj in COMPOSITES:
            raise ValueError(f"{_name_of(numpy_obj)} has two composites")
        COMPOSITES[numpy_obj] = Composite(
            numpy_obj, name or _name_of(numpy_obj), fn, tuple(calls), arrays,
            tuple(np.dtype(d) for d in dtypes), values, min_dims, max_dims, same_shape,
            notes, tuple(divergences), "ufunc" if isinstance(numpy_obj, np.ufunc) else "function",
            nonempty)
        return fn
    if impl is not None:
        register(impl)
        return None
    return register


def lookup(obj: Any) -> Composite | None:
    try:
        return COMPOSITES.get(obj)
    except TypeError:   # unhashable
        return None


def as_tracer(x: Any) -> Any:
    """``x`` as a traced array: tracers as they are, a boolean selection (``x[mask]``) as
    its compacted elements, lists holding traced values stacked, anything else array-like
    as a constant."""
    from .. import numpy_api as api
    from ..build import holds_traced
    from ..selection import MaskedSelection
    from ..tracer import Tracer
    if isinstance(x, Tracer):
        return x
    from ..complex_selection import ComplexSelection
    if isinstance(x, (MaskedSelection, ComplexSelection)):   # x[mask]: its selected elements
        return x.compact()
    if isinstance(x, (list, tuple)) and holds_traced(x):     # np.asarray's conversion
        return Tracer(api.array_from_nested(x))
    return Tracer(api.as_node(np.asarray(x) if not isinstance(x, (np.ndarray, np.generic))
                              else x))



def node(x: Any) -> Any:
    """The graph node of ``x`` (a tracer or a concrete value)."""
    return as_tracer(x).node


# The definitions (imported for their registration).
from . import (assignment, counting, fft, functions, indexing, lapack, linalg, reductions,  # noqa: E402,F401
               sets, shapes, sorting, ufuncs)

__all__ = ["COMPOSITES", "Composite", "composite", "lookup", "as_tracer", "node",
           "NUMPY_IMPLEMENTATION", "ALL", "NUMERIC", "FLOATS", "INTS", "SIGNED"]
