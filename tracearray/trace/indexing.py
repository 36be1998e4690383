"""``x[key]`` with NumPy's rules: basic indexing as views, advanced indexing as a gather.

Basic indexing (integers, slices, ``None``, ``...``) becomes the view primitives ``slice``,
``squeeze`` and ``expand_dims``. When the key holds an integer array, a list or a boolean
array, NumPy's advanced indexing applies (numpy/_core/src/multiarray/mapping.c):

1. integers in the key become advanced indices too (0-d index arrays), boolean arrays become
   their ``nonzero()`` positions (one index array per dimension they cover);
2. the slices, ``None`` and ``...`` are applied first, as a view ``y``;
3. the index arrays are broadcast together (shape B) and ``gather`` reads ``y`` at them: B
   replaces the indexed dimensions in place when the advanced indices are consecutive in the
   key (``None`` does not separate them), else B comes first.

Index values known at trace time (lists, NumPy arrays, integers) are checked then, with
NumPy's IndexError, and made non-negative; traced index arrays are checked by the kernel that
reads them (``mode='raise'``: the runtime raises NumPy's IndexError at the user's line). A
boolean mask that is itself traced gives a result whose size depends on the data: reduced, it
compiles (``trace/selection.py``); as an array it is not supported yet.

``setitem`` gives the value of x after ``x[key] = value`` (``trace/buffers.py`` carries it
up to the memory x is a view of).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import with_location
from .build import (as_node, captured_node, cast, constant, fix_captured_value, known_value,
                    make, unsupported)
from .graph import Node
from ..ops.rules import broadcast_shape

_VALID_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
                "integer or boolean arrays are valid indices")


# ------------------------------------------------------------------------------------------
# classification of a key
# ------------------------------------------------------------------------------------------

class _Adv:
    """An advanced index: ``value`` is a Node (traced) or an int64 ndarray (known)."""

    def __init__(self, value: Any, dims: int = 1):
        self.value = value
        self.dims = dims        # dimensions of x it consumes (a boolean mask: its ndim)


# where an ellipsis of no dims stood in a key (advanced_key): it consumes no dim of x but
# separates the advanced indices around it
_SEPARATOR = object()


def _classify(k: Any) -> Any:
    """One key item as slice / None / Ellipsis / int / _Adv (or raise NumPy's IndexError)."""
    from .numpy_api import array_from_nested
    if k is None or k is Ellipsis or isinstance(k, slice):
        return k
    if isinstance(k, (bool, np.bool_)):
        return _Adv(np.asarray(bool(k)), 0)
    if isinstance(k, (int, np.integer)):
        return operator.index(k)
    if isinstance(k, range):   # (a sequence of ints to NumPy: an index array)
        k = np.asarray(k, dtype=np.intp)
    if isinstance(k, list) and _holds_nodes(k):
        k = array_from_nested(k)
    if isinstance(k, np.ndarray):
        # an array the function reached through a closure, the bound object, ...: integer
        # indices are read at every call; a mask decides the result's shape, so its values
        # are fixed by the trace (a call with other values there traces again)
        if k.dtype == np.dtype(bool):
            fix_captured_value(k)
        else:
            node = captured_node(k)
            k = k if node is None else node
    if isinstance(k, Node) and known_value(k) is not None:
        # an index array the function made (np.arange(n), a loop variable over one): known
        k = known_value(k)
        if k.ndim == 0 and k.dtype.kind in "iu":
            return operator.index(k[()])   # a NumPy integer scalar, as iterating gives
        if k.ndim == 0 and k.dtype == np.dtype(bool):
            return _Adv(np.asarray(bool(k)), 0)
    if isinstance(k, Node):
        if k.dtype == np.dtype(bool):
            # a traced mask: its nonzero() positions, of a length the data decides
            return _Adv(k, k.ndim)
        if k.dtype.kind not in "iu":
            raise IndexError(with_location(
                "arrays used as indices must be of integer (or boolean) type"))
        return _Adv(k)
    if isinstance(k, (list, tuple, np.ndarray)):
        arr = np.asarray(k)
        if arr.dtype == np.dtype(bool):
            return _Adv(arr, arr.ndim)
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)    # [] indexes as an empty integer array
        if arr.dtype.kind not in "iu":
            raise IndexError(with_location(
                "arrays used as indices must be of integer (or boolean) type"))
        return _Adv(arr)
    raise IndexError(with_location(_VALID_INDEX))


def _holds_nodes(x: Any) -> bool:
    from .tracer import Tracer
    if isinstance(x, (Node, Tracer)):
        return True
    return isinstance(x, (list, tuple)) and any(_holds_nodes(v) for v in x)


# ------------------------------------------------------------------------------------------
# getitem
# ------------------------------------------------------------------------------------------

def compact_key(key: Any) -> Any:
    """A key with its traced selections (``x[m]`` used as an index) compacted into index
    arrays."""
    from .complex_selection import ComplexSelection
    from .selection import MaskedSelection
    if isinstance(key, ComplexSelection):
        key = key.compact()         # (a complex index: the IndexError NumPy raises follows)
    if isinstance(key, MaskedSelection):
        return key.compact().node
    if isinstance(key, tuple):
        return tuple(compact_key(k) for k in key)
    return key


def getitem(x: Node, key: Any) -> Node:
    """``x[key]`` (see the module docstring)."""
    key = compact_key(key)
    items = [_classify(k) for k in (key if isinstance(key, tuple) else (key,))]
    if not any(isinstance(k, _Adv) for k in items):
        return basic_getitem(x, tuple(items))
    return _advanced(x, items)


def basic_getitem(x: Node, key: tuple) -> Node:
    """Integers, slices (any step), None and Ellipsis: a view."""
    n_ell = sum(k is Ellipsis for k in key)
    if n_ell > 1:
        raise IndexError(with_location("an index can only have a single ellipsis ('...')"))
    n_real = sum(k is not None and k is not Ellipsis for k in key)
    if n_real > x.ndim:
        raise IndexError(with_location(
            f"too many indices for array: array is {x.ndim}-dimensional, "
            f"but {n_real} were indexed"))
    if n_ell == 0:
        key = key + (Ellipsis,)
    i = key.index(Ellipsis)
    key = key[:i] + (slice(None),) * (x.ndim - n_real) + key[i + 1:]

    slices, drop, new_axes = [], [], []
    dim = 0
    out_pos = 0
    for k in key:
        if k is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        size = x.shape[dim]
        if isinstance(k, slice):
            slices.append(k.indices(size))
            out_pos += 1
        else:
            idx = operator.index(k)
            if not -size <= idx < size:
                raise IndexError(with_location(
                    f"index {idx} is out of bounds for axis {dim} with size {size}"))
            idx %= size
            slices.append((idx, idx + 1, 1))
            drop.append(dim)
        dim += 1
    out = x
    if any(s != (0, n, 1) for s, n in zip(slices, x.shape)):
        out = make("slice", [out], slices=tuple(slices))
    if drop:
        out = make("squeeze", [out], axes=tuple(drop))
    if new_axes:
        out = make("expand_dims", [out], axes=tuple(new_axes))
    return out


@dataclass(frozen=True)
class AdvancedKey:
    """An advanced key applied NumPy's way: the view ``view`` of x that its slices, ``None``
    and ``...`` make, then the broadcast index arrays ``nodes`` along ``axes`` of that view
    (``at``: where their dimensions go among the view's other ones). ``mode`` 'raise' for
    traced indices (checked by the kernel), 'valid' for known ones (checked here)."""
    view: Node
    nodes: tuple[Node, ...]
    axes: tuple[int, ...]
    at: int
    mode: str
    messages: tuple[str, ...]
    # traced 0-d indices, as they were before broadcasting: (index, axis of view, message)
    scalars: tuple[tuple[Node, int, str], ...] = ()

    @property
    def index_shape(self) -> tuple[int, ...]:
        return self.nodes[0].shape

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of ``x[key]`` (the gather's)."""
        from ..ops.indexing import gather_shape
        return gather_shape([self.view.shape, self.index_shape],
                            {"axes": self.axes, "at": self.at})

    def check_unread(self) -> None:
        """Where nothing is read or written (another dimension is empty) NumPy still checks
        every index: a run-time check of the trace does."""
        if self.mode != "raise":
            return
        if 0 in self.shape and 0 not in self.index_shape:
            _check_unread_indices(self.view, self.nodes, self.axes, self.messages)
        elif 0 in self.index_shape and self.scalars:
            # NumPy checks an integer (a 0-d array) when it parses the key: x[i, []] raises
            # for an i out of bounds although the broadcast indices select nothing
            _check_unread_indices(self.view, [n for n, _d, _m in self.scalars],
                                  [d for _n, d, _m in self.scalars],
                                  [m for _n, _d, m in self.scalars])


def _advanced(x: Node, items: list) -> Node:
    key = advanced_key(x, items)
    if isinstance(key, Node):
        return key
    out = make("gather", [key.view, *key.nodes], axes=key.axes, at=key.at, mode=key.mode,
               messages=key.messages)
    key.check_unread()
    return out


def advanced_key(x: Node, items: list) -> "AdvancedKey | Node":
    """NumPy's advanced indexing of ``x`` by the classified ``items`` (see AdvancedKey); the
    plain view for ``x[..., True, ...]``, which is ``x[..., None, ...]``."""
    advanced = [k for k in items if isinstance(k, (_Adv, int))]
    if len(advanced) == 1 and advanced[0].dims == 0 and \
            not isinstance(advanced[0].value, Node) and advanced[0].value:
        # x[..., True, ...] alone is x[..., None, ...]
        return basic_getitem(x, tuple(None if isinstance(k, _Adv) else k for k in items))
    # 1. expand the ellipsis; integers become 0-d index arrays; masks their nonzero()
    consumed = sum(k.dims if isinstance(k, _Adv) else 1 for k in items
                   if k is not None and k is not Ellipsis)
    if sum(k is Ellipsis for k in items) > 1:
        raise IndexError(with_location("an index can only have a single ellipsis ('...')"))
    if consumed > x.ndim:
        raise IndexError(with_location(
            f"too many indices for array: array is {x.ndim}-dimensional, "
            f"but {consumed} were indexed"))
    if Ellipsis not in items:
        items = items + [Ellipsis]
    e = items.index(Ellipsis)
    # an ellipsis of no dims still separates the advanced indices around it, as in NumPy
    # (x[:, [0, 0], ..., 0] of a 3-d x puts the broadcast dims first)
    items = items[:e] + ([slice(None)] * (x.ndim - consumed) or [_SEPARATOR]) + items[e + 1:]

    basic: list[Any] = []       # the key of the view y (advanced positions: full slices)
    adv: list[tuple[int, int, Any]] = []   # (dim of y, dim of x, index: Node or ndarray)
    adv_key_pos: list[int] = []  # positions in the key (without None) of advanced items
    y_dim = x_dim = key_pos = 0
    for k in items:
        if k is _SEPARATOR:
            key_pos += 1
            continue
        if k is None:       # a new axis (it separates advanced indices, as in NumPy)
            basic.append(None)
            y_dim, key_pos = y_dim + 1, key_pos + 1
            continue
        if isinstance(k, int):
            k = _Adv(np.asarray(k, dtype=np.int64))
        if isinstance(k, _Adv):
            if k.dims == 0 and not isinstance(k.value, Node):
                # a 0-d mask: a new axis of size 1, indexed by [0] (True) or [] (False)
                # (a traced one, whose truth is the data's, below)
                basic.append(None)
                adv.append((y_dim, -1, np.zeros(int(bool(k.value)), dtype=np.int64)))
                adv_key_pos.append(key_pos)
                y_dim, key_pos = y_dim + 1, key_pos + 1
                continue
            if isinstance(k.value, Node) and k.value.dtype == np.dtype(bool):
                # a traced mask (a 0-d one: a new axis of 0 or 1 rows)
                from .buffers import check_mask_shape
                from .selection import nonzero_positions
                mask = k.value if k.dims else make("reshape", [k.value], shape=(1,))
                if k.dims:
                    check_mask_shape(x.shape, x_dim, mask)
                else:
                    basic.append(None)
                for d, pos in enumerate(nonzero_positions(mask)):
                    if k.dims:
                        basic.append(slice(None))
                    adv.append((y_dim, x_dim if k.dims else -1, pos))
                    adv_key_pos.append(key_pos)
                    y_dim, x_dim = y_dim + 1, x_dim + (1 if k.dims else 0)
                key_pos += 1
                continue
            if isinstance(k.value, np.ndarray) and k.value.dtype == np.dtype(bool):
                mask = k.value
                want = x.shape[x_dim:x_dim + k.dims]
                # NumPy checks only the mask's dimensions of nonzero length (mapping.c: a
                # fancy index's length > 0): x[np.zeros((0, 2), bool)] of a (4, 2) x is empty
                if any(m and m != w for m, w in zip(mask.shape, want)):
                    bad = next(d for d in range(mask.ndim) if mask.shape[d] and
                               mask.shape[d] != want[d])
                    raise IndexError(with_location(
                        f"boolean index did not match indexed array along axis "
                        f"{x_dim + bad}; size of axis is {want[bad]} but size of "
                        f"corresponding boolean axis is {mask.shape[bad]}"))
                for d, pos in enumerate(np.nonzero(mask)):
                    basic.append(slice(None))
                    adv.append((y_dim, x_dim, pos.astype(np.int64)))
                    adv_key_pos.append(key_pos)
                    y_dim, x_dim = y_dim + 1, x_dim + 1
                key_pos += 1
                continue
            basic.append(slice(None))
            adv.append((y_dim, x_dim, k.value))
            adv_key_pos.append(key_pos)
        else:
            basic.append(k)
        y_dim, x_dim, key_pos = y_dim + 1, x_dim + 1, key_pos + 1
    y = basic_getitem(x, tuple(basic))
    # y_dim above counted every item's dim; slices keep theirs, so y's dims line up
    # 2. broadcast the index arrays
    shapes = [a.shape if isinstance(a, Node) else np.shape(a) for _yd, _xd, a in adv]
    try:
        b_shape = broadcast_shape(shapes)
    except ValueError:
        text = " ".join(str(tuple(s)).replace(" ", "").replace(",)", ",)") for s in shapes)
        raise IndexError(with_location(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            + text)) from None
    # 3. check known indices now; the kernel checks traced ones
    traced = any(isinstance(a, Node) for _yd, _xd, a in adv)
    messages = tuple(f"index {{}} is out of bounds for axis {xd} with size {y.shape[yd]}"
                     for yd, xd, _a in adv)
    nodes, scalars = [], []
    for (yd, xd, a), msg in zip(adv, messages):
        n = y.shape[yd]
        if isinstance(a, Node):
            node = a
            if a.ndim == 0:
                scalars.append((a, yd, msg))
        else:
            # NumPy checks an integer (and a 0-d array) when it parses the key, so x[[], 0]
            # of an empty axis raises; an index array only over the broadcast elements it
            # visits, so x[[], [5]] gives an empty result
            a = np.asarray(a).astype(np.int64)
            bad = (a < -n) | (a >= n)
            if bad.any() and (a.ndim == 0 or math.prod(b_shape) > 0):
                raise IndexError(with_location(msg.format(int(a[bad].flat[0]))))
            node = constant(np.broadcast_to(np.where(a < 0, a + n, a), b_shape))
        if node.shape != b_shape:
            node = make("broadcast_to", [node], shape=tuple(b_shape))
        nodes.append(node)
    axes = tuple(yd for yd, _xd, _a in adv)
    positions = sorted(set(adv_key_pos))      # (a mask's index arrays share one position)
    consecutive = positions == list(range(positions[0], positions[0] + len(positions)))
    at = sum(1 for d in range(axes[0]) if d not in axes) if consecutive else 0
    return AdvancedKey(y, tuple(nodes), axes, at, "raise" if traced else "valid", messages,
                       tuple(scalars))


def _check_unread_indices(y: Node, nodes: Sequence[Node], axes: Sequence[int],
                          messages: Sequence[str]) -> None:
    """A gather with no elements (another dimension is empty) reads none of its indices, but
    NumPy checks them all: a run-time check of the trace does."""
    from . import context
    from . import numpy_api as api
    for node, d, msg in zip(nodes, axes, messages):
        n = y.shape[d]
        idx = cast(node, np.dtype(np.int64)) if node.dtype != np.dtype(np.int64) else node
        lo = api.apply_ufunc(np.greater_equal, idx, constant(np.int64(-n)))
        hi = api.apply_ufunc(np.less, idx, constant(np.int64(n)))
        ok = api.reduce("all", api.apply_ufunc(np.logical_and, lo, hi))
        context.require(ok, IndexError, msg.replace("index {}", "an index"))


def take(a: Any, indices: Any, axis: Any = None, mode: str = "raise") -> Node:
    """np.take: ``a`` (flattened when ``axis`` is None) indexed along ``axis`` by ``indices``,
    with NumPy's modes; B replaces that axis in place."""
    from .build import normalize_axes
    from . import numpy_api as api
    x = as_node(a)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(with_location(f"clipmode must be one of 'clip', 'raise', or 'wrap' "
                                       f"(got {mode!r})"))
    if axis is None:
        x = api.reshape(x, (-1,))
        ax = 0
        message = f"index {{}} is out of bounds for size {x.shape[0]}"
    else:
        (ax,) = normalize_axes(axis, x.ndim, "take")
        message = f"index {{}} is out of bounds for axis {ax} with size {x.shape[ax]}"
    k = _classify(indices) if not isinstance(indices, Node) else _Adv(indices)
    if isinstance(k, int):
        k = _Adv(np.asarray(k, dtype=np.int64))
    if not isinstance(k, _Adv) or (isinstance(k.value, np.ndarray) and k.value.dtype == bool):
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu" or idx.dtype == bool:
            raise TypeError(with_location(
                f"Cannot cast array data from {idx.dtype!r} to dtype('int64') according to "
                f"the rule 'safe'"))
        k = _Adv(idx.astype(np.int64))
    n = x.shape[ax]
    value = k.value
    out_size = int(np.prod(x.shape[:ax] + np.shape(value) + x.shape[ax + 1:]))
    # NumPy's take (PyArray_TakeFrom) checks every index once per leading position: none
    # when a leading dimension is empty, all of them otherwise (even with nothing to copy)
    checked = int(np.prod(x.shape[:ax])) > 0
    if n == 0 and out_size:
        raise IndexError(with_location("cannot do a non-empty take from an empty axes."))
    if isinstance(value, np.ndarray):
        value = value.astype(np.int64)
        if mode == "wrap":
            value = np.mod(value, n) if n else value
        elif mode == "clip":
            value = np.clip(value, 0, max(n - 1, 0))
        elif checked:
            bad = (value < -n) | (value >= n)
            if bad.any():
                raise IndexError(with_location(message.format(int(value[bad].flat[0]))))
            value = np.where(value < 0, value + n, value)
        node, gmode = constant(value), "valid"
    else:
        node, gmode = value, mode
    out = make("gather", [x, node], axes=(ax,), at=ax, mode=gmode, messages=(message,))
    if gmode == "raise" and out.size == 0 and node.size > 0 and checked:
        _check_unread_indices(x, [node], (ax,), (message,))
    return out


# ------------------------------------------------------------------------------------------
# setitem
# ------------------------------------------------------------------------------------------

def assigned_value(value: Any, dtype: np.dtype) -> Node:
    """The right-hand side of ``x[key] = value`` in x's dtype, converted as NumPy's
    assignment does (unsafe casting of arrays; Python scalars out of range raise)."""
    from .numpy_api import array_from_nested
    if isinstance(value, (list, tuple)) and _holds_nodes(value):
        value = array_from_nested(value)
    if isinstance(value, Node):
        return cast(value, dtype)
    try:
        arr = np.empty(np.shape(value), dtype=dtype)
        arr[...] = value
    except (OverflowError, ValueError, TypeError) as e:
        raise type(e)(with_location(str(e))) from None
    return constant(arr)


def broadcast_value(v: Node, shape: tuple) -> Node:
    """``v`` broadcast to the assignment target's ``shape`` (extra leading 1s dropped), with
    NumPy's error when it does not fit."""
    from . import numpy_api as api
    vs = v.shape
    while len(vs) > len(shape) and vs[0] == 1:
        vs = vs[1:]
    try:
        ok = broadcast_shape([vs, shape]) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        def fmt(s):
            return "(" + ",".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"
        raise ValueError(with_location(
            f"could not broadcast input array from shape {fmt(v.shape)} into shape "
            f"{fmt(shape)}"))
    if vs != v.shape:
        v = api.reshape(v, vs)
    return api.broadcast_to(v, shape)


def setitem(x: Node, key: Any, value: Any) -> Node:
    """The value of ``x`` after ``x[key] = value``, with NumPy's rules: basic keys write a
    region (selects, ``buffers.region_update``), keys known at trace time a table of
    positions (``buffers.table_update``), a traced boolean mask a select
    (``buffers.mask_update``)."""
    from . import buffers
    from .selection import MaskedSelection
    key = compact_key(key)
    raw = key if isinstance(key, tuple) else (key,)
    masks = [i for i, k in enumerate(raw) if isinstance(k, Node) and k.dtype == np.dtype(bool)
             and known_value(k) is None]
    if isinstance(value, MaskedSelection):
        # x[mask] = y[mask], x[mask] += 1, x[mask] = np.sqrt(x[mask]): element k of the
        # selection goes back where it was taken from, a select with the same mask
        lead = value.lead
        others = raw[:lead] + raw[lead + 1:]
        if masks == [lead] and value.mask is raw[lead] and value.values.shape == x.shape \
                and all(k is Ellipsis or k == slice(None) for k in others) \
                and Ellipsis not in raw[:lead]:
            return buffers.mask_update(x, lead, raw[lead], cast(value.values, x.dtype),
                                       elementwise=True)
        value = value.compact().node           # elsewhere: the selected elements, in order
    v = assigned_value(value, x.dtype)
    others = [k for i, k in enumerate(raw) if masks and i != masks[0]]
    if masks and len(masks) == 1 and raw[masks[0]].ndim > 0 and \
            all(k is Ellipsis or k == slice(None) for k in others):
        # x[mask] = v, x[:, mask] = v: a select (other forms: a scatter at the mask's
        # nonzero() positions, below)
        mask = raw[masks[0]]
        before = raw[:masks[0]]
        if Ellipsis in before:
            lead = x.ndim - mask.ndim - sum(1 for k in raw[masks[0] + 1:] if k is not Ellipsis)
        else:
            lead = len(before)
        if lead < 0 or lead + mask.ndim > x.ndim:
            raise IndexError(with_location(
                f"too many indices for array: array is {x.ndim}-dimensional, but "
                f"{len(raw) - 1 + mask.ndim} were indexed"))
        return buffers.mask_update(x, lead, mask, v)
    items = [_classify(k) for k in raw]
    if any(isinstance(k, _Adv) and isinstance(k.value, Node) for k in items):
        # a scatter: positions known when the kernel runs (the last write to one wins)
        akey = advanced_key(x, list(items))
        assert isinstance(akey, AdvancedKey)   # a traced index is never x[True]
        new_view = scatter(akey, broadcast_value(v, akey.shape))
        return buffers.carry_up(x, buffers.movement_path(x, akey.view), new_view)
    if any(isinstance(k, _Adv) for k in items):
        target = _advanced(x, list(items))       # NumPy's checks of the key
        numpy_key = tuple(k.value if isinstance(k, _Adv) else k for k in items)
        return buffers.table_update(x, numpy_key, broadcast_value(v, target.shape))
    target = basic_getitem(x, tuple(items))
    path = buffers.movement_path(x, target)
    return buffers.carry_up(x, path, broadcast_value(v, target.shape))


# ------------------------------------------------------------------------------------------
# scatter: x[idx] = v with traced indices, ufunc.at
# ------------------------------------------------------------------------------------------

def scatter(key: AdvancedKey, values: Node | None, combine: str | None = None,
            loop: tuple[np.dtype, ...] = (), order_free: str | None = None) -> Node:
    """The new value of ``key.view`` when the elements ``key`` selects are assigned
    ``values`` (shape ``key.shape``, the view's dtype), or combined with them by the ufunc
    primitive ``combine`` (``loop``: its dtypes; ``values`` of the second; None for a unary
    ufunc) in the order NumPy visits them. ``order_free``: a float sum whose NumPy
    counterpart adds in another order and in the precision of this dtype (its str:
    reduceat's segments, ``dispatch._reduceat_traced``): computed in this order all the
    same, and judged as a sum by the comparator (testing/bounds.py ``scatter``).""" 
    key.check_unread()
    if 0 in key.index_shape:
        return key.view                         # no position: nothing is written
    args = [key.view, *key.nodes] + ([values] if values is not None else [])
    return make("scatter", args, axes=key.axes, at=key.at, mode=key.mode,
                messages=key.messages, combine=combine,
                loop=tuple(np.dtype(d).str for d in loop), unique=False,
                **({"order_free": order_free} if order_free else {}))


def ufunc_at(uf: np.ufunc, x: Node, indices: Any, values: Any = None,
             order_free: str | None = None) -> Node:
    """The value of ``x`` after ``uf.at(x, indices[, values])``: ``x[indices] = uf(x[indices],
    values)`` where every occurrence of a repeated position counts (unbuffered). As NumPy's
    ufunc.at does, values are converted with ``np.asarray`` (no weak scalars) and the result
    is cast back to x's dtype unsafely."""
    from . import buffers
    from ..ops import OPS, UFUNC_OPS, Kind
    name = f"np.{uf.__name__}.at"
    op = UFUNC_OPS.get(uf)
    if op is None or OPS[op].kind is not Kind.ELEMENTWISE or uf.nout != 1 or uf.nin > 2:
        raise unsupported(name, "tracearray's ufunc.at takes unary and binary ufuncs with one "
                          "output")
    # (NumPy itself checks the number of operands before dispatching to the tracer)
    indices = compact_key(indices)
    raw = indices if isinstance(indices, tuple) else (indices,)
    if any(isinstance(k, Node) and k.dtype == np.dtype(bool) and known_value(k) is None
           for k in raw):
        raise unsupported(f"{name} with a traced boolean mask",
                          "use np.where(mask, f(x), x) for the same result")
    items = [_classify(k) for k in raw]
    v = None
    if values is not None:
        from .numpy_api import array_from_nested
        v = (values if isinstance(values, Node) else
             array_from_nested(values) if isinstance(values, (list, tuple)) and _holds_nodes(values)
             else constant(np.asarray(values)))
    try:
        loop = uf.resolve_dtypes((x.dtype,) + ((v.dtype,) if v is not None else ()) + (None,),
                                 casting="unsafe")
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise type(e)(with_location(f"{name}: {e}")) from None
    if not any(isinstance(k, _Adv) for k in items):
        # a basic key selects every position once: the plain ufunc, written back
        target = basic_getitem(x, tuple(items))
        args = [cast(target, loop[0])] + ([broadcast_value(cast(v, loop[1]), target.shape)]
                                          if v is not None else [])
        new = cast(make(op, args), x.dtype)
        return buffers.carry_up(x, buffers.movement_path(x, target), new)
    akey = advanced_key(x, list(items))
    if isinstance(akey, Node):       # x[..., True]: one position each, as above
        return ufunc_at(uf, x, tuple(None if isinstance(k, _Adv) else k for k in items),
                        values, order_free)
    if v is not None:
        v = broadcast_value(cast(v, loop[1]), akey.shape)
    new_view = scatter(akey, v, combine=op, loop=tuple(loop), order_free=order_free)
    return buffers.carry_up(x, buffers.movement_path(x, akey.view), new_view)
