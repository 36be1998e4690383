"""Node builders: the one place where graph nodes are created, checked against the op table.

Values handled here are graph ``Node``s, Python scalars (NumPy 2 / NEP 50 *weak* scalars) and
concrete NumPy arrays or scalars (frozen into ``constant`` nodes).
"""
from __future__ import annotations

import math
import operator
import struct
import weakref
from typing import Any, Sequence

import numpy as np

from ..errors import TraceDTypeError, TraceShapeError, UnsupportedOperationError, with_location
from .captured import CAPTURABLE as _CAPTURABLE
from .graph import Node
from ..ops import ALL_DTYPES, OPS, Kind, infer

SUPPORTED_DTYPES = frozenset(ALL_DTYPES)
PyScalar = (bool, int, float)


def check_dtype(dtype: Any, what: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TraceDTypeError(with_location(f"{what}: {e}")) from None
    if dt.newbyteorder("=") not in SUPPORTED_DTYPES:
        if dt.kind == "c":   # complex values live above the graph (trace/complex.py)
            raise TraceDTypeError(with_location(
                f"{what}: this operation does not take complex values in tracearray"))
        hint = ("; an object array of traced values (what np.frompyfunc makes to call a "
                "Python function element by element) cannot be traced: use np.vectorize, "
                "which tracearray traces on one element, or write the function with NumPy's "
                "array operations (np.where for choices)" if dt.kind == "O" else "")
        raise TraceDTypeError(with_location(
            f"{what}: dtype {dt} is not supported by tracearray (supported: bool, "
            f"int8-int64, uint8-uint64, float16, float32, float64, complex64, complex128)"
            f"{hint}"))
    return dt.newbyteorder("=")


def shape_str(shape: Sequence[int]) -> str:
    """A shape as NumPy's error messages print it: ``(2,3)``, ``(4,)``, ``()``."""
    inner = ",".join(str(int(s)) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def make(op: str, args: Sequence[Node], **attrs: Any) -> Node:
    """Create (or find) the node ``op(args)`` with shape and dtype from the op table."""
    try:
        shape, dtype = infer(op, args, attrs)
    except ValueError as e:
        if OPS[op].kind is Kind.ELEMENTWISE:
            # NumPy's own words for a ufunc whose operands do not broadcast.
            shapes = " ".join(shape_str(a.shape) for a in args)
            raise TraceShapeError(with_location(
                f"operands could not be broadcast together with shapes {shapes}")) from None
        shapes = ", ".join(str(a.shape) for a in args)
        raise TraceShapeError(with_location(f"{op}: {e} (operand shapes {shapes})")) from None
    node = Node.make(op, args, attrs, shape, dtype, ruled=True)
    _note_location(node)
    return node


def _note_location(node: Node) -> None:
    global _note_location
    from .context import note_location   # (context imports this module)
    _note_location = note_location
    note_location(node)


def external(op: str, args: Sequence[Node], **attrs: Any) -> tuple[Node, ...]:
    """Every result of the external call ``op(args)`` (``ops.external``): one node each, the
    same operands and attributes and ``result=i``, which the planner runs as one call."""
    from ..ops import EXTERNALS
    n = len(EXTERNALS[op].results([a.shape for a in args], [a.dtype for a in args], attrs))
    return tuple(make(op, args, **attrs, result=i) for i in range(n))


def constant(value: Any, dtype: Any = None) -> Node:
    """A constant node holding a copy of ``value`` (frozen at trace time) -- unless
    ``value`` is an array the traced function reached through a closure, a default, a bound
    object or a global container: then the graph input that reads it at every call
    (``captured.py``)."""
    node = captured_node(value)
    if node is not None:
        return node if dtype is None else cast(node, dtype)
    arr = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
    dt = check_dtype(arr.dtype, "constant")
    arr = np.array(arr, dtype=dt, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    return Node.make("constant", (), {"value": arr.tobytes(), "shape": arr.shape, "dtype": dt.str},
                     arr.shape, dt)


def _captured_arrays() -> Any:
    from .context import current
    state = current()
    return state.captured if state is not None else None


def captured_node(value: Any) -> Node | None:
    """The graph input standing for ``value`` when it is an array the traced function
    reached through a closure, default, bound object or global container (``captured.py``),
    else None."""
    if type(value) in _CAPTURABLE:
        captured = _captured_arrays()
        if captured is not None:
            t = captured.tracer_for(value)
            if t is not None:
                return t.node
    return None


def fix_captured_value(value: Any) -> None:
    """``value`` is used by its values while tracing: when it is an array the function
    reached (``captured_node``), a call where it holds other values traces again."""
    if type(value) in _CAPTURABLE:
        captured = _captured_arrays()
        if captured is not None:
            captured.fixed_value(value)


def inexact_dtype(dtype: Any) -> np.dtype | None:
    """``dtype=`` of a nan-function of inexact values: NumPy refuses an integer one."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.inexact):
        raise TypeError(with_location("If a is inexact, then dtype must be inexact"))
    return dt


# elements of a traced argument a NumPy function needs known while tracing (``needed_value``)
# that are staged, each found by a probe at every call; a larger traced value is refused
STAGED_NEEDED_MAX = 16


def foreign_value_error(value: Any) -> UnsupportedOperationError:
    """The refusal of a value a traced computation cannot take, at the user's line: a
    device array the function reaches other than as an argument (a global, a closure, an
    attribute: only arguments' memory is bound at each call), anything else by type."""
    if hasattr(value, "__cuda_array_interface__"):
        return UnsupportedOperationError(with_location(
            f"cannot use a device array ({type(value).__name__}) that the function reaches "
            f"through a global, a closure or an attribute in a traced computation: pass it "
            f"as an argument"))
    return UnsupportedOperationError(with_location(
        f"cannot use a value of type {type(value).__name__} in a traced computation"))


def needed_value(value: Any, what: str = "a value the result's layout depends on"
                 ) -> np.ndarray | None:
    """The value of an argument a NumPy function needs known while tracing (a quantile's
    q, partition's kth): a Python or NumPy value, a value the function made from constants
    (``known_value``), a global array the function reads, whose values the trace then
    fixes (a call where it holds other values traces again), or traced data of at most
    ``STAGED_NEEDED_MAX`` real elements, staged as ``float(x)`` is (``tracer._staged_scalar``:
    a probe computes each element's bits at every call, and each distinct value is a trace
    of its own); None for larger traced data."""
    node = getattr(value, "node", None)
    if not isinstance(node, Node):
        return np.asarray(value)
    known = known_value(node)
    if known is not None:
        return known
    from .context import current
    state = current()
    if state is None:
        return None
    if state.captured is None or not state.global_arrays:
        return _staged_value(node, what)
    # (a global array, or small ops of constants and global arrays: Q / 100, Q[::-1])
    used: dict = {}
    known = known_value(node, globals_=state.global_arrays, used=used)
    if known is None:
        return _staged_value(node, what)
    for name, arr in used.values():
        state.captured.fixed_global(name, arr)
    return known


def _staged_value(node: Node, what: str) -> np.ndarray | None:
    """``node``'s elements staged one by one (``needed_value``), or None when it has more
    than ``STAGED_NEEDED_MAX`` of them or is not real."""
    if node.size > STAGED_NEEDED_MAX or node.dtype.kind not in "biuf":
        return None
    from . import numpy_api as api
    from .tracer import _staged_scalar
    flat = api.reshape(node, (node.size,))
    values = [_staged_scalar(api.getitem(flat, i), what) for i in range(node.size)]
    return np.array(values, dtype=node.dtype).reshape(node.shape)


# known values of nodes found so far (nodes are interned and immutable: a node's known value
# never changes); only values found without ``globals_``, whose values are a call's
_KNOWN: "weakref.WeakKeyDictionary[Node, np.ndarray]" = weakref.WeakKeyDictionary()


def known_value(node: Any, depth: int = 24, globals_: dict | None = None,
                used: dict | None = None) -> np.ndarray | None:
    """The value of a node known at trace time: a constant, or small ops of constants up to
    ``depth`` steps deep (arrays the function made with np.arange, np.linspace, np.zeros,
    ..., a loop variable over one, ``np.floor(n * 10 ** (np.linspace(0, 3, 20) / 3))``: a
    mel filterbank's bins) -- not after traced data was written in."""
    if not isinstance(node, Node):
        return None
    if node.op == "constant":
        return np.frombuffer(node.attr("value"), dtype=node.dtype).reshape(node.shape)
    if globals_ is None:
        known = _KNOWN.get(node)
        if known is not None:
            return known
    if globals_ is not None and node in globals_:   # (``needed_value``: its values now)
        name, arr = globals_[node]
        if arr.size > 1 << 16 or np.dtype(arr.dtype) != node.dtype or arr.shape != node.shape:
            return None
        used[node] = (name, arr)   # type: ignore[index]
        return arr.copy()
    spec = OPS[node.op]
    if depth == 0 or not node.args or spec.kind is Kind.SOURCE or node.size > 1 << 16 or \
            sum(a.size for a in node.args) > 1 << 16:
        return None
    args = []
    for a in node.args:
        v = known_value(a, depth - 1, globals_, used)
        if v is None:
            return None
        args.append(v)
    try:
        with np.errstate(all="ignore"):
            out = spec.ufunc(*args) if spec.ufunc is not None else \
                spec.numpy_ref(*args, **dict(node.attrs))
    except Exception:   # noqa: BLE001 -- not known then: the kernel computes (and checks) it
        return None
    out = np.asarray(out).astype(node.dtype, copy=False).reshape(node.shape)
    if globals_ is None:
        out.flags.writeable = False   # (shared by every later ask, as a constant's is)
        _KNOWN[node] = out
    return out


def size_scalar(value: float | int, dtype: Any, dims: tuple[int, ...] | None = None,
                less: float | int = 0) -> Node:
    """A size-derived scalar (an element count): a run-time kernel argument, not an immediate.

    ``dims``: the dimensions (of graph nodes) whose product, less ``less`` and at least 0,
    the value is: ``max(prod(dims) - less, 0)``. The node records them (its ``count``
    attribute), so that the graph re-derived for other input sizes computes the count again
    (``resize.py``); a size node without them is a number independent of the sizes."""
    attrs = {"value": None, "shape": (), "dtype": None}
    if dims is not None:
        dims = tuple(map(int, dims))
        if value != max(math.prod(dims) - less, 0):   # pragma: no cover - a caller's slip
            raise AssertionError(f"size {value} is not max(prod({dims}) - {less}, 0)")
        attrs["count"] = (dims, less)
    arr = np.asarray(value, dtype=dtype)
    attrs["value"], attrs["dtype"] = arr.tobytes(), arr.dtype.str
    return Node.make("size", (), attrs, (), arr.dtype)


def cast(node: Node, dtype: Any) -> Node:
    dt = check_dtype(dtype, "astype")
    if node.dtype == dt:
        return node
    if node.op == "constant":   # fold: casting a constant is a constant
        return constant(np.frombuffer(node.attr("value"), node.dtype).reshape(node.shape)
                        .astype(dt))
    return make("cast", [node], dtype=dt.str)


def as_node(value: Any) -> Node:
    """A node for a traced value or a concrete array / scalar (NumPy's default dtype)."""
    if isinstance(value, Node):
        return value
    if isinstance(value, (np.ndarray, np.generic) + PyScalar):
        return constant(value)
    from .selection import MaskedSelection
    if isinstance(value, MaskedSelection):     # x[mask] as an operand: its elements
        return value.compact().node
    if isinstance(value, (list, tuple)):       # array-like: converted as np.asarray does
        from .numpy_api import array_from_nested
        if holds_traced(value):
            return array_from_nested(value)
        return constant(np.asarray(value))
    raise foreign_value_error(value)


def holds_traced(value: Any) -> bool:
    """Whether nested lists/tuples hold a graph node or a traced value anywhere (else NumPy's
    conversion makes them one constant)."""
    from .tracer import Tracer
    if isinstance(value, (Node, Tracer)):
        return True
    return isinstance(value, (list, tuple)) and any(holds_traced(v) for v in value)


def dtype_key(value: Any) -> Any:
    """What NumPy's dtype resolution sees for a value: Python int/float are weak (NEP 50)."""
    if isinstance(value, Node):
        return value.dtype
    # Before the Python-scalar checks: np.float64 subclasses float (and np.bool_ is not bool),
    # but NumPy scalars are strongly typed; returning ``type(np.float64(2))`` made
    # ``np.float64(2) * x`` fail in ufunc.resolve_dtypes.
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, (int, float)):
        return type(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype
    if isinstance(value, complex):
        raise TraceDTypeError(with_location("complex numbers are not supported by tracearray"))
    from .selection import MaskedSelection
    if isinstance(value, MaskedSelection):     # (as_node compacts it)
        return value.dtype
    if isinstance(value, (list, tuple)):       # an array as np.asarray makes it (not weak)
        return as_node(value).dtype
    raise foreign_value_error(value)


def result_type(*values: Any) -> np.dtype:
    """np.result_type with NumPy 2's weak Python scalars (passed as values, not types)."""
    keys = [v if isinstance(v, (bool, int, float)) else dtype_key(v) for v in values]
    return np.result_type(*keys)


def to_dtype(value: Any, dtype: np.dtype) -> Node:
    """``value`` as a node of ``dtype``: casts nodes, converts scalars exactly as NumPy does
    (a Python int out of range of an integer dtype raises OverflowError, as in NumPy 2)."""
    if isinstance(value, Node):
        return cast(value, dtype)
    kind = type(value)
    if kind in _PY_SCALARS:   # (the same few constants come back in every trace)
        key = (kind, dtype, value if kind is not float else _FLOAT_BITS.pack(value))
        node = _SCALAR_NODES.get(key)
        if node is None:
            try:
                node = constant(np.asarray(value, dtype=dtype))
            except OverflowError as e:
                raise OverflowError(with_location(str(e))) from None
            if kind is float and dtype.kind == "f" and dtype.itemsize < 8 and \
                    math.isfinite(value) and abs(value) > np.finfo(dtype).max:
                return node   # (not kept: NumPy's overflow warning comes at every trace)
            if len(_SCALAR_NODES) >= 4096:
                _SCALAR_NODES.clear()
            _SCALAR_NODES[key] = node
        return node
    from .selection import MaskedSelection
    if isinstance(value, MaskedSelection):     # x[mask] as an operand: its elements
        return cast(value.compact().node, dtype)
    if isinstance(value, (list, tuple)):       # (holding traced values, maybe)
        return cast(as_node(value), dtype)
    if type(value) in _CAPTURABLE:   # (an array the function reached: maybe a graph input)
        return cast(constant(value), dtype)
    try:
        return constant(np.asarray(value, dtype=dtype))
    except OverflowError as e:
        raise OverflowError(with_location(str(e))) from None


# Python scalars converted to constants of a dtype (to_dtype): (type, dtype, value; a float
# by its bits, so -0.0 and NaNs are their own entries) -> the node
_PY_SCALARS = (bool, int, float)
_FLOAT_BITS = struct.Struct("<d")
_SCALAR_NODES: dict[tuple, Node] = {}


def check_where(where: Any) -> Any:
    """A ``where=`` mask as NumPy takes it: Python lists and scalars, NumPy scalars by their
    truth; an array (traced or not) must be boolean (NumPy casts it to bool 'safe')."""
    from .tracer import Tracer, is_scalar_memory
    if isinstance(where, Tracer):
        scalar = where.ndim == 0 and not where._path and is_scalar_memory(where._buf)
        dt = None if scalar else where.dtype
    else:
        dt = where.dtype if isinstance(where, np.ndarray) else None
    if dt is not None and dt != np.dtype(bool):
        what = "scalar" if getattr(where, "ndim", 1) == 0 else "array data"
        raise TypeError(with_location(
            f"Cannot cast {what} from {dt!r} to dtype('bool') according to the rule 'safe'"))
    return where


def check_python_int(value: Any, dtype: np.dtype) -> None:
    """NumPy 2's OverflowError for a Python int out of an integer ``dtype``'s range, where
    NumPy converts the number itself (np.copyto, np.full_like), at the user's line."""
    if type(value) is int and np.dtype(dtype).kind in "iu":
        try:
            np.asarray(value, dtype=dtype)
        except OverflowError as e:
            raise OverflowError(with_location(str(e))) from None


def normalize_axes(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative axes, NumPy's errors."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        if isinstance(a, Node):
            raise UnsupportedOperationError(with_location(f"{what}: axis must be a Python int"))
        if isinstance(a, (bool, np.bool_, float, np.floating)):
            raise TypeError(with_location(
                f"'{type(a).__name__}' object cannot be interpreted as an integer"))
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(with_location(
                f"{what}: axis {a} is out of bounds for array of dimension {ndim}"))
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(with_location(f"{what}: duplicate value in 'axis'"))
    return tuple(sorted(out))


def unsupported(what: str, why: str = "") -> UnsupportedOperationError:
    msg = f"{what} is not supported by tracearray" + (f": {why}" if why else "")
    return UnsupportedOperationError(with_location(msg))


def spec_of(op: str):
    return OPS[op]
