"""Indexing with data: ``gather`` (integer-array indexing, np.take, take_along_axis) and its
inverse ``scatter`` (``x[idx] = v``, ``np.add.at`` and the other ``ufunc.at``).

``gather(x, i_0, ..., i_{k-1})`` reads ``x`` at positions loaded from the index arrays
``i_j`` (all of one broadcast shape B; the tracer broadcasts them) along the axes ``axes`` of
``x`` (increasing). The result's dimensions are the dimensions of ``x`` that are not indexed,
with B inserted before the ``at``-th of them (NumPy: in place of the indexed axes when the
advanced indices are consecutive, else first).

``mode``: ``raise`` (NumPy's indexing: a negative index counts from the end, an index out of
range raises IndexError with ``messages[j]``, NumPy's words with ``{}`` for the index),
``wrap`` / ``clip`` (np.take's modes) and ``valid`` (indices the tracer has checked and made
non-negative). The planner computes a gather inside the kernel that reads it (``fuse/kexpr``:
the index becomes a loaded term of the load's address), never as a copy.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .spec import ALL_DTYPES, Domain, Kind, OpSpec, Shape, register


def gather_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    x, b = shapes[0], shapes[1]
    if any(s != b for s in shapes[1:]):
        raise ValueError("gather: the index arrays must have one shape")
    axes, at = attrs["axes"], attrs["at"]
    rest = tuple(n for d, n in enumerate(x) if d not in axes)
    return rest[:at] + tuple(b) + rest[at:]


def normalize_gather_indices(x_shape: Shape, indices: Sequence[np.ndarray], axes: Sequence[int],
                             mode: str, messages: Sequence[str]) -> list[np.ndarray]:
    """The indices as non-negative positions, NumPy's way for ``mode`` (IndexError for an index
    out of range in mode 'raise')."""
    out = []
    for i, d, msg in zip(indices, axes, messages):
        n = x_shape[d]
        i = np.asarray(i).astype(np.int64)
        if mode in ("wrap", "clip") and n == 0 and i.size:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        if mode == "wrap":
            i = np.mod(i, n) if n else i
        elif mode == "clip":
            i = np.clip(i, 0, max(n - 1, 0))
        elif mode == "raise":
            bad = (i < -n) | (i >= n)
            if bad.any():
                raise IndexError(msg.format(int(i[bad].flat[0])))
            i = np.where(i < 0, i + n, i)
        out.append(i)
    return out


def _gather_ref(x: np.ndarray, *indices: np.ndarray, axes: tuple[int, ...], at: int,
                mode: str, messages: tuple[str, ...]) -> np.ndarray:
    shape = gather_shape([x.shape] + [np.shape(i) for i in indices],
                         {"axes": axes, "at": at})
    if 0 in shape:
        # nothing is read, so nothing is checked (the tracer adds run-time checks where
        # NumPy checks indices of an empty result)
        return np.empty(shape, x.dtype)
    pos = normalize_gather_indices(x.shape, indices, axes, mode, messages)
    key: list[Any] = [slice(None)] * x.ndim
    for d, i in zip(axes, pos):
        key[d] = i
    out = np.asarray(x[tuple(key)])
    consecutive = list(axes) == list(range(axes[0], axes[-1] + 1))
    numpy_at = axes[0] if consecutive else 0      # where NumPy put the broadcast dims
    nb = pos[0].ndim
    if numpy_at != at and nb:
        out = np.moveaxis(out, list(range(numpy_at, numpy_at + nb)), list(range(at, at + nb)))
    return out


def _gather_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
    return dtypes[0]


register(OpSpec("gather", Kind.GATHER, _gather_ref, gather_shape, _gather_dtype,
                Domain(ALL_DTYPES), arity=-1,
                operand_dtypes=lambda n: (n.args[0].dtype,) + tuple(a.dtype for a in n.args[1:])))



# --------------------------------------------------------------------------------------------
# scatter: the inverse of gather
# --------------------------------------------------------------------------------------------
#
# ``scatter(x, i_0, ..., i_{k-1}[, v], axes=, at=, mode=, messages=, combine=, loop=)`` is x
# with the elements a gather of the same attributes would read replaced: by ``v`` (``combine``
# None: ``x[idx] = v``; ``v`` has the gather's shape and x's dtype) or by ``combine(x_p, v)``
# (``ufunc.at``: ``loop`` is the ufunc's loop dtypes (x's, v's, result's), ``v`` has the
# second one; a unary ufunc has no ``v``). Positions are visited in C order of the index
# arrays' broadcast shape and repeated positions combine in that order, as NumPy's own
# loops do: the last assignment wins, every ``at`` contribution counts. The planner gives it
# a kernel of its own, sequential along the index dimensions (``fuse/plan``). ``unique``
# (an assignment whose positions are distinct, except some sent to a slot no one reads: a
# compaction's) runs in parallel over every dimension.

def scatter_parts(node_args: Sequence[Any], axes: Sequence[int]) -> tuple[Any, list, Any]:
    """(target, index arrays, values or None) of a scatter's arguments."""
    k = len(axes)
    return node_args[0], list(node_args[1:1 + k]), (node_args[1 + k] if len(node_args) > 1 + k
                                                    else None)


def _scatter_shape(shapes: Sequence[Shape], attrs: dict) -> Shape:
    k = len(attrs["axes"])
    b = shapes[1]
    if any(s != b for s in shapes[1:1 + k]):
        raise ValueError("scatter: the index arrays must have one shape")
    if len(shapes) > 1 + k and tuple(shapes[1 + k]) != gather_shape(shapes[:1 + k], attrs):
        raise ValueError("scatter: the values must have the shape of the gather")
    return tuple(shapes[0])


def _scatter_ref(x: np.ndarray, *args: np.ndarray, axes: tuple[int, ...], at: int, mode: str,
                 messages: tuple[str, ...], combine: str | None,
                 loop: tuple[str, ...] = (), unique: bool = False,
                 order_free: str | None = None) -> np.ndarray:
    out = np.array(x, copy=True)
    indices, values = list(args[:len(axes)]), (args[len(axes)] if len(args) > len(axes)
                                                else None)
    if 0 in np.broadcast_shapes(*[np.shape(i) for i in indices]):
        return out
    pos = normalize_gather_indices(x.shape, indices, axes, mode, messages)
    key: list[Any] = [slice(None)] * x.ndim
    for d, i in zip(axes, pos):
        key[d] = i
    consecutive = list(axes) == list(range(axes[0], axes[-1] + 1))
    numpy_at = axes[0] if consecutive else 0
    nb = pos[0].ndim
    if values is not None and numpy_at != at and nb:
        values = np.moveaxis(values, list(range(at, at + nb)), list(range(numpy_at, numpy_at + nb)))
    if combine is None:
        out[tuple(key)] = values
        return out
    ufunc = getattr(np, combine)
    with np.errstate(all="ignore"):
        if values is None:
            ufunc.at(out, tuple(key))
        else:
            ufunc.at(out, tuple(key), values)
    return out


def _scatter_operands(n: Any) -> tuple[np.dtype, ...]:
    k = len(n.attr("axes"))
    idx = tuple(a.dtype for a in n.args[1:1 + k])
    if len(n.args) == 1 + k:
        return (n.dtype,) + idx
    value_dt = np.dtype(n.attr("loop")[1]) if n.attr("combine") else n.dtype
    return (n.dtype,) + idx + (value_dt,)


register(OpSpec("scatter", Kind.SCATTER, _scatter_ref, _scatter_shape, _gather_dtype,
                Domain(ALL_DTYPES), arity=-1, operand_dtypes=_scatter_operands))
