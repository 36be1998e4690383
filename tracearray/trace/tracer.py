"""``Tracer``: the stand-in for an array argument while the user's function runs.

It implements Python's operators, NumPy's ``__array_ufunc__`` and ``__array_function__``
protocols, ndarray methods and properties, and basic indexing, so that unmodified NumPy code
records a graph. Anything that would need a concrete value (``if x > 0``, ``float(x)``) raises
``ConcretizationError`` pointing at the user's line.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import numpy_api as api
from .build import check_dtype, dtype_key, shape_str, unsupported
from .errors import ConcretizationError, UnsupportedOperationError, with_location
from .graph import Node, type_str


def unwrap(x: Any) -> Any:
    """Tracers become nodes; lists/tuples are unwrapped element-wise; others pass through."""
    if isinstance(x, Tracer):
        return x.node
    if isinstance(x, (list, tuple)):
        return type(x)(unwrap(v) for v in x)
    return x


def wrap(x: Any) -> Any:
    return Tracer(x) if isinstance(x, Node) else x


def _binary(ufunc: np.ufunc, reflected: bool = False) -> Callable[[Any, Any], Any]:
    def method(self: "Tracer", other: Any) -> Any:
        if isinstance(other, (list, tuple)):
            other = np.asarray(other)
        if not isinstance(other, (Tracer, np.ndarray, np.generic, bool, int, float, complex)):
            return NotImplemented
        a, b = (unwrap(other), self.node) if reflected else (self.node, unwrap(other))
        return Tracer(api.apply_ufunc(ufunc, a, b))
    method.__name__ = f"__{'r' if reflected else ''}{ufunc.__name__}__"
    return method


def _unary(ufunc: np.ufunc) -> Callable[[Any], Any]:
    def method(self: "Tracer") -> Any:
        return Tracer(api.apply_ufunc(ufunc, self.node))
    return method


def _inplace(ufunc: np.ufunc) -> Callable[[Any, Any], Any]:
    """``x op= y``: a new traced value bound to the same name, cast back to x's dtype with
    NumPy's same_kind rule. Updating an argument in place is refused: NumPy would modify the
    caller's array, and a compiled function never writes to its inputs."""
    def method(self: "Tracer", other: Any) -> Any:
        # Checked on the tracer, not on ``node.op == "input"``: hash-consing makes
        # ``x.copy()`` the same node as ``x`` (and updating a copy is fine), while a view such
        # as ``x[0]`` or ``x.T`` is a different node whose update would still write to the
        # caller's array in NumPy.
        if self._alias is not None:
            raise UnsupportedOperationError(with_location(
                f"in-place update of argument {self._alias!r} (or a view of it) would modify "
                f"the caller's array, which a compiled function cannot do; write "
                f"`x = x {_SYMBOLS.get(ufunc, '?')} ...` (or update a copy) instead"))
        # A 0-d value that is not an argument is, in NumPy, almost always a NumPy *scalar*
        # (``s = x.sum()``, ``x[0]``, ufuncs of 0-d values). Scalars are immutable:
        # ``s += 0.5`` rebinds s to ``s + 0.5`` (promoting, broadcasting, and without
        # ndarray.__pow__'s fast paths), with none of the array rules below. (A 0-d *array*
        # local such as ``x0d.copy()`` would follow them; tracing cannot tell the two apart.)
        scalar = self.node.ndim == 0
        if ufunc is np.matmul:
            result = self.__matmul__(other)
        elif ufunc is np.power:
            try:
                result = Tracer(api.power(self.node, unwrap(other), operator=not scalar))
            except ValueError:
                # NumPy checks the cast of the loop's output into x before running the loop,
                # so ``bool_array **= -1`` is a casting TypeError, not the loop's ValueError
                # about negative integer powers.
                loop_out = np.power.resolve_dtypes(
                    (self.node.dtype, dtype_key(unwrap(other)), None))[2]
                if not scalar and not np.can_cast(loop_out, self.node.dtype, "same_kind"):
                    raise TypeError(with_location(
                        f"Cannot cast ufunc 'power' output from {loop_out!r} to "
                        f"{self.node.dtype!r} with casting rule 'same_kind'")) from None
                raise
        else:
            result = _binary(ufunc)(self, other)
        if result is NotImplemented or scalar:
            return result
        if not np.can_cast(result.node.dtype, self.node.dtype, casting="same_kind"):
            raise TypeError(with_location(
                f"Cannot cast ufunc '{ufunc.__name__}' output from {result.node.dtype!r} to "
                f"{self.node.dtype!r} with casting rule 'same_kind'"))
        if result.node.shape != self.node.shape:
            # NumPy writes the result into x, so it cannot grow x by broadcasting.
            raise ValueError(with_location(
                f"non-broadcastable output operand with shape {shape_str(self.node.shape)} "
                f"doesn't match the broadcast shape {shape_str(result.node.shape)}"))
        if result.node.dtype == self.node.dtype:
            return result
        return Tracer(api.astype(result.node, self.node.dtype))
    return method


_SYMBOLS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
            np.floor_divide: "//", np.remainder: "%", np.power: "**", np.bitwise_and: "&",
            np.bitwise_or: "|", np.bitwise_xor: "^", np.left_shift: "<<", np.right_shift: ">>",
            np.matmul: "@"}


class Tracer:
    """A traced array. ``node`` is its graph node; shape and dtype are concrete."""

    __slots__ = ("node", "_alias")
    __array_priority__ = 1000  # win over ndarray in mixed binary operators

    def __init__(self, node: Node, alias: str | None = None):
        self.node = node
        # Name of the argument whose memory this value may share in NumPy (the argument
        # itself or a view of it), else None: in-place updates of such values are refused.
        self._alias = alias

    def _view(self, node: Node) -> "Tracer":
        """A NumPy view of this value: shares its memory (and so its alias)."""
        return Tracer(node, self._alias)

    # --- properties -----------------------------------------------------------------
    shape = property(lambda self: self.node.shape)
    dtype = property(lambda self: self.node.dtype)
    ndim = property(lambda self: self.node.ndim)
    size = property(lambda self: self.node.size)
    itemsize = property(lambda self: self.node.dtype.itemsize)
    nbytes = property(lambda self: self.node.size * self.node.dtype.itemsize)
    T = property(lambda self: self._view(api.transpose(self.node)))
    mT = property(lambda self: self._view(api.swapaxes(self.node, -1, -2)))

    def __repr__(self) -> str:
        return f"Tracer({type_str(self.node)})"

    def __len__(self) -> int:
        if not self.node.shape:
            raise TypeError(with_location("len() of unsized object"))
        return self.node.shape[0]

    def __iter__(self):
        if not self.node.shape:
            raise TypeError(with_location("iteration over a 0-d array"))
        return (self[i] for i in range(self.node.shape[0]))

    # --- concretization: Python control flow on traced values ---------------------------
    def _concrete(self, what: str) -> Any:
        raise ConcretizationError(with_location(
            f"{what} needs the concrete value of a traced array ({type_str(self.node)}), which "
            f"is only known when the compiled function runs. Python control flow cannot depend "
            f"on array values: use np.where(cond, a, b) for elementwise choices, or mark the "
            f"argument static with static_argnums / static_argnames."))

    def __bool__(self) -> bool:
        return self._concrete("bool() (e.g. `if` or `while` on an array)")

    def __int__(self) -> int:
        return self._concrete("int()")

    def __float__(self) -> float:
        return self._concrete("float()")

    def __complex__(self) -> complex:
        return self._concrete("complex()")

    def __index__(self) -> int:
        return self._concrete("using an array as an index or size")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._concrete("converting to a NumPy array (np.asarray / np.array)")

    def item(self, *args: Any) -> Any:
        return self._concrete(".item()")

    def tolist(self) -> Any:
        return self._concrete(".tolist()")

    __hash__ = None  # type: ignore[assignment]  # arrays are unhashable, as in NumPy

    # --- operators ------------------------------------------------------------------
    __add__, __radd__, __iadd__ = _binary(np.add), _binary(np.add, True), _inplace(np.add)
    __sub__, __rsub__, __isub__ = (_binary(np.subtract), _binary(np.subtract, True),
                                   _inplace(np.subtract))
    __mul__, __rmul__, __imul__ = (_binary(np.multiply), _binary(np.multiply, True),
                                   _inplace(np.multiply))
    __truediv__, __rtruediv__, __itruediv__ = (_binary(np.true_divide),
                                               _binary(np.true_divide, True),
                                               _inplace(np.true_divide))
    __floordiv__, __rfloordiv__, __ifloordiv__ = (_binary(np.floor_divide),
                                                  _binary(np.floor_divide, True),
                                                  _inplace(np.floor_divide))
    __mod__, __rmod__, __imod__ = (_binary(np.remainder), _binary(np.remainder, True),
                                   _inplace(np.remainder))
    __and__, __rand__, __iand__ = (_binary(np.bitwise_and), _binary(np.bitwise_and, True),
                                   _inplace(np.bitwise_and))
    __or__, __ror__, __ior__ = (_binary(np.bitwise_or), _binary(np.bitwise_or, True),
                                _inplace(np.bitwise_or))
    __xor__, __rxor__, __ixor__ = (_binary(np.bitwise_xor), _binary(np.bitwise_xor, True),
                                   _inplace(np.bitwise_xor))
    __lshift__, __rlshift__, __ilshift__ = (_binary(np.left_shift), _binary(np.left_shift, True),
                                            _inplace(np.left_shift))
    __rshift__, __rrshift__, __irshift__ = (_binary(np.right_shift),
                                            _binary(np.right_shift, True),
                                            _inplace(np.right_shift))
    __lt__, __le__ = _binary(np.less), _binary(np.less_equal)
    __gt__, __ge__ = _binary(np.greater), _binary(np.greater_equal)
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)  # type: ignore[assignment]
    __neg__, __pos__ = _unary(np.negative), _unary(np.positive)
    __abs__, __invert__ = _unary(np.absolute), _unary(np.invert)

    def __pow__(self, other: Any, mod: Any = None) -> Any:
        if mod is not None:
            raise unsupported("pow() with a modulus")
        return Tracer(api.power(self.node, unwrap(other), operator=True))

    __ipow__, __imatmul__ = _inplace(np.power), _inplace(np.matmul)

    def __rpow__(self, other: Any) -> Any:
        return Tracer(api.apply_ufunc(np.power, unwrap(other), self.node))

    def __matmul__(self, other: Any) -> Any:
        return Tracer(api.matmul(self.node, unwrap(other)))

    def __rmatmul__(self, other: Any) -> Any:
        return Tracer(api.matmul(unwrap(other), self.node))

    def __divmod__(self, other: Any) -> Any:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> Any:
        return other // self, other % self

    def __getitem__(self, key: Any) -> "Tracer":
        node = api.getitem(self.node, unwrap(key))
        keys = key if isinstance(key, tuple) else (key,)
        if node.ndim == 0 and not any(k is Ellipsis for k in keys):
            return Tracer(node)   # integers only: NumPy returns a scalar (a copy), not a view
        return self._view(node)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise unsupported("item assignment (x[...] = v)",
                          "arrays are immutable while tracing; build the result with np.where "
                          "or np.concatenate")

    # --- NumPy protocols ----------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("out", None)
        if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
            raise unsupported(f"np.{ufunc.__name__}(..., out=...)",
                              "compiled functions return new arrays")
        where = kwargs.pop("where", True)
        if where is not True:
            raise unsupported(f"np.{ufunc.__name__}(..., where=...)", "use np.where")
        kwargs.pop("casting", None) if kwargs.get("casting") == "same_kind" else None
        kwargs.pop("order", None) if kwargs.get("order") in ("K", None) else None
        args = [unwrap(x) for x in inputs]
        if method == "__call__":
            dtype = kwargs.pop("dtype", None)
            if kwargs:
                raise unsupported(f"np.{ufunc.__name__}(**{sorted(kwargs)})")
            if ufunc is np.matmul:
                return Tracer(api.matmul(*args))
            if ufunc is np.power and dtype is None:
                return Tracer(api.power(*args))
            return Tracer(api.apply_ufunc(ufunc, *args, dtype=dtype))
        if method == "reduce" and ufunc in api.UFUNC_REDUCTIONS:
            axis = kwargs.pop("axis", 0)
            dtype = kwargs.pop("dtype", None)
            keepdims = kwargs.pop("keepdims", False)
            if kwargs.pop("initial", np._NoValue) is not np._NoValue or kwargs:
                raise unsupported(f"np.{ufunc.__name__}.reduce(initial=... or other arguments)")
            kind = api.UFUNC_REDUCTIONS[ufunc]
            if kind in ("max", "min", "any", "all"):
                if dtype is not None:
                    raise unsupported(f"np.{ufunc.__name__}.reduce(dtype=...)")
                return Tracer(api.reduce(kind, args[0], axis, keepdims))
            return Tracer(api.reduce(kind, args[0], axis, keepdims, dtype))
        if method == "accumulate" and ufunc in (np.add, np.multiply):
            if np.ndim(inputs[0]) == 0:
                raise TypeError(with_location("cannot accumulate on a scalar"))
            axis = kwargs.pop("axis", 0)
            dtype = kwargs.pop("dtype", None)
            kind = "cumsum" if ufunc is np.add else "cumprod"
            return Tracer(api.scan(kind, args[0], axis, dtype))
        raise unsupported(f"np.{ufunc.__name__}.{method}" if method != "__call__"
                          else f"np.{ufunc.__name__}")

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        impl = HANDLED_FUNCTIONS.get(func)
        if impl is None:
            name = getattr(func, "__module__", "numpy").replace("numpy._core.", "numpy.")
            raise unsupported(f"{name.split('.')[0]}.{func.__name__}" if name.startswith("numpy")
                              else f"{name}.{func.__name__}")
        result = wrap(impl(*unwrap(list(args)), **{k: unwrap(v) for k, v in kwargs.items()}))
        if func in _VIEW_FUNCTIONS and args and isinstance(args[0], Tracer):
            result = args[0]._view(result.node)
        return result

    # --- methods --------------------------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> "Tracer":
        dt = check_dtype(dtype, "astype")
        if not np.can_cast(self.node.dtype, dt, casting=casting):
            raise TypeError(with_location(
                f"Cannot cast array data from {self.node.dtype!r} to {dt!r} according to the "
                f"rule {casting!r}"))
        if not copy and dt == self.node.dtype:
            return self   # NumPy returns the array itself
        return Tracer(api.astype(self.node, dtype))

    def copy(self, order: str = "C") -> "Tracer":
        return Tracer(self.node)   # same node (values are immutable), but no longer an alias

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method("sum", self, axis, dtype, out, keepdims, kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method("prod", self, axis, dtype, out, keepdims, kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method("max", self, axis, None, out, keepdims, kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method("min", self, axis, None, out, keepdims, kw)

    def any(self, axis=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method("any", self, axis, None, out, keepdims, kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method("all", self, axis, None, out, keepdims, kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        _no_out("mean", out, kw)
        return Tracer(api.mean(self.node, axis, dtype, keepdims))

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        _no_out("var", out, kw)
        return Tracer(api.var(self.node, axis, dtype, ddof, keepdims))

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):  # type: ignore[no-untyped-def]
        _no_out("std", out, kw)
        return Tracer(api.std(self.node, axis, dtype, ddof, keepdims))

    def argmax(self, axis=None, out=None, *, keepdims=False):  # type: ignore[no-untyped-def]
        _no_out("argmax", out, {})
        return Tracer(api.arg_reduce("argmax", self.node, axis, keepdims))

    def argmin(self, axis=None, out=None, *, keepdims=False):  # type: ignore[no-untyped-def]
        _no_out("argmin", out, {})
        return Tracer(api.arg_reduce("argmin", self.node, axis, keepdims))

    def cumsum(self, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        _no_out("cumsum", out, {})
        return Tracer(api.scan("cumsum", self.node, axis, dtype))

    def cumprod(self, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        _no_out("cumprod", out, {})
        return Tracer(api.scan("cumprod", self.node, axis, dtype))

    def clip(self, min=None, max=None, out=None, **kw):  # type: ignore[no-untyped-def]
        _no_out("clip", out, kw)
        return Tracer(api.clip(self.node, unwrap(min), unwrap(max)))

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> "Tracer":
        if not shape:
            raise TypeError(with_location("reshape() takes exactly 1 argument (0 given)"))
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._view(api.reshape(self.node, shape, order))

    def transpose(self, *axes: Any) -> "Tracer":
        return self._view(api.transpose(self.node, axes or None))

    def swapaxes(self, a: int, b: int) -> "Tracer":
        return self._view(api.swapaxes(self.node, a, b))

    def squeeze(self, axis: Any = None) -> "Tracer":
        return self._view(api.squeeze(self.node, axis))

    def ravel(self, order: str = "C") -> "Tracer":
        return self._view(api.ravel(self.node, order))  # a view when NumPy can: assume so

    def flatten(self, order: str = "C") -> "Tracer":
        return Tracer(api.ravel(self.node, order))

    def dot(self, other: Any) -> "Tracer":
        return Tracer(api.dot(self.node, unwrap(other)))

    def round(self, decimals: int = 0, out: Any = None) -> "Tracer":
        return Tracer(_round(self.node, decimals, out))


# NumPy functions whose result is (or may be) a view of their first argument.
_VIEW_FUNCTIONS = frozenset({np.reshape, np.transpose, np.swapaxes, np.moveaxis, np.expand_dims,
                             np.squeeze, np.broadcast_to, np.ravel, np.flip})


def _no_out(name: str, out: Any, kw: dict) -> None:
    if out is not None:
        raise unsupported(f"{name}(out=...)", "compiled functions return new arrays")
    if kw.get("where", True) is not True:
        raise unsupported(f"{name}(where=...)", "use np.where")
    kw.pop("where", None)
    if kw:
        raise unsupported(f"{name}({', '.join(sorted(kw))}=...)")


def _reduction_method(kind: str, x: Any, axis: Any, dtype: Any, out: Any, keepdims: Any,
                      kw: dict) -> Tracer:
    if kw.get("initial", np._NoValue) is not np._NoValue:
        raise unsupported(f"{kind}(initial=...)")
    kw.pop("initial", None)
    _no_out(kind, out, kw)
    if keepdims is np._NoValue:
        keepdims = False
    node = unwrap(x)
    if kind in ("sum", "prod"):
        return Tracer(api.reduce(kind, node, axis, bool(keepdims), dtype))
    return Tracer(api.reduce(kind, node, axis, bool(keepdims)))


def _round(x: Node, decimals: int, out: Any) -> Node:
    if out is not None:
        raise unsupported("round(out=...)")
    if decimals != 0:
        raise unsupported("np.round(decimals != 0)", "only decimals=0 (round half to even)")
    # NumPy rounds bool with np.rint too (giving float16); integers are returned as they are.
    return api.apply_ufunc(np.rint, x) if x.dtype.kind in "fb" else x


# ------------------------------------------------------------------------------------------
# __array_function__ table: NumPy function -> implementation taking NumPy's signature.
# ------------------------------------------------------------------------------------------

def _reduction_fn(kind: str) -> Callable[..., Any]:
    def fn(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method(kind, a, axis, dtype, out, keepdims, kw).node
    return fn


def _minmax_fn(kind: str) -> Callable[..., Any]:
    def fn(a, axis=None, out=None, keepdims=np._NoValue, **kw):  # type: ignore[no-untyped-def]
        return _reduction_method(kind, a, axis, None, out, keepdims, kw).node
    return fn


def _stat_fn(fn_api: Callable[..., Node], name: str) -> Callable[..., Any]:
    def fn(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, **kw):  # type: ignore[no-untyped-def]
        _no_out(name, out, {k: v for k, v in kw.items() if k != "correction"})
        if kw.get("correction", np._NoValue) is not np._NoValue:
            ddof = kw["correction"]
        keep = False if keepdims is np._NoValue else bool(keepdims)
        if fn_api is api.mean:
            return api.mean(a, axis, dtype, keep)
        return fn_api(a, axis, dtype, ddof, keep)
    return fn


def _arg_fn(kind: str) -> Callable[..., Any]:
    def fn(a, axis=None, out=None, *, keepdims=np._NoValue):  # type: ignore[no-untyped-def]
        _no_out(kind, out, {})
        return api.arg_reduce(kind, a, axis, False if keepdims is np._NoValue else keepdims)
    return fn


def _where(condition, x=None, y=None):  # type: ignore[no-untyped-def]
    if x is None or y is None:
        raise unsupported("np.where(condition) with one argument",
                          "its result size depends on the data")
    return api.where(condition, x, y)


def _like(fill: Any) -> Callable[..., Any]:
    def fn(a, dtype=None, order="K", subok=True, shape=None, **kw):  # type: ignore[no-untyped-def]
        return api.full_like(api.as_node(a), fill, dtype, shape)
    return fn


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):  # type: ignore[no-untyped-def]
    if isinstance(fill_value, Node):
        raise unsupported("np.full_like with a traced fill value", "use np.broadcast_to")
    return api.full_like(api.as_node(a), fill_value, dtype, shape)


def _cumulative(kind: str) -> Callable[..., Any]:
    def fn(a, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        _no_out(kind, out, {})
        return api.scan(kind, a, axis, dtype)
    return fn


def _clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,  # type: ignore[no-untyped-def]
          max=np._NoValue, **kw):
    _no_out("clip", out, kw)
    lo = min if min is not np._NoValue else (None if a_min is np._NoValue else a_min)
    hi = max if max is not np._NoValue else (None if a_max is np._NoValue else a_max)
    return api.clip(a, lo, hi)


def _norm(x, ord=None, axis=None, keepdims=False):  # type: ignore[no-untyped-def]
    return api.norm(x, ord, axis, keepdims)


def _squeeze(a, axis=None):  # type: ignore[no-untyped-def]
    return api.squeeze(a, axis)


def _transpose(a, axes=None):  # type: ignore[no-untyped-def]
    return api.transpose(a, axes)


def _round_fn(a, decimals=0, out=None):  # type: ignore[no-untyped-def]
    return _round(api.as_node(a), decimals, out)


def _astype(x, dtype, /, *, copy=True, device=None):  # type: ignore[no-untyped-def]
    return api.astype(api.as_node(x), dtype)


def _shape(a):  # type: ignore[no-untyped-def]
    return api.as_node(a).shape


def _ndim(a):  # type: ignore[no-untyped-def]
    return api.as_node(a).ndim


def _size(a, axis=None):  # type: ignore[no-untyped-def]
    n = api.as_node(a)
    return n.size if axis is None else n.shape[axis]


def _copy(a, order="K", subok=False):  # type: ignore[no-untyped-def]
    return api.as_node(a)


HANDLED_FUNCTIONS: dict[Callable, Callable[..., Any]] = {
    np.sum: _reduction_fn("sum"), np.prod: _reduction_fn("prod"),
    np.max: _minmax_fn("max"), np.amax: _minmax_fn("max"),
    np.min: _minmax_fn("min"), np.amin: _minmax_fn("min"),
    np.any: _minmax_fn("any"), np.all: _minmax_fn("all"),
    np.mean: _stat_fn(api.mean, "mean"), np.var: _stat_fn(api.var, "var"),
    np.std: _stat_fn(api.std, "std"),
    np.argmax: _arg_fn("argmax"), np.argmin: _arg_fn("argmin"),
    np.where: _where, np.clip: _clip, np.linalg.norm: _norm,
    np.reshape: lambda a, shape=None, order="C", **kw: api.reshape(a, shape, order),
    np.transpose: _transpose, np.swapaxes: api.swapaxes, np.moveaxis: api.moveaxis,
    np.expand_dims: api.expand_dims, np.squeeze: _squeeze, np.broadcast_to:
        lambda array, shape, subok=False: api.broadcast_to(array, shape),
    np.ravel: api.ravel, np.flip: api.flip,
    np.concatenate: lambda arrays, axis=0, out=None, dtype=None, casting="same_kind":
        api.concatenate(arrays, axis, dtype, casting),
    np.stack: lambda arrays, axis=0, out=None, *, dtype=None, casting="same_kind":
        api.stack(arrays, axis, dtype, casting),
    np.cumsum: _cumulative("cumsum"), np.cumprod: _cumulative("cumprod"),
    np.dot: lambda a, b, out=None: api.dot(a, b), np.matmul: api.matmul,
    np.zeros_like: _like(0), np.ones_like: _like(1), np.empty_like: _like(0),
    np.full_like: _full_like, np.round: _round_fn, np.around: _round_fn,
    np.astype: _astype, np.shape: _shape, np.ndim: _ndim, np.size: _size, np.copy: _copy,
}
