"""A kernel's description: the text of everything ``lower_kernel`` reads, and nothing else.

``describe_kernel(geometry, name)`` is a key for the kernel's LLVM IR that is computed without
generating it (issue 12): two calls that describe the same text get the same IR, so a cache
keyed by it can skip ``lower_kernel`` (a disk hit in a new process, or a new input size whose
kernels are the same size-generic kernels). What goes in, and why it is enough:

- the loop structure, in loop dims (``Geometry``: strategy, rank, which dims are reduced,
  parallel and inner, which loop dims each access and store strides over, the strides built
  into the code, tiles, built-in nested extents) and the kernel's kind - not the space dims
  each loop dim merges: the lowering reads those only through ``loop_dim_of`` (below), so a
  contiguous (40, 30) and (2, 1, 3, 4) map are the same flat loop, as their IR is;
- every expression (``KExpr``) as a DAG, shared sub-expressions numbered as shared, since the
  lowering evaluates each object once (``KernelLowering.ev`` memoises by identity): ops, operand
  and result dtypes, nested reductions' variables (numbered after the space, as
  ``nested_loop_dim`` reads them), loaded indices' modes and check numbers;
- accesses and stores: the dtype the lowering loads or stores and the indices their affine
  index loads from data, in slot order (``loaded_indices``; which loop dims it strides over is
  the geometry's);
- graph nodes by identity where the lowering compares them (is a store's node a root or a
  reduction), with op and dtype; reductions with their operand's dtype and the loop dim of
  their first axis (an arg-reduction's position), the scatter node with its combining ufunc
  and loop; the scalar parameters' dtypes; the number of bounds checks;
- the kernel's name (its function's: ``code_identity`` names the code's functions after it and
  a digest of the description) and the math library's class.

What is left out is what only the run-time parameter array holds (``tile/layout.fill_params``):
sizes, strides, offsets and constants' values - the coefficients and constant terms of affine
indices, the extents of the space and of nested loops longer than ``NESTED_UNROLL_MAX``, the view
chains of accesses, concatenation offsets. So a new size describes the same text.

``tests/test_kernel_keys.py`` checks the claim over the op registry's programs and the
benchmark workloads at several sizes (equal descriptions, identical IR) and one component at a
time (each thing the IR depends on changes the description); ``TRACEARRAY_CHECK_KERNEL_KEYS=1``
makes the CPU backend check it at run time. The code that turns a description into IR is part
of the key through the pipeline digest (``tracearray.cpu.host.pipeline_digest``), which covers
this package, ``ops/``, ``tile/`` and ``fuse/``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..fuse.index import Aff, loaded_indices
from ..fuse.kexpr import KIndex, KLoad, KNested, KOp, KParam, KRed
from .geometry import Geometry
from ..trace.graph import Node

DESCRIPTION_FORMAT = 1


def code_identity(geometry: Geometry, base: str, math: str = "CpuMath") -> tuple[str, str]:
    """(description, symbol) of a kernel of the function ``base`` names: described under
    that name (the same for all of a function's kernels), its functions named ``base`` and a
    digest of the description. Identical kernels of one function (a loop's steps, unrolled
    by the trace) are then one key and one piece of code, compiled once; the symbol, a
    function of the description, is what the code defines under that key."""
    import hashlib
    text = describe_kernel(geometry, base, math)
    return text, f"{base}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def describe_kernel(geometry: Geometry, name: str, math: str = "CpuMath") -> str:
    """The description text of ``lower_kernel(geometry, math, name)``'s input (module doc)."""
    memo = geometry.kernel.descriptions
    if memo is None:
        return _Describer().kernel(geometry, name, math)
    key = (_loops(geometry), geometry.groups, name, math)
    text = memo.known(key)
    if text is None:
        text = _Describer().kernel(geometry, name, math)
        memo.note(key, text)
    return text


class DescriptionMemo:
    """The descriptions of one planned kernel and of the same kernel re-derived for other
    sizes (``templates.py``), by everything a description reads besides the kernel's
    expressions: its loop structure (``Geometry``), name and math library. A re-derived
    kernel's expressions are the planned one's with other sizes, which descriptions leave
    out (module docstring), so one text serves every size; that is trusted for a loop
    structure only once two kernels of it, described in full, gave the same text (a
    mismatch, a tracearray bug, stops the memo for good)."""

    def __init__(self) -> None:
        self._texts: dict[Any, str] = {}
        self._checked: set[Any] = set()
        self.broken = False

    def known(self, key: Any) -> str | None:
        """The text for ``key`` when it was checked, else None (describe the kernel)."""
        return self._texts[key] if key in self._checked and not self.broken else None

    def note(self, key: Any, text: str) -> None:
        """A text described in full for ``key``."""
        seen = self._texts.get(key)
        if seen is None:
            self._texts[key] = text
        elif seen == text:
            self._checked.add(key)
        else:
            self.broken = True


class _Describer:
    def __init__(self) -> None:
        self.nodes: dict[int, int] = {}       # id(graph node) -> its number
        self.exprs: dict[int, int] = {}       # id(KExpr) -> its number
        self.lines: list[str] = []            # expression table, in post-order
        self._keep: list[Any] = []            # objects numbered (ids stay unique meanwhile)
        self.space_rank = 0

    # ------------------------------------------------------------------ the kernel
    def kernel(self, geo: Geometry, name: str, math: str) -> str:
        k = geo.kernel
        body = k.body
        self.space_rank = len(k.space)
        # the loop structure in loop dims (not the space dims they merge: a contiguous
        # (40, 30) and (2, 1, 3, 4) map are the same one flat loop)
        loops = _loops(geo)
        head = [
            f"tracearray kernel description {DESCRIPTION_FORMAT}",
            f"name {name!r} math {math}",
            f"kind {k.kind} loops {loops!r}",
            f"checks {len(body.checks)}",
            "params " + " ".join(_dt(p.dtype) for p in body.params),
        ]
        for acc in body.accesses:
            head.append(f"access {_dt(acc.top.dtype)} {self.index(acc.index)}")
        for red in k.reductions:
            axes = red.attr("axes") if any(a == "axes" for a, _v in red.attrs) else ()
            position = geo.loop_dim_of(axes[0]) if axes else None
            head.append(f"reduction {self.node(red)} of {_dt(red.args[0].dtype)} "
                        f"position in loop dim {position}")
        if k.scatter is not None:
            head.append(f"scatter {self.node(k.scatter)} combine {k.scatter.attr('combine')!r} "
                        f"loop {_plain(k.scatter.attr('loop'))!r}")
        for what, stores in (("root", k.roots), ("store", k.stores)):
            for st in stores:
                head.append(f"{what} {self.node(st.node)} -> {_dt(st.dest.dtype)} "
                            f"{self.index(st.index)}")
        head.append("red_exprs " + " ".join(self.expr(e) for e in k.red_exprs))
        head.append("root_exprs " + " ".join(self.expr(e) for e in k.root_exprs))
        return "\n".join(head + self.lines) + "\n"

    # ------------------------------------------------------------------ parts
    def node(self, node: Node) -> str:
        """A graph node by identity: its number, op and dtype (not its shape)."""
        n = self.nodes.get(id(node))
        if n is None:
            n = self.nodes[id(node)] = len(self.nodes)
            self._keep.append(node)
        return f"n{n}:{node.op}:{_dt(node.dtype)}"

    def index(self, index: tuple[Aff, ...]) -> str:
        """The indices an affine index loads from data, in the order they get parameter
        slots (``loaded_indices``); which loop dims it uses is the geometry's, and the
        coefficients and constants are run-time parameters."""
        return "[" + " ".join(self.expr(x) for x in loaded_indices(index)) + "]"

    def expr(self, e: Any) -> str:
        """``#n``: the expression's number in the table (added, operands first, if new)."""
        known = self.exprs.get(id(e))
        if known is not None:
            return f"#{known}"
        stack = [(e, False)]
        while stack:
            x, ready = stack.pop()
            if id(x) in self.exprs:
                continue
            operands = _operands(x)
            if not ready and any(id(c) not in self.exprs for c in operands):
                stack.append((x, True))
                stack.extend((c, False) for c in operands if id(c) not in self.exprs)
                continue
            self.exprs[id(x)] = len(self.exprs)
            self._keep.append(x)
            self.lines.append(f"#{self.exprs[id(x)]} = {self.one(x)}")
        return f"#{self.exprs[id(e)]}"

    def one(self, e: Any) -> str:
        """One expression, its operands already numbered."""
        if isinstance(e, KOp):   # (the commonest: its operands' numbers read directly)
            num = self.exprs
            return (f"{e.op}({' '.join(f'#{num[id(a)]}' for a in e.args)}) "
                    f"{','.join(_dt(d) for d in e.in_dtypes)} -> {_dt(e.dtype)}")
        if isinstance(e, KLoad):
            return f"load {e.access} {_dt(e.dtype)}"
        if isinstance(e, KParam):
            return f"param {e.param} {_dt(e.dtype)}"
        if isinstance(e, KRed):
            return f"red {e.reduction} {_dt(e.dtype)}"
        if isinstance(e, KNested):
            nested = tuple(v - self.space_rank for v in e.vars)   # (nested_loop_dim)
            return (f"nested {e.op}({self.expr(e.expr)}) vars {nested!r} "
                    f"{_dt(e.in_dtype)} -> {_dt(e.dtype)}")
        if isinstance(e, KIndex):
            return (f"index({self.expr(e.expr)} bound {self.expr(e.bound)}) {e.mode} "
                    f"check {e.check} {_dt(e.dtype)}")
        raise TypeError(f"tracearray: no description of kernel expression {type(e).__name__}")


def _loops(geo: Geometry) -> tuple:
    """The loop structure, in loop dims (module docstring)."""
    return (geo.strategy, geo.rank, geo.reduced, geo.par_dims, geo.inner_dims, geo.load_uses,
            geo.store_uses, geo.load_vstrides, geo.store_vstrides, geo.tile, geo.nested_extents)


def _operands(e: Any) -> tuple:
    if isinstance(e, KOp):
        return tuple(e.args)
    if isinstance(e, KNested):
        return (e.expr,)
    if isinstance(e, KLoad):   # (a gather's indices are part of its access, described first)
        return ()
    if isinstance(e, KIndex):
        return (e.expr, e.bound)
    return ()


_DTYPE_TEXT: dict[Any, str] = {}


def _dt(dtype: Any) -> str:
    text = _DTYPE_TEXT.get(dtype)
    if text is None:
        text = _DTYPE_TEXT[dtype] = np.dtype(dtype).str
    return text


def _plain(v: Any) -> Any:
    if isinstance(v, np.dtype):
        return v.str
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    return v
