"""Stage 4: LLVM IR for a kernel in its loop geometry (target independent).

Entry function: ``lower_kernel(geometry, math, name)`` in ``kernel.py``; per-op scalar
semantics in ``scalar.py``.
"""
from __future__ import annotations

from . import scalar
from .kernel import ARG_REDUCTIONS, entry_names, lower_kernel

# Reductions and scans that kernel.py knows how to accumulate.
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "any", "all"}) | frozenset(ARG_REDUCTIONS)
SCANS = frozenset({"cumsum", "cumprod"})


def lowering_tables() -> dict[str, frozenset[str]]:
    """Op names each lowering covers, by op kind (a meta-test checks the op table against it)."""
    return {"elementwise": scalar.OPS, "reduce": REDUCTIONS, "scan": SCANS}


__all__ = ["lower_kernel", "entry_names", "lowering_tables", "scalar"]
