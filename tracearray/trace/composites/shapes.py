"""Shape, view and joining functions: views become movement primitives (index arithmetic in the
kernels), joins become ``concatenate`` of slices. Functions whose NumPy implementation is built
from these (``vstack``, ``atleast_2d``, ``array_split``, ``rot90``, ``triu``, ...) run it on
tracers (``impl=NUMPY_IMPLEMENTATION``)."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from .. import context, numpy_api as api
from ..build import (STAGED_NEEDED_MAX, fix_captured_value, make, needed_value,
                     normalize_axes, unsupported)
from ...errors import with_location
from ..buffers import Buffer
from ..tracer import Tracer, as_array_memory, inherit_layout, store_out, unwrap
from . import ALL, NUMERIC, NUMPY_IMPLEMENTATION as NUMPY, as_tracer, composite

# ------------------------------------------------------------------------------------------
# Views
# ------------------------------------------------------------------------------------------


@composite(np.reshape, calls=['np.reshape({0}, (-1,))', 'np.reshape({0}, (1, -1))'])
def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None,
            copy: Any = None) -> Tracer:
    if shape is None:
        shape = newshape
    return as_tracer(a).reshape(shape, order=order)


@composite(np.transpose, calls=['np.transpose({0})'], min_dims=2)
def transpose(a: Any, axes: Any = None) -> Tracer:
    t = as_tracer(a)
    return t.transpose(tuple(axes)) if axes is not None else t.transpose()


composite(np.matrix_transpose, calls=['np.matrix_transpose({0})'], min_dims=2,
          impl=NUMPY) if hasattr(np, "matrix_transpose") else None


@composite(np.swapaxes, calls=['np.swapaxes({0}, 0, -1)'], min_dims=1)
def swapaxes(a: Any, axis1: int, axis2: int) -> Tracer:
    return as_tracer(a).swapaxes(axis1, axis2)


@composite(np.moveaxis, calls=['np.moveaxis({0}, 0, -1)'], min_dims=1)
def moveaxis(a: Any, source: Any, destination: Any) -> Tracer:
    t = as_tracer(a)
    return t._view(api.moveaxis(t.node, source, destination))


@composite(np.expand_dims, calls=['np.expand_dims({0}, 0)', 'np.expand_dims({0}, -1)'])
def expand_dims(a: Any, axis: Any) -> Tracer:
    t = as_tracer(a)
    return t._view(api.expand_dims(t.node, axis))


@composite(np.squeeze, calls=['np.squeeze({0}[None])'])
def squeeze(a: Any, axis: Any = None) -> Tracer:
    return as_tracer(a).squeeze(axis)


@composite(np.broadcast_to, calls=['np.broadcast_to({0}, (2,) + {0}.shape)'])
def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Tracer:
    t = as_tracer(array)
    node = api.broadcast_to(t.node, shape)
    if node is t.node:   # (the same shape: still NumPy's read-only view, never x itself)
        node = make("broadcast_to", [node], shape=node.shape)
    if t._is_numpy_scalar():   # (no memory to view: a new array, read-only as NumPy's)
        return Tracer(node, buffer=Buffer(node, writeable=False, zero_d="array"))
    return t._view(node)


@composite(np.broadcast_arrays, calls=['np.broadcast_arrays({0}, {1})'], arrays=2)
def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Tracer, ...]:
    ts = [as_tracer(a) for a in args]
    shape = np.broadcast_shapes(*[t.shape for t in ts])
    return tuple(t if t.shape == shape else t._view(api.broadcast_to(t.node, shape)) for t in ts)


@composite(np.ravel, calls=['np.ravel({0})'])
def ravel(a: Any, order: str = "C") -> Tracer:
    return as_tracer(a).ravel(order)


@composite(np.flip, calls=['np.flip({0})', 'np.flip({0}, 0)'], min_dims=1)
def flip(m: Any, axis: Any = None) -> Tracer:
    t = as_tracer(m)
    return t._view(api.flip(t.node, axis))


for _f, _dims in ((np.fliplr, 2), (np.flipud, 1), (np.rot90, 2), (np.atleast_1d, 0),
                  (np.atleast_2d, 0), (np.atleast_3d, 0)):
    composite(_f, calls=[f"np.{_f.__name__}({{0}})"], min_dims=_dims, impl=NUMPY)


@composite(np.diagonal, calls=['np.diagonal({0})', 'np.diagonal({0}, 1)',
                               'np.diagonal({0}, -1, 0, -1)'], min_dims=2)
def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tracer:
    return as_tracer(a).diagonal(offset, axis1, axis2)


@composite(np.trace, calls=['np.trace({0})', 'np.trace({0}, 1)'], min_dims=2)
def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: Any = None) -> Tracer:
    """The sum of a diagonal (NumPy's trace sums in the dtype ``np.sum`` would, and writes
    ``out=`` as its sum does)."""
    return np.sum(as_tracer(a).diagonal(offset, axis1, axis2), axis=-1, dtype=dtype, out=out)


@composite(np.diag, calls=['np.diag({0})', 'np.diag({0}, 1)'], min_dims=1,
           max_dims=2)
def diag(v: Any, k: int = 0) -> Tracer:
    """A 2-d array's k-th diagonal, or the square matrix with a 1-d ``v`` on it."""
    t = as_tracer(v)
    if t.ndim == 2:
        return t.diagonal(k)
    if t.ndim != 1:
        raise ValueError(with_location("Input must be 1- or 2-d."))
    return diagflat(t, k)


@composite(np.diagflat, calls=['np.diagflat({0})', 'np.diagflat({0}, -2)'])
def diagflat(v: Any, k: int = 0) -> Tracer:
    """The flattened input on the k-th diagonal of a square matrix of zeros: a select between
    the values (along rows for k >= 0, along columns below the diagonal) and zero."""
    t = as_tracer(v).ravel()
    n = t.shape[0]
    size = n + abs(k)
    rows = np.arange(size)[:, None]
    cols = np.arange(size)[None, :]
    on_diag = (cols - rows) == k
    padded = np.concatenate([t, np.zeros(abs(k), t.dtype)]) if k else t
    vals = padded[:, None] if k >= 0 else padded[None, :]
    return np.where(on_diag, vals, np.zeros((), t.dtype))


@composite(np.lib.stride_tricks.sliding_window_view,
           calls=['np.lib.stride_tricks.sliding_window_view({0}, 2, axis=-1)'], min_dims=1,
           name="np.lib.stride_tricks.sliding_window_view")
def sliding_window_view(x: Any, window_shape: Any, axis: Any = None, *, subok: bool = False,
                        writeable: bool = False) -> Tracer:
    """Windows along each given axis (one window size per axis), as read-only views."""
    if writeable:
        raise unsupported("sliding_window_view(writeable=True)",
                          "writes through its overlapping windows are not modelled; use the "
                          "default writeable=False to read the windows")
    t = as_tracer(x)
    window_shape = context.index_value(window_shape)   # (a NumPy integer argument)
    shape = (window_shape,) if isinstance(window_shape, (int, np.integer)) else tuple(window_shape)
    axes = tuple(range(t.ndim)) if axis is None else \
        ((axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))
    if len(shape) != len(axes):
        raise ValueError(with_location("Must provide matching length window_shape and axis; "
                                       f"got {len(shape)} window_shape elements and "
                                       f"{len(axes)} axes elements."))
    out = t
    for size, ax in zip(shape, axes):
        (a,) = normalize_axes(int(ax), t.ndim, "sliding_window_view")
        out = out._view(api.sliding_window(out.node, int(size), a))
    return out


composite(np.triu, calls=['np.triu({0})', 'np.triu({0}, -1)'], min_dims=2,
          impl=NUMPY)
composite(np.tril, calls=['np.tril({0}, 1)'], min_dims=2, impl=NUMPY)


# ------------------------------------------------------------------------------------------
# Joining and splitting
# ------------------------------------------------------------------------------------------

@composite(np.concatenate, calls=['np.concatenate([{0}, {1}], axis=-1)',
                                  'np.concatenate([{0}, {0}[::-1]], axis=None)'],
           arrays=2, min_dims=1, same_shape=True)
def concatenate(arrays: Any, axis: Any = 0, out: Any = None, dtype: Any = None,
                casting: str = "same_kind") -> Tracer:
    return _join(api.concatenate, "np.concatenate", arrays, axis, out, dtype, casting)


def _join(join: Any, name: str, arrays: Any, axis: Any, out: Any, dtype: Any,
          casting: str) -> Any:
    """np.concatenate / np.stack (``join``: the graph builder); with ``out=`` as NumPy's:
    each array cast into out's dtype under ``casting``, out's exact shape (no broadcast)."""
    nodes = [unwrap(as_tracer(a)) for a in arrays]
    if out is None:
        return Tracer(join(nodes, axis, dtype, casting))
    if dtype is not None:
        raise TypeError(with_location("concatenate() only takes `out` or `dtype` as an "
                                      "argument, but both were provided."))
    result = Tracer(join(nodes, axis, getattr(out, "dtype", None), casting))
    if isinstance(out, Tracer) and tuple(out.shape) != tuple(result.shape):
        raise ValueError(with_location("Output array is the wrong shape"))
    return store_out(name, result, out, "unsafe")


if hasattr(np, "concat") and np.concat is not np.concatenate:
    composite(np.concat, calls=['np.concat([{0}, {1}])'], arrays=2, min_dims=1,
              same_shape=True, impl=lambda arrays, /, axis=0, *, out=None, dtype=None,
              casting="same_kind": concatenate(arrays, axis, out, dtype, casting))


@composite(np.stack, calls=['np.stack([{0}, {1}])', 'np.stack([{0}, {1}], -1)'],
           arrays=2, same_shape=True)
def stack(arrays: Any, axis: int = 0, out: Any = None, *, dtype: Any = None,
          casting: str = "same_kind") -> Tracer:
    return _join(api.stack, "np.stack", arrays, axis, out, dtype, casting)


for _f, _call, _dims in ((np.vstack, "np.vstack([{0}, {1}])", 0),
                         (np.hstack, "np.hstack(({0}, {1}))", 0),
                         (np.dstack, "np.dstack([{0}, {1}])", 0),
                         (np.column_stack, "np.column_stack([{0}, {1}])", 1),
                         (np.append, "np.append({0}, {1})", 0)):
    composite(_f, calls=[_call], arrays=2, same_shape=True, min_dims=_dims, max_dims=2,
              impl=NUMPY)

@composite(np.block, calls=["np.block([[{0}, {1}], [{1}, {0}]])", "np.block([{0}, {1}])"],
           arrays=2, same_shape=True, min_dims=1, max_dims=2)
def block(arrays: Any) -> Tracer:
    """numpy/_core/shape_base.py::block: the innermost lists joined along the last axis, the
    next ones along the axis before, every array first given that many dimensions."""
    def depth_of(x: Any) -> int:
        if isinstance(x, tuple):
            raise TypeError(with_location(
                "arrays is a tuple. Only lists can be used to arrange blocks, and np.block does "
                "not allow implicit conversion from tuple to ndarray."))
        if isinstance(x, list):
            if not x:
                raise ValueError(with_location("List at arrays[...] cannot be empty"))
            depths = {depth_of(e) for e in x}
            if len(depths) != 1:
                raise ValueError(with_location("List depths are mismatched."))
            return depths.pop() + 1
        return 0

    from .. import complex as complex_values

    def leaf(x: Any) -> Any:   # (complex blocks: their two parts, joined partwise)
        return complex_values.as_complex(x) if complex_values.is_complex(x) else as_tracer(x)

    def max_ndim(x: Any) -> int:
        return max(max_ndim(e) for e in x) if isinstance(x, list) else leaf(x).ndim

    depth = depth_of(arrays)
    ndim = max(depth, max_ndim(arrays))

    def join(x: Any, level: int) -> Tracer:
        if isinstance(x, list):
            return np.concatenate([join(e, level + 1) for e in x], axis=-(depth - level))
        t = leaf(x)
        return t.reshape((1,) * (ndim - t.ndim) + t.shape) if t.ndim < ndim else t.copy()

    return join(arrays, 0)


def _register_complex_block() -> None:
    from ..complex import FUNCTIONS
    FUNCTIONS[np.block] = block


_register_complex_block()


if hasattr(np, "unstack"):
    composite(np.unstack, calls=['np.unstack({0})'], min_dims=1, impl=NUMPY)

for _f, _call in ((np.split, "np.split({0}, [1, 3])"),
                  (np.array_split, "np.array_split({0}, 3)"),
                  (np.hsplit, "np.hsplit({0}, [2])"),
                  (np.vsplit, "np.vsplit({0}, [1])"),
                  (np.dsplit, "np.dsplit({0}, [1])")):
    composite(_f, calls=[_call], min_dims=3 if _f is np.dsplit else (2 if _f is np.vsplit
                                                                     else 1), impl=NUMPY)


@composite(np.roll, calls=['np.roll({0}, 2)', 'np.roll({0}, -1, axis=0)',
                           'np.roll({0}, (1, 2), axis=(0, -1))'], min_dims=1)
def roll(a: Any, shift: Any, axis: Any = None) -> Tracer:
    """Each axis rolled: a gather of the axis at its positions shifted modulo its length (a
    join of its two slices for axes longer than ROLL_TABLE_MAX)."""
    t = as_tracer(a)
    if axis is None:
        return roll(t.ravel(), shift, 0).reshape(t.shape)
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    # (a 0-d array is one shift, as for NumPy: np.roll(x, np.array(2)))
    shifts = (shift,) * len(axes) if np.ndim(shift) == 0 else tuple(shift)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(axes) != len(shifts):
        raise ValueError(with_location("'shift' and 'axis' should be scalars or 1D sequences"))
    total: dict[int, int] = {}
    for ax, sh in zip(axes, shifts):
        (ax,) = normalize_axes(int(ax), t.ndim, "roll")
        total[ax] = total.get(ax, 0) + operator.index(sh)
    out = t
    for ax, sh in total.items():
        n = out.shape[ax]
        if n == 0 or sh % n == 0:
            continue
        k = sh % n
        if n <= ROLL_TABLE_MAX:
            # element i of the axis is element (i - k) mod n: a gather from a small table,
            # read inline by the kernel that uses it (a join of the two slices is a stored
            # array: a time loop of rolls made one kernel and one pass per roll)
            positions = ((np.arange(n) - k) % n).astype(np.int32)
            out = np.take(out, positions, axis=ax, mode="clip")
        else:   # a long axis: the join of two slices (no table as long as the axis)
            head = _take_slice(out, ax, n - k, n)
            tail = _take_slice(out, ax, 0, n - k)
            out = np.concatenate([head, tail], axis=ax)
    return out if out is not t else Tracer(t.node)


# The longest axis np.roll reads through a table of positions (4,096 int32: 16 KiB)
ROLL_TABLE_MAX = 4096


def _take_slice(t: Tracer, axis: int, start: int, stop: int, step: int = 1) -> Tracer:
    key = [slice(None)] * t.ndim
    key[axis] = slice(start, stop, step)
    return t[tuple(key)]


@composite(np.tile, calls=['np.tile({0}, 2)', 'np.tile({0}, (2, 1, 3))'])
def tile(A: Any, reps: Any) -> Tracer:
    """Copies one after another along each axis (NumPy's tile is these values)."""
    t = as_tracer(A)
    # a 0-d count as one (NumPy: tuple() of it fails, so it is (reps,)); a traced integer's
    # int() is a size the data decides (staged)
    reps = (int(reps),) if np.ndim(reps) == 0 else tuple(int(r) for r in reps)
    d = max(len(reps), t.ndim)
    reps = (1,) * (d - len(reps)) + reps
    out = t.reshape((1,) * (d - t.ndim) + t.shape) if d > t.ndim else t
    for ax, r in enumerate(reps):
        if r == 1:
            continue
        if r == 0 or out.shape[ax] == 0:
            shape = list(out.shape)
            shape[ax] = 0
            out = out[tuple(slice(0, 0) if i == ax else slice(None) for i in range(d))]
            continue
        # r copies one after another: a new axis of r before ``ax``, broadcast, merged
        # into ``ax`` (one kernel reads them all; a join of r pieces was r kernels)
        shape = out.shape
        wide = np.broadcast_to(np.expand_dims(out, ax), shape[:ax] + (r,) + shape[ax:])
        out = wide.reshape(shape[:ax] + (r * shape[ax],) + shape[ax + 1:])
    return Tracer(out.node)   # (new memory: NumPy's tile is always a copy)


@composite(np.resize, calls=['np.resize({0}, 7)', 'np.resize({0}, (2, 3, 5))',
                             'np.resize({0}, 0)'])
def resize(a: Any, new_shape: Any) -> Tracer:
    """NumPy's resize: the flattened array repeated (one broadcast read, not NumPy's join
    of copies) and cut to the new size; zeros when either size is 0."""
    t = as_tracer(a).ravel()
    new_shape = context.index_value(new_shape)
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    shape = tuple(operator.index(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(with_location("all elements of `new_shape` must be non-negative"))
    size = int(np.prod(shape))
    if t.size == 0 or size == 0:
        return np.zeros(shape, t.dtype)
    copies = -(-size // t.size)
    flat = np.broadcast_to(t[None], (copies, t.size)).reshape(-1)
    return flat[:size].reshape(shape)


@composite(np.repeat, calls=['np.repeat({0}, 2)', 'np.repeat({0}, 3, axis=-1)',
                             'np.repeat({0}, [1, 0, 2], axis=0)'], min_dims=1,
           notes="counts computed by the function: the result's length is a data-dependent "
                 "size (found by running the function up to it)")
def repeat(a: Any, repeats: Any, axis: Any = None) -> Tracer:
    """Each element repeated: a scalar count broadcasts a new axis and merges it; a static
    list of counts joins the repeated slices."""
    t = as_tracer(a)
    if axis is None:
        t = t.ravel()
        axis = 0
    (ax,) = normalize_axes(axis, t.ndim, "repeat")
    if isinstance(repeats, Tracer):
        return _repeat_traced(t, repeats, ax)
    fix_captured_value(repeats)   # the counts decide the shape: fixed by the trace
    counts = np.asarray(repeats)
    if counts.ndim == 0 or counts.size == 1:
        r = int(counts.reshape(-1)[0]) if counts.size else 0
        if r < 0:
            raise ValueError(with_location("repeats may not contain negative values."))
        expanded = np.expand_dims(t, ax + 1)
        shape = t.shape[:ax + 1] + (r,) + t.shape[ax + 1:]
        merged = t.shape[:ax] + (t.shape[ax] * r,) + t.shape[ax + 1:]
        return np.broadcast_to(expanded, shape).reshape(merged)
    counts = counts.astype(np.int64)
    if counts.ndim != 1 or counts.shape[0] != t.shape[ax]:
        raise ValueError(with_location(
            f"operands could not be broadcast together with shape ({t.shape[ax]},) "
            f"({counts.shape[0] if counts.ndim else ''},)"))
    if (counts < 0).any():
        raise ValueError(with_location("repeats may not contain negative values."))
    parts = [repeat(_take_slice(t, ax, i, i + 1), int(c), ax) for i, c in enumerate(counts)
             if c > 0]
    if not parts:
        return _take_slice(t, ax, 0, 0)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=ax)


def _repeat_traced(t: Tracer, counts: Tracer, ax: int) -> Tracer:
    """np.repeat with counts computed by the function (run-length decoding, CSR rows to
    COO): the result's length is the counts' sum, a size found by running the function up
    to it (as for ``x[mask]``); element ``k`` comes from the first position whose running
    count passes ``k``."""
    if counts.dtype.kind not in "iub" or not np.can_cast(counts.dtype, np.intp, "safe"):
        raise TypeError(with_location(
            f"Cannot cast array data from {counts.dtype!r} to dtype('int64') according to "
            f"the rule 'safe'"))
    n = t.shape[ax]
    if counts.ndim > 1 or (counts.size != 1 and counts.shape[0] != n):
        raise ValueError(with_location(
            f"operands could not be broadcast together with shape ({n},) "
            f"({', '.join(map(str, counts.shape))}{',' if counts.ndim == 1 else ''})"))
    counts = np.broadcast_to(counts.astype(np.int64).reshape(-1), (n,))
    ends = np.cumsum(counts)
    # one value found by running the function: the length, or -1 for a negative count
    total = int(np.where(np.any(counts < 0), -1, ends[-1] if n else 0))
    if total < 0:
        raise ValueError(with_location("repeats may not contain negative values."))
    index = np.searchsorted(ends, np.arange(total), side="right")
    return np.take(t, index, axis=ax)


@composite(np.pad, calls=['np.pad({0}, 2)', "np.pad({0}, ((1, 2),) * {0}.ndim, mode='edge')",
                          "np.pad({0}, 3, mode='reflect')",
                          "np.pad({0}, 2, mode='symmetric')",
                          "np.pad({0}, 2, mode='wrap')",
                          'np.pad({0}, 1, constant_values=(5, 7))',
                          "np.pad({0}, 2, mode='maximum', stat_length=2)",
                          "np.pad({0}, 1, mode='mean')", "np.pad({0}, 1, mode='median')",
                          "np.pad({0}, 2, mode='linear_ramp', end_values=(1, -1))"],
           min_dims=1)
def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Tracer:
    """Each axis padded in turn (an axis's pad sees the earlier axes' pads, as NumPy's does) by
    joining: constant blocks, repeated edges, reflected / wrapped slices (repeatedly, for pads
    wider than the array), statistics of the edge regions, or ramps to the edges."""
    t = as_tracer(array)
    if isinstance(pad_width, dict):   # (NumPy 2.4: {axis: width or (before, after)})
        seq = [(0, 0)] * t.ndim
        for axis, width in pad_width.items():
            if isinstance(width, int) and not isinstance(width, bool):
                seq[axis] = (width, width)
            elif isinstance(width, tuple) and len(width) == 2 and \
                    all(type(w) is int for w in width):
                seq[axis] = width
            else:
                raise AssertionError(f"Expected code to be unreachable, but got: {width!r}")
        pad_width = seq
    if callable(mode):
        raise unsupported("np.pad with a function as mode")
    widths = _pad_pairs(pad_width, t.ndim, as_index=True, integral=True)
    stat = mode in _PAD_STATISTICS
    lengths = _pad_pairs(kwargs.get("stat_length"), t.ndim, as_index=True) if stat else None
    out = t
    for ax in range(t.ndim):
        before, after = widths[ax]
        if stat and t.size == 0:    # NumPy: only the empty axes' pads are checked
            if t.shape[ax] == 0 and (before or after):
                raise ValueError(with_location(
                    f"can't extend empty axis {ax} using modes other than 'constant' or "
                    f"'empty'"))
            if before or after:
                out = _pad_axis(out, ax, before, after, "empty", kwargs)
        elif stat:   # NumPy computes the statistics (and refuses empty ones) on every axis
            out = _pad_statistic(out, ax, before, after, mode, lengths[ax])
        elif before or after:
            out = _pad_axis(out, ax, before, after, mode, kwargs)
    return out if out is not t else Tracer(t.node)


def _staged_widths(x: Any) -> Any:
    """np.pad's widths with their traced parts (a NumPy integer argument, a small traced
    array) replaced by their staged values (``build.needed_value``)."""
    if isinstance(x, Tracer):
        known = needed_value(x, "np.pad's widths")
        return x if known is None else known
    if isinstance(x, (list, tuple)):
        return type(x)(_staged_widths(v) for v in x)
    return x


def _pad_pairs(x: Any, ndim: int, as_index: bool = False, integral: bool = False) -> list:
    """NumPy's pad argument forms as (before, after) per axis: a scalar, one pair for every
    axis, or one pair per axis; ``as_index`` rounds to integers that may not be negative,
    ``integral`` (the widths) refuses others as NumPy does."""
    if x is None:
        return [(None, None)] * ndim
    # traced widths (NumPy integers passed in): staged by their values, as int() of them
    x = _staged_widths(x)
    if isinstance(x, Tracer) or any(isinstance(v, Tracer) for v in np.ravel(
            np.asarray(x, dtype=object))):
        raise unsupported("np.pad with traced widths or lengths of more than "
                          f"{STAGED_NEEDED_MAX} values",
                          "the result's shape would depend on the data")
    a = np.array(x)
    if integral and a.dtype.kind != "i":
        raise TypeError(with_location("`pad_width` must be of integral type."))
    if as_index:
        a = np.round(a).astype(np.intp, copy=False)
        if a.size and a.min() < 0:
            raise ValueError(with_location("index can't contain negative values"))
    if a.ndim < 3 and a.size == 1:
        v = a.ravel()[0]
        return [(v, v)] * ndim
    if a.ndim < 3 and a.size == 2 and a.shape != (2, 1):
        v0, v1 = a.ravel()
        return [(v0, v1)] * ndim
    return [tuple(p) for p in np.broadcast_to(a, (ndim, 2)).tolist()]


def _constant_block(t: Tracer, ax: int, width: int, value: Any) -> Tracer:
    shape = list(t.shape)
    shape[ax] = width
    if isinstance(value, Tracer):   # constant_values=x.mean(): assigned as NumPy's pad does
        return np.broadcast_to(value.astype(t.dtype), shape)
    # NumPy's pad assigns each value into the padded array (padded[...] = value): one or
    # two values as NumPy scalars (cast as a store casts them: -2 into uint8 is 254), more
    # as Python numbers (out of the dtype's range: OverflowError). The same store, on one
    # element here.
    one = np.empty((), t.dtype)
    try:
        one[...] = value
    except (OverflowError, ValueError, TypeError) as e:
        raise type(e)(with_location(str(e))) from None
    return np.full(shape, one, dtype=t.dtype)


def _pad_axis(t: Tracer, ax: int, before: int, after: int, mode: str, kw: dict) -> Tracer:
    n = t.shape[ax]
    if mode == "constant":
        given = kw.get("constant_values", 0)
        vals = np.broadcast_to(np.asarray(given), (t.ndim, 2))[ax] if context._holds_tracer(given) \
            else _pad_pairs(given, t.ndim)[ax]   # (NumPy's pairs: scalars or Python numbers)
        parts = [_constant_block(t, ax, before, vals[0]), t, _constant_block(t, ax, after, vals[1])]
    elif mode == "empty":
        parts = [_constant_block(t, ax, before, 0), t, _constant_block(t, ax, after, 0)]
    elif n == 0:
        raise ValueError(with_location(
            f"can't extend empty axis {ax} using modes other than 'constant' or 'empty'"))
    elif mode == "edge":
        first, last = _take_slice(t, ax, 0, 1), _take_slice(t, ax, n - 1, n)
        parts = [_repeat_along(first, ax, before), t, _repeat_along(last, ax, after)]
    elif mode in ("reflect", "symmetric"):
        return _pad_reflect(t, ax, before, after, mode == "symmetric",
                            kw.get("reflect_type", "even") == "odd")
    elif mode == "wrap":
        return _pad_wrap(t, ax, before, after)
    elif mode == "linear_ramp":
        return _pad_linear_ramp(t, ax, before, after, kw.get("end_values", 0))
    else:
        raise ValueError(with_location(f"mode '{mode}' is not supported"))
    parts = [p for p in parts if p.shape[ax] > 0]
    return np.concatenate(parts, axis=ax) if len(parts) > 1 else parts[0]


_PAD_STATISTICS = {"maximum": np.amax, "minimum": np.amin, "mean": np.mean,
                   "median": np.median}


def _pad_statistic(t: Tracer, ax: int, before: int, after: int, mode: str,
                   lengths: tuple) -> Tracer:
    """Pads of one value per line: the statistic of the first / last ``stat_length`` values
    (all of them by default), rounded first for integer arrays (NumPy's ``_get_stats``)."""
    n = t.shape[ax]
    left_len, right_len = (n if k is None or k > n else int(k) for k in lengths)
    if (left_len == 0 or right_len == 0) and mode in ("maximum", "minimum"):
        raise ValueError(with_location("stat_length of 0 yields no value for padding"))
    if n == 0 and (before or after):
        raise ValueError(with_location(
            f"can't extend empty axis {ax} using modes other than 'constant' or 'empty'"))
    if not (before or after):
        return t
    func = _PAD_STATISTICS[mode]

    def stat(lo: int, hi: int) -> Tracer:
        value = func(_take_slice(t, ax, lo, hi), axis=ax, keepdims=True)
        if np.issubdtype(t.dtype, np.integer):
            value = np.round(value)
        return value.astype(t.dtype)

    left = stat(0, left_len)
    right = left if left_len == right_len == n else stat(n - right_len, n)
    parts = [_repeat_along(left, ax, before), t, _repeat_along(right, ax, after)]
    parts = [p for p in parts if p.shape[ax] > 0]
    return np.concatenate(parts, axis=ax) if len(parts) > 1 else parts[0]


def _pad_linear_ramp(t: Tracer, ax: int, before: int, after: int, end_values: Any) -> Tracer:
    """Ramps from the end values towards the edge values, the edge itself left out (NumPy's
    ``np.linspace(end, edge, width, endpoint=False)`` in the array's dtype)."""
    n = t.shape[ax]
    ends = _pad_pairs(end_values, t.ndim)[ax]
    parts = []
    for width, end, edge, flip in ((before, ends[0], _take_slice(t, ax, 0, 1), False),
                                   (after, ends[1], _take_slice(t, ax, n - 1, n), True)):
        if width:
            ramp = np.linspace(end, np.squeeze(edge, ax), width, endpoint=False,
                               dtype=t.dtype, axis=ax)
            parts.append(np.flip(ramp, ax) if flip else ramp)
        else:
            parts.append(None)
    joined = [p for p in (parts[0], t, parts[1]) if p is not None]
    return np.concatenate(joined, axis=ax) if len(joined) > 1 else t


def _repeat_along(t: Tracer, ax: int, count: int) -> Tracer:
    shape = list(t.shape)
    shape[ax] = count
    return np.broadcast_to(t, shape)


def _pad_reflect(t: Tracer, ax: int, before: int, after: int, symmetric: bool,
                 odd: bool = False) -> Tracer:
    """Reflection about the edge (``reflect``: the edge not repeated; ``symmetric``: repeated;
    ``reflect_type='odd'``: each reflected chunk is ``2 * edge - chunk``, about the current
    edge), extended as NumPy's pad (``_set_reflect_both``) extends it for wide pads: each
    round reflects a chunk as long as the values padded so far allow, cut to whole periods,
    so the odd chunks meet the same edges as NumPy's."""
    n = t.shape[ax]
    if n == 1:   # NumPy's legacy rule for a singleton axis: its edge, whatever the mode
        return _pad_axis(t, ax, before, after, "edge", {})
    out = t
    while before > 0 or after > 0:
        m = out.shape[ax]
        span = m // n * n if symmetric else (m - 1) // (n - 1) * (n - 1)
        b = min(before, span)
        a = min(after, span)
        parts = []
        if b:
            lo = 0 if symmetric else 1
            chunk = np.flip(_take_slice(out, ax, lo, lo + b), ax)
            parts.append(2 * _take_slice(out, ax, 0, 1) - chunk if odd else chunk)
        parts.append(out)
        if a:
            hi = m if symmetric else m - 1
            chunk = np.flip(_take_slice(out, ax, hi - a, hi), ax)
            parts.append(2 * _take_slice(out, ax, m - 1, m) - chunk if odd else chunk)
        out = np.concatenate(parts, axis=ax) if len(parts) > 1 else out
        before -= b
        after -= a
    return out


def _pad_wrap(t: Tracer, ax: int, before: int, after: int) -> Tracer:
    n = t.shape[ax]
    reps_b, rem_b = divmod(before, n)
    reps_a, rem_a = divmod(after, n)
    parts = []
    if rem_b:
        parts.append(_take_slice(t, ax, n - rem_b, n))
    parts += [t] * (reps_b + 1 + reps_a)
    if rem_a:
        parts.append(_take_slice(t, ax, 0, rem_a))
    return np.concatenate(parts, axis=ax) if len(parts) > 1 else t


@composite(np.delete, calls=['np.delete({0}, 1)', 'np.delete({0}, [0, 2], axis=0)',
                             'np.delete({0}, slice(None, None, 2), axis=-1)'],
           min_dims=1)
def delete(arr: Any, obj: Any, axis: Any = None) -> Tracer:
    """The kept slices joined; ``obj`` (an int, a slice or a sequence) must be static."""
    t = as_tracer(arr)
    if axis is None:
        t = t.ravel()
        axis = 0
    (ax,) = normalize_axes(axis, t.ndim, "delete")
    n = t.shape[ax]
    if isinstance(obj, Tracer):
        # NumPy's own way: a mask of what is kept (positions: False at each one), the kept
        # slices selected by it; their number is the data's (a probe, as x[mask])
        if obj.dtype == np.dtype(bool):
            if obj.shape != (n,):
                raise ValueError(with_location(
                    f"boolean array argument obj to delete must be one dimensional and match "
                    f"the axis length of {n}"))
            keep = ~obj
        elif obj.dtype.kind in "iu":
            # (checked here too: of an empty axis nothing is computed that would check it)
            context.require(((obj >= -n) & (obj < n)).all().node, IndexError,
                            f"index out of bounds for axis {ax} with size {n} (np.delete)")
            keep = context.owned(np.ones(n, bool))
            keep[obj] = False
        else:
            raise IndexError(with_location("arrays used as indices must be of integer (or "
                                           "boolean) type"))
        return t[(slice(None),) * ax + (keep,)]
    if isinstance(obj, slice):
        drop = set(range(n)[obj])
    else:
        idx = np.asarray(obj)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise ValueError(with_location(
                    f"boolean array argument obj to delete must be one dimensional and match "
                    f"the axis length of {n}"))
            drop = set(np.flatnonzero(idx).tolist())
        else:
            flat = idx.reshape(-1).astype(np.int64)
            bad = flat[(flat < -n) | (flat >= n)]
            if bad.size:
                raise IndexError(with_location(
                    f"index {int(bad[0])} is out of bounds for axis {ax} with size {n}"))
            drop = set((flat % n).tolist()) if n else set()
    keep = [i for i in range(n) if i not in drop]
    return _join_runs(t, ax, keep)


# More runs than this are gathered (one kernel reading a table of positions) instead of
# joined slice by slice: np.delete(x, slice(None, None, 2)) of a long axis has n/2 runs.
MAX_JOINED_RUNS = 8


def _join_runs(t: Tracer, ax: int, keep: Sequence[int]) -> Tracer:
    """The elements ``keep`` (ascending) of axis ``ax``: slices of consecutive runs, joined
    (or, for many runs, gathered)."""
    if not keep:
        return _take_slice(t, ax, 0, 0)
    runs = 1 + sum(1 for a, b in zip(keep, keep[1:]) if b != a + 1)
    if runs > MAX_JOINED_RUNS:
        return np.take(t, np.asarray(keep, dtype=np.int64), axis=ax)
    parts = []
    start = prev = keep[0]
    for i in list(keep[1:]) + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(_take_slice(t, ax, start, prev + 1))
        if i is not None:
            start = prev = i
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=ax)


@composite(np.insert, calls=['np.insert({0}, 1, 7)', 'np.insert({0}, [0, 2], -1, axis=0)'],
           min_dims=1, notes="positions known while tracing: slices joined; traced "
           "positions (a vector or one): a take and a select in NumPy's order")
def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Tracer:
    """Slices of the array and the inserted values joined at positions known while tracing;
    at traced positions, ``_insert_at_traced``."""
    t = as_tracer(arr)
    if axis is None:
        t = t.ravel()
        axis = 0
    (ax,) = normalize_axes(axis, t.ndim, "insert")
    n = t.shape[ax]
    traced = isinstance(obj, Tracer)
    if not isinstance(obj, slice) and np.ndim(obj) > 1:
        raise ValueError(with_location(
            "index array argument obj to insert must be one dimensional or scalar"))
    if traced and (obj.dtype.kind not in "iu" or obj.ndim > 1):
        raise unsupported(f"np.insert at traced positions of dtype {obj.dtype} and "
                          f"{obj.ndim} dimensions", "integer positions, one or a vector, are")
    if isinstance(obj, slice):
        positions = np.asarray(range(n + 1)[obj] if obj.stop is None or obj.stop > n
                               else range(n)[obj])
        scalar = False
    elif traced:
        positions = np.zeros(obj.shape, np.int64)   # (stand-ins: the count)
    else:
        positions = np.asarray(obj)
    # NumPy's rule: one position (of any ndim) inserts all the values there, their first
    # axis moved to ``ax`` only for a 0-d position; several take a slab each
    scalar, move = positions.size == 1 and not isinstance(obj, slice), positions.ndim == 0
    positions = positions.reshape(-1).astype(np.int64)
    bad = positions[(positions < -n) | (positions > n)]
    if bad.size:
        raise IndexError(with_location(
            f"index {int(bad[0])} is out of bounds for axis {ax} with size {n}"))
    positions = np.where(positions < 0, positions + n, positions)
    vals = as_tracer(values).astype(t.dtype) if isinstance(values, Tracer) else \
        as_tracer(np.asarray(values, dtype=t.dtype))
    # The values as slabs of the result's shape along ``ax``: NumPy moves a scalar position's
    # values' first axis to ``ax``; a sequence of positions takes one slab each.
    slab_shape = list(t.shape)
    if scalar:
        v = vals.reshape((1,) * (t.ndim - vals.ndim) + vals.shape) if vals.ndim < t.ndim \
            else vals   # (np.array(values, ndmin=arr.ndim))
        if move:
            v = np.moveaxis(v, 0, ax)
        slab_shape[ax] = v.shape[ax]
        slabs = [np.broadcast_to(v, slab_shape)]
        positions = positions[:1]
    else:
        slab_shape[ax] = len(positions)
        v = vals.reshape(vals.shape + (1,) * 0)
        if v.ndim < t.ndim:
            v = v.reshape((1,) * (t.ndim - v.ndim) + v.shape)
        block = np.broadcast_to(v, slab_shape)
        slabs = [_take_slice(block, ax, i, i + 1) for i in range(len(positions))]
    if traced:
        return _insert_at_traced(t, ax, obj, slabs[0] if scalar else block)
    order = np.argsort(positions, kind="stable")
    parts = []
    prev = 0
    for k in order:
        p = int(positions[k])
        if p > prev:
            parts.append(_take_slice(t, ax, prev, p))
        parts.append(slabs[k])
        prev = max(prev, p)
    if prev < n:
        parts.append(_take_slice(t, ax, prev, n))
    parts = [p for p in parts if p.shape[ax] > 0] or [_take_slice(t, ax, 0, 0)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=ax)


def _insert_at_traced(t: Tracer, ax: int, obj: Tracer, block: Tracer) -> Tracer:
    """np.insert of ``block``'s slabs along ``ax`` (one per position of a vector ``obj``, or
    all of them at a 0-d ``obj``) at positions the data decides: the result's size is known
    (n + the slabs), its order is NumPy's (numpy/lib/_function_base_impl.py::insert: the
    positions stably sorted, the k-th new slab's final place its position + k), each output
    slab taken from the new ones or, in order, from the array."""
    n, count = t.shape[ax], block.shape[ax]
    if count == 0:
        return t.copy()
    pos = obj.astype(np.int64).reshape(-1)
    context.require(((pos >= -n) & (pos <= n)).all().node, IndexError,
                    f"index out of bounds for axis {ax} with size {n} (np.insert)")
    pos = np.where(pos < 0, pos + n, pos)
    if pos.size == 1 and count != 1:
        pos = np.broadcast_to(pos, (count,))   # a 0-d position: the slabs one after another
    order = np.argsort(pos, kind="stable")
    steps = as_tracer(np.arange(count, dtype=np.int64))
    final = as_tracer(np.zeros(count, np.int64))   # (constants of the trace, written)
    final[order] = pos[order] + steps              # where each new slab lands
    total = n + count
    is_new = as_tracer(np.zeros(total, bool))
    is_new[final] = True
    src_new = as_tracer(np.zeros(total, np.int64))
    src_new[final] = steps
    new = np.take(block, src_new, axis=ax)
    if n == 0:
        return new
    src_old = np.clip(np.cumsum(~is_new) - 1, 0, n - 1)
    shape = [1] * t.ndim
    shape[ax] = total
    return np.where(is_new.reshape(shape), new, np.take(t, src_old, axis=ax))


# ------------------------------------------------------------------------------------------
# Array creation from a traced array, queries
# ------------------------------------------------------------------------------------------

def _like(fill: Any, name: str):
    def fn(a, dtype=None, order="K", subok=True, shape=None, *, device=None):  # type: ignore[no-untyped-def]
        t = as_tracer(a)
        out = Tracer(api.full_like(unwrap(t), fill, dtype, shape))
        return _in_order(out, t, order, shape is None)
    fn.__name__ = name
    return fn


composite(np.zeros_like, calls=['np.zeros_like({0})'], impl=_like(0, "zeros_like"))
composite(np.ones_like, calls=['np.ones_like({0}, dtype=np.float32)'],
          impl=_like(1, "ones_like"))
# (the test reads only what NumPy defines: integer garbage times 0 is 0, a float NaN is not)
composite(np.empty_like, calls=['np.empty_like({0}, dtype=np.int16) * 0'],
          impl=_like(0, "empty_like"),
          notes="the values are zeros (NumPy's are uninitialised)")


@composite(np.full_like, calls=['np.full_like({0}, 3)', 'np.full_like({0}, {0}[..., :1])'])
def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None, *, device: Any = None) -> Tracer:
    t = as_tracer(a)
    dt = np.dtype(dtype) if dtype is not None else t.dtype
    shp = t.shape if shape is None else tuple(np.atleast_1d(shape))
    out = np.broadcast_to(fill_value.astype(dt), shp).copy() \
        if isinstance(fill_value, Tracer) else Tracer(api.full_like(t.node, fill_value, dt, shp))
    return _in_order(out, t, order, shape is None)


def _in_order(out: Tracer, source: Tracer, order: str, same_shape: bool = True) -> Tracer:
    """``out`` laid out in ``order``: as ``source`` ('K', 'A'), C's, or Fortran's (a layout
    the trace does not model)."""
    if order == "F" and sum(n > 1 for n in out.shape) > 1:
        out._buf.layout_known = False
        return out
    return inherit_layout(out, source) if same_shape and order in ("K", "A") else out


@composite(np.copy, calls=['np.copy({0})'])
def copy(a: Any, order: str = "K", subok: bool = False) -> Tracer:
    if order not in ("C", "F", "A", "K"):
        raise ValueError(with_location(
            f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})"))
    t = as_tracer(a)
    out = as_array_memory(t.copy())   # np.copy of a NumPy scalar: a 0-d array
    return _in_order(out, t, order)   # (its default, 'K': a's)


@composite(np.astype, calls=['np.astype({0}, np.float32)'])
def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Tracer:
    return as_tracer(x).astype(dtype, copy=copy)


composite(np.shape, calls=['np.zeros(np.shape({0}))'],
          impl=lambda a: as_tracer(a).shape)
composite(np.ndim, calls=['np.zeros(np.ndim({0}))'], impl=lambda a: as_tracer(a).ndim)
composite(np.size, calls=['np.zeros(np.size({0}))'],
          impl=lambda a, axis=None: (as_tracer(a).size if axis is None
                                     else as_tracer(a).shape[axis]))

__all__ = ["ALL", "NUMERIC"]
