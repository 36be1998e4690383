"""THE list of tracearray's deliberate divergences from NumPy lives in the op registry
(``tracearray.ops.divergences``), beside the ops that cite it; this module is its public face
in ``tracearray.testing``."""
from ..ops.divergences import (BY_ID, COMPARATOR_MODES, DIVERGENCES, Divergence, get,  # noqa: F401
                               is_x86_64, render_markdown)

__all__ = ["DIVERGENCES", "Divergence", "BY_ID", "COMPARATOR_MODES", "get", "is_x86_64",
           "render_markdown"]
