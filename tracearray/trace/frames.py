"""Numbers the user's helper code reads while the function is traced: ``self.eps`` in a
method of an object the function calls (``norm.apply(x)``, ``self.layer1(x)``, ``for
layer in self.layers: x = layer(x)``), ``cfg.k`` in a helper given an object
(``scale(x, cfg)``), ``p["alpha"]`` of a dict passed along.

``reads.py`` reads the compiled function's own bytecode, and that of the helpers it names
as globals, before the trace: their chains start at roots the call can find again (a
global, a closure variable, a bound or static argument). A helper's own arguments are not
such roots: which object ``self`` is in ``Layer.__call__`` is known only when the call
runs. So while the trace runs, a profile hook (``FrameLog``, ``sys.setprofile`` of the
tracing thread only) notes each frame of the user's code that starts, with the objects
its parameters and closure variables hold. After the trace, the chains of each such
frame's code (``reads.read_chains``) are followed from those objects (``frame_guards``):
a number, string, bool or small tuple/list/dict of them is a guard of the trace, rooted
at the object itself (kept by a weak reference where it has one: a root that has gone,
an object the traced code made and dropped, holds); a method called on it by identity;
the helper's globals by name, as ``reads.helper_guards`` does.

A root kept by identity is only sound while the call still hands the helper the same
object: ``model.l1 = Layer(...)`` between calls gives ``Layer.__call__`` another ``self``.
So every chain the scanned code follows (the function's own and the frames') that ends
at an object some frame was given, or at a list, tuple or dict holding one, is guarded by
identity too (``Same``): a call that finds another object there traces again.

While a frame runs, the arrays its chains reach (``self.count``) are read-only, as the
function's own are (``reads.reached_arrays``): an update of one with no traced operand
(``self.count += 1``) would be NumPy's own, made once and frozen; it is refused. A
random generator a frame's chain reaches (``self.rng``) is refused after the trace for
the same reason.

The hook is set for the trace only and restores the profile function that was set
before (a profiler running then does not see the trace's own calls); ``sys.settrace``
(debuggers, coverage) is not touched.
"""
from __future__ import annotations

import functools
import sys
import types
from typing import Any, NamedTuple

import numpy as np

from .captured import _MISSING, Roots, _user_file, _user_instance
from .reads import (MAX_GUARDED_ITEMS, Chain, Guard, Pinned, Same, _follow, _follow_chain,
                    _namespace, _global_loads, _global_root_in, _guardable, _own_root,
                    _root_text, _snapshot, _user_method, read_chains)

_VARARGS, _VARKEYWORDS = 0x04, 0x08
MAX_FRAMES = 4096         # frames of distinct code and objects recorded in one trace


class Frame(NamedTuple):
    """A frame of the user's code that the trace ran: its code, its globals and module, and
    the objects its parameters and closure variables held when it started."""
    code: types.CodeType
    globals: dict
    objects: dict[str, Any]


def _followable(value: Any) -> bool:
    """An object whose attributes or items a chain can follow (``reads._step_kind``)."""
    return type(value) in (dict, list, tuple) or _user_instance(value) or _namespace(value)


MAX_SCAN_VISITS = 400     # objects looked at by ``runs_user_code``


def runs_user_code(plain: types.FunctionType | None, roots: Roots, args: tuple,
                   kwargs: dict, helpers: list[types.FunctionType]) -> bool:
    """Whether the traced call may run user code whose reads the bytecode scan of
    ``reads.py`` does not see: whether what it reaches (the globals its code and its
    ``helpers``' code load, its closure, defaults, bound and static arguments, the call's
    arguments, and what they hold, three levels down) includes a class, module or instance
    of the user's, or a function of the user's other than those helpers (called by global
    name: their code was read), or whether that code makes a function (a lambda, a nested
    def: its parameters are given at run time). Only then is the profile hook worth its
    cost (every Python call of the trace pays it): a function that calls NumPy, the
    tracer's methods and such helpers runs no frame whose reads were not seen."""
    if plain is None:
        return True
    from .captured import _user_function, _user_module
    codes = [plain.__code__] + [h.__code__ for h in helpers]
    stack: list[Any] = [k for c in codes for k in c.co_consts if isinstance(k, types.CodeType)]
    while stack:
        c = stack.pop()
        if not c.co_name.startswith("<") or c.co_name == "<lambda>":
            return True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    todo: list[tuple[Any, int]] = [(v, 0) for _r, _t, v in roots.fixed()]
    for fn in [plain] + helpers:
        todo += [(fn.__globals__.get(n), 0) for n in _global_loads(fn.__code__)]
    for fn in helpers:   # (a decorated helper: the function its closure holds is called)
        todo += [(v, 0) for v in fn.__defaults__ or ()]
        todo += [(v, 0) for v in (fn.__kwdefaults__ or {}).values()]
        for cell in fn.__closure__ or ():
            try:
                todo.append((cell.cell_contents, 0))
            except ValueError:   # an empty cell
                pass
    todo += [(v, 0) for v in args] + [(v, 0) for v in kwargs.values()]
    seen: set[int] = {id(h) for h in helpers} | {id(plain)}
    while todo:
        if len(seen) >= MAX_SCAN_VISITS:
            return True
        v, depth = todo.pop()
        if id(v) in seen or v is None or type(v) in _PLAIN:
            continue
        seen.add(id(v))
        if isinstance(v, types.ModuleType):
            if _user_module(v):
                return True
            continue
        if _user_instance(v) or (isinstance(v, (types.FunctionType, type)) and
                                 _user_function(v)):
            return True
        wrapped = getattr(v, "__wrapped__", None) if callable(v) else None
        if isinstance(v, types.MethodType):
            todo += [(v.__func__, depth), (v.__self__, depth)]
        elif type(v) is functools.partial:
            todo += [(v.func, depth), (v.args, depth), (v.keywords, depth)]
        elif wrapped is not None:   # (a compiled function: the Python function it wraps)
            todo.append((wrapped, depth))
        elif type(v) in (list, tuple, dict, types.SimpleNamespace) or isinstance(v, tuple):
            if depth < 3:
                items = v.values() if type(v) is dict else vars(v).values() \
                    if isinstance(v, types.SimpleNamespace) else v
                todo.extend((w, depth + 1) for w in list(items)[:MAX_GUARDED_ITEMS])
        elif callable(v) and not isinstance(v, (types.BuiltinFunctionType, np.ufunc)) \
                and _user_function(type(v)):
            return True   # (an instance of a user's class that slipped past)
    return False


_PLAIN = (bool, int, float, complex, str, bytes, np.ndarray, np.dtype)


class FrameLog:
    """``sys.setprofile`` hook of the tracing thread while the function runs: the user's
    frames that start (``frames``), and the arrays their chains reach, made read-only
    (``arrays``: restored by the caller, owners before their views)."""

    def __init__(self, top: types.CodeType | None, active: bool = True):
        self.top, self.active = top, active
        self.frames: dict[tuple, Frame] = {}
        self.arrays: list[tuple[np.ndarray, str]] = []
        # (id(object), steps) -> the value a helper frame's chain found there when the frame
        # started (the first time), and the object: a value the trace itself changed
        # (``self.t += 1`` in a method) is guarded by what the call found (``entry_value``)
        self.entry: dict[tuple[int, tuple], tuple[Any, Any]] = {}
        self._user: dict[types.CodeType, bool] = {}
        self._prev: Any = None

    def __enter__(self) -> FrameLog:
        if self.active:
            self._prev = sys.getprofile()
            if _is_c_profiler(self._prev):
                # cProfile's hook is C code that Python cannot call nor set again: paused
                # while the function traces (its own calls are not the user's program), then
                # enabled again, its counts kept
                self._prev.disable()
            sys.setprofile(self._hook if self._prev is None or _is_c_profiler(self._prev)
                           else self._chained)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            if _is_c_profiler(self._prev):
                sys.setprofile(None)
                self._prev.enable()
            else:
                sys.setprofile(self._prev)

    def _chained(self, frame: types.FrameType, event: str, arg: Any) -> None:
        """The hook beside a Python profile function that was set: both see each event."""
        self._prev(frame, event, arg)
        self._hook(frame, event, arg)

    def _hook(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        user = self._user.get(code)
        if user is None:
            user = self._user[code] = code is not self.top and _user_code(frame)
        if user and len(self.frames) < MAX_FRAMES:
            try:
                self._enter(frame, code)
            except Exception:   # noqa: BLE001 -- an error here would unset the hook and
                pass            # surface in the user's frame; a frame not read is the cost

    def _enter(self, frame: types.FrameType, code: types.CodeType) -> None:
        n = code.co_argcount + code.co_kwonlyargcount + \
            bool(code.co_flags & _VARARGS) + bool(code.co_flags & _VARKEYWORDS)
        names = code.co_varnames[:n] + code.co_freevars
        local = frame.f_locals
        objects = {k: local[k] for k in names if k in local and _followable(local[k])}
        key = (code, tuple((k, id(v)) for k, v in objects.items()))
        if key in self.frames:
            return
        self.frames[key] = Frame(code, frame.f_globals, objects)
        for chain in read_chains(code):
            if chain.root[0] == "global":
                # (a helper's module array: an update with no traced operand, COUNT[0] += 1
                # in a helper called as module.h(x), would be made once, while tracing)
                value = frame.f_globals.get(chain.root[1])
                if type(value) is np.ndarray and value.flags.writeable and \
                        _user_file(code.co_filename):
                    value.flags.writeable = False
                    self.arrays.append((value, f"the global {chain.root[1]!r} of "
                                               f"{code.co_qualname}"))
                continue
            obj = objects.get(chain.root[1]) if chain.root[0] in ("fast", "deref") else None
            if obj is None or not chain.steps or chain.steps[-1] is None:
                continue
            found = _follow_chain(obj, chain.steps, chain.root[1])
            if found is not None and _guardable(found[0]):
                keys = tuple(k for _step, k in found[1])   # (a class attribute the code
                self.entry.setdefault((id(obj), keys), (_snapshot(found[0]), obj))   # sets)
            if found is not None and type(found[0]) is np.ndarray and \
                    found[0].flags.writeable:
                found[0].flags.writeable = False
                self.arrays.append((found[0], f"{found[2]} (in {code.co_qualname})"))

    def entry_value(self, roots: Any, guard: Any) -> Any:
        """The value a helper frame found, when it started, at the place ``guard`` reads
        (found from any object along the guard's path), or ``_MISSING``."""
        if not self.entry:
            return _MISSING
        obj = roots.resolve_root(guard.root)
        keys = tuple(k for _step, k in guard.steps)
        for i, (step, key) in enumerate(guard.steps):
            if obj is _MISSING:
                break
            hit = self.entry.get((id(obj), keys[i:]))
            if hit is not None and hit[1] is obj:
                return hit[0]
            obj = _follow(obj, step, key)
        return _MISSING


def _is_c_profiler(hook: Any) -> bool:
    """Whether ``hook`` (``sys.getprofile()``) is cProfile's profiler object."""
    try:
        from _lsprof import Profiler
    except ImportError:   # pragma: no cover - CPython has it
        return False
    return isinstance(hook, Profiler)


def _user_code(frame: types.FrameType) -> bool:
    """Whether a frame runs the user's code: by its module where its globals are one (code a
    library generates, a dataclass's ``__init__``, is the library's), else by its file;
    code made by ``exec`` (``<string>``) by whoever called it (``<frozen ...>`` is the
    interpreter's)."""
    from .captured import _user_module
    g = frame.f_globals
    module = sys.modules.get(g.get("__name__"))   # type: ignore[arg-type]
    if module is not None and vars(module) is g:
        return _user_module(module)
    name = frame.f_code.co_filename
    if name.startswith("<"):   # (code made by exec: a namedtuple's __new__, the user's own)
        back = frame.f_back
        return not name.startswith("<frozen") and back is not None and \
            not back.f_code.co_filename.startswith("<") and _user_code(back)
    return _user_file(name)


def frame_guards(log: FrameLog, plain: types.FunctionType | None) -> tuple[Guard, ...]:
    """The guards of what the frames ``log`` saw read (module docstring): their chains'
    numbers and methods, their globals' numbers, and by identity every object one of them
    was given where a chain of theirs reached it. Random generators their chains reach
    are refused."""
    from .context import RANDOM_TYPES, refuse_random_state
    out: list[Guard] = []
    given = {id(v) for f in log.frames.values() for v in f.objects.values()}
    for f in log.frames.values():
        where = f" (in {f.code.co_qualname})"
        module = f.globals.get("__name__")
        for name in _global_loads(f.code):
            value = f.globals.get(name, _MISSING)
            root = _global_root_in(f.globals, module, plain, name)
            if root is not None and value is not _MISSING and _guardable(value):
                out.append(Guard(root, (), _snapshot(value), name + where))
        for chain in read_chains(f.code):
            kind, name = chain.root
            if kind in ("fast", "deref"):
                obj = f.objects.get(name, _MISSING)
                if obj is _MISSING:
                    continue   # (a local the frame computed: what it came from is read)
                root: tuple | None = ("pinned", Pinned(obj, name))
            else:
                root = _global_root_in(f.globals, module, plain, name)
                obj = f.globals.get(name, _MISSING)
                if root is None or obj is _MISSING or not chain.steps:
                    continue
            steps = tuple(s for s in chain.steps if s is not None)
            found = _follow_chain(obj, steps, name)
            if found is None:
                continue
            value, done, text = found
            if steps and isinstance(value, RANDOM_TYPES):
                refuse_random_state(value, text + where)
            if steps and (_guardable(value) or _user_method(value)):
                out.append(Guard(root, done, _snapshot(value), text + where))
            elif _holds_given(value, given):
                out.append(Guard(root, done, Same(value), text + where))
    return tuple(out)


def identity_guards(roots: Roots, chains: tuple[Chain, ...], code: types.CodeType,
                    params: dict[str, tuple], log: FrameLog) -> tuple[Guard, ...]:
    """The compiled function's own chains (``reads.guards``'s) that end, after the trace,
    at an object a helper's frame was given (or a container of one): guarded by identity,
    so that the frame's guards, rooted at that object, are about the object the next call
    hands it."""
    given = {id(v) for f in log.frames.values() for v in f.objects.values()}
    if not given:
        return ()
    out: list[Guard] = []
    for chain in chains:
        root = _own_root(chain, code, params)
        obj = roots.resolve_root(root) if root is not None else _MISSING
        if obj is _MISSING:
            continue
        steps = tuple(s for s in chain.steps if s is not None)
        found = _follow_chain(obj, steps, _root_text(root, chain))
        if found is not None and (steps or root[0] != "global") and \
                _holds_given(found[0], given):
            out.append(Guard(root, found[1], Same(found[0]), found[2]))
    return tuple(out)


def _holds_given(value: Any, given: set[int]) -> bool:
    if id(value) in given:
        return True
    if type(value) in (list, tuple) and len(value) <= MAX_GUARDED_ITEMS:
        return any(id(v) in given for v in value)
    if type(value) is dict and len(value) <= MAX_GUARDED_ITEMS:
        return any(id(v) in given for v in value.values())
    return False
