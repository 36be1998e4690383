"""Flattening of nested containers (arguments and return values): the one pytree mechanism.

Containers are tuples, lists, dicts, namedtuples and dataclass instances; anything else is a
leaf when ``is_leaf`` says so and a constant kept as it is otherwise. Namedtuples and
dataclasses are rebuilt as the same type, so a function returning ``Result(mean=..., var=...)``
returns a ``Result`` of arrays, never one holding the tracers of its trace.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

# A tree definition (hashable: it is part of cache keys):
#   ("leaf",)
#   ("tuple", children) / ("list", children)
#   ("dict", keys, children)
#   ("namedtuple", type, children)
#   ("dataclass", type, names, children): every field, in declaration order
#   ("const", value): a non-array leaf kept as it is
#   ("input", i): the caller's object behind graph input i (a Generator argument returned)
#   ("complex", dtype): a leaf computed as its interleaved real pair array (..., 2), viewed
#                       as that complex dtype when the tree is rebuilt (interleaved.py)
TreeDef = tuple


def flatten(x: Any, is_leaf: Callable[[Any], bool]) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []
    return leaves, _define(x, is_leaf, leaves)


def is_namedtuple(v: Any) -> bool:
    return isinstance(v, tuple) and hasattr(type(v), "_fields")


def is_dataclass_instance(v: Any) -> bool:
    return dataclasses.is_dataclass(v) and not isinstance(v, type)


def _define(v: Any, is_leaf: Callable[[Any], bool], leaves: list[Any]) -> TreeDef:
    # Module-level recursion (no self-referencing closure, hence no reference cycle holding
    # the leaves alive until the garbage collector runs).
    if is_leaf(v):
        leaves.append(v)
        return ("leaf",)
    if is_namedtuple(v):
        return ("namedtuple", type(v), tuple(_define(c, is_leaf, leaves) for c in v))
    if isinstance(v, tuple):
        return ("tuple", tuple(_define(c, is_leaf, leaves) for c in v))
    if isinstance(v, list):
        return ("list", tuple(_define(c, is_leaf, leaves) for c in v))
    if isinstance(v, dict):
        keys = tuple(v)
        return ("dict", keys, tuple(_define(v[k], is_leaf, leaves) for k in keys))
    if is_dataclass_instance(v):
        names = tuple(f.name for f in dataclasses.fields(v))
        return ("dataclass", type(v), names,
                tuple(_define(getattr(v, n), is_leaf, leaves) for n in names))
    return ("const", v)


def unflatten(tree: TreeDef, leaves: list[Any], inputs: Any = ()) -> Any:
    """The tree rebuilt around ``leaves``; ``inputs``: the caller's objects behind the
    graph's inputs, for ("input", i) nodes (a Generator argument returned)."""
    return _build(tree, iter(leaves), {"inputs": inputs})


def map_nodes(tree: TreeDef, fn: Callable[[TreeDef], TreeDef]) -> TreeDef:
    """``tree`` with each node that is not a container (a leaf, a constant, a complex leaf,
    an input) replaced by ``fn`` of it, in the leaves' order."""
    kind = tree[0]
    if kind in ("tuple", "list"):
        return (kind, tuple(map_nodes(c, fn) for c in tree[1]))
    if kind in ("dict", "namedtuple"):
        return (kind, tree[1], tuple(map_nodes(c, fn) for c in tree[2]))
    if kind == "dataclass":
        return (kind, tree[1], tree[2], tuple(map_nodes(c, fn) for c in tree[3]))
    return fn(tree)


def returns_inputs(tree: TreeDef) -> bool:
    """Whether the tree has ("input", i) nodes (the caller's objects returned)."""
    kinds: list[str] = []
    map_nodes(tree, lambda t: kinds.append(t[0]) or t)
    return "input" in kinds


def _build(t: TreeDef, it: Any, views: dict) -> Any:
    # A module-level function, not a closure over the iterator: a recursive closure is a
    # reference cycle that would keep the returned arrays (device memory too) alive until
    # the garbage collector runs. ``views``: the complex view of each pair array made so
    # far (a complex array returned twice is one array, as NumPy's)
    kind = t[0]
    if kind == "leaf":
        return next(it)
    if kind == "input":
        return views["inputs"][t[1]]
    if kind == "tuple":
        return tuple(_build(c, it, views) for c in t[1])
    if kind == "list":
        return [_build(c, it, views) for c in t[1]]
    if kind == "dict":
        return {k: _build(c, it, views) for k, c in zip(t[1], t[2])}
    if kind == "namedtuple":
        return t[1](*(_build(c, it, views) for c in t[2]))
    if kind == "dataclass":
        return make_dataclass_instance(t[1], dict(zip(t[2], (_build(c, it, views)
                                                             for c in t[3]))))
    if kind == "complex":
        from ..interleaved import complex_view
        pair = next(it)
        view = views.get(id(pair))
        if view is None:
            view = views[id(pair)] = (complex_view(pair, t[1]), pair)
        return view[0]
    return t[1]


def mark_complex_leaves(tree: TreeDef, kinds: list[Any]) -> TreeDef:
    """``tree`` with its i-th leaf made a ("complex", dtype) leaf where ``kinds[i]`` is a
    complex dtype's name (None: a leaf as it was)."""
    if not any(kinds):
        return tree
    it = iter(kinds)

    def mark(t: TreeDef) -> TreeDef:
        if t[0] != "leaf":
            return t
        k = next(it)
        return ("complex", k) if k else t
    return map_nodes(tree, mark)


def make_dataclass_instance(cls: type, values: dict[str, Any]) -> Any:
    """An instance of ``cls`` with these field values: made by its ``__init__`` (as
    ``dataclasses.replace`` does, so ``__post_init__`` runs), then the fields ``__init__``
    does not take set as they were (``field(init=False)``, frozen or not)."""
    fields = dataclasses.fields(cls)
    obj = cls(**{f.name: values[f.name] for f in fields if f.init})
    for f in fields:
        if not f.init:
            object.__setattr__(obj, f.name, values[f.name])
    return obj
