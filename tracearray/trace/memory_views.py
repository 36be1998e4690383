"""Views NumPy makes of an array's memory that no movement node describes, computed by the
graph: ``ndarray.view(dtype)`` with another item size, and
``np.lib.stride_tricks.as_strided``. Each is a ``buffers.Lens``, a step of a tracer's path
beside the movement nodes, so the view follows later writes to its memory (and writes
through an item-size view reach the memory), as in NumPy.

Another item size (``x.view(np.uint8)`` of float32 values: four bytes each;
``b.view(np.complex64)`` of float32 pairs): reading the view is a small composite of integer
shifts, masks and same-size ``bitcast``s on the last axis (little-endian bytes, as on every
target), and a write through it is the inverse composite, carried up to the base
(``ItemsizeView``).

``as_strided(x, shape, strides)``: element ``i`` of the view is element ``offset + i . s``
of the base's memory, read with a gather whose positions are a sum of small aranges (fused
into the kernel that reads it; no table of positions). Strides are taken in the trace's
layout (every argument C-contiguous: a call whose argument read so is not C-contiguous is
refused, ``TraceState.raw_memory_inputs``), views that reach
outside the memory are refused (NumPy would read whatever lies there), and writes through
one are refused (its elements may overlap) (``StridedView``).

Complex values live above the graph as two real parts (``trace/complex.py``): a view as a
complex dtype is the component float view's even and odd items (slices of the same
memory); a view of a complex array needs the parts to be the two halves of one real pair
array's memory (a complex argument, an FFT's result), whose pair view it then is."""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..errors import UnsupportedOperationError, with_location
from ..ops.elementwise import bitcast_allowed
from . import buffers
from .build import constant, make, unsupported
from .graph import Node


def _uint(size: int) -> np.dtype:
    return np.dtype(f"u{size}")


def _same_size(t: Any, dt: np.dtype) -> Any:
    return t if t.dtype == dt else t.view(dt)


def read_as(x: Node, dst: np.dtype) -> Node:
    """The bytes of ``x`` (a real dtype) read as ``dst`` items (another real item size): the
    last axis of n items becomes one of n * x.itemsize / dst.itemsize."""
    from .tracer import Tracer
    s, d = x.dtype.itemsize, dst.itemsize
    bits = _same_size(Tracer(x), _uint(s))
    lead, n = x.shape[:-1], x.shape[-1]
    if s > d:     # each item splits into s / d smaller ones, the low bytes first
        mask = (1 << (8 * d)) - 1
        pieces = [((bits >> (8 * d * k)) & mask).astype(_uint(d)) for k in range(s // d)]
        out = np.stack(pieces, axis=-1).reshape(lead + (n * (s // d),))
    else:         # every d / s items join into one
        r = d // s
        groups = bits.reshape(lead + (n // r, r)).astype(_uint(d))
        out = groups[..., 0]
        for k in range(1, r):
            out = out | (groups[..., k] << (8 * s * k))
    return _same_size(out, dst).node


class ItemsizeView(buffers.Lens):
    """A path step: the memory's bytes read as ``dtype`` items of another size."""

    op = "itemsize_view"

    def __init__(self, src: np.dtype, dst: np.dtype):
        self.src, self.dst = np.dtype(src), np.dtype(dst)

    def apply(self, x: Node) -> Node:
        return read_as(x, self.dst)

    def update(self, old: Node, new: Node) -> Node:
        if old.dtype == np.dtype(bool):
            raise UnsupportedOperationError(with_location(
                f"writing through a {new.dtype} view of a bool array is not supported by "
                "tracearray: NumPy would keep bytes other than 0 and 1 in the bool array"))
        return read_as(new, old.dtype)

    def shadow(self, arr: np.ndarray) -> np.ndarray:
        """The layout NumPy gives the view (``arr``: a layout in whole items of ``src``)."""
        s, d = self.src.itemsize, self.dst.itemsize
        shape = arr.shape[:-1] + (arr.shape[-1] * s // d,)
        outer = [st * s for st in arr.strides[:-1]]
        strides = tuple(b // d for b in outer) + (1,)
        return np.lib.stride_tricks.as_strided(arr, shape, strides, writeable=False)


def _numpy_view_errors(ndim: int, last_contiguous: bool, bytes_divided: bool = True) -> None:
    """NumPy's ValueErrors for a view as another item size: of a 0-d array, of a last axis
    that is not contiguous, and of a last axis whose bytes the new item size does not
    divide (in that order, as NumPy checks them)."""
    if ndim == 0:
        raise ValueError(with_location(
            "Changing the dtype of a 0d array is only supported if the itemsize is unchanged"))
    if not last_contiguous:
        raise ValueError(with_location(
            "To change to a dtype of a different size, the last axis must be contiguous"))
    if not bytes_divided:
        raise ValueError(with_location(
            "When changing to a larger dtype, its size must be a divisor of the total size "
            "in bytes of the last axis of the array."))


def _check(t: Any, src: np.dtype, dst: np.dtype) -> None:
    """NumPy's conditions for a view as another item size, and what tracearray reads."""
    if sys.byteorder != "little":   # pragma: no cover - every supported target is
        raise unsupported(f"ndarray.view({dst}) of a {src} array", "a big-endian host")
    _numpy_view_errors(t.ndim, True)
    layout = buffers.shadow(t._buf.node.shape, t._path)
    _numpy_view_errors(t.ndim, layout.shape[-1] == 1 or layout.strides[-1] == 1,
                       dst.itemsize <= src.itemsize or
                       (t.shape[-1] * src.itemsize) % dst.itemsize == 0)
    if any((st * src.itemsize) % dst.itemsize for st in layout.strides[:-1]):
        raise unsupported(f"ndarray.view({dst}) of this {src} view",
                          "its rows do not start at whole items of the new dtype")


def _real_kind(dt: np.dtype) -> bool:
    return dt.kind in "biuf" and dt.isnative and dt.itemsize <= 8


def view_real(t: Any, dst: np.dtype) -> Any:
    """``t.view(dst)`` of a real tracer ``t`` where the item sizes differ, or ``dst`` is
    complex."""
    src = t.dtype
    if dst.kind == "c":
        part = np.dtype(f"f{dst.itemsize // 2}")
        if dst.itemsize != src.itemsize:
            _check(t, src, dst)      # NumPy's errors name the complex dtype
        floats = view_real(t, part) if part != src else t
        return _as_complex_view(floats, dst)
    if not (_real_kind(src) and _real_kind(dst)) or dst.kind == "b":
        raise unsupported(f"ndarray.view({dst}) of a {src} array",
                          "views read numbers (bool only as bytes); a byte read as bool "
                          "could hold values other than 0 and 1")
    if src.itemsize == dst.itemsize:
        if not bitcast_allowed(src, dst):  # pragma: no cover - same-size reals are
            raise unsupported(f"ndarray.view({dst}) of a {src} array")
        return t._view(make("bitcast", [t.node], dtype=dst.str))
    _check(t, src, dst)
    lens = ItemsizeView(src, dst)
    from .tracer import Tracer
    return Tracer(lens.apply(t.node), buffer=t._buf, path=t._path + (lens,),
                  ambiguous=t._ambiguous)


def _as_complex_view(floats: Any, dst: np.dtype) -> Any:
    """Complex ``dst`` items from the float pairs of ``floats`` (last axis even)."""
    from .complex import ComplexTracer
    _numpy_view_errors(floats.ndim, True, floats.ndim == 0 or floats.shape[-1] % 2 == 0)
    # (splitting the last axis is a view whatever the caller's layout: not ambiguous)
    pairs = floats._view(make("reshape", [floats.node],
                              shape=floats.shape[:-1] + (floats.shape[-1] // 2, 2)))
    return ComplexTracer.from_pair(pairs)


# Movement steps a complex value's two parts share, as the same step of their pair array
# (one more axis, of 2, at the end).
def _lift(step: Node) -> dict | None:
    op, attrs = step.op, dict(step.attrs)
    if op == "slice":
        return {"slices": tuple(attrs["slices"]) + ((0, 2, 1),)}
    if op in ("squeeze", "expand_dims"):
        return attrs
    if op in ("reshape", "broadcast_to"):
        return {"shape": tuple(attrs["shape"]) + (2,)}
    if op == "transpose":
        perm = tuple(attrs["perm"])
        return {"perm": perm + (len(perm),)}
    return None


def pair_of(z: Any) -> Any:
    """The real (..., 2) tracer whose memory holds complex ``z``'s parts, as a view of that
    memory; None when the parts are not the halves of one pair array."""
    from .tracer import Tracer
    re, im = z.re, z.im
    if re._buf is not im._buf or len(re._path) != len(im._path):
        return None
    for split, (a, b) in enumerate(zip(re._path, im._path)):
        if a is not b:
            break
    else:
        return None
    rest_a, rest_b = re._path[split:], im._path[split:]
    # the parts: pair[..., 0] and pair[..., 1] (a slice of the last axis, then its squeeze),
    # then the same movement steps
    if len(rest_a) < 2 or rest_a[0].op != "slice" or rest_b[0].op != "slice":
        return None
    sa, sb = rest_a[0].attr("slices"), rest_b[0].attr("slices")
    if sa[:-1] != sb[:-1] or tuple(sa[-1]) != (0, 1, 1) or tuple(sb[-1]) != (1, 2, 1):
        return None
    base_path = re._path[:split]
    pair = Tracer(buffers.replay(re._buf.node, base_path), buffer=re._buf, path=base_path,
                  ambiguous=re._ambiguous)
    if pair.shape[-1] != 2 or any(s != (0, n, 1) for s, n in zip(sa[:-1], pair.shape)):
        return None
    squeeze_a, squeeze_b = rest_a[1], rest_b[1]
    if squeeze_a.op != "squeeze" or squeeze_b.op != "squeeze" or \
            tuple(squeeze_a.attr("axes")) != (pair.ndim - 1,) or \
            tuple(squeeze_b.attr("axes")) != (pair.ndim - 1,):
        return None
    for a, b in zip(rest_a[2:], rest_b[2:]):
        if a.op != b.op or a.attrs != b.attrs:
            return None
        lifted = _lift(a)
        if lifted is None:
            return None
        pair = pair._view(make(a.op, [pair.node], **lifted))
    return pair


def view_complex(z: Any, dst: np.dtype) -> Any:
    """``z.view(dst)`` of a complex tracer for another dtype."""
    pair = pair_of(z)
    if pair is None:
        raise unsupported(f"ndarray.view({dst}) of this {z.dtype} array",
                          "its real and imaginary parts are not one array's memory here (a "
                          "complex result of arithmetic); np.stack([z.real, z.imag], "
                          "axis=-1).reshape(...) gives the same values as a new array")
    _numpy_view_errors(z.ndim, True)
    layout = buffers.shadow(pair._buf.node.shape, pair._path)
    _numpy_view_errors(z.ndim, z.shape[-1] == 1 or layout.strides[-2] == 2)
    # (joining the pairs of a contiguous last axis is a view whatever the caller's layout)
    floats = pair._view(make("reshape", [pair.node],
                             shape=pair.shape[:-2] + (pair.shape[-2] * 2,)))
    return view_real(floats, dst) if floats.dtype != dst else floats


class StridedView(buffers.Lens):
    """A path step from a base: ``shape`` elements at ``offset + index . strides`` (in
    elements) of the base's memory in C order."""

    op = "as_strided"

    def __init__(self, offset: int, shape: tuple, strides: tuple, writeable: bool):
        self.offset, self.shape, self.strides = offset, shape, strides
        self.writeable = writeable

    def apply(self, base: Node) -> Node:
        from .tracer import Tracer
        if int(np.prod(self.shape)) == 0:
            return constant(np.zeros(self.shape, base.dtype))
        flat = Tracer(base).reshape(-1)
        kind = np.int64 if flat.size >= 2**31 else np.int32
        idx: Any = Tracer(constant(np.full((1,) * len(self.shape), self.offset, kind)))
        for d, (n, st) in enumerate(zip(self.shape, self.strides)):
            if n > 1 and st != 0:   # traced: the positions fuse into the read, no table
                term = np.arange(n, dtype=kind).reshape(
                    tuple(n if k == d else 1 for k in range(len(self.shape)))) * st
                idx = idx + Tracer(constant(term))
        return flat[np.broadcast_to(idx, self.shape)].node

    def update(self, old: Node, new: Node) -> Node:
        if not self.writeable:
            raise ValueError(with_location("assignment destination is read-only"))
        raise UnsupportedOperationError(with_location(
            "writing through np.lib.stride_tricks.as_strided's view is not supported by "
            "tracearray (its elements may overlap, and NumPy's result then depends on the "
            "order of its loop); write into the array itself"))

    def shadow(self, arr: np.ndarray) -> np.ndarray:
        flat = arr.reshape(-1)
        if int(np.prod(self.shape)) == 0 or flat.size == 0:
            return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), self.shape,
                                                   (0,) * len(self.shape), writeable=False)
        return np.lib.stride_tricks.as_strided(flat[self.offset:], self.shape, self.strides,
                                               writeable=False)


def as_strided(x: Any, shape: Any, strides: Any, writeable: bool) -> Any:
    """np.lib.stride_tricks.as_strided of traced ``x``: a ``StridedView`` of x's memory."""
    from .complex import ComplexTracer
    from .tracer import Tracer
    if isinstance(x, ComplexTracer) or not isinstance(x, Tracer):
        raise unsupported("np.lib.stride_tricks.as_strided of a complex traced array")
    if any(isinstance(step, buffers.Lens) for step in x._path):
        raise unsupported("np.lib.stride_tricks.as_strided of a view as another item size "
                          "or of another as_strided view")
    base = x._buf.node
    offset, own = buffers.element_layout(base.shape, x._path)
    itemsize = x.dtype.itemsize
    shape = x.shape if shape is None else tuple(int(n) for n in np.atleast_1d(shape))
    byte_strides = tuple(s * itemsize for s in own) if strides is None else \
        tuple(int(s) for s in np.atleast_1d(strides))
    if len(byte_strides) != len(shape):
        raise ValueError(with_location("mismatch in length of strides and shape"))
    if any(n < 0 for n in shape):
        raise ValueError(with_location("negative dimensions are not allowed"))
    if any(s % itemsize for s in byte_strides):
        raise unsupported(f"np.lib.stride_tricks.as_strided with strides {byte_strides}",
                          f"strides that are not whole {x.dtype} items")
    steps = tuple(s // itemsize for s in byte_strides)
    if int(np.prod(shape)) > 0:
        lo = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, steps))
        hi = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, steps))
        if lo < 0 or hi >= base.size:
            raise unsupported(
                "np.lib.stride_tricks.as_strided reaching outside the array's memory",
                f"its elements lie at items {lo} to {hi} of memory that holds {base.size}; "
                f"NumPy would read whatever lies there")
    if strides is not None and x._buf.from_arguments:
        # explicit strides read the argument's raw memory, taken as C-contiguous: a call
        # whose argument is laid out otherwise is refused (NumPy reads its real memory)
        from . import context
        from ..errors import user_location
        state = context.current()
        if state is not None:
            if state.raw_memory_at is None:
                state.raw_memory_at = user_location() or "?"
            state.raw_memory_inputs.update(x._buf.from_arguments)
    lens = StridedView(offset, tuple(shape), steps, bool(writeable))
    return Tracer(lens.apply(base), buffer=x._buf, path=(lens,))
