"""Stage 1 of the pipeline: run the user's function on tracers and record a ``Graph``.

Entry function: ``trace_function(fn, args, kwargs, static_argnums, static_argnames)``.

What the traced function sees: array leaves of its non-static arguments are ``Tracer``s; its
globals are read through a recorder, so that the compiled function can tell when they change
(``Trace.guards``) and reads global *arrays* at every call as extra graph inputs (NumPy reads
their current values, so freezing them would be wrong after an in-place update); NumPy's
argument conversion passes tracers through and random draws are refused (``context``).
"""
from __future__ import annotations

import array
import builtins
import functools
import inspect
import threading
import random as python_random_module   # (not ``random``: trace/random.py is that)
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import composites  # noqa: F401  (registers the NumPy-level functions)
from . import captured as captured_arrays
from . import buffers, context, frames, pytree, reached, reads
from . import random as traced_random
from .build import check_dtype, constant, make
from ..errors import (ConcretizationError, InputError, TracearrayError, TraceDTypeError,
                     TraceShapeError, UnsupportedOperationError, node_location,
                     with_location)
from .graph import Graph, Node, format_graph
from .tracer import Tracer
from .complex import ComplexTracer
from .verify import verify
from ..interleaved import real_dtype

__all__ = ["trace_function", "Trace", "Graph", "Node", "Tracer", "format_graph", "verify",
           "is_array_leaf", "check_array_argument", "argument_names",
           "PLAIN_ARRAY_TYPES", "random_key_name", "random_key_source", "TracearrayError",
           "ConcretizationError", "UnsupportedOperationError", "TraceShapeError", "TraceDTypeError", "InputError"]


def is_array_leaf(x: Any) -> bool:
    """Arguments traced as arrays: NumPy arrays and scalars, anything exposing the array
    interfaces (device arrays), and objects NumPy converts with ``__array__`` (converted again
    at every call: their data may change between calls). Python scalars are static values, as
    in NumPy they are weakly typed and their value can matter to the result dtype.
    A ``np.random.Generator`` is a leaf too: the call passes a fresh 64-bit key drawn from it
    (``api``), which the function sees as a traced generator (``random.TracedGenerator``)."""
    return isinstance(x, (np.ndarray, np.generic, np.random.Generator)) or \
        hasattr(x, "__cuda_array_interface__") or \
        (hasattr(x, "__array__") and not isinstance(x, type)) or \
        isinstance(x, _BUFFER_TYPES)


# Python objects NumPy converts through the buffer protocol (np.asarray(memoryview(a)) is a's
# data): array arguments, converted at every call
_BUFFER_TYPES = (memoryview, bytearray, array.array)


# The ndarray types a compiled function takes. Other subclasses change what operations mean
# (np.ma.MaskedArray skips masked elements, np.matrix makes ``*`` a matrix product) and their
# data alone, traced as an ndarray, gives silently wrong results; np.memmap is an ndarray
# whose memory is a file.
PLAIN_ARRAY_TYPES = (np.ndarray, np.memmap)


def check_array_argument(value: Any, name: Callable[[], str], what: str = "argument") -> None:
    """Refuse an ndarray subclass other than np.memmap. ``name()`` (called only to report)
    is the argument's name as the function sees it (``x``, ``x[0]``); ``what`` says whether it
    is an ``argument`` or a ``global``."""
    if isinstance(value, np.ndarray) and type(value) not in PLAIN_ARRAY_TYPES:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        n = name()
        raise InputError(
            f"{what} {n!r} is a {kind}, an ndarray subclass: tracearray compiles plain NumPy "
            f"arrays (np.ndarray, np.memmap), and the subclass's own meaning of operations "
            f"(a mask, a matrix product, ...) would be lost. Pass np.asarray({n}) if its data "
            f"alone is meant, or compile with fallback='numpy' to run such calls with NumPy")


def argument_names(fn: Callable, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                  params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[-1].kind is params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}[{i - len(params) + 1}]")
        else:
            names.append(f"arg{i}")
    return names


# ============================================================================================
# Globals
# ============================================================================================

class _RecordingGlobals(dict):
    """A copy of a function's globals that records what the function reads (CPython looks
    globals up with ``__getitem__`` when they are not exactly a dict)."""

    def __init__(self, base: dict, on_read: Callable[[str, Any], Any]):
        super().__init__(base)
        self._on_read = on_read

    def __getitem__(self, name: str) -> Any:
        return self._on_read(name, dict.__getitem__(self, name))


@dataclass
class Trace:
    """The result of a trace: the graph, and what a later call must check before reusing it
    (``guards``: global name -> the object the trace saw; array globals are graph inputs).
    A *probe* (``probe`` names what it counts) stopped at a size the data decides: its graph's
    one output is that number, and the function is traced again once it is known
    (``context.data_size``)."""
    graph: Graph
    guards: dict[str, Any] = field(default_factory=dict)
    probe: str | None = None
    # Why the graph may not be re-derived for other input sizes (``resize.py``), as far as
    # the trace itself can tell: None when nothing the function did depends on them
    # (no size read as a Python number, no size the data decides, no global assigned).
    size_dependence: str | None = "not traced to the end"
    # arrays reached through closures, defaults, bound objects, global containers that are
    # graph inputs or used by value (``captured.py``): name -> what the trace used
    captured: dict[str, captured_arrays.Captured] = field(default_factory=dict)
    # the shape and dtype of each global array when traced (``x.shape = ...`` changes the
    # object in ``guards`` in place)
    global_layouts: dict[str, tuple[tuple, np.dtype]] = field(default_factory=dict)
    # numbers, strings and flags the function read through attributes and items of the
    # objects it reaches (``cfg.dt``, ``self.lr``), as the trace saw them (``reads.py``)
    reads: tuple = ()
    # ``reads`` prepared for the checks of later calls (``reads.GuardCheck``; made on first use)
    reads_check: Any = field(default=None, repr=False, compare=False)
    # where the function wrote memory NumPy lays out as the arguments after a reshape of it
    # was decided a view or a copy for C-ordered arguments, or read an argument's raw memory
    # (as_strided with explicit strides): a call with an argument of another order, or not
    # C-contiguous, is refused (``_layout_assumptions``, ``api._check_argument_layouts``)
    assumes_c_arguments: tuple | None = None

    def reads_hold(self, roots: Any, key: Callable[[Any], Any]) -> bool:
        """Whether every value in ``reads`` is still what the trace saw (``reads.hold``)."""
        check = self.reads_check
        if check is None:
            check = self.reads_check = reads.GuardCheck(self.reads, key)
        return check(roots)


_DESCRIPTOR = re.compile(r"descriptor '(\w+)' (?:for|requires a) '(numpy\.\w+)' object"
                         r".*'(Tracer|ComplexTracer|MaskedSelection|ComplexSelection)'")


def _descriptor_refusal(e: BaseException) -> UnsupportedOperationError | None:
    """Python's TypeError for ``np.ndarray.sum(x)`` (a method called through NumPy's class,
    which checks the class in C) of a traced value, as tracearray's refusal at the user's
    line (the innermost frame of the user's code in its traceback)."""
    m = _DESCRIPTOR.search(str(e))
    if m is None:
        return None
    where = _innermost_user_line(e)
    cls, meth = m.group(2), m.group(1)
    return UnsupportedOperationError(
        f"{cls}.{meth}(x) of a traced value is not supported by tracearray (NumPy's class "
        f"checks its argument's type in C): call the method on the value, x.{meth}(...), or "
        f"the function np.{meth}(x) where NumPy has one" + (f"\n  at {where}" if where else ""))


def _at_entry(guard: reads.Guard, entry: Any) -> reads.Guard:
    if entry is captured_arrays._MISSING or type(guard.value) in (reads.Same, reads.Kinds,
                                                                 reads.SmallArray):
        return guard
    return guard._replace(value=entry)


def _innermost_user_line(e: BaseException) -> str | None:
    """``file:line`` of the innermost frame of the user's code in ``e``'s traceback."""
    from .captured import _user_file
    tb, where = e.__traceback__, None
    while tb is not None:
        if _user_file(tb.tb_frame.f_code.co_filename):
            where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _note_user_line(e: BaseException) -> None:
    """NumPy's own error (a shape, an axis, a casting rule) raised while the function was
    traced, without tracearray's ``at file:line``: the innermost line of the user's code in
    its traceback, as a note (``BaseException.add_note``: shown under the message; the
    exception and its message stay NumPy's)."""
    if isinstance(e, TracearrayError) or "\n  at " in str(e) or \
            not hasattr(e, "add_note") or getattr(e, "__notes__", None):
        return
    where = _innermost_user_line(e)
    if where is not None:
        e.add_note(f"  at {where} (while tracearray traced the function)")


def plain_function(fn: Callable) -> tuple[types.FunctionType | None, tuple, dict]:
    """The Python function behind a callable (a function, ``functools.partial``, a bound
    method or an object with ``__call__``) and the arguments it binds first."""
    args: tuple = ()
    kwargs: dict = {}
    while True:
        if isinstance(fn, functools.partial):
            args = fn.args + args
            # (one partial's keywords: its own dict, so that a value changed in it is seen
            # by the trace's guards; partials of partials merge theirs)
            kwargs = {**fn.keywords, **kwargs} if kwargs else fn.keywords
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            args = (fn.__self__,) + args
            fn = fn.__func__
        elif isinstance(fn, types.FunctionType):
            return fn, args, kwargs
        elif callable(fn) and isinstance(getattr(type(fn), "__call__", None), types.FunctionType):
            args = (fn,) + args
            fn = type(fn).__call__
        else:
            return None, args, kwargs


def _refuse_random_in(fn: types.FunctionType | None, bound: tuple, kwargs: dict) -> None:
    """Random generators reachable from the function are refused (their draws would be
    frozen into the graph): bound arguments, closure cells, attributes of a bound object."""
    for i, v in enumerate(bound):
        context.refuse_random_state(v, f"bound argument {i}")
        for name, attr in getattr(v, "__dict__", {}).items():
            context.refuse_random_state(attr, f"attribute {name!r} of the bound object")
    for k, v in kwargs.items():
        context.refuse_random_state(v, f"bound argument {k!r}")
    if fn is not None and fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                value = cell.cell_contents
            except ValueError:   # an empty cell
                continue
            context.refuse_random_state(value, f"the closure variable {name!r}")


def trace_function(fn: Callable, args: tuple, kwargs: dict, static_argnums: frozenset[int],
                   static_argnames: frozenset[str], sizes: tuple[int, ...] = (),
                   joins: bool = True) -> Trace:
    """Trace ``fn(*args, **kwargs)``: array leaves of non-static arguments become graph inputs
    (by shape and dtype); everything else is passed to ``fn`` unchanged. ``sizes``: the
    data-dependent sizes found by earlier probes of this call (see ``Trace``). ``joins``:
    whether large slice assignments into the function's own memory are joins (for the CPU;
    ``buffers.JOIN_MIN_ELEMENTS``) or selects (for a GPU).

    Every tracer made belongs to this trace; when it returns (or fails) the trace is ended,
    and a tracer that escaped it (kept in a global, a list, a closure) raises
    ``UnexpectedTracerError`` on any later use (``Tracer.node``)."""
    state = context.TraceState(function=getattr(fn, "__qualname__", None) or repr(fn),
                               sizes=tuple(sizes), joins=joins)
    try:
        return _trace(state, fn, args, kwargs, static_argnums, static_argnames)
    finally:
        state.ended = True


def _trace(state: context.TraceState, fn: Callable, args: tuple, kwargs: dict,
           static_argnums: frozenset[int], static_argnames: frozenset[str]) -> Trace:
    names = argument_names(fn, len(args))
    inputs: list[Node] = []
    input_tracers: list[Tracer] = []
    input_names: list[str] = []
    global_inputs: list[str] = []
    guards: dict[str, Any] = {}
    global_layouts: dict[str, tuple[tuple, np.dtype]] = {}
    generator_inputs: dict[int, tuple[int, Any]] = {}

    def make_input(value: Any, name: str, alias: str | None) -> Any:
        # NumPy scalars and objects with __array__ as NumPy converts them (the call converts
        # them again, every time); device arrays keep their own shape and dtype; a Generator
        # is the 0-d uint64 key the call draws from it.
        if isinstance(value, np.random.Generator):
            key = make_input(np.zeros((), np.uint64), name, None)
            generator = traced_random.TracedGenerator(key, name)
            # (returned, it is the caller's own Generator: ``_returned_objects``)
            generator_inputs[id(generator)] = (len(inputs) - 1, generator)
            return generator
        if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
            arr = value
        else:   # (an object's __array__ is its own code, converting as the call did)
            with context.outside_trace():
                arr = np.asarray(value)
        shape = tuple(arr.shape)
        is_complex = arr.dtype.kind == "c"
        if is_complex:
            # the interleaved (..., 2) real view the call binds (interleaved.pair_view)
            try:
                dtype = real_dtype(arr.dtype)
            except TypeError as e:
                raise TraceDTypeError(with_location(f"argument {name!r}: {e}")) from None
            shape = shape + (2,)
        else:
            dtype = check_dtype(arr.dtype, f"argument {name!r}")
        node = Node.make("input", (), {"index": len(inputs), "name": name,
                                       "shape": shape, "dtype": dtype.str},
                         shape, dtype)
        inputs.append(node)
        input_names.append(name)
        t = Tracer(node, alias=alias)   # the caller's memory: written back if written to
        if isinstance(value, np.generic):   # a NumPy scalar: immutable (``s += 1`` rebinds)
            t._buf.zero_d = "scalar"
        input_tracers.append(t)
        return ComplexTracer.from_pair(t) if is_complex else t

    # containers passed as arguments, rebuilt around the tracers: (name, the rebuilt
    # container, its structure, the tracers put in it), checked after the call
    containers: list[tuple[str, Any, Any, list]] = []

    def substitute(value: Any, name: str) -> Any:
        leaves, tree = pytree.flatten(value, is_array_leaf)
        if len(leaves) == 1 and tree == ("leaf",):
            check_array_argument(value, lambda: name)
            return make_input(value, name, name)
        for i, v in enumerate(leaves):
            check_array_argument(v, lambda: f"{name}[{i}]")
        made = [make_input(v, f"{name}[{i}]", name) for i, v in enumerate(leaves)]
        rebuilt = pytree.unflatten(tree, made)
        containers.append((name, rebuilt, tree, made))
        return rebuilt

    keys: dict[str, Tracer] = {}

    def key_input(source: str) -> Tracer:
        """The graph input the call fills with a fresh random key from ``source`` (the
        api reads it as a global input named ``random_key_name(source)``)."""
        if source not in keys:
            name = random_key_name(source)
            keys[source] = make_input(np.zeros((), np.uint64), name, None)
            global_inputs.append(name)
        return keys[source]

    state.key_input = key_input
    for i, a in enumerate(args):
        if i in static_argnums or not isinstance(a, np.random.Generator):
            context.refuse_random_state(a, f"{'static ' * (i in static_argnums)}argument "
                                           f"{names[i]!r}")
    for k, v in kwargs.items():
        if k in static_argnames or not isinstance(v, np.random.Generator):
            context.refuse_random_state(v, f"{'static ' * (k in static_argnames)}argument "
                                           f"{k!r}")
    plain, bound, bound_kw = plain_function(fn)
    _refuse_random_in(plain, bound, bound_kw)
    seen_global_arrays: dict[str, Tracer] = {}
    recorder: _RecordingGlobals | None = None

    def on_read(name: str, value: Any) -> Any:
        if name in seen_global_arrays:
            return seen_global_arrays[name]
        context.refuse_random_state(value, f"the global {name!r}")
        check_array_argument(value, lambda: name, "global")
        if isinstance(value, np.ndarray) and value.dtype.newbyteorder("=") in \
                _SUPPORTED_DTYPES and recorder is not None and recorder.recording:
            t = make_input(value, f"global {name}", f"global {name}")
            global_inputs.append(name)
            seen_global_arrays[name] = t
            if isinstance(t, Tracer):   # (a complex one is a pair: q and kth are real)
                state.global_arrays[t.node] = (name, value)
            guards[name] = value
            global_layouts[name] = (value.shape, value.dtype)
            return t
        guards.setdefault(name, context.unpatched(value))
        return value

    def captured_input(value: np.ndarray, name: str) -> Tracer:
        t = make_input(value, name, None)
        global_inputs.append(name)
        return t

    roots = captured_arrays.Roots(plain, bound, bound_kw)
    roots.use_statics(args, kwargs, static_argnums, static_argnames)
    # (before the call: a value the function changes itself is seen changed at the next)
    before = reads.before_trace(roots, plain, len(bound), bound_kw, args, kwargs,
                                static_argnums, static_argnames) \
        if plain is not None else reads.BeforeTrace((), {}, [], [], [])
    read_guards = before.guards
    roots.helpers = before.helper_roots
    state.captured = captured_arrays.CapturedArrays(roots, captured_input,
        lambda: [n for n in guards if n not in seen_global_arrays])
    call: Callable = fn
    if plain is not None:
        recorder = _RecordingGlobals(plain.__globals__, on_read)
        recorder.recording = False
        # (NumPy's conversions bound in a closure variable or a default, ``convert=np.asarray``,
        # are the trace's, as they are when bound to a global name)
        inner = types.FunctionType(plain.__code__, recorder, plain.__name__,
                                   _replaced_values(plain.__defaults__),
                                   _replaced_cells(plain.__closure__))
        inner.__kwdefaults__ = None if plain.__kwdefaults__ is None else \
            {k: context.replaced(v) for k, v in plain.__kwdefaults__.items()}
        inner.__dict__.update(plain.__dict__)

        def call(*a: Any, **k: Any) -> Any:
            return inner(*bound, *a, **{**bound_kw, **k})

    probe: context.SizeNeeded | None = None
    with context.tracing(recorder if recorder is not None else None, state,
                         plain.__globals__ if plain is not None else None):
        # (the argument tracers are made inside, so that they belong to this trace)
        t_args = tuple(a if i in static_argnums else substitute(a, names[i])
                       for i, a in enumerate(args))
        # Keyword arguments become inputs in sorted order, the order in which the call path
        # flattens them (api.CompiledFunction._flatten_args): in the order given, f(y=b, x=a)
        # read b as x.
        t_kwargs = {k: kwargs[k] if k in static_argnames else substitute(kwargs[k], k)
                    for k in sorted(kwargs)}
        if recorder is not None:
            recorder.recording = True
        # arrays the function reaches other than as arguments, read-only while it runs: an
        # in-place update of one with no traced operand (self.t += 1) would be NumPy's own,
        # made once now and frozen into the trace
        locked = [a for a, _text in before.arrays]
        for a in locked:
            a.flags.writeable = False
        # the user's helper frames the call runs, and what they read (trace/frames.py)
        frame_log = frames.FrameLog(plain.__code__ if plain is not None else None,
                                    frames.runs_user_code(plain, roots, args, kwargs,
                                                          before.helpers))
        # (draws from Python's random module or a random.Random object, by this thread: its
        # methods are watched while the trace runs)
        random_objects = _watch_random_objects()
        state.entry_frame = sys._getframe()   # (where the user's code starts: importing())
        # (what the function prints, kept until the attempt ends: an attempt that stops for
        # a value the data decides runs again, and would print its first part twice)
        printed = _AttemptOutput(plain.__code__ if plain is not None else fn)
        try:
            with frame_log:
                result = call(*t_args, **t_kwargs)
            if not inspect.isgenerator(result):
                from .selection import compact_all
                result = compact_all(result)   # x[mask] returned: the selected elements
            if state.size_needed is not None:
                # the request was caught (a bare ``except:`` or ``except BaseException`` of
                # the user's) and the function went on along another path: probed anyway
                probe = state.size_needed
        except context.SizeNeeded as e:
            probe = e
        except (ValueError, TypeError) as e:
            # NumPy's C code calls the tracer's conversions (float(), __array__) and replaces
            # their error with its own ("setting an array element with a sequence"): the
            # user's error is ours, and a value staged there (np.float32([x[0], x[1]])) is
            # the probe's
            if isinstance(e.__cause__, context.SizeNeeded):
                probe = e.__cause__
            elif state.size_needed is not None:
                probe = state.size_needed   # (raised on the path after a caught request)
            else:
                _raise_user_error(e, locked or frame_log.arrays, before.arrays + frame_log.arrays)
        except Exception as e:   # noqa: BLE001 -- located, then as it was
            if state.size_needed is not None:
                probe = state.size_needed
            else:
                _note_user_line(e)
                raise
        finally:
            # owners before their views: NumPy sets a view writeable only over a writeable base
            for a in sorted(locked + [a for a, _t in frame_log.arrays], key=_base_depth):
                a.flags.writeable = True
            if recorder is not None:
                recorder.recording = False
            random_objects.release()
            printed.end(keep=probe is None)
            # (a frame kept would keep its callers' locals, the call's results among them,
            # alive after the call)
            state.entry_frame = None
            if state.size_needed is not None:   # (its traceback holds the attempt's frames)
                state.size_needed.__traceback__ = None
    if random_objects.drew:
        raise UnsupportedOperationError(
            f"{getattr(fn, '__name__', 'the function')} draws from Python's random module "
            f"(random.random, random.randrange, random.shuffle, ...): that code runs once, "
            f"while tracing, so every call would return the trace's numbers; draw with NumPy "
            f"(a np.random.Generator argument, or np.random.*), which tracearray traces")
    caught = context.refusal_caught_by_user(state) if probe is None else None
    if caught is not None:
        raise UnsupportedOperationError(
            f"{caught}\n(the compiled function caught this error and went on: a try/except, "
            f"hasattr or getattr with a default in its code; NumPy raises nothing there, so "
            f"the compiled function would take another path than NumPy's)") from None
    # what the code reads of the objects its chains reach through locals, loops, getattr
    followed: set[int] = set()
    seen_reads = reached.reached_guards(
        roots, plain.__code__ if plain is not None else None, before.params, before.helpers,
        frame_log, plain, {id(c.array) for c in state.captured.used.values()}, followed)
    if frame_log.frames:
        # (a helper's reads rooted at an object the walk found by a path: guarded there)
        read_guards += tuple(g for g in frames.frame_guards(frame_log, plain)
                             if g.root[0] != "pinned" or id(g.root[1].resolve()) not in followed)
        given = {id(v) for f in frame_log.frames.values() for v in f.objects.values()}
        if plain is not None and not given <= followed:
            # (an object a helper was given that the walk found by no path: its guards are
            # rooted at it, so the chains reaching it hold it by identity)
            read_guards += frames.identity_guards(roots, reads.read_chains(plain.__code__),
                                                  plain.__code__, before.params, frame_log)
    read_guards = reads.unique(read_guards + seen_reads)
    if frame_log.entry:
        # a value a helper's own code changed while it ran (``self.t += 1`` in a method):
        # guarded by what the call found, so the next call, finding the changed value,
        # traces again and changes it again, as NumPy's run of the code would
        read_guards = tuple(_at_entry(g, frame_log.entry_value(roots, g))
                            for g in read_guards)
    if probe is not None:
        # the graph so far, up to the number it needs (nothing is written back: the trace
        # runs again, to the end, once the number is known)
        graph = Graph(tuple(inputs), (probe.count,), ("leaf",), tuple(input_names), (),
                      tuple(global_inputs), dict(state.locations))
        verify(graph)
        return Trace(graph, guards, probe=probe.what, captured=dict(state.captured.used),
                     global_layouts=global_layouts, reads=read_guards,
                     assumes_c_arguments=_layout_assumptions(state))
    state.captured.finish()
    _refuse_rebound_items(containers, state.locations)
    if recorder is not None:
        state.wrote_globals = _write_back(recorder, plain.__globals__, seen_global_arrays)
    if inspect.isgenerator(result) or inspect.iscoroutine(result) or inspect.isasyncgen(result):
        kind = "a coroutine" if inspect.iscoroutine(result) else "a generator"
        if inspect.iscoroutine(result):
            result.close()   # never run: no "never awaited" warning
        raise UnsupportedOperationError(with_location(
            f"the compiled function returned {kind}: its values would be produced lazily, "
            f"after the trace; return the arrays (a tuple or list) instead"))

    def is_out_leaf(x: Any) -> bool:
        return isinstance(x, (Tracer, ComplexTracer, np.ndarray, np.generic))

    leaves, out_tree = pytree.flatten(result, is_out_leaf)
    out_tree = _returned_objects(out_tree, generator_inputs)
    # complex results are stored as their interleaved real pairs and viewed as complex
    # after the call (a "complex" leaf of the result tree)
    kinds = [str(np.dtype(leaf.dtype)) if isinstance(leaf, ComplexTracer) or (
        isinstance(leaf, (np.ndarray, np.generic)) and leaf.dtype.kind == "c") else None
        for leaf in leaves]
    out_tree = pytree.mark_complex_leaves(out_tree, kinds)
    # a result in new memory whose value is an input's (``x.copy()``, ``np.array(x)``: the
    # same node) is stored anew, not returned as the caller's own array
    argument_memory = {node: t._buf for node, t in zip(inputs, input_tracers)}
    outputs = [_fresh_output(leaf, argument_memory) for leaf in leaves]
    # the arguments (and global arrays) the function wrote into: their final values
    updates = [(i, t._buf.node) for i, t in enumerate(input_tracers)
               if t._buf.written and t._buf.node is not inputs[i]]
    outputs += [node for _i, node in updates]
    checks = tuple((c.error, c.message) for c in state.checks)
    outputs += [c.node for c in state.checks]
    # (a view NumPy returns read-only stays so: its flags are NumPy's)
    readonly = tuple(i for i, leaf in enumerate(leaves)
                     for t in [leaf.re if isinstance(leaf, ComplexTracer) else leaf]
                     if isinstance(t, Tracer) and t._trace is not None and
                     not (t._buf.writeable and buffers.readonly_step(t._path) is None))
    python = tuple((i, leaf._weak.__name__) for i, leaf in enumerate(leaves)
                   if isinstance(leaf, Tracer) and leaf._weak is not None)
    # which results are one array returned twice (the same object): the others are arrays
    # of their own, also where equal values made them one graph node (zeros_like(p) twice)
    first_of = {}
    same = tuple(first_of.setdefault(id(leaf), i) for i, leaf in enumerate(leaves))
    graph = Graph(tuple(inputs), tuple(outputs), out_tree, tuple(input_names), checks,
                  tuple(global_inputs), dict(state.locations),
                  tuple(i for i, _n in updates), readonly, python,
                  same if same != tuple(range(len(leaves))) else ())
    verify(graph)
    return Trace(graph, guards, size_dependence=_size_dependence(state),
                 captured=dict(state.captured.used), global_layouts=global_layouts,
                 reads=read_guards,
                 assumes_c_arguments=_layout_assumptions(state))


def _layout_assumptions(state: Any) -> tuple | None:
    """``Trace.assumes_c_arguments``: (where a reshape was decided for C-ordered arguments,
    their input indices, where an argument's raw memory was read, their input indices), or
    None when the trace assumed nothing of the arguments' layouts."""
    if state.assumed_c_layout is None and state.raw_memory_at is None:
        return None
    return (state.assumed_c_layout, frozenset(state.assumed_c_inputs), state.raw_memory_at,
            frozenset(state.raw_memory_inputs))


def _returned_objects(tree: Any, generator_inputs: dict[int, tuple[int, Any]]) -> Any:
    """The result tree with each Generator argument the function returns as an ("input",
    i) node (the caller's own object, advanced by the call, as NumPy returns it); any other
    returned object that holds traced values (a generator made inside, an instance of a
    class of the user's holding arrays) is refused at the return: its values would be the
    trace's, never the call's."""
    def check(node: Any) -> Any:
        if node[0] != "const":
            return node
        value = node[1]
        found = generator_inputs.get(id(value))
        if found is not None and found[1] is value:
            return ("input", found[0])
        if _holds_traced(value, 3):
            what = "a np.random.Generator made inside it" if isinstance(
                value, traced_random.TracedGenerator) else \
                f"an object of type {type(value).__name__} holding traced values"
            raise UnsupportedOperationError(with_location(
                f"the compiled function returned {what}: its values would be the trace's, "
                f"not the call's; return the arrays themselves (in a tuple, list, dict, "
                f"namedtuple or dataclass, which are rebuilt around the results) or a "
                f"Generator passed in as an argument"))
        return node
    return pytree.map_nodes(tree, check)


_PLAIN_VALUES = (str, bytes, int, float, builtins.complex, bool, type(None), np.ndarray,
                 np.generic, type)


def _holds_traced(value: Any, depth: int) -> bool:
    """Whether ``value`` is or holds (through attributes, containers, to ``depth`` levels) a
    traced value or traced generator."""
    from .complex import ComplexTracer
    if isinstance(value, (Tracer, ComplexTracer, traced_random.TracedGenerator,
                          traced_random.TracedBitGenerator)):
        return True
    # (builtins': this package's ``complex`` is its submodule)
    if depth <= 0 or isinstance(value, _PLAIN_VALUES) or callable(value):
        return False
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(_holds_traced(v, depth - 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_traced(v, depth - 1) for v in value.values())
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        return any(_holds_traced(v, depth - 1) for v in attrs.values())
    return any(_holds_traced(getattr(value, n, None), depth - 1)
               for n in getattr(type(value), "__slots__", ()) if isinstance(n, str))


class _AttemptOutput:
    """sys.stdout and sys.stderr as the traced function's prints see them while one attempt
    of a trace runs: the tracing thread's writes are kept, other threads' pass through;
    ``end(keep)`` writes the kept text out (an attempt that finished, or raised) or drops
    it (one that stopped for a probe and runs again). An explicit flush writes it out at
    once (print(..., flush=True), a debugger's prompt); what an earlier attempt of the same
    trace flushed is not written again (``_FLUSHED``: the attempts run the same code, so
    they print the same text up to their stops)."""

    class _Stream:
        def __init__(self, real: Any, thread: int, name: str, owner: Any):
            self.real, self.thread, self.name, self.owner = real, thread, name, owner
            self.text: list[str] = []     # everything this attempt wrote
            self.active = True

        def _mine(self) -> bool:
            return self.active and threading.get_ident() == self.thread

        def write(self, text: str) -> int:
            if self._mine():
                self.text.append(text)
                return len(text)
            return self.real.write(text)

        def writelines(self, lines: Any) -> None:
            for line in lines:
                self.write(line)

        def flush(self) -> None:
            # (an explicit flush, print(..., flush=True), a debugger's prompt: out now)
            if self._mine():
                self._emit()
            self.real.flush()

        def _emit(self) -> None:
            """Write what this attempt wrote beyond what this trace's attempts flushed."""
            owner, done = _FLUSHED.__dict__.get(self.name, (None, ""))
            text = "".join(self.text)
            if owner is self.owner and text.startswith(done):
                new = text[len(done):]
            else:   # (another function's, or another text than the earlier attempt's)
                new = text
            if new:
                self.real.write(new)
            _FLUSHED.__dict__[self.name] = (self.owner, text)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    def __init__(self, owner: Any) -> None:
        me = threading.get_ident()
        self.streams = {name: self._Stream(getattr(sys, name), me, name, owner)
                        for name in ("stdout", "stderr") if getattr(sys, name) is not None}
        for name, stream in self.streams.items():
            setattr(sys, name, stream)

    def end(self, keep: bool) -> None:
        for name, stream in self.streams.items():
            stream.active = False
            if getattr(sys, name) is stream:     # (else a later one wraps it: it passes on)
                real = stream.real
                while isinstance(real, self._Stream) and not real.active:
                    real = real.real   # (an earlier thread's, ended while this one ran)
                setattr(sys, name, real)
            if keep:
                stream._emit()
                _FLUSHED.__dict__.pop(name, None)   # (the trace is over)
            stream.text = []


# what the current trace's attempts flushed, per stream, in this thread (_AttemptOutput)
_FLUSHED = threading.local()


class _watch_random_objects:
    """While a trace runs: whether this thread drew from a ``random.Random`` object (its
    ``random`` / ``getrandbits``, which every other method calls), as from the module. The
    watchers are installed once while any trace runs (traces in other threads share them)
    and record the threads that drew."""

    _lock = threading.Lock()
    _active = 0
    _saved: dict = {}
    _drew: set = set()

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.drew = False
        with _watch_random_objects._lock:
            self._drew.discard(self.thread)
            if _watch_random_objects._active == 0:
                # the class's methods (every other method of an object, and the module's
                # functions bound to its hidden object, call them) and the module's two
                # functions that are that object's C methods themselves
                for owner in (python_random_module.Random, python_random_module):
                    for name in ("random", "getrandbits"):
                        self._saved[owner, name] = vars(owner).get(name)
                        setattr(owner, name, self._watched(getattr(owner, name)))
            _watch_random_objects._active += 1

    @staticmethod
    def _watched(original: Any) -> Any:
        def watched(*a: Any, **k: Any) -> Any:
            _watch_random_objects._drew.add(threading.get_ident())
            return original(*a, **k)
        return watched

    def release(self) -> None:
        with _watch_random_objects._lock:
            self.drew = self.thread in self._drew
            self._drew.discard(self.thread)
            _watch_random_objects._active -= 1
            if _watch_random_objects._active == 0:
                for (owner, name), value in self._saved.items():
                    if value is None:
                        delattr(owner, name)
                    else:
                        setattr(owner, name, value)
                self._saved.clear()
                self._drew.clear()


def _raise_user_error(e: BaseException, reached_locked: Any, reached: list) -> None:
    """A ValueError or TypeError the traced function raised, as the user's error: ours where
    NumPy's C code replaced it with its own, a refusal where NumPy's type check met a
    tracer, an update of a locked array the function reaches named, else NumPy's own error
    with the user's line noted."""
    if isinstance(e.__cause__, TracearrayError):
        raise e.__cause__ from None
    refused = _descriptor_refusal(e)
    if refused is not None:
        raise refused from None
    if reached_locked and "read-only" in str(e):
        raise _update_of_reached_array(reached) from None
    _note_user_line(e)
    raise e


def _size_dependence(state: context.TraceState) -> str | None:
    """Why the trace's graph holds for its input sizes only, as the trace saw it (None: it
    did nothing that depends on them; ``resize.py`` checks the graph itself)."""
    if state.sizes_read:
        return "the function read an array's sizes as Python numbers (x.shape, len(x), x.size)"
    if state.sizes_used or state.sizes:
        return "a size depends on the data"
    if state.wrote_globals:
        return "the function assigned a global (a side effect of each trace)"
    return None


RANDOM_KEY_PREFIX = "<random key from "


def random_key_name(source: str) -> str:
    """The name of the graph input holding a call's random key from ``source``."""
    return f"{RANDOM_KEY_PREFIX}{source}>"


def random_key_source(name: str) -> str | None:
    """The source of a graph input named by ``random_key_name``, else None."""
    return name[len(RANDOM_KEY_PREFIX):-1] if name.startswith(RANDOM_KEY_PREFIX) else None


def _base_depth(a: np.ndarray) -> int:
    depth = 0
    while isinstance(a.base, np.ndarray):
        a, depth = a.base, depth + 1
    return depth


def _update_of_reached_array(arrays: list) -> UnsupportedOperationError:
    names = ", ".join(text for _a, text in arrays[:4]) + (", ..." if len(arrays) > 4 else "")
    return UnsupportedOperationError(with_location(
        f"the compiled function writes into an array it reaches other than as an argument "
        f"({names}): tracearray reads such arrays at every call but does not write them (an "
        f"update with no traced operand would be NumPy's own, made once while tracing); "
        f"pass the array as an argument (updated in place at every call) or return the new "
        f"value"))


def _replaced_values(values: tuple | None) -> tuple | None:
    return None if values is None else tuple(context.replaced(v) for v in values)


def _replaced_cells(cells: tuple | None) -> tuple | None:
    """The closure's cells, a new cell where one holds a NumPy function a trace replaces."""
    if not cells:
        return cells
    out = []
    for c in cells:
        try:
            value = c.cell_contents
        except ValueError:   # an empty cell
            out.append(c)
            continue
        new = context.replaced(value)
        out.append(c if new is value else types.CellType(new))
    return tuple(out)


def _fresh_output(leaf: Any, argument_memory: dict) -> Node:
    """``_output_node``, with a copy (a same-dtype cast: a map kernel) for a value in memory
    of the function's own whose node is an input (a runtime returns an input node's array
    itself: ``return x`` returns the caller's array, as NumPy does)."""
    node = _output_node(leaf)
    # (an argument's layout-dependent view, np.ascontiguousarray(x): NumPy returns x itself
    # only when the caller's x is so laid out; a copy serves every layout)
    if isinstance(leaf, Tracer) and node in argument_memory and \
            (leaf._buf is not argument_memory[node] or leaf._ambiguous):
        return make("cast", [node], dtype=node.dtype.str)
    return node


def _output_node(leaf: Any) -> Node:
    if isinstance(leaf, Tracer):
        return leaf.node
    if isinstance(leaf, ComplexTracer):
        return leaf.pair_node()
    if leaf.dtype.kind == "c":   # a complex constant
        arr = np.asarray(leaf)
        return constant(np.stack([arr.real, arr.imag], axis=-1))
    return constant(leaf)


_SUPPORTED_DTYPES = frozenset(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128"))


def _refuse_rebound_items(containers: list[tuple[str, Any, Any, list]],
                          locations: dict) -> None:
    """A container passed as an argument whose items the function rebound, added or removed
    (``params["w"] = params["w"] - g``, ``out.append(y)``): NumPy's caller sees that in its
    own container, the compiled function's caller would not (the trace ran on a copy), so it
    is refused, at the line that made the first new item when it is a traced value (the
    function has returned: the call's own line otherwise). Writing into its arrays
    (``params["w"] -= g``) is written back."""
    for name, rebuilt, tree, made in containers:
        ids = {id(m) for m in made}   # (a traced generator is a leaf too)
        try:
            leaves, now = pytree.flatten(rebuilt, lambda x: id(x) in ids or is_array_leaf(x))
        except Exception:   # noqa: BLE001 - a container now holding what pytree refuses
            leaves, now = [], None
        if now != tree or len(leaves) != len(made) or \
                any(a is not b for a, b in zip(leaves, made)):
            message = (
                f"the compiled function changes what the container passed as argument "
                f"{name!r} holds (an item rebound, added or removed, e.g. "
                f"params['w'] = params['w'] - g or a list's append); NumPy's caller would see "
                f"that in its own container, the compiled function's caller would not: "
                f"write into its arrays in place (params['w'] -= g), or return the new "
                f"values")
            where = next((_made_at(leaf, locations) for leaf in leaves
                          if id(leaf) not in ids and _made_at(leaf, locations)), None)
            raise UnsupportedOperationError(f"{message}\n  at {where}" if where
                                            else with_location(message))


def _made_at(value: Any, locations: dict) -> str | None:
    """The user's line that computed ``value``, a traced array (None for anything else)."""
    if not isinstance(value, Tracer):
        return None
    try:
        node = value.node
    except Exception:   # noqa: BLE001 - a tracer of another trace: no line of this one
        return None
    return locations.get(node) or node_location(node)


def _write_back(recorder: dict, real: dict, arrays: dict[str, Any]) -> bool:
    """Globals the traced function assigned (``global x; x = ...``) go to the real module;
    whether there were any."""
    changed = [(name, value) for name, value in dict.items(recorder)
               if not (name in arrays and value is arrays[name])
               and (name not in real or real[name] is not value)]
    for name, value in changed:   # (checked before any is written: all or none)
        if captured_arrays.holds_tracer(value):
            raise UnsupportedOperationError(
                f"the compiled function stores a traced value in the global {name!r}; "
                f"it would escape the trace: return it instead")
    for name, value in changed:
        real[name] = value
    return bool(changed)
