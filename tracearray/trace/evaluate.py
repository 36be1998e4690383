"""A NumPy evaluator of graphs: each node computed by its op table reference.

For tests and for explicit debugging (``compile(..., device="numpy-eval")`` is not a thing: call
``evaluate_graph`` yourself). The compile path never runs through it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .graph import Graph, Node
from ..ops import OPS, Kind


def evaluate_graph(graph: Graph, inputs: Sequence[Any]) -> list[np.ndarray]:
    """Values of ``graph.outputs`` for the given input arrays (one per graph input)."""
    values: dict[Node, np.ndarray] = {}
    for node, value in zip(graph.inputs, inputs):
        values[node] = np.asarray(value)
    with np.errstate(all="ignore"):
        for node in graph.nodes():
            if node in values:
                continue
            spec = OPS[node.op]
            attrs = dict(node.attrs)
            if spec.kind is Kind.SOURCE:
                values[node] = spec.numpy_ref(**attrs)
                continue
            args = [values[a] for a in node.args]
            if spec.ufunc is not None:
                out = spec.ufunc(*args)
            else:
                out = spec.numpy_ref(*args, **attrs)
            values[node] = np.asarray(out).astype(node.dtype, copy=False).reshape(node.shape)
    return [values[o] for o in graph.results]
