"""NumPy's mutable arrays over the graph's immutable values: buffers, views and writes.

In NumPy an array is memory; views share it, and a write through any of them is seen by
every other view and name of the same memory. Graph nodes are immutable values. A
``Buffer`` stands for one piece of NumPy memory: ``node`` is the current value of its whole
base array, replaced by every write. A ``Tracer`` is a buffer and a *path*: the movement
nodes (``slice``, ``squeeze``, ``expand_dims``, ``reshape``, ``transpose``, and the
read-only ``broadcast_to``, ``diagonal``, ``sliding_window``) that lead from the base to it.
Reading a tracer replays its path on the buffer's current value (``replay``), so after a
write every view reads the new values, as in NumPy.

A write makes the new value of the tracer written to, then carries it up the path
(``carry_up``): a transpose is undone by the inverse transpose, a squeeze / expand_dims /
reshape by reshaping back, and a ``slice`` by ``region_update``, a select of the new values
into the region the slice covers (positions from one small table per sliced dimension, the
new values read with a gather), so a write fuses into the kernels that read the result and
costs no copy of its own; a large contiguous region of memory the function made is a join
of x's slabs around it and the new values instead (``JOIN_MIN_ELEMENTS``), so its values are
computed over the region alone at affine positions. Writes with advanced keys known at trace
time use a table of positions over the whole array (``table_update``, NumPy's own indexing
computes it, with NumPy's order for repeated indices); a traced boolean mask a select and,
for an array of values, a prefix count that says which value each selected element takes
(``mask_update``).
"""
from __future__ import annotations

import contextvars
import math
from typing import Any, Sequence

import numpy as np

from ..errors import with_location
from .build import cast, constant, make
from ..ops import OPS
from .graph import Node
from ..ops.rules import broadcast_shape

BOOL_DT = np.dtype(bool)

# Movement ops a write can go back through, and the read-only ones (NumPy's broadcast_to,
# diagonal and sliding_window_view return read-only views). ``bitcast`` (x.view(np.int32)
# of float32 memory) moves nothing but reads the same bytes as another dtype: a view too.
WRITABLE_VIEWS = frozenset({"slice", "squeeze", "expand_dims", "reshape", "transpose",
                            "bitcast"})
READONLY_VIEWS = frozenset({"broadcast_to", "diagonal", "sliding_window"})
VIEW_OPS = WRITABLE_VIEWS | READONLY_VIEWS


class Buffer:
    """One piece of NumPy memory while tracing: ``node`` is the value of its base array now.

    ``argument``: the name of the caller's array this is (an argument or a global array),
    whose final value the compiled function writes back; None for memory the function made.
    ``version`` counts writes (tracers cache their value until it changes). ``zero_d``: what
    a 0-d value here is in NumPy, where ``x op= y`` tells the two apart: "array" (an ndarray,
    written in place: ``np.zeros(())``, ``np.array(v)``, a 0-d array argument and copies of
    them), "scalar" (a NumPy scalar, immutable: ``x op= y`` rebinds x; a NumPy scalar
    argument), or None: an op's result, a scalar in NumPy unless it is an argument's."""

    __slots__ = ("node", "version", "argument", "writeable", "zero_d", "layout_known",
                 "from_arguments", "reshaped", "poisoned")

    def __init__(self, node: Node, argument: str | None = None, writeable: bool = True,
                 zero_d: str | None = None):
        self.node = node
        self.version = 0
        self.argument = argument
        self.writeable = writeable
        self.zero_d = zero_d
        # False: memory NumPy lays out by its operands' layout (order 'K') where they were
        # all permuted (``x.T + 1`` is Fortran-ordered): not modelled, so whether a reshape
        # or ravel of it is a view is not known (``tracer.operands_layout``)
        self.layout_known = True
        # the graph-input indices of the arguments whose layout NumPy lays this memory out
        # by (``x + 1`` of a Fortran-ordered x is Fortran-ordered), which the trace takes as
        # C order; ``reshaped``: a reshape or ravel of it was decided a view or a copy by that
        # (``TraceState.assumed_c_layout``)
        self.from_arguments: frozenset = frozenset()
        self.reshaped = False
        # set (where) when a write through a view of it whose view-or-copy NumPy decides by a
        # layout the trace does not know took that view into memory of its own: reading or
        # writing this memory after that is refused (``Tracer._write``)
        self.poisoned: str | None = None

    @property
    def written(self) -> bool:
        return self.version > 0


class Lens:
    """A path step that is not a movement node: a view NumPy makes that the graph computes
    (``trace/memory_views.py``: the bytes read as items of another size, as_strided's
    windows). ``apply`` reads the view from the value before it, ``update`` writes a new
    view value back into that value, and ``shadow`` gives the layout NumPy gives the view."""

    op = "lens"

    def apply(self, x: Node) -> Node:  # pragma: no cover - interface
        raise NotImplementedError

    def update(self, old: Node, new: Node) -> Node:  # pragma: no cover - interface
        raise NotImplementedError

    def shadow(self, arr: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


def movement_path(base: Node, view: Node) -> tuple[Node, ...] | None:
    """The movement nodes from ``base`` to ``view`` (outermost last), or None when ``view``
    is not a chain of views of ``base``."""
    chain = []
    n = view
    while n is not base:
        if (n.op not in VIEW_OPS and not scalar_gather(n)) or not n.args:
            return None
        chain.append(n)
        n = n.args[0]
    return tuple(reversed(chain))


def scalar_gather(n: Node) -> bool:
    """A gather at 0-d indices only: ``x[k]`` with ``k`` a traced NumPy integer scalar, which
    NumPy makes a view (basic indexing at a position known when the function runs)."""
    return n.op == "gather" and all(a.ndim == 0 for a in n.args[1:])


def values_along(node: Node, path: Sequence[Node]) -> list[Node]:
    """``[base, view 1, ..., view k]``: the same views applied to a new value of the base."""
    out = [node]
    for step in path:
        if isinstance(step, Lens):
            out.append(step.apply(out[-1]))
        else:
            out.append(make(step.op, [out[-1]] + list(step.args[1:]), **dict(step.attrs)))
    return out


def replay(node: Node, path: Sequence[Node]) -> Node:
    return values_along(node, path)[-1]


def permuted(base_shape: Sequence[int], path: Sequence[Node]) -> bool:
    """Whether the view at the end of ``path`` of C-contiguous memory has its axes in
    another order than C's (a transpose not undone: NumPy's results of it, order 'K', are
    laid out so), as its shadow's strides tell; a view without a transpose has C's order."""
    if not any(getattr(step, "op", None) == "transpose" for step in path):
        return False
    try:
        arr = shadow(base_shape, path)
    except ValueError:   # (an argument's reshaped view: C memory would have copied)
        return True
    strides = [abs(st) for st, n in zip(arr.strides, arr.shape) if n > 1 and st != 0]
    return any(a < b for a, b in zip(strides, strides[1:]))


def readonly_step(path: Sequence[Node]) -> Node | None:
    """The first step of ``path`` that makes a view NumPy returns read-only (diagonal,
    broadcast_to, ..., as_strided(writeable=False)), or None."""
    return next((s for s in path if s.op in READONLY_VIEWS or
                 isinstance(s, Lens) and getattr(s, "writeable", True) is False), None)


def carry_up(base: Node, path: Sequence[Node], new: Node) -> Node:
    """The new value of the base when the view at the end of ``path`` becomes ``new``."""
    olds = values_along(base, path)
    for step, old in zip(reversed(path), reversed(olds[:-1])):
        new = _step_update(step, old, new)
    return new


def _step_update(step: Node, old: Node, new: Node) -> Node:
    from . import numpy_api as api
    if isinstance(step, Lens):
        return step.update(old, new)
    op = step.op
    if op in ("squeeze", "expand_dims", "reshape"):
        return api.reshape(new, old.shape)
    if op == "transpose":
        perm = step.attr("perm")
        return api.transpose(new, tuple(int(i) for i in np.argsort(perm)))
    if op == "slice":
        return region_update(old, step.attr("slices"), new)
    if scalar_gather(step):   # x[k] = new, k the view's position along its axes
        from .indexing import setitem
        axes = step.attr("axes")
        key = tuple(step.args[1 + axes.index(d)] if d in axes else slice(None)
                    for d in range(old.ndim))
        return setitem(old, key, new)
    if op == "bitcast":     # the written bits, read back as the base's dtype
        if old.dtype == BOOL_DT:
            from ..errors import UnsupportedOperationError
            raise UnsupportedOperationError(with_location(
                f"writing through a {new.dtype} view of a bool array is not supported by "
                "tracearray: NumPy would keep bytes other than 0 and 1 in the bool array"))
        return make("bitcast", [new], dtype=old.dtype.str)
    raise ValueError(with_location("assignment destination is read-only"))


# ------------------------------------------------------------------------------------------
# Regions
# ------------------------------------------------------------------------------------------

def region_update(x: Node, slices: Sequence[tuple[int, int, int]], y: Node) -> Node:
    """``x`` with ``x[slices]`` replaced by ``y`` (``slices``: per dimension, the range()
    bounds of a ``slice`` node; ``y`` has the sliced shape and x's dtype)."""
    from . import numpy_api as api
    ranges = [range(a, b, c) for a, b, c in slices]
    if any(len(r) == 0 for r in ranges):
        return x                                   # an empty region: nothing is written
    full = [r == range(n) for r, n in zip(ranges, x.shape)]
    if all(full):
        return y
    if all(r.step == 1 for r in ranges) and math.prod(y.shape) >= JOIN_MIN_ELEMENTS and \
            JOIN_REGIONS.get():
        return _joined(x, ranges, y)
    picked = [d for d in range(x.ndim) if not full[d]]
    rest = [d for d in range(x.ndim) if full[d]]
    b_shape = tuple(x.shape[d] for d in picked)
    index_nodes, mask = [], None
    for j, d in enumerate(picked):
        r, n = ranges[d], x.shape[d]
        pos = np.arange(n, dtype=np.int64)
        off = pos - r.start
        q = off // r.step
        inside = (off % r.step == 0) & (q >= 0) & (q < len(r))
        idx = np.clip(q, 0, len(r) - 1).astype(np.int32 if n < 2**31 else np.int64)
        shape_b = tuple(n if k == j else 1 for k in range(len(picked)))
        index_nodes.append(api.broadcast_to(constant(idx.reshape(shape_b)), b_shape))
        m = constant(inside.reshape(tuple(n if k == d else 1 for k in range(x.ndim))))
        mask = m if mask is None else api.apply_ufunc(np.logical_and, mask, m)
    gathered = make("gather", [y] + index_nodes, axes=tuple(picked), at=0, mode="valid",
                    messages=("",) * len(picked))
    # the gather's dimensions: the picked ones first, then the full ones; back to x's order
    order = picked + rest
    gathered = api.transpose(gathered, tuple(order.index(d) for d in range(x.ndim)))
    return make("where", [mask, gathered, x])


# A region of at least this many elements, contiguous along every axis (steps of 1), of
# memory the function made (``JOIN_REGIONS``, set by ``Tracer.__setitem__``), is written as
# a join: x's slices before and after the region along the first axis it does not
# cover, the rest of it inside (recursively), so the kernel that computes the new values
# reads its operands at affine positions over the region alone. The select above computes
# them at gathered positions over all of x (a 2048 x 2048 stencil step: 9.2 -> 4.7 ms on
# the CPU). Small regions (one element: out[i] = v in a loop) stay selects: a join is a
# kernel per slab. On a GPU the select is faster at every size measured (H100,
# benchmarks/gpu_writes.py: a 16384 x 16384 stencil into a copy 0.92 ms as a select, 1.04 as
# a join whose interior kernel stores at an offset of one element; 20 steps of a 2048 x 2048
# heat loop 0.61 against 1.10 ms), so traces for a GPU make none (``TraceState.joins``).
JOIN_MIN_ELEMENTS = 4096
# False while writing into an argument's (or a global array's) memory: its one select
# kernel writes the argument in place (``fuse.plan.in_place_updates``), where a join would
# be a new array copied back (a[:, 2:] = b[:, :-2] * 2 of 1024 x 1024: 0.72 -> 1.50 ms).
JOIN_REGIONS: contextvars.ContextVar[bool] = contextvars.ContextVar("join_regions",
                                                                    default=True)


def _joined(x: Node, ranges: Sequence[range], y: Node, d: int = 0) -> Node:
    """``x`` with its region ``ranges`` (steps of 1) replaced by ``y``, as a join along the
    first axis from ``d`` on that the region does not cover whole."""
    from . import numpy_api as api
    while d < x.ndim and ranges[d] == range(x.shape[d]):
        d += 1
    if d == x.ndim:
        return y
    r = ranges[d]

    def cut(node: Node, start: int, stop: int) -> Node:
        return make("slice", [node], slices=tuple((start, stop, 1) if k == d else (0, n, 1)
                                                  for k, n in enumerate(node.shape)))
    parts = [cut(x, 0, r.start)] if r.start > 0 else []
    parts.append(_joined(cut(x, r.start, r.stop), ranges, y, d + 1))
    if r.stop < x.shape[d]:
        parts.append(cut(x, r.stop, x.shape[d]))
    return parts[0] if len(parts) == 1 else api.concatenate(parts, d)


def table_update(x: Node, key: Any, y: Node) -> Node:
    """``x`` with ``x[key] = y`` for a key NumPy can apply at trace time (integer arrays,
    lists, boolean arrays known then, mixed with basic items); ``y`` already has the shape
    of ``x[key]`` and x's dtype. Repeated positions take the value NumPy's own assignment
    leaves there."""
    from . import numpy_api as api
    positions = np.arange(x.size, dtype=np.int64).reshape(x.shape)[key]
    if positions.size == 0:
        return x
    table = np.full(x.size, -1, dtype=np.int64)
    table[np.asarray(positions).ravel()] = np.arange(positions.size)
    inside = table >= 0
    idx = np.where(inside, table, 0).astype(np.int32 if positions.size < 2**31 else np.int64)
    values = api.reshape(y, (-1,))
    gathered = make("gather", [values, constant(idx.reshape(x.shape))], axes=(0,), at=0,
                    mode="valid", messages=("",))
    return make("where", [constant(inside.reshape(x.shape)), gathered, x])


def mask_update(x: Node, lead: int, mask: Node, value: Node, elementwise: bool = False) -> Node:
    """``x[(:,) * lead + (mask, ...)] = value`` for a traced boolean ``mask`` covering dims
    ``lead .. lead + mask.ndim`` of x; ``value`` has x's dtype and any shape NumPy accepts
    (``elementwise``: value has x's shape and element p goes to position p, as for
    ``x[mask] = y[mask]``)."""
    from . import context
    from . import numpy_api as api
    if elementwise:
        m = api.reshape(mask, (1,) * lead + mask.shape + (1,) * (x.ndim - lead - mask.ndim))
        return make("where", [api.broadcast_to(m, x.shape), value, x])
    m = mask.ndim
    check_mask_shape(x.shape, lead, mask)
    # work on x with the masked dims first
    perm = tuple(range(lead, lead + m)) + tuple(range(lead)) + tuple(range(lead + m, x.ndim))
    xt = api.transpose(x, perm)
    trailing = xt.shape[m:]
    # NumPy broadcasts value to x[..., mask, ...]'s shape: x's leading dims, the count in
    # the mask's place, x's trailing dims; the select below wants (count,) + trailing
    lead_shape, rest_shape = tuple(x.shape[:lead]), tuple(x.shape[lead + m:])
    rank = lead + 1 + len(rest_shape)
    vshape = value.shape
    while len(vshape) > rank and vshape[0] == 1:
        value = api.reshape(value, vshape[1:])
        vshape = value.shape
    if len(vshape) < rank:
        value = api.reshape(value, (1,) * (rank - len(vshape)) + tuple(vshape))
    others = tuple(value.shape[:lead]) + tuple(value.shape[lead + 1:])
    try:
        fits = len(vshape) <= rank and \
            broadcast_shape([others, trailing]) == tuple(trailing)
    except ValueError:
        fits = False
    if not fits:
        shown = str(lead_shape + ("n",) + rest_shape).replace("'n'", "n")
        raise ValueError(with_location(
            f"shape mismatch: value array of shape {tuple(vshape)} could not be broadcast to "
            f"indexing result of shape {shown}"))
    rows_given = value.shape[lead] != 1
    if rows_given:      # the value's count axis first
        value = api.transpose(value, (lead,) + tuple(d for d in range(rank) if d != lead))
    else:
        value = api.reshape(value, others)
    vshape = value.shape
    mask_x = api.reshape(mask, mask.shape + (1,) * len(trailing))
    count = api.reduce("sum", cast(mask, np.int64))
    if not rows_given:
        # one value row for every selected element: a select
        row = value
        new = make("where", [api.broadcast_to(mask_x, xt.shape),
                             api.broadcast_to(row, xt.shape), xt])
    else:
        n_values = vshape[0]
        ok = api.apply_ufunc(np.equal, count, constant(np.int64(n_values)))
        context.require(ok, ValueError,
                        f"NumPy boolean array indexing assignment cannot assign {n_values} "
                        f"input values to the output values where the mask is true (their "
                        f"number differs)")
        if n_values == 0:
            new = xt
        else:
            # the k-th selected element (in C order) takes value row k
            flat = api.reshape(cast(mask, np.int64), (-1,))
            k = api.apply_ufunc(np.subtract, api.scan("cumsum", flat, 0), constant(np.int64(1)))
            k = api.clip(k, 0, n_values - 1)
            rows = api.broadcast_to(value, (n_values,) + tuple(trailing))
            g = make("gather", [rows, api.reshape(k, mask.shape)], axes=(0,), at=0,
                     mode="valid", messages=("",))
            new = make("where", [api.broadcast_to(mask_x, xt.shape), g, xt])
    return api.transpose(new, tuple(int(i) for i in np.argsort(perm)))


def check_mask_shape(shape: Sequence[int], lead: int, mask: Node) -> None:
    """NumPy's IndexError for a boolean mask that does not cover ``shape[lead:]``."""
    want = tuple(shape[lead:lead + mask.ndim])
    if mask.shape == want:
        return
    bad = next((d for d in range(mask.ndim) if d >= len(want) or mask.shape[d] != want[d]), 0)
    raise IndexError(with_location(
        f"boolean index did not match indexed array along axis {lead + bad}; size of axis is "
        f"{want[bad] if bad < len(want) else 0} but size of corresponding boolean axis is "
        f"{mask.shape[bad]}"))


def shadow(base_shape: Sequence[int], path: Sequence[Node],
           memory: np.ndarray | None = None) -> np.ndarray:
    """An array with the layout (element strides) NumPy gives the view at the end of
    ``path`` of a C-contiguous base, over one byte of memory that is never read: NumPy's own
    view functions compute it, so whether a reshape or ravel of it is a view is NumPy's call.
    Its offset from ``memory`` (that byte) is the view's first element's in the base."""
    strides, acc = [], 1
    for n in reversed(base_shape):
        strides.insert(0, acc)
        acc *= max(int(n), 1)
    arr = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8) if memory is None else memory,
                                          tuple(base_shape), tuple(strides), writeable=False)
    for step in path:
        if isinstance(step, Lens):
            arr = step.shadow(arr)
            continue
        if step.op == "bitcast":    # the same items: the same layout
            continue
        if step.op == "reshape":
            arr = np.reshape(arr, step.attr("shape"), copy=False)
        elif scalar_gather(step) and memory is None:
            # x[k] at a traced k: the view's layout is the same at every position (the
            # offset alone is the data's, and no offset is asked for here)
            at = [slice(None)] * arr.ndim
            for ax in step.attr("axes"):
                at[ax] = 0
            arr = arr[tuple(at)]
        else:
            arr = OPS[step.op].numpy_ref(arr, **dict(step.attrs))
    return arr


def element_layout(base_shape: Sequence[int], path: Sequence[Node]) -> tuple[int, tuple]:
    """The view at the end of ``path`` as (offset, strides) in elements of its C-contiguous
    base (a path of same-size items: no lens)."""
    memory = np.zeros(1, np.uint8)
    arr = shadow(base_shape, path, memory)
    offset = arr.__array_interface__["data"][0] - memory.__array_interface__["data"][0]
    return int(offset), tuple(int(s) for s in arr.strides)
