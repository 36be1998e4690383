"""Pickling a ``CompiledFunction``: by reference to the user's function and its options.

A compiled function holds machine code, ctypes pointers and locks, none of which can travel
to another process, and none of which needs to: what it computes is decided by the user's
Python function and the options given to ``compile``. So a pickle carries only those, and the
receiving process builds a fresh ``CompiledFunction``; its first call there traces and loads
the kernels from the disk cache (compiling only what the cache lacks).

How the function travels, in order of preference:

1. the compiled function itself is a module-level name (``@tracearray.compile`` on a ``def``
   at the top of a module, or ``f = tracearray.compile(g)``): its module and qualified name,
   as pickle sends functions. The receiver imports the module, whose own decorator built it;
2. the user's function is importable by name, or pickles by value with plain pickle (a
   ``functools.partial`` of one, an instance of an importable class): that object;
3. otherwise (a lambda, a closure, a function of the ``__main__`` of a process the receiver
   is not a child of): cloudpickle's bytes of it when cloudpickle is installed, as Dask
   sends such functions; else ``pickle.PicklingError`` saying why and what to do.

A name is tried before the bytes of (3), so a ``multiprocessing`` child of the main script
(which re-imports it as ``__mp_main__``) uses the script's own function, and a Dask worker,
where ``__main__`` is the worker's, falls back to the bytes.

Every receiving process keeps what it rebuilt (``_REBUILT``, by what was sent): the tasks of
a Dask graph, each unpickled on its own, share one ``CompiledFunction`` per process, so its
traces and kernels are made once per worker, not once per task.
"""
from __future__ import annotations

import importlib
import pickle
import sys
import threading
import types
from collections import OrderedDict
from typing import Any, Callable

# Compiled functions this process rebuilt or shares, by (function, options): at most
# _REBUILT_KEEP, least recently used first out.
_REBUILT_KEEP = 128
_REBUILT: "OrderedDict[Any, Any]" = OrderedDict()
_REBUILT_LOCK = threading.Lock()


def compiled_options(cf: Any) -> tuple:
    """The options of ``compile`` that make a compiled function what it is (static argument
    sets sorted, so equal options send equal bytes)."""
    return (cf.device, tuple(sorted(cf.static_argnums)), tuple(sorted(cf.static_argnames)),
            cf.fallback, cf.matmul_precision)


def reduce_compiled(cf: Any) -> tuple:
    """``CompiledFunction.__reduce__``: ``(rebuild, (name, function, options))``."""
    options = compiled_options(cf)
    name = _module_name_of(cf)
    if name is not None and name[0] != "__main__":
        return (rebuild_compiled, (name, None, options))
    return (rebuild_compiled, (name, _function_payload(cf, name is not None), options))


def rebuild_compiled(name: tuple[str, str] | None, payload: Any, options: tuple) -> Any:
    """The receiving side of ``reduce_compiled``: the named object when this process has it
    (with the options sent), else one built from the function, kept per process."""
    if name is not None:
        found = _lookup(*name)
        if found is not None and _is_compiled(found) and \
                compiled_options(found) == options:
            return found
        if payload is None:
            raise pickle.UnpicklingError(
                f"cannot unpickle the compiled function {name[0]}.{name[1]}: that module "
                f"defines no compiled function of that name with the same options here")
    if payload is None:
        raise pickle.UnpicklingError(
            f"cannot unpickle the compiled function {name[0]}.{name[1]}: it was defined in "
            f"the main script of the sending process, which this process does not run; "
            f"install cloudpickle in both processes (it sends such functions by value) or "
            f"define the function in a module")
    try:
        hash(payload)
    except TypeError:   # (a callable object without __hash__: rebuilt for each copy)
        return _compiled(_load(payload), options)
    return shared_compiled(payload, options, load=_load)


def _load(payload: Any) -> Callable:
    if isinstance(payload, _CloudPickled):
        import cloudpickle
        return cloudpickle.loads(payload.data)
    return payload


def shared_compiled(fn: Any, options: tuple, load: Callable = lambda fn: fn) -> Any:
    """This process's one ``CompiledFunction`` of ``load(fn)`` (``fn`` hashable, compared by
    value) with these options (``compiled_options``), so that its traces and kernels are
    reused: by every unpickled copy of it, and by ``tracearray.dask``'s stages when a later
    call builds the same stage again."""
    key = (fn, options)
    with _REBUILT_LOCK:
        hit = _REBUILT.get(key)
        if hit is not None:
            _REBUILT.move_to_end(key)
            return hit
    cf = _compiled(load(fn), options)
    with _REBUILT_LOCK:
        cf = _REBUILT.setdefault(key, cf)
        while len(_REBUILT) > _REBUILT_KEEP:
            _REBUILT.popitem(last=False)
    return cf


def _compiled(fn: Callable, options: tuple) -> Any:
    from .api import CompiledFunction
    device, static_argnums, static_argnames, fallback, matmul_precision = options
    return CompiledFunction(fn, device=device, static_argnums=static_argnums,
                            static_argnames=static_argnames, fallback=fallback,
                            matmul_precision=matmul_precision)


class _CloudPickled:
    """cloudpickle's bytes of a function plain pickle cannot send (hashable by content, so
    equal functions sent by many tasks are rebuilt once)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CloudPickled) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __reduce__(self) -> tuple:
        return (_CloudPickled, (self.data,))


def _function_payload(cf: Any, named: bool) -> Any:
    """What sends ``cf.fn`` by value or by its own name (see the module docstring); None
    when only the compiled function's name can (a ``__main__`` function without
    cloudpickle)."""
    fn = cf.fn
    if _importable(fn):
        return fn
    if not _is_plain_function(fn):
        try:
            pickle.dumps(fn)
            return fn
        except Exception:
            pass
    try:
        import cloudpickle
    except ImportError:
        if named:   # the __main__ of a multiprocessing parent: its children import it
            return None
        raise pickle.PicklingError(_unpicklable_message(cf)) from None
    return _CloudPickled(cloudpickle.dumps(fn))


def _unpicklable_message(cf: Any) -> str:
    fn = cf.fn
    qual = getattr(fn, "__qualname__", None) or repr(fn)
    if "<lambda>" in qual:
        what = "a lambda"
    elif "<locals>" in qual:
        enclosing = qual.rsplit(".<locals>.", 1)[0].rsplit(".", 1)[-1]
        what = f"defined inside {enclosing!r} (a closure)"
    else:
        what = "not importable by its module and name"
    return (f"cannot pickle the compiled function {cf.__qualname__!r}: its Python function "
            f"is {what}, and pickle sends functions by module and name, for the receiving "
            f"process to import. Define the function at the top level of a module (then the "
            f"compiled function pickles by reference and is rebuilt in the receiving process "
            f"from the disk cache), or install cloudpickle, which sends it by value as Dask "
            f"does")


def _module_name_of(cf: Any) -> tuple[str, str] | None:
    """(module, qualified name) where ``cf`` itself is found, or None."""
    module = getattr(cf, "__module__", None)
    qual = getattr(cf, "__qualname__", None)
    if not module or not qual or "<" in qual:
        return None
    return (module, qual) if _lookup(module, qual) is cf else None


def _importable(fn: Callable) -> bool:
    """Whether plain pickle sends ``fn`` by name and another process finds it there."""
    module = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None)
    if not _is_plain_function(fn) or not module or not qual or "<" in qual or \
            module == "__main__":
        return False
    return _lookup(module, qual) is fn


def _is_plain_function(fn: Any) -> bool:
    return isinstance(fn, (types.FunctionType, types.BuiltinFunctionType))


def _lookup(module: str, qual: str) -> Any:
    mod = sys.modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except Exception:
            return None
    obj: Any = mod
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _is_compiled(obj: Any) -> bool:
    from .api import CompiledFunction
    return isinstance(obj, CompiledFunction)
