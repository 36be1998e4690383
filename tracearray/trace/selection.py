"""``x[mask]`` with a traced boolean mask, as far as it needs no compaction.

The selection's length is the number of True elements, known only when the compiled function
runs. Most code reduces it right away (``x[x > 0].sum()``, ``np.abs(d[m]).mean()``,
``(a[m] - b[m]).max()``): a ``MaskedSelection`` keeps the whole array and the mask, applies
elementwise operations to the whole array (the mask picks the results later), and turns a
reduction into the same reduction with ``where=mask`` -- one fused kernel, no compaction.
Anything that needs the selected elements themselves (their number as a Python int, a
result array of data-dependent size, indexing) raises ``UnsupportedOperationError``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedOperationError, with_location
from . import context
from . import numpy_api as api
from .build import cast
from .graph import Node


def _refuse(what: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(with_location(
        f"{what} of x[mask] with a traced boolean mask is not supported by tracearray: its size "
        f"depends on the data. Reduce the selection (x[mask].sum(), .mean(), .max(), ...), "
        f"apply elementwise operations before reducing, or use np.where(mask, x, fill)"))


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

    # --- what it is -------------------------------------------------------------------
    dtype = property(lambda self: self.values.dtype)
    ndim = property(lambda self: 1 + self.values.ndim - self.mask.ndim)

    @property
    def _trailing(self) -> tuple[int, ...]:
        return self.values.shape[self.lead + self.mask.ndim:]

    def _where(self) -> Node:
        """The mask broadcast over the values."""
        m = api.reshape(self.mask, (1,) * self.lead + self.mask.shape +
                        (1,) * len(self._trailing))
        return api.broadcast_to(m, self.values.shape)

    def refusal(self, what: str) -> UnsupportedOperationError:
        return _refuse(what)

    def __repr__(self) -> str:
        dims = [str(d) for d in self.values.shape[:self.lead]] + ["n"] + \
            [str(d) for d in self._trailing]
        return f"MaskedSelection({self.values.dtype}[{', '.join(dims)}])"

    @property
    def shape(self) -> tuple[int, ...]:
        raise _refuse("the shape")

    @property
    def size(self) -> int:
        raise _refuse("the size")

    def __len__(self) -> int:
        raise _refuse("len()")

    def __iter__(self):
        raise _refuse("iteration")

    def __getitem__(self, key: Any) -> Any:
        raise _refuse("indexing")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise _refuse("converting to an array")

    def __bool__(self) -> bool:
        raise _refuse("bool()")

    # --- elementwise: on every element, picked by the mask later ------------------------
    def _operand(self, other: Any) -> Any:
        from .tracer import Tracer
        if isinstance(other, MaskedSelection):
            if other.mask is not self.mask or other.lead != self.lead:
                raise UnsupportedOperationError(with_location(
                    "combining selections made with two different traced masks is not "
                    "supported by tracearray (which elements pair up depends on the data)"))
            return Tracer(other.values)
        if isinstance(other, Tracer):
            if other.ndim > len(self._trailing):
                raise _refuse("combining with an array of more dimensions than its rows")
            return other
        return other

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from .tracer import Tracer
        if method == "reduce" and len(inputs) == 1 and inputs[0] is self:
            kind = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min",
                    np.logical_and: "all", np.logical_or: "any"}.get(ufunc)
            if kind is not None and kwargs.get("axis", 0) in (0, None):
                return self._reduce(kind, kwargs.get("axis", 0), kwargs.get("keepdims", False),
                                    kwargs.get("dtype"), kwargs.get("initial", np._NoValue))
        if method != "__call__" or kwargs.get("out") is not None or ufunc.nout != 1:
            raise _refuse(f"np.{ufunc.__name__}.{method}" if method != "__call__"
                          else f"np.{ufunc.__name__}(..., out=)")
        args = [self._operand(a) for a in inputs]
        result = ufunc(*[a if not isinstance(a, MaskedSelection) else Tracer(a.values)
                         for a in args], **kwargs)
        if not isinstance(result, Tracer):
            raise _refuse(f"np.{ufunc.__name__}")
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
    __pow__, __rpow__ = _binary(np.power), _binary(np.power, True)
    __and__, __rand__ = _binary(np.bitwise_and), _binary(np.bitwise_and, True)
    __or__, __ror__ = _binary(np.bitwise_or), _binary(np.bitwise_or, True)
    __xor__, __rxor__ = _binary(np.bitwise_xor), _binary(np.bitwise_xor, True)
    __lt__, __le__ = _binary(np.less), _binary(np.less_equal)
    __gt__, __ge__ = _binary(np.greater), _binary(np.greater_equal)
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self):
        return self.__array_ufunc__(np.negative, "__call__", self)

    def __abs__(self):
        return self.__array_ufunc__(np.absolute, "__call__", self)

    def __invert__(self):
        return self.__array_ufunc__(np.invert, "__call__", self)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> "MaskedSelection":
        return MaskedSelection(cast(self.values, dtype), self.mask, self.made_at, self.lead)

    def copy(self, order: str = "C") -> "MaskedSelection":
        return self

    # --- reductions: the same reduction with where=mask ---------------------------------
    def _axes(self, axis: Any) -> tuple[int, ...] | None:
        """The value axes a reduction over ``axis`` of x[mask] covers (None: all)."""
        if axis is None:
            return None
        a = axis[0] if isinstance(axis, tuple) and len(axis) == 1 else axis
        if isinstance(a, (int, np.integer)) and int(a) in (self.lead, self.lead - self.ndim):
            return tuple(range(self.lead, self.lead + self.mask.ndim))
        raise _refuse(f"a reduction along axis {axis!r} (a result of data-dependent size)")

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
        return self._reduce("sum", axis, _kd(keepdims, out, where), dtype, initial)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,
             where=True):
        return self._reduce("prod", axis, _kd(keepdims, out, where), dtype, initial)

    def max(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        return self._reduce("max", axis, _kd(keepdims, out, where), None, initial)

    def min(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        return self._reduce("min", axis, _kd(keepdims, out, where), None, initial)

    def any(self, axis=None, out=None, keepdims=False, *, where=True):
        return self._reduce("any", axis, _kd(keepdims, out, where))

    def all(self, axis=None, out=None, keepdims=False, *, where=True):
        return self._reduce("all", axis, _kd(keepdims, out, where))

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
        axes = self._axes(axis)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        node = api.mean(self.values, ax, dtype, False, self._where())
        return self._finish(node, axes, _kd(keepdims, out, where))

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True):
        axes = self._axes(axis)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        node = api.var(self.values, ax, dtype, ddof, False, self._where())
        return self._finish(node, axes, _kd(keepdims, out, where))

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True):
        axes = self._axes(axis)
        ax = tuple(range(self.values.ndim)) if axes is None else axes
        node = api.std(self.values, ax, dtype, ddof, False, self._where())
        return self._finish(node, axes, _kd(keepdims, out, where))

    # --- NumPy functions: their implementations call the methods above -----------------
    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.count_nonzero:
            a = args[0] if args else kwargs["a"]
            if a is self and kwargs.get("axis", args[1] if len(args) > 1 else None) is None:
                nz = self.__array_ufunc__(np.not_equal, "__call__", self, 0)
                return nz.astype(np.intp).sum()
        if func in _BY_METHOD:
            return _BY_METHOD[func](*args, **kwargs)
        raise _refuse(f"np.{getattr(func, '__name__', func)}")


def _kd(keepdims: Any, out: Any, where: Any) -> bool:
    if out is not None:
        raise _refuse("out=")
    if where is not True:
        raise _refuse("where=")
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
