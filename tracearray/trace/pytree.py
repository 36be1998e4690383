"""Flattening of nested tuples, lists and dicts (arguments and return values)."""
from __future__ import annotations

from typing import Any, Callable

# A tree definition (hashable: it is part of cache keys): ("leaf",), ("tuple", children),
# ("list", children), ("dict", keys, children) or ("const", value) for non-array leaves kept as they are.
TreeDef = tuple


def flatten(x: Any, is_leaf: Callable[[Any], bool]) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []
    return leaves, _define(x, is_leaf, leaves)


def _define(v: Any, is_leaf: Callable[[Any], bool], leaves: list[Any]) -> TreeDef:
    # Module-level recursion (no self-referencing closure, hence no reference cycle holding
    # the leaves alive until the garbage collector runs).
    if is_leaf(v):
        leaves.append(v)
        return ("leaf",)
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return ("tuple", tuple(_define(c, is_leaf, leaves) for c in v))
    if isinstance(v, list):
        return ("list", tuple(_define(c, is_leaf, leaves) for c in v))
    if isinstance(v, dict):
        keys = tuple(v)
        return ("dict", keys, tuple(_define(v[k], is_leaf, leaves) for k in keys))
    return ("const", v)


def unflatten(tree: TreeDef, leaves: list[Any]) -> Any:
    return _build(tree, iter(leaves))


def _build(t: TreeDef, it: Any) -> Any:
    # A module-level function, not a closure over the iterator: a recursive closure is a
    # reference cycle that would keep the returned arrays (device memory too) alive until
    # the garbage collector runs.
    kind = t[0]
    if kind == "leaf":
        return next(it)
    if kind == "tuple":
        return tuple(_build(c, it) for c in t[1])
    if kind == "list":
        return [_build(c, it) for c in t[1]]
    if kind == "dict":
        return {k: _build(c, it) for k, c in zip(t[1], t[2])}
    return t[1]
