"""Stage 4: LLVM IR for a kernel in its loop geometry (target independent).

Entry function: ``lower_kernel(geometry, math, name)`` in ``kernel.py``; per-op scalar
semantics come from the op registry (``tracearray.ops``) through ``scalar.py``.
"""
from __future__ import annotations

from ..ops import OPS, Kind
from . import scalar
from .kernel import entry_names, lower_kernel


def lowering_tables() -> dict[str, frozenset[str]]:
    """Op names each lowering covers, by op kind (a meta-test checks the registry against
    it): elementwise ops with an emitter, reductions and scans with a reducer."""
    def with_reducer(kind: Kind) -> frozenset[str]:
        return frozenset(n for n, s in OPS.items() if s.kind is kind and s.reducer is not None)
    return {"elementwise": scalar.lowered_ops(), "reduce": with_reducer(Kind.REDUCE),
            "scan": with_reducer(Kind.SCAN)}


__all__ = ["lower_kernel", "entry_names", "lowering_tables", "scalar"]
