"""What the traced code reads of the objects it reaches by ways the chains of ``reads.py``
do not follow: a local bound to an object (``p = self.p; p.dt``), a loop variable (``for
layer in self.layers: x = x * layer.scale``), a comprehension's, ``getattr(self, "k")``,
``type(self).C``, a sub-object reached through those (``blk.attn.scale``).

Such a read is an attribute load by name on an object that a chain (the function's own, or
a helper frame's, ``frames.py``) reached, or on an item or attribute of one. So after the
trace the objects the chains reach are walked (``reached_guards``): the roots, every
object along a chain, the items of the lists, tuples and dicts among them, and the
attributes of those objects whose *names* the traced code loads somewhere (its attribute
loads, and its string constants for ``getattr``), a few levels down. Each such attribute
is a guard, by the path the walk took: a number, string, flag, or small container of them
by value; any other object (a sub-object, a function, a ufunc, an Enum member) by
identity (``reads.Same``), so that a replaced activation or layer traces again; arrays
are ``captured.py``'s. A list, tuple or dict of objects reached is guarded by the identity
of its items and their number (an ``append`` to ``self.layers`` traces again).

Reading follows ``reads._step_kind``: nothing runs the user's code (no property, no
``__getattr__``). An attribute whose name the code never loads is not guarded (a counter
the program keeps on the same object does not make every call trace again); one that a
property computes, or that a name built at run time reads, is not seen.
"""
from __future__ import annotations

import collections
import dis
import functools
import types
from typing import Any, NamedTuple

import numpy as np

from .captured import _MISSING, Roots, _user_function, _user_instance, _user_module
from .frames import FrameLog
from .reads import (MAX_GUARDED_ITEMS, Guard, Pinned, Same, SmallArray, _follow, _global_loads,
                    _global_root_in,
                    _guardable, _own_root, _root_text, _snapshot, _step_kind, read_chains)

MAX_DEPTH = 4          # attribute / item steps below an object a chain reached
MAX_OBJECTS = 2000     # objects walked per trace
MAX_PATHS = 2          # paths by which one object's attributes are guarded
_WHOLE_DICT = frozenset({"items", "values", "keys", "copy"})   # a dict read whole


class _At(NamedTuple):
    root: tuple
    steps: tuple
    text: str


@functools.lru_cache(maxsize=1024)
def loaded_names(code: types.CodeType) -> tuple[frozenset[str], frozenset[str]]:
    """The attribute names ``code`` (and its nested code) loads, with its string constants
    (``getattr(self, "k")``, ``vars(self)["k"]``); and those constants alone."""
    names: set[str] = {"__call__"}   # (``layer(x)`` calls its class's __call__)
    consts: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        since_getattr = 99
        for i in dis.get_instructions(c):
            since_getattr += 1
            if i.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(i.argval, str):
                names.add(i.argval)
                if i.argval == "get":   # (the key of d.get("k", default))
                    since_getattr = 0
            elif i.opname in ("LOAD_GLOBAL", "LOAD_NAME") and \
                    i.argval in ("getattr", "hasattr"):
                since_getattr = 0
            elif i.opname in ("DICT_MERGE", "DICT_UPDATE", "CALL_FUNCTION_EX"):
                names.add("keys")   # (``f(**cfg)``: every key read)
            elif i.opname in ("LOAD_CONST",) and type(i.argval) is str and \
                    i.argval.isidentifier():
                names.add(i.argval)
                if since_getattr <= 4:   # (the name of getattr(obj, "k", default))
                    consts.add(i.argval)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return frozenset(names), frozenset(consts)


def _walkable(value: Any) -> bool:
    return _user_instance(value) or isinstance(value, (types.SimpleNamespace, dict)) or \
        type(value) in (list, tuple, functools.partial) or \
        (isinstance(value, tuple) and hasattr(type(value), "_fields")) or \
        (isinstance(value, types.ModuleType) and _user_module(value)) or \
        (isinstance(value, types.FunctionType) and _user_function(value))


def reached_guards(roots: Roots, code: types.CodeType | None, params: dict[str, tuple],
                   helpers: list[types.FunctionType], log: FrameLog,
                   plain: types.FunctionType | None, inputs: set[int],
                   followed: set[int]) -> tuple[Guard, ...]:
    """The guards of what the traced code reads of the objects its chains reach (module
    docstring). ``followed`` gets the ids of the objects reached by paths the call can
    follow (a helper frame's guards rooted at one of them are not needed)."""
    codes = ([code] if code is not None else []) + [h.__code__ for h in helpers] + \
        [f.code for f in log.frames.values()]
    names: set[str] = set()
    consts: set[str] = set()
    for c in codes:
        loaded, strings = loaded_names(c)
        names |= loaded
        consts |= strings
    starts: list[tuple[Any, _At]] = []
    for root, text, value in roots.fixed():   # (self, closure variables, defaults, statics)
        starts.append((value, _At(root, (), text)))
    if code is not None:
        for name in _global_loads(code):   # (a global object read whole: cfg = CFG)
            starts.append((roots.globals.get(name, _MISSING), _At(("global", name), (), name)))
        for chain in read_chains(code):
            root = _own_root(chain, code, params)
            if root is not None:
                starts.append((roots.resolve_root(root),
                               _At(root, (), _root_text(root, chain))))
    for f in log.frames.values():
        module = f.globals.get("__name__")
        for name, obj in f.objects.items():
            starts.append((obj, _At(("pinned", Pinned(obj, name)), (), name)))
        for chain in read_chains(f.code):
            if chain.root[0] == "global":
                root = _global_root_in(f.globals, module, plain, chain.root[1])
                if root is not None:
                    starts.append((f.globals.get(chain.root[1], _MISSING),
                                   _At(root, (), chain.root[1])))
    out: list[Guard] = []
    for _pass in range(2):
        strings: set[str] = set()
        out = _walk(starts, names, consts, strings, inputs, followed)
        if strings <= names:
            break
        # (a name held by an attribute the code reads: getattr(self, self.which))
        names |= strings
    return tuple(out)


def _array_guard(out: list[Guard], at: _At, value: np.ndarray, inputs: set[int]) -> None:
    """An array reached that is no graph input (``captured.py`` reads those at every call),
    small enough to compare at every call: guarded by its values (``reads.SmallArray``)."""
    if id(value) not in inputs and type(value) is np.ndarray and \
            value.size <= SmallArray.LIMIT and value.dtype.kind in "biufc":
        out.append(Guard(at.root, at.steps, SmallArray(value), at.text))


def _walk(starts: list[tuple[Any, _At]], names: set[str], consts: set[str],
          strings: set[str], inputs: set[int], followed: set[int]) -> list[Guard]:
    """The walk of ``reached_guards`` from ``starts`` over the attributes named ``names``
    (the absence of those named by ``consts``, the code's string constants, is guarded too:
    ``getattr(self, "k", 3.0)``); the identifier strings it finds are added to ``strings``;
    ``inputs``: the ids of the arrays the trace made graph inputs."""
    out: list[Guard] = []
    seen: dict[int, int] = {}
    # (breadth first, the function's own roots before the objects helpers were given: an
    # object found again by a path the call can follow needs no guards rooted at itself)
    todo = collections.deque((obj, at, 0) for obj, at in starts
                             if obj is not _MISSING and _walkable(obj) and at.root[0] != "pinned")
    later = [(obj, at, 0) for obj, at in starts if at.root[0] == "pinned" and _walkable(obj)]
    while (todo or later) and len(seen) < MAX_OBJECTS:
        if not todo:
            todo.append(later.pop(0))
        obj, at, depth = todo.popleft()
        n = seen.get(id(obj), 0)
        if n >= MAX_PATHS or (n and at.root[0] == "pinned"):
            continue
        seen[id(obj)] = n + 1
        if at.root[0] != "pinned":
            followed.add(id(obj))
        if isinstance(obj, dict) and _guardable(obj) and not names & _WHOLE_DICT:
            # numbers at keys: those the code names (cfg["lr"], cfg.get("lr", 0.1)), present
            # or not (a counter kept in the same dict does not make calls trace again)
            for k in names & set(obj) if len(obj) > len(names) else set(obj) & names:
                out.append(Guard(at.root, at.steps + (("item", k),), _snapshot(obj[k]),
                                 f"{at.text}[{k!r}]"))
            for k in consts - set(obj):
                out.append(Guard(at.root, at.steps + (("item", k),), _MISSING,
                                 f"{at.text}[{k!r}] (absent)"))
            continue
        if type(obj) in (list, tuple) or isinstance(obj, dict):
            if _guardable(obj):   # (numbers read whole: iterated, summed, indexed)
                out.append(Guard(at.root, at.steps, _snapshot(obj), at.text))
                continue
            items = list(dict.items(obj)) if isinstance(obj, dict) else list(enumerate(obj))
            if len(items) > MAX_GUARDED_ITEMS:
                continue
            out.append(Guard(at.root, at.steps, Same(obj), at.text))   # (an append, a swap)
            for k, v in items:
                if not _guardable(k):
                    continue
                item = _At(at.root, at.steps + (("item", k),), f"{at.text}[{k!r}]")
                if isinstance(v, np.ndarray):
                    _array_guard(out, item, v, inputs)
                elif _guardable(v):
                    out.append(Guard(item.root, item.steps, _snapshot(v), item.text))
                elif depth < MAX_DEPTH and _walkable(v):
                    todo.append((v, item, depth + 1))
            continue
        if isinstance(obj, types.FunctionType) or type(obj) is functools.partial:
            # a function's closure variables (a layer made by a factory, ``nonlocal k``),
            # a partial's function and arguments
            keys = [("cell", n) for n in obj.__code__.co_freevars] \
                if isinstance(obj, types.FunctionType) else \
                [("partial", "func"), ("partial", "args"), ("partial", "keywords")]
            for step, key in keys:
                value = _follow(obj, step, key)
                path = _At(at.root, at.steps + ((step, key),), f"{at.text}<{key}>")
                _value_guard(out, todo, path, value, depth, inputs, strings)
            continue
        if _user_instance(obj):   # (its class: ``obj.__class__ = Other`` traces again)
            out.append(Guard(at.root, at.steps + (("type", None),), Same(type(obj)),
                             f"type({at.text})"))
        for name in names:
            step = _step_kind(obj, "attr", name)
            if step is None:
                if name in consts and _user_instance(obj) and \
                        _follow(obj, "attr", name) is _MISSING and \
                        _class_missing(type(obj), name):
                    out.append(Guard(at.root, at.steps + (("attr", name),), _MISSING,
                                     f"{at.text}.{name} (absent)"))
                continue
            value = _follow(obj, step, name)
            if value is _MISSING or type(value).__module__.startswith("tracearray.trace"):
                continue
            path = _At(at.root, at.steps + ((step, name),), f"{at.text}.{name}")
            _value_guard(out, todo, path, value, depth, inputs, strings)
    return out


def _class_missing(cls: type, name: str) -> bool:
    return all(name not in vars(c) for c in cls.__mro__)


def _value_guard(out: list[Guard], todo: list, path: _At, value: Any, depth: int,
                 inputs: set[int], strings: set[str]) -> None:
    """The guard of one value the walk reached: by value, by identity (and walked on),
    an array by its values where small (``_array_guard``)."""
    if value is _MISSING or type(value).__module__.startswith("tracearray.trace"):
        return
    if isinstance(value, np.ndarray):
        _array_guard(out, path, value, inputs)
        return
    if isinstance(value, dict) and _guardable(value):
        todo.append((value, path, depth + 1))   # (at the keys the code names)
        return
    if _guardable(value):
        out.append(Guard(path.root, path.steps, _snapshot(value), path.text))
        if type(value) is str and value.isidentifier():
            strings.add(value)
        return
    out.append(Guard(path.root, path.steps, Same(value), path.text))
    if depth < MAX_DEPTH and _walkable(value):
        todo.append((value, path, depth + 1))
