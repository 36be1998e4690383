"""``x[mask]`` with a traced boolean mask.

The selection's length is the number of True elements, known only when the compiled function
runs. Most code reduces it right away (``x[x > 0].sum()``, ``np.abs(d[m]).mean()``,
``(a[m] - b[m]).max()``): a ``MaskedSelection`` keeps the whole array and the mask, applies
elementwise operations to the whole array (the mask picks the results later), and turns a
reduction into the same reduction with ``where=mask`` -- one fused kernel, no compaction.
Anything that needs the selected elements themselves (a result, its shape, indexing, another
function) *compacts* it (``compact``): the number of True elements is a data-dependent size
(``context.data_size``: a probe counts them), and element k of the result is read at the
k-th True position, found by a bisection of the mask's prefix count (``true_positions``),
so the compaction is a gather fused into whatever reads it.
"""
from __future__ import annotations

import sys

from typing import Any, Callable

import numpy as np

from . import context
from . import numpy_api as api
from .build import cast
from .graph import Node


I64 = np.dtype(np.int64)


def true_positions(mask: Node) -> Node:
    """The flat (C-order) positions of the True elements of ``mask``, in order: an int64
    array of a length ``k`` the data decides. Element i of the mask, when True, is the
    (prefix count at i)-th: position i is scattered there (the others to a slot k, cut off),
    a scatter whose positions are distinct, so it runs in parallel."""
    from .build import constant, make
    n = int(np.prod(mask.shape))
    flat = api.reshape(cast(mask, np.dtype(bool)), (n,))
    if n == 0:
        return constant(np.zeros(0, I64))
    counts = cast(flat, I64)
    k = context.data_size(api.reduce("sum", counts), "the number of True elements")
    if k == 0:
        return constant(np.zeros(0, I64))
    prefix = api.scan("cumsum", counts, 0, None)
    one, dump = constant(np.int64(1)), constant(np.int64(k))
    slot = api.where(flat, api.apply_ufunc(np.subtract, prefix, one), dump)
    target = api.broadcast_to(constant(np.int64(0)), (k + 1,))
    pos = make("scatter", [target, slot, constant(np.arange(n, dtype=I64))], axes=(0,), at=0,
               mode="valid", messages=("",), combine=None, loop=(), unique=True)
    return make("slice", [pos], slices=((0, k, 1),))


def nonzero_positions(mask: Node) -> list[Node]:
    """``np.nonzero(mask)`` (mask of at least one dimension): one int64 array per dimension
    of the mask, the flat positions of its True elements unravelled (C order)."""
    flat = true_positions(mask)
    if mask.ndim == 1:
        return [flat]
    if 0 in mask.shape:
        return [flat] * mask.ndim
    out, stride = [], 1
    for n in reversed(mask.shape):
        q = api.apply_ufunc(np.floor_divide, flat, np.int64(stride)) if stride > 1 else flat
        out.append(api.apply_ufunc(np.remainder, q, np.int64(n)))
        stride *= n
    return list(reversed(out))


class MaskedSelection:
    """``values[mask]``: ``values`` has the masked dims first (``mask.shape``), then the
    trailing dims every selected element keeps."""

    __array_priority__ = 2000

    def __init__(self, values: Node, mask: Node, made_at: str | None = None, lead: int = 0):
        from ..errors import user_location
        self.values = values
        self.mask = mask          # covers the dims lead .. lead + mask.ndim of values
        self.lead = lead          # x[:, mask]: the selection is axis ``lead`` of the result
        self.made_at = made_at or user_location()   # the user's line of x[mask]
        self._compacted: Any = None
        self._written = False      # written into (__setitem__): only the compacted array

    # --- what it is -------------------------------------------------------------------
    dtype = property(lambda self: self.values.dtype)
    ndim = property(lambda self: 1 + self.values.ndim - self.mask.ndim)

    @property   # type: ignore[misc]
    def __class__(self) -> type:   # (isinstance in the user's code: tracer.numpy_class)
        from .tracer import numpy_class
        return numpy_class(self, sys._getframe(1))

    @property
    def _trailing(self) -> tuple[int, ...]:
        return self.values.shape[self.lead + self.mask.ndim:]

    def _where(self) -> Node:
        """The mask broadcast over the values."""
        m = api.reshape(self.mask, (1,) * self.lead + self.mask.shape +
                        (1,) * len(self._trailing))
        return api.broadcast_to(m, self.values.shape)

    def compact(self) -> Any:
        """The selected elements as an array (``values`` with the masked dims replaced by
        one of the data's length): a gather at the mask's True positions."""
        from .build import make
        from .tracer import Tracer
        if self._compacted is None:
            positions = true_positions(self.mask)
            flat = api.reshape(self.values, self.values.shape[:self.lead] +
                               (int(np.prod(self.mask.shape)),) + self._trailing)
            self._compacted = Tracer(make("gather", [flat, positions], axes=(self.lead,),
                                          at=self.lead, mode="valid", messages=("",)))
        return self._compacted

    def __repr__(self) -> str:
        dims = [str(d) for d in self.values.shape[:self.lead]] + ["n"] + \
            [str(d) for d in self._trailing]
        return f"MaskedSelection({self.values.dtype}[{', '.join(dims)}])"

    # --- everything else sees the compacted array ----------------------------------------
    shape = property(lambda self: self.compact().shape)
    size = property(lambda self: self.compact().size)
    T = property(lambda self: self.compact().T)

    def __len__(self) -> int:
        return len(self.compact())

    def __iter__(self):
        return iter(self.compact())

    def __getitem__(self, key: Any) -> Any:
        return self.compact()[key]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.compact().__array__(dtype)

    def __bool__(self) -> bool:
        return bool(self.compact())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_compacted":
            raise AttributeError(name)
        return getattr(self.compact(), name)

    # --- elementwise: on every element, picked by the mask later ------------------------
    def _pairs_with(self, other: Any) -> bool:
        """Can ``other`` be applied to the whole array, element for element, and picked by
        the mask later (a selection of the same mask, a scalar, rows broadcast along)?"""
        from .tracer import Tracer
        if isinstance(other, MaskedSelection):
            return other.mask is self.mask and other.lead == self.lead
        trailing = self._trailing
        shape = other.shape if isinstance(other, Tracer) else np.shape(other)
        if isinstance(other, (list, tuple)) or len(shape) > len(trailing):
            return False
        try:   # broadcast along the kept dims only (the result keeps each row's shape)
            return np.broadcast_shapes(tuple(shape), trailing) == trailing
        except ValueError:
            return False

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from .tracer import Tracer
        if any(isinstance(a, MaskedSelection) and a._written for a in inputs):
            return getattr(ufunc, method)(*_compacted(inputs), **_compacted(kwargs))
        if method == "reduce" and len(inputs) == 1 and inputs[0] is self:
            kind = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min",
                    np.logical_and: "all", np.logical_or: "any"}.get(ufunc)
            if kind is not None and kwargs.get("axis", 0) in (0, None):
                return self._reduce(kind, kwargs.get("axis", 0), kwargs.get("keepdims", False),
                                    kwargs.get("dtype"), kwargs.get("initial", np._NoValue))
        return self._elementwise(ufunc, method, inputs, kwargs)

    def _elementwise(self, ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict,
                     op: Callable[..., Any] | None = None) -> Any:
        """``ufunc`` (or the operator ``op``, which may differ from the ufunc: ``x ** 2`` is
        ndarray's fast path, np.square) on the whole arrays, the mask kept; on the selected
        elements where that cannot be done."""
        from .tracer import Tracer
        call = op if op is not None else getattr(ufunc, method)
        if method != "__call__" or kwargs.get("out") is not None or ufunc.nout != 1 or \
                ufunc.signature is not None or not all(self._pairs_with(a) for a in inputs):
            # (a gufunc such as matmul is not element for element)
            return call(*_compacted(inputs), **_compacted(kwargs))
        try:
            result = (op or ufunc)(*[a if not isinstance(a, MaskedSelection) else
                                     Tracer(a.values) for a in inputs], **kwargs)
        except ValueError:
            # NumPy's error may depend on the elements selected (``x[m] ** -1`` of integers
            # raises unless the selection is empty): decide on the selected elements
            return call(*_compacted(inputs), **_compacted(kwargs))
        if not isinstance(result, Tracer):
            return call(*_compacted(inputs), **_compacted(kwargs))
        node = result.node
        if node.shape != self.values.shape:
            node = api.broadcast_to(node, self.values.shape)
        return MaskedSelection(node, self.mask, self.made_at, self.lead)

    def _binary(ufunc: np.ufunc, reflected: bool = False) -> Callable[..., Any]:  # noqa: N805
        def method(self, other):
            return self.__array_ufunc__(ufunc, "__call__", *((other, self) if reflected
                                                             else (self, other)))
        return method

    __add__, __radd__ = _binary(np.add), _binary(np.add, True)
    __sub__, __rsub__ = _binary(np.subtract), _binary(np.subtract, True)
    __mul__, __rmul__ = _binary(np.multiply), _binary(np.multiply, True)
    __truediv__, __rtruediv__ = _binary(np.true_divide), _binary(np.true_divide, True)
    __floordiv__, __rfloordiv__ = _binary(np.floor_divide), _binary(np.floor_divide, True)
    __mod__, __rmod__ = _binary(np.remainder), _binary(np.remainder, True)
    __rpow__ = _binary(np.power, True)

    def __pow__(self, other: Any) -> Any:
        # ndarray.__pow__, not np.power: its fast paths (``m ** 2`` of a bool selection is
        # np.square's int8, np.power's is int64: soak cpu-2026-12-02-g, program 1043)
        return self._elementwise(np.power, "__call__", (self, other), {},
                                 op=lambda a, b: a ** b)
    __and__, __rand__ = _binary(np.bitwise_and), _binary(np.bitwise_and, True)
    __or__, __ror__ = _binary(np.bitwise_or), _binary(np.bitwise_or, True)
    __xor__, __rxor__ = _binary(np.bitwise_xor), _binary(np.bitwise_xor, True)
    __lshift__, __rlshift__ = _binary(np.left_shift), _binary(np.left_shift, True)
    __rshift__, __rrshift__ = _binary(np.right_shift), _binary(np.right_shift, True)
    __matmul__, __rmatmul__ = _binary(np.matmul), _binary(np.matmul, True)
    def _inplace(name: str) -> Callable[..., Any]:  # noqa: N805
        def method(self, other):
            # ``x[m] += v`` is ``t = x[m]; t += v; x[m] = t``: t is a copy of x's dtype,
            # updated in place under NumPy's same_kind rule (int8 += 2.5 raises). Computed
            # on the whole values with the mask kept, as the operators are (no size the
            # data decides: ``it[m] += 1`` in a loop stays one trace); on the selected
            # elements where that cannot be done
            from .tracer import Tracer
            if self._written or not self._pairs_with(other):
                return getattr(self.compact().copy(), name)(other)
            o = Tracer(other.values) if isinstance(other, MaskedSelection) else other
            try:
                t = getattr(Tracer(self.values).copy(), name)(o)
            except ValueError:   # (an error that may depend on the selected elements)
                return getattr(self.compact().copy(), name)(other)
            return MaskedSelection(t.node, self.mask, self.made_at, self.lead)
        return method

    __iadd__, __isub__, __imul__ = _inplace("__iadd__"), _inplace("__isub__"), \
        _inplace("__imul__")
    __itruediv__, __ifloordiv__, __imod__ = _inplace("__itruediv__"), \
        _inplace("__ifloordiv__"), _inplace("__imod__")
    __ipow__, __iand__, __ior__, __ixor__ = _inplace("__ipow__"), _inplace("__iand__"), \
        _inplace("__ior__"), _inplace("__ixor__")
    __ilshift__, __irshift__, __imatmul__ = _inplace("__ilshift__"), \
        _inplace("__irshift__"), _inplace("__imatmul__")
    __lt__, __le__ = _binary(np.less), _binary(np.less_equal)
    __gt__, __ge__ = _binary(np.greater), _binary(np.greater_equal)
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self):
        return self.__array_ufunc__(np.negative, "__call__", self)

    def __pos__(self):
        return self.__array_ufunc__(np.positive, "__call__", self)

    def __abs__(self):
        return self.__array_ufunc__(np.absolute, "__call__", self)

    def __invert__(self):
        return self.__array_ufunc__(np.invert, "__call__", self)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        if self._written:
            return self.compact().astype(dtype, *args, **kwargs)
        return MaskedSelection(cast(self.values, dtype), self.mask, self.made_at, self.lead)

    def copy(self, order: str = "C") -> Any:
        # a copy is an array of its own, which may be written: the selected elements
        return self.compact().copy()

    def __setitem__(self, key: Any, value: Any) -> None:
        # x[m] is a copy in NumPy: writing into it changes only it. From here on the
        # selection is its compacted array (later reads must see the write)
        self.compact()[key] = value
        self._written = True

    # --- reductions: the same reduction with where=mask ---------------------------------
    def _axes(self, axis: Any) -> tuple[int, ...] | None:
        """The value axes a reduction over ``axis`` of x[mask] covers (None: all)."""
        if axis is None:
            return None
        a = axis[0] if isinstance(axis, tuple) and len(axis) == 1 else axis
        if isinstance(a, (int, np.integer)) and int(a) in (self.lead, self.lead - self.ndim):
            return tuple(range(self.lead, self.lead + self.mask.ndim))
        return _OTHER_AXIS

    def _finish(self, node: Node, axes: tuple[int, ...] | None, keepdims: bool) -> Any:
        from .tracer import Tracer
        if keepdims:
            shape = (1,) * self.ndim if axes is None else \
                self.values.shape[:self.lead] + (1,) + self._trailing
            node = api.reshape(node, shape)
        return Tracer(node)

    def _reduce(self, kind: str, axis: Any = None, keepdims: bool = False, dtype: Any = None,
                initial: Any = np._NoValue) -> Any:
        axes = self._axes(axis)
        if axes is _OTHER_AXIS or self._written:     # along the kept dims: a result of the data's length
            kw = {} if initial is np._NoValue else {"initial": initial}
            if dtype is not None:
                kw["dtype"] = dtype
            return getattr(self.compact(), kind)(axis=axis, keepdims=keepdims, **kw)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        if kind in ("max", "min") and (initial is np._NoValue or initial is None):
            # NumPy refuses an empty selection; the start value never wins otherwise
            ok = api.reduce("any", self.mask)
            context.require(ok, ValueError,
                            f"zero-size array to reduction operation "
                            f"{'maximum' if kind == 'max' else 'minimum'} which has no identity")
            initial = _extreme(self.dtype, lowest=kind == "max")
        node = api.reduce_with(kind, self.values, ax, False, dtype, initial, self._where())
        return self._finish(node, axes, keepdims)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
            where=True):
        if out is not None or where is not True:
            return self.compact().sum(axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial, where=where)
        return self._reduce("sum", axis, _kd(keepdims, out, where), dtype, initial)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
             where=True):
        if out is not None or where is not True:
            return self.compact().prod(axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial, where=where)
        return self._reduce("prod", axis, _kd(keepdims, out, where), dtype, initial)

    def max(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        if out is not None or where is not True:
            return self.compact().max(axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)
        return self._reduce("max", axis, _kd(keepdims, out, where), None, initial)

    def min(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        if out is not None or where is not True:
            return self.compact().min(axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)
        return self._reduce("min", axis, _kd(keepdims, out, where), None, initial)

    def any(self, axis=None, out=None, keepdims=False, *, where=True):
        if out is not None or where is not True:
            return self.compact().any(axis=axis, out=out, keepdims=keepdims, where=where)
        return self._reduce("any", axis, _kd(keepdims, out, where))

    def all(self, axis=None, out=None, keepdims=False, *, where=True):
        if out is not None or where is not True:
            return self.compact().all(axis=axis, out=out, keepdims=keepdims, where=where)
        return self._reduce("all", axis, _kd(keepdims, out, where))

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
        if out is not None or where is not True or self._axes(axis) is _OTHER_AXIS or \
                self._written:
            return self.compact().mean(axis, dtype, out, keepdims, where=where)
        axes = self._axes(axis)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        node = api.mean(self.values, ax, dtype, False, self._where())
        return self._finish(node, axes, _kd(keepdims, out, where))

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True):
        if out is not None or where is not True or self._axes(axis) is _OTHER_AXIS or \
                self._written:
            return self.compact().var(axis, dtype, out, ddof, keepdims, where=where)
        axes = self._axes(axis)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        node = api.var(self.values, ax, dtype, ddof, False, self._where())
        return self._finish(node, axes, _kd(keepdims, out, where))

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True):
        if out is not None or where is not True or self._axes(axis) is _OTHER_AXIS or \
                self._written:
            return self.compact().std(axis, dtype, out, ddof, keepdims, where=where)
        axes = self._axes(axis)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        node = api.std(self.values, ax, dtype, ddof, False, self._where())
        return self._finish(node, axes, _kd(keepdims, out, where))

    # --- NumPy functions: their implementations call the methods above -----------------
    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        if self._written:
            return func(*_compacted(args), **_compacted(kwargs))
        if func is _COUNT_NONZERO:
            a = args[0] if args else kwargs["a"]
            if a is self and kwargs.get("axis", args[1] if len(args) > 1 else None) is None:
                nz = self.__array_ufunc__(np.not_equal, "__call__", self, 0)
                return nz.astype(np.intp).sum()
        if func in _BY_METHOD:
            return _BY_METHOD[func](*args, **kwargs)
        return func(*_compacted(args), **_compacted(kwargs))


_OTHER_AXIS = object()   # a reduction of a selection along a dimension it keeps
# NumPy's own function, as dispatch passes it: while tracing, ``np.count_nonzero`` names
# tracearray's replacement (trace/context.py ``_list_arguments``), so it is never looked up
# then. (This module is imported before any trace replaces a name.)
_COUNT_NONZERO = np.count_nonzero


def _compacted(x: Any) -> Any:
    """``x`` with every selection in it (args tuples, lists, dicts) compacted."""
    from .complex_selection import ComplexSelection
    if isinstance(x, (MaskedSelection, ComplexSelection)):
        return x.compact()
    if isinstance(x, (list, tuple)):
        return type(x)(_compacted(v) for v in x)
    if isinstance(x, dict):
        return {k: _compacted(v) for k, v in x.items()}
    return x


def compact_args(x: Any) -> Any:
    """A NumPy function's arguments with the selections in them (in tuples, lists, dicts)
    compacted: a function other than a reduction of the selection sees its elements."""
    return _compacted(x)


def compact_all(x: Any) -> Any:
    """A function's result with its selections compacted (arrays of the data's length),
    through the one pytree mechanism of results (namedtuples, dataclasses, ...)."""
    from . import pytree
    from .complex_selection import ComplexSelection
    from .tracer import Tracer
    selections = (MaskedSelection, ComplexSelection)
    leaves, tree = pytree.flatten(x, lambda v: isinstance(v, selections + (
        Tracer, np.ndarray, np.generic)))
    if not any(isinstance(v, selections) for v in leaves):
        return x
    return pytree.unflatten(tree, [v.compact() if isinstance(v, selections) else v
                                   for v in leaves])


def _kd(keepdims: Any, out: Any, where: Any) -> bool:
    """keepdims of a reduction made with where=mask (the methods compact the selection
    first when out= or where= is given)."""
    return bool(keepdims) if keepdims is not np._NoValue else False


def _extreme(dt: np.dtype, lowest: bool) -> Any:
    if dt.kind == "f":
        return -np.inf if lowest else np.inf
    if dt.kind == "b":
        return not lowest
    info = np.iinfo(dt)
    return int(info.min) if lowest else int(info.max)


def _method(name: str) -> Callable[..., Any]:
    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(a, name)(*args, **kwargs)
    return call


_BY_METHOD = {getattr(np, n): _method(n) for n in ("sum", "prod", "max", "min", "any", "all",
                                                   "mean", "var", "std")}
_BY_METHOD.update({np.amax: _method("max"), np.amin: _method("min")})


def select(x: Node, lead: int, mask: Node) -> MaskedSelection:
    """``x[(:,) * lead + (mask, ...)]``."""
    from .buffers import check_mask_shape
    check_mask_shape(x.shape, lead, mask)
    return MaskedSelection(x, mask, lead=lead)
