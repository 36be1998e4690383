"""``Tracer``: the stand-in for an array argument while the user's function runs.

It implements Python's operators, NumPy's ``__array_ufunc__`` and ``__array_function__``
protocols (``dispatch.py`` chooses the implementation: a primitive, a composite, or NumPy's own
Python code), ndarray methods and properties, indexing and writes (``x[key] = v``,
``x += v``: a tracer is a view of a ``buffers.Buffer``, NumPy's memory), so that unmodified NumPy code records a graph. Anything
that would need a concrete value (``if x > 0``, ``float(x)``) raises ``ConcretizationError``
pointing at the user's line, unless the value is known while tracing (an array the function
made from constants).
"""
from __future__ import annotations

import builtins
import dis
import functools
import inspect
import operator
import re
import sys
from typing import Any, Callable, Sequence

import numpy as np

from . import buffers
from . import complex as complex_values
from . import numpy_api as api
from .buffers import Buffer
from .build import (as_node as as_node_, check_dtype, check_where, constant, dtype_key,
                    fix_captured_value, known_value, make, shape_str, unsupported)
from . import context
from ..errors import (ConcretizationError, UnexpectedTracerError, UnsupportedAttributeError,
                      UnsupportedOperationError, user_frame, user_location,
                      with_location)
from .graph import Node, type_str
from ..ops.elementwise import bitcast_allowed
from ..ops.rules import broadcast_shape
from ..interleaved import real_dtype

builtins_type = builtins.type   # (``view`` has a parameter named type)


# np.logical_and.reduce([a, b]), np.maximum.reduce((a, b, c)): a ufunc method of a sequence
_UFUNC_METHOD_OF_LIST = re.compile(r"\.(reduce|accumulate|reduceat|outer)\s*\(\s*[\[(]")

# np.float32(x), np.int64(x), ...: a scalar type called on a traced value
_SCALAR_TYPE_CALL = re.compile(r"\bnp\.((?:float|int|uint|complex)(?:8|16|32|64|128)?|bool_?|"
                               r"double|single|half|intp|uintp|longlong)\s*\(")

_ASSIGNMENT_INTO_NUMPY = ("assigning a traced value into a NumPy array (`out[...] = value` "
                          "where `out` is a NumPy array, e.g. one made by np.ndarray(shape), "
                          "which is not traced: np.empty(shape) is)")


def _user_code_line() -> str:
    where = user_location() or ""
    return where.splitlines()[1].strip() if "\n" in where else ""


# ``Tracer._reshaped``'s layout when none is given: the value's own (``Tracer._layout``)
_OWN_LAYOUT = object()


def _stays_a_view(layout: np.ndarray, node: Node, ravel: bool, order: str) -> bool:
    """Whether NumPy's reshape (ravel) to ``node``'s shape of memory of this ``layout`` (a
    shadow array) is a view."""
    if ravel:
        return bool(layout.flags.f_contiguous if order == "F" else layout.flags.c_contiguous)
    try:
        np.reshape(layout, node.shape, order=order, copy=False)
        return True
    except ValueError:
        return False


def _scalar_conversion(what: str) -> str:
    """What needs a 0-d tracer's value: NumPy's C code converts the value it stores into one
    element of a NumPy array with float() / int() / complex()."""
    return _ASSIGNMENT_INTO_NUMPY if _numpy_stores_element() else what


_STORES = frozenset(dis.opmap[name] for name in ("STORE_SUBSCR", "STORE_SLICE")
                    if name in dis.opmap)


def _numpy_stores_element() -> bool:
    """Whether a conversion of a traced value was asked for by NumPy's own code storing it
    into a NumPy array (``out[i] = t``: the user's frame is at its subscript store, where the
    tracer's own ``__setitem__`` would have taken a traced ``out``), not by the user's
    float() / int() / .item() or by tracearray's own code (the user's frame is at a call)."""
    frame = user_frame()
    if frame is None or frame.f_lasti < 0:
        return False
    return frame.f_code.co_code[frame.f_lasti] in _STORES


def _staged(node: Node, what: str) -> int:
    """The value of the one-element integer-valued ``node`` as a Python int, staged: the
    trace stops here, a probe computes it at each call, and the function is traced again
    with it (``context.data_size``; each distinct value is a trace of its own)."""
    from . import context
    return context.data_size(api.cast(api.reshape(node, ()), np.dtype(np.int64)), what)


def _staged_scalar(node: Node, what: str) -> Any:
    """The value of the one-element real ``node`` as the NumPy scalar of its dtype, staged as
    ``_staged`` is. The probe computes the value's own bits (as a signed integer of its size,
    widened to int64), so each distinct value, -0.0 and every NaN payload included, is a
    trace of its own and the value the trace goes on with is NumPy's to the bit."""
    from . import context
    dt = node.dtype
    if dt.kind in "bi" or dt.kind == "u" and dt.itemsize < 8:
        return dt.type(_staged(node, what))
    # the value's own bits as a signed integer of its size (a float's NaN payload and
    # signalling bit kept), widened to int64
    same = np.dtype(f"i{dt.itemsize}")
    bits = make("bitcast", [api.reshape(node, ())], dtype=same.str)
    if same.itemsize < 8:
        bits = api.cast(bits, np.dtype(np.int64))
    found = context.data_size(bits, what)
    return dt.type(np.array(found, np.int64).astype(same).view(dt)[()])


def _scalar_of_ndim(node: Node, what: str) -> None:
    """NumPy 2.4's TypeError for a Python scalar of an array of one element and ndim > 0
    (earlier versions warn and convert)."""
    if node.ndim > 0 and NDIM_SCALAR_CONVERSION_RAISES:
        raise TypeError(with_location(
            f"only 0-dimensional arrays can be converted to Python scalars ({what})"))


def _conversion_raises() -> bool:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            float(np.zeros(1))
        except TypeError:
            return True
    return False


NDIM_SCALAR_CONVERSION_RAISES = _conversion_raises()


def unwrap(x: Any) -> Any:
    """Tracers become nodes; lists/tuples are unwrapped element-wise; others pass through."""
    if isinstance(x, Tracer):
        return x.node
    if isinstance(x, (list, tuple)):
        return type(x)(unwrap(v) for v in x)
    return x


def wrap(x: Any) -> Any:
    return Tracer(x) if isinstance(x, Node) else x

    return Tracer(x) if isinstance(x, Node) else x


def _item_at(t: Any, args: tuple) -> Any:
    """``t.item(i)`` (the i-th element in C order, ``i`` a Python int or a traced one) or
    ``t.item(i, j, ...)`` / ``t.item((i, j, ...))``: the element's staged value."""
    index = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
    if len(index) == 1:
        (i,) = index
        if isinstance(i, Tracer) and (i.ndim or i.dtype.kind not in "iu"):
            raise TypeError(with_location("an integer is required"))
        return t.reshape(-1)[i].item()
    if len(index) != t.ndim:
        raise ValueError(with_location("incorrect number of indices for array"))
    return t[tuple(index)].item()


def _as_arrays(value: Any) -> Any:
    """``value`` with the tracers in it (in tuples, lists and dicts) as the arrays of their
    known values (constants used outside any trace)."""
    if isinstance(value, Tracer):
        return np.asarray(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_as_arrays(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_arrays(v) for k, v in value.items()}
    return value


def _binary(ufunc: np.ufunc, reflected: bool = False) -> Callable[[Any, Any], Any]:
    def method(self: "Tracer", other: Any) -> Any:
        if self._outside_its_trace():   # (h * 2 of a constant kept by the user's cache)
            a, b = np.asarray(self), _as_arrays(other)
            return ufunc(b, a) if reflected else ufunc(a, b)
        if isinstance(other, (list, tuple)):
            if ufunc is np.multiply and self.ndim == 0 and self.dtype.kind in "iu" and \
                    (self._weak is int or self._is_numpy_scalar()):
                return other * operator.index(self)   # (a sequence repeated, as Python's)
            other = np.asarray(other)
        if complex_values.is_complex(other):   # a complex operand: complex.py's loops
            ops = (other, self) if reflected else (self, other)   # (weak ones cast there)
            return complex_values.apply_ufunc(ufunc, "__call__", ops, {})
        if isinstance(other, (str, bytes)):
            # NumPy's own error for its ufunc of these dtypes (Python's str * x would ask x
            # for an index instead)
            # (the trace adds the user's line to it as a note: trace._note_user_line)
            stand = np.zeros(1, self.node.dtype)
            ufunc(*((other, stand) if reflected else (stand, other)))
        if not isinstance(other, (Tracer, np.ndarray, np.generic, bool, int, float, complex)):
            if hasattr(other, "__cuda_array_interface__"):   # (x * W, W a global device array)
                from .build import foreign_value_error
                raise foreign_value_error(other)
            return NotImplemented
        ops, weak = weak_operands(ufunc, (other, self) if reflected else (self, other))
        out = operands_layout(Tracer(api.apply_ufunc(ufunc, *unwrap(ops))), (self, other))
        if weak is not None and out.ndim == 0:
            out = weak_scalar(out, weak)
        return out
    method.__name__ = f"__{'r' if reflected else ''}{ufunc.__name__}__"
    return method


def weak_scalar(t: "Tracer", kind: type) -> "Tracer":
    """``t`` (0-d) as the Python float or int NumPy would have (``Tracer._weak``)."""
    out = Tracer(api.cast(t.node, np.dtype(np.float64 if kind is float else np.int64)))
    out._weak = kind
    return out


def weak_operands(ufunc: np.ufunc, operands: Sequence[Any]) -> tuple[tuple, type | None]:
    """A ufunc's operands with its weakly typed traced values (``Tracer._weak``) cast as
    NumPy casts a Python scalar there (NEP 50: to the dtype the other operands give with
    it: a float32 array's float32, an int8 array's int8 for an int), and the kind of Python
    scalar the result is when every operand is a Python number (None otherwise)."""
    if not any(isinstance(o, Tracer) and o._weak is not None for o in operands):
        return tuple(operands), None
    arrays = (Tracer, complex_values.ComplexTracer, np.ndarray, np.generic)
    strong = [np.dtype(o.dtype) for o in operands
              if isinstance(o, arrays) and not (isinstance(o, Tracer) and o._weak is not None)]
    if not strong:   # Python numbers only: the result is one (float * 2 is a float)
        stand = [o._weak(1) if isinstance(o, Tracer) else o for o in operands]
        with np.errstate(all="ignore"):
            kind = type(ufunc(*stand).item()) if ufunc.nout == 1 else None
        return tuple(operands), kind if kind in (float, int) else None
    try:   # NumPy's loop for these operands, a Python type standing for a weak one
        loop = ufunc.resolve_dtypes(tuple(
            o._weak if isinstance(o, Tracer) and o._weak is not None else
            np.dtype(o.dtype) if isinstance(o, arrays) else type(o)
            for o in operands) + (None,) * ufunc.nout)
    except Exception:   # noqa: BLE001 -- no loop: the ufunc's own error comes next
        loop = None
    out = []
    for i, o in enumerate(operands):
        if isinstance(o, Tracer) and o._weak is not None:
            o = o.astype(loop[i] if loop is not None else
                         np.result_type(*strong, o._weak(1)))
        out.append(o)
    return tuple(out), None


def _unary(ufunc: np.ufunc) -> Callable[[Any], Any]:
    def method(self: "Tracer") -> Any:
        out = operands_layout(Tracer(api.apply_ufunc(ufunc, self.node)), (self,))
        # (-w, abs(w) of a Python number are Python numbers)
        return weak_scalar(out, self._weak) if self._weak is not None else out
    return method


def _inplace(ufunc: np.ufunc) -> Callable[[Any, Any], Any]:
    """``x op= y``: NumPy's ``ufunc(x, y, out=x)``. The result is cast back to x's dtype with
    the same_kind rule and written into x's memory, so every view and name of that memory
    sees it (an argument's final value is written back to the caller's array)."""
    def method(self: "Tracer", other: Any) -> Any:
        if self._outside_its_trace():     # (h += 1 of a constant kept by the user's cache)
            self._write(self._node)       # (refused there, by name)
        # A 0-d value that is not a view, an array the function made (``np.zeros(())``,
        # ``np.array(v)``, copies of 0-d arrays) or a 0-d array argument is, in NumPy, a
        # NumPy *scalar* (``s = x.sum()``, ``x[0]``, ufuncs of 0-d values, a NumPy scalar
        # argument). Scalars are immutable: ``s += 0.5`` rebinds s to ``s + 0.5``
        # (promoting, broadcasting, and without ndarray.__pow__'s fast paths), with none of
        # the array rules below (``Buffer.zero_d``).
        scalar = self._is_numpy_scalar()
        if ufunc is np.matmul:
            result = self.__matmul__(other)
        elif ufunc is np.power and not complex_values.is_complex(other):
            try:
                result = Tracer(api.power(self.node, unwrap(other), operator=not scalar))
            except ValueError:
                # NumPy checks the cast of the loop's output into x before running the loop,
                # so ``bool_array **= -1`` is a casting TypeError, not the loop's ValueError
                # about negative integer powers.
                loop_out = np.power.resolve_dtypes(
                    (self.node.dtype, dtype_key(unwrap(other)), None))[2]
                if not scalar and not np.can_cast(loop_out, self.node.dtype, "same_kind"):
                    raise api.output_cast_error(np.power, loop_out,
                                                self.node.dtype) from None
                raise
        else:
            result = _binary(ufunc)(self, other)
        if result is NotImplemented or scalar:
            return result
        if isinstance(result, complex_values.ComplexTracer):
            raise api.output_cast_error(ufunc, result.dtype, self.node.dtype)
        if not np.can_cast(result.node.dtype, self.node.dtype, casting="same_kind"):
            raise api.output_cast_error(ufunc, result.node.dtype, self.node.dtype)
        if result.node.shape != self.node.shape:
            # NumPy writes the result into x, so it cannot grow x by broadcasting.
            raise ValueError(with_location(
                f"non-broadcastable output operand with shape {shape_str(self.node.shape)} "
                f"doesn't match the broadcast shape {shape_str(result.node.shape)}"))
        self._write(api.astype(result.node, self.node.dtype)
                    if result.node.dtype != self.node.dtype else result.node)
        return self
    return method


def is_scalar_memory(buf: Buffer) -> bool:
    """Whether a 0-d value of ``buf`` (not a view) is a NumPy scalar rather than an ndarray
    (``Buffer.zero_d``; unmarked: an op's result is, an argument's is not)."""
    return buf.zero_d == "scalar" or (buf.zero_d is None and buf.argument is None)


def as_array_memory(t: "Tracer") -> "Tracer":
    """``t`` as NumPy's conversions make it an ndarray: itself when it is one (a view, an
    array, a 0-d array argument), else (a NumPy scalar) a new 0-d array of its value."""
    if not isinstance(t, Tracer) or t.node.ndim != 0 or t._path or \
            not is_scalar_memory(t._buf):
        return t
    return Tracer(t.node, buffer=Buffer(t.node, zero_d="array"))


_SYMBOLS = {np.add: "+", np.subtract: "-", np.multiply: "*", np.true_divide: "/",
            np.floor_divide: "//", np.remainder: "%", np.power: "**", np.bitwise_and: "&",
            np.bitwise_or: "|", np.bitwise_xor: "^", np.left_shift: "<<", np.right_shift: ">>",
            np.matmul: "@"}



_EQUAL, _NOT_EQUAL = _binary(np.equal), _binary(np.not_equal)


class Tracer:
    """A traced array. ``node`` is its graph node; shape and dtype are concrete."""

    __slots__ = ("_node", "_buf", "_path", "_version", "_ambiguous", "_trace", "_c_ordered",
                 "_interleaved", "_weak")
    __array_priority__ = 1000  # win over ndarray in mixed binary operators

    def __init__(self, node: Node, alias: str | None = None, *, buffer: Buffer | None = None,
                 path: tuple = (), ambiguous: bool = False):
        # ``buffer``: the NumPy memory this value lives in (``trace/buffers.py``), new unless
        # given; ``alias`` names the caller's array when that memory is an argument's.
        # ``path``: the views from the buffer's base to this value. ``ambiguous``: a view
        # that NumPy makes a view or a copy depending on the caller's memory layout (a
        # reshape of an argument), which cannot be written through.
        if not isinstance(node, Node):   # (the user's type(x)(...): np.ndarray(shape) in NumPy)
            raise UnsupportedOperationError(with_location(
                "calling the type of a traced value (type(x)(...), which is np.ndarray or a "
                "NumPy scalar type in NumPy) is not supported by tracearray; use np.empty, "
                "np.zeros or np.float64(...) by name"))
        self._buf = buffer if buffer is not None else Buffer(node, alias)
        self._path = path
        self._node = node
        self._version = self._buf.version
        self._ambiguous = ambiguous
        # "C" / "F": np.ascontiguousarray / asfortranarray of an argument (or of memory laid
        # out in a way the trace does not model): so ordered, a view of it or a copy
        self._c_ordered: str | None = None
        # a complex value's part NumPy holds interleaved with the other (``z.real`` of a value
        # whose parts the trace keeps apart): its strides are twice its memory's
        self._interleaved = False
        # float / int: a value NumPy has as a Python float or int (a random draw without a
        # size), weakly typed in promotion (NEP 50: float32 array * it stays float32)
        self._weak: type | None = None
        self._trace = context.current()   # None outside a trace (tests of the tracer itself)
        if buffer is None and alias is not None and node.op == "input":
            # an argument's memory: results NumPy lays out by it (``operands_layout``)
            self._buf.from_arguments = frozenset((node.attr("index"),))

    def _permuted(self) -> bool:
        """Whether this value's memory is laid out out of C's order as far as the trace
        knows (a layout it does not model, or a transposed view), an argument's taken as C."""
        if self._c_ordered is not None:
            return self._c_ordered == "F" and sum(n > 1 for n in self._node.shape) > 1
        return not self._buf.layout_known or buffers.permuted(self._buf.node.shape, self._path)

    @property
    def node(self) -> Node:
        """The current value (the views of the path replayed after a write to the buffer).
        Every operation on a tracer reads it, so this is where one used after its trace
        ended is caught."""
        if self._trace is not None and self._trace.ended:
            return self._after_its_trace()
        buf = self._buf
        if buf.poisoned is not None:
            raise _poisoned(self)
        if self._version != buf.version:
            if self._ambiguous:
                raise _ambiguous_read(self)
            self._node = buffers.replay(buf.node, self._path)
            self._version = buf.version
        return self._node

    def _after_its_trace(self) -> Node:
        """The value of a tracer used after its trace ended (kept by the user's cache:
        ``functools.cache`` of a helper making a window, ``_MEMO[n] = np.eye(n)``): a value
        made from constants alone is that constant (in a later trace, a constant of it;
        outside one, np.asarray of it is the array); anything else was never computed."""
        buf = self._buf
        node = self._node if self._version == buf.version else \
            buffers.replay(buf.node, self._path)
        known = known_value(node)
        if known is None or buf.poisoned is not None:
            raise _escaped(self)
        if context.current() is not None:
            return constant(np.asarray(known))
        return node

    def _view(self, node: Node, ambiguous: bool = False) -> "Tracer":
        """A NumPy view of this value (``node``: movement ops of ``self.node``): shares its
        memory, so writes through either are seen by both."""
        path = buffers.movement_path(self.node, node)
        if path is None:   # not a view after all (a copy was made): new memory
            return Tracer(node)
        if self._is_numpy_scalar():
            # a NumPy scalar has no memory to share: its reshape, s[None], ravel() are new
            # arrays (writes into them leave s as it was)
            return Tracer(node, buffer=Buffer(node, zero_d="array"))
        out = Tracer(node, buffer=self._buf, path=self._path + path,
                     ambiguous=self._ambiguous or ambiguous)
        out._interleaved = self._interleaved
        return out

    def _layout(self) -> np.ndarray | None:
        """The strides NumPy gives this view (a shadow array), or None for an argument's
        memory, whose layout is the caller's, and for memory NumPy lays out by a permuted
        operand's layout (``Buffer.layout_known``)."""
        if self._buf.argument is not None or not self._buf.layout_known:
            return None
        return self._shadow()

    def _shadow(self) -> np.ndarray:
        """This view's layout as NumPy gives it for C-contiguous memory (``buffers.shadow``;
        a complex value's interleaved part every other item)."""
        arr = buffers.shadow(self._buf.node.shape, self._path)
        if self._interleaved:
            arr = np.lib.stride_tricks.as_strided(arr, arr.shape,
                                                  tuple(2 * st for st in arr.strides))
        return arr

    def _write(self, new: Node) -> None:
        """This value's memory now holds ``new`` (same shape and dtype): carried up to the
        base through the views, so every view and name of the memory sees it."""
        buf = self._buf
        if self._trace is not None and self._trace.ended:
            # (a constant kept by the user's cache: the traces that read it hold its value)
            raise UnexpectedTracerError(with_location(
                "a constant that a compiled function made while tracing and the program kept "
                "(a functools.cache or memo of it) cannot be changed in place: the compiled "
                "code holds its value; copy it first (np.array(h)) or make it outside the "
                "compiled function"))
        if not buf.writeable:
            raise ValueError(with_location("assignment destination is read-only"))
        ro = buffers.readonly_step(self._path)
        if ro is not None:
            raise ValueError(with_location(
                f"assignment destination is read-only (a view made by {ro.op}, which NumPy "
                f"returns read-only)"))
        if self._ambiguous:
            if buf.argument is None:
                # memory of the function's own: the view becomes memory of its own with the
                # write (a copy's semantics), and the memory it viewed can no longer be used
                # (as a view's, NumPy would have written it): nothing silently differs
                buf.poisoned = user_location() or "?"
                self._buf = Buffer(new, zero_d="array")
                self._buf.layout_known = new.ndim <= 1
                self._path, self._ambiguous = (), False
                self._node, self._version = new, 0
                return
            raise UnsupportedOperationError(with_location(
                "writing through a reshaped or raveled view of an argument (or "
                "np.ascontiguousarray / asfortranarray of one) is not supported by "
                "tracearray: NumPy makes it a view or a copy depending on the caller's "
                "memory layout, so whether the argument changes is not known when tracing; "
                "index the argument itself (x[...] = ...)"))
        buf.node = buffers.carry_up(buf.node, self._path, new)
        buf.version += 1
        self._node, self._version = new, buf.version
        state = self._trace
        if state is not None and buf.from_arguments and buf.reshaped:
            if state.assumed_c_layout is None:
                state.assumed_c_layout = user_location() or "?"
            state.assumed_c_inputs.update(buf.from_arguments)

    # --- properties -----------------------------------------------------------------
    def _set_shape(self, shape: Any) -> None:
        """``x.shape = s``: x itself becomes a reshape of its memory, where NumPy can make it
        one without a copy (NumPy's AttributeError otherwise)."""
        new = self.reshape(shape)
        if new._buf is not self._buf:
            raise AttributeError(with_location(
                "Incompatible shape for in-place modification. Use `.reshape()` to make a "
                "copy with the desired shape."))
        if new._ambiguous and not self._ambiguous:
            raise UnsupportedOperationError(with_location(
                "setting the shape of an argument (x.shape = ...) is not supported by "
                "tracearray: NumPy can do it in place or not depending on the caller's memory "
                "layout, which is not known when tracing; use x = x.reshape(...)"))
        self._path, self._node, self._version = new._path, new._node, new._version

    def _sizes(self) -> Node:
        """The node, for a read of its sizes as Python numbers: the trace notes it (code
        that reads sizes may branch on them, so the graph is not re-derived for other sizes:
        ``trace/resize.py``)."""
        context.note_sizes_read()
        return self.node

    shape = property(lambda self: self._sizes().shape, _set_shape)
    dtype = property(lambda self: self.node.dtype)
    ndim = property(lambda self: self.node.ndim)
    size = property(lambda self: self._sizes().size)
    itemsize = property(lambda self: self.node.dtype.itemsize)
    nbytes = property(lambda self: self._sizes().size * self.node.dtype.itemsize)
    T = property(lambda self: self._view(api.transpose(self.node)))
    mT = property(lambda self: self._view(api.swapaxes(self.node, -1, -2)))
    # Real arrays: real is the array itself (a view), imag a read-only zero array.
    # ``x.real = v`` writes x, as NumPy does; ``x.imag = v`` is NumPy's TypeError.
    real = property(lambda self: self, lambda self, v: self.__setitem__(Ellipsis, v))
    imag = property(lambda self: Tracer(api.full_like(self.node, 0),
                                        buffer=Buffer(api.full_like(self.node, 0),
                                                      writeable=False)),
                    lambda self, v: _no_imaginary_part())

    def __copy__(self) -> "Tracer":
        return self.copy()

    def __deepcopy__(self, memo: Any) -> "Tracer":
        return self.copy()

    @property
    def flags(self) -> "TracerFlags":
        return TracerFlags(self)

    @property
    def strides(self) -> tuple[int, ...]:
        """NumPy's strides for the same view of C-contiguous memory (divergence
        traced-layout-flags, as ``flags``)."""
        layout = self._shadow()
        return tuple(int(s) * self.node.dtype.itemsize for s in layout.strides)

    @property   # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance(x, np.ndarray) in the traced function: NumPy's answer (numpy_class)
        return numpy_class(self, sys._getframe(1))

    @property
    def flat(self) -> "FlatIter":
        return FlatIter(self)

    @flat.setter
    def flat(self, value: Any) -> None:
        # ``x.flat = v``: every element, in C order, from v's values repeated (NumPy's)
        FlatIter(self)[...] = value

    def __repr__(self) -> str:
        # never raises (debuggers, error messages): shape and dtype are the tracer's own
        dead = ", escaped its trace" if self._trace is not None and self._trace.ended else ""
        return f"Tracer({type_str(self._node)}{dead})"

    # --- formatting: values are not known while tracing -------------------------------
    def __format__(self, spec: str) -> str:
        v = self._known()
        if v is not None:
            return format(v, spec)   # ndarray.__format__: a 0-d value formats as its item
        value = self._staged_text("format()")
        if value is not None:   # (f"residual {res:.2e}": the value, staged as float() is)
            return format(value, spec)
        return self._unformattable(f"format() or an f-string with the spec {spec!r}" if spec
                                   else "format() or an f-string")

    def __str__(self) -> str:
        v = self._known()
        if v is not None:
            return str(v)
        value = self._staged_text("str()")
        if value is not None:
            return str(value)
        return self._unformattable("str() (or print)")

    def _staged_text(self, what: str) -> Any:
        """The NumPy scalar a 0-d value's text is made from, staged as float() is (a new
        value traces again, so the text is the call's); None where it cannot be."""
        from . import context
        state = context.current()
        if self.node.ndim == 0 and self.node.dtype.kind in "biuf" and \
                context.values_may_be_staged() and state.numpy_implementations == 0:
            return _staged_scalar(self.node, f"{what} of a value")
        return None

    def _unformattable(self, what: str) -> str:
        raise ConcretizationError(with_location(
            f"{what} of a traced array ({type_str(self.node)}) needs its values, which are "
            f"not known while tracing: the traced function runs once, on stand-ins, to record "
            f"the computation, and the values exist only when the compiled function runs. "
            f"Return the value and format it after the call; x.shape and x.dtype are known "
            f"(repr(x) shows them), and fallback='numpy' or calling the function uncompiled "
            f"runs it with NumPy's values."))

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes a Tracer does not define: an ndarray attribute is named
        # as unsupported, at the user's line (a NumPy implementation run on tracers may be the
        # one asking); anything else is a plain AttributeError, as for an ndarray.
        if not name.startswith("__") and hasattr(np.ndarray, name):
            raise UnsupportedAttributeError(with_location(
                f"ndarray.{name} is not supported by tracearray on traced values"))
        if name == "ptp":   # (NumPy 2's own words; hasattr(x, "ptp") is False, as in NumPy)
            raise AttributeError("`ptp` was removed from the ndarray class in NumPy 2.0. Use "
                                 "np.ptp(arr, ...) instead.")
        raise AttributeError(f"'numpy.ndarray' object has no attribute {name!r}")

    def __contains__(self, value: Any) -> bool:
        # NumPy's ``v in x``: (x == v).any(), a Python bool (known, or a value the data
        # decides: ConcretizationError, not the truth value of x's rows)
        return bool((self == value).any())

    def __len__(self) -> int:
        shape = self._sizes().shape
        if not shape:
            raise TypeError(with_location("len() of unsized object"))
        return shape[0]

    def __iter__(self):
        shape = self._sizes().shape
        if not shape:
            raise TypeError(with_location("iteration over a 0-d array"))
        return (self[i] for i in range(shape[0]))

    # --- concretization: Python control flow on traced values ---------------------------
    def _concrete(self, what: str) -> Any:
        raise ConcretizationError(with_location(
            f"{what} needs the concrete value of a traced array ({type_str(self.node)}), which "
            f"is only known when the compiled function runs. Python control flow cannot depend "
            f"on array values: use np.where(cond, a, b) for elementwise choices, or mark the "
            f"argument static with static_argnums / static_argnames."))

    # A value the function made from constants (np.arange(n), np.zeros(3), a loop variable
    # over them) and has not written traced data into is known: Python can use it.
    def _known(self) -> np.ndarray | None:
        return known_value(self.node)

    def __bool__(self) -> bool:
        v = self._known()
        if v is not None:
            return bool(v)
        size = self.node.size
        if size != 1:   # NumPy's errors (its shape decides, not its values)
            raise ValueError(with_location(
                "The truth value of an empty array is ambiguous. Use `array.size > 0` to "
                "check that an array is not empty." if size == 0 else
                "The truth value of an array with more than one element is ambiguous. Use "
                "a.any() or a.all()"))
        from . import context
        state = context.current()
        if state is not None and state.element_traces and state.element_decisions is not None:
            from .vectorize import element_branch   # (np.vectorize: both ways, then a select)
            return element_branch(self)
        if not context.values_may_be_staged():
            return self._concrete("bool() (e.g. `if` or `while` on an array)")
        # a branch on the data (if x.any():, while err > tol:)
        return bool(_staged(api.cast(self.node, np.dtype(bool)),
                            "the truth value of a Python branch (bool())"))

    def _staged_python_scalar(self, convert: Callable[[Any], Any], what: str) -> Any:
        """``convert`` (int, float, bool or the NumPy scalar's .item) of this one-element
        array's value, staged (``_staged_scalar``): a value the data decides, found by a probe
        at each call, each distinct value a trace of its own (no new compile: the traced
        graph takes it as a constant of the same kernels)."""
        from . import context
        dt, state = self.node.dtype, context.current()
        if dt.kind == "b" and self.node.size == 1 and state is not None and \
                state.element_traces and state.element_decisions is not None:
            from .vectorize import element_branch   # (int(s > 0) in np.vectorize: a branch)
            return convert(np.bool_(element_branch(self)))
        # (NumPy's own implementations of its functions stage integers only: one that takes
        # the floats of an array one by one, np.array2string, is refused by name instead)
        if self.node.size == 1 and dt.kind in "biuf" and context.values_may_be_staged() and \
                (dt.kind in "bi" or dt.kind == "u" and dt.itemsize < 8 or
                 state.numpy_implementations == 0) and \
                not _numpy_stores_element():
            return convert(_staged_scalar(self.node, f"{what} of a value"))
        return self._concrete(_scalar_conversion(what))

    def __int__(self) -> int:
        v = self._known()
        if v is not None:
            return int(v)
        _scalar_of_ndim(self.node, "int()")
        return self._staged_python_scalar(int, "int()")

    def __float__(self) -> float:
        v = self._known()
        if v is not None:
            return float(v)
        _scalar_of_ndim(self.node, "float()")
        return self._staged_python_scalar(float, "float()")

    def __complex__(self) -> complex:
        v = self._known()
        if v is not None:
            return complex(v)
        _scalar_of_ndim(self.node, "complex()")
        return self._staged_python_scalar(complex, "complex()")

    def __index__(self) -> int:
        v = self._known()
        if v is not None:
            return operator.index(v[()]) if v.ndim == 0 else operator.index(v)
        from . import context
        if self.node.ndim == 0 and self.node.dtype.kind in "iu" and \
                context.values_may_be_staged():
            # a size the data decides (np.zeros(np.count_nonzero(m)), range(n)); a uint64 by
            # its bits (past 2**63 it is no int64)
            return int(_staged_scalar(self.node, "an integer used as an index or size"))
        return self._concrete("using an array as an index or size")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        v = self._known()
        if v is not None:
            out = np.array(v, dtype=dtype)
            if self._outside_its_trace():   # (NumPy's writes into it, out=h, would be lost)
                out.flags.writeable = False
            return out
        # While tracing, np.asarray & co. pass tracers through, so this is NumPy's C code
        # asking for the data: most often an assignment into a NumPy array.
        code = _user_code_line()
        if _numpy_stores_element():
            return self._concrete(_ASSIGNMENT_INTO_NUMPY)
        scalar_type = _SCALAR_TYPE_CALL.search(code)
        state = context.current()
        if self.node.size == 1 and self.node.dtype.kind in "biuf" and \
                context.values_may_be_staged() and state.numpy_implementations == 0:
            # NumPy's C code asks for one value: np.float32(x.sum()), x.dtype.type(s),
            # np.float32([x[0], x[1]]): the value, staged as float() is; NumPy casts it to the
            # type asked for, with its own rounding and warnings
            what = f"np.{scalar_type.group(1)}()" if scalar_type else "a NumPy conversion"
            value = _staged_scalar(self.node, f"{what} of a value")
            return np.array(value).reshape(self.node.shape)
        if scalar_type:
            return self._concrete(
                f"np.{scalar_type.group(1)}(...) of a traced value (a NumPy scalar type "
                f"converts concrete data; x.astype(np.{scalar_type.group(1)}) is the traced "
                f"way: a 0-d array stands for the scalar)")
        method = _UFUNC_METHOD_OF_LIST.search(code)
        if method:
            return self._concrete(
                f"converting to a NumPy array (a ufunc's .{method.group(1)}() of a list or "
                f"tuple of traced arrays: NumPy converts the list itself before tracearray "
                f"sees the arrays; stack them first: .{method.group(1)}(np.stack([...])))")
        listed = re.search(r"np\.(\w+)\(\s*[\[(]", code)
        if listed:
            return self._concrete(
                f"converting to a NumPy array (np.{listed.group(1)} of a list or tuple "
                f"holding traced values? NumPy converts the list itself before tracearray "
                f"sees the values; make it one traced array first: "
                f"np.{listed.group(1)}(np.array([...])))")
        if re.search(r"\w\s*\[", code):
            return self._concrete("converting to a NumPy array (indexing a NumPy array with a "
                                  "traced index? NumPy's own indexing needs the index's "
                                  "values: pass the array in as an argument, or make it a "
                                  "module-level global, and it is traced)")
        return self._concrete("converting to a NumPy array (a NumPy function or method that "
                              "needs the data itself)")

    def item(self, *args: Any) -> Any:
        v = self._known()
        if v is not None:
            return v.item(*args)
        if len(args) == 1 and isinstance(args[0], (int, np.integer)) and \
                not -self.size <= args[0] < self.size:   # (NumPy's error comes first)
            raise IndexError(with_location(
                f"index {args[0]} is out of bounds for size {self.size}"))
        if not args and self.size != 1:
            raise ValueError(with_location(
                "can only convert an array of size 1 to a Python scalar"))
        if not args or self.size == 1 and isinstance(args[0], (int, np.integer)):
            return self._staged_python_scalar(lambda v: v.item(), ".item()")
        return _item_at(self, args)

    def __delitem__(self, key: Any) -> None:
        raise ValueError(with_location("cannot delete array elements"))

    def tolist(self) -> Any:
        v = self._known()
        if v is not None:
            return v.tolist()
        return self._concrete(".tolist()")

    def __hash__(self) -> int:
        """A NumPy scalar's hash (an element of a traced array: ``weights[c]`` for ``c`` in
        it, ``y[0] in {1, 2}``): its value's, staged as ``int()`` of it is; arrays, 0-d ones
        included, are unhashable, as in NumPy."""
        if self.node.ndim == 0 and self.node.dtype.kind in "biuf" and \
                is_scalar_memory(self._buf) and not self._path:
            v = self._known()
            if v is not None:
                return hash(np.asarray(v)[()])
            # (staged directly: a dict store of the user's, counts[c] = ..., is no NumPy
            # element store, which _staged_python_scalar refuses)
            return hash(_staged_scalar(self.node, "hash() of a value"))
        raise TypeError(with_location("unhashable type: 'numpy.ndarray'"))

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
    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        if other is None or isinstance(other, (str, bytes)):
            return _no_element_equal(self, False)   # (NumPy: elementwise, never equal)
        return _EQUAL(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        if other is None or isinstance(other, (str, bytes)):
            return _no_element_equal(self, True)
        return _NOT_EQUAL(self, other)
    __neg__, __pos__ = _unary(np.negative), _unary(np.positive)
    __abs__, __invert__ = _unary(np.absolute), _unary(np.invert)

    def __pow__(self, other: Any, mod: Any = None) -> Any:
        if mod is not None:
            raise unsupported("pow() with a modulus")
        if complex_values.is_complex(other):
            return complex_values.apply_ufunc(np.power, "__call__", (self, other), {})
        if self._weak is not None or isinstance(other, Tracer) and other._weak is not None:
            return _binary(np.power)(self, other)   # (a Python number's **: weak)
        # (a NumPy scalar's ** is np.power: ndarray.__pow__'s fast paths are an array's)
        return operands_layout(Tracer(api.power(self.node, unwrap(other),
                                                operator=not self._is_numpy_scalar())),
                               (self, other))

    __ipow__, __imatmul__ = _inplace(np.power), _inplace(np.matmul)

    def __rpow__(self, other: Any) -> Any:
        if complex_values.is_complex(other):
            return complex_values.apply_ufunc(np.power, "__call__", (other, self), {})
        if self._weak is not None:
            return _binary(np.power, True)(self, other)
        return operands_layout(Tracer(api.apply_ufunc(np.power, unwrap(other), self.node)),
                               (other, self))

    def __matmul__(self, other: Any) -> Any:
        if complex_values.is_complex(other) or self._outside_its_trace():
            return np.matmul(self, other)
        return Tracer(api.matmul(self.node, unwrap(other)))

    def __rmatmul__(self, other: Any) -> Any:
        if complex_values.is_complex(other) or self._outside_its_trace():
            return np.matmul(other, self)
        return Tracer(api.matmul(unwrap(other), self.node))

    def __divmod__(self, other: Any) -> Any:
        return self // other, self % other

    def __rdivmod__(self, other: Any) -> Any:
        return other // self, other % self

    def __getitem__(self, key: Any) -> "Tracer":
        context.note_index_key(key)
        mask = _traced_mask(key)
        if mask is not None:   # x[mask]: a size known only at run time (trace/selection.py)
            from .selection import select
            return select(self.node, *mask)
        node = api.getitem(self.node, unwrap(key))
        keys = key if isinstance(key, tuple) else (key,)
        if node is self.node and self.node.ndim == 0 and keys == ():
            return Tracer(node)   # y[()] of a 0-d array: NumPy's scalar (a copy), no view
        if node is self.node:
            return self._view(node)   # x[...], x[:]: a view of all of x
        if any(isinstance(k, (bool, np.bool_)) or (isinstance(k, (Tracer, np.ndarray)) and (
                k.dtype == np.dtype(bool) or (k.ndim == 0 and not (
                    isinstance(k, Tracer) and k._is_numpy_scalar())))) for k in keys):
            # advanced indexing copies (x[True], x[x != 0] of a 0-d x, x[np.array(1)] too;
            # a NumPy integer scalar is a basic index, a view)
            return Tracer(node)
        if node.op == "gather" and not buffers.scalar_gather(node):
            out = Tracer(node)   # advanced indexing copies
            if keys and isinstance(keys[0], (slice, type(Ellipsis), type(None))) and \
                    sum(n > 1 for n in node.shape) > 1:
                # (x[:, idx]: NumPy lays the result out with the indexed axis first in
                # memory, not C's order: a layout the trace does not model)
                out._buf.layout_known = False
            return out
        # (x[k] of a traced NumPy integer k: basic indexing, a view at k)
        if node.ndim == 0 and not any(k is Ellipsis for k in keys):
            return Tracer(node)   # integers only: NumPy returns a scalar (a copy), not a view
        return self._view(node)

    def _is_numpy_scalar(self) -> bool:
        """Whether this is a NumPy scalar (immutable), not an array: a 0-d value with no
        memory of an array (``Buffer.zero_d``)."""
        return self.node.ndim == 0 and not self._path and is_scalar_memory(self._buf)

    def __setitem__(self, key: Any, value: Any) -> None:
        from .indexing import setitem
        context.note_index_key(key)
        if self._is_numpy_scalar():
            raise TypeError(with_location(f"'numpy.{self.node.dtype.name}' object does not "
                                          f"support item assignment"))
        if self.node.dtype.kind in "iuf" and _holds_python_complex(value):
            # NumPy converts a Python complex element by element with float() / int()
            kind = "float() argument must be a string or a real number" \
                if self.node.dtype.kind == "f" else \
                "int() argument must be a string, a bytes-like object or a real number"
            raise TypeError(with_location(f"{kind}, not 'complex'"))
        if complex_values.is_complex(value):
            # NumPy casts the complex values into this real array: the real parts, with a
            # ComplexWarning
            value = complex_values.discard_imaginary(
                complex_values.as_complex(value), self.node.dtype)
        _check_scalar_fits(value, self.node.dtype, key)
        state = context.current()
        joining = buffers.JOIN_REGIONS.set(self._buf.argument is None and
                                           (state is None or state.joins))
        try:
            self._write(setitem(self.node, unwrap(key), unwrap(value)))
        finally:
            buffers.JOIN_REGIONS.reset(joining)

    def fill(self, value: Any) -> None:
        self[...] = value

    def put(self, indices: Any, values: Any, mode: str = "raise") -> None:
        np.put(self, indices, values, mode)

    def nonzero(self) -> tuple["Tracer", ...]:
        return np.nonzero(self)

    # --- NumPy protocols ----------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if self._outside_its_trace():   # (a constant kept by the user's cache, used by NumPy)
            return getattr(ufunc, method)(*_as_arrays(inputs), **_as_arrays(kwargs))
        from . import dispatch
        return dispatch.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        if self._outside_its_trace():
            return func(*_as_arrays(args), **_as_arrays(kwargs))
        from . import dispatch
        return dispatch.function(func, args, kwargs)

    def _outside_its_trace(self) -> bool:
        """Whether this tracer's trace ended and none runs now: a constant kept by the
        user's cache (``_after_its_trace``), which NumPy's functions then take as the array
        it holds."""
        return self._trace is not None and self._trace.ended and context.current() is None

    # --- methods: conversion and copies ---------------------------------------------------
    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> "Tracer":
        if dtype is not None and np.dtype(dtype).kind == "c":   # to complex: a zero imaginary part
            if not np.can_cast(self.node.dtype, dtype, casting=casting):
                raise TypeError(with_location(
                    f"Cannot cast array data from {self.node.dtype!r} to {np.dtype(dtype)!r} "
                    f"according to the rule {casting!r}"))
            # (new memory, as NumPy's astype makes: not a view of this array's)
            dt = np.dtype(dtype)
            re = self._new_memory(self.node, order).astype(real_dtype(dt), copy=False)
            return complex_values.ComplexTracer(re, np.zeros_like(re))
        dt = check_dtype(dtype, "astype")
        if not np.can_cast(self.node.dtype, dt, casting=casting):
            raise TypeError(with_location(
                f"Cannot cast array data from {self.node.dtype!r} to {dt!r} according to the "
                f"rule {casting!r}"))
        if not copy and dt == self.node.dtype:
            return self._as_order(order)   # NumPy returns the array itself, if so laid out
        return self._new_memory(api.astype(self.node, dtype), order)

    def _as_order(self, order: Any, never_copy: bool = False) -> "Tracer":
        """This value as NumPy lays it out for ``order`` ("C", "F", "A"; np.ascontiguousarray,
        np.asfortranarray, np.asarray(x, order=...), astype(copy=False)): itself where its
        memory already is so, else a copy. An argument's memory is laid out by the caller: a
        view that cannot be written through, nor read after a write (``ambiguous``, as a
        reshape of it), unless it holds one element at most."""
        if order not in ("C", "F", "A") or self.node.size <= 1 or self._is_numpy_scalar():
            return self
        layout = self._layout()
        if layout is None and buffers.readonly_step(self._path) is not None and \
                self._buf.layout_known:
            stand_in = self._shadow()   # (a diagonal or a broadcast: as for _reshaped)
            if not (stand_in.flags.c_contiguous or stand_in.flags.f_contiguous):
                layout = stand_in
        if layout is None:
            out = Tracer(self.node, buffer=self._buf, path=self._path, ambiguous=True)
            out._c_ordered = order if order in ("C", "F") else None
            return out
        flags = layout.flags
        ok = flags.c_contiguous if order == "C" else flags.f_contiguous if order == "F" \
            else flags.c_contiguous or flags.f_contiguous
        if ok:
            return self
        if never_copy:
            raise ValueError(with_location(
                "Unable to avoid copy while creating an array as requested."))
        return self._new_memory(self.node, "F" if order == "F" else "C")

    def copy(self, order: str = "C") -> "Tracer":
        return self._new_memory(self.node, order)   # same value, new memory

    def _new_memory(self, node: Node, order: str = "K") -> "Tracer":
        """``node`` in new memory of the kind this value's is: an ndarray's copy or astype
        is an ndarray (0-d too), a NumPy scalar's a scalar; laid out in ``order``: "C", "F"
        (a layout the trace does not model), else as this value's."""
        out = Tracer(node, buffer=Buffer(node, zero_d=None if self._is_numpy_scalar()
                                         else "array"))
        if order == "C":
            return out
        if order == "F":
            out._buf.layout_known = sum(n > 1 for n in node.shape) <= 1
            return out
        return inherit_layout(out, self)

    def view(self, dtype: Any = None, type: Any = None) -> "Tracer":
        if isinstance(dtype, builtins_type) and issubclass(dtype, np.ndarray):
            dtype, type = None, dtype       # x.view(np.ma.MaskedArray): NumPy's type form
        if type is not None:
            raise unsupported(f"ndarray.view({getattr(type, '__name__', type)})",
                              "ndarray subclasses (numpy.ma's masked arrays, np.matrix, "
                              "np.recarray) are not traced")
        if dtype is None:
            return self._view(self.node)
        dt = np.dtype(dtype)
        if dt.kind != "c" and check_dtype(dtype, "view") == self.node.dtype:
            return self._view(self.node)
        if bitcast_allowed(self.node.dtype, dt):     # the same bytes read as dt: a view
            return self._view(make("bitcast", [self.node], dtype=dt.str))
        from .memory_views import view_real   # another item size, or complex items: a view too
        return view_real(self, dt)

    def conj(self) -> "Tracer":
        # ndarray.conj of a real array returns the array itself (not np.conjugate's copy,
        # which turns bool into int8).
        return self

    conjugate = conj

    # --- methods: reductions ---------------------------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,  # type: ignore[no-untyped-def]
            where=True):
        return reduction("sum", self, axis, dtype, out, keepdims, initial, where)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=np._NoValue,  # type: ignore[no-untyped-def]
             where=True):
        return reduction("prod", self, axis, dtype, out, keepdims, initial, where)

    def max(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):  # type: ignore[no-untyped-def]
        return reduction("max", self, axis, None, out, keepdims, initial, where)

    def min(self, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):  # type: ignore[no-untyped-def]
        return reduction("min", self, axis, None, out, keepdims, initial, where)

    def any(self, axis=None, out=None, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return reduction("any", self, axis, None, out, keepdims, np._NoValue, where)

    def all(self, axis=None, out=None, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        return reduction("all", self, axis, None, out, keepdims, np._NoValue, where)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=True):  # type: ignore[no-untyped-def]
        o = _out_array(out)
        if o is not None and dtype is None and where is True:
            # NumPy's _mean: the sum (float64 for integers and bool, float32 for float16)
            # stored into out's dtype, then divided there (mean of int8 into int8 wraps the
            # sum first)
            kind = self.dtype.kind
            acc = np.float64 if kind in "biu" else np.float32 if self.dtype == np.float16 \
                else None
            if acc is None and np.can_cast(self.dtype, o.dtype, "same_kind"):
                acc = o.dtype   # (NumPy's sum into out= without dtype= runs in out's dtype)
            total = self.sum(axis=axis, dtype=acc, keepdims=keepdims).astype(o.dtype)
            n = self.size // max(total.size, 1) if self.size else 0
            return store_out("mean", np.true_divide(total, n).astype(o.dtype), out, exact=True)
        return store_out("mean", Tracer(api.mean(self.node, axis, dtype, _keep(keepdims), unwrap(check_where(where)))), out, exact=True)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,  # type: ignore[no-untyped-def]
            mean=np._NoValue, correction=np._NoValue):
        return store_out("var", Tracer(api.var(self.node, axis, dtype, _ddof(ddof, correction), _keep(keepdims),
                              unwrap(check_where(where)), unwrap(mean))), out, exact=True)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,  # type: ignore[no-untyped-def]
            mean=np._NoValue, correction=np._NoValue):
        # (NumPy's last step is np.sqrt into out=: its same_kind rule, not a reduction's)
        return store_out("np.sqrt", Tracer(api.std(self.node, axis, dtype, _ddof(ddof, correction), _keep(keepdims),
                              unwrap(check_where(where)), unwrap(mean))), out, "same_kind",
                         exact=True)

    def argmax(self, axis=None, out=None, *, keepdims=False):  # type: ignore[no-untyped-def]
        check_index_out(out)
        return store_out("argmax", Tracer(api.arg_reduce("argmax", self.node, axis, _keep(keepdims))), out,
                         exact=True)

    def argmin(self, axis=None, out=None, *, keepdims=False):  # type: ignore[no-untyped-def]
        check_index_out(out)
        return store_out("argmin", Tracer(api.arg_reduce("argmin", self.node, axis, _keep(keepdims))), out,
                         exact=True)

    def cumsum(self, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        dtype = _loop_dtype(dtype, out, self)
        return store_out("cumsum", Tracer(api.scan("cumsum", self.node, axis, dtype)), out, exact=True)

    def cumprod(self, axis=None, dtype=None, out=None):  # type: ignore[no-untyped-def]
        dtype = _loop_dtype(dtype, out, self)
        return store_out("cumprod", Tracer(api.scan("cumprod", self.node, axis, dtype)), out, exact=True)

    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):  # type: ignore[no-untyped-def]
        return np.trace(self, offset, axis1, axis2, dtype, out)

    # --- methods: elementwise -------------------------------------------------------------
    def clip(self, min=None, max=None, out=None, **kw):  # type: ignore[no-untyped-def]
        return np.clip(self, min, max, out, **kw)

    def round(self, decimals: int = 0, out: Any = None) -> "Tracer":
        return np.round(self, decimals, out)

    def __round__(self, ndigits: Any = None) -> Any:
        # NumPy's scalars round (a 0-d result stands for one); its arrays do not
        if self.ndim:
            raise TypeError(with_location("type numpy.ndarray doesn't define __round__ method"))
        if ndigits is None:      # a Python int: it needs the value
            return int(np.round(self))
        return np.round(self, ndigits)

    # --- methods: shape -----------------------------------------------------------------
    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> "Tracer":
        return self._reshape(shape, order, copy)

    def _reshape(self, shape: tuple, order: str = "C", copy: Any = None,
                 layout: Any = _OWN_LAYOUT) -> "Tracer":
        """``reshape``, deciding view or copy by ``layout`` (a shadow array, None when not
        known) where it is given: a complex value's parts move as the complex array does."""
        if not shape:
            raise TypeError(with_location("reshape() takes exactly 1 argument (0 given)"))
        if len(shape) == 1:
            sizes = shape[0]
            if isinstance(sizes, Tracer) and sizes.ndim == 1:
                known = sizes._known()      # an array the function made, e.g. np.array([2, 3])
                sizes = known if known is not None else sizes._concrete("reshape's shape")
            fix_captured_value(sizes)       # (x.reshape(self.shape): the trace's shape)
            if isinstance(sizes, np.ndarray) and sizes.ndim == 1:
                shape = tuple(sizes.tolist())
            elif isinstance(sizes, (tuple, list)):
                shape = tuple(sizes)
        for n in shape:   # (NumPy's error for a float or another non-integer size)
            if not isinstance(n, (Tracer, Node)):
                try:
                    operator.index(n)
                except TypeError as e:
                    raise TypeError(with_location(str(e))) from None
        out = self._reshaped(api.reshape(self.node, shape, order), ravel=False, order=order,
                             layout=layout)
        if copy is False and out._buf is not self._buf:
            raise ValueError(with_location("Unable to avoid creating a copy while reshaping."))
        if copy is False and out._ambiguous and not self._ambiguous:
            raise UnsupportedOperationError(with_location(
                "reshape(copy=False) of an argument (or memory laid out as one) is not "
                "supported by tracearray: whether NumPy can avoid the copy depends on the "
                "caller's memory layout, unknown when tracing"))
        return out._new_memory(out.node) if copy is True and out._buf is self._buf else out

    def _reshaped(self, node: Node, ravel: bool, order: str = "C",
                  layout: Any = _OWN_LAYOUT) -> "Tracer":
        """A reshape (or ravel) of this value: a view when NumPy makes one, else new memory.
        For an argument's memory NumPy's choice depends on the caller's strides: the result
        is a view that cannot be written through, unless only size-1 axes change."""
        if node is self.node and not ravel:
            return self._view(node)
        if layout is _OWN_LAYOUT:
            layout = self._layout()
            if layout is None and buffers.readonly_step(self._path) is not None and \
                    self._buf.layout_known and not _stays_a_view(self._shadow(), node, ravel,
                                                                 order):
                # a diagonal, a real broadcast or overlapping windows of an argument: a copy
                # for the C-ordered stand-in is a copy whatever the argument's strides
                layout = self._shadow()
        if layout is None and not ravel and self._buf.argument is not None and \
                len(self._buf.node.shape) <= 1:
            # a reshape of a view of a vector argument: whether it needs a copy does not
            # depend on the vector's stride (every stride scales by it), so C's answer holds
            layout = buffers.shadow(self._buf.node.shape, self._path)
        if layout is None:
            # (ravel is a view only of contiguous memory: of a strided vector, x[::2], or a
            # column, X[:, :1], NumPy copies, where reshape(-1) views)
            if (not ravel and [n for n in node.shape if n != 1] ==
                    [n for n in self.node.shape if n != 1]) or self.node.size <= 1:
                return self._view(node)
            return self._view(node, ambiguous=True)
        is_view = _stays_a_view(layout, node, ravel, order)
        out = self._view(node) if is_view else Tracer(node)
        if not is_view and order == "F" and sum(n > 1 for n in node.shape) > 1:
            out._buf.layout_known = False   # NumPy's copy is Fortran-ordered
        if self._buf.from_arguments and sum(n > 1 for n in self.node.shape) > 1:
            # decided for memory laid out as C-ordered arguments make it: a later write to
            # it, or to the copy, depends on that (the call checks those arguments' layout)
            self._buf.reshaped = out._buf.reshaped = True
            out._buf.from_arguments = out._buf.from_arguments | self._buf.from_arguments
        return out

    def transpose(self, *axes: Any) -> "Tracer":
        if not axes:
            return self._view(api.transpose(self.node, None))
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = axes[0]   # ndarray.transpose((1, 0)), (None), (np.argsort(axis))
        return self._view(api.transpose(self.node, None if axes is None else tuple(axes)))

    def swapaxes(self, a: int, b: int) -> "Tracer":
        return self._view(api.swapaxes(self.node, a, b))

    def squeeze(self, axis: Any = None) -> "Tracer":
        return self._view(api.squeeze(self.node, axis))

    def ravel(self, order: str = "C") -> "Tracer":
        return self._reshaped(api.ravel(self.node, order), ravel=True, order=order)

    def flatten(self, order: str = "C") -> "Tracer":
        return Tracer(api.ravel(self.node, order))

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "Tracer":
        return self._view(api.diagonal(self.node, offset, axis1, axis2))

    def repeat(self, repeats: Any, axis: Any = None) -> "Tracer":
        return np.repeat(self, repeats, axis)

    def take(self, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
             ) -> "Tracer":
        return np.take(self, indices, axis, out, mode)

    def choose(self, choices: Any, out: Any = None, mode: str = "raise") -> "Tracer":
        return np.choose(self, choices, out, mode)

    def compress(self, condition: Any, axis: Any = None, out: Any = None) -> "Tracer":
        return np.compress(condition, self, axis, out)

    # Sorting in place: the sorted value is written into this array's memory (an argument's
    # too: the call writes it back, Graph.updates), as ndarray.sort does.
    def sort(self, axis: Any = -1, kind: Any = None, order: Any = None, *,
             stable: Any = None) -> None:
        if axis is None:
            raise TypeError(with_location("'NoneType' object cannot be interpreted as an "
                                          "integer"))
        self[...] = np.sort(self, axis, kind, order, stable=stable)

    def argsort(self, axis: Any = -1, kind: Any = None, order: Any = None, *,
                stable: Any = None) -> "Tracer":
        return np.argsort(self, axis, kind, order, stable=stable)

    def partition(self, kth: Any, axis: Any = -1, kind: str = "introselect",
                  order: Any = None) -> None:
        if axis is None:
            raise TypeError(with_location("'NoneType' object cannot be interpreted as an "
                                          "integer"))
        self[...] = np.partition(self, kth, axis, kind, order)

    def argpartition(self, kth: Any, axis: Any = -1, kind: str = "introselect",
                     order: Any = None) -> "Tracer":
        return np.argpartition(self, kth, axis, kind, order)

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> "Tracer":
        return np.searchsorted(self, v, side, sorter)

    def dot(self, other: Any, out: Any = None) -> "Tracer":
        return store_out("dot", np.dot(self, other), out)   # (np.dot's rules, any rank)

    def __array_namespace__(self, *, api_version: Any = None) -> Any:
        return np


def _noting_integer_arguments(method: Callable) -> Callable:
    """``method`` of ``Tracer``, noting integers its arguments give to parameters that may be
    compared with sizes (``context.note_integer_arguments``)."""
    parameters = inspect.signature(method)

    def noting(*args: Any, **kwargs: Any) -> Any:
        context.note_integer_arguments(parameters, args, kwargs)
        return method(*args, **kwargs)
    functools.update_wrapper(noting, method)
    return noting


for _name, _method in list(vars(Tracer).items()):
    if not _name.startswith("_") and inspect.isfunction(_method):
        setattr(Tracer, _name, _noting_integer_arguments(_method))


def _complex_dtype_as_function(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``x.sum(dtype=np.complex64)`` of a real array: NumPy's function of the same name,
    which takes complex values (trace/complex.py); the method's own path is real."""
    function = getattr(np, name)

    @functools.wraps(method)
    def wrapped(self: Tracer, *args: Any, **kwargs: Any) -> Any:
        dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
        if dtype is not None and not isinstance(dtype, Tracer) and np.dtype(dtype).kind == "c":
            return function(self, *args, **kwargs)
        return method(self, *args, **kwargs)
    return wrapped


for _name in ("sum", "prod", "mean", "var", "std", "cumsum", "cumprod"):
    setattr(Tracer, _name, _complex_dtype_as_function(_name, getattr(Tracer, _name)))


def numpy_class(value: Any, caller: Any) -> type:
    """``value.__class__`` as the code of ``caller`` (a frame) sees it. The user's code sees
    NumPy's class for the value -- ``np.ndarray``, or for a 0-d value its dtype's scalar
    type (``np.float64``: what NumPy's reductions, indexing and ufuncs of scalars return) --
    so that ``isinstance(x, np.ndarray)``, ``isinstance(s, float)`` and ``np.generic``
    tests take NumPy's branch instead of silently another one (``isinstance`` asks
    ``__class__`` once the type test fails; ``type(x)`` is still the tracer's). tracearray's
    and NumPy's own modules see the real class, except numpy.polynomial, whose functions
    shape their results by it as the user's code does (``polyval(x, c)`` of a 2-d ``c``
    broadcasts ``c`` over x's dimensions only ``if isinstance(x, np.ndarray)``)."""
    module = caller.f_globals.get("__name__", "") if caller is not None else ""
    if module.partition(".")[0] in _OWN_PACKAGES and not module.startswith("numpy.polynomial."):
        return type(value)
    # (the shape and dtype without a read of the value: an ambiguous view read after a
    # write raises, and isinstance(result, GeneratorType) of the trace's end asks)
    node = value._node if isinstance(value, Tracer) else value
    if isinstance(value, Tracer) and not node.ndim and (
            value._path or not is_scalar_memory(value._buf)):
        return np.ndarray   # (a 0-d array: an argument, np.array(2.0), a view of one)
    return np.ndarray if node.ndim else node.dtype.type


_OWN_PACKAGES = frozenset({"tracearray", "numpy"})


def _holds_python_complex(value: Any) -> bool:
    """Whether ``value`` is a Python complex, or a list or tuple with one among its
    elements (not NumPy's complex scalars or arrays, which NumPy casts with a warning)."""
    if type(value) is complex:
        return True
    return isinstance(value, (list, tuple)) and any(_holds_python_complex(v) for v in value)


class TracerFlags:
    """``x.flags`` of a traced value, as NumPy gives them for the same view of a C-contiguous
    array: the trace takes every argument and every array it makes as C-contiguous (what
    the compiled function's arrays are is decided at each call: divergence
    traced-layout-flags), and a view's contiguity and ownership follow NumPy's own view
    functions (``buffers.shadow``): ``x.T.flags.c_contiguous`` is False, as NumPy says of a
    transposed C-contiguous array. Writeable: the memory's and the view's (NumPy's read-only
    views)."""

    def __init__(self, t: Tracer):
        buf, path = t._buf, t._path
        layout = t._shadow().flags
        self.c_contiguous = bool(layout.c_contiguous)
        self.f_contiguous = bool(layout.f_contiguous)
        self.contiguous = self.c_contiguous
        self.fortran = self.f_contiguous          # (NumPy 2: F_CONTIGUOUS itself)
        self.aligned = True
        self.writeable = bool(buf.writeable) and buffers.readonly_step(path) is None
        self.owndata = not path
        self.writebackifcopy = False

    def __getitem__(self, key: str) -> bool:
        names = {"C_CONTIGUOUS": "c_contiguous", "C": "c_contiguous", "CONTIGUOUS": "contiguous",
                 "F_CONTIGUOUS": "f_contiguous", "F": "f_contiguous", "FORTRAN": "fortran",
                 "ALIGNED": "aligned", "A": "aligned", "WRITEABLE": "writeable",
                 "W": "writeable", "OWNDATA": "owndata", "O": "owndata"}
        return getattr(self, names[key.upper()])


class FlatIter:
    """``x.flat``: the array as 1-d, for indexing (``x.flat[i]``, ``x.flat[a:b]``)."""

    def __init__(self, base: Tracer):
        self.base = base

    def __getitem__(self, key: Any) -> Tracer:
        # (NumPy's x.flat[key] is always a copy, whatever x's layout: not a view of x)
        return Tracer(api.reshape(self.base.node, (-1,)))[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        # x.flat[k] = v writes into x's memory in x's C order, whatever x's layout: the
        # update is made on the flattened value and written back into x. NumPy takes the
        # values flattened, in order, repeated when there are fewer than the places (extra
        # ones ignored): np.fill_diagonal(x, [1, 2]) writes 1, 2, 1, 2, ... this way.
        from .indexing import setitem
        flat = api.reshape(self.base.node, (-1,))
        if isinstance(key, Tracer) and key.dtype == np.dtype(bool) and key.ndim == 1 and \
                key.size == self.base.size and np.ndim(value) > 0 and \
                not isinstance(value, FlatIter):
            # a mask of every place: the values cycled over its True places, in order, as
            # np.place puts them (x.flat[x.ravel() > 0] = [1, 2])
            # (flat assignment casts the values unsafely, as NumPy's: np.place's own check
            # of array values is for np.place; no values, no change)
            v = np.asarray(value) if not isinstance(value, (Tracer, complex_values.ComplexTracer)) \
                else value
            if np.size(v) == 0:
                return
            t = Tracer(flat)
            np.place(t, key, v.astype(self.base.dtype) if hasattr(v, "astype") else v)
            self.base._write(api.reshape(t.node, self.base.shape))
            return
        value = unwrap(value)
        places = _flat_places(self.base.size, key)
        if places is not None and np.ndim(value) > 0 and not isinstance(value, FlatIter):
            v = Tracer(value if isinstance(value, Node) else as_node_(value)).reshape(-1)
            if v.size == 0 and places:
                raise ValueError(with_location(
                    f"could not broadcast input array from shape (0,) into shape ({places},)"))
            if v.size and v.size != places:
                v = v[np.arange(places) % v.size]
            if isinstance(key, Tracer) and v.size:
                v = v.reshape(key.shape)   # (one value per index, in the index's order)
            value = v.node
        new = setitem(flat, unwrap(key), value)
        self.base._write(api.reshape(new, self.base.shape))

    def __len__(self) -> int:
        return self.base.size

    def __iter__(self):
        return iter(self.base.reshape(-1))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.base.__array__()


def _flat_places(size: int, key: Any) -> int | None:
    """How many elements ``x.flat[key]`` selects, for a key known while tracing (None for
    a traced key: its values then broadcast as an ordinary assignment's do)."""
    if isinstance(key, Tracer) and key.dtype.kind in "iu":
        return key.size   # (an index array: one place per index, repeated ones included)
    raw = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Tracer, Node)) or hasattr(k, "node") for k in raw):
        return None
    try:   # (NumPy's indexing of a stand-in that holds no memory)
        return int(np.broadcast_to(np.int8(0), (size,))[key].size)
    except Exception:   # noqa: BLE001 -- NumPy's error comes from the assignment itself
        return None


def check_index_out(out: Any) -> None:
    """np.argmax's out= holds positions: NumPy takes it only where its dtype casts to intp
    safely (any int of fewer bits, bool; not floats nor uint64)."""
    out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    dt = getattr(out, "dtype", None)
    if dt is not None and not np.can_cast(dt, np.intp, "safe"):
        raise TypeError(with_location(
            f"Cannot cast array data from {np.dtype(dt)!r} to {np.dtype(np.intp)!r} "
            f"according to the rule 'safe'"))


def _check_scalar_fits(value: Any, dtype: np.dtype, key: Any) -> None:
    """NumPy converts a NumPy scalar assigned into a signed integer array at a basic index
    (``x[0] = y.sum()``, ``x[1:] = s``) through a Python int: NaN raises ValueError, an
    infinity or a value out of the dtype's range OverflowError. Checked when the compiled
    function runs (``context.require``). An unsigned array, an advanced index (a mask,
    a list) and a traced 0-d array (as any array) take the value cast unsafely, as
    NumPy's do."""
    if not (isinstance(value, Tracer) and value._is_numpy_scalar()) or dtype.kind != "i" \
            or not _basic_index(key):
        return
    src = value.node.dtype
    if src.kind == "f":
        context.require(np.logical_not(np.isnan(value)).node, ValueError,
                        "cannot convert float NaN to integer")
        context.require(np.logical_not(np.isinf(value)).node, OverflowError,
                        "cannot convert float infinity to integer")
        info = np.iinfo(dtype)
        v = np.trunc(value)
        ok = (v >= float(info.min)) & (v < float(info.max) + 1.0)
    elif src.kind in "iu" and not np.can_cast(src, dtype, "safe"):
        info, src_info = np.iinfo(dtype), np.iinfo(src)
        ok = None
        if src_info.min < info.min:
            ok = value >= info.min
        if src_info.max > info.max:
            high = value <= info.max
            ok = high if ok is None else ok & high
    else:
        return
    context.require(ok.node, OverflowError, f"Python integer out of bounds for {dtype}")


def _basic_index(key: Any) -> bool:
    """Whether ``key`` is NumPy's basic indexing: integers, slices, Ellipsis and None."""
    for k in key if isinstance(key, tuple) else (key,):
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (bool, np.bool_)):
            return False
        if isinstance(k, (int, np.integer)):
            continue
        if isinstance(k, Tracer) and k.ndim == 0 and k.node.dtype.kind in "iu":
            continue
        return False
    return True


def _no_element_equal(t: Tracer, value: bool) -> Tracer:
    """``x == None`` / ``x != "a"``: NumPy compares each element with the object, which no
    number equals: a bool array of ``value`` in x's shape (a new array)."""
    return Tracer(api.full_like(t.node, value, dtype=np.dtype(bool)))


def inherit_layout(out: Tracer, source: Any) -> Tracer:
    """``out``, new memory NumPy lays out as ``source``'s (order 'K': astype, np.copy,
    zeros_like): as unknown a layout (a permuted source), and by the same arguments."""
    return operands_layout(out, (source,))


def operands_layout(out: Any, operands: Sequence[Any]) -> Any:
    """``out`` (a result in new memory, or a tuple of them) laid out as NumPy lays out a
    result of ``operands`` in order 'K' (a ufunc's, a copy's): in another order than C's when
    every operand of its dimensions is (``x.T + 1``, not ``x.T + y``); and by the layout of
    the arguments those operands' memory follows."""
    for r in _new_results(out):
        shaped = [t for t in _real_parts(operands) if t._buf is not r._buf and
                  t._node.ndim == r._node.ndim and sum(n > 1 for n in t._node.shape) > 1]
        if shaped:
            _lay_out(r, shaped, all(t._permuted() for t in shaped))
    return out


def follows_layout(out: Any, operands: Sequence[Any], exclude: Sequence[Any] = ()) -> Any:
    """``out`` (a result in new memory, or a tuple of them) of a function whose result
    layout NumPy decides from its operands in ways the trace does not model (a reduction
    keeps the operand's order of the axes it keeps: ``a.transpose(2, 0, 1).sum(1)`` is
    Fortran-ordered; np.cumsum, np.partition, np.roll copy in order 'K'): not known when
    any operand of two or more dimensions is laid out out of C's order, and laid out by the
    arguments any of them follows. Results that are operands or ``exclude`` (an ``out=``)
    keep theirs."""
    kept = {id(t._buf) for t in _real_parts((*operands, *exclude))}
    shaped = [t for t in _real_parts(operands) if sum(n > 1 for n in t._node.shape) > 1]
    for r in _new_results(out):
        if id(r._buf) not in kept:
            _lay_out(r, shaped, any(t._permuted() for t in shaped))
    return out


def _new_results(out: Any) -> list[Tracer]:
    """The traced results of two or more dimensions of size past one in ``out`` (a tuple's,
    a complex value's parts): those whose layout a reshape of them depends on."""
    if isinstance(out, (tuple, list)):
        return [r for o in out for r in _new_results(o)]
    if isinstance(out, complex_values.ComplexTracer):
        return _new_results((out.re, out.im))
    if not isinstance(out, Tracer) or out._trace is None or \
            sum(n > 1 for n in out._node.shape) < 2:
        return []
    return [out]


def _lay_out(r: Tracer, shaped: list[Tracer], unknown: bool) -> None:
    """``r``'s memory laid out by ``shaped`` (operands): not known where ``unknown``, and as
    the arguments they follow (``Buffer.from_arguments``)."""
    if unknown:
        r._buf.layout_known = False
    args = frozenset().union(*(t._buf.from_arguments for t in shaped))
    if args:
        r._buf.from_arguments = r._buf.from_arguments | args


def _real_parts(values: Sequence[Any]) -> list[Tracer]:
    """The tracers among ``values``, a complex value as its parts (laid out as it is)."""
    out: list[Tracer] = []
    for v in values:
        if isinstance(v, Tracer):
            out.append(v)
        elif isinstance(v, complex_values.ComplexTracer):
            out += [v.re, v.im]
    return out


def unmodelled_layout(out: Any) -> Any:
    """``out`` (a result in new memory, or a tuple of them) laid out by NumPy in a way the
    trace does not model (np.nonzero's strided index rows, np.argwhere's columns): whether
    a reshape or ravel of it is a view is not decided by a guess (``Buffer.layout_known``)."""
    if isinstance(out, (tuple, list)):
        for o in out:
            unmodelled_layout(o)
    elif isinstance(out, Tracer) and out._trace is not None and out._buf.argument is None:
        out._buf.layout_known = False
    return out


def _laid_out_by_self(method: Callable[..., Any]) -> Callable[..., Any]:
    """A method whose new result NumPy lays out by the array's own layout (``follows_layout``)."""
    @functools.wraps(method)
    def laid_out(self: Tracer, *args: Any, **kwargs: Any) -> Any:
        return follows_layout(method(self, *args, **kwargs), (self,),
                              (*args, *kwargs.values()))
    return laid_out


for _name in ("sum", "prod", "max", "min", "any", "all", "mean", "var", "std", "argmax",
              "argmin", "cumsum", "cumprod", "ptp", "partition", "argpartition",
              "round", "clip", "conj", "conjugate"):
    if _name in Tracer.__dict__:
        setattr(Tracer, _name, _laid_out_by_self(Tracer.__dict__[_name]))
del _name


def _poisoned(t: Tracer) -> UnsupportedOperationError:
    return UnsupportedOperationError(with_location(
        "using an array after a write through a reshaped or raveled view of it is not "
        "supported by tracearray when NumPy makes that view a view or a copy by a memory "
        "layout tracearray does not model (an array made from a transposed one: x.T + 1, "
        f"np.exp(x.T)); the write was at {t._buf.poisoned}: take a C-ordered copy first "
        "(t = t.copy()), or write into the array itself"))


def _no_imaginary_part() -> None:
    raise TypeError(with_location("array does not have imaginary part to set"))


def _ambiguous_read(t: Tracer) -> UnsupportedOperationError:
    """The error for reading a view NumPy makes or copies by the caller's memory layout (a
    reshape or ravel of an argument) after its memory was written: a view sees the write, a
    copy does not."""
    made = t._trace.locations.get(t._node) if t._trace is not None else None
    if t._buf.argument is None:
        return UnsupportedOperationError(with_location(
            "reading a reshaped or raveled view of an array NumPy lays out in another order "
            "than C (made from a transposed array: x.T + 1, np.exp(x.T)) after that array "
            "was written is not supported by tracearray: NumPy makes it a view (which sees "
            "the write) or a copy (which does not) by that layout, which tracearray does not "
            "model; take a C-ordered copy first (t = t.copy()) or reshape after the write" +
            (f"\n  the view was made at {made}" if made else "")))
    return UnsupportedOperationError(with_location(
        "reading a reshaped or raveled view of an argument (or np.ascontiguousarray / "
        "asfortranarray of one) after the argument was written is not supported by "
        "tracearray: NumPy makes it a view (which sees the write) or a copy (which does "
        "not) depending on the caller's memory layout, unknown when tracing; copy it before "
        "the write (np.array(x.ravel())) or reshape after it" +
        (f"\n  the view was made at {made}" if made else "")))


def _escaped(t: Tracer) -> UnexpectedTracerError:
    """The error for a tracer used after its trace ended: which trace, where the value was
    made (the user's line that made its node in that trace, or the argument it stands for),
    and what to do."""
    state = t._trace
    node = t._node
    made = state.locations.get(node)
    detail = (f"\n  the value was made at {made}" if made else
              f"\n  the value is the traced function's input {node.attr('name')!r}"
              if node.op == "input" else "")
    return UnexpectedTracerError(with_location(
        f"a traced value ({type_str(node)}) of the trace of {state.function} was used after "
        f"that trace ended: it escaped the function being compiled (kept in a global, a list, "
        f"an attribute or a closure while tracing) and its value is never computed. Return it "
        f"from the compiled function instead (results may be tuples, lists, dicts, "
        f"namedtuples and dataclasses of arrays){detail}"))


def _traced_mask(key: Any) -> tuple[int, Node] | None:
    """(leading dims, mask) for ``x[mask]`` / ``x[mask, ...]`` / ``x[mask, :]`` with a traced
    boolean mask of one or more dims (whose values are not known while tracing)."""
    items = key if isinstance(key, tuple) else (key,)
    found = [i for i, k in enumerate(items) if isinstance(k, Tracer) and
             k.dtype == np.dtype(bool) and k.ndim > 0 and known_value(k.node) is None]
    if len(found) != 1:
        return None
    i = found[0]
    others = items[:i] + items[i + 1:]
    if any(not (k is Ellipsis or (isinstance(k, slice) and k == slice(None))) for k in others):
        return None    # other forms: indexing says what is not supported
    if any(k is Ellipsis for k in items[:i]):
        return None
    return i, items[i].node


def _keep(keepdims: Any) -> bool:
    return False if keepdims is np._NoValue else bool(keepdims)


def staged_number(v: Any, kinds: str = "biuf") -> Any:
    """A 0-d traced value of a dtype of ``kinds`` where NumPy's code needs a number (var's
    ddof, a size passed in as a NumPy integer): its NumPy scalar (so NumPy's arithmetic of
    it is kept), staged as float() of it is (one trace per value); anything else as it
    is."""
    if isinstance(v, Tracer) and v.ndim == 0 and v.dtype.kind in kinds:
        known = v._known()
        return np.asarray(known)[()] if known is not None else \
            _staged_scalar(v.node, "a number of a value")
    return v


def _ddof(ddof: Any, correction: Any) -> Any:
    ddof, correction = staged_number(ddof), staged_number(correction)
    if correction is not np._NoValue:
        if ddof != 0:
            raise ValueError(with_location("ddof and correction can't be provided simultaneously."))
        return correction
    return ddof


def no_out(name: str, out: Any) -> None:
    if out is not None:
        raise unsupported(f"{name}(out=...)", "write the result with `a[...] = ...` instead")


def _out_array(out: Any) -> Any:
    """The traced array of ``out=`` (a tuple of one too), else None."""
    o = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    return o if isinstance(o, Tracer) else None


def _loop_dtype(dtype: Any, out: Any, x: Any) -> Any:
    """A ufunc reduction's or accumulation's dtype: ``dtype=``, else with ``out=`` the
    promotion of x's dtype and out's (NumPy resolves the fold's loop from both: int64 values
    summed into a float32 out add in float64 and do not wrap; int8 into int8 add in int8;
    floats into an int64 out add as floats, then are cast), else None (the input's rule)."""
    if dtype is not None:
        return dtype
    o = _out_array(out)
    if o is None:
        return None
    return np.result_type(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype, o.dtype)


def store_out(name: str, result: Any, out: Any, casting: str = "unsafe",
              exact: bool = False) -> Any:
    """``result`` written into ``out=`` as NumPy does (broadcast to out's shape, cast with
    ``casting``: reductions and scans cast unsafely, ufuncs same_kind), and ``out``
    returned; just ``result`` without one. ``exact``: a reduction's or scan's result, which
    NumPy writes only into an ``out`` of its very shape (ValueError otherwise)."""
    if isinstance(out, tuple):
        if len(out) != 1:
            raise ValueError(with_location(f"{name}: out must be a single array"))
        out = out[0]
    if out is None:
        return result
    if exact and tuple(np.shape(result)) != tuple(np.shape(out)):
        want, got = np.ndim(result), np.ndim(out)
        raise ValueError(with_location(
            f"output parameter for reduction operation {name} has the wrong number of "
            f"dimensions: Found {got} but expected {want}" if want != got else
            f"output array of shape {shape_str(np.shape(out))} does not match the result "
            f"of {name}, of shape {shape_str(np.shape(result))}"))
    if isinstance(out, complex_values.ComplexTracer):   # a real result into a complex out=
        dt = result.dtype if isinstance(result, (Tracer, complex_values.ComplexTracer)) \
            else np.asarray(result).dtype
        if not np.can_cast(dt, out.dtype, casting=casting):
            raise api.output_cast_error(name, dt, out.dtype, casting)
        if np.broadcast_shapes(np.shape(result), out.shape) != tuple(out.shape):
            raise ValueError(with_location(
                f"non-broadcastable output operand with shape {shape_str(out.shape)} doesn't "
                f"match the broadcast shape {shape_str(np.shape(result))}"))
        out[...] = result
        return out
    if not isinstance(out, Tracer):
        raise unsupported(f"{name}(out=<a NumPy array>)",
                          "out= must be an array the function traces (an argument, a global "
                          "array or one it made)")
    if out._is_numpy_scalar():
        raise TypeError(with_location("return arrays must be of ArrayType"))
    r = result.node if isinstance(result, Tracer) else as_node_(result)
    if not np.can_cast(r.dtype, out.dtype, casting=casting):
        raise api.output_cast_error(name, r.dtype, out.dtype, casting)
    try:
        shape = broadcast_shape([r.shape, out.shape])
    except ValueError:
        shape = r.shape
    if shape != tuple(out.shape):
        raise ValueError(with_location(
            f"non-broadcastable output operand with shape {shape_str(out.shape)} doesn't "
            f"match the broadcast shape {shape_str(shape)}"))
    out[...] = Tracer(r)
    return out


def reduction(kind: str, x: Any, axis: Any, dtype: Any, out: Any, keepdims: Any,
              initial: Any, where: Any) -> Tracer:
    """A reduction method or function: ``initial=`` and ``where=`` as NumPy's."""
    if kind not in ("sum", "prod") and dtype is not None:
        raise unsupported(f"{kind}(dtype=...)")
    if kind in ("sum", "prod"):
        dtype = _loop_dtype(dtype, out, x)
    if dtype is not None and np.dtype(dtype).kind == "c" and isinstance(x, Tracer):
        # a real array summed as complex (np.average's weights beside complex values):
        # the complex reduction of its complex values
        z = complex_values.as_complex(x, np.dtype(dtype))
        method = getattr(z, kind)
        kw = {} if initial is np._NoValue else {"initial": initial}
        return method(axis=axis, out=out, keepdims=bool(keepdims), where=where, **kw)
    return store_out(kind, Tracer(api.reduce_with(kind, unwrap(x), axis, _keep(keepdims), dtype,
                                                  initial, unwrap(check_where(where)))), out,
                     exact=True)
