"""Flattening of nested tuples, lists and dicts (arguments and return values)."""
from __future__ import annotations

from typing import Any, Callable

# A tree definition (hashable: it is part of cache keys): ("leaf",), ("tuple", children),
# ("list", children), ("dict", keys, children) or ("const", value) for non-array leaves kept as they are.
TreeDef = tuple


def flatten(x: Any, is_leaf: Callable[[Any], bool]) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []

    def go(v: Any) -> TreeDef:
        if is_leaf(v):
            leaves.append(v)
            return ("leaf",)
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return ("tuple", tuple(go(c) for c in v))
        if isinstance(v, list):
            return ("list", tuple(go(c) for c in v))
        if isinstance(v, dict):
            keys = tuple(v)
            return ("dict", keys, tuple(go(v[k]) for k in keys))
        return ("const", v)

    return leaves, go(x)


def unflatten(tree: TreeDef, leaves: list[Any]) -> Any:
    it = iter(leaves)

    def go(t: TreeDef) -> Any:
        kind = t[0]
        if kind == "leaf":
            return next(it)
        if kind == "tuple":
            return tuple(go(c) for c in t[1])
        if kind == "list":
            return [go(c) for c in t[1]]
        if kind == "dict":
            return {k: go(c) for k, c in zip(t[1], t[2])}
        return t[1]

    return go(tree)
