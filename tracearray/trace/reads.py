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
chains are followed (``guards``); each that ends at a number, string, bool, None, or a
tuple, list or dict of them (a list read whole: ``for w in LAYERS``, kept as a copy) is a
guard of the trace, compared again at every call (``hold``): a call that finds another
value traces again, as for a changed global. A method called at the end of a chain
(``self.act(x)``) is guarded by identity.

What is followed: attributes in the ``__dict__`` of the user's instances, classes and
modules (and ``SimpleNamespace``s), class attributes that are not descriptors (or are plain
functions), items of dicts, lists and tuples at constant keys. Nothing runs the user's code
(no property, no ``__getattr__``, no ``__getitem__`` of another type). The helper functions
the function calls by global name (and compiled functions it calls) are read the same way
from their globals (``helper_guards``), their global arrays become roots of the captured
walk (``helper_roots``); random generators reached so are refused
(``refuse_reached_generators``) and the arrays reached are held read-only while the trace
runs (``reached_arrays``). A helper's arguments are known only while it runs: ``frames.py``
reads those frames during the trace. What is not seen: a key computed
at run time (``cfg[name]``), library modules (``np.pi`` is a constant); arrays themselves are
``captured.py``'s (graph inputs).
"""
from __future__ import annotations

import dis
import functools
import sys
import types
import weakref
from typing import Any, Callable, NamedTuple

import numpy as np

from .captured import _MISSING, Roots, _user_function, _user_instance, _user_module

MAX_STEPS = 10          # attribute / item steps below a root
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
    globals and the closure variables they share): every prefix of at least one step, the
    global names and closure variables themselves, and a chain ending at a method it calls."""
    found: dict[Chain, None] = {}
    _scan(code, found, nested=False, terminal=set())
    return tuple(found)


@functools.lru_cache(maxsize=512)
def terminal_chains(code: types.CodeType) -> frozenset[Chain]:
    """The chains of ``read_chains`` whose value the code uses as it is (passed, iterated,
    compared), not only as the start of a longer chain (``cfg["lr"]`` uses ``cfg`` only so:
    another key of it changing is no change of what the code read)."""
    terminal: set[Chain] = set()
    _scan(code, {}, nested=False, terminal=terminal)
    return frozenset(terminal)


def _scan(code: types.CodeType, found: dict, nested: bool, terminal: set) -> None:
    ins = [i for i in dis.get_instructions(code)
           if i.opname not in ("EXTENDED_ARG", "CACHE", "NOP")]
    for k, i in enumerate(ins):
        root = _root(i, nested)
        if root is None:
            continue
        steps: list[tuple] = []
        j = k + 1
        while j < len(ins) and len(steps) < MAX_STEPS:
            a = ins[j]
            if a.opname == "LOAD_ATTR" and not _method_load(a):
                steps.append(("attr", a.argval))
                j += 1
            elif a.opname == "LOAD_METHOD" or (a.opname == "LOAD_ATTR" and _method_load(a)):
                # a method called on what the chain reached (``self.act(x)``, ``OP.apply(x)``):
                # the function found is guarded by identity (a replaced method is seen)
                found[Chain(root, tuple(steps) + (("attr", a.argval),))] = None
                if not steps:
                    steps.append(None)   # (the root itself is not read whole)
                break
            elif a.opname in _CONSTANT_LOADS and j + 1 < len(ins) and \
                    _is_subscript(ins[j + 1]) and type(a.argval) in (int, str, float, tuple):
                steps.append(("item", a.argval))
                j += 2
            else:
                break
            found[Chain(root, tuple(steps))] = None
        else:
            if steps and steps[-1] is not None:
                terminal.add(Chain(root, tuple(steps)))
        if j < len(ins) and steps and steps[-1] is not None and not (
                ins[j].opname == "LOAD_METHOD" or
                (ins[j].opname == "LOAD_ATTR" and _method_load(ins[j]))):
            terminal.add(Chain(root, tuple(steps)))
        if not steps and root[0] in ("deref", "global"):
            # read whole, not through an attribute or item: a closure variable rebound
            # (``nonlocal k; k = 3``), a list or dict iterated (``for w in LAYERS``)
            found[Chain(root, ())] = None
            terminal.add(Chain(root, ()))
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _scan(c, found, nested=True, terminal=terminal)


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
           params: dict[str, tuple]) -> tuple[Guard, ...]:
    """The values ``chains`` lead to now that are numbers, strings, bools, None, or tuples,
    lists or dicts of them (kept as copies), and the user's methods a chain ends at (kept by
    identity): the trace's guards. ``params``: parameter name -> its root in ``roots`` (a
    bound argument, a static argument of this call, a default not passed)."""
    out: list[Guard] = []
    for chain in chains:
        root = _own_root(chain, code, params)
        if root is None:
            continue
        obj = roots.resolve_root(root)
        if obj is _MISSING or obj is None:
            continue
        found = _follow_chain(obj, chain.steps, _root_text(root, chain))
        if found is None:
            continue
        obj, steps, text = found
        if not steps and root[0] in ("global", "module_global") and \
                type(obj) not in (list, dict):
            continue   # (a global name's own value is guarded as the trace reads it)
        if type(obj) is dict and not _terminal(code, chain):
            continue   # (read at keys only: those chains guard what the code read)
        if _guardable(obj) or (steps and _user_method(obj)):
            out.append(Guard(root, steps, _snapshot(obj), text))
    return tuple(out)


def _terminal(code: types.CodeType, chain: Chain) -> bool:
    term = terminal_chains(code)
    if chain.root[0] == "resolved":   # (a helper's global chain, its root resolved)
        return any(t.steps == chain.steps and t.root[0] == "global" for t in term)
    return chain in term


def _own_root(chain: Chain, code: types.CodeType, params: dict[str, tuple]) -> tuple | None:
    """The ``Roots`` root of a chain's start in ``code``: a global, a closure variable of
    the function (not a cell of its own), a parameter of ``params``; a helper's global comes
    already resolved (``("resolved", root)``)."""
    kind, name = chain.root
    if kind == "resolved":
        return name
    if kind == "global":
        return ("global", name)
    if kind == "deref":
        return ("closure", code.co_freevars.index(name)) if name in code.co_freevars else None
    return params.get(name)


def _root_text(root: tuple, chain: Chain) -> str:
    kind, name = chain.root
    if kind != "resolved":
        return name
    return root[1] if root[0] == "global" else root[1][1]


def _follow_chain(obj: Any, steps: tuple, text: str) -> tuple[Any, tuple, str] | None:
    """``obj`` followed along ``steps`` without running the user's code: (the value, the
    steps as ``hold`` follows them, the chain's text), or None where it cannot be."""
    done: list[tuple] = []
    for how, key in steps:
        step = _step_kind(obj, how, key)
        if step is None:
            return None
        obj = _follow(obj, step, key)
        if obj is _MISSING:
            return None
        done.append((step, key))
        text += f".{key}" if how == "attr" else f"[{key!r}]"
    return obj, tuple(done), text


def _user_method(obj: Any) -> bool:
    """A function of the user's code found on a class (a method): guarded by identity."""
    return isinstance(obj, types.FunctionType) and _user_function(obj)


def _snapshot(value: Any) -> Any:
    """What a guard keeps of ``value``: a copy of a list, dict or set (the function read it
    whole; an ``append`` between calls changes it in place), else the value itself."""
    if type(value) is list:
        return [_snapshot(v) for v in value]
    if type(value) is set:
        return set(value)
    if type(value) is dict:
        return {k: _snapshot(v) for k, v in value.items()}
    if type(value) is tuple:
        return tuple(_snapshot(v) for v in value)
    return value


def _step_kind(obj: Any, how: str, key: Any) -> str | None:
    """How ``key`` of ``obj`` is followed without running the user's code, or None."""
    if how == "item":
        return "item" if isinstance(obj, dict) or type(obj) in (list, tuple) or \
            _is_namedtuple(obj) else None
    if _is_namedtuple(obj):   # (a field by name: its item; a subclass's own attribute: no)
        return "field" if key in type(obj)._fields else None
    if key == "__class__" and (_user_instance(obj) or _namespace(obj)):
        return "type"
    if not (_user_instance(obj) or _namespace(obj)
            or (isinstance(obj, types.ModuleType) and _user_module(obj))
            or (isinstance(obj, type) and _user_function(obj))):
        return None
    own = getattr(obj, "__dict__", None)
    if own is not None and key in own:
        return "attr"
    if isinstance(obj, (type, types.ModuleType)):
        return None
    found = _class_attribute(type(obj), key)
    if isinstance(found, types.MemberDescriptorType):
        return "slot"   # (a __slots__ attribute: its descriptor reads it, no user code)
    if found is _MISSING or (hasattr(type(found), "__get__") and
                             not isinstance(found, types.FunctionType)):
        return None   # (a property, a classmethod: not plain data)
    return "class"


def _namespace(obj: Any) -> bool:
    """A ``SimpleNamespace`` or an ``argparse.Namespace`` (a script's parsed options): plain
    attributes in a ``__dict__``."""
    t = type(obj)
    return t is types.SimpleNamespace or (t.__name__ == "Namespace" and
                                          t.__module__ == "argparse")


def _follow(obj: Any, step: str, key: Any) -> Any:
    """Where one step of a chain leads from ``obj`` (``_MISSING`` where it leads nowhere).
    No step runs the user's code: no property, ``__getattr__`` or ``__getitem__`` of theirs."""
    try:
        return _STEPS[step](obj, key)
    except Exception:   # noqa: BLE001 -- a broken chain: not a value the trace saw
        return _MISSING


def _step_item(obj: Any, key: Any) -> Any:
    if isinstance(obj, dict):   # (never a defaultdict's __missing__, nor a subclass's own
        return dict.__getitem__(obj, key)   # __getitem__)
    if isinstance(obj, (list, tuple)) and type(key) is int:
        return obj[key]
    return _MISSING


def _step_field(obj: Any, key: Any) -> Any:
    return tuple.__getitem__(obj, type(obj)._fields.index(key)) \
        if _is_namedtuple(obj) and key in type(obj)._fields else _MISSING


def _step_cell(obj: Any, key: Any) -> Any:   # (a closure variable of a function reached)
    return obj.__closure__[obj.__code__.co_freevars.index(key)].cell_contents


def _step_partial(obj: Any, key: Any) -> Any:   # (functools.partial's read-only attributes)
    return getattr(obj, key) if type(obj) is functools.partial else _MISSING


def _step_slot(obj: Any, key: Any) -> Any:
    found = _class_attribute(type(obj), key)
    return found.__get__(obj, type(obj)) \
        if isinstance(found, types.MemberDescriptorType) else _MISSING


def _step_attr(obj: Any, key: Any) -> Any:   # (the object's own __dict__)
    own = getattr(obj, "__dict__", None)
    return own[key] if own is not None and key in own else _MISSING


def _step_class(obj: Any, key: Any) -> Any:   # (an instance attribute of that name hides it)
    own = getattr(obj, "__dict__", None)
    if own is not None and key in own:
        return _MISSING
    found = _class_attribute(type(obj), key)
    if isinstance(found, (staticmethod, classmethod)):   # (its function: its defaults)
        return found.__func__
    return _MISSING if hasattr(type(found), "__get__") and \
        not isinstance(found, types.FunctionType) else found


_STEPS: dict[str, Callable[[Any, Any], Any]] = {
    "item": _step_item, "field": _step_field, "slot": _step_slot, "attr": _step_attr,
    "class": _step_class, "cell": _step_cell, "partial": _step_partial,
    "type": lambda obj, key: type(obj),
    "code": lambda obj, key: obj.__code__,          # (another function in its place)
    "defaults": lambda obj, key: obj.__defaults__,  # (f.__defaults__ = (...))
    "kwdefaults": lambda obj, key: obj.__kwdefaults__,  # (keyword-only defaults)
}


def _class_attribute(cls: type, key: str) -> Any:
    for c in cls.__mro__:
        d = c.__dict__
        if key in d:
            return d[key]
    return _MISSING


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


MAX_GUARDED_ITEMS = 256   # items of a tuple, list, dict or set guarded by value, at most


def _guardable(value: Any, depth: int = 4) -> bool:
    """A number, string, flag or None, or a small tuple, list, set or dict of them (a few
    levels: a list holding itself is not)."""
    if type(value) in _SCALARS or isinstance(value, np.generic):
        return not isinstance(value, np.void)
    if depth <= 0:
        return False
    if type(value) in (tuple, list, set, frozenset):
        return len(value) <= MAX_GUARDED_ITEMS and all(_guardable(v, depth - 1) for v in value)
    if type(value) is dict:
        return len(value) <= MAX_GUARDED_ITEMS and all(
            _guardable(k, depth - 1) and _guardable(v, depth - 1) for k, v in value.items())
    return False


def hold(roots: Roots, guards_: tuple[Guard, ...], key: Callable[[Any], Any]) -> bool:
    """Whether every guard's chain still leads to an equal value (``key``: the cache key
    of a static value, so that 1, 1.0 and True differ, and NaN equals NaN)."""
    return GuardCheck(guards_, key)(roots)


_EQUAL_TYPES = (bool, int, str, bytes, type(None))


class GuardCheck:
    """``hold`` for one set of guards, prepared once and run at every call: the chains'
    common prefixes (``self``, ``self.layers``, ``self.layers[3]``) are followed once, each
    step by its own function, and each guarded value's key is computed once.

    The prefixes form a tree, kept as a flat list of nodes in an order where a parent comes
    before its children (a node: its parent's index, or -1 and its root; its step's
    function and key); each guard checks one node's value."""
    __slots__ = ("_nodes", "_checks", "_key")

    def __init__(self, guards_: tuple[Guard, ...], key: Callable[[Any], Any]):
        index: dict[tuple, int] = {}
        nodes: list[tuple] = []

        def node(root: tuple, steps: tuple) -> int:
            found = index.get((root, steps))
            if found is None:
                if steps:
                    parent = node(root, steps[:-1])
                    step, k = steps[-1]
                    nodes.append((parent, _STEPS[step], k))
                else:
                    nodes.append((-1, None, root))
                found = index[(root, steps)] = len(nodes) - 1
            return found

        checks = []
        for g in guards_:
            value = g.value
            pinned = node(g.root, ()) if g.root[0] == "pinned" else -1
            matched = type(value) in (Same, SmallArray, Kinds)   # (by identity, values, kinds)
            # (a function or method found by the chain: by identity alone, no key)
            vkey = None if matched or value is _MISSING or \
                isinstance(value, types.FunctionType) else key(value)
            # where plain equality of the same type means equal keys (not for 0.0 == -0.0,
            # nor NaN): no key is computed at the call
            equal = type(value) in _EQUAL_TYPES or (
                type(value) is float and value == value and value != 0.0)
            checks.append((node(g.root, g.steps), value, matched, vkey, pinned, equal))
        self._nodes = tuple(nodes)
        self._checks = tuple(checks)
        self._key = key

    def __call__(self, roots: Roots) -> bool:
        values: list[Any] = []
        add = values.append
        for parent, follow, k in self._nodes:
            if parent < 0:
                add(roots.resolve_root(k))
                continue
            obj = values[parent]
            if obj is not _MISSING:
                try:
                    obj = follow(obj, k)
                except Exception:   # noqa: BLE001 -- a broken chain: not what the trace saw
                    obj = _MISSING
            add(obj)
        key = self._key
        for i, value, matched, vkey, pinned, equal in self._checks:
            obj = values[i]
            if obj is value:
                continue
            if pinned >= 0 and values[pinned] is _MISSING:
                continue   # (the object a helper was given has gone: the next call makes its own)
            if obj is _MISSING:
                return False
            if matched:
                if not value.matches(obj):
                    return False
            elif equal:
                if type(obj) is not type(value) or obj != value:
                    return False
            elif type(obj) is not type(value) or vkey is None or \
                    isinstance(obj, types.FunctionType) or key(obj) != vkey:
                return False
        return True


def arrays_read(roots: Roots, guards_: tuple[Guard, ...]) -> list[tuple[str, np.ndarray]]:
    """The arrays the trace read by NumPy's own operations (``SmallArray`` guards) where
    their paths lead now, with their texts: an argument the call writes must not share
    their memory (NumPy would read them after the write)."""
    out = []
    for g in guards_:
        if type(g.value) is SmallArray:
            obj = roots.resolve_root(g.root)
            for step, k in g.steps:
                if obj is _MISSING:
                    break
                obj = _follow(obj, step, k)
            if type(obj) is np.ndarray:
                out.append((g.text, obj))
    return out


def unique(guards_: tuple[Guard, ...]) -> tuple[Guard, ...]:
    """``guards_`` with each (root, steps) once: the first, taken before the trace, where
    several readers found the same place."""
    out: dict[tuple, Guard] = {}
    for g in guards_:
        out.setdefault((g.root, g.steps), g)
    return tuple(out.values())


def changed(roots: Roots, guards_: tuple[Guard, ...], key: Callable[[Any], Any]) -> str | None:
    """The text of the first guard that no longer holds (for a cache miss's explanation)."""
    for g in guards_:
        if not hold(roots, (g,), key):
            return g.text
    return None


class Pinned:
    """A root that is an object a helper's frame was given: ``resolve()`` is the object
    while it lives (``_MISSING`` once a weak reference has gone)."""
    __slots__ = ("_ref", "text")

    def __init__(self, obj: Any, text: str):
        self._ref = _ref(obj)   # (dicts, lists: no weak references; kept while the trace is)
        self.text = text

    def resolve(self) -> Any:
        obj = self._ref()
        return _MISSING if obj is _DEAD else obj

    def __repr__(self) -> str:
        return f"Pinned({self.text})"


class Same:
    """A guard's value kept by identity: the object a chain reached (or the items of the
    list, tuple or dict it reached, and their number; an array item only as an array, its
    values and layout being read at every call: ``self.params = [p - lr * g ...]`` does not
    trace again)."""
    __slots__ = ("_kind", "_refs", "_keys")

    def __init__(self, obj: Any):
        if type(obj) in (list, tuple):
            self._kind, self._keys = type(obj), None
            self._refs = tuple(_item_ref(v) for v in obj)
        elif type(obj) is dict:
            self._kind, self._keys = dict, tuple(obj)
            self._refs = tuple(_item_ref(v) for v in obj.values())
        else:
            self._kind, self._keys, self._refs = None, None, (_ref(obj),)

    def matches(self, now: Any) -> bool:
        if self._kind is None:
            return self._refs[0]() is now
        if type(now) is not self._kind or len(now) != len(self._refs):
            return False
        if self._kind is dict:
            if tuple(now) != self._keys:
                return False
            now = now.values()
        return all(type(v) is np.ndarray if r is None else r() is v
                   for r, v in zip(self._refs, now))


class SmallArray:
    """A guard's value kept as a copy of a small array the traced code reached but did not
    make a graph input (``np.sqrt(self.running_var + eps)``, ``for c in self.coef``: NumPy's
    own operations, computed once while tracing): a call that finds other values there,
    another shape or dtype, traces again."""
    __slots__ = ("copy",)
    LIMIT = 4096   # elements: a larger array is not compared at every call

    def __init__(self, value: np.ndarray):
        self.copy = value.copy()

    def matches(self, now: Any) -> bool:
        c = self.copy
        return type(now) is np.ndarray and now.shape == c.shape and now.dtype == c.dtype \
            and np.array_equal(now, c, equal_nan=c.dtype.kind in "fc")


class Kinds:
    """A guard's value kept as the kind of a container of objects the walk reached: its
    type, length (and keys), and the type of each item (``reached.py`` guards what the code
    reads of the items themselves: a list of layers rebuilt with equal ones each step does
    not trace again; an append, or a layer replaced by None or another class, does)."""
    __slots__ = ("_type", "_keys", "_types")

    def __init__(self, obj: Any):
        self._type = type(obj)
        self._keys = tuple(obj) if isinstance(obj, dict) else None
        self._types = tuple(type(v) for v in (obj.values() if isinstance(obj, dict) else obj))

    def matches(self, now: Any) -> bool:
        if type(now) is not self._type or len(now) != len(self._types):
            return False
        if self._keys is not None:
            if tuple(now) != self._keys:
                return False
            now = now.values()
        return all(type(v) is t for v, t in zip(now, self._types))


def _item_ref(v: Any) -> Any:
    return None if type(v) is np.ndarray else _ref(v)


_DEAD = object()   # what a kept reference gives once its object has gone


def _ref(obj: Any) -> Any:
    """A weak reference to ``obj`` where it takes one (giving ``_DEAD`` once it has gone:
    never equal to what a chain finds, None included), else a strong one."""
    try:
        ref = weakref.ref(obj)
    except TypeError:
        return lambda obj=obj: obj
    return lambda: _DEAD if (o := ref()) is None else o


class BeforeTrace(NamedTuple):
    guards: tuple[Guard, ...]                  # the trace's guards (``guards``)
    params: dict[str, tuple]                   # parameter name -> root (``guards``' params)
    helpers: list[types.FunctionType]          # the helpers read (``_helpers``)
    arrays: list[tuple[np.ndarray, str]]       # held read-only while it runs (``reached_arrays``)
    helper_roots: list[tuple[tuple, str, Any]]   # ``captured.Roots.helpers`` (``helper_roots``)


def before_trace(roots: Roots, plain: types.FunctionType, n_bound: int, bound_kw: dict,
                 args: tuple, kwargs: dict, static_argnums: frozenset[int],
                 static_argnames: frozenset[str]) -> BeforeTrace:
    """What a trace of this call needs of what ``plain`` reads, rooted at globals, its
    closure variables, its bound arguments (a compiled bound method's ``self``), the
    call's static arguments and the defaults it did not pass: the guards of its chains and
    its helpers', the arrays to hold read-only, the helpers' globals as roots. Random
    generators reached so are refused first (``refuse_reached_generators``)."""
    code = plain.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    params: dict[str, tuple] = {}
    defaults = plain.__defaults__ or ()
    first_default = code.co_argcount - len(defaults)
    for j in range(max(first_default, n_bound + len(args)), code.co_argcount):
        if names[j] not in kwargs and names[j] not in bound_kw:
            params[names[j]] = ("default", j - first_default)
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
    for k in (plain.__kwdefaults__ or {}):
        if k not in kwargs and k not in bound_kw:
            params[k] = ("kwdefault", k)
    helpers = _helpers(plain)
    refuse_reached_generators(roots, plain, params, helpers)
    chains = read_chains(code)
    # the defaults the call takes, read whole (``def f(x, s=1)``; ``f.__defaults__ = (2,)``
    # between calls gives the function another value)
    # (and a partial's keywords: ``p.keywords["k"] = 10.0`` between calls)
    defaults = tuple(Guard(root, (), _snapshot(value), f"the default of {name}"
                           if root[0] != "bound_kw" else f"the bound keyword {name}")
                     for name, root in params.items()
                     if root[0] in ("default", "kwdefault", "bound_kw")
                     for value in (roots.resolve_root(root),) if _guardable(value))
    return BeforeTrace((guards(roots, chains, code, params) if chains else ()) + defaults +
                       helper_guards(roots, plain, helpers), params, helpers,
                       reached_arrays(roots, plain, params, helpers),
                       helper_roots(plain, helpers))


@functools.lru_cache(maxsize=512)
def _global_loads(code: types.CodeType) -> tuple[str, ...]:
    """The global names ``code`` (and its nested code) loads."""
    names: dict[str, None] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        for i in dis.get_instructions(c):
            if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                names[i.argval] = None
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return tuple(names)


MAX_HELPER_DEPTH = 3    # levels of helper functions called from helpers that are read (``_helpers``)


def refuse_reached_generators(roots: Roots, plain: types.FunctionType,
                              params: dict[str, tuple],
                              helpers: list[types.FunctionType]) -> None:
    """NumPy random generators the function reaches other than as arguments: through an
    attribute or constant item of what it reaches (``CFG.rng``, ``STATE["rng"]``), or as a
    global or closure variable of a helper function it calls (``AUG_RNG`` in
    ``add_noise``), are refused as a global, closure or ``self`` generator is
    (``context.refuse_random_state``): their draws would be made once, while tracing, and
    frozen."""
    from .context import RANDOM_TYPES, refuse_random_state

    def check(obj: Any, steps: tuple, text: str) -> None:
        found = _follow_chain(obj, steps, text)
        if found is not None and isinstance(found[0], RANDOM_TYPES):
            refuse_random_state(found[0], found[2])

    code = plain.__code__
    for chain in read_chains(code):
        root = _own_root(chain, code, params) if chain.steps else None
        obj = roots.resolve_root(root) if root is not None else _MISSING
        if obj is not _MISSING:
            check(obj, chain.steps, chain.root[1])
    for fn in helpers:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                check(cell.cell_contents, (), f"the closure variable {name!r} of "
                      f"{fn.__qualname__}")
            except ValueError:   # an empty cell
                pass
        for name in _global_loads(fn.__code__):
            value = fn.__globals__.get(name, _MISSING)
            if value is not _MISSING:
                check(value, (), f"the global {name!r} of {fn.__qualname__}")
        for chain in read_chains(fn.__code__):
            value = fn.__globals__.get(chain.root[1], _MISSING)
            if chain.root[0] == "global" and chain.steps and value is not _MISSING:
                check(value, chain.steps, f"{chain.root[1]} in {fn.__qualname__}")


def reached_arrays(roots: Roots, plain: types.FunctionType, params: dict[str, tuple],
                   helpers: list[types.FunctionType]) -> list[tuple[np.ndarray, str]]:
    """The NumPy arrays the function's own code names other than as arguments and global
    names (``self.t``, a closure's ``w``, a default ``b``, ``cfg.state``) and the arrays
    global to the helper functions it calls (``COUNT`` in ``record()``), with their text:
    the trace holds them read-only, so that an in-place update with no traced operand
    (``self.t += 1``: NumPy's own operation, run once while tracing) raises instead of
    being frozen into the trace."""
    out: dict[int, tuple[np.ndarray, str]] = {}

    def note(obj: Any, steps: tuple, text: str) -> None:
        found = _follow_chain(obj, steps, text)
        if found is not None and type(found[0]) is np.ndarray and found[0].flags.writeable:
            out.setdefault(id(found[0]), (found[0], found[2]))

    code = plain.__code__
    for chain in read_chains(code):
        if chain.root[0] == "global" and not chain.steps:
            continue   # (a global array read by name is a graph input: written back)
        root = _own_root(chain, code, params)
        obj = roots.resolve_root(root) if root is not None else _MISSING
        if obj is not _MISSING:
            note(obj, chain.steps, chain.root[1])
    for name in _locals_read(code):   # (a default array used by name: b += 1)
        root = params.get(name)
        if root is not None and root[0] == "default":
            note(roots.resolve_root(root), (), f"the default of {name}")
    for fn in helpers:
        for name in _global_loads(fn.__code__):
            value = fn.__globals__.get(name, _MISSING)
            if value is not _MISSING:
                note(value, (), f"the global {name!r} of {fn.__qualname__}")
    return list(out.values())


@functools.lru_cache(maxsize=512)
def _locals_read(code: types.CodeType) -> tuple[str, ...]:
    return tuple({i.argval: None for i in dis.get_instructions(code)
                  if i.opname in _FAST_LOADS and isinstance(i.argval, str)})


def _helpers(plain: types.FunctionType) -> list[types.FunctionType]:
    """The user's functions ``plain`` calls by global name, and those they call (up to
    ``MAX_HELPER_DEPTH`` levels)."""
    out: list[types.FunctionType] = []
    seen: set[int] = {id(plain.__code__)}
    todo = [(plain, 0)]
    while todo:
        fn, depth = todo.pop()
        if depth >= MAX_HELPER_DEPTH:
            continue
        for name in _global_loads(fn.__code__):
            value = _plain(fn.__globals__.get(name, _MISSING))
            if isinstance(value, types.FunctionType) and _user_function(value) and \
                    id(value.__code__) not in seen:
                seen.add(id(value.__code__))
                out.append(value)
                todo.append((value, depth + 1))
    return out


def _plain(value: Any) -> Any:
    """A compiled function called by the function (inlined into its trace) as the Python
    function it wraps (``functools.update_wrapper``'s ``__wrapped__``)."""
    wrapped = getattr(value, "__wrapped__", None) if not isinstance(value, types.FunctionType) \
        and callable(value) else None
    return wrapped if isinstance(wrapped, types.FunctionType) else value


def _global_root(fn: types.FunctionType, plain: types.FunctionType, name: str) -> tuple | None:
    """The root of ``fn``'s global ``name`` that the compiled function's roots resolve."""
    return _global_root_in(fn.__globals__, fn.__module__, plain, name)


def _global_root_in(globals_: dict, module_name: Any, plain: types.FunctionType | None,
                    name: str) -> tuple | None:
    """The root of the global ``name`` of code run with ``globals_`` (of the module
    ``module_name``) that the compiled function's roots resolve, or None."""
    if plain is not None and globals_ is plain.__globals__:
        return ("global", name)
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    if module is not None and vars(module) is globals_:
        return ("module_global", (module_name, name))
    return None


def helper_guards(roots: Roots, plain: types.FunctionType,
                  helpers: list[types.FunctionType]) -> tuple[Guard, ...]:
    """Guards of the numbers the helper functions read as globals (``SCALE`` in ``def
    scale(x): return x * SCALE``) and through their globals' attributes and constant items
    (``CFG.dt``): a call that finds another value there traces again."""
    out: list[Guard] = []
    for fn in helpers:
        g = fn.__globals__
        for name in _global_loads(fn.__code__):
            value = g.get(name, _MISSING)
            root = _global_root(fn, plain, name)
            if root is not None and value is not _MISSING and _guardable(value):
                out.append(Guard(root, (), _snapshot(value), f"{name} (in {fn.__qualname__})"))
        for chain in read_chains(fn.__code__):
            kind, name = chain.root
            root = _global_root(fn, plain, name) if kind == "global" else None
            if root is None or not chain.steps:
                continue
            found = guards(roots, (Chain(("resolved", root), chain.steps),), fn.__code__, {})
            out += [g._replace(text=f"{g.text} (in {fn.__qualname__})") for g in found]
    return tuple(out)


def helper_roots(plain: types.FunctionType, helpers: list[types.FunctionType]
                 ) -> list[tuple[tuple, str, Any]]:
    """The globals of the helper functions ``plain`` calls (``MEAN`` in ``def normalize(x):
    return x - MEAN``), as roots of the captured-array walk (``captured.Roots.helpers``):
    an array among them is read at every call, as the function's own global arrays are
    (``_global_root``: the function's module's name, or the helper's module's)."""
    out: dict[tuple, tuple[tuple, str, Any]] = {}
    for fn in helpers:
        for name in _global_loads(fn.__code__):
            value = fn.__globals__.get(name, _MISSING)
            if value is _MISSING or isinstance(value, (types.ModuleType, type)) or \
                    callable(value):
                continue   # (helpers, modules, classes: nothing the walk reads as data)
            root = _global_root(fn, plain, name)
            if root is not None:
                out.setdefault(root, (root, name, value))
    return list(out.values())
