"""A stage's kernel: part of the client's traced graph, replayed at one chunk's shape.

``StageProgram`` is a plain, hashable description of the nodes one Dask task computes (op,
operand positions, attributes, and how each dimension's block size is found). It is the
*function* of a ``CompiledFunction``: called on a chunk's arrays inside a trace, it makes
the same nodes again with ``build.make`` at the block's shape, so the worker's compiled
function plans, tiles and compiles them as it would any function (once per process; kernels
are size-generic, so a ragged last chunk re-traces and compiles nothing new, and the disk
cache serves other processes). Only the attributes that hold sizes change with the block:
``reshape``'s and ``broadcast_to``'s target shapes, and a split axis's full-range ``slice``.

Nothing here imports Dask: the program is pickled into the Dask graph with its compiled
function (``tracearray/pickling.py``) and rebuilt once per worker process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TracearrayError
from ..trace import context
from ..trace.build import make
from ..trace.tracer import Tracer

# How one dimension's block size is found in a task: ("fixed", n) the same in every task;
# ("from", i, d) the size of dimension d of input i's block; ("times", recipe, k) and
# ("div", recipe, k) another dimension's, multiplied or divided (reshapes).
Recipe = tuple


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple[int, ...]        # positions in the program (inputs first)
    attrs: tuple                 # the client's node attributes
    block: tuple[Recipe, ...]    # per dimension of the result
    # a ``size`` node counting a block's elements: the product of these dimensions' sizes
    count: tuple[Recipe, ...] = ()


@dataclass(frozen=True)
class StageProgram:
    """Inputs are positions ``0 .. len(inputs)-1``; step ``k`` is position
    ``len(inputs) + k``; ``outputs`` are positions."""
    name: str
    inputs: tuple[tuple[Recipe, ...], ...]
    dtypes: tuple[str, ...]      # of the inputs
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]

    @property
    def __name__(self) -> str:   # names the kernels (``softmax_stage0_k...``)
        return self.name

    def __call__(self, *chunks: Any) -> tuple:
        # The program builds its nodes from the blocks' sizes (reshape and broadcast targets,
        # slices, counts): its trace holds for these block sizes only, so the compiled
        # function traces each new block shape rather than re-deriving it (trace/resize.py).
        context.note_sizes_read()
        values = [t.node for t in chunks]

        def size(r: Recipe) -> int:
            if r[0] == "fixed":
                return r[1]
            if r[0] == "from":
                return values[r[1]].shape[r[2]]
            if r[0] == "times":
                return size(r[1]) * r[2]
            return size(r[1]) // r[2]

        for i, (v, recipe, dtype) in enumerate(zip(values, self.inputs, self.dtypes)):
            _check(self, f"input {i}", (v.shape, v.dtype.str),
                   (tuple(size(r) for r in recipe), dtype))
        for k, step in enumerate(self.steps):
            block = tuple(size(r) for r in step.block)
            attrs = dict(step.attrs)
            if step.op in ("reshape", "broadcast_to"):
                attrs["shape"] = block
            elif step.count:
                n = 1
                for r in step.count:
                    n *= size(r)
                attrs["value"] = np.asarray(n, dtype=attrs["dtype"]).tobytes()
            elif step.op == "slice":   # split axes are sliced whole (partition.py)
                attrs["slices"] = tuple(
                    s if r[0] == "fixed" else (0, n, 1)
                    for s, r, n in zip(attrs["slices"], step.block, block))
            node = make(step.op, [values[a] for a in step.args], **attrs)
            _check(self, f"step {k} ({step.op})", node.shape, block)
            values.append(node)
        return tuple(Tracer(values[o]) for o in self.outputs)


def _check(program: StageProgram, what: str, got: tuple, want: tuple) -> None:
    if got != want:
        raise TracearrayError(
            f"tracearray.dask: {program.name}, {what}: a block of {got} where the client's "
            f"plan expects {want} (a bug in tracearray.dask: please report it)")
