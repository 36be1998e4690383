"""Matmul epilogues: map kernels a matmul kernel can compute from its accumulators.

``relu(x @ w + b)`` plans as a matmul kernel (the product, a library call's shape) and a map
kernel (the bias and the ReLU) reading the product. When that map kernel is the first kernel
after the matmul to read the product, reads it only elementwise at its own position and has
no run-time checks, a matmul that is lowered by tracearray can apply the map kernel's
expressions to its accumulators before its store: one kernel, and the product itself is not
stored unless another kernel or the function's results read it.

Which kernels qualify is a function of the plan alone (``matmul_epilogues``). Whether a
runtime fuses them is its own choice, made when it binds the plan: the GPU's own matmul kernel
takes its epilogue; a matmul run by a library (cuBLAS on the GPU, NumPy's BLAS on the CPU)
takes none, and the map kernel then runs after it as planned.
"""
from __future__ import annotations

from typing import Iterable

from ..trace.graph import Node
from .kexpr import space_index
from .plan import Kernel, Plan, view_chain


def reads_identity(kernel: Kernel, node: Node) -> bool:
    """Whether a map kernel reads ``node`` only elementwise at its own index (so a matmul
    producing ``node`` can compute the kernel's roots from its accumulators)."""
    if kernel.kind != "map" or kernel.space != node.shape or kernel.body.nested_extents:
        return False
    ident = space_index(kernel.space)
    accs = [a for a in kernel.body.accesses if a.buffer is node]
    return bool(accs) and all(a.chain == () and a.index == ident for a in accs)


def matmul_epilogues(plan: Plan, library: Iterable[int] = ()
                     ) -> tuple[set[int], dict[int, tuple[int, Node, bool]]]:
    """The matmul kernels that absorb an epilogue and their epilogues: (indices of the
    absorbed matmul kernels, {epilogue index: (matmul index, product node, whether the
    product must still be stored)}). ``library``: indices of matmul kernels a library runs,
    which take none."""
    library = set(library)
    kernels = plan.kernels
    absorbed: set[int] = set()
    fused: dict[int, tuple[int, Node, bool]] = {}
    for i, k in enumerate(kernels):
        if k.kind != "matmul" or k.call is None or i in library:
            continue
        mm = k.matmul
        readers = []
        for j, other in enumerate(kernels):
            if j == i:
                continue
            if other.call is not None:   # a matmul or an external call
                if any(view_chain(a, plan.stored)[0] is mm for a in other.call.operands):
                    readers.append(j)
            elif any(a.buffer is mm for a in other.body.accesses):
                readers.append(j)
        if not readers:
            continue
        j = min(readers)
        if j <= i or kernels[j].call is not None or j in fused or kernels[j].body.checks or \
                not reads_identity(kernels[j], mm):
            continue   # (an epilogue with bounds checks would need the error flag)
        store_c = len(readers) > 1 or mm in plan.graph.outputs
        absorbed.add(i)
        fused[j] = (i, mm, store_c)
    return absorbed, fused


__all__ = ["matmul_epilogues", "reads_identity"]
