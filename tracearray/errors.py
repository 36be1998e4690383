"""tracearray's errors, for every stage, and the user's location they name.

Every error raised while tracing names the operation and the file:line of the user's code that
called it, found by walking the stack to the first frame outside tracearray and NumPy. Later
stages (planning, code generation, compiling, running) name the ops of the kernel they were
working on and the lines that created those ops (``node_locations``: recorded while tracing).
Each class also subclasses the builtin a caller would expect (TypeError, ValueError, ...), so
``except TypeError`` keeps working and ``fallback="numpy"`` catches all of them.
"""
from __future__ import annotations

import functools
import linecache
import os
import sys
from typing import Any

import numpy as np

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


class TracearrayError(Exception):
    """Base class of tracearray's own errors."""


# Called with each refusal made while a trace runs (set by trace/context.py): a refusal is
# an error NumPy would not raise, so the user's ``try``/``except`` around the operation
# must not catch it and go on along another path than NumPy's (the trace checks, at its end,
# which frame caught each one).
_note_refusal: Any = None


class _Refusal(TracearrayError):
    """An error of something NumPy does but a trace cannot: noted while tracing."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if _note_refusal is not None:
            _note_refusal(self)


class ConcretizationError(_Refusal, TypeError):
    """A traced value was needed as a concrete Python value (``if x > 0:``, ``int(x)``)."""


class UnexpectedTracerError(TracearrayError, TypeError):
    """A traced value was used after its trace ended: it escaped the traced function (kept in
    a global, a list, an attribute or a closure) instead of being returned (JAX's name)."""


class UnsupportedOperationError(_Refusal, TypeError):
    """A NumPy function, ufunc method or argument that tracearray cannot compile."""


class UnsupportedAttributeError(UnsupportedOperationError, AttributeError):
    """An ndarray method or attribute that traced values do not have (an AttributeError too,
    so that ``hasattr`` answers False)."""


class TraceShapeError(TracearrayError, ValueError):
    """Shapes that NumPy would reject (broadcasting, reshape, axis out of range)."""


class TraceDTypeError(_Refusal, TypeError):
    """Dtypes that NumPy would reject, or that tracearray does not support."""


class InputError(TracearrayError, TypeError):
    """An argument the compiled function cannot take."""


class CompileError(TracearrayError, RuntimeError):
    """A stage after tracing (planning, code generation, the JIT or the GPU toolchain) failed
    on a traced program: a tracearray bug or a toolchain limit, reported with the ops and the
    user's lines involved."""


# ------------------------------------------------------------------------------------------
# Where each graph node was made (recorded while tracing; nodes are interned, so the first
# line that built a node is the one reported)
# ------------------------------------------------------------------------------------------

import weakref  # noqa: E402

_LOCATIONS: "weakref.WeakKeyDictionary[object, str]" = weakref.WeakKeyDictionary()


def record_location(node: object, where: str | None = None) -> None:
    """Remember the user's line that first made ``node`` (``where``, or found now)."""
    if node not in _LOCATIONS:
        where = where or user_location()
        if where:
            _LOCATIONS[node] = where


def node_location(node: object) -> str | None:
    return _LOCATIONS.get(node)


def describe_nodes(nodes, limit: int = 3, locations=None) -> str:
    """``sum (at file.py:12), exp (at file.py:11)``: ops with the lines that made them (in
    this trace, from ``locations``, the graph's: an interned node may have been made first
    by another function)."""
    parts = []
    seen = set()
    for n in nodes:
        where = (locations or {}).get(n) or node_location(n)
        key = (n.op, where)
        if key in seen:
            continue
        seen.add(key)
        parts.append(f"{n.op} (at {where.splitlines()[0]})" if where else n.op)
        if len(parts) == limit:
            break
    return ", ".join(parts)

@functools.lru_cache(maxsize=4096)
def _is_internal(filename: str) -> bool:
    """Whether code of this file is tracearray's, NumPy's or frozen (not the user's): asked
    for every frame of every traced op, so answered once per file (``abspath`` is a
    system call's worth of work)."""
    path = os.path.abspath(filename)
    return path.startswith(_PKG_DIR + os.sep) or path.startswith(_NUMPY_DIR + os.sep) or \
        path.startswith("<frozen")


def user_location() -> str | None:
    """``file:line`` of the innermost stack frame that belongs to the user's code."""
    frame = user_frame()
    return _where(frame.f_code, frame.f_lineno) if frame is not None else None


def user_frame() -> Any:
    """The innermost stack frame that belongs to the user's code (None: there is none)."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _is_internal(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


@functools.lru_cache(maxsize=4096)
def _where(code: Any, lineno: int) -> str:
    """``file:line`` and the line's text: asked for every traced op, so made once per line
    of a code object (new code for the same file name -- a reloaded module, another cell
    or exec'd block -- reads its text again)."""
    filename = code.co_filename
    line = linecache.getline(filename, lineno).strip()
    where = f"{filename}:{lineno}"
    return f"{where}\n    {line}" if line else where


def with_location(message: str) -> str:
    where = user_location()
    return f"{message}\n  at {where}" if where else message


def run_time_error(exc: BaseException, nodes, locations=None) -> BaseException:
    """``exc``, raised while a compiled function ran the op that made ``nodes`` (a library
    call: NumPy's ``LinAlgError`` for a singular matrix), as the same type with the user's
    line of that op added, as NumPy would have raised it there."""
    where = next(((locations or {}).get(n) or node_location(n) for n in nodes
                  if n is not None and ((locations or {}).get(n) or node_location(n))), None)
    if not where:
        return exc
    try:
        return type(exc)(f"{exc}\n  at {where}")
    except Exception:   # noqa: BLE001 -- an exception type that takes other arguments
        return exc


def stage_error(stage: str, nodes, exc: BaseException, locations=None) -> CompileError:
    """A CompileError for an unexpected failure of ``stage`` on the kernel computing
    ``nodes``: what failed, the ops and the user's lines, and that it is worth reporting."""
    ops = describe_nodes(sorted(nodes, key=lambda n: n.op) if nodes else [],
                         locations=locations)
    return CompileError(
        f"{stage} failed{' on ' + ops if ops else ''}: {type(exc).__name__}: {exc}\n"
        f"  (an internal error of tracearray, not of your code: please report it; "
        f"fallback='numpy' runs the function with NumPy meanwhile)")
