"""Errors that point at the user's code.

Every error raised while tracing names the operation and the file:line of the user's code that
called it, found by walking the stack to the first frame outside tracearray and NumPy.
"""
from __future__ import annotations

import linecache
import os
import sys

import numpy as np

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


class TracearrayError(Exception):
    """Base class of tracearray's own errors."""


class ConcretizationError(TracearrayError, TypeError):
    """A traced value was needed as a concrete Python value (``if x > 0:``, ``int(x)``)."""


class UnsupportedOperationError(TracearrayError, TypeError):
    """A NumPy function, ufunc method or argument that tracearray cannot compile."""


class UnsupportedAttributeError(UnsupportedOperationError, AttributeError):
    """An ndarray method or attribute that traced values do not have (an AttributeError too,
    so that ``hasattr`` answers False)."""


class TraceShapeError(TracearrayError, ValueError):
    """Shapes that NumPy would reject (broadcasting, reshape, axis out of range)."""


class TraceDTypeError(TracearrayError, TypeError):
    """Dtypes that NumPy would reject, or that tracearray does not support."""


class InputError(TracearrayError, TypeError):
    """An argument the compiled function cannot take."""


def user_location() -> str | None:
    """``file:line`` of the innermost stack frame that belongs to the user's code."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        internal = path.startswith(_PKG_DIR + os.sep) or path.startswith(_NUMPY_DIR + os.sep)
        if not internal and not path.startswith("<frozen"):
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
            return f"{where}\n    {line}" if line else where
        frame = frame.f_back
    return None


def with_location(message: str) -> str:
    where = user_location()
    return f"{message}\n  at {where}" if where else message
