"""The graph verifier: every node names a registered op, has the operands the op's
``operand_dtypes`` promise, and carries the shape and dtype the op's rules give for its
operands. Run on every traced graph (cheap: one pass)."""
from __future__ import annotations

import numpy as np

from .graph import Graph, Node, type_str
from ..ops import OPS, Kind, infer


class GraphVerificationError(AssertionError):
    pass


def verify(graph: Graph) -> None:
    for i, node in enumerate(graph.nodes()):
        try:
            _verify_node(node)
        except GraphVerificationError as e:
            raise GraphVerificationError(f"node {i} ({node.op} {type_str(node)}): {e}") from None
        except Exception as e:  # a rule that cannot even run on this node: reject, don't crash
            raise GraphVerificationError(f"node {i} ({node.op} {type_str(node)}): "
                                         f"{type(e).__name__}: {e}") from None
    for j, node in enumerate(graph.inputs):
        if node.op != "input" or node.attr("index") != j:
            raise GraphVerificationError(f"input {j}: {node!r} is not input #{j}")


# (op, operand dtypes, attributes, rank, dtype) of the nodes whose checks that read nothing else
# have passed: a new size of a function traces the same kinds of node again (bounded: cleared
# when full)
_PASSED: set[tuple] = set()
_PASSED_MAX = 4096


def _verify_node(node: Node) -> None:
    # (messages name the node only when one is raised: verify() adds which, and where)
    try:
        static = (node.op, tuple(a.dtype for a in node.args), node.attrs, node.ndim, node.dtype)
        known = static in _PASSED
    except TypeError:    # an unhashable attribute: checked every time
        static, known = None, False
    if not known:
        _verify_static(node)
        if static is not None:
            if len(_PASSED) >= _PASSED_MAX:
                _PASSED.clear()
            _PASSED.add(static)
    if node.ruled:   # made by trace.build.make, from these very rules
        return
    shape, dtype = infer(node.op, node.args, dict(node.attrs))
    if tuple(shape) != node.shape or np.dtype(dtype) != node.dtype:
        raise GraphVerificationError(
            f"rules give {np.dtype(dtype)}{list(shape)}")


def _verify_static(node: Node) -> None:
    """The checks of a node that read only its op, operand dtypes, attributes and rank."""
    spec = OPS.get(node.op)
    if spec is None:
        raise GraphVerificationError("unknown op")
    if spec.arity >= 0 and len(node.args) != spec.arity:
        raise GraphVerificationError(
            f"expects {spec.arity} operands, has {len(node.args)}")
    attrs = dict(node.attrs)
    if spec.kind is Kind.REDUCE:
        axes = attrs.get("axes")
        if axes != tuple(sorted(set(axes))) or any(not 0 <= a < node.ndim for a in axes):
            raise GraphVerificationError(f"bad axes {axes}")
    if spec.kind is Kind.ELEMENTWISE and spec.ufunc is not None:
        loop = spec.ufunc.resolve_dtypes(tuple(a.dtype for a in node.args) + (None,))
        if tuple(loop[:-1]) != tuple(a.dtype for a in node.args):
            raise GraphVerificationError(
                f"operands {[str(a.dtype) for a in node.args]} are not the "
                f"ufunc loop's input dtypes {[str(d) for d in loop[:-1]]}")
    # The tracer casts operands before these ops, so lowerings never convert: check it.
    if spec.operand_dtypes is not None:
        want = spec.operand_dtypes(node)
        if tuple(a.dtype for a in node.args) != want:
            raise GraphVerificationError(
                f"operands {[str(a.dtype) for a in node.args]}, expected "
                f"{[str(d) for d in want]}")
