"""Numbers the traced function reads through attributes and items: ``cfg.dt``, ``self.lr``
of a compiled bound method, ``PARAMS["alpha"]``, ``model.opt.beta`` of a global object or a
closure variable.

Such a value reaches the trace as a plain Python number, a constant of the graph; the
objects it came from are not arguments, so the call's key does not see it. When the
program changes it between calls (``cfg.dt = 0.5``, a learning-rate schedule setting
``self.lr``), NumPy computes with the new value while the compiled function would keep the
old one: a silent wrong result. So the function's bytecode is read once for the chains it
evaluates (``read_chains``): a root (a global name, a closure variable, a bound argument, a
static argument) followed by attribute loads and constant subscripts. Before each trace the
chains are followed (``guards``); each that ends at a number, string, bool, None or a tuple
of them is a guard of the trace, compared again at every call (``hold``): a call that finds
another value traces again, as for a changed global.

What is followed: attributes in the ``__dict__`` of the user's instances, classes and
modules (and ``SimpleNamespace``s), class attributes that are not descriptors, items of
dicts, lists and tuples at constant keys. Nothing runs the user's code (no property, no
``__getattr__``, no ``__getitem__`` of another type). What is not seen: reads inside helper
functions the traced function calls (their globals are frozen too; docs/sharp-bits.md), a
key computed at run time (``cfg[name]``), library modules (``np.pi`` is a constant), and
arrays, which ``captured.py`` makes graph inputs.
"""
from __future__ import annotations

import dis
import functools
import sys
import types
from typing import Any, Callable, NamedTuple

import numpy as np

from .captured import _MISSING, Roots, _user_function, _user_instance, _user_module

MAX_STEPS = 6           # attribute / item steps below a root
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_SUBSCR = ("BINARY_SUBSCR",)
_CONSTANT_LOADS = ("LOAD_CONST", "LOAD_SMALL_INT")
_FAST_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW")
_PAIRED_FAST_LOADS = ("LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW")


class Chain(NamedTuple):
    """A read in the function's code: the root (("global", name), ("deref", name) or
    ("fast", name)) and its steps (("attr", name) or ("item", constant key))."""
    root: tuple
    steps: tuple


class Guard(NamedTuple):
    """A value the trace read through ``steps`` from ``root`` (a ``Roots`` root), each step
    (how, key): "attr" (the object's ``__dict__``), "class" (a class attribute found on
    the type), "item" (a dict, list or tuple item)."""
    root: tuple
    steps: tuple
    value: Any
    text: str


@functools.lru_cache(maxsize=512)
def read_chains(code: types.CodeType) -> tuple[Chain, ...]:
    """The attribute and constant-subscript chains ``code`` evaluates from a global, a
    closure variable or a local (its nested functions' and comprehensions' chains from
    globals and the closure variables they share), every prefix of at least one step, and
    the closure variables themselves."""
    found: dict[Chain, None] = {}
    _scan(code, found, nested=False)
    return tuple(found)


def _scan(code: types.CodeType, found: dict, nested: bool) -> None:
    ins = [i for i in dis.get_instructions(code)
           if i.opname not in ("EXTENDED_ARG", "CACHE", "NOP")]
    for k, i in enumerate(ins):
        root = _root(i, nested)
        if root is None:
            continue
        if root[0] == "deref":   # (a closure variable rebound: ``nonlocal k; k = 3``)
            found[Chain(root, ())] = None
        steps: list[tuple] = []
        j = k + 1
        while j < len(ins) and len(steps) < MAX_STEPS:
            a = ins[j]
            if a.opname == "LOAD_ATTR" and not _method_load(a):
                steps.append(("attr", a.argval))
                j += 1
            elif a.opname in _CONSTANT_LOADS and j + 1 < len(ins) and \
                    _is_subscript(ins[j + 1]) and type(a.argval) in (int, str):
                steps.append(("item", a.argval))
                j += 2
            else:
                break
            found[Chain(root, tuple(steps))] = None
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _scan(c, found, nested=True)


def _root(i: dis.Instruction, nested: bool) -> tuple | None:
    if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
        return ("global", i.argval)
    if i.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
        return ("deref", i.argval)
    if nested:   # (a nested function's locals are its own)
        return None
    if i.opname in _FAST_LOADS:
        return ("fast", i.argval)
    if i.opname in _PAIRED_FAST_LOADS and isinstance(i.argval, tuple):
        return ("fast", i.argval[-1])   # (3.13: two locals loaded at once, the last on top)
    return None


def _method_load(i: dis.Instruction) -> bool:
    """A LOAD_ATTR that loads a method for a call (3.12 on: the low bit of its argument)."""
    return sys.version_info >= (3, 12) and bool((i.arg or 0) & 1)


def _is_subscript(i: dis.Instruction) -> bool:
    return i.opname in _SUBSCR or (i.opname == "BINARY_OP" and i.argrepr == "[]")


def guards(roots: Roots, chains: tuple[Chain, ...], code: types.CodeType,
           static_names: dict[str, tuple]) -> tuple[Guard, ...]:
    """The values ``chains`` lead to now that are numbers, strings, bools, None or tuples of
    them: the trace's guards. ``static_names``: parameter name -> its root in ``roots``
    (a bound argument, or a static argument of this call)."""
    out: list[Guard] = []
    freevars = code.co_freevars
    for chain in chains:
        kind, name = chain.root
        if kind == "global":
            root = ("global", name)
        elif kind == "deref":
            if name not in freevars:
                continue   # a cell of the function's own: a local
            root = ("closure", freevars.index(name))
        else:
            root = static_names.get(name)
            if root is None:
                continue
        obj = roots.resolve_root(root)
        if obj is _MISSING or obj is None:
            continue
        steps: list[tuple] = []
        for how, key in chain.steps:
            step = _step_kind(obj, how, key)
            if step is None:
                break
            obj = _follow(obj, step, key)
            if obj is _MISSING:
                break
            steps.append((step, key))
        else:
            if _guardable(obj):
                text = name + "".join(f".{k}" if h != "item" else f"[{k!r}]"
                                      for h, k in steps)
                out.append(Guard(root, tuple(steps), obj, text))
    return tuple(out)


def _step_kind(obj: Any, how: str, key: Any) -> str | None:
    """How ``key`` of ``obj`` is followed without running the user's code, or None."""
    if how == "item":
        return "item" if type(obj) in (dict, list, tuple) or _is_namedtuple(obj) else None
    if not (_user_instance(obj) or isinstance(obj, types.SimpleNamespace)
            or (isinstance(obj, types.ModuleType) and _user_module(obj))
            or (isinstance(obj, type) and _user_function(obj))):
        return None
    own = getattr(obj, "__dict__", None)
    if own is not None and key in own:
        return "attr"
    if isinstance(obj, (type, types.ModuleType)):
        return None
    found = _class_attribute(type(obj), key)
    if found is _MISSING or hasattr(type(found), "__get__"):
        return None   # (a property, a slot, a method: not plain data)
    return "class"


def _follow(obj: Any, step: str, key: Any) -> Any:
    try:
        if step == "item":
            if type(obj) is dict:
                return dict.__getitem__(obj, key)   # (never a defaultdict's __missing__)
            if isinstance(obj, (list, tuple)) and type(key) is int:
                return obj[key]
            return _MISSING
        own = getattr(obj, "__dict__", None)
        if step == "attr":
            return own[key] if own is not None and key in own else _MISSING
        if own is not None and key in own:   # "class": an instance attribute hides it
            return _MISSING
        found = _class_attribute(type(obj), key)
        return _MISSING if hasattr(type(found), "__get__") else found
    except Exception:   # noqa: BLE001 -- a broken chain: not a value the trace saw
        return _MISSING


def _class_attribute(cls: type, key: str) -> Any:
    for c in cls.__mro__:
        d = c.__dict__
        if key in d:
            return d[key]
    return _MISSING


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _guardable(value: Any) -> bool:
    if type(value) in _SCALARS or isinstance(value, np.generic):
        return not isinstance(value, np.void)
    if type(value) is tuple:
        return len(value) <= 32 and all(_guardable(v) for v in value)
    return False


def hold(roots: Roots, guards_: tuple[Guard, ...], key: Callable[[Any], Any]) -> bool:
    """Whether every guard's chain still leads to an equal value (``key``: the cache key
    of a static value, so that 1, 1.0 and True differ, and NaN equals NaN)."""
    for g in guards_:
        obj = roots.resolve_root(g.root)
        for step, k in g.steps:
            if obj is _MISSING:
                break
            obj = _follow(obj, step, k)
        if obj is g.value:
            continue
        if obj is _MISSING or type(obj) is not type(g.value) or key(obj) != key(g.value):
            return False
    return True


def changed(roots: Roots, guards_: tuple[Guard, ...], key: Callable[[Any], Any]) -> str | None:
    """The text of the first guard that no longer holds (for a cache miss's explanation)."""
    for g in guards_:
        if not hold(roots, (g,), key):
            return g.text
    return None


def trace_guards(roots: Roots, plain: types.FunctionType, n_bound: int, bound_kw: dict,
                 args: tuple, kwargs: dict, static_argnums: frozenset[int],
                 static_argnames: frozenset[str]) -> tuple[Guard, ...]:
    """``guards`` of ``plain``'s chains for a trace of this call: rooted at globals, its
    closure variables, its bound arguments (a compiled bound method's ``self``) and the
    call's static arguments."""
    chains = read_chains(plain.__code__)
    if not chains:
        return ()
    code = plain.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    params: dict[str, tuple] = {}
    for i in range(min(n_bound, len(names))):
        params[names[i]] = ("bound", i)
    for k in bound_kw:
        params[k] = ("bound_kw", k)
    for i in static_argnums:
        if i < len(args) and n_bound + i < len(names):
            params[names[n_bound + i]] = ("static", i)
    for k in static_argnames:
        if k in kwargs:
            params[k] = ("static_kw", k)
    return guards(roots, chains, code, params)
