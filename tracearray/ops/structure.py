"""Structural primitives: sources (inputs, constants, sizes), views (movement), matrix products
and concatenation. Their attributes hold everything needed to map indices (``fuse.index``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import rules
from .external import register_host_call
from .spec import ALL_DTYPES, Domain, Kind, OpSpec, Shape, register


# --------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------

def _input_ref(**attrs: Any) -> Any:
    raise AssertionError("inputs are bound by the evaluator, not computed")


def constant_value(node: Any) -> np.ndarray:
    """The array held by a ``constant`` or ``size`` node."""
    return np.frombuffer(node.attr("value"), dtype=node.dtype).reshape(node.shape)


def _constant_ref(*, value: bytes, shape: Shape, dtype: str, **_: Any) -> np.ndarray:
    return np.frombuffer(value, dtype=np.dtype(dtype)).reshape(shape).copy()


register(OpSpec("input", Kind.SOURCE, _input_ref, rules.attr_shape, rules.attr_dtype, arity=0,
                cost=0))
register(OpSpec("constant", Kind.SOURCE, _constant_ref, rules.attr_shape, rules.attr_dtype,
                arity=0, cost=0))
# A scalar that depends on sizes (the element count of a mean): a run-time kernel argument,
# never an immediate, so that kernels stay size-generic.
register(OpSpec("size", Kind.SOURCE, _constant_ref, rules.attr_shape, rules.attr_dtype,
                arity=0, cost=0))


# --------------------------------------------------------------------------------------------
# Movement (views)
# --------------------------------------------------------------------------------------------

def _reshape_ref(x: np.ndarray, *, shape: Shape) -> np.ndarray:
    return x.reshape(shape)


def _transpose_ref(x: np.ndarray, *, perm: tuple[int, ...]) -> np.ndarray:
    return x.transpose(perm)


def _slice_ref(x: np.ndarray, *, slices: tuple[tuple[int, int, int], ...]) -> np.ndarray:
    # (start, stop, step) are range() bounds from slice.indices(n). With a negative step,
    # stop == -1 means "through index 0" (Python's None), and start == -1 only occurs for an
    # empty range (slice(-2, None, -1) of a length-1 axis): Python would read that -1 as the
    # last element, so such an axis is sliced empty explicitly.
    return x[tuple(slice(0, 0) if (c < 0 and a < 0) else
                   slice(a, None if (c < 0 and b < 0) else b, c) for a, b, c in slices)]


def _broadcast_ref(x: np.ndarray, *, shape: Shape) -> np.ndarray:
    return np.broadcast_to(x, shape)


def _squeeze_ref(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    return np.squeeze(x, axis=axes) if axes else x


def _expand_ref(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    return np.expand_dims(x, axes) if axes else x


def _diagonal_ref(x: np.ndarray, *, offset: int, axis1: int, axis2: int) -> np.ndarray:
    return np.diagonal(x, offset, axis1, axis2)


def _diagonal_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    shape, off = shapes[0], attrs["offset"]
    a1, a2 = attrs["axis1"], attrs["axis2"]
    n1, n2 = shape[a1], shape[a2]
    n = max(0, min(n1, n2 - off) if off >= 0 else min(n1 + off, n2))
    return tuple(s for d, s in enumerate(shape) if d not in (a1, a2)) + (n,)


def _window_ref(x: np.ndarray, *, size: int, axis: int) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)


def _window_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    shape = list(shapes[0])
    shape[attrs["axis"]] -= attrs["size"] - 1
    return tuple(shape) + (attrs["size"],)


for _name, _ref, _rule in (("reshape", _reshape_ref, rules.attr_shape),
                           ("diagonal", _diagonal_ref, _diagonal_shape),
                           ("sliding_window", _window_ref, _window_shape),
                           ("transpose", _transpose_ref, rules.transpose_shape),
                           ("slice", _slice_ref, rules.slice_shape),
                           ("broadcast_to", _broadcast_ref, rules.attr_shape),
                           ("squeeze", _squeeze_ref, rules.squeeze_shape),
                           ("expand_dims", _expand_ref, rules.expand_shape)):
    register(OpSpec(_name, Kind.MOVEMENT, _ref, _rule, rules.same_dtype, cost=0))


# --------------------------------------------------------------------------------------------
# Contractions and concatenation
# --------------------------------------------------------------------------------------------

def _matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.matmul(a, b))


def _concat_ref(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def _matmul_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return np.matmul.resolve_dtypes(tuple(dtypes) + (None,))[-1]


def _matmul_operands(n: Any) -> tuple[np.dtype, ...]:
    return tuple(np.matmul.resolve_dtypes(tuple(a.dtype for a in n.args) + (None,))[:2])


register(OpSpec("matmul", Kind.CONTRACT, _matmul_ref, rules.matmul_shape, _matmul_dtype,
                Domain(tuple(d for d in ALL_DTYPES if d != np.dtype(bool))), arity=2,
                operand_dtypes=_matmul_operands, divergences=("matmul-blocking",)))
# On the CPU a matmul is NumPy's (BLAS), written straight into the result's buffer.
register_host_call("matmul", lambda shapes, attrs: (rules.matmul_shape(shapes, attrs),),
                   lambda dtypes, attrs: (_matmul_dtype(dtypes, attrs),),
                   lambda operands, outs: np.matmul(*operands, out=outs[0]),
                   what="NumPy's matmul (BLAS)", arity=2)
register(OpSpec("concatenate", Kind.CONCAT, _concat_ref, rules.concat_shape, rules.result_dtype,
                arity=-1, operand_dtypes=lambda n: (n.dtype,) * len(n.args)))
