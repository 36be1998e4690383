"""Arrays the traced function reaches other than through its arguments and global names:
closure variables, default arguments, attributes of a bound object (``self.w`` of a
compiled method), items of global containers (``PARAMS["w"]``), attributes of global
namespaces and of the user's modules (``cfg.w``, ``mod.W``).

NumPy reads such an array's current values at every call, so freezing it into the graph
as a constant is a silent wrong result after ``self.w -= lr * g`` (an in-place update) or
``self.w = self.w - lr * g`` (a new array bound to the same place). Instead, when such an
array meets traced values (the trace turns it into a graph node: ``build.constant``), it
becomes a graph input like a global array, found again at every call by its *path*: the
root (closure cell, default, bound argument, global name) and the attribute and item
steps from there. The call binds whatever array the path leads to then; when it leads to
something else (another shape or dtype, not an array, nothing), the call traces again.

Paths are found by a bounded walk from the roots (``MAX_DEPTH`` steps, ``MAX_VISITS``
objects), made once per trace when the first unknown array turns up (and again for global
names read after it): through dicts, lists and tuples (their subclasses, namedtuples), a
container's length being part of the path; ``SimpleNamespace``s; the user's modules,
classes (their attributes), functions (closures and defaults) and instances (``__dict__``,
``__slots__``, class attributes). An array found at several places must stay one array at
all of them. Views of such an array (``self.w.T``, ``self.w[0]``) are
views of its input. What is *not* seen: a value NumPy computed from such an array outside
the traced operations (``self.w * 2`` with no traced operand is computed once, while
tracing), complex arrays, and scalars (a number reached this way is a constant of the
trace, checked at every call when the function's own code reads it: ``reads.py``;
docs/sharp-bits.md)."""
from __future__ import annotations

import collections
import functools
import os
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

MAX_DEPTH = 6          # attribute / item steps below a root
MAX_VISITS = 20000     # objects looked at in one walk (arrays beyond: constants)
MAX_OTHER_PATHS = 4    # other paths to one array that must keep leading to it
CAPTURED_PREFIX = "<captured "
_MISSING = object()
CAPTURABLE = _ARRAY_TYPES = (np.ndarray, np.memmap)   # (build.py and context.py ask too)
_DTYPES = frozenset(np.dtype(d) for d in (   # the real dtypes the graph holds (native order)
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))


@dataclass(frozen=True)
class Path:
    """Where an array was found: ``root`` (("closure", i), ("default", i),
    ("kwdefault", name), ("bound", i), ("bound_kw", name), ("static", i), ("static_kw", name)
    or ("global", name)) and the steps from it, each (kind, key, n): "attr" (an entry of the
    object's ``__dict__``, or a class's), "item" (an item of a container of n items, whose
    length is part of the path: code reading ``ws[-1]`` reads another item after an
    append), "slot" (a ``__slots__`` attribute), "class" (a class attribute, unless the
    instance has its own of that name), "cell", "fdefault" and "fkwdefault" (a user
    function's closure cell, default and keyword-only default)."""
    root: tuple
    steps: tuple
    text: str

    @property
    def input_name(self) -> str:
        """The graph input's name (in ``Graph.globals``), never a Python identifier."""
        return f"{CAPTURED_PREFIX}{self.text}>"


class Captured(NamedTuple):
    """What a trace used of an array reached by ``path``: the array, its shape and dtype
    then (an in-place ``x.shape = ...`` changes the same object), and a copy of its values
    when the trace used them (else None)."""
    path: Path
    array: np.ndarray
    shape: tuple
    dtype: np.dtype
    values: np.ndarray | None = None
    also: tuple = ()   # other paths that led to the same array: they must still agree


class Roots:
    """A compiled function's roots: its plain function (closure, defaults), the arguments
    bound before the call (``functools.partial``, a bound method's object), its globals,
    and the call's static arguments (``use_statics``: per call and thread, as a static
    ``self`` of a method compiled in a class body is the call's own). ``resolve(path)``
    follows a path now (``_MISSING`` where it breaks)."""

    def __init__(self, plain: types.FunctionType | None, bound: tuple, bound_kw: dict):
        self.plain, self.bound, self.bound_kw = plain, bound, bound_kw
        self.globals: dict = plain.__globals__ if plain is not None else {}
        self._call = threading.local()
        # globals of the helper functions the function calls, as roots (root, text, value):
        # ("global", name) in the function's own module, ("module_global", (module, name))
        # in another (set before each trace: reads.helper_roots)
        self.helpers: list[tuple[tuple, str, Any]] = []

    def use_statics(self, args: tuple, kwargs: dict, argnums: frozenset[int],
                    argnames: frozenset[str]) -> None:
        """The static arguments of the call this thread makes now (roots of paths)."""
        statics = {("static", i): args[i] for i in argnums if i < len(args)}
        statics.update({("static_kw", k): kwargs[k] for k in argnames if k in kwargs})
        self._call.statics = statics

    def _statics(self) -> dict:
        return getattr(self._call, "statics", None) or {}

    def fixed(self) -> list[tuple[tuple, str, Any]]:
        """The roots other than global names: (root, text, value)."""
        out: list[tuple[tuple, str, Any]] = []
        fn = self.plain
        names = fn.__code__.co_varnames[:fn.__code__.co_argcount] if fn is not None else ()
        for i, v in enumerate(self.bound):
            label = names[i] if i < len(names) else f"bound argument {i}"
            out.append((("bound", i), label, v))
        for k, v in self.bound_kw.items():
            out.append((("bound_kw", k), k, v))
        for (kind, key), v in self._statics().items():
            if type(v) in _ARRAY_TYPES:
                continue   # a static array itself is a constant of the trace (by its values)
            j = len(self.bound) + key if kind == "static" else None
            label = key if j is None else names[j] if j < len(names) else f"argument {key}"
            out.append(((kind, key), label, v))
        if fn is None:
            return out
        for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars, fn.__closure__ or ())):
            try:
                out.append((("closure", i), name, cell.cell_contents))
            except ValueError:   # an empty cell
                pass
        defaults = fn.__defaults__ or ()
        first = fn.__code__.co_argcount - len(defaults)
        for i, v in enumerate(defaults):
            out.append((("default", i), f"default of {names[first + i]}", v))
        for k, v in (fn.__kwdefaults__ or {}).items():
            out.append((("kwdefault", k), f"default of {k}", v))
        return out

    def resolve(self, path: Path) -> Any:
        obj = self.resolve_root(path.root)
        if obj is _MISSING:
            return _MISSING
        try:
            for how, k, length in path.steps:
                if how == "attr":
                    obj = vars(obj)[k]
                elif how == "item":
                    if len(obj) != length:   # (ws[-1] after ws.append(w): another item)
                        return _MISSING
                    obj = obj[k]
                elif how == "slot":
                    obj = getattr(obj, k)
                elif how == "class":   # (an instance attribute of that name hides it)
                    own = getattr(obj, "__dict__", None) or {}
                    obj = own[k] if k in own else class_member(type(obj), k)
                elif how == "cell":
                    obj = obj.__closure__[k].cell_contents
                elif how == "fkwdefault":
                    obj = obj.__kwdefaults__[k]
                else:   # "fdefault"
                    obj = obj.__defaults__[k]
        except Exception:   # noqa: BLE001 -- a broken path: the call traces again
            return _MISSING
        return obj

    def resolve_root(self, root: tuple) -> Any:
        """The object at ``root`` now (``_MISSING`` where there is none)."""
        kind, key = root
        try:
            if kind == "closure":
                obj = self.plain.__closure__[key].cell_contents
            elif kind == "default":
                obj = self.plain.__defaults__[key]
            elif kind == "kwdefault":
                obj = self.plain.__kwdefaults__[key]
            elif kind == "bound":
                obj = self.bound[key]
            elif kind == "bound_kw":
                obj = self.bound_kw[key]
            elif kind in ("static", "static_kw"):
                obj = self._statics()[(kind, key)]
            elif kind == "module_global":
                obj = vars(sys.modules[key[0]])[key[1]]
            elif kind == "pinned":   # (an object a helper was given: trace/frames.py)
                obj = key.resolve()
            else:
                obj = self.globals[key]
        except Exception:   # noqa: BLE001 -- a broken path: the call traces again
            return _MISSING
        return obj


def still_holds(roots: Roots, c: Captured) -> bool:
    """Whether ``c.path`` still leads to an array the trace's graph can read (a plain array
    of the shape and dtype the trace saw: the same one or another); for an array the trace
    used by value, holding those values."""
    now = roots.resolve(c.path)
    if not (type(now) in _ARRAY_TYPES and now.shape == c.shape and now.dtype == c.dtype):
        return False
    if any(roots.resolve(p) is not now for p in c.also):
        return False   # the same array at two places then, two arrays now
    return c.values is None or np.array_equal(now, c.values,
                                              equal_nan=c.values.dtype.kind in "fc")


def current_array(roots: Roots, path: Path) -> np.ndarray:
    """The array ``path`` leads to now (the call checked ``still_holds`` first)."""
    return roots.resolve(path)


class CapturedArrays:
    """One trace's captured arrays: the walk's findings (``id`` -> (array, path)), and the
    graph inputs made for those the graph used. ``make_input(array, name)`` makes a graph
    input (a ``Tracer``); ``global_names()`` the global names read so far (new roots)."""

    def __init__(self, roots: Roots, make_input: Callable[[np.ndarray, str], Any],
                 global_names: Callable[[], list[str]]):
        self.roots = roots
        self._make_input = make_input
        self._global_names = global_names
        self._found: dict[int, tuple[np.ndarray, Path]] | None = None
        self._by_owner: dict[int, list[tuple[np.ndarray, Path]]] = {}
        self._also: dict[int, list[Path]] = {}   # other paths to a found array
        self._noted: dict[int, np.ndarray] = {}  # arrays given to NumPy functions (note_use)
        self._walked_globals: set[str] = set()
        self._tracers: dict[int, Any] = {}
        # what the trace used, by name: graph inputs (``Path.input_name``), and arrays used
        # by their values (that name + " (values)": ``Captured.values`` a copy of them)
        self.used: dict[str, Captured] = {}

    # --------------------------------------------------------------- the walk
    def _walk(self, roots: list[tuple[tuple, str, Any]]) -> None:
        found = self._found
        visited: set[int] = set()
        queue = collections.deque((value, root, (), text, 0) for root, text, value in roots)
        visits = 0
        while queue and visits < MAX_VISITS:
            obj, root, steps, text, depth = queue.popleft()
            if id(obj) in visited:
                if type(obj) in _ARRAY_TYPES and id(obj) in found and found[id(obj)][0] is obj:
                    also = self._also.setdefault(id(obj), [])
                    if len(also) < MAX_OTHER_PATHS:   # (the same array elsewhere too)
                        also.append(Path(root, steps, text))
                continue
            visited.add(id(obj))
            visits += 1
            if type(obj) in _ARRAY_TYPES:
                if obj.dtype.newbyteorder("=") in _DTYPES and id(obj) not in found:
                    found[id(obj)] = (obj, Path(root, steps, text))
                    self._by_owner.setdefault(id(_owner(obj)), []).append(found[id(obj)])
                continue
            if depth >= MAX_DEPTH:
                continue
            size = len(obj) if isinstance(obj, (dict, list, tuple)) else None
            for how, key, child, label in _children(obj, text, MAX_VISITS - visits):
                queue.append((child, root, steps + ((how, key, size),), label, depth + 1))

    def _ensure_walked(self) -> bool:
        """Walk the roots not walked yet; whether there were any."""
        new = []
        if self._found is None:
            self._found = {}
            new += self.roots.fixed()
            # (a helper's globals: x - MEAN in a helper of the function reads MEAN)
            for root, text, value in self.roots.helpers:
                if root[0] == "global":
                    self._walked_globals.add(root[1])
                new.append((root, text, value))
        names = [n for n in self._global_names() if n not in self._walked_globals]
        for n in names:
            self._walked_globals.add(n)
            if n in self.roots.globals:
                new.append((("global", n), n, self.roots.globals[n]))
        if not new:
            return False
        self._walk(new)
        return True

    # --------------------------------------------------------------- lookup
    def tracer_for(self, arr: np.ndarray) -> Any:
        """The traced value standing for ``arr`` when the walk found it (or the array it
        views), else None (an array the trace made, or one it cannot find: a constant)."""
        hit = self._tracers.get(id(arr))
        if hit is not None and hit[0] is arr:
            return hit[1]
        found = self._lookup(arr)
        if found is None and self._ensure_walked():
            found = self._lookup(arr)
        if found is None:
            return None
        base, path = found
        name = path.input_name
        if name not in self.used or id(base) not in self._tracers:
            self.used[name] = Captured(path, base, base.shape, base.dtype,
                                       also=tuple(self._also.get(id(base), ())))
            self._tracers[id(base)] = (base, self._make_input(base, name))
        t = self._tracers[id(base)][1]
        if base is not arr:
            t = _view_of(t, base, arr)
            if t is None:
                return None
            self._tracers[id(arr)] = (arr, t)
        return t

    def fixed_value(self, arr: np.ndarray) -> None:
        """``arr`` is used by its values while tracing (a boolean index, whose count of True
        elements decides the result's shape): when the walk found it (or the array it
        views), a call whose array there holds other values traces again."""
        found = self._lookup(arr)
        if found is None and self._ensure_walked():
            found = self._lookup(arr)
        if found is None:
            return
        base, path = found
        key = f"{path.input_name} (values)"
        if key not in self.used:
            self.used[key] = Captured(path, base, base.shape, base.dtype, base.copy(),
                                      tuple(self._also.get(id(base), ())))

    def fixed_global(self, name: str, arr: np.ndarray) -> None:
        """The global array ``name`` (a graph input) is also used by its values while
        tracing (``build.needed_value``): a call where it holds other values traces again."""
        key = f"global {name} (values)"
        if key not in self.used:
            self.used[key] = Captured(Path(("global", name), (), name), arr, arr.shape,
                                      arr.dtype, arr.copy())

    def note_use(self, value: Any) -> None:
        """``value`` (an argument of a NumPy function called on traced values) may be read
        by its values while tracing (np.digitize's bins, np.put's indices, a quantile's q):
        if it is an array the walk finds and the trace does not make it an input, its
        values are fixed by the trace (``finish``)."""
        if type(value) in _ARRAY_TYPES:
            self._noted[id(value)] = value
        elif type(value) in (list, tuple):
            for v in value:
                if type(v) in _ARRAY_TYPES:
                    self._noted[id(v)] = v

    def finish(self) -> None:
        """At the end of the trace: arrays given to NumPy functions that did not become
        graph inputs were used by their values, or not at all (``note_use``)."""
        inputs = {id(c.array) for name, c in self.used.items() if c.values is None}
        if self._noted:
            self._ensure_walked()
        for arr in self._noted.values():
            found = self._lookup(arr)
            if found is not None and id(found[0]) not in inputs:
                self.fixed_value(arr)

    def _lookup(self, arr: np.ndarray) -> tuple[np.ndarray, Path] | None:
        """The array found by the walk that ``arr`` is, or whose memory ``arr`` views (NumPy
        makes every view's ``base`` the array owning the memory, so views of a found array
        are found through their owner)."""
        if self._found is None:
            return None
        hit = self._found.get(id(arr))
        if hit is not None and hit[0] is arr:
            return hit
        # the smallest found array whose memory holds arr's (self.W.T of self.W, a view of
        # self.flat: self.W, whose rebinding must be seen)
        def specific(cand: tuple) -> tuple:   # fewer bytes; then a view over its owner
            return (cand[0].nbytes, cand[0].base is None)
        best = None
        for cand in self._by_owner.get(id(_owner(arr)), ()):
            if _within(arr, cand[0]) and (best is None or specific(cand) < specific(best)):
                best = cand
        return best


def _owner(a: np.ndarray) -> Any:
    return a.base if a.base is not None else a


def _memory_order(arr: np.ndarray) -> tuple[int, ...] | None:
    """The axes of ``arr`` from the largest stride to the smallest when its memory is dense
    (a C-contiguous array, transposed: ``init.T``, Fortran order), else None."""
    order = tuple(sorted(range(arr.ndim), key=lambda d: -arr.strides[d]))
    expect = arr.itemsize
    for d in reversed(order):
        if arr.shape[d] != 1 and arr.strides[d] != expect:
            return None
        expect *= arr.shape[d]
    return order


def _within(view: np.ndarray, arr: np.ndarray) -> bool:
    """Whether every element of ``view`` lies in ``arr``'s memory, that memory dense (so
    that the view is a strided view of ``arr``'s elements in memory order)."""
    if view.dtype != arr.dtype or _memory_order(arr) is None or view.size == 0:
        return False
    start = arr.__array_interface__["data"][0]
    v0 = view.__array_interface__["data"][0]
    lo = v0 + sum(min(0, (n - 1) * s) for n, s in zip(view.shape, view.strides))
    hi = v0 + sum(max(0, (n - 1) * s) for n, s in zip(view.shape, view.strides))
    return start <= lo and hi + view.itemsize <= start + arr.nbytes


def _view_of(t: Any, base: np.ndarray, view: np.ndarray) -> Any:
    """``view`` (an array viewing ``base``'s memory) as a view of ``t`` (base's traced
    input): elements at the view's offset and strides in base's memory, in memory order."""
    from .memory_views import as_strided
    item = base.dtype.itemsize
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if start % item or any(s % item for s in view.strides):
        return None   # not whole elements of base: a constant, as before
    order = _memory_order(base)
    flat = (t if order == tuple(range(base.ndim)) else t.transpose(order)).reshape(-1)
    offset = start // item
    if offset:
        flat = flat[offset:]
    return as_strided(flat, view.shape, view.strides, False)


def _children(obj: Any, text: str, limit: int) -> list[tuple[str, Any, Any, str]]:
    """(step kind, key, value, path text) of the objects ``obj`` holds that the walk
    follows (at most ``limit``; ``Roots.resolve`` follows each kind of step)."""
    found: list[tuple[str, Any, Any, str]] = []

    def add(how: str, key: Any, value: Any, label: str) -> bool:
        if _worth_visiting(value):
            found.append((how, key, value, label))
        return len(found) >= limit

    if isinstance(obj, dict):          # (OrderedDict, defaultdict too)
        for k, v in list(obj.items()):
            if type(k) in (str, int) and add("item", k, v, f"{text}[{k!r}]"):
                break
    elif isinstance(obj, (list, tuple)):   # (namedtuples too)
        fields = getattr(type(obj), "_fields", None)
        for i, v in enumerate(list(obj)):
            label = f"{text}.{fields[i]}" if fields and i < len(fields) else f"{text}[{i}]"
            if add("item", i, v, label):
                break
    elif isinstance(obj, types.FunctionType):   # a helper of the user's: its closure, defaults
        code = obj.__code__
        for i, (name, cell) in enumerate(zip(code.co_freevars, obj.__closure__ or ())):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if add("cell", i, value, f"{text}.<closure {name}>"):
                return found
        for i, v in enumerate(obj.__defaults__ or ()):
            if add("fdefault", i, v, f"{text}.<default {i}>"):
                return found
        for k, v in (obj.__kwdefaults__ or {}).items():
            if add("fkwdefault", k, v, f"{text}.<default {k}>"):
                return found
    elif isinstance(obj, type):   # a class of the user's: its attributes (Model.table)
        for k, v in list(vars(obj).items()):
            if type(k) is str and not k.startswith("__") and add("attr", k, v, f"{text}.{k}"):
                break
    elif type(obj) is types.SimpleNamespace or (type(obj) is types.ModuleType and
                                                 _user_module(obj)) or _user_instance(obj):
        own = vars(obj) if isinstance(getattr(obj, "__dict__", None), dict) else {}
        for k, v in list(own.items()):
            if type(k) is str and not k.startswith("__") and add("attr", k, v, f"{text}.{k}"):
                return found
        if type(obj) is types.ModuleType or type(obj) is types.SimpleNamespace:
            return found
        for k in _slot_names(type(obj)):   # __slots__ attributes
            try:
                v = getattr(obj, k)
            except AttributeError:
                continue
            if add("slot", k, v, f"{text}.{k}"):
                return found
        for k, v in list(vars(type(obj)).items()):   # class attributes that are arrays
            if type(v) in _ARRAY_TYPES and k not in own and add("class", k, v, f"{text}.{k}"):
                return found
        # methods (inherited ones, static and class methods too) whose defaults hold arrays:
        # self.act(a) with def act(self, a, w=...)
        for k in {k for c in type(obj).__mro__[:-1] for k in vars(c)}:
            v = class_member(type(obj), k) if k not in own else None
            if isinstance(v, types.FunctionType) and _holds_array_defaults(v) and \
                    add("class", k, v, f"{text}.{k}"):
                return found
    return found


def _slot_names(cls: type) -> list[str]:
    names = []
    for c in cls.__mro__:
        slots = vars(c).get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [n for n in slots if n != "__dict__"]
    return names


def class_member(cls: type, key: str) -> Any:
    """``cls``'s attribute ``key`` as its class dict along the MRO holds it, a static or
    class method's function unwrapped (no descriptor of the user's runs); KeyError where
    no class has it."""
    for c in cls.__mro__:
        d = vars(c)
        if key in d:
            v = d[key]
            return v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
    raise KeyError(key)


def _holds_array_defaults(fn: types.FunctionType) -> bool:
    """Whether a function's defaults (positional or keyword-only) hold an array."""
    return any(type(v) in _ARRAY_TYPES for v in
               (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()))


def _worth_visiting(v: Any) -> bool:
    return type(v) in _ARRAY_TYPES or isinstance(v, (dict, list, tuple)) or \
        type(v) in (types.SimpleNamespace, types.ModuleType) or _user_instance(v) or \
        (isinstance(v, (types.FunctionType, type)) and _user_function(v))


def _user_function(fn: Any) -> bool:
    """A function or class of the user's code (whose closure and defaults, or attributes,
    may hold arrays)."""
    mod = sys.modules.get(getattr(fn, "__module__", None) or "")
    return mod is not None and (mod.__name__ == "__main__" or _user_module(mod))


def _user_module(mod: types.ModuleType) -> bool:
    """A module of the user's (not the standard library's, site-packages' or tracearray's;
    one made at run time, ``types.ModuleType("cfg")``, is the user's)."""
    path = getattr(mod, "__file__", None)
    if isinstance(path, str):
        return _user_file(path)
    return getattr(mod, "__name__", None) not in sys.builtin_module_names


@functools.lru_cache(maxsize=1024)
def _user_file(path: str) -> bool:
    from .context import _library_roots
    return not os.path.abspath(path).startswith(_library_roots())


def _user_instance(obj: Any) -> bool:
    """An instance of a class defined in the user's code (attributes in a ``__dict__`` or
    ``__slots__``)."""
    t = type(obj)
    if isinstance(obj, (type, types.ModuleType, types.FunctionType, dict, list, tuple)):
        return False
    if not isinstance(getattr(obj, "__dict__", None), dict) and not _slot_names(t):
        return False
    name = getattr(t, "__module__", None)
    mod = sys.modules.get(name) if isinstance(name, str) else None
    return mod is not None and (name == "__main__" or _user_module(mod))


# ------------------------------------------------------------------ stores while tracing

_SNAPSHOT_DEPTH = 3          # the roots' own state, and of what they hold, two steps down
_SNAPSHOT_CONTAINERS = 256   # at most this many dicts, lists and objects copied per trace
_SNAPSHOT_ITEMS = 4096       # containers larger than this are not copied


class StateSnapshot(NamedTuple):
    """Shallow copies of the state a compiled function reaches directly (``snapshot``): a
    traced value stored there while tracing (``self.w = self.w - g``, ``nonlocal w; w =
    ...``, ``cache["x"] = y``, ``HISTORY.append(y)``) is found after the trace, and then
    every change the trace made there is undone (``restore``)."""
    containers: list          # (label, dict or list, its copy, attribute dict?, constants
                              # may stay: a helper's memo of constants)
    cells: list               # (label, closure cell, its contents)


def snapshot(roots: Roots) -> StateSnapshot:
    """The state of the roots' objects (the bound object, static arguments, closures,
    defaults, and the global containers and objects the function names), and of the objects
    they hold (``_SNAPSHOT_DEPTH``): attribute dicts, dicts, lists; the closure's cells."""
    containers: list = []
    seen: set[int] = set()

    def visit(label: str, obj: Any, depth: int, constants_ok: bool = False) -> None:
        if id(obj) in seen or len(seen) >= _SNAPSHOT_CONTAINERS:
            return
        if isinstance(obj, (dict, list)):
            state, attr = obj, False
        elif type(obj) is types.SimpleNamespace or _user_instance(obj):
            state, attr = getattr(obj, "__dict__", None), True
            if not isinstance(state, dict):
                return
        else:
            return
        if len(state) > _SNAPSHOT_ITEMS:
            return
        seen.add(id(obj))
        copy = dict(state) if isinstance(state, dict) else list(state)
        containers.append((label, state, copy, attr, constants_ok))
        if depth + 1 < _SNAPSHOT_DEPTH:
            items = copy.items() if isinstance(copy, dict) else enumerate(copy)
            for k, v in items:
                visit(f"{label}.{k}" if attr else f"{label}[{k!r}]", v, depth + 1,
                      constants_ok)

    for _root, text, value in roots.fixed():
        visit(text, value, 0)
    fn = roots.plain
    cells = []
    if fn is not None:
        for name in fn.__code__.co_names:   # global containers the function names
            value = roots.globals.get(name)
            if value is not None and not isinstance(value, types.ModuleType):
                visit(f"the global {name}", value, 0)
        _visit_helpers(fn, visit)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                cells.append((name, cell, cell.cell_contents))
            except ValueError:   # an empty cell
                pass
    return StateSnapshot(containers, cells)


_HELPER_DEPTH = 3      # helpers of helpers whose defaults and closures snapshot() visits
_HELPER_COUNT = 64


def _visit_helpers(fn: types.FunctionType, visit: Callable) -> None:
    """The containers in the defaults and closures of the user's functions the compiled
    function can call: the helpers its code names (globals and closure variables), the
    helpers they name in turn (``_HELPER_DEPTH`` levels), a partial's function and
    arguments, and a user object's methods: a memo there (def h(x, _c={}): _c[n] = x * 2)
    outlives the call as a global's does. (A memo of constants, np.eye(n) by n, may stay:
    later traces read the constant, Tracer._after_its_trace.)"""
    seen: set[int] = {id(fn)}
    todo: list[tuple[Any, str, int]] = []

    def named_by(f: types.FunctionType, depth: int) -> None:
        codes = [f.__code__]      # (and the lambdas and comprehensions defined in it)
        for code in codes:
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in code.co_names:
                todo.append((f.__globals__.get(name), name, depth))
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                todo.append((cell.cell_contents, name, depth))
            except ValueError:   # an empty cell
                pass

    named_by(fn, 1)
    while todo and len(seen) < _HELPER_COUNT:
        value, name, depth = todo.pop()
        if value is None or id(value) in seen or depth > _HELPER_DEPTH:
            continue
        seen.add(id(value))
        if isinstance(value, functools.partial):
            todo.append((value.func, name, depth))
            for k, v in enumerate(value.args):
                visit(f"argument {k} of the partial {name}", v, 0, True)
            for k, v in value.keywords.items():
                visit(f"argument {k!r} of the partial {name}", v, 0, True)
        elif isinstance(value, types.MethodType):
            todo.append((value.__func__, name, depth))
        elif _user_instance(value):
            for c in type(value).__mro__[:-1]:
                for k, v in vars(c).items():
                    if isinstance(v, (staticmethod, classmethod)):
                        v = v.__func__
                    if isinstance(v, types.FunctionType):
                        todo.append((v, f"{name}.{k}", depth))
        elif isinstance(value, types.FunctionType) and _user_function(value):
            for k, v in enumerate(value.__defaults__ or ()):
                visit(f"the default {k} of {name}", v, 0, True)
            for k, v in (value.__kwdefaults__ or {}).items():
                visit(f"the default {k!r} of {name}", v, 0, True)
            for var, cell in zip(value.__code__.co_freevars, value.__closure__ or ()):
                try:
                    visit(f"the variable {var!r} of {name}", cell.cell_contents, 0, True)
                except ValueError:   # an empty cell
                    pass
            named_by(value, depth + 1)


def holds_tracer(value: Any, depth: int = 3) -> bool:
    """Whether ``value`` is a traced value or a tuple, list or dict holding one (a few levels
    down)."""
    from .context import _is_tracer
    if _is_tracer(value):
        return True
    if depth <= 0:
        return False
    if isinstance(value, (tuple, list)):
        return any(holds_tracer(v, depth - 1) for v in value[:_SNAPSHOT_ITEMS])
    if isinstance(value, dict):
        return any(holds_tracer(v, depth - 1) for v in list(value.values())[:_SNAPSHOT_ITEMS])
    return False


def _holds_traced_data(value: Any, depth: int = 3) -> bool:
    """``holds_tracer`` of traced values that are not constants (a value made from
    constants alone, known while tracing, may stay in a helper's memo)."""
    from .build import known_value
    from .tracer import Tracer
    if isinstance(value, Tracer):
        return known_value(value._node) is None
    if depth > 0 and isinstance(value, (tuple, list)):
        return any(_holds_traced_data(v, depth - 1) for v in value[:_SNAPSHOT_ITEMS])
    if depth > 0 and isinstance(value, dict):
        return any(_holds_traced_data(v, depth - 1)
                   for v in list(value.values())[:_SNAPSHOT_ITEMS])
    return holds_tracer(value, 0)


def restore(snap: StateSnapshot) -> list[str]:
    """Where the trace stored traced values into the snapshot's state, in words; when it
    did, every change the trace made there is undone (the values before put back, new keys
    removed), so that the objects are as the call found them."""
    found: list[str] = []
    for label, state, copy, attr, constants_ok in snap.containers:
        held = _holds_traced_data if constants_ok else holds_tracer
        if isinstance(state, dict):
            for k, v in list(state.items()):
                if (k not in copy or v is not copy[k]) and held(v):
                    found.append(f"{label}.{k}" if attr else f"{label}[{k!r}]")
        elif any(held(v) for v in state):
            found.append(f"an item of {label}")
    for name, cell, contents in snap.cells:
        if holds_tracer(cell.cell_contents):
            found.append(f"the variable {name!r} of the enclosing function")
    if found:
        for _label, state, copy, _attr, _constants_ok in snap.containers:
            if isinstance(state, dict):   # (by identity: values may be arrays)
                if len(state) != len(copy) or any(k not in copy or v is not copy[k]
                                                  for k, v in list(state.items())):
                    state.clear()
                    state.update(copy)
            elif len(state) != len(copy) or any(a is not b for a, b in zip(state, copy)):
                state[:] = copy
        for _name, cell, contents in snap.cells:
            cell.cell_contents = contents
    return found
