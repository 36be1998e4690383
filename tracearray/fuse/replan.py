"""A plan replayed on a graph re-derived for other input sizes (``trace/resize.py``).

The planner's choices -- which values are stored, which kernel computes each, in which role --
depend on the graph's structure and on its shapes only through equalities between them,
dimensions of 1 and extents of at most ``NESTED_REDUCTION_MAX`` elements (module docstring of
``plan.py``). A graph re-derived for another size of its class (``resize.size_class``) keeps
all of those, so its plan is the same plan with other sizes: ``skeleton`` copies it right
after planning, and ``replan`` makes it again over the new graph's nodes, with the kernels'
spaces and nested extents mapped. A kernel's expressions name no graph node and no size
(loads, parameters and reductions are numbered), so they are shared as they are; what a
kernel reads (accesses, scalar parameters) and writes is mapped node for node.
The compiled function checks the claim once per size class (``templates.py``: the second size
is planned both ways and the replay is used only when the two plans are the same).

Only kernels of the kinds whose roots and spaces follow from their nodes' shapes are
replayed (map, reduce, scan, matmul); a plan with others is planned again at every size.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..trace.graph import Graph, Node
from ..trace.resize import resize_graph
from .kexpr import Access, KernelBody, KExpr
from .plan import ExternalCall, Kernel, Plan, Store

REPLAYED_KINDS = frozenset({"map", "reduce", "scan", "matmul"})


@dataclass(frozen=True)
class KernelSkeleton:
    """A finished kernel: its choices and its expressions (which name no graph node and no
    size: loads, parameters and reductions by position), copied when it was planned."""
    kind: str
    space: tuple[int, ...]
    reduce_axes: tuple[int, ...]
    reductions: tuple[Node, ...]
    roots: tuple[Store, ...]
    stores: tuple[Store, ...]
    nodes: frozenset[Node]
    matmul: Node | None
    call: tuple[str, tuple[Node, ...], tuple, tuple[Node | None, ...]] | None
    accesses: tuple[Access, ...]
    params: tuple[Node, ...]
    space_rank: int
    nested_extents: tuple[int, ...]
    red_exprs: tuple[KExpr, ...]
    root_exprs: tuple[KExpr, ...]


@dataclass(frozen=True)
class Skeleton:
    """One plan's kernels over the nodes of its (rewritten) graph."""
    stored: frozenset[Node]
    planned_stores: frozenset[Node]
    in_place: tuple[tuple[Node, Node], ...]
    kernels: tuple[KernelSkeleton, ...]
    rejected: tuple[str, ...]
    # the plan's graph when the planner rewrote the traced graph (``rewrite.py``), else None;
    # and its notes of the rewrites
    rewritten: Graph | None
    rewrites: tuple[str, ...]


def skeleton(plan: Plan) -> Skeleton | None:
    """A copy of ``plan`` (made by ``plan_graph`` just now: runtimes may edit a plan's
    kernels later), or None when it has kernels ``replan`` does not replay."""
    if plan.planned_stores is None:
        return None
    kernels = []
    for k in plan.kernels:
        body = k.body
        if k.kind not in REPLAYED_KINDS or k.scatter is not None or body.checks or \
                body.scatter_index is not None:
            return None
        call = None if k.call is None else \
            (k.call.op, tuple(k.call.operands), tuple(k.call.attrs), tuple(k.call.results))
        kernels.append(KernelSkeleton(
            k.kind, tuple(k.space), tuple(k.reduce_axes), tuple(k.reductions), tuple(k.roots),
            tuple(k.stores), frozenset(k.nodes), k.matmul, call, tuple(body.accesses),
            tuple(body.params), body.space_rank, tuple(body.nested_extents),
            tuple(k.red_exprs), tuple(k.root_exprs)))
    return Skeleton(frozenset(plan.stored),
                    frozenset(plan.planned_stores), tuple(plan.in_place.items()),
                    tuple(kernels), tuple(plan.rejected),
                    plan.graph if plan.rewrites else None, tuple(plan.rewrites))


def replan(skel: Skeleton, graph: Graph, to: dict[int, int], new: dict[Node, Node]
           ) -> Plan | None:
    """The plan of ``graph`` -- the skeleton's graph (before its rewrites) re-derived by
    ``resize.resize_graph`` with the larger dimensions mapped by ``to``, which filled
    ``new`` (old node -> new node): the skeleton's kernels over the new graph's nodes, with
    their spaces and nested extents mapped; None when a kernel names a node the graphs do
    not have. A rewritten graph is re-derived the same way as the traced one, sharing its
    nodes, instead of being rewritten again: the rewrites decide on what a size class keeps
    (equal shapes, extents of 1), and ``templates.py`` checks the replayed plan, its graph
    included, against the planner's once per class."""
    if skel.rewritten is not None:
        graph = resize_graph(skel.rewritten, to, new)
    m = new

    def dims(shape: Sequence[int]) -> tuple[int, ...]:
        return tuple([to.get(n, n) for n in shape])

    def stores(items: Sequence[Store]) -> list[Store]:
        return [Store(m[s.node], s.index, m[s.dest], s.axis, s.offset) for s in items]

    kernels = []
    try:
        for k in skel.kernels:
            body = KernelBody(space_rank=k.space_rank, nested_extents=list(dims(k.nested_extents)))
            for acc in k.accesses:
                body.access(Access(m[acc.buffer], tuple(m[c] for c in acc.chain), acc.index))
            for p in k.params:
                body.param(m[p])
            call = None
            if k.call is not None:
                op, operands, attrs, results = k.call
                call = ExternalCall(op, tuple(m[o] for o in operands), attrs,
                                    [None if r is None else m[r] for r in results])
            kernels.append(Kernel(
                k.kind, dims(k.space), k.reduce_axes, reductions=[m[r] for r in k.reductions],
                roots=stores(k.roots), body=body, red_exprs=list(k.red_exprs),
                root_exprs=list(k.root_exprs), stores=stores(k.stores),
                nodes={m[n] for n in k.nodes}, matmul=None if k.matmul is None else m[k.matmul],
                call=call))
    except KeyError:   # a node of the plan that is not in the graph (a planner's own size)
        return None
    return Plan(graph, kernels, {m[n] for n in skel.stored},
                [_map_numbers(note, to) for note in skel.rejected],
                {m[a]: m[b] for a, b in skel.in_place}, list(skel.rewrites),
                {m[n] for n in skel.planned_stores})


_BRACKETS = re.compile(r"\[([0-9, ]*)\]")


def _map_numbers(note: str, to: dict[int, int]) -> str:
    """A planner's note (``add[4096, 300] not fused into ...``) with its shapes mapped."""
    def sub(match: Any) -> str:
        parts = [p.strip() for p in match.group(1).split(",") if p.strip()]
        return "[" + ", ".join(str(to.get(int(p), int(p))) for p in parts) + "]"
    return _BRACKETS.sub(sub, note)


def same_plan(a: Plan, b: Plan) -> bool:
    """Whether two plans of one graph are the same: kernels, what they read and store, their
    expressions (``templates.py``'s check of a replayed plan against the planner's)."""
    if a.graph.outputs != b.graph.outputs or len(a.kernels) != len(b.kernels) or \
            a.stored != b.stored or a.in_place != b.in_place or \
            a.planned_stores != b.planned_stores:
        return False
    for x, y in zip(a.kernels, b.kernels):
        if (x.kind, x.space, x.reduce_axes, x.matmul, x.scatter) != \
                (y.kind, y.space, y.reduce_axes, y.matmul, y.scatter) or \
                x.reductions != y.reductions or x.roots != y.roots or x.stores != y.stores or \
                x.nodes != y.nodes:
            return False
        if (x.call is None) != (y.call is None) or x.call is not None and (
                x.call.op, x.call.operands, x.call.attrs, x.call.results) != (
                y.call.op, y.call.operands, y.call.attrs, y.call.results):
            return False
        bx, by = x.body, y.body
        if (bx.accesses, bx.params, bx.space_rank, bx.nested_extents, bx.checks,
                bx.scatter_index) != (by.accesses, by.params, by.space_rank, by.nested_extents,
                                      by.checks, by.scatter_index):
            return False
        same: dict[int, int] = {}
        if len(x.red_exprs) != len(y.red_exprs) or len(x.root_exprs) != len(y.root_exprs) or \
                not all(_same_expr(e, f, same) for e, f in
                        zip(x.red_exprs + x.root_exprs, y.red_exprs + y.root_exprs)):
            return False
    return True


def _same_expr(a: Any, b: Any, same: dict[int, int]) -> bool:
    """Whether two kernel expressions (DAGs) are the same, shared sub-expressions shared
    alike (``same``: id of a's node -> id of b's, for those found equal)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if id(x) in same:
            if same[id(x)] != id(y):
                return False
            continue
        if type(x) is not type(y):
            return False
        fields = [f for f in x.__dataclass_fields__]
        for f in fields:
            u, v = getattr(x, f), getattr(y, f)
            if f in ("args",):
                if len(u) != len(v):
                    return False
                stack.extend(zip(u, v))
            elif f in ("expr", "bound"):
                stack.append((u, v))
            elif u != v:
                return False
        same[id(x)] = id(y)
    return True


__all__ = ["Skeleton", "skeleton", "replan", "same_plan"]
