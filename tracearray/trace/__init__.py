"""Stage 1 of the pipeline: run the user's function on tracers and record a ``Graph``.

Entry function: ``trace_function(fn, args, kwargs, static)``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from . import pytree
from .build import check_dtype, constant
from .errors import (ConcretizationError, InputError, TracearrayError, TraceDTypeError,
                     TraceShapeError, UnsupportedOperationError)
from .graph import Graph, Node, format_graph
from .tracer import Tracer
from .verify import verify

__all__ = ["trace_function", "Graph", "Node", "Tracer", "format_graph", "verify", "is_array_leaf",
           "TracearrayError", "ConcretizationError", "UnsupportedOperationError",
           "TraceShapeError", "TraceDTypeError", "InputError"]


def is_array_leaf(x: Any) -> bool:
    """Arguments traced as arrays: NumPy arrays and scalars, and anything exposing the
    array interfaces (device arrays). Python scalars are static values, as in NumPy they are
    weakly typed and their value can matter to the result dtype."""
    return isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "__cuda_array_interface__")


def _arg_names(fn: Callable, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[-1].kind is params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}[{i - len(params) + 1}]")
        else:
            names.append(f"arg{i}")
    return names


def trace_function(fn: Callable, args: tuple, kwargs: dict, static_argnums: frozenset[int],
                   static_argnames: frozenset[str]) -> Graph:
    """Trace ``fn(*args, **kwargs)``: array leaves of non-static arguments become graph inputs
    (by shape and dtype); everything else is passed to ``fn`` unchanged."""
    names = _arg_names(fn, len(args))
    inputs: list[Node] = []

    def make_input(value: Any, name: str) -> Tracer:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value) \
            if isinstance(value, np.generic) else value
        dtype = check_dtype(arr.dtype, f"argument {name!r}")
        node = Node.make("input", (), {"index": len(inputs), "name": name,
                                       "shape": tuple(arr.shape), "dtype": dtype.str},
                         arr.shape, dtype)
        inputs.append(node)
        input_names.append(name)
        return Tracer(node, alias=name)   # the caller's array: no in-place updates

    input_names: list[str] = []

    def substitute(value: Any, name: str) -> Any:
        leaves, tree = pytree.flatten(value, is_array_leaf)
        if len(leaves) == 1 and tree == ("leaf",):
            return make_input(value, name)
        return pytree.unflatten(tree, [make_input(v, f"{name}[{i}]")
                                       for i, v in enumerate(leaves)])

    t_args = tuple(a if i in static_argnums else substitute(a, names[i])
                   for i, a in enumerate(args))
    t_kwargs = {k: v if k in static_argnames else substitute(v, k) for k, v in kwargs.items()}
    result = fn(*t_args, **t_kwargs)

    def is_out_leaf(x: Any) -> bool:
        return isinstance(x, (Tracer, np.ndarray, np.generic))

    leaves, out_tree = pytree.flatten(result, is_out_leaf)
    outputs = tuple(leaf.node if isinstance(leaf, Tracer) else constant(leaf) for leaf in leaves)
    graph = Graph(tuple(inputs), outputs, out_tree, tuple(input_names))
    verify(graph)
    return graph
