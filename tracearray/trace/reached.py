"""What the traced code reads of the objects it reaches by ways the chains of ``reads.py``
do not follow: a local bound to an object (``p = self.p; p.dt``), a loop variable (``for
layer in self.layers: x = x * layer.scale``), a comprehension's, ``getattr(self, "k")``,
``type(self).C``, a sub-object reached through those (``blk.attn.scale``), a factory
layer's closure variables, a ``partial``'s arguments.

Such a read is an attribute load by name on an object reachable from the function's roots
(and from what its helpers were given, ``frames.py``). So after the trace those objects are
walked (``reached_guards``): attributes and items, through every name the code loads
(``loaded_names``). What is guarded, by the path the walk took:

- a number, string, flag or small container of them, at an attribute whose name the code
  loads *off a chain's end* (``p.dt``, ``layer.scale``; ``self.cfg.n`` is a chain of
  ``reads.py``, guarded there) or names as a string constant: by value;
- a reached object (an instance, a namespace): walked on, its kind guarded (None or
  another class in its place traces again; one rebuilt with equal values does not); a
  list, tuple or dict of objects: its type, length and item types (``reads.Kinds``);
- a function: its code, defaults and closure cells; a ufunc, a builtin, an Enum member:
  by identity (``reads.Same``); a name the code only calls guards callables only
  (``self.opt.step()`` beside a counter ``self.step``);
- a small array NumPy's own operations may have read (not a graph input): its values
  (``reads.SmallArray``); graph inputs are read at every call (``captured.py``).

Reading follows ``reads._step_kind``: nothing runs the user's code (no property, no
``__getattr__``). Not seen: an attribute a property computes, a name built at run time,
containers of more than ``MAX_GUARDED_ITEMS`` items, ndarray attribute names read off a
local (``y.size`` is an array's), objects beyond ``MAX_DEPTH`` / ``MAX_OBJECTS``
(docs/sharp-bits.md).
"""
from __future__ import annotations

import collections
import dis
import enum
import functools
import types
from typing import Any, NamedTuple

import numpy as np

from .captured import _MISSING, Roots, _user_function, _user_instance, _user_module
from .frames import FrameLog
from .reads import (MAX_GUARDED_ITEMS, Guard, Kinds, Pinned, Same, SmallArray, _follow,
                    _global_loads, _global_root_in, _guardable, _method_load, _namespace,
                    _own_root, _root_text, _snapshot, _step_kind, read_chains)

MAX_DEPTH = 8          # attribute / item steps below a root
MAX_OBJECTS = 2000     # objects walked per trace
MAX_PATHS = 2          # paths by which one object's attributes are guarded


class _At(NamedTuple):
    root: tuple
    steps: tuple
    text: str


class Names(NamedTuple):
    """What a piece of code loads by name (``loaded_names``)."""
    walk: frozenset[str]      # every attribute name it loads, and its string constants
    plain: frozenset[str]     # attributes loaded on what no chain of reads.py reaches
    methods: frozenset[str]   # names it loads only to call (``y.sum()``, ``opt.step()``)
    consts: frozenset[str]    # getattr(obj, "k", default) / d.get("k", default) names
    keys: frozenset          # int and str constants (dict keys it may name)
    whole: bool               # it reads a dict whole (**cfg, .items(), .values(), .keys())


_WHOLE = frozenset({"items", "values", "keys", "copy"})
# an ndarray's attributes and methods: loaded on a local they are almost always an array's
# (``y.size``, ``r.shape``), not a reached object's (a counter ``self.size`` would make
# every call trace again); a user object's attribute of such a name read through a local is
# not checked (docs/sharp-bits.md)
_ARRAY_NAMES = frozenset(n for n in dir(np.ndarray) if not n.startswith("__"))


@functools.lru_cache(maxsize=1024)
def loaded_names(code: types.CodeType, own: bool = True) -> Names:
    """The names ``code`` (and its nested code) loads. An attribute load that continues a
    chain from a global, a closure variable or a parameter (``self.cfg.n``, ``x.sum()``) is
    guarded along that chain by ``reads.py``; those on other values (a local alias, a loop
    variable, a call's result: ``p.dt``, ``layer.scale``) are ``plain``: the walk guards the
    attributes of those names on every object it reaches. ``own``: the compiled function's
    code, whose parameters are roots; a helper's parameters are objects the walk reaches
    (their chains, ``self.eps`` in ``Norm.apply``, are plain)."""
    walk: set[str] = {"__call__"}   # (``layer(x)`` calls its class's __call__)
    plain: set[str] = set()
    attrs: set[str] = set()
    methods: set[str] = set()
    consts: set[str] = set()
    keys: set = set()
    whole = False
    stack = [(code, not own)]
    while stack:
        c, nested = stack.pop()
        n_params = c.co_argcount + c.co_kwonlyargcount + \
            bool(c.co_flags & 0x04) + bool(c.co_flags & 0x08)
        params = set(c.co_varnames[:n_params]) if not nested else set()
        since_getattr = 99
        chained = False      # the previous instruction continued a chain from a root
        for i in dis.get_instructions(c):
            if i.opname in ("EXTENDED_ARG", "CACHE", "NOP", "PRECALL", "PUSH_NULL"):
                continue
            since_getattr += 1
            method = i.opname == "LOAD_METHOD" or (i.opname == "LOAD_ATTR" and
                                                   _method_load(i))
            if i.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(i.argval, str):
                walk.add(i.argval)
                (methods if method else attrs).add(i.argval)
                if not chained:
                    plain.add(i.argval)
                if i.argval == "get":   # (the key of d.get("k", default))
                    since_getattr = 0
                if method and i.argval in _WHOLE:
                    whole = True
                chained = chained and not method
                continue
            # (a helper's closure variables and parameters are objects it was given: its
            # chains from them are plain; its globals' are followed by reads.py)
            chained = i.opname in ("LOAD_GLOBAL", "LOAD_NAME") or (own and (
                i.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") or
                (i.opname in ("LOAD_FAST", "LOAD_FAST_CHECK") and i.argval in params)))
            if i.opname in ("LOAD_GLOBAL", "LOAD_NAME") and i.argval in ("getattr", "hasattr"):
                since_getattr = 0
            elif i.opname in ("DICT_MERGE", "DICT_UPDATE", "CALL_FUNCTION_EX"):
                whole = True   # (``f(**cfg)``: every key read)
            elif i.opname == "LOAD_CONST":
                for k in i.argval if type(i.argval) is tuple else (i.argval,):
                    if type(k) in (int, str):
                        keys.add(k)
                    if type(k) is str and k.isidentifier():
                        walk.add(k)
                        plain.add(k)   # (vars(self)["k"], getattr(self, "k"))
                        if since_getattr <= 4:   # (the name of getattr(obj, "k", default))
                            consts.add(k)
        stack.extend((k, True) for k in c.co_consts if isinstance(k, types.CodeType))
    plain |= consts
    plain -= _ARRAY_NAMES
    return Names(frozenset(walk), frozenset(plain), frozenset(methods - attrs),
                 frozenset(consts), frozenset(keys), whole)


def _walkable(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        return False   # (a member: by identity)
    return _user_instance(value) or _namespace(value) or isinstance(value, dict) or \
        type(value) in (list, tuple, functools.partial) or \
        (isinstance(value, tuple) and hasattr(type(value), "_fields")) or \
        (isinstance(value, types.ModuleType) and _user_module(value)) or \
        (isinstance(value, types.FunctionType) and _user_function(value)) or \
        (isinstance(value, type) and _user_function(value)) or _compiled_function(value)


def _compiled_function(value: Any) -> bool:
    """A ``tracearray.compile`` function the code calls: inlined into the trace, so what its
    Python function reads is read as a helper's (its closure variables)."""
    return type(value).__name__ == "CompiledFunction" and \
        type(value).__module__ == "tracearray.api"


def reached_guards(roots: Roots, code: types.CodeType | None, params: dict[str, tuple],
                   helpers: list[types.FunctionType], log: FrameLog,
                   plain: types.FunctionType | None, inputs: set[int],
                   followed: set[int]) -> tuple[Guard, ...]:
    """The guards of what the traced code reads of the objects its chains reach (module
    docstring). ``followed`` gets the ids of the objects reached by paths the call can
    follow (a helper frame's guards rooted at one of them are not needed)."""
    codes = ([code] if code is not None else []) + [h.__code__ for h in helpers] + \
        [f.code for f in log.frames.values()]
    found = [loaded_names(c, own=c is code) for c in codes]
    names = Names(*(frozenset().union(*(getattr(n, f) for n in found))
                    for f in Names._fields[:-1]), any(n.whole for n in found))
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
    for h in helpers:   # (a helper's globals: c = CFG; c.s, for layer in LAYERS)
        module = h.__globals__.get("__name__")
        for name in _global_loads(h.__code__):
            root = _global_root_in(h.__globals__, module, plain, name)
            if root is not None:
                starts.append((h.__globals__.get(name, _MISSING), _At(root, (), name)))
    for f in log.frames.values():
        module = f.globals.get("__name__")
        for name, obj in f.objects.items():
            starts.append((obj, _At(("pinned", Pinned(obj, name)), (), name)))
        for name in _global_loads(f.code):
            root = _global_root_in(f.globals, module, plain, name)
            if root is not None:
                starts.append((f.globals.get(name, _MISSING), _At(root, (), name)))
    out: list[Guard] = []
    for _pass in range(2):
        strings: set[str] = set()
        out = _walk(starts, names, strings, inputs, followed)
        if strings <= names.walk:
            break
        # (names held by what the code reads: getattr(self, self.which), for n in self.order)
        names = names._replace(walk=names.walk | strings, plain=names.plain | strings)
    return tuple(out)


def _defaults_guards(w: "_Walk", at: _At, attr: str, values: Any) -> None:
    """Guards of a function's ``__defaults__`` / ``__kwdefaults__``: the whole tuple or dict
    where every value is a guardable number or string, else each such value by itself (a
    number beside an array default, which the captured-array walk reads at each call);
    and the container's identity stays guarded through its values' paths."""
    if not values:
        return
    text = f"{at.text}.__{attr}__"
    if _guardable(values):
        w.out.append(Guard(at.root, at.steps + ((attr, None),), _snapshot(values), text))
        return
    items = values.items() if isinstance(values, dict) else enumerate(values)
    for key, v in items:
        if _guardable(v):
            w.out.append(Guard(at.root, at.steps + ((attr, None), ("item", key)),
                               _snapshot(v), f"{text}[{key!r}]"))


def _array_guard(out: list[Guard], at: _At, value: np.ndarray, inputs: set[int]) -> None:
    """An array reached that is no graph input (``captured.py`` reads those at every call),
    small enough to compare at every call: guarded by its values (``reads.SmallArray``)."""
    if id(value) not in inputs and type(value) is np.ndarray and \
            value.size <= SmallArray.LIMIT and value.dtype.kind in "biufc":
        out.append(Guard(at.root, at.steps, SmallArray(value), at.text))


class _Walk(NamedTuple):
    out: list
    todo: Any
    names: Names
    strings: set
    inputs: set


def _walk(starts: list[tuple[Any, _At]], names: Names, strings: set[str], inputs: set[int],
          followed: set[int]) -> list[Guard]:
    """The walk of ``reached_guards`` from ``starts`` (breadth first, the function's own
    roots before the objects helpers were given: an object found again by a path the call
    can follow needs no guards rooted at itself); the identifier strings it finds are added
    to ``strings``; ``inputs``: the ids of the arrays the trace made graph inputs."""
    w = _Walk([], collections.deque(), names, strings, inputs)
    w.todo.extend((obj, at, 0) for obj, at in starts
                  if obj is not _MISSING and _walkable(obj) and at.root[0] != "pinned")
    later = [(obj, at, 0) for obj, at in starts if at.root[0] == "pinned" and _walkable(obj)]
    seen: dict[int, int] = {}
    by_class: set[tuple[int, str]] = set()
    while (w.todo or later) and len(seen) < MAX_OBJECTS:
        if not w.todo:
            w.todo.append(later.pop(0))
        obj, at, depth = w.todo.popleft()
        n = seen.get(id(obj), 0)
        if n >= MAX_PATHS or (n and at.root[0] == "pinned"):
            continue
        seen[id(obj)] = n + 1
        if at.root[0] != "pinned":
            followed.add(id(obj))
        if isinstance(obj, dict) or type(obj) in (list, tuple):
            # (read whole: a closure variable, a partial's keywords, a dict the code reaches
            # by a name its chains do not follow: ``for k in layer.q``)
            _container(w, obj, at, depth, whole=bool(at.steps) and (
                at.steps[-1][0] in ("cell", "partial") or at.steps[-1][1] in w.names.plain))
            continue
        if _compiled_function(obj):   # (its Python function, as it is at each call)
            path = _At(at.root, at.steps + (("attr", "__wrapped__"),), f"{at.text}.__wrapped__")
            _value(w, path, _follow(obj, "attr", "__wrapped__"), depth, plain=True)
            continue
        if isinstance(obj, types.FunctionType) or type(obj) is functools.partial:
            # a function's closure variables (a layer made by a factory, ``nonlocal k``),
            # a partial's function and arguments
            keys = [("cell", k) for k in obj.__code__.co_freevars] \
                if isinstance(obj, types.FunctionType) else \
                [("partial", "func"), ("partial", "args"), ("partial", "keywords")]
            if isinstance(obj, types.FunctionType):   # (another function in its place)
                w.out.append(Guard(at.root, at.steps + (("code", None),), Same(obj.__code__),
                                   f"{at.text}.__code__"))
                for attr in ("defaults", "kwdefaults"):
                    _defaults_guards(w, at, attr, getattr(obj, f"__{attr}__"))
            for step, key in keys:
                path = _At(at.root, at.steps + ((step, key),), f"{at.text}<{key}>")
                _value(w, path, _follow(obj, step, key), depth, plain=True, whole=True)
            continue
        for name in names.walk:
            step = _step_kind(obj, "attr", name)
            if step is None:
                if name in names.consts and (_user_instance(obj) or _namespace(obj)) and \
                        _follow(obj, "attr", name) is _MISSING and \
                        _class_missing(type(obj), name):
                    w.out.append(Guard(at.root, at.steps + (("attr", name),), _MISSING,
                                       f"{at.text}.{name} (absent)"))
                continue
            if step == "class":   # (a class attribute: once per class)
                if (id(type(obj)), name) in by_class:
                    continue
                by_class.add((id(type(obj)), name))
            value = _follow(obj, step, name)
            if name in names.methods and not callable(value):
                continue   # (a name the code only calls: ``y.sum()``, not a counter ``sum``)
            path = _At(at.root, at.steps + ((step, name),), f"{at.text}.{name}")
            _value(w, path, value, depth, plain=name in names.plain)
    return w.out


def _container(w: _Walk, obj: Any, at: _At, depth: int, whole: bool = False) -> None:
    """A list, tuple or dict reached: numbers by value (a dict at the keys the code names,
    unless it reads dicts whole, or ``whole``: a closure variable's, a partial's keywords),
    objects walked, their count and kinds guarded."""
    if len(obj) > MAX_GUARDED_ITEMS:
        return   # (too large to compare at every call: not guarded, docs/sharp-bits.md)
    if _guardable(obj):
        if isinstance(obj, dict) and not w.names.whole and not whole:
            for k in (w.names.keys | w.names.walk) & set(obj):
                w.out.append(Guard(at.root, at.steps + (("item", k),), _snapshot(obj[k]),
                                   f"{at.text}[{k!r}]"))
            for k in w.names.consts - set(obj):
                w.out.append(Guard(at.root, at.steps + (("item", k),), _MISSING,
                                   f"{at.text}[{k!r}] (absent)"))
        else:   # (numbers read whole: iterated, summed, indexed)
            w.out.append(Guard(at.root, at.steps, _snapshot(obj), at.text))
        for v in obj if type(obj) in (list, tuple) else ():
            if type(v) is str and v.isidentifier():
                w.strings.add(v)   # (for n in self.order: getattr(self, n))
        return
    items = list(dict.items(obj)) if isinstance(obj, dict) else list(enumerate(obj))
    w.out.append(Guard(at.root, at.steps, Kinds(obj), at.text))   # (an append, a swap)
    for k, v in items:
        if _guardable(k):
            _value(w, _At(at.root, at.steps + (("item", k),), f"{at.text}[{k!r}]"), v, depth,
                   plain=True)


def _class_missing(cls: type, name: str) -> bool:
    return all(name not in vars(c) for c in cls.__mro__)


def _value(w: _Walk, path: _At, value: Any, depth: int, plain: bool,
           whole: bool = False) -> None:
    """One value the walk reached: an object walked on (its kind guarded: None or another
    class in its place traces again), a number by value where the code reads it by name
    (``plain``: a chain of reads.py guards the others), an array by its values where
    small, anything else (a function, a ufunc, an Enum member) by identity."""
    if value is _MISSING or (type(value).__module__ or "").startswith("tracearray.trace"):
        return
    if _walkable(value):
        if not isinstance(value, (dict, list, tuple)):
            w.out.append(Guard(path.root, path.steps + (("type", None),), Same(type(value)),
                               f"type({path.text})"))
        if depth < MAX_DEPTH:
            w.todo.append((value, path, depth + 1))
        return
    if isinstance(value, np.ndarray):
        _array_guard(w.out, path, value, w.inputs)
        return
    if _guardable(value):
        if plain or whole:
            w.out.append(Guard(path.root, path.steps, _snapshot(value), path.text))
        for v in value if type(value) in (list, tuple) else (value,):
            if type(v) is str and v.isidentifier():
                w.strings.add(v)   # (getattr(self, self.kind), for n in self.order)
        return
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return   # (a container too large to compare: not guarded)
    w.out.append(Guard(path.root, path.steps, Same(value), path.text))
