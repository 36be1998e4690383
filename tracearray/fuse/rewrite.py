"""Graph rewrites the planner applies first: identities that save a pass over memory.

One rewrite today, the **centred sum of squares**. NumPy's variance (``np.var``, ``np.std``
and the same thing written out, ``d = x - x.mean(); (d * d).mean()``) is two passes: the
mean, then the squared deviations from it. When the reduction runs over every axis, the second
pass cannot share the first one's kernel (the mean is known only once every thread has
finished), so the data is read from memory twice. With ``K`` any element of ``x`` (constant
along the reduced axes: the first one), ``y = x - K`` and ``d = c - K``, the identity

    Σ (x - c)² = Σ y² - 2 d Σ y + n d²  =  Σ y² + d (n d - 2 Σ y)

holds for every ``c`` constant along the reduced axes (here: the mean the user computed, with
its own rounding), and ``Σ y``, ``Σ y²`` do not depend on ``c``: they are summed in the same
pass as the mean. They are summed in float64 for float16/float32 data, so the cancellation of
the right-hand side costs nothing a float32 result can see: with ``K`` an element of the data,
``(K - mean)² <= Σ (x - mean)²``, the terms on the right are at most about ``n + 1`` times
the result, and ``n · 2^-53`` stays far below float32's rounding for any array that fits in
memory. The result is then at least as accurate as NumPy's (whose every term (x - c)² is
rounded twice in float32), within the comparator's sum bound, and never negative (the exact
value is not: clamped at 0, NaN kept). Float64 data keeps the two passes: there the shifted
form could be less accurate than NumPy's.

Only full reductions are rewritten: a row reduction's second pass reads the row from the
block's cache (GPU) or the core's (CPU), where three float64 sums cost more than they save.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import numpy as np

from ..ops import OPS, Kind, infer
from ..trace.build import size_scalar
from ..trace.graph import Graph, Node, any_ancestor

F64 = np.dtype(np.float64)
_NARROW = (np.dtype(np.float16), np.dtype(np.float32))
# ancestors of the centre examined for a reduction of the same data (graphs are small; a
# bound keeps a pathological one linear)
_ANCESTOR_BUDGET = 256


def rewrite_graph(graph: Graph, notes: list[str] | None = None) -> Graph:
    """``graph`` with every rewrite applied (the same object when none applies). A rewritten
    node's replacement takes its user line (run-time errors name it); ``notes`` gets a line
    per rewrite for ``explain()``."""
    subst: dict[Node, Node] = {}
    locations = graph.locations or {}
    added: dict[Node, str] = {}
    seen: set[Node] = set()
    for orig in graph.nodes():
        node = orig
        if any(a in subst for a in node.args):   # an operand was rewritten: rebuild
            node = Node.make(node.op, [subst.get(a, a) for a in node.args], node.attrs,
                             node.shape, node.dtype)
            subst[orig] = node
        made = _centred_square_sum(node)
        if made is not None:
            subst[orig] = node = made
            if notes is not None:
                where = (locations.get(orig) or "").split("\n")[0]
                notes.append("the sum of squared deviations" + (f" at {where}" if where else "")
                             + " is summed in the pass of its centre (one read of the data)")
        if node is not orig and orig in locations:
            # the new nodes (and unlocated old ones) take the line of the first rewritten
            # node they feed; each node is visited once over the whole loop
            stack = [node]
            while stack:
                n = stack.pop()
                if n in seen:
                    continue
                seen.add(n)
                if n not in locations:
                    added[n] = locations[orig]
                stack.extend(n.args)
    if not subst:
        return graph
    return replace(graph, outputs=tuple(subst.get(o, o) for o in graph.outputs),
                   locations={**locations, **added})


def _make(op: str, args: Iterable[Node], **attrs) -> Node:
    args = tuple(args)
    shape, dtype = infer(op, args, attrs)
    return Node.make(op, args, attrs, shape, dtype)


def _cast(node: Node, dtype: np.dtype) -> Node:
    return node if node.dtype == dtype else _make("cast", [node], dtype=np.dtype(dtype).str)


def _centred_square_sum(node: Node) -> Node | None:
    """``sum((x - c)²)`` over every axis of ``x``, with ``c`` computed from a reduction of
    ``x`` (so: a second pass), as the one-pass form of the module's identity; else None."""
    if node.op != "sum" or len(node.args) != 1 or set(dict(node.attrs)) != {"axes", "dtype"}:
        return None
    (sq,) = node.args
    axes = tuple(node.attr("axes"))
    if sq.dtype not in _NARROW or node.dtype != sq.dtype or axes != tuple(range(sq.ndim)):
        return None
    n = int(np.prod(sq.shape, dtype=np.int64))
    if n < 2:
        return None
    if sq.op == "square":
        (s,) = sq.args
    elif sq.op == "multiply" and sq.args[0] is sq.args[1]:
        s = sq.args[0]
    else:
        return None
    if s.op != "subtract" or s.shape != sq.shape or s.dtype != sq.dtype:
        return None
    for x, c in (s.args, s.args[::-1]):
        if x.shape == s.shape and c.size == 1 and _reduces(c, x):
            break
    else:
        return None
    dt = s.dtype

    def wide(v: Node) -> Node:   # NumPy's value in the subtraction's dtype, then float64
        return _cast(_cast(v, dt), F64)
    first = _make("slice", [x], slices=((0, 1, 1),) * x.ndim)
    k = wide(first)
    y = _make("subtract", [wide(x), k])
    s1 = _make("sum", [y], axes=axes, dtype=F64.str)
    s2 = _make("sum", [_make("multiply", [y, y])], axes=axes, dtype=F64.str)
    d = _make("subtract", [wide(c), k])
    count = size_scalar(float(n), F64, sq.shape)
    two = size_scalar(2.0, F64)
    inner = _make("subtract", [_make("multiply", [count, d]), _make("multiply", [two, s1])])
    total = _make("add", [s2, _make("multiply", [d, inner])])
    total = _make("maximum", [total, size_scalar(0.0, F64)])   # ≥ 0 exactly; NaN stays NaN
    out = _cast(total, node.dtype)
    return out if out.shape == node.shape else None


def _reduces(c: Node, x: Node) -> bool:
    """Whether ``c`` is computed from a reduction whose operand is computed from ``x`` (no
    when the graph is too large to tell: the rewrite is only an optimisation)."""
    def reduction_of_x(n: Node) -> bool:
        return OPS[n.op].kind is Kind.REDUCE and \
            any_ancestor(n.args[0], lambda m: m is x, _ANCESTOR_BUDGET) is True
    return any_ancestor(c, reduction_of_x, _ANCESTOR_BUDGET) is True
