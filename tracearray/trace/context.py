"""What is in force while a function is being traced, and only then.

``tracing()`` (a context manager, one per ``trace_function`` call) makes four things true for
the duration of the trace and undoes them afterwards:

1. **Argument conversion passes tracers through.** ``np.asarray``, ``np.array``,
   ``np.asanyarray``, ``np.ascontiguousarray``, ``np.asfortranarray`` and
   ``np.asarray_chkfinite`` are C functions (or call them) that neither ``__array_ufunc__`` nor
   ``__array_function__`` reaches: on a tracer they would ask for its concrete value. Every
   binding of them in a NumPy module, in the traced function's globals and in the user's own
   modules (``_user_modules``: where helpers the function calls bind ``from numpy import
   asarray``) is replaced by a wrapper that returns the traced value (``array`` copies, the
   others may alias, as NumPy's do) and calls NumPy's function for anything else. This is
   what lets NumPy's own Python implementations (``np.diff``, ``np.vstack``, ...) run on
   tracers. The replacement is reference counted across threads (installed by the first
   trace, removed by the last) and the wrappers do not depend on which thread calls them, so
   code running outside a trace sees NumPy's behaviour (at the cost of one Python call while
   a trace is running somewhere).
2. **Random numbers are drawn by the kernels.** A call of ``np.random.*`` evaluated while
   tracing would be frozen into the graph (every call would return the same numbers), so the
   legacy functions and ``default_rng`` that ``trace/random.py`` implements are replaced by
   their traced versions (``random.replacement``), whose keys come from graph inputs the call
   path fills at every call (``TraceState.key_input``); the other ``np.random`` functions raise
   ``UnsupportedOperationError`` naming the call and the user's line. Generators passed as
   arguments are traced (``random.TracedGenerator``); generators reachable from the function
   otherwise (globals, closures, static arguments) are refused by ``trace_function``.
3. **Arrays the user's code makes are its own.** ``np.zeros``, ``np.ones``, ``np.empty``,
   ``np.full`` (and their ``_like`` forms of NumPy arrays), ``np.arange``, ``np.linspace``,
   ``np.eye``, ``np.identity``, ``np.tri`` and ``np.array`` of Python data, called from the
   traced function (not from NumPy's own code), return traced values in memory of their own
   (``buffers.Buffer``): writable, with values known while tracing (``build.known_value``).
   So do window functions, ``np.indices`` and ``np.fft.fftfreq`` / ``rfftfreq``
   (``_CONSTANT_MAKERS``), which a traced index can then pick from.
4. **Run-time checks can be recorded** (``require``): a boolean 0-d value that must be True
   when the compiled function runs (``np.asarray_chkfinite`` of a value with an inf), with the
   error NumPy would raise. The graph carries them as extra outputs; the call raises.
5. **Sizes that depend on the data are asked for** (``data_size``): ``x[mask]``, ``nonzero``,
   ``bincount`` need a number only the data knows (how many elements are True). The trace
   stops there (``SizeNeeded``) with that number as the graph's only output (a *probe*); the
   compiled function runs the probe on the call's arguments and traces again with the number
   known (``TraceState.sizes``), up to the next such point. Each distinct number is a trace of
   its own (kernels are size-generic, so a new number compiles nothing new).
"""
from __future__ import annotations

import builtins
import contextlib
import dis
import functools
import itertools
import os
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .. import config
from .. import errors as _errors
from .captured import CAPTURABLE
from ..errors import (ConcretizationError, TraceDTypeError, UnsupportedOperationError,
                      record_location, user_location, with_location)


@dataclass
class Check:
    """``node`` (a bool 0-d graph node) must be True at run time, else ``error(message)``."""
    node: Any
    error: type[BaseException]
    message: str


@dataclass
class TraceState:
    function: str = ""      # the traced function's name, for errors
    # set when the trace is over: its tracers are dead (Tracer.node raises)
    ended: bool = False
    checks: list[Check] = field(default_factory=list)
    # the user's line that made each node in this trace (nodes are interned: another trace
    # may have made the same node at another line)
    locations: dict = field(default_factory=dict)
    ops: int = 0            # graph operations made so far (see MAX_TRACE_OPS)
    # data-dependent sizes known from earlier stages of this call, in the order asked for
    sizes: tuple[int, ...] = ()
    sizes_used: int = 0
    # random draws (trace/random.py): ``key_input(source)`` is the 0-d uint64 graph input the
    # call fills with a fresh key from ``source`` ("global": NumPy's global RandomState;
    # "entropy": the OS), one per source and trace; the legacy functions' generator; how
    # many unseeded default_rng() generators were made
    key_input: Callable[[str], Any] | None = None
    random_global: Any = None
    random_generators: int = 0
    # Whether anything read a traced array's sizes as Python numbers (``x.shape``, ``len(x)``,
    # ``x.size``, iteration): code that did may have branched on them or built them into the
    # graph, so the graph is not re-derived for other sizes (``trace/resize.py``).
    sizes_read: bool = False
    # Whether the function assigned a global (a side effect of the trace, done once per trace)
    wrote_globals: bool = False
    # > 0 while np.vectorize traces its function on stand-ins of one element
    # (trace/vectorize.py): their values cannot be computed by a probe
    element_traces: int = 0
    # np.vectorize's branches on an element's value (trace/vectorize.py): the decisions the
    # current run of the function takes at its first branches, and how many it has taken
    element_decisions: list | None = None
    element_taken: int = 0
    # arrays reached through closures, defaults, bound objects and global containers: graph
    # inputs found again at every call (trace/captured.py; ``build.constant`` asks it)
    captured: Any = None
    # where the trace first wrote memory laid out as the arguments (``Buffer.from_arguments``)
    # after deciding a reshape of it a view or a copy as for C-ordered arguments, and the
    # graph-input indices of those arguments (``Trace.assumes_c_arguments``)
    assumed_c_layout: str | None = None
    assumed_c_inputs: set = field(default_factory=set)
    # where the trace read an argument's raw memory (as_strided with explicit strides, taken
    # in a C-contiguous layout), and the graph-input indices of those arguments: a call with
    # one that is not C-contiguous is refused (``api._check_argument_layouts``)
    raw_memory_at: str | None = None
    raw_memory_inputs: set = field(default_factory=set)
    # the first number this attempt asked the data for (``data_size``), whether or not the
    # user's code let the request through
    size_needed: Any = None
    # the tracer's own frame that calls the user's function (``importing``)
    entry_frame: Any = field(default=None, repr=False, compare=False)
    # the global arrays the function read (graph inputs): node -> (name, array), for the
    # values a NumPy function needs known while tracing (``build.needed_value``)
    global_arrays: dict = field(default_factory=dict)
    # the refusals made while the trace ran (``errors._note_refusal``): one the user's own
    # code caught is raised at the trace's end (``refusal_caught_by_user``)
    refusals: list = field(default_factory=list)
    # whether large slice assignments into the function's own memory are joins (the CPU's
    # choice; a GPU runs the one select kernel faster: buffers.JOIN_MIN_ELEMENTS)
    joins: bool = True
    # > 0 while NumPy's own implementation of a function runs on traced values
    # (dispatch.run_numpy_implementation): its conversions of such arrays give their inputs
    numpy_implementations: int = 0


class SizeNeeded(BaseException):
    """Raised by ``data_size`` when the trace needs a number the data decides: ``count`` (an
    integer 0-d node) is computed by a probe and the trace runs again with it. A
    BaseException, so that the user's ``except Exception`` does not swallow it."""

    def __init__(self, count: Any, what: str):
        super().__init__(what)
        self.count = count
        self.what = what


# A trace that makes more operations than this stops: a Python loop over array elements
# unrolls into operations per step, and past this size compiling takes minutes.
MAX_TRACE_OPS = config.max_trace_ops()


def note_location(node: Any) -> None:
    """Count a made node against the trace's budget and record the user's line that made it,
    for this trace and (the first line, ``errors.node_location``) for good."""
    state = current()
    if state is None:
        record_location(node)
        return
    state.ops += 1
    if state.ops > MAX_TRACE_OPS:
        state.ops = -(1 << 62)   # raise once
        raise UnsupportedOperationError(with_location(
            f"the traced program grew past {MAX_TRACE_OPS} operations (a Python loop over "
            f"array elements unrolls into operations for every step); write the loop with "
            f"whole-array operations (slices, np.where, np.cumsum, ...), or raise the limit "
            f"with TRACEARRAY_MAX_TRACE_OPS"))
    if node not in state.locations:
        where = user_location()   # (once: the global record below takes the same line)
        if where:
            state.locations[node] = where
            record_location(node, where)


_local = threading.local()


def current() -> TraceState | None:
    """The state of the trace running in this thread (None outside a trace)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def outside_trace() -> Any:
    """NumPy as it is outside a trace, in this thread, for code that must not be traced
    (an argument object's ``__array__``, which may build its array with NumPy calls)."""
    stack = getattr(_local, "stack", None)
    _local.stack = []
    try:
        yield
    finally:
        _local.stack = stack


MAX_REFUSALS = 64   # refusals kept per trace (NumPy's own code may try and catch many)


def _note_refusal(error: BaseException) -> None:
    state = current()
    if state is not None and len(state.refusals) < MAX_REFUSALS:
        state.refusals.append((error, isinstance(error, AttributeError) and _asked_by_user()))


def _asked_by_user() -> bool:
    """Whether the first frame outside tracearray on the stack is the user's (who asked for
    the attribute being refused; ``hasattr`` and ``getattr`` make no frame of their own)."""
    from .captured import _user_file
    from ..errors import _PKG_DIR
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    return f is not None and _user_file(f.f_code.co_filename)


_errors._note_refusal = _note_refusal


def refusal_caught_by_user(state: TraceState) -> BaseException | None:
    """A refusal made while the trace ran that the user's code caught (the frame at the head
    of its traceback, where it stopped, is the user's): the function went on along its
    ``except`` path, which NumPy, raising nothing there, would not take."""
    from .captured import _user_file
    for error, asked_by_user in state.refusals:
        tb = error.__traceback__
        if tb is None:
            # never reached a Python ``except``: an attribute the user's code asked for by
            # ``hasattr`` / ``getattr(x, name, default)`` (which catch it in C) is the user's
            if asked_by_user:
                return error
        elif _user_file(tb.tb_frame.f_code.co_filename):
            return error
    return None


def note_sizes_read() -> None:
    """A traced array's sizes were read as Python numbers (see ``TraceState.sizes_read``)."""
    state = current()
    if state is not None:
        state.sizes_read = True


# Parameters whose integers are never compared with an array's sizes: axes (ranks), counts
# of degrees of freedom and decimals, dtypes and flags, and the array operands themselves
# (an integer there is a 0-d value). Any other integer given to a NumPy function, an ndarray
# method or an index may be (a shape, a repeat count, a slice bound, ``n=`` of np.diff), and
# code that compares one with a size can leave nothing in the graph (``x.reshape(23)`` of a
# 23-element x, ``x[:100]`` of a shorter one): such a trace holds for its sizes only.
SIZE_FREE_PARAMETERS = frozenset({
    "axis", "axes", "axis1", "axis2", "source", "destination", "keepdims", "dtype", "ddof",
    "correction", "decimals", "casting", "order", "copy", "subok", "initial", "where", "out",
    "a_min", "a_max", "min", "max", "fill_value", "nan", "posinf", "neginf", "rtol", "atol",
    "equal_nan", "deg", "kind", "side",
    "a", "b", "x", "y", "x1", "x2", "arr", "array", "ary", "m", "v", "condition", "self"})


def _holds_integer(value: Any, depth: int = 0) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, np.integer)):
        return True
    if isinstance(value, slice):
        return any(_holds_integer(v) for v in (value.start, value.stop, value.step))
    if isinstance(value, (tuple, list)) and depth < 4:
        return any(_holds_integer(v, depth + 1) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return True   # (a concrete index array or shape)
    return False


def note_index_key(key: Any) -> None:
    """An index (``x[key]``, ``x[key] = v``): integers in it (positions, slice bounds) are
    compared with sizes."""
    state = current()
    if state is not None and not state.sizes_read and _holds_integer(key):
        state.sizes_read = True


def note_integer_arguments(parameters: Any, args: tuple, kwargs: dict) -> None:
    """Note a size read when an integer is given to a parameter that may be compared with a
    size (``SIZE_FREE_PARAMETERS``). ``parameters``: the callee's ``inspect.Signature``, or
    None when it has none (then every integer argument counts)."""
    state = current()
    if state is None or state.sizes_read or not (
            _holds_integer(args) or _holds_integer(tuple(kwargs.values()))):
        return   # (most calls pass no integer: nothing to bind)
    if parameters is not None:
        try:
            bound = parameters.bind(*args, **kwargs).arguments
        except TypeError:   # (the callee raises its own error for these arguments)
            bound = None
        if bound is not None:
            for name, value in bound.items():
                kind = parameters.parameters[name].kind
                if kind is kind.VAR_KEYWORD or name not in SIZE_FREE_PARAMETERS:
                    if _holds_integer(value):
                        state.sizes_read = True
                        return
            return
    state.sizes_read = True


def values_may_be_staged() -> bool:
    """Whether a value the trace needs as a Python number can be computed by a probe
    (``data_size``): in a trace, outside np.vectorize's element trace."""
    state = current()
    return state is not None and state.element_traces == 0


def data_size(count: Any, what: str) -> int:
    """The run-time value of the integer 0-d node ``count``, a size the data decides (see
    the module docstring, item 5)."""
    state = current()
    if state is None:   # pragma: no cover - only expansions inside a trace ask
        raise RuntimeError("data_size() outside a trace")
    if state.sizes_used < len(state.sizes):
        n = state.sizes[state.sizes_used]
        state.sizes_used += 1
        return n
    if state.size_needed is None:
        # (kept: a bare ``except:`` of the user's may catch the request and go on along
        # another path, which the trace must not keep: ``trace._trace`` asks for it anyway)
        state.size_needed = SizeNeeded(count, what)
    raise state.size_needed


def require(node: Any, error: type[BaseException], message: str) -> None:
    """Record a run-time check of the current trace (see the module docstring)."""
    state = current()
    if state is None:   # pragma: no cover - composites only run inside a trace
        raise RuntimeError("require() outside a trace")
    state.checks.append(Check(node, error, with_location(message)))


# ============================================================================================
# Argument conversion
# ============================================================================================

_TRACED_TYPES: tuple = ()


def _is_tracer(x: Any) -> bool:
    global _TRACED_TYPES
    if not _TRACED_TYPES:   # (the modules import this one: resolved at the first use)
        from .complex import ComplexTracer
        from .complex_selection import ComplexSelection
        from .selection import MaskedSelection
        from .tracer import Tracer
        _TRACED_TYPES = (Tracer, MaskedSelection, ComplexTracer, ComplexSelection)
    return isinstance(x, _TRACED_TYPES)


def _holds_tracer(x: Any) -> bool:
    if _is_tracer(x):
        return True
    if isinstance(x, (list, tuple)):
        return any(_holds_tracer(v) for v in x)
    return False


def _traced(a: Any, dtype: Any = None, copy: bool = False, ndmin: int = 0) -> Any:
    """``a`` (a tracer, or nested lists/tuples holding tracers) as one traced array."""
    from . import numpy_api as api
    from .complex import ComplexTracer, as_complex
    from .selection import MaskedSelection
    from .tracer import Tracer, as_array_memory
    from .complex_selection import ComplexSelection
    if isinstance(a, (MaskedSelection, ComplexSelection)):
        a = a.compact()             # x[mask] converted: the selected elements
    if isinstance(a, ComplexTracer) or (isinstance(a, (list, tuple)) and any(
            isinstance(v, ComplexTracer) for v in a)):
        if isinstance(a, (list, tuple)):
            a = np.stack([as_complex(v) if isinstance(v, ComplexTracer) else v for v in a])
        out = a.copy() if copy else a
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = out.astype(dtype)
        if ndmin > out.ndim:
            out = out.reshape((1,) * (ndmin - out.ndim) + out.shape)
        return out
    # (NumPy's conversions make ndarrays: a NumPy scalar converted is a new 0-d array)
    if _is_tracer(a):
        out = as_array_memory(a) if not copy else as_array_memory(Tracer(a.node))
    else:
        out = as_array_memory(Tracer(api.array_from_nested(a)))
    if dtype is not None and np.dtype(dtype) != out.dtype:
        out = out.astype(dtype)
    if ndmin > out.ndim:
        out = out.reshape((1,) * (ndmin - out.ndim) + out.shape)
    return out


def _conversion(name: str, original: Callable[..., Any], copies: bool) -> Callable[..., Any]:
    def convert(a: Any = None, *args: Any, **kwargs: Any) -> Any:
        state = current() if type(a) in CAPTURABLE else None
        if state is not None and state.numpy_implementations and _from_numpy(2):
            # NumPy's own implementation, run on traced values (np.polyval(self.p, x)),
            # converting an array the function reached through a closure, the bound object,
            # ...: its graph input, so that the result follows the array's values
            # (trace/captured.py). (Without a traced operand, NumPy computes the function
            # once, while tracing: docs/sharp-bits.md.)
            from .build import captured_node
            node = captured_node(a)
            if node is not None:
                from .tracer import Tracer
                a = Tracer(node)
        if not _holds_tracer(a):
            out = original(a, *args, **kwargs)
            # np.array(...) of Python data in the user's code: an array of the function's
            # own (np.asarray of an existing NumPy array stays that array: it may alias it)
            # (not where compiled code the user's line called converts: np.random's Cython
            # constructors (SeedSequence(1)) take the real array, as np.empty's callers do)
            if current() is not None and (copies or not isinstance(a, np.ndarray)) and \
                    not isinstance(a, np.generic) and _from_user_code(2) and \
                    _calls_it_itself(1, (convert, original)):
                return owned(out)
            return out
        dtype = kwargs.get("dtype", args[0] if args else None)
        copy = kwargs.get("copy", True if copies else None)
        if isinstance(copy, np._CopyMode):   # (SciPy passes np._CopyMode.IF_NEEDED)
            copy = {np._CopyMode.ALWAYS: True, np._CopyMode.NEVER: False}.get(copy)
        if copy is False and dtype is not None and getattr(a, "dtype", None) is not None \
                and np.dtype(dtype) != a.dtype:
            raise ValueError(with_location(
                "Unable to avoid copy while creating an array as requested."))
        out = _traced(a, dtype, copy=bool(copy) if copies else copy is True,
                      ndmin=int(kwargs.get("ndmin", 0)) if name == "array" else
                      1 if name in _ORDERS else 0)   # (ascontiguousarray: at least 1-d)
        # the memory layout asked for: the array itself where it already is so laid out,
        # else a copy (np.ascontiguousarray(x.T) is new memory; writes into it stay there)
        order = _ORDERS.get(name) or kwargs.get("order",
                                                args[1] if len(args) > 1 and not copies else None)
        if isinstance(order, str) and not (copies and copy) and hasattr(out, "_as_order"):
            out = out._as_order(order.upper(), never_copy=copy is False)
        elif copies and copy and hasattr(out, "_as_order") and out is not a:
            # np.array's copy is laid out in ``order`` (its default 'K': as ``a``)
            from .tracer import inherit_layout
            o = order.upper() if isinstance(order, str) else "K"
            if o == "F" and sum(n > 1 for n in out.shape) > 1:
                out._buf.layout_known = False
            elif o in ("K", "A"):
                inherit_layout(out, a)
        return out
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = original.__doc__
    convert.__wrapped__ = original   # type: ignore[attr-defined]
    return convert


def _asarray_chkfinite(original: Callable[..., Any]) -> Callable[..., Any]:
    def asarray_chkfinite(a: Any, dtype: Any = None, order: Any = None) -> Any:
        if not _holds_tracer(a):
            return original(a, dtype, order)
        out = _traced(a, dtype)
        if out.dtype.kind == "f":
            # NumPy raises when the data hold an inf or NaN: a run-time check.
            require(np.isfinite(out).all().node, ValueError,
                    "array must not contain infs or NaNs")
        return out
    asarray_chkfinite.__wrapped__ = original   # type: ignore[attr-defined]
    return asarray_chkfinite


# ============================================================================================
# Arrays the function makes are its own memory
# ============================================================================================

# NumPy functions that make a new array from Python values. Called from the user's code
# while tracing, their result is a traced value of the function's own (its values known, so
# Python can still use them as indices, sizes or loop ranges): ``out = np.zeros(n);
# out[1:-1] = ...`` writes into it. Calls from NumPy's own implementations keep getting
# NumPy arrays (their code may need concrete ones).
_CREATIONS = ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
              "full_like", "arange", "linspace", "eye", "identity", "tri")
_UNIFORM = frozenset({"zeros", "ones", "empty", "full", "zeros_like", "ones_like",
                      "empty_like", "full_like"})


def _from_numpy(depth: int) -> bool:
    """Whether the caller ``depth`` frames up is NumPy's own code."""
    name = sys._getframe(depth).f_globals.get("__name__", "") or ""
    return name == "numpy" or name.startswith("numpy.")


def _from_user_code(depth: int) -> bool:
    """Whether the caller ``depth`` frames up makes arrays as a user's code does: anything
    but NumPy and tracearray, and numpy.polynomial, whose functions fill arrays they make
    with their arguments' values (polyvander's ``v = np.empty(...); v[0] = x * 0 + 1``), which
    a NumPy array cannot hold while tracing."""
    frame = sys._getframe(depth)
    if importing(depth):
        # a module imported for the first time while a trace runs (np.polynomial's class
        # attributes, a user module's constants, made by its top level or a function it
        # calls): its arrays outlive the trace, so they are NumPy's own
        return False
    name = frame.f_globals.get("__name__", "") or ""
    if name.startswith("numpy.polynomial.") or name == "numpy.lib._polynomial_impl":
        return True
    return not (name == "numpy" or name.startswith("numpy.") or name == "tracearray"
                or name.startswith("tracearray."))


_CO_NEWLOCALS = 0x2   # (inspect.CO_NEWLOCALS: a function's frame, not a module's or class's)


def importing(depth: int = 1) -> bool:
    """Whether the code ``depth`` frames up runs under a module's or a class body's code
    (no CO_NEWLOCALS) that the traced function started: an import (or a class statement)
    inside the function, whose objects outlive the trace."""
    state = current()
    entry = state.entry_frame if state is not None else None
    frame = sys._getframe(depth + 1)
    while frame is not None and frame is not entry:
        if not frame.f_code.co_flags & _CO_NEWLOCALS:
            return entry is not None
        frame = frame.f_back
    return False


def _calls_it_itself(depth: int, fns: tuple) -> bool:
    """Whether the frame ``depth`` up is itself calling one of ``fns`` (the replacement or
    NumPy's function): its current call's callee, read from its bytecode, is that object.
    Compiled code it called may be the caller instead, with no frame of its own: a
    Generator's draw runs NumPy's ``np.empty`` from Cython and casts the result to an
    ndarray unchecked, so a traced value there crashed the interpreter. Unknown (Python
    3.10: no column positions) counts as calling it."""
    frame = sys._getframe(depth + 1)
    callee = _callee(frame.f_code, frame.f_lasti)
    if callee is None:
        return True
    how, name = callee
    if how == "attr":
        return name in {getattr(f, "__name__", None) for f in fns}
    if how == "fast":
        value = frame.f_locals.get(name)
    else:
        value = frame.f_globals.get(name, getattr(builtins, name, None))
    return any(value is f for f in fns)


@functools.lru_cache(maxsize=4096)
def _callee(code: Any, lasti: int) -> tuple[str, str] | None:
    """How the call at ``lasti`` of ``code`` loads its callee: ("attr" | "global" | "fast",
    name), from the load that starts where the call does and ends last before it; None
    when that cannot be told."""
    try:
        ins = list(dis.get_instructions(code))
    except Exception:   # noqa: BLE001
        return None
    at = next((i for i in ins if i.offset == lasti), None)
    if at is None or not at.opname.startswith(("CALL", "PRECALL")) or \
            getattr(at, "positions", None) is None or at.positions.col_offset is None:
        return None
    pos = at.positions
    best = None
    for i in ins:
        if i.offset >= lasti:
            break
        p = i.positions
        if p is None or p.lineno != pos.lineno or p.col_offset != pos.col_offset or \
                p.end_col_offset is None or p.end_col_offset >= pos.end_col_offset:
            continue
        if i.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            kind = "attr"
        elif i.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            kind = "global"
        elif i.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW"):
            kind = "fast"
        else:
            continue
        if best is None or p.end_col_offset >= best[0]:
            best = (p.end_col_offset, kind, i.argval)
    return None if best is None else (best[1], best[2])


def owned(arr: Any, uniform: bool = False) -> Any:
    """A NumPy array made inside the function as a traced value of its own memory (arrays of
    a dtype tracearray lacks stay NumPy arrays). A uniform fill is one constant broadcast,
    not a copy of every element."""
    from . import numpy_api as api
    from .build import SUPPORTED_DTYPES, constant
    from .tracer import Tracer, as_array_memory
    if isinstance(arr, np.ndarray) and arr.dtype.newbyteorder("=") in (
            np.dtype(np.complex64), np.dtype(np.complex128)):
        # a complex array of the function's own: its two parts are
        from .complex import ComplexTracer
        return ComplexTracer(owned(arr.real.copy(), uniform), owned(arr.imag.copy(), uniform))
    if not isinstance(arr, np.ndarray) or arr.dtype not in SUPPORTED_DTYPES:
        return arr
    out = None
    if uniform and arr.size > 1:
        first = np.ascontiguousarray(arr).reshape(-1)[:1]
        if np.ascontiguousarray(arr).tobytes() == first.tobytes() * arr.size:   # bit-equal
            out = Tracer(api.broadcast_to(constant(first.reshape(())), arr.shape))
    if out is None:
        out = as_array_memory(Tracer(constant(arr)))   # (np.zeros(()) is a 0-d ndarray)
    if not arr.flags.c_contiguous and sum(n > 1 for n in arr.shape) > 1:
        out._buf.layout_known = False   # (order='F': a layout the trace does not model)
    return out


def _full_of_traced(shape: Any, fill_value: Any = None, dtype: Any = None, order: str = "C",
                    **_: Any) -> Any:
    """``np.full(shape, traced_fill)``: the fill broadcast (its dtype unless ``dtype=``)."""
    from . import numpy_api as api
    from .tracer import Tracer, as_array_memory
    if isinstance(fill_value, (list, tuple)) and _holds_tracer(fill_value):
        fill_value = _traced(fill_value)   # a row of traced values, as np.asarray makes it
    if not _is_tracer(fill_value) or _holds_tracer(shape):
        return None
    shp = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not isinstance(fill_value, Tracer):   # (a complex fill: its two parts broadcast)
        value = fill_value if dtype is None else fill_value.astype(dtype)
        return np.copy(np.broadcast_to(value, shp))
    node = fill_value.node if dtype is None else api.astype(fill_value.node, dtype)
    return as_array_memory(Tracer(api.broadcast_to(node, shp)))


def _as_sizes(x: Any) -> Any:
    """A 0-d integer tracer (or a tuple or list of sizes holding them) as Python ints."""
    import operator
    if _is_tracer(x) and x.ndim == 0 and x.dtype.kind in "iu":
        return operator.index(x)
    if isinstance(x, (tuple, list)) and any(_is_tracer(v) for v in x):
        return type(x)(_as_sizes(v) for v in x)
    return x


def _creation(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    uniform = name in _UNIFORM

    def create(*args: Any, **kwargs: Any) -> Any:
        if current() is not None and _from_user_code(2):
            # traced integers as sizes (np.zeros(np.count_nonzero(m))): sizes the data
            # decides (data_size, through Tracer.__index__); a fill value stays traced
            # (a *_like function's first argument is the prototype array, not a size)
            sized = 0 if name.endswith("_like") else 1 if name == "full" else len(args)
            if name == "arange" and "dtype" not in kwargs and (
                    _holds_tracer(args) or _holds_tracer(tuple(kwargs.values()))):
                # the dtype NumPy gives the bounds' types (np.arange(np.uint64(n)) is
                # float64), decided before they become Python numbers
                def proxy(v: Any) -> Any:
                    return v.dtype.type(1) if _is_tracer(v) else v
                kwargs["dtype"] = original(*map(proxy, args),
                                           **{k: proxy(v) for k, v in kwargs.items()}).dtype
            args = tuple(_as_sizes(a) if i < sized else a for i, a in enumerate(args))
            kwargs = {k: _as_sizes(v) if k in ("shape", "N", "M", "k", "start", "stop", "step")
                      else v for k, v in kwargs.items()}
        if name == "full" and current() is not None and _from_user_code(2):
            filled = _full_of_traced(*args, **kwargs)
            if filled is not None:
                return filled
        if current() is None or _holds_tracer(args) or _holds_tracer(tuple(kwargs.values())) \
                or not _from_user_code(2) or not _calls_it_itself(1, (create, original)):
            return original(*args, **kwargs)
        out = original(*args, **kwargs)
        if name.startswith("empty"):   # NumPy's values are arbitrary: zeros will do
            out = np.zeros_like(out)
        return owned(out, uniform)
    create.__name__ = create.__qualname__ = name
    create.__doc__ = original.__doc__
    create.__wrapped__ = original   # type: ignore[attr-defined]
    return create


# NumPy functions that make constant arrays from Python numbers only (window functions, FFT
# sample frequencies, index grids): called from the user's code with no traced argument,
# their result is a traced constant of the function's own, so that a traced index can pick
# from it (``np.fft.rfftfreq(n)[np.argmax(power)]``: a NumPy array cannot be indexed by a
# traced value) and a write into it is traced. Python can still read its values.
_CONSTANT_MAKERS = ("hanning", "hamming", "blackman", "bartlett", "kaiser", "indices",
                    "fft.fftfreq", "fft.rfftfreq", "tril_indices", "triu_indices",
                    "diag_indices", "logspace", "geomspace")


def _owned_all(out: Any) -> Any:
    """``owned`` of an array, or of each array of a tuple or list of them (tril_indices)."""
    if isinstance(out, (tuple, list)):
        return type(out)(_owned_all(a) for a in out)
    return owned(out)


class _Grid:
    """``np.mgrid`` / ``np.ogrid`` while tracing: their grids, made from Python numbers, as
    traced constants of the function's own, as ``_constant_maker``'s (``np.mgrid[0:5][m]``
    with a traced mask ``m``: a NumPy array cannot be indexed by a traced value)."""

    def __init__(self, original: Any):
        self._original = original

    def __getitem__(self, key: Any) -> Any:
        out = self._original[key]
        if current() is None or _holds_tracer(key) or not _from_user_code(2):
            return out
        return _owned_all(out)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


def index_value(v: Any) -> Any:
    """A 0-d traced integer as the NumPy integer it holds (staged as ``int()`` of it is, one
    trace per value; NumPy's scalar, so NumPy's arithmetic of it is kept: fftfreq of
    np.int64(0) divides by zero as NumPy does, of np.uint8(10) wraps as NumPy does),
    anything else as it is: a NumPy integer passed as a size (``k = np.int64(3)``: a
    traced argument) where NumPy's code needs a number."""
    from .tracer import staged_number
    return staged_number(v, "iu")


def _constant_maker(original: Callable[..., Any]) -> Callable[..., Any]:
    def make(*args: Any, **kwargs: Any) -> Any:
        if current() is not None and _from_user_code(2):
            # (np.fft.fftfreq(n) of a traced n: NumPy's code checks for an int)
            args = tuple(index_value(a) for a in args)
            kwargs = {k: index_value(v) for k, v in kwargs.items()}
        out = original(*args, **kwargs)
        if current() is None or _holds_tracer(args) or _holds_tracer(tuple(kwargs.values())) \
                or not _from_user_code(2):
            return out
        return _owned_all(out)
    make.__name__ = make.__qualname__ = original.__name__
    make.__doc__ = original.__doc__
    make.__wrapped__ = original   # type: ignore[attr-defined]
    return make


_CONVERSIONS = {"asarray": False, "asanyarray": False, "ascontiguousarray": False,
                "asfortranarray": False, "array": True}
_ORDERS = {"ascontiguousarray": "C", "asfortranarray": "F"}


def _holds_traced_list(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and _holds_tracer(x)


def _list_method(original: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's ``_wrapreduction`` / ``_wrapreduction_any_all`` / ``_wrapfunc`` (np.max,
    np.sum, np.any, np.argmax, np.cumsum, np.round, ...): a Python list holding traced values
    is converted as np.asarray converts it, then the traced array's method runs (NumPy's
    own path converts the list in C, asking each tracer for its values)."""
    def wrapped(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if _holds_traced_list(obj):
            obj = _traced(obj)
        return original(obj, *args, **kwargs)
    wrapped.__name__ = wrapped.__qualname__ = original.__name__
    wrapped.__wrapped__ = original   # type: ignore[attr-defined]
    return wrapped


def _list_statistic(original: Callable[..., Any], method: str) -> Callable[..., Any]:
    """NumPy's ``_methods._mean`` / ``_var`` / ``_std`` (np.mean, np.var, np.std of what
    has no method of that name): a Python list holding traced values is converted, and the
    traced array's method computes the statistic (NumPy's helper wraps its result in the
    dtype's scalar type, which asks for the value)."""
    def wrapped(a: Any, *args: Any, **kwargs: Any) -> Any:
        if _holds_traced_list(a):
            return getattr(_traced(a), method)(*args, **kwargs)
        return original(a, *args, **kwargs)
    wrapped.__name__ = wrapped.__qualname__ = original.__name__
    wrapped.__wrapped__ = original   # type: ignore[attr-defined]
    return wrapped


def _traced_list(a: Any) -> Any:
    """A list holding traced values as one traced array, as np.asarray converts it; one of
    arrays of different lengths (np.concatenate's ``[(a, 1.0), (b,)]``) as a list of
    traced arrays, each converted so."""
    try:
        return _traced(a)
    except ValueError:
        if not isinstance(a, (list, tuple)):
            raise
        return [_traced(v) if _holds_tracer(v) else v for v in a]


def _list_arguments(original: Callable[..., Any]) -> Callable[..., Any]:
    """A NumPy function tracearray implements (a composite) given a Python list holding
    traced values where it takes an array (``np.dot([a, b], [c, d])``,
    ``np.percentile([x0, x1, x2], 50)``): NumPy's dispatch looks at the list, not at what it
    holds, so NumPy's own code runs and asks the values for their data (or meets what
    tracearray refuses). When that fails, the call is made again with such lists converted
    as np.asarray converts them, which dispatches to tracearray's implementation. (NumPy's
    conversion fails before its function does anything, so nothing runs twice.)"""
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except (ConcretizationError, TraceDTypeError, UnsupportedOperationError):
            lists = {i for i, a in enumerate(args) if _holds_traced_list(a)}
            keys = {k for k, v in kwargs.items() if _holds_traced_list(v)}
            if current() is None or not (lists or keys):
                raise
        return original(*[_traced_list(a) if i in lists else a for i, a in enumerate(args)],
                        **{k: _traced_list(v) if k in keys else v for k, v in kwargs.items()})
    wrapped.__name__ = wrapped.__qualname__ = getattr(original, "__name__", "function")
    wrapped.__doc__ = getattr(original, "__doc__", None)
    wrapped.__wrapped__ = original   # type: ignore[attr-defined]
    return wrapped


# ------------------------------------------------------------------ element iteration
def _ndenumerate(original: Any) -> Callable[..., Any]:
    """np.ndenumerate of a traced array: (index, element) in C order, the elements traced
    0-d values, as iterating over a traced array's rows is unrolled (NumPy's own class asks
    the array's ``flat`` iterator for C-level coordinates)."""
    def ndenumerate(arr: Any) -> Any:
        if not _holds_tracer(arr):
            return original(arr)
        a = _traced(arr)
        return ((idx, a[idx]) for idx in itertools.product(*(range(n) for n in a.shape)))
    ndenumerate.__wrapped__ = original   # type: ignore[attr-defined]
    return ndenumerate


def _fromiter(original: Callable[..., Any]) -> Callable[..., Any]:
    """np.fromiter of an iterable yielding traced values (``np.fromiter((f(v) for v in x),
    float)``): the first ``count`` items (all when -1) stacked into a traced array of
    ``dtype``, as NumPy reads them one by one (NumPy's own loop asks each for its value)."""
    def fromiter(iterable: Any, dtype: Any, count: int = -1, **kwargs: Any) -> Any:
        if current() is None:
            return original(iterable, dtype, count, **kwargs)
        items = list(iterable if count < 0 else itertools.islice(iterable, count))
        if 0 <= count and len(items) < count:
            raise ValueError(f"iterator too short: Expected {count} but iterator had only "
                             f"{len(items)} items.")
        if not _holds_tracer(items):
            return original(items, dtype, count, **kwargs)
        return _traced(items).astype(dtype)
    fromiter.__wrapped__ = original   # type: ignore[attr-defined]
    return fromiter


# NumPy functions that fail inside NumPy on a traced array (no __array_function__ dispatch
# reaches tracearray), by the name users call them: why, and what is traced instead.
_REFUSED_ON_TRACERS = {
    # its flags, buffering and writes through operands are a C iterator's
    "nditer": "write the loop as whole-array operations, or iterate with np.ndenumerate(x) "
              "or `for row in x`",
    # np.matrix is an ndarray subclass (NumPy fails inside it: a traced value is no buffer)
    "asmatrix": "ndarray subclasses are not traced; use 2-d arrays and the @ operator",
}


def _as_strided(original: Callable[..., Any]) -> Callable[..., Any]:
    """np.lib.stride_tricks.as_strided of a traced array (NumPy asks the array for its
    ``__array_interface__``, which a traced value has not): a view computed by the graph
    (``memory_views.as_strided``)."""
    def as_strided(x: Any, shape: Any = None, strides: Any = None, subok: bool = False,
                   writeable: bool = True) -> Any:
        if not _holds_tracer(x):
            return original(x, shape, strides, subok, writeable)
        from .memory_views import as_strided as traced
        return traced(x, shape, strides, writeable)
    as_strided.__wrapped__ = original   # type: ignore[attr-defined]
    return as_strided


def _refused(name: str, original: Any) -> Callable[..., Any]:
    """np.<name> of a traced array: refused by name (``_REFUSED_ON_TRACERS`` says why and
    what is traced instead); of anything else, NumPy's."""
    def refuse(op: Any, *args: Any, **kwargs: Any) -> Any:
        if _holds_tracer(op):
            raise UnsupportedOperationError(with_location(
                f"np.{name} of a traced array is not supported by tracearray: "
                f"{_REFUSED_ON_TRACERS[name]}"))
        return original(op, *args, **kwargs)
    refuse.__name__ = refuse.__qualname__ = name.rsplit(".", 1)[-1]
    refuse.__wrapped__ = original   # type: ignore[attr-defined]
    return refuse


def _list_helpers() -> list[tuple[Callable[..., Any], Callable[..., Any]]]:
    """(NumPy's helper, its replacement) for the reductions of Python lists (above); the
    helpers a NumPy version lacks are left out."""
    from numpy._core import _methods, fromnumeric
    out = []
    for name in ("_wrapreduction", "_wrapreduction_any_all", "_wrapfunc"):
        fn = getattr(fromnumeric, name, None)
        if callable(fn):
            out.append((fn, _list_method(fn)))
    for name, method in (("_mean", "mean"), ("_var", "var"), ("_std", "std")):
        fn = getattr(_methods, name, None)
        if callable(fn):
            out.append((fn, _list_statistic(fn, method)))
    return out


def _builtin_extreme(original: Callable[..., Any], pick: Callable[[Any, Any], Any]
                     ) -> Callable[..., Any]:
    """Python's ``max`` / ``min`` while a trace runs: of traced NumPy scalars of one dtype
    (``max(dp[i - 1, j] + s, dp[i, j - 1] - g)``, or a list of them), the fold Python
    makes (``if item > best: best = item``: the first of ties, and NaN only where it comes
    first) as traced selects, instead of one data-dependent branch per comparison (each a
    probe: ``MAX_DATA_SIZES``). Anything else (a traced array, which Python iterates), and
    every call outside the tracing thread, is Python's own. (The result is one of the items
    in Python, of their dtype: items of different dtypes or kinds would make its type depend
    on the data, so they branch.)"""
    def extreme(*args: Any, **kwargs: Any) -> Any:
        if kwargs or not args or current() is None:
            return original(*args, **kwargs)
        items = args if len(args) > 1 else args[0]
        from .tracer import Tracer
        if isinstance(items, types.GeneratorType):   # (max(dp[k] + c for k in ...))
            items = list(items)
            args = (items,)
        if not isinstance(items, (tuple, list)) or len(items) > MAX_FOLDED_ITEMS:
            return original(*args)
        if not items or not all(isinstance(v, Tracer) and v.ndim == 0 and v._is_numpy_scalar()
                                for v in items) or len({v.dtype for v in items}) != 1:
            return original(*args)
        best = items[0]
        for item in items[1:]:
            best = np.where(pick(item, best), item, best)[()]
        return best
    extreme.__name__ = extreme.__qualname__ = original.__name__
    extreme.__doc__ = original.__doc__
    extreme.__wrapped__ = original   # type: ignore[attr-defined]
    return extreme


MAX_FOLDED_ITEMS = 4096   # items of one max() / min() folded into selects, at most

_BUILTIN_EXTREMES = {"max": _builtin_extreme(builtins.max, lambda a, b: a > b),
                     "min": _builtin_extreme(builtins.min, lambda a, b: a < b)}


_REPLACEMENTS: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}


def _replacements() -> dict[int, tuple[Callable[..., Any], Callable[..., Any]]]:
    """id(NumPy's function) -> (NumPy's function, its tracer-passing replacement); built
    once, so that every site gets the same replacement object."""
    if not _REPLACEMENTS:
        for name, copies in _CONVERSIONS.items():
            fn = getattr(np, name)
            _REPLACEMENTS[id(fn)] = (fn, _conversion(name, fn, copies))
        fn = np.asarray_chkfinite
        _REPLACEMENTS[id(fn)] = (fn, _asarray_chkfinite(fn))
        for name in _CREATIONS:
            fn = getattr(np, name)
            _REPLACEMENTS[id(fn)] = (fn, _creation(name, fn))
        for fn, replacement in _list_helpers():
            _REPLACEMENTS[id(fn)] = (fn, replacement)
        for name in _CONSTANT_MAKERS:
            fn = np
            for part in name.split("."):
                fn = getattr(fn, part)
            if id(fn) not in _REPLACEMENTS:
                _REPLACEMENTS[id(fn)] = (fn, _constant_maker(fn))
        for grid in (np.mgrid, np.ogrid):
            _REPLACEMENTS[id(grid)] = (grid, _Grid(grid))
        for name, wrap in (("ndenumerate", _ndenumerate), ("fromiter", _fromiter)):
            fn = getattr(np, name)
            _REPLACEMENTS[id(fn)] = (fn, wrap(fn))
        fn = np.lib.stride_tricks.as_strided
        _REPLACEMENTS[id(fn)] = (fn, _as_strided(fn))
        for name in _REFUSED_ON_TRACERS:
            fn = np
            for part in name.split("."):
                fn = getattr(fn, part)
            _REPLACEMENTS[id(fn)] = (fn, _refused(name, fn))
        from .composites import COMPOSITES
        for fn in COMPOSITES:
            if not isinstance(fn, np.ufunc) and callable(fn) and id(fn) not in _REPLACEMENTS:
                _REPLACEMENTS[id(fn)] = (fn, _list_arguments(fn))
    return _REPLACEMENTS


# ============================================================================================
# Random numbers
# ============================================================================================

def _random_names() -> list[str]:
    rnd = np.random
    names = [n for n in dir(rnd) if not n.startswith("_") and callable(getattr(rnd, n))
             and not isinstance(getattr(rnd, n), type)]
    return names + ["default_rng"] if "default_rng" not in names else names


# NumPy's random functions as imported, before any trace replaced them: what user namespaces
# bind (``from numpy.random import rand``) and what other threads get while a trace runs.
_RANDOM_ORIGINALS: dict[str, Callable[..., Any]] = {n: getattr(np.random, n)
                                                    for n in _random_names()}


def _random_replacement(name: str) -> Callable[..., Any]:
    """What ``np.random.<name>`` does while a trace runs: in the tracing thread the traced
    draw of ``trace/random.py``, or an error for the functions it does not implement; in any
    other thread NumPy's own function."""
    from . import random as traced_random
    original = _RANDOM_ORIGINALS[name]
    traced = traced_random.LEGACY.get(name)

    def replacement(*args: Any, **kwargs: Any) -> Any:
        if current() is None or importing():   # (a module's draws at its import: NumPy's)
            return original(*args, **kwargs)
        if traced is not None:
            return traced(*args, **kwargs)
        raise UnsupportedOperationError(with_location(
            f"np.random.{name}() is not supported inside a compiled function (it would be "
            f"evaluated once, while tracing, and every call would return the same numbers); "
            f"supported: np.random.default_rng, a Generator argument, and the legacy "
            f"{', '.join(n for n in sorted(traced_random.LEGACY) if n != 'default_rng')}; "
            f"or draw the array outside and pass it in"))
    replacement.__name__ = name
    replacement.__qualname__ = f"random.{name}"
    return replacement


RANDOM_TYPES = (np.random.Generator, np.random.RandomState, np.random.BitGenerator)


def refuse_random_state(value: Any, where: str) -> None:
    """A random generator handed to a traced function: its draws would be frozen."""
    if isinstance(value, RANDOM_TYPES):
        raise UnsupportedOperationError(with_location(
            f"{where} is a NumPy random generator ({type(value).__name__}); its draws inside "
            f"a compiled function would be made once, while tracing, and frozen; pass a "
            f"np.random.Generator as an argument (it is advanced at every call), or draw the "
            f"random array outside and pass it in"))


# ============================================================================================
# Installing and removing
# ============================================================================================

_lock = threading.Lock()
_active = 0
_patched: list[tuple[dict, dict]] = []     # (namespace, {name: original value})
_site_cache: tuple[int, list[tuple[dict, str, Callable[..., Any]]]] | None = None
# User namespaces (the traced functions' globals), reference counted per binding: two
# threads tracing functions of one module share the replacement.
_user_patches: dict[tuple[int, str], list] = {}   # -> [namespace, original, count]


def _after_fork_in_child() -> None:
    """Only the forking thread survives a fork: the traces other threads were running will
    never end in the child, so undo what they installed (each entry is recorded before its
    replacement is made, so this holds at any point of an install) and give the child a
    fresh lock. A fork made while this thread itself traces keeps everything."""
    global _lock, _active
    _lock = threading.Lock()
    if current() is not None:
        return
    while _patched:
        ns, olds = _patched.pop()
        ns.update(olds)
    from . import vectorize
    vectorize.uninstall()
    for key, (ns, original, _count) in list(_user_patches.items()):
        ns[key[1]] = original
    _user_patches.clear()
    _active = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _numpy_sites() -> list[tuple[dict, dict[str, Callable[..., Any]]]]:
    """Every NumPy module dict with the replacements of the names it binds to a conversion
    or creation function, or a random function (np.random); cached until more modules are
    imported. Grouped per namespace so that installing is one ``dict.update`` each."""
    global _site_cache
    n = len(sys.modules)
    if _site_cache is not None and _site_cache[0] == n:
        return _site_cache[1]
    repl = _replacements()
    sites = []
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "numpy" or mod_name.startswith("numpy.")):
            continue
        ns = getattr(mod, "__dict__", None)
        if not isinstance(ns, dict):
            continue
        news = {}
        for name, value in list(ns.items()):
            hit = repl.get(id(value))
            if hit is not None and hit[0] is value:
                news[name] = hit[1]
        if ns is np.random.__dict__:
            news.update({name: r for name, (_fn, r) in _random_replacements().items()})
            news.update(_random_classes())
        if news:
            sites.append((ns, news))
    sites.append((builtins.__dict__, _BUILTIN_EXTREMES))
    _site_cache = (n, sites)
    return sites


_user_module_cache: tuple[int, list[dict]] | None = None


def _library_roots() -> tuple[str, ...]:
    # (the standard library's folder is os's; sysconfig is not imported: its configuration
    # data cost about a millisecond of a process's first call)
    import site
    roots = {os.path.dirname(os.__file__)}
    for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
        roots.add(os.path.join(prefix, "lib", f"python{sys.version_info[0]}."
                                              f"{sys.version_info[1]}"))
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    try:
        roots.add(site.getusersitepackages())
    except AttributeError:  # pragma: no cover - a site module without user site-packages
        pass
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tracearray
    return tuple(os.path.abspath(r) + os.sep for r in roots if r)


def _user_modules() -> list[dict]:
    """The namespaces of the user's own modules (``__main__`` and modules loaded from
    outside the standard library, site-packages and tracearray): where a helper the traced
    function calls may bind a NumPy function by name (``from numpy import asarray``).
    Cached until more modules are imported; their bindings are read afresh each trace."""
    global _user_module_cache
    n = len(sys.modules)
    if _user_module_cache is not None and _user_module_cache[0] == n:
        return _user_module_cache[1]
    roots = _library_roots()
    found = []
    for mod in list(sys.modules.values()):
        ns = getattr(mod, "__dict__", None)
        path = ns.get("__file__") if isinstance(ns, dict) else None
        if isinstance(path, str) and not os.path.abspath(path).startswith(roots):
            found.append(ns)
        elif isinstance(ns, dict) and ns.get("__name__") == "__main__":
            found.append(ns)
    _user_module_cache = (n, found)
    return found


# id(module namespace) -> (its length then, the names it bound to replaced functions)
_module_names: dict[int, tuple[int, tuple[str, ...]]] = {}


def _bound_names(ns: dict) -> tuple[str, ...]:
    """The names of a user module's namespace bound to functions a trace replaces (or
    replaced now), found again when names were added or removed: a scan of every user
    module's every name at each trace took about a millisecond in a test run's process."""
    cached = _module_names.get(id(ns))
    if cached is not None and cached[0] == len(ns):
        return cached[1]
    repl = _user_replacements()
    found = []
    for name, value in list(ns.items()):
        hit = repl.get(id(value))
        if (hit is not None and hit[0] is value) or (id(ns), name) in _user_patches:
            found.append(name)
    _module_names[id(ns)] = (len(ns), tuple(found))
    return _module_names[id(ns)][1]


_RANDOM_REPLACEMENTS: dict[str, tuple[Any, Callable[..., Any]]] = {}


def _random_replacements() -> dict[str, tuple[Any, Callable[..., Any]]]:
    """name -> (NumPy's function, its replacement), built once: every site gets the same
    replacement object."""
    if not _RANDOM_REPLACEMENTS:
        for name, fn in _RANDOM_ORIGINALS.items():
            _RANDOM_REPLACEMENTS[name] = (fn, _random_replacement(name))
    return _RANDOM_REPLACEMENTS


def _random_classes() -> dict[str, Any]:
    """np.random's generator classes as a trace sees them (trace/random.py
    ``CHECKED_CLASSES``: isinstance as the classes', construction checked)."""
    from . import random as traced_random
    return traced_random.checked_classes()


def _user_replacements() -> dict[int, tuple[Any, Callable[..., Any]]]:
    """Conversions and NumPy's random functions, by the id of the object a user namespace
    may bind (``from numpy import asarray``, ``from numpy.random import rand``). The ids are
    those of NumPy's functions as imported (``_RANDOM_ORIGINALS``): looked up in np.random
    after a trace had replaced them, they were the replacements' ids, a user's binding kept
    NumPy's function, and NumPy's random code ran on tracers (a segfault)."""
    global _USER_REPLACEMENTS
    if _USER_REPLACEMENTS is None:
        randoms = {id(fn): (fn, repl) for fn, repl in _random_replacements().values()}
        classes = {id(getattr(np.random, n)): (getattr(np.random, n), r)
                   for n, r in _random_classes().items()}
        _USER_REPLACEMENTS = {**_replacements(), **randoms, **classes}
    return _USER_REPLACEMENTS


_USER_REPLACEMENTS: dict[int, tuple[Any, Callable[..., Any]]] | None = None
_ORIGINALS: dict[int, tuple[Any, Any]] | None = None


def replaced(value: Any) -> Any:
    """The replacement a trace installs for ``value`` where it is one of NumPy's conversion
    or random functions (bound in a closure or as a default: ``convert=np.asarray``), else
    ``value``."""
    hit = _user_replacements().get(id(value))
    return hit[1] if hit is not None and hit[0] is value else value


def unpatched(value: Any) -> Any:
    """The object a user's module binds when no trace runs: NumPy's function for one of
    the replacements a trace installs there (``from numpy.random import rand`` reads the
    traced draw while tracing; a guard must hold NumPy's, which the module holds again
    afterwards), else ``value``."""
    global _ORIGINALS
    if _ORIGINALS is None:
        _ORIGINALS = {id(repl): (repl, fn) for fn, repl in _user_replacements().values()}
    hit = _ORIGINALS.get(id(value))
    return hit[1] if hit is not None and hit[0] is value else value


def _patch_user(namespace: dict | None, names: Sequence[str] | None = None
                ) -> list[tuple[int, str]]:
    """Replace the conversion and random functions bound in ``namespace`` (of ``names``
    only, when given); the keys to release."""
    if not namespace or any(namespace is ns for ns, _olds in _patched):
        return []
    repl = _user_replacements()
    keys = []
    items = list(namespace.items()) if names is None else \
        [(n, namespace[n]) for n in names if n in namespace]
    for name, value in items:
        key = (id(namespace), name)
        entry = _user_patches.get(key)
        if entry is not None:
            entry[2] += 1
            keys.append(key)
            continue
        hit = repl.get(id(value))
        if hit is not None and hit[0] is value:
            _user_patches[key] = [namespace, value, 1]
            namespace[name] = hit[1]
            keys.append(key)
    return keys


def _release_user(keys: list[tuple[int, str]]) -> None:
    for key in keys:
        entry = _user_patches[key]
        entry[2] -= 1
        if entry[2] == 0:
            ns, original, _ = entry
            del _user_patches[key]
            ns[key[1]] = original


@contextlib.contextmanager
def tracing(user_globals: dict | None = None, state: TraceState | None = None,
            module_globals: dict | None = None) -> Iterator[TraceState]:
    """Run a trace: conversions pass tracers through, random calls are refused, checks are
    collected into the returned state, whose ``sizes`` answer ``data_size`` (see the module
    docstring). ``user_globals``: the traced function's globals (its recording copy);
    ``module_globals``: its module's own, which the module's other functions (helpers the
    traced function calls) read: NumPy functions bound in both are replaced while the trace
    runs (the replacements pass anything that is not traced on to NumPy's)."""
    global _active
    state = state if state is not None else TraceState()
    # Modules that key tables by NumPy's functions are imported before the functions are
    # replaced (imported during a trace, they would key them by the replacements)
    from . import complex_selection, selection, vectorize  # noqa: F401
    with _lock:
        if _active == 0:
            for ns, news in _numpy_sites():
                _patched.append((ns, {name: ns.get(name) for name in news}))
                ns.update(news)
            vectorize.install()   # np.vectorize of traced arrays (trace/vectorize.py)
        _active += 1
        user_keys = _patch_user(user_globals)
        if module_globals is not None and module_globals is not user_globals:
            user_keys += _patch_user(module_globals)
        for ns in _user_modules():   # helpers in the user's other modules bind them too
            names = _bound_names(ns)
            if names and ns is not module_globals:
                user_keys += _patch_user(ns, names)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(state)
    try:
        yield state
    finally:
        stack.pop()
        with _lock:
            _release_user(user_keys)
            _active -= 1
            if _active == 0:
                while _patched:
                    ns, olds = _patched.pop()
                    ns.update(olds)
                vectorize.uninstall()
