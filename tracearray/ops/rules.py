"""Shape and dtype rules shared by the primitives (NumPy 2 semantics)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .spec import Shape


# --------------------------------------------------------------------------------------------
# Shape rules
# --------------------------------------------------------------------------------------------

def broadcast_shape(shapes: Sequence[Shape], attrs: dict | None = None) -> Shape:
    """NumPy's broadcasting rule (ValueError when the shapes do not broadcast). Written out
    rather than ``np.broadcast_shapes``, which is limited to 32 dimensions and reports a
    result too large for memory as a broadcasting error: those limits are checked, with
    NumPy's messages, where a node is made (``graph.check_shape``)."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:   # (most operands: equal shapes)
        first = shapes[0]
        return first if type(first) is tuple else tuple(map(int, first))   # (node shapes are)
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, n in enumerate(shape, ndim - len(shape)):
            if n != 1:
                if out[i] not in (1, n):
                    raise ValueError("shape mismatch: objects cannot be broadcast to a single "
                                     "shape")
                out[i] = n
    return tuple(map(int, out))


def reduce_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    axes = attrs["axes"]
    return tuple(1 if i in axes else s for i, s in enumerate(shapes[0]))


def same_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(shapes[0])


def attr_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(attrs["shape"])


def transpose_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(shapes[0][p] for p in attrs["perm"])


def slice_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(len(range(start, stop, step)) for start, stop, step in attrs["slices"])


def squeeze_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    return tuple(s for i, s in enumerate(shapes[0]) if i not in attrs["axes"])


def expand_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    out: list[int] = []
    src = iter(shapes[0])
    for i in range(len(shapes[0]) + len(attrs["axes"])):
        out.append(1 if i in attrs["axes"] else next(src))
    return tuple(out)


def matmul_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    a, b = shapes
    a2, b2 = (a if len(a) > 1 else (1,) + a), (b if len(b) > 1 else b + (1,))
    batch = broadcast_shape([a2[:-2], b2[:-2]])
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def concat_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    axis = attrs["axis"]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Dtype rules
# --------------------------------------------------------------------------------------------

def ufunc_dtype_rule(ufunc: np.ufunc, output: int = 0
                     ) -> Callable[[Sequence[np.dtype], dict], np.dtype]:
    """The dtype of the ufunc's output number ``output`` for the operands' dtypes."""
    def rule(dtypes: Sequence[Any], attrs: dict) -> np.dtype:
        return ufunc.resolve_dtypes(tuple(dtypes) + (None,) * ufunc.nout)[ufunc.nin + output]
    return rule


def same_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(dtypes[0])


def attr_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(attrs["dtype"])


def index_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(np.intp)


def bool_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.dtype(bool)


def where_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.result_type(*dtypes[1:])


def result_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.result_type(*dtypes)


def ufunc_input_dtypes(ufunc: np.ufunc, candidates: Sequence[np.dtype]) -> tuple[np.dtype, ...]:
    """The candidate dtypes for which the ufunc has a loop taking that dtype for every input."""
    out = []
    for dt in candidates:
        try:
            loop = ufunc.resolve_dtypes((dt,) * ufunc.nin + (None,) * ufunc.nout)
        except TypeError:
            continue
        if all(d == dt for d in loop[:ufunc.nin]):
            out.append(dt)
    return tuple(out)
