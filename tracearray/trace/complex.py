"""Complex values while tracing: a pair of real tracers, so that no stage below sees complex.

A ``ComplexTracer`` holds its real and imaginary parts as two real ``Tracer``s of the part
dtype (float32 for complex64, float64 for complex128) and the same shape. Every NumPy
operation on it is a composite of real operations on the parts, chosen from three tables:

- ``UFUNCS``: the ufuncs, each a function of the operands' parts (already promoted to the
  loop's complex dtype with NumPy 2's rules, weak Python scalars included), written as
  NumPy's loops compute them (``complex_math.py`` has the elementary functions);
- ``PARTWISE``: NumPy functions that act on the real and imaginary parts independently
  (movement, selection, sums with real coefficients): the function runs once on the real
  parts and once on the imaginary parts, with the positions of its array arguments listed;
- ``FUNCTIONS``: the rest, each its own expansion (``mean`` divides as NumPy does, ``prod``
  multiplies complex numbers in NumPy's order, ``vdot`` conjugates its first argument, ...).

Views and writes keep NumPy's memory semantics because each part is a real tracer with its
own buffer and path (``buffers.py``): ``z[1:]`` is the pair of views ``re[1:]``, ``im[1:]``,
and ``z[0] = w`` writes each part. A complex *argument* is one real input of shape
``s + (2,)`` (NumPy's interleaved layout, bound by ``interleaved.pair_view``); its parts are
the views ``pair[..., 0]`` and ``pair[..., 1]`` of that input's buffer, so writes reach the
caller's array. A complex result is stored as the stacked pair (``pair_node``) and viewed as
complex after the call.
"""
from __future__ import annotations

import threading

import builtins
import sys
import warnings
from typing import Any, Callable

import numpy as np

from ..errors import (ConcretizationError, TraceDTypeError, UnsupportedAttributeError,
                      with_location)
from ..interleaved import COMPLEX_OF_REAL, real_dtype
from .build import unsupported
from .graph import Node


# ============================================================================================
# Recognising and promoting complex operands
# ============================================================================================

def is_complex(value: Any) -> bool:
    """A complex operand: a complex tracer, a Python complex, a NumPy complex scalar or
    array (a list holding complex numbers, as NumPy would convert it)."""
    if isinstance(value, (ComplexTracer, complex)):
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype.kind == "c"
    if isinstance(value, (list, tuple)) and value:
        return any(is_complex(v) for v in value)
    if not _SELECTION:   # (complex_selection imports this module: resolved at first use)
        from .complex_selection import ComplexSelection
        _SELECTION.append(ComplexSelection)
    return isinstance(value, _SELECTION[0])


_SELECTION: list[type] = []


def is_complex_dtype_kw(kwargs: dict) -> bool:
    """A ``dtype=`` (or ``signature=``'s output) asking for a complex result."""
    dt = kwargs.get("dtype")
    try:
        return dt is not None and np.dtype(dt).kind == "c"
    except TypeError:
        return False


def holds_complex(args: tuple, kwargs: dict) -> bool:
    """Whether a NumPy function's arguments hold a complex value (at the top level or in a
    list or tuple of arrays), or ask for a complex dtype."""
    def complex_arg(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return any(is_complex(e) for e in v)
        return is_complex(v)
    return any(complex_arg(a) for a in args) or any(
        complex_arg(v) for k, v in kwargs.items() if k != "dtype") or is_complex_dtype_kw(kwargs)


def _dtype_key(value: Any) -> Any:
    """What NumPy's promotion sees: weak Python scalars as values, arrays by dtype."""
    if isinstance(value, (bool, int, float, complex)):
        return value
    if isinstance(value, (list, tuple)):
        return np.asarray(value).dtype
    return value.dtype


def complex_result_dtype(*values: Any) -> np.dtype:
    """The complex dtype NumPy 2 computes a complex operation of ``values`` in."""
    dt = np.result_type(*(_dtype_key(v) for v in values))
    if dt.kind != "c":
        dt = np.result_type(dt, np.complex64)
    if dt not in COMPLEX_OF_REAL.values():
        raise TraceDTypeError(with_location(f"complex dtype {dt} is not supported by tracearray "
                                      f"(supported: complex64, complex128)"))
    return dt


def _as_tracer(x: Any) -> Any:
    from .composites import as_tracer
    return as_tracer(x)


def parts(value: Any, part: np.dtype, full: bool = False) -> tuple[Any, Any]:
    """(real, imaginary) of ``value`` as real tracers of dtype ``part``. A real operand's
    imaginary part is a 0-d zero that broadcasts, or with ``full`` a zero array of its shape
    (for functions such as concatenate that do not broadcast)."""
    from .tracer import Tracer
    from .complex_selection import ComplexSelection
    if isinstance(value, ComplexTracer):
        return value.re.astype(part, copy=False), value.im.astype(part, copy=False)
    if isinstance(value, ComplexSelection):
        if full:
            return parts(value.compact(), part, full)
        return value.re.astype(part), value.im.astype(part)
    if isinstance(value, Tracer):
        re = value.astype(part, copy=False)
        return re, (np.zeros_like(re) if full else _as_tracer(np.zeros((), part)))
    from .selection import MaskedSelection
    if isinstance(value, MaskedSelection):
        return parts(value.compact(), part, full)
    arr = np.asarray(value)
    # (ndarray methods: np.ascontiguousarray would make a 0-d value 1-d)
    zeros = np.zeros(arr.shape if full else (), part)
    return (_as_tracer(arr.real.astype(part)),
            _as_tracer(arr.imag.astype(part) if arr.dtype.kind == "c" else zeros))


def as_complex(value: Any, dtype: Any = None) -> "ComplexTracer":
    """``value`` as a complex tracer (of ``dtype``, else its own complex dtype)."""
    dt = np.dtype(dtype) if dtype is not None else complex_result_dtype(value)
    if isinstance(value, ComplexTracer) and value.dtype == dt:
        return value
    try:
        part = real_dtype(dt)
    except TypeError as e:   # complex256 (long double parts)
        raise TraceDTypeError(with_location(str(e))) from None
    return ComplexTracer(*parts(value, part))


# ============================================================================================
# The tracer
# ============================================================================================

class ComplexTracer:
    """A traced complex array: ``re`` and ``im`` are real tracers of one shape and dtype."""

    __slots__ = ("re", "im", "_source")
    __array_priority__ = 2000   # above Tracer's: mixed operators come here

    def __init__(self, re: Any, im: Any):
        from .tracer import Tracer
        re, im = _as_tracer(re), _as_tracer(im)
        if not isinstance(re, Tracer) or not isinstance(im, Tracer):  # pragma: no cover
            raise TypeError("ComplexTracer parts must be traced arrays")
        dt = np.result_type(re.dtype, im.dtype, np.float32)
        if dt.kind != "f" or dt.itemsize > 8:   # pragma: no cover - parts are float32/64
            raise TypeError(f"complex parts of dtype {dt}")
        re, im = re.astype(dt, copy=False), im.astype(dt, copy=False)
        if re.shape != im.shape:
            shape = np.broadcast_shapes(re.shape, im.shape)
            # (broadcast_to is read-only in NumPy; a broadcast result is new memory)
            re = re if re.shape == shape else np.broadcast_to(re, shape).copy()
            im = im if im.shape == shape else np.broadcast_to(im, shape).copy()
        self.re, self.im = re, im
        self._source = None

    @property   # type: ignore[misc]
    def __class__(self) -> type:
        from .tracer import numpy_class
        return numpy_class(self, sys._getframe(1))

    @classmethod
    def from_pair(cls, pair: Any) -> "ComplexTracer":
        """The complex value held by a real pair array (..., 2): views of its memory."""
        value = cls(pair[..., 0], pair[..., 1])
        value._source = (pair.node, value.re.node, value.im.node)
        return value

    def _is_numpy_scalar(self) -> bool:
        """Whether this 0-d value is a NumPy scalar (a reduction's, an element's, a NumPy
        scalar argument's: ``Buffer.zero_d``), not a 0-d array."""
        from .tracer import is_scalar_memory
        if self.ndim != 0:
            return False
        re = self.re
        return re._buf.zero_d == "scalar" or (not re._path and is_scalar_memory(re._buf))

    # --- properties -----------------------------------------------------------------
    def _set_shape(self, shape: Any) -> None:
        # both parts are views of the same layout: both can move, or neither
        self.re.shape = shape
        self.im.shape = shape

    shape = property(lambda self: self.re.shape, _set_shape)
    ndim = property(lambda self: self.re.ndim)
    size = property(lambda self: self.re.size)
    dtype = property(lambda self: COMPLEX_OF_REAL[self.re.dtype])
    itemsize = property(lambda self: 2 * self.re.itemsize)
    nbytes = property(lambda self: 2 * self.re.nbytes)
    T = property(lambda self: ComplexTracer(self.re.T, self.im.T))
    mT = property(lambda self: ComplexTracer(self.re.mT, self.im.mT))
    flags = property(lambda self: self.re.flags)

    @property
    def strides(self) -> tuple[int, ...]:
        """The strides of the pair memory's view, or a new C-contiguous array's (a result of
        arithmetic; divergence traced-layout-flags)."""
        from .memory_views import pair_of
        pair = pair_of(self)
        if pair is not None:
            return pair.strides[:-1]
        out, acc = [], self.itemsize
        for n in reversed(self.shape):
            out.insert(0, acc)
            acc *= max(int(n), 1)
        return tuple(out)

    def _part(self, part: Any) -> Any:
        """``z.real`` / ``z.imag``: a view of the part, whose writes change this array; laid
        out as NumPy lays it out, every other item of the complex memory."""
        if part._buf is (self.im if part is self.re else self.re)._buf:
            return part    # (halves of one pair array: its strides are already the pairs')
        view = part._view(part.node)
        view._interleaved = True
        return view

    @property
    def real(self) -> Any:
        return self._part(self.re)

    @real.setter
    def real(self, value: Any) -> None:
        self.re[...] = value

    @property
    def imag(self) -> Any:
        return self._part(self.im)

    @imag.setter
    def imag(self, value: Any) -> None:
        self.im[...] = value

    def pair_node(self) -> Node:
        """The node of the interleaved (..., 2) real array: how the value is stored. A value
        made by ``from_pair`` and not changed since is that pair itself (an FFT's or eig's
        result: no copy, and the comparator's bound of it, with its whole-result checks,
        reaches the output)."""
        if self._source is not None and (self.re.node, self.im.node) == self._source[1:]:
            return self._source[0]
        return np.stack([self.re, self.im], axis=-1).node

    def __repr__(self) -> str:
        return f"ComplexTracer({self.dtype}{list(self.shape)})"

    def __getattr__(self, name: str) -> Any:
        # Only reached for what a complex tracer does not define: an ndarray attribute is
        # named as unsupported on complex values, at the user's line (a raw AttributeError
        # read as an internal error); anything else is an ndarray's AttributeError.
        if not name.startswith("__") and hasattr(np.ndarray, name):
            raise UnsupportedAttributeError(with_location(
                f"ndarray.{name} is not supported by tracearray on traced complex values"))
        raise AttributeError(f"'numpy.ndarray' object has no attribute {name!r}")

    def __len__(self) -> int:
        return len(self.re)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    __hash__ = None  # type: ignore[assignment]

    # --- concretization ---------------------------------------------------------------
    def _concrete(self, what: str) -> Any:
        raise ConcretizationError(with_location(
            f"{what} needs the concrete value of a traced complex array ({self.dtype}"
            f"{list(self.shape)}), which is only known when the compiled function runs"))

    def __bool__(self) -> bool:
        return bool((self.re != 0) | (self.im != 0))

    def __complex__(self) -> complex:
        # the two parts, each staged (a probe at each call finds its value: Tracer.__float__)
        return complex(float(self.re), float(self.im))

    def _real_part_of_scalar(self, convert: Callable[[Any], Any], message: str) -> Any:
        """float() / int() of a complex value: of a NumPy complex scalar (``z.sum()``) its
        real part, with NumPy's ComplexWarning; of a complex array NumPy's TypeError."""
        if not self._is_numpy_scalar():
            raise TypeError(with_location(message))
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
        return convert(self.re)

    def _staged_value(self, what: str) -> Any:
        """A 0-d complex value as NumPy's scalar, its parts staged as float() is."""
        if self.ndim != 0:
            return self._concrete(what)
        return self.dtype.type(complex(float(self.re), float(self.im)))

    def __format__(self, spec: str) -> str:
        return format(self._staged_value("format() or an f-string"), spec)

    def __str__(self) -> str:
        return str(self._staged_value("str() (or print)"))

    def __float__(self) -> float:
        return self._real_part_of_scalar(
            float, "float() argument must be a string or a real number, not 'complex'")

    def __int__(self) -> int:
        return self._real_part_of_scalar(
            int, "int() argument must be a string, a bytes-like object or a real number, "
            "not 'complex'")

    def __index__(self) -> int:
        raise TypeError(with_location("only integer arrays can be used as an index; this "
                                      "one is complex"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._concrete("converting to a NumPy array")

    def item(self, *args: Any) -> Any:
        if args:
            from .tracer import _item_at
            return _item_at(self, args)
        if self.re.size != 1:
            raise ValueError(with_location(
                "can only convert an array of size 1 to a Python scalar"))
        return complex(self.re.item(), self.im.item())

    def tolist(self) -> Any:
        return self._concrete(".tolist()")

    # --- NumPy protocols ----------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        return apply_function(func, args, kwargs)

    def __array_namespace__(self, *, api_version: Any = None) -> Any:
        return np

    # --- indexing and writes ------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        from .complex_selection import ComplexSelection
        from .selection import MaskedSelection
        re, im = self.re[_part_key(key)], self.im[_part_key(key)]
        if isinstance(re, MaskedSelection) and isinstance(im, MaskedSelection) and \
                re.mask is im.mask and re.lead == im.lead:
            return ComplexSelection(re, im)     # z[mask]: compacted only where needed
        return ComplexTracer(*_part_results(re, im))

    def __setitem__(self, key: Any, value: Any) -> None:
        if self._is_numpy_scalar():
            raise TypeError(with_location(f"'numpy.{self.dtype.name}' object does not "
                                          f"support item assignment"))
        key = _part_key(key)
        if not is_complex(value):
            self.re[key] = value
            self.im[key] = 0
            return
        vr, vi = parts(value, self.re.dtype)
        self.re[key] = vr
        self.im[key] = vi

    def fill(self, value: Any) -> None:
        self[...] = value

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        np.put(self, indices, values, mode=mode)   # (complex_ops: on each part)

    # --- conversion and copies -----------------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> Any:
        dt = np.dtype(dtype)
        if not np.can_cast(self.dtype, dt, casting=casting):
            raise TypeError(with_location(
                f"Cannot cast array data from {self.dtype!r} to {dt!r} according to the rule "
                f"{casting!r}"))
        if dt.kind == "c":
            if dt == self.dtype and not copy:
                return self
            return ComplexTracer(self.re.astype(real_dtype(dt)), self.im.astype(real_dtype(dt)))
        return discard_imaginary(self, dt)

    def copy(self, order: str = "C") -> "ComplexTracer":
        return ComplexTracer(self.re.copy(), self.im.copy())

    def view(self, dtype: Any = None, type: Any = None) -> Any:
        if isinstance(dtype, builtins.type) and issubclass(dtype, np.ndarray):
            dtype, type = None, dtype
        if type is not None:
            raise unsupported(f"ndarray.view({getattr(type, '__name__', type)})",
                              "ndarray subclasses are not traced")
        if dtype is None or np.dtype(dtype) == self.dtype:
            return ComplexTracer(self.re.view(), self.im.view())
        from .memory_views import view_complex   # the parts' memory read as another dtype
        return view_complex(self, np.dtype(dtype))

    def conj(self) -> "ComplexTracer":
        return ComplexTracer(self.re.copy(), -self.im)

    conjugate = conj

    # --- shape (each part moves the same way: views of both) ------------------------------
    def _layout(self) -> Any:
        """The layout NumPy gives this complex array (a shadow array), None when not known:
        its parts', whose strides count the pair array's items where they are the two halves
        of one (..., 2) real array (``from_pair``), twice the complex array's."""
        layout = self.re._layout()
        if layout is not None and self.re._buf is self.im._buf and \
                all(st % 2 == 0 for st in layout.strides):
            layout = np.lib.stride_tricks.as_strided(
                layout, layout.shape, tuple(st // 2 for st in layout.strides))
        return layout

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> "ComplexTracer":
        # (a view or a copy as the complex array's layout decides, for both parts alike)
        layout = self._layout()
        return ComplexTracer(self.re._reshape(shape, order, copy, layout),
                             self.im._reshape(shape, order, copy, layout))

    def ravel(self, order: str = "C") -> "ComplexTracer":
        from . import numpy_api as api
        layout = self._layout()
        return ComplexTracer(self.re._reshaped(api.ravel(self.re.node, order), True, order,
                                               layout),
                             self.im._reshaped(api.ravel(self.im.node, order), True, order,
                                               layout))

    def _both(name: str) -> Callable[..., "ComplexTracer"]:   # type: ignore[misc]
        def method(self: "ComplexTracer", *args: Any, **kwargs: Any) -> "ComplexTracer":
            return ComplexTracer(getattr(self.re, name)(*args, **kwargs),
                                 getattr(self.im, name)(*args, **kwargs))
        method.__name__ = name
        return method

    transpose = _both("transpose")
    swapaxes = _both("swapaxes")
    squeeze = _both("squeeze")
    flatten = _both("flatten")
    diagonal = _both("diagonal")
    repeat = _both("repeat")
    take = _both("take")
    del _both

    # --- reductions -----------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,  # type: ignore[no-untyped-def]
            where=True):
        return np.sum(self, axis, dtype, out, keepdims, initial, where)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,  # type: ignore[no-untyped-def]
             where=True):
        return np.prod(self, axis, dtype, out, keepdims, initial, where)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return np.mean(self, axis, dtype, out, keepdims, where=where)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return np.var(self, axis, dtype, out, ddof, keepdims, where=where)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return np.std(self, axis, dtype, out, ddof, keepdims, where=where)

    def cumsum(self, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        return np.cumsum(self, axis=axis, dtype=dtype, out=out)   # (by keyword: the
        # partwise rule reads dtype= there)

    def cumprod(self, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        return np.cumprod(self, axis=axis, dtype=dtype, out=out)

    def max(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):  # type: ignore[no-untyped-def]
        return np.max(self, axis, out, keepdims, initial, where)

    def min(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):  # type: ignore[no-untyped-def]
        return np.min(self, axis, out, keepdims, initial, where)

    def any(self, axis=None, out=None, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return np.any(self, axis, out, keepdims, where=where)

    def all(self, axis=None, out=None, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return np.all(self, axis, out, keepdims, where=where)

    def dot(self, other: Any, out: Any = None) -> Any:
        return np.dot(self, other, out)

    def nonzero(self) -> Any:
        return np.nonzero((self.re != 0) | (self.im != 0))

    # --- methods that are NumPy's functions of the array ------------------------------------
    def round(self, decimals: int = 0, out: Any = None) -> Any:
        return np.round(self, decimals, out)

    def argsort(self, axis: Any = -1, kind: Any = None, order: Any = None, *,
                stable: Any = None) -> Any:
        return np.argsort(self, axis, kind, order, stable=stable)

    def argmax(self, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        return np.argmax(self, axis, out, keepdims=keepdims)

    def argmin(self, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        return np.argmin(self, axis, out, keepdims=keepdims)

    def sort(self, axis: Any = -1, kind: Any = None, order: Any = None, *,
             stable: Any = None) -> None:
        self[...] = np.sort(self, axis, kind, order, stable=stable)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
              out: Any = None) -> Any:
        return np.trace(self, offset, axis1, axis2, dtype=dtype, out=out)

    def compress(self, condition: Any, axis: Any = None, out: Any = None) -> Any:
        return np.compress(condition, self, axis, out)

    # --- operators ------------------------------------------------------------------------
    def _binary(uf: np.ufunc, reflected: bool = False) -> Callable[..., Any]:   # type: ignore[misc]
        def method(self: "ComplexTracer", other: Any) -> Any:
            if isinstance(other, (list, tuple)):
                other = np.asarray(other)
            if not _is_operand(other):
                return NotImplemented
            return uf(other, self) if reflected else uf(self, other)
        method.__name__ = f"__{'r' if reflected else ''}{uf.__name__}__"
        return method

    def _inplace(uf: np.ufunc) -> Callable[..., Any]:   # type: ignore[misc]
        def method(self: "ComplexTracer", other: Any) -> Any:
            result = uf(self, other)
            if self._is_numpy_scalar():
                return result   # immutable: ``s op= v`` rebinds s (promoting), as NumPy's
            if not np.can_cast(result.dtype, self.dtype, "same_kind"):  # pragma: no cover
                from .numpy_api import output_cast_error
                raise output_cast_error(uf, result.dtype, self.dtype)
            if result.shape != self.shape:
                raise ValueError(with_location(
                    f"non-broadcastable output operand with shape {tuple(self.shape)} doesn't "
                    f"match the broadcast shape {tuple(result.shape)}"))
            self[...] = result
            return self
        return method

    __add__, __radd__, __iadd__ = _binary(np.add), _binary(np.add, True), _inplace(np.add)
    __sub__, __rsub__, __isub__ = (_binary(np.subtract), _binary(np.subtract, True),
                                   _inplace(np.subtract))
    __mul__, __rmul__, __imul__ = (_binary(np.multiply), _binary(np.multiply, True),
                                   _inplace(np.multiply))
    __truediv__, __rtruediv__, __itruediv__ = (_binary(np.true_divide),
                                               _binary(np.true_divide, True),
                                               _inplace(np.true_divide))
    __rpow__, __ipow__ = _binary(np.power, True), _inplace(np.power)
    __matmul__, __rmatmul__, __imatmul__ = (_binary(np.matmul), _binary(np.matmul, True),
                                            _inplace(np.matmul))
    __floordiv__, __rfloordiv__, __ifloordiv__ = (_binary(np.floor_divide),
                                                  _binary(np.floor_divide, True),
                                                  _inplace(np.floor_divide))
    __mod__, __rmod__, __imod__ = (_binary(np.remainder), _binary(np.remainder, True),
                                   _inplace(np.remainder))
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)  # type: ignore[assignment]
    __lt__, __le__ = _binary(np.less), _binary(np.less_equal)
    __gt__, __ge__ = _binary(np.greater), _binary(np.greater_equal)
    del _binary, _inplace

    def __pow__(self, other: Any, mod: Any = None) -> Any:
        # ndarray.__pow__'s fast paths (number.c fast_scalar_power), which round differently
        # from np.power's loop: an exact Python int 2 or -1 or float 0.5 exponent
        if mod is not None:
            raise unsupported("pow() with a modulus")
        if type(other) is int and other in (2, -1):
            return np.square(self) if other == 2 else np.reciprocal(self)
        if type(other) is float and other == 0.5:
            return np.sqrt(self)
        if isinstance(other, (list, tuple)):
            other = np.asarray(other)
        if not _is_operand(other):
            return NotImplemented
        return np.power(self, other)

    def __neg__(self) -> "ComplexTracer":
        return np.negative(self)

    def __pos__(self) -> "ComplexTracer":
        return np.positive(self)

    def __abs__(self) -> Any:
        return np.absolute(self)

    def __invert__(self) -> Any:
        return np.invert(self)


def _is_operand(x: Any) -> bool:
    from .tracer import Tracer
    return isinstance(x, (ComplexTracer, Tracer, np.ndarray, np.generic, bool, int, float,
                          complex))


def _part_key(key: Any) -> Any:
    """An index of a complex array as an index of each part (a complex index is an error,
    as in NumPy; traced boolean masks and index arrays apply to both parts)."""
    from .complex_selection import ComplexSelection
    items = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (ComplexTracer, ComplexSelection)) for k in items):
        raise IndexError(with_location(
            "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
            "integer or boolean arrays are valid indices"))
    return key


def _part_results(re: Any, im: Any) -> tuple[Any, Any]:
    from .selection import MaskedSelection
    if isinstance(re, MaskedSelection):
        re = re.compact()
    if isinstance(im, MaskedSelection):
        im = im.compact()
    return re, im


def discard_imaginary(z: ComplexTracer, dtype: np.dtype) -> Any:
    """A complex -> real cast, as NumPy makes it: bool is "nonzero", every other real dtype
    takes the real part and NumPy warns (ComplexWarning) that the imaginary part is lost."""
    if dtype == np.dtype(bool):
        return (z.re != 0) | (z.im != 0)
    warnings.warn("Casting complex values to real discards the imaginary part",
                  np.exceptions.ComplexWarning, stacklevel=3)
    return z.re.astype(dtype)


# ============================================================================================
# Dispatch
# ============================================================================================

UFUNCS: dict[np.ufunc, Callable[..., Any]] = {}
PARTWISE: dict[Any, tuple[Any, ...]] = {}
FUNCTIONS: dict[Any, Callable[..., Any]] = {}


def ufunc_rule(*ufuncs: np.ufunc) -> Callable[[Callable], Callable]:
    """Register the complex loop of ``ufuncs``: called with the operands' (re, im) pairs in
    the loop's complex dtype; returns a ComplexTracer or a real tracer."""
    def register(fn: Callable) -> Callable:
        for uf in ufuncs:
            UFUNCS[uf] = fn
        return fn
    return register


def function_rule(*funcs: Any) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for f in funcs:
            FUNCTIONS[f] = fn
        return fn
    return register


def apply_ufunc(uf: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """A ufunc with a complex operand (from either tracer's ``__array_ufunc__``, or an
    operator), its new result laid out as NumPy lays out a ufunc's (``operands_layout``)."""
    from .tracer import operands_layout, weak_operands
    if method == "__call__":   # (Python numbers among the operands: cast as NumPy casts them)
        inputs, _weak = weak_operands(uf, inputs)
    plain = method == "__call__" and kwargs.get("out") is None
    result = _apply_ufunc(uf, method, inputs, kwargs)
    return operands_layout(result, inputs) if plain else result


def _apply_ufunc(uf: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    from .dispatch import numpy_name
    name = numpy_name(uf) + (f".{method}" if method != "__call__" else "")
    out = kwargs.pop("out", None)
    casting = kwargs.pop("casting", "same_kind")
    for k in ("order", "subok"):
        kwargs.pop(k, None)
    dtype = kwargs.pop("dtype", None)
    if method == "reduce" and uf in (np.add, np.multiply):
        return _with_out(name, (np.sum if uf is np.add else np.prod)(
            inputs[0], axis=kwargs.pop("axis", 0), dtype=dtype, **kwargs), out)
    if method == "accumulate" and uf in (np.add, np.multiply):
        return _with_out(name, (np.cumsum if uf is np.add else np.cumprod)(
            inputs[0], axis=kwargs.pop("axis", 0), dtype=dtype), out)
    if method != "__call__":
        raise unsupported(f"{name} of complex values")
    if uf is np.matmul:   # a generalized ufunc: the product rule of FUNCTIONS
        if dtype is not None:   # (NumPy's loop: both operands cast to dtype, then the product)
            from .dispatch import _composite_in_dtype
            return _with_out(name, _composite_in_dtype(uf, np.matmul, inputs, kwargs, dtype,
                                                       casting, name), out, casting)
        return _with_out(name, FUNCTIONS[np.matmul](*inputs, **kwargs), out, casting)
    if kwargs.pop("where", True) is not True or kwargs:
        raise unsupported(f"{name}({', '.join(sorted(kwargs) or ['where'])}=...) of complex "
                          f"values")
    if dtype is not None or casting != "same_kind":
        _check_casting(uf, inputs, dtype, casting, name)
    if dtype is not None and np.dtype(dtype).kind != "c" and casting == "unsafe":
        # a real loop selected for complex operands (np.add(c, c, dtype=bool,
        # casting="unsafe")): the operands cast to it, as NumPy casts them (ComplexWarning)
        from .dispatch import _composite_in_dtype
        return _with_out(name, _composite_in_dtype(uf, uf, inputs, {}, dtype, casting, name),
                         out, casting)
    rule = UFUNCS.get(uf)
    if rule is None:
        _refuse_like_numpy(uf, inputs)
        raise unsupported(f"{name} of complex values")
    dt = complex_result_dtype(*inputs) if dtype is None else np.dtype(dtype)
    if dt.kind != "c":
        _refuse_like_numpy(uf, inputs, dt)
        raise unsupported(f"{name}(..., dtype={dt}) of complex values")
    part = real_dtype(dt)
    result = rule(*(parts(x, part) for x in inputs))
    return _with_out(name, result, out, casting)


def _check_casting(uf: np.ufunc, inputs: tuple, dtype: Any, casting: str, name: str) -> None:
    """NumPy's error where ``dtype=`` and ``casting=`` select no loop for the operands
    (np.add(f8, f8, dtype=complex64, casting='safe'); a Python int under 'equiv')."""
    from .build import dtype_key
    from .numpy_api import numpy_error, resolve_loop
    keys = tuple(np.dtype(complex_result_dtype(x)) if is_complex(x) else
                 np.asarray(x).dtype if isinstance(x, (list, tuple)) else
                 np.dtype(x.dtype) if hasattr(x, "dtype") else dtype_key(x) for x in inputs)
    sig = None if dtype is None else (None,) * uf.nin + (np.dtype(dtype),) * uf.nout
    try:
        resolve_loop(uf, keys, inputs, signature=sig, casting=casting)
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise numpy_error(e, f"{name}: {e}") from None


def _refuse_like_numpy(uf: np.ufunc, inputs: tuple, dtype: Any = None) -> None:
    """NumPy's TypeError for a ufunc without a complex loop (np.floor, np.arctan2, ...)."""
    keys = tuple(np.dtype(complex_result_dtype(x)) if is_complex(x) else _dtype_key(x)
                 for x in inputs)
    keys = tuple(np.asarray(k).dtype if isinstance(k, (bool, int, float, complex)) else k
                 for k in keys)
    try:
        uf.resolve_dtypes(keys + (dtype,) * uf.nout)
    except TypeError as e:
        raise TypeError(with_location(str(e))) from None
    except Exception:   # noqa: BLE001 -- any other failure: tracearray's own refusal follows
        return


def _with_out(name: str, result: Any, out: Any, casting: str = "same_kind") -> Any:
    """``result`` written into ``out=`` under ``casting`` (a complex result into a real
    array is NumPy's same_kind casting error; under 'unsafe', its real parts)."""
    if isinstance(out, tuple):
        out = out[0] if len(out) == 1 else out
    if out is None:
        return result
    if not np.can_cast(result.dtype, out.dtype, casting):
        from .numpy_api import output_cast_error
        raise output_cast_error(name, result.dtype, out.dtype, casting)
    if isinstance(result, ComplexTracer) and not isinstance(out, ComplexTracer):
        result = discard_imaginary(result, np.dtype(out.dtype))
    out[...] = result
    return out


def numpy_code_for_complex(func: Callable) -> None:
    """Let complex arguments run NumPy's own Python code of ``func`` (a numpy.linalg function
    written over others that take complex values: svdvals over svd, multi_dot over dot)."""
    def rule(*args: Any, **kwargs: Any) -> Any:
        from . import dispatch
        return dispatch.run_numpy_implementation(func, func._implementation, args, kwargs)
    FUNCTIONS[func] = rule


# functions whose rule writes out= itself (NumPy's rules for it are theirs: an FFT's out
# must have the result's shape): a complex out= of real operands goes to the rule
OWN_OUT: set[Callable] = set()


def apply_function(func: Callable, args: tuple, kwargs: dict) -> Any:
    """A NumPy function with a complex argument."""
    from . import dispatch
    out = kwargs.get("out")
    out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    if func in _REAL_OUT_LOOPS and out is not None and not isinstance(out, ComplexTracer) and \
            getattr(out, "dtype", None) is not None and np.dtype(out.dtype).kind != "c" and \
            args and is_complex(args[0]) and not holds_complex(args[1:], rest):
        # a complex operand into a real out= (np.cumsum(z, out=f)): NumPy's loop stays
        # complex (out's dtype does not hold it) and the result is cast into out unsafely:
        # its real parts, with NumPy's ComplexWarning
        from .tracer import store_out
        result = func(*args, **rest)
        real = discard_imaginary(as_complex(result), np.dtype(out.dtype)) \
            if isinstance(result, ComplexTracer) else result
        return store_out(dispatch.numpy_name(func), real, out)
    if isinstance(out, ComplexTracer) and not holds_complex(args, rest) and \
            func not in OWN_OUT:
        # real values into a complex out= (np.cumsum(x, out=z)): computed real, written in
        from .tracer import store_out
        return store_out(dispatch.numpy_name(func), func(*args, **rest), out)
    pos = _CONDITIONS.get(func)
    if pos is not None and len(args) > pos and is_complex(args[pos]):
        # a complex condition or mask is its nonzero elements (NumPy's truth of them)
        cond = np.not_equal(as_complex(args[pos]), 0)
        return func(*args[:pos], cond, *args[pos + 1:], **kwargs)
    rule = FUNCTIONS.get(func)
    if rule is not None:
        # NumPy's own code passes np._NoValue for arguments not given (np.nansum calls
        # np.sum(..., where=where) with where=np._NoValue): the rule's defaults then
        return rule(*args, **{k: v for k, v in kwargs.items() if v is not np._NoValue})
    spec = PARTWISE.get(func)
    if spec is not None:
        return partwise(func, spec, args, kwargs)
    impl = getattr(func, "_implementation", None)
    module = getattr(func, "__module__", "") or ""
    if impl is None or not module.startswith("numpy") or \
            module.startswith(("numpy.linalg", "numpy.fft")) or func in _RUNNING.funcs:
        # (NumPy's np.clip calls the array's clip method, which calls np.clip: with a
        # complex bound of a real array that came back here, forever)
        raise unsupported(f"{dispatch.numpy_name(func)} of complex values")
    _RUNNING.funcs.add(func)
    try:
        return dispatch.run_numpy_implementation(func, impl, args, kwargs)
    finally:
        _RUNNING.funcs.discard(func)


# NumPy's reductions and scans whose out= casts unsafely: a complex operand's result goes
# into a real out= as its real parts
_REAL_OUT_LOOPS = frozenset({np.cumsum, np.cumprod, np.sum, np.prod, np.mean, np.nansum,
                             np.nanprod, np.nancumsum, np.nancumprod})

# NumPy functions taking a condition or mask (the position of that argument)
_CONDITIONS = {np.compress: 0, np.extract: 0, np.place: 1, np.putmask: 1}


class _Running(threading.local):
    """NumPy functions whose own implementation runs on complex values in this thread."""

    def __init__(self) -> None:
        self.funcs: set = set()


_RUNNING = _Running()


def partwise(func: Callable, spec: tuple[Any, ...], args: tuple, kwargs: dict) -> Any:
    """``func`` run on the real parts and on the imaginary parts of its array arguments (at
    positions or keyword names ``spec``; "*" means every positional argument, and an int
    position holding a sequence is each of its elements)."""
    args = list(args)
    slots: list[tuple[Any, Any]] = []   # (where, value)
    positions = range(len(args)) if spec == ("*",) else spec
    for p in positions:
        if isinstance(p, int) and p < len(args):
            slots.append((p, args[p]))
        elif isinstance(p, str) and p in kwargs:
            slots.append((p, kwargs[p]))
    values = []
    for _where, v in slots:
        values.extend(v if isinstance(v, (list, tuple)) and not _is_array_like_list(v) else [v])
    # NumPy converts each of these operands with np.asarray first: a Python scalar among
    # them is a strong int64 / float64 / complex128 array there (np.append(x64, 2) of
    # complex64 is complex128), not a weak scalar
    strong = spec != ("*",)     # (np.atleast_1d's operands keep their own dtypes)
    dt = complex_result_dtype(*[np.asarray(v) if strong and isinstance(
        v, (bool, int, float, complex)) else v for v in values])
    want = kwargs.get("dtype")
    if want is not None and np.dtype(want).kind != "c":
        # a real dtype= (np.concatenate(..., dtype=np.float32, casting="unsafe"),
        # np.cumsum(z, dtype=np.float32)): NumPy casts the complex operands to it (their
        # real parts) and runs the real function
        casting = kwargs.get("casting", "same_kind")
        if casting != "unsafe" and "casting" in kwargs:
            raise TypeError(with_location(
                f"Cannot cast array data from {dt!r} to {np.dtype(want)!r} according to the "
                f"rule {casting!r}"))

        def real(v: Any) -> Any:
            return discard_imaginary(as_complex(v), np.dtype(want)) if is_complex(v) else v
        a, kw = list(args), dict(kwargs)
        for where, v in slots:
            new = type(v)(real(e) for e in v) if isinstance(v, (list, tuple)) and \
                not _is_array_like_list(v) else real(v)
            if isinstance(where, int):
                a[where] = new
            else:
                kw[where] = new
        return func(*a, **kw)
    if want is not None:   # a complex dtype=: the parts in its real dtype
        dt = np.dtype(want)
        casting = kwargs.get("casting")
        for v in values if casting is not None else ():
            src = complex_result_dtype(v) if is_complex(v) else np.asarray(v).dtype \
                if isinstance(v, (bool, int, float, list, tuple)) else np.dtype(v.dtype)
            if not np.can_cast(src, dt, casting):
                raise TypeError(with_location(
                    f"Cannot cast array data from {np.dtype(src)!r} to {dt!r} according to "
                    f"the rule {casting!r}"))
    part = real_dtype(dt)

    def call(which: int) -> Any:
        a, kw = list(args), dict(kwargs)
        if want is not None:
            kw["dtype"] = part
        for where, v in slots:
            if isinstance(v, (list, tuple)) and not _is_array_like_list(v):
                new = type(v)(parts(e, part, full=True)[which] for e in v)
            else:
                new = parts(v, part, full=True)[which]
            if isinstance(where, int):
                a[where] = new
            else:
                kw[where] = new
        return func(*a, **kw)
    re, im = call(0), call(1)
    if isinstance(re, (list, tuple)):
        return type(re)(ComplexTracer(r, i) for r, i in zip(re, im))
    return ComplexTracer(re, im)


def _is_array_like_list(v: Any) -> bool:
    """A list of numbers (one array operand), as opposed to a sequence of arrays."""
    from .tracer import Tracer
    return all(isinstance(e, (bool, int, float, complex)) for e in v) and not any(
        isinstance(e, (Tracer, ComplexTracer)) for e in v)


from . import complex_ops  # noqa: E402,F401  (registers the rules)
