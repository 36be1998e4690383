"""Reproducers: Python source that rebuilds a failing call exactly.

``value_literal(x)`` writes an argument as an expression: arrays as ``np.array([...],
dtype=...)`` (every float exactly: NaN, +-inf and -0.0 spelled out), wrapped in
``strided(...)`` when the array is not C-contiguous (so the same strides reach the kernels),
or, for large arrays, as their bytes in base64. ``reproducer(...)`` writes a whole script.
"""
from __future__ import annotations

import base64
import inspect
import math
import textwrap
from typing import Any, Callable, Sequence

import numpy as np

from .strategies import layout_of

INLINE_MAX = 512    # arrays up to this many elements are written as readable literals


def _scalar_literal(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return repr(v)


def _nested(x: Any) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(v) for v in x) + "]"
    return _scalar_literal(x)


def _dtype_name(dt: np.dtype) -> str:
    return f"np.{dt.name}" if dt.name != "bool" else "np.bool_"


def array_literal(a: np.ndarray) -> str:
    """An expression rebuilding ``a``: same values, dtype, shape and (where possible) strides."""
    dt = _dtype_name(a.dtype)
    if a.size > INLINE_MAX:
        raw = base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()
        body = (f"np.frombuffer(base64.b64decode({raw!r}), dtype={a.dtype.str!r})"
                f".reshape({tuple(a.shape)!r}).copy()")
    elif a.ndim == 0:
        body = f"np.array({_scalar_literal(a.item())}, dtype={dt})"
    elif a.size == 0:
        body = f"np.zeros({tuple(a.shape)!r}, dtype={dt})"
    else:
        body = f"np.array({_nested(a.tolist())}, dtype={dt})"
    lay = layout_of(a)
    if lay is None or lay.is_c() or a.ndim == 0:
        return body
    return (f"strided({body}, perm={lay.perm}, flip={lay.flip}, step={lay.step}, "
            f"broadcast={lay.broadcast})")


def value_literal(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return array_literal(x)
    if isinstance(x, np.generic):
        return f"{_dtype_name(x.dtype)}({_scalar_literal(x.item())})"
    if isinstance(x, tuple):
        inner = ", ".join(value_literal(v) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(value_literal(v) for v in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {value_literal(v)}" for k, v in x.items()) + "}"
    return _scalar_literal(x)


def function_source(fn: Callable) -> tuple[str, str]:
    """(source text, name) of a function, decorators removed; if the source is not available,
    an import of it by module and name."""
    name = getattr(fn, "__name__", "fn")
    src = getattr(fn, "__tracearray_source__", None)
    if src is None:
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            src = None
    if src is not None and name != "<lambda>":
        lines = src.splitlines()
        while lines and lines[0].lstrip().startswith("@"):
            lines.pop(0)
        return "\n".join(lines) + "\n", name
    if src is not None:   # a lambda: bind the whole statement's lambda expression
        expr = src.strip()
        i = expr.find("lambda")
        body = expr[i:].rstrip(",)\n ")
        return f"fn = {body}\n", "fn"
    module = getattr(fn, "__module__", None) or "__main__"
    return f"from {module} import {name}   # source not available\n", name


def reproducer(fn: Callable, args: Sequence[Any], *, device: str | None = None,
               reference: Callable | None = None, title: str = "", note: str = "") -> str:
    """A self-contained script that re-runs ``assert_matches_numpy(fn, *args, ...)``."""
    fn_src, fn_name = function_source(fn)
    parts = [f"# {title or 'Reproducer written by tracearray.testing'}"]
    if note:
        parts += [f"# {line}" for line in note.splitlines()]
    parts += ["import base64", "", "import numpy as np",
              "from numpy import inf, nan", "",
              "from tracearray.testing import assert_matches_numpy, strided", "", "",
              fn_src.rstrip("\n")]
    kw = []
    if reference is not None:
        ref_src, ref_name = function_source(reference)
        parts += ["", "", ref_src.rstrip("\n")]
        kw.append(f"reference={ref_name}")
    if device is not None:
        kw.append(f"device={device!r}")
    parts += ["", ""]
    names = []
    for i, a in enumerate(args):
        names.append(f"arg{i}")
        parts.append(f"arg{i} = {value_literal(a)}")
    call = ", ".join([fn_name] + names + kw)
    parts += ["", f"assert_matches_numpy({call})", ""]
    return "\n".join(parts)
