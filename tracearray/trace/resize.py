"""A traced graph re-derived for other input sizes, without running the function again.

Kernels are size-generic already (every size is a run-time parameter); what a new input size
used to cost was the trace, the plan and the executable of a graph that differs from the last
one only in its sizes. For graphs where that is provably so, this module makes the graph of
the new sizes from the old one, node by node (``resize_graph``), and ``fuse/replan.py`` does the
same for the plan: a new size costs about a tenth of a trace (issue 12).

When a graph may be re-derived
------------------------------
Input sizes are classed (``size_class``): a dimension of at most ``EXACT_DIMS`` elements is part
of the class as its number (0, 1 and small extents change broadcasting, emptiness and the
planner's small-extent choices), a larger one by which earlier larger dimensions it equals.
Two calls of one class differ only in the values of the larger dimensions, and the map from
old values to new ones (``sigma``) is one-to-one and keeps every equality between them.

The graph of one call of the class holds for another when

1. the function did nothing whose effect depends on the sizes (``Trace.size_dependence``): it
   read no size as a Python number (``x.shape``, ``len(x)``, ``x.size``, iterating, NumPy's
   own Python code reading them: ``Tracer`` notes every such read); it gave no integer to a
   parameter that may be compared with a size (a shape, a slice bound, a repeat count:
   ``context.note_integer_arguments`` and ``note_index_key``; ``x.reshape(23)`` of a
   23-element array, or ``x[:100]`` of a shorter one, leaves nothing in the graph, yet means
   something else at other sizes); no size depends on the data; it assigned no global;
2. every node (``_node_reason``) is an input, a 0-d constant, a size count that records its
   dimensions (``build.size_scalar``), or an operation whose result shape its operands' shapes
   decide (``GENERIC_RULES``: elementwise, reductions, scans, matmul, transpose, squeeze,
   expand_dims) with attributes that hold no sizes (``GENERIC_ATTRS``);
3. every dimension of every node is small or one of the inputs' larger dimensions. With (2)
   this holds by induction (those rules copy their operands' dimensions or make 1s); it is
   checked anyway, since ``sigma`` maps numbers, and a number that merely equals an input's
   dimension (a sum, a literal) must not be mapped.

Then every node of the new graph is the old node with its shape mapped by ``sigma`` (and a
size count recomputed from its mapped dimensions): nothing the trace decided depended on a
larger dimension's value, only on the equalities ``sigma`` keeps. The compiled function also
checks the claim once per class (``templates.py``): the second size of a class is traced as
well, and the derivation is used only if it gives the very nodes the trace gave (nodes are
interned, so this is an identity test of the whole graph). ``tests/test_resize.py`` checks it
over every registry entry and random programs.
"""
from __future__ import annotations

import math
from typing import Sequence

from ..ops import OPS, Kind
from ..ops import rules
from .build import size_scalar
from .graph import Graph, Node

# Dimensions up to this many elements are part of a size class by their number.
EXACT_DIMS = 16

# Shape rules under which an operation's result dimensions are its operands' (or 1).
GENERIC_RULES = frozenset({rules.broadcast_shape, rules.same_shape, rules.reduce_shape,
                           rules.transpose_shape, rules.squeeze_shape, rules.expand_shape,
                           rules.matmul_shape})

# Attributes of those operations that are known to hold no sizes (axes, permutations,
# dtypes, reduction details); a node with any other attribute is not re-derived.
GENERIC_ATTRS = frozenset({"axes", "axis", "perm", "dtype", "keepdims", "initial", "casting"})


def size_class(shapes: Sequence[tuple[int, ...]]) -> tuple[tuple, tuple[int, ...]]:
    """The size class of these input shapes and the larger dimensions' values, one per
    class member, in order of first appearance (what ``sigma`` maps)."""
    first: dict[int, int] = {}
    codes = []
    for shape in shapes:
        row = []
        for n in shape:
            if n <= EXACT_DIMS:
                row.append(n)
            else:
                c = first.get(n)
                if c is None:
                    c = first[n] = -1 - len(first)   # (negative: never a dimension)
                row.append(c)
        codes.append(tuple(row))
    return tuple(codes), tuple(first)


def sigma(old: Sequence[int], new: Sequence[int]) -> dict[int, int]:
    """The map from one call's larger dimensions to another's of the same class."""
    return dict(zip(old, new))


def resizable(graph: Graph, size_dependence: str | None, larger: Sequence[int]
              ) -> str | None:
    """Why ``graph`` (traced at input sizes whose larger dimensions are ``larger``) may not
    be re-derived for other sizes of its class; None when it may (module docstring)."""
    if size_dependence is not None:
        return size_dependence
    if graph.checks:
        return "the graph has run-time checks (their messages name sizes)"
    known = frozenset(larger)
    for node in graph.nodes():
        reason = _node_reason(node, known)
        if reason is not None:
            return reason
    return None


def _node_reason(node: Node, larger: frozenset[int]) -> str | None:
    for n in node.shape:
        if n > EXACT_DIMS and n not in larger:
            return f"{node.op} has a dimension ({n}) that is not an input's"
    op = node.op
    if op == "input":
        return None
    if op == "size":
        count = node.attr("count")
        if count is not None and any(n > EXACT_DIMS and n not in larger for n in count[0]):
            return "a size counts a dimension that is not an input's"
        return None
    spec = OPS[op]
    if spec.kind is Kind.SOURCE:
        return None if op == "constant" and not node.shape else \
            f"{op} of shape {node.shape} (an array made from numbers)"
    if spec.shape_rule not in GENERIC_RULES:
        return f"{op} (its result shape is not its operands')"
    for name, _value in node.attrs:
        if name not in GENERIC_ATTRS:
            return f"{op} has the attribute {name!r}"
    return None


def resize_graph(graph: Graph, to: dict[int, int], new: dict[Node, Node] | None = None
                 ) -> Graph:
    """``graph`` re-derived with every larger dimension ``n`` replaced by ``to[n]`` (its
    ``nodes()`` in the same order as the old graph's). The graph must be ``resizable``.
    ``new``: old node -> new node, filled here; a node already in it is not made again (a
    second graph sharing nodes with the first costs only its own nodes)."""
    def dims(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple([to.get(n, n) for n in shape])

    def input_node(node: Node) -> Node:
        shape = dims(node.shape)
        attrs = tuple((k, shape if k == "shape" else v) for k, v in node.attrs)
        return Node.make("input", (), attrs, shape, node.dtype)

    if new is None:
        new = {}
    out: list[Node] = []
    for node in graph.nodes():
        n = new.get(node)
        if n is not None:
            pass
        elif node.args:
            n = node.resized(tuple([new[a] for a in node.args]), dims(node.shape))
        elif node.op == "input":
            n = input_node(node)
        elif node.op == "size" and node.attr("count") is not None:
            counted, less = node.attr("count")
            counted = dims(counted)
            n = size_scalar(max(math.prod(counted) - less, 0), node.dtype, counted, less)
        else:   # a 0-d constant or a size that is no count: the same number at every size
            n = node
        new[node] = n
        out.append(n)
    for node in graph.inputs:   # (an argument the results do not read)
        if node not in new:
            new[node] = input_node(node)
    locations = graph.locations or {}
    derived = Graph(tuple(new[i] for i in graph.inputs), tuple(new[o] for o in graph.outputs),
                    graph.out_tree, graph.input_names, graph.checks, graph.globals,
                    {new[k]: v for k, v in locations.items() if k in new}, graph.updates,
                    graph.readonly_results, graph.python_results, graph.same_results)
    object.__setattr__(derived, "_order", tuple(out))
    return derived


__all__ = ["EXACT_DIMS", "size_class", "sigma", "resizable", "resize_graph"]
