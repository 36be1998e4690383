"""tracearray.testing: check compiled functions against NumPy.

- ``assert_matches_numpy(fn, *args, rtol=None, atol=None, device=None)``: compile ``fn``, run
  it and NumPy, compare structure, type, shape, dtype, NaN positions and values (exact where
  NumPy is exact; the tolerance table of ``compare.py`` elsewhere, propagated through the
  program), and raise ``MismatchError`` with a readable report of the first mismatches.
- ``check(fn, *strategies, max_examples=...)`` / ``@matches_numpy(*strategies)``: a property
  test over drawn inputs; a failure is shrunk to a minimal example and printed with a
  self-contained reproducer script.
- Strategies: ``arrays(dtype, shape, values=, layout=)``, ``array_groups(n, ...)``
  (broadcast-compatible), ``shapes``, ``broadcastable_shapes``, ``dtypes``, ``elements``,
  ``layouts``; ``strided(values, perm=, flip=, step=, broadcast=)`` builds non-contiguous views.
- ``programs(...)``: random NumPy programs drawn from the op table, with inputs.
- ``DIVERGENCES``: the one list of deliberate divergences from NumPy (docs/divergences.md).

Needs Hypothesis (``pip install 'tracearray[test]'``).
"""
try:
    import hypothesis as _hypothesis  # noqa: F401
except ImportError as _missing:
    raise ImportError("tracearray.testing needs Hypothesis, which is not installed: "
                      "pip install 'tracearray[test]' (or: pip install hypothesis)",
                      name="hypothesis") from _missing
from .check import CheckFailure, check, matches_numpy
from .compare import (FALLBACK_RTOL_ATOL, TOLERANCES, Comparison, MismatchError,
                      assert_matches_numpy, compare_with_numpy)
from .divergences import DIVERGENCES, Divergence
from .programs import Program, ProgramSpace, generate, programs
from .repro import reproducer
from .strategies import (LAYOUT_KINDS, SIDES, VALUE_CLASSES, Layout, RandomSource, array_groups,
                         arrays, broadcastable_shapes, dtypes, elements, layout_of, layouts,
                         shapes, special_values, strided)

__all__ = [
    "assert_matches_numpy", "compare_with_numpy", "Comparison", "MismatchError", "TOLERANCES",
    "FALLBACK_RTOL_ATOL", "check", "matches_numpy", "CheckFailure", "reproducer",
    "arrays", "array_groups", "shapes", "broadcastable_shapes", "dtypes", "elements", "layouts",
    "Layout", "strided", "layout_of", "special_values", "VALUE_CLASSES", "LAYOUT_KINDS", "SIDES",
    "programs", "Program", "ProgramSpace", "generate", "RandomSource",
    "DIVERGENCES", "Divergence",
]
