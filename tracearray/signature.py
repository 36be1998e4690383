"""Static arguments checked against the function's signature, at decoration time.

As ``jax.jit`` does, ``static_argnums`` and ``static_argnames`` are mapped to each other
through ``inspect.signature``: a parameter marked static by position is static when passed by
keyword too, and the other way round. A name that is no parameter, an index past the
positional parameters, or a keyword-only or positional-only parameter named the wrong way is
refused with the function's name and its parameters, before any call. Functions without an
inspectable signature (some builtins and callables) keep what was given.

At each call, ``refuse_identity_constants`` checks the non-static arguments: an object that
is not an array or container would be a constant of the trace, which is only sound when it
compares by value.
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable

import numpy as np

from .errors import InputError, with_location
from .trace.context import refuse_random_state


def _as_set(value: Any, kind: type, what: str) -> frozenset:
    items = (value,) if isinstance(value, kind) else tuple(value)
    for item in items:
        if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
            raise TypeError(f"tracearray.compile: {what} must be {kind.__name__}s, got "
                            f"{item!r}")
    return frozenset(items)


def static_arguments(fn: Callable, static_argnums: Any, static_argnames: Any
                     ) -> tuple[frozenset[int], frozenset[str]]:
    """The static positions and names of ``fn``'s parameters, each completed by the other."""
    nums = _as_set(static_argnums, int, "static_argnums")
    names = _as_set(static_argnames, str, "static_argnames")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return frozenset(i for i in nums if i >= 0), names
    label = getattr(fn, "__qualname__", None) or repr(fn)
    listed = ", ".join(p.name for p in params) or "none"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind is p.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind is p.VAR_KEYWORD for p in params)
    by_name = {p.name: p for p in params}

    def refuse(message: str) -> None:
        raise ValueError(with_location(f"tracearray.compile({label}): {message} (its "
                                       f"parameters: {listed})"))

    out_nums: set[int] = set()
    out_names: set[str] = set(names)
    for i in sorted(nums):
        j = i + len(positional) if i < 0 and not var_positional else i
        if j < 0 or (j >= len(positional) and not var_positional):
            refuse(f"static_argnums {i} is out of range: it takes {len(positional)} "
                   f"positional parameter(s)")
        out_nums.add(j)
        if j < len(positional) and positional[j].kind is positional[j].POSITIONAL_OR_KEYWORD:
            out_names.add(positional[j].name)
    for name in sorted(names):
        p = by_name.get(name)
        if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p is None and var_keyword:
                continue   # a keyword that **kwargs receives
            refuse(f"static_argnames {name!r} is not one of its parameters")
        if p.kind is p.POSITIONAL_ONLY:
            refuse(f"static_argnames {name!r} names a positional-only parameter, which "
                   f"cannot be passed by name; use static_argnums={positional.index(p)}")
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            out_nums.add(positional.index(p))
    return frozenset(out_nums), frozenset(out_names)


# Objects that compare by identity and are fine as constants: what they do cannot change
# behind a cached trace's back in a way an equal value would not (code, modules, classes).
_STABLE_IDENTITY_TYPES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                          types.MethodType, functools.partial, np.ufunc)


def refuse_identity_constants(tree: Any, name: Callable[[], str]) -> None:
    """A non-static argument (or a part of one) that is neither an array nor a container is
    a constant of the trace, cached by ``==``. An object with attributes that compares by
    identity would be equal to itself after its attributes changed, and the cached trace
    would go on using the old values: refused, with the ways to pass it."""
    kind = tree[0]   # (pytree.py's tree definitions: a container's children come last)
    children = tree[-1] if kind in ("tuple", "list", "namedtuple", "dict", "dataclass") else ()
    for child in children:
        refuse_identity_constants(child, name)
    if kind != "const":
        return
    value = tree[1]
    refuse_random_state(value, f"argument {name()!r}")
    if type(value).__eq__ is not object.__eq__ or isinstance(value, _STABLE_IDENTITY_TYPES):
        return
    if not (hasattr(value, "__dict__") or getattr(type(value), "__slots__", ())):
        return   # no attributes to change (a sentinel object())
    what = type(value).__qualname__
    raise InputError(with_location(
        f"argument {name()!r} is a {what} object, which would be a constant of the trace; "
        f"{what} compares by identity, so after a change to its attributes the compiled "
        f"function would still use the values it was traced with. Make {what} a dataclass "
        f"or namedtuple (its array fields become inputs, its other fields static values "
        f"compared by ==), pass the arrays it holds as arguments, or mark it static "
        f"(static_argnums / static_argnames): the arrays in its attributes are then read at "
        f"every call, and its numbers and flags that the function's own code reads "
        f"(self.scale) are checked at every call (a change traces again)"))
