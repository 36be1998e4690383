"""Tracing pitfalls as executable tests: what tracing does with Python control flow, globals,
loops, in-place updates and unsupported NumPy, and how its errors point at the user's line.

Every error test checks three things: the exception class (a builtin subclass, so ordinary
``except TypeError`` / ``except ValueError`` code keeps working), NumPy's own wording where
NumPy has one, and ``<this file>:<line>`` of the offending statement (found by a marker
comment on that line, so the tests survive edits above them).
"""
from __future__ import annotations

import gc
import inspect
import os
from typing import Any, Callable

import numpy as np
import pytest

import tracearray

from tracearray.trace import (ConcretizationError, Graph, Node, TraceShapeError,
                              UnsupportedOperationError, format_graph, trace_function, verify)
from tracearray.errors import InputError, UnexpectedTracerError
from tracearray.trace.evaluate import evaluate_graph
from tracearray.ops import OPS
from tracearray.trace.pytree import unflatten
from tracearray.trace.verify import GraphVerificationError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

THIS_FILE = os.path.basename(__file__)

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def trace(fn: Callable, *args: Any, static_argnums: tuple[int, ...] = (), **kwargs: Any) -> Graph:
    return trace_function(fn, args, kwargs, frozenset(static_argnums), frozenset()).graph


def run(graph: Graph, *arrays: np.ndarray) -> Any:
    return unflatten(graph.out_tree, evaluate_graph(graph, list(arrays)))


def marker_line(fn: Callable, marker: str) -> int:
    """Line number (in this file) of the line of ``fn``'s source that contains ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, line in enumerate(lines) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def assert_points_at(exc: BaseException, fn: Callable, marker: str) -> None:
    msg = str(exc)
    where = f"{THIS_FILE}:{marker_line(fn, marker)}"
    assert where in msg, f"{where!r} not in error message:\n{msg}"


def numpy_message(fn: Callable, *args: Any) -> str:
    """NumPy's error message for the same call."""
    with pytest.raises(Exception) as info:
        fn(*args)
    return str(info.value).strip()


# ============================================================================================
# Concretization: Python control flow on traced values
# ============================================================================================

def _if_on_tracer(x: Any) -> Any:
    if x.sum() > 0:  # <- if
        return x
    return -x


def _while_on_tracer(x: Any) -> Any:
    while x.max() > 1:  # <- while
        x = x / 2
    return x


def _int_of_tracer(x: Any) -> Any:
    n = int(x[0, 0])  # <- int
    return x * n


def _float_of_tracer(x: Any) -> Any:
    return x * float(x.sum())  # <- float


def _array_of_sum(x: Any) -> Any:
    return float(np.array(x.sum()))  # <- array


def _item_of_tracer(x: Any) -> Any:
    return x.sum().item()  # <- item


def _index_with_tracer(x: Any) -> Any:
    return list(range(5))[x.sum().astype(np.int64)]  # <- index


def _and_of_tracers(x: Any) -> Any:
    return (x > 0) and (x < 5)  # <- and


def _scalar_type_of_tracer(x: Any) -> Any:
    return np.float32(x.sum()) * x  # <- scalar type


def _ufunc_reduce_of_list(x: Any) -> Any:
    return np.logical_and.reduce([x > -1, x < 1])  # <- ufunc method


def _element_into_numpy_array(x: Any) -> Any:
    out = np.ndarray(2)            # a NumPy array, not a traced one (np.empty would be)
    out[0], out[1] = x.sum(), x.max()  # <- element
    return out


def _nan_to_python(x: Any) -> Any:
    return float(np.nanmax(x) - np.nanmax(x))   # nan when x is all NaN, else 0.0


CONCRETIZATIONS = [
    # NumPy's C code stores the element with float() and replaced our error with its own
    # ValueError ("setting an array element with a sequence")
    (_element_into_numpy_array, "<- element", "assigning a traced value into a NumPy array"),
    # NumPy converts a ufunc method's list before any override sees the tracers in it
    (_ufunc_reduce_of_list, "<- ufunc method", ".reduce(np.stack([...]))"),
]


@pytest.mark.parametrize("fn,marker,what", CONCRETIZATIONS,
                         ids=[c[1].strip("<- ") for c in CONCRETIZATIONS])
def test_concretization_raises_with_users_line_and_hint(fn: Callable, marker: str,
                                                         what: str) -> None:
    with pytest.raises(ConcretizationError) as info:
        trace(fn, X)
    assert isinstance(info.value, TypeError)           # a TypeError subclass, like JAX's
    msg = str(info.value)
    assert what in msg, msg                            # names the operation
    assert "np.where" in msg and "static_argnums" in msg, msg   # the hint
    assert_points_at(info.value, fn, marker)


def _if_then_raise(x: Any) -> Any:
    if np.any(np.isnan(x)):
        raise ValueError("a NaN in the input")
    return x * 2


def _count_as_int(x: Any) -> Any:
    return x * int((x > 0).sum())


def _same_python_values(got: Any, want: Any) -> None:
    """Equal to the bit, with the types NumPy's run gives (Python float / int / complex /
    bool or a NumPy scalar of the same dtype)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same_python_values(g, w)
        return
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        return
    assert type(got) is type(want), (got, want)
    assert repr(got) == repr(want), (got, want)   # (-0.0, nan and every digit)


def _several_conversions(x: Any) -> Any:
    return (complex(np.sum(x * 1j)), (x.astype(np.complex64) * (1 + 2j)).sum().item(),
            int(x.std()), x.astype(np.float16).max().item(), bool((x > 2).any().item()),
            np.int16(x.ravel()[0]), np.float64(x.min()), x.astype(np.uint64).max().item())


@pytest.mark.parametrize("fn", [_if_on_tracer, _while_on_tracer, _if_then_raise, _count_as_int,
                                lambda x: x if (x > -10).all() and x.size > 3 else -x,
                                _int_of_tracer, _float_of_tracer, _array_of_sum,
                                _item_of_tracer, _scalar_type_of_tracer, _nan_to_python,
                                _several_conversions],
                         ids=["if", "while", "if-raise", "int of an integer", "and",
                              "int of a float", "float", "float of np.array", "item",
                              "scalar type", "nan and -0.0", "several"])
def test_branches_on_values_are_staged(fn: Callable) -> None:
    """``if``/``while`` on a value, int() / float() / complex() / .item() / np.float32() of a
    value: a probe computes the value at each call and the function is traced once per
    value (context.data_size), so each call takes the branch NumPy takes and goes on with
    NumPy's number, to the bit."""
    f = tracearray.compile(fn, device="cpu")
    first = None
    for x in (X, -np.abs(X), np.abs(X) * 0.5, X * 4, X * 0 - 0.0, X * np.nan, X):
        if first is None and f.cache_info().traces:
            first = f.cache_info().compiles   # after the first call
        if fn is _if_then_raise and np.isnan(x).any():
            continue
        with np.errstate(invalid="ignore"):
            try:
                want = fn(x)
            except ValueError as e:   # int(nan)
                with pytest.raises(type(e), match=str(e)):
                    f(x)
                continue
        _same_python_values(f(x), want)
    assert f.cache_info().traces >= 2   # the probe's trace, then one per value seen
    if fn not in (_if_on_tracer, _while_on_tracer):   # (a branch's paths are graphs of their own)
        # a new value traces again and compiles nothing: the value is a constant of kernels
        # built for an earlier one (the probes of the first call and one program more)
        assert f.cache_info().compiles <= first + 2, f.cache_info()


def test_scalar_conversions_of_arrays_of_one_element_as_numpy() -> None:
    """NumPy 2.4 converts only 0-d arrays to Python scalars (earlier versions warn)."""
    from tracearray.trace.tracer import NDIM_SCALAR_CONVERSION_RAISES
    for conv in (int, float, complex):
        fn = (lambda c: lambda x: x * c(x[:1]))(conv)
        f = tracearray.compile(fn, device="cpu")
        if NDIM_SCALAR_CONVERSION_RAISES:
            with pytest.raises(TypeError, match="only 0-dimensional arrays"):
                fn(X.ravel())
            with pytest.raises(TypeError, match="only 0-dimensional arrays"):
                f(X.ravel())
    for conv in (int, float):   # (of a complex NumPy scalar: its real part, warned)
        with pytest.raises(TypeError):
            tracearray.compile(lambda x: conv(x[:1] * 1j), device="cpu")(X.ravel())


def test_branches_on_values_are_staged_on_the_emulated_gpu(emulated_gpu) -> None:
    from tracearray.gpu import to_device
    f = tracearray.compile(_if_on_tracer, device="cuda")
    for x in (X, -X):
        np.testing.assert_array_equal(f(x), _if_on_tracer(x))
        np.testing.assert_array_equal(f(to_device(x)).numpy(), _if_on_tracer(x))


def test_staged_branch_takes_numpys_errors() -> None:
    f = tracearray.compile(_if_then_raise, device="cpu")
    with pytest.raises(ValueError, match="a NaN in the input"):
        f(np.where(X > 0, np.nan, X))
    for fn, match in ((lambda x: 1 if x else 0, "more than one element"),
                      (lambda x: 1 if x[:0] else 0, "empty array"),
                      (_and_of_tracers, "more than one element")):
        with pytest.raises(ValueError, match=match):
            tracearray.compile(fn, device="cpu")(X)


def _flags(a: Any) -> Any:
    f = a.flags
    return np.array([f.c_contiguous, f.f_contiguous, f.contiguous, f.fortran, f.writeable,
                     f["C"], f["F_CONTIGUOUS"], f["W"]])


FLAG_VIEWS = {
    "argument": lambda a: _flags(a), "transpose": lambda a: _flags(a.T),
    "strided": lambda a: _flags(a[:, ::2]), "row": lambda a: _flags(a[1]),
    "column": lambda a: _flags(a[:, 1]), "computed": lambda a: _flags(a * 2),
    "computed.T": lambda a: _flags((a * 2).T), "reshape": lambda a: _flags(a.reshape(4, 3)),
    "one row": lambda a: _flags(a[:1]), "broadcast_to": lambda a: _flags(
        np.broadcast_to(a[0], (2, 4))),
    "owndata": lambda a: np.array([(a * 2).flags.owndata, (a * 2)[1:].flags.owndata]),
    # a branch on a view's layout takes NumPy's branch
    "branch": lambda a: a * (1 if a.T.flags["C_CONTIGUOUS"] else 2),
}


@pytest.mark.parametrize("name", sorted(FLAG_VIEWS))
def test_flags_are_numpys_for_views_of_c_contiguous_arrays(name: str) -> None:
    """``x.flags`` while tracing: NumPy's for the same view of a C-contiguous array
    (divergence traced-layout-flags); ``x.T.flags.c_contiguous`` was True."""
    from tracearray.testing import assert_matches_numpy
    assert_matches_numpy(FLAG_VIEWS[name], np.arange(12, dtype=np.float32).reshape(3, 4),
                         device="cpu")


def test_argument_conversion_passes_tracers_through() -> None:
    """np.asarray & co. return the traced value while tracing (asarray may alias it, array
    copies it), so NumPy's own Python functions that begin with asanyarray trace; outside a
    trace they are NumPy's functions again."""
    def f(x):
        a = np.asarray(x)
        b = np.array([x, x * 2])                       # nested: stacked
        c = np.ascontiguousarray(x, dtype=np.float64)
        return a + 1, b, c, np.asanyarray(x), np.asfortranarray(x), np.array(x, ndmin=3)
    got = trace(f, X)
    assert len(got.outputs) == 6
    assert got.outputs[1].shape == (2,) + X.shape and got.outputs[2].dtype == np.float64
    assert got.outputs[5].shape == (1,) + X.shape
    assert not hasattr(np.asarray, "__wrapped__")      # restored after the trace
    assert np.asarray([1, 2]).dtype == np.int64


_LISTS = {
    "max": lambda a: np.max([a, a * 2], axis=0),
    "sum": lambda a: np.sum([a, a + 1]),
    "mean": lambda a: np.mean([a, a * 2], axis=0),
    "std": lambda a: np.std([a[0, 0], a[0, 1], a[1, 2]]),
    "var": lambda a: np.var([a, a ** 2], axis=1, ddof=1),
    "any": lambda a: np.any([a > 1, a < -1], axis=0),
    "argmax": lambda a: np.argmax([a[0, 0], a[1, 1], a[1, 2]]),
    "cumsum": lambda a: np.cumsum([a, a]),
    "round": lambda a: np.round([a / 3, a], 2),
    "tuple": lambda a: np.min((a, 3 * a)),
    "mixed": lambda a: np.mean([a[0, 0], 1.0, a[1, 2]]),
    "nested": lambda a: np.concatenate([[a[0, 0]], a[1]]),
    # lists as ufunc and np.where operands: arrays as np.asarray makes them (not weak)
    "operand": lambda a: (a + [1, 2, 3], a * [[1.5], [2]], np.maximum(a, (0, 1, 2))),
    "traced operand": lambda a: (np.add(a, [a[0, 0], 1.0, 2]), a - [[a[0, 1]], [2.0]]),
    "where": lambda a: (np.where([True, False, True], a, [1.0, 2.0, 3.0]),
                        np.where(a > 0, [a[0, 0]] * 3, [1, 2, 3])),
    # functions tracearray implements, NumPy's dispatch missing the list's traced values
    "dot": lambda a: np.dot([a[0, 0], a[0, 1]], [a[1, 0], a[1, 1]]),
    "percentile": lambda a: np.percentile([a[0, 0], a[0, 1], a[1, 2], a[1, 0]], 50),
    "norm": lambda a: np.linalg.norm([a[0, 0], a[1, 1]]),
}


@pytest.mark.parametrize("name", sorted(_LISTS))
def test_numpy_functions_of_lists_of_traced_values(name: str) -> None:
    """np.max([a, b], axis=0), np.mean([x0, x1, x2]) and the like: NumPy converts the list in
    C, asking each traced value for its data; while tracing, the list is converted as
    np.asarray converts it (its helpers _wrapreduction, _wrapfunc, _methods._mean, ... are
    replaced like the conversions), then the traced array's method runs."""
    from tracearray.testing import assert_matches_numpy
    assert_matches_numpy(_LISTS[name], X - 2, device="cpu")


def test_numpy_implementations_run_on_tracers() -> None:
    """A NumPy function without a tracearray implementation runs NumPy's own Python code on
    the tracers; what it needs and tracearray lacks is reported as that function's."""
    g = trace(lambda x: np.diff(x, axis=0), X)
    assert "subtract" in {n.op for n in g.nodes()}
    with pytest.raises(UnsupportedOperationError,
                       match=r"np.array2string is not supported .* branches on array values"):
        tracearray.compile(lambda x: np.array2string(x), device="cpu")(X)
    # (np.geomspace branches on its endpoints' values: staged, and NumPy's result)
    f = lambda x: np.geomspace(1.0, x.max() + 2.0, 4)  # noqa: E731
    np.testing.assert_allclose(tracearray.compile(f, device="cpu")(X), f(X), rtol=1e-6)


def test_unsupported_random_calls_are_refused_with_the_users_line() -> None:
    # (supported draws are tests/test_random.py's)
    def f(x):
        return x + np.random.gamma(2.0, size=x.shape)   # <- random
    with pytest.raises(UnsupportedOperationError, match="np.random.gamma") as info:
        trace(f, X)
    assert "pass it in" in str(info.value)
    assert_points_at(info.value, f, "<- random")
    rng = np.random.default_rng(0)
    with pytest.raises(UnsupportedOperationError, match="random generator"):
        trace(lambda x: x + rng.normal(size=x.shape), X)
    assert np.random.gamma(2.0, size=2).shape == (2,)   # NumPy's again after the trace


def test_static_python_scalars_allow_control_flow() -> None:
    def fn(x: Any, n: int, flag: bool = True) -> Any:
        if flag and n > 2:       # Python values: ordinary control flow
            return x * n
        return x

    graph = trace(fn, X, 3)
    assert len(graph.inputs) == 1                      # the int is baked in, not an input
    np.testing.assert_array_equal(run(graph, X), X * 3)
    assert len(trace(fn, X, 3, flag=False).outputs[0].args) == 0   # returns the input itself


def test_static_argnums_array_becomes_constant() -> None:
    def fn(x: Any, table: Any) -> Any:
        return x + table

    table = np.array([1.0, 2.0, 3.0], np.float32)
    graph = trace(fn, X, table, static_argnums=(1,))
    assert len(graph.inputs) == 1 and "constant" in {n.op for n in graph.nodes()}
    np.testing.assert_array_equal(run(graph, X), X + table)


def test_shape_is_static_and_usable_in_python() -> None:
    def fn(x: Any) -> Any:
        rows, cols = x.shape
        if x.ndim == 2 and x.size > 4 and x.dtype == np.float32:
            return x.reshape(cols, rows) * len(x)
        return x

    graph = trace(fn, X)
    np.testing.assert_array_equal(run(graph, X), X.reshape(3, 2) * 2)


# ============================================================================================
# Constants, loops, iteration, printing
# ============================================================================================

GLOBAL_TABLE = np.array([10.0, 20.0, 30.0], np.float32)


def _uses_global(x: Any) -> Any:
    return x + GLOBAL_TABLE


GLOBAL_OFFSET = 2.0


def _uses_global_offset(x: Any) -> Any:
    return x + GLOBAL_OFFSET


def test_setting_shape_reshapes_in_place_as_numpy_does() -> None:
    """``x.shape = s`` on a value the function made: a view of the same memory (a write
    through it is seen by the original), complex values too; NumPy's AttributeError where
    it would need a copy; refused on an argument, whose layout is the caller's."""
    def reshape_in_place(x, z):
        y = x * 2
        view = y
        y.shape = (x.size,)
        y[0] = 7.0
        c = z * 1j + x
        c.shape = x.size
        return view, c
    x = np.arange(6.0).reshape(2, 3)
    got = tracearray.compile(reshape_in_place, device="cpu")(x, x + 1)
    want = reshape_in_place(x, x + 1)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)

    def transposed(x):
        t = (x + 1).T
        t.shape = x.size
        return t
    with pytest.raises(AttributeError, match="Incompatible shape for in-place"):
        tracearray.compile(transposed, device="cpu")(x)

    def argument(x):
        x.shape = x.size
        return x
    with pytest.raises(UnsupportedOperationError, match="shape of an argument"):
        tracearray.compile(argument, device="cpu")(x.copy())


def test_global_arrays_are_read_at_every_call() -> None:
    """A global array is an input of the graph, read when the compiled function runs: an
    in-place update between calls is seen, as NumPy would see it."""
    graph = trace(_uses_global, X)
    assert graph.globals == ("GLOBAL_TABLE",) and graph.inputs[-1].attr("name") == \
        "global GLOBAL_TABLE"
    f = tracearray.compile(_uses_global, device="cpu")
    saved = GLOBAL_TABLE.copy()
    try:
        np.testing.assert_array_equal(f(X), X + saved)
        GLOBAL_TABLE[:] = -1.0                         # mutate after compiling
        np.testing.assert_array_equal(f(X), X - 1.0)
        assert f.stats.traces == 1
    finally:
        GLOBAL_TABLE[:] = saved


def test_a_changed_global_value_retraces() -> None:
    """A global that is not an array is a constant of the trace, guarded: a call that sees
    another value traces again (never the stale constant)."""
    global GLOBAL_OFFSET
    f = tracearray.compile(_uses_global_offset, device="cpu")
    saved = GLOBAL_OFFSET
    try:
        np.testing.assert_array_equal(f(X), X + 2.0)
        GLOBAL_OFFSET = 5.0
        np.testing.assert_array_equal(f(X), X + 5.0)
        GLOBAL_OFFSET = 5.0                             # equal value: no new trace
        f(X)
        assert f.stats.traces == 2
    finally:
        GLOBAL_OFFSET = saved


def test_array_creation_without_traced_arguments_is_owned_and_known() -> None:
    """Arrays the function makes are its own (writable) memory, with values known while
    tracing: a uniform fill is one broadcast constant, np.arange a constant."""
    def fn(x: Any) -> Any:
        return x + np.zeros(3), np.ones((2, 3), np.int8), np.arange(3) * 2

    graph = trace(fn, X)
    outs = run(graph, X)
    assert graph.outputs[1].op == "broadcast_to" and graph.outputs[1].args[0].op == "constant"
    np.testing.assert_array_equal(outs[2], np.arange(3) * 2)
    assert outs[1].dtype == np.int8

    def uses_values(x: Any) -> Any:
        idx = np.arange(3)
        out = np.zeros(int(idx.sum()) + 1)        # known: a size
        for i in idx:                             # known: loop values are integers
            out[i] = x[0, i]
        return out, idx.tolist() == [0, 1, 2]

    got, flag = tracearray.compile(uses_values, device="cpu")(X)
    np.testing.assert_array_equal(got, uses_values(X)[0])
    assert flag


def test_python_loops_unroll() -> None:
    def fn(x: Any) -> Any:
        acc = x
        for _ in range(3):
            acc = acc + x
        return acc

    graph = trace(fn, X)
    assert sum(n.op == "add" for n in graph.nodes()) == 3
    np.testing.assert_array_equal(run(graph, X), X * 4)


def test_ndenumerate_fromiter_and_nditer_of_traced_arrays() -> None:
    """np.ndenumerate walks a traced array's elements in C order with their index tuples
    (unrolled, like iteration over its rows); np.fromiter stacks an iterable of traced
    values (``count`` items, NumPy's error when fewer); np.nditer and np.asmatrix (an
    ndarray subclass) are refused by name, and as_strided is a view (test_as_strided.py)."""
    from tracearray.errors import UnsupportedOperationError
    from tracearray.testing import assert_matches_numpy
    x = np.arange(6.0).reshape(2, 3) - 2.5

    def weighted(a):
        s = np.zeros(())
        for (i, j), v in np.ndenumerate(a):
            s = s + v * (i + 2 * j + 1)
        return s
    assert_matches_numpy(weighted, x)
    assert_matches_numpy(lambda a: np.fromiter((r.sum() for r in a), dtype=np.float32), x)
    assert_matches_numpy(lambda a: np.fromiter((v * 2 for v in a[0]), float, count=2), x)
    with pytest.raises(ValueError, match="iterator too short"):
        tracearray.compile(lambda a: np.fromiter(iter(a[0]), float, count=5))(x)
    with pytest.raises(UnsupportedOperationError, match="np.nditer of a traced array"):
        tracearray.compile(lambda a: [v for v in np.nditer(a)])(x)
    with pytest.raises(UnsupportedOperationError, match="np.asmatrix of a traced array"):
        tracearray.compile(lambda a: np.asmatrix(a) * 2)(x)
    assert_matches_numpy(lambda a: np.lib.stride_tricks.as_strided(a, (2, 2), (8, 8)), x)
    # NumPy's own sliding_window_view (as_strided inside) of a NumPy array is NumPy's
    w = np.arange(5.0)
    assert_matches_numpy(lambda a: a[:3] * np.lib.stride_tricks.sliding_window_view(w, 3),
                         np.ones((3, 3)))


def test_len_and_iteration_over_first_axis() -> None:
    def fn(x: Any) -> Any:
        total = 0.0
        for row in x:                                  # unrolls over the static first axis
            total = total + row * len(x)
        return total

    graph = trace(fn, X)
    assert sum(n.op == "slice" for n in graph.nodes()) == len(X)
    np.testing.assert_array_equal(run(graph, X), fn(X))
    with pytest.raises(TypeError):
        trace(lambda x: len(x.sum()), X)               # len() of a 0-d array, as in NumPy
    with pytest.raises(TypeError):
        trace(lambda x: [r for r in x.sum()], X)


def test_print_at_trace_time_shows_the_tracer(capsys: pytest.CaptureFixture) -> None:
    # (print(x) itself asks for the values, which do not exist while tracing: an error,
    # tests/test_reliability_inputs.py)
    def fn(x: Any) -> Any:
        print(repr(x), x.shape)
        return x + 1

    trace(fn, X)
    assert "f32[2,3]" in capsys.readouterr().out       # printed once, while tracing


def _kinds(x: Any) -> Any:
    s = x.sum()
    z = x + 1j
    return np.array([isinstance(x, np.ndarray), isinstance(s, np.ndarray),
                     isinstance(s, float), isinstance(s, np.floating),
                     isinstance(x[0], np.generic), isinstance(z, np.ndarray),
                     isinstance(z.sum(), complex), isinstance(x.astype(np.float32).sum(), float),
                     isinstance(x, (list, tuple)), isinstance(s, (int, np.integer)),
                     isinstance(x[x > 0.5], np.ndarray)])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_isinstance_of_traced_values_is_numpys(device: str) -> None:
    """isinstance() in the traced function answers as NumPy's values would (ndarray; a 0-d
    value: its dtype's scalar type), so a branch on it is NumPy's branch, on both targets;
    type() is the tracer's, and tracearray's own code sees the tracer's class."""
    if device == "cuda":
        from gpu_emulator import EmulatedDevice
        from tracearray.gpu import driver
        prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        x = np.linspace(0.0, 1.0, 5)
        np.testing.assert_array_equal(tracearray.compile(_kinds, device=device)(x), _kinds(x))

        def branch(v: Any) -> Any:
            return v * 2 if isinstance(v, np.ndarray) else v * 3
        np.testing.assert_array_equal(tracearray.compile(branch, device=device)(x), x * 2)
    finally:
        if device == "cuda":
            driver.set_device_for_testing(prev)
    seen = []

    def probe(v: Any) -> Any:
        seen.append((type(v).__name__, v.__class__.__name__))
        return v + 1
    trace(probe, X)
    assert seen == [("Tracer", "ndarray")]
    from tracearray.trace.tracer import Tracer, numpy_class
    t = Tracer(trace(lambda v: v, X).inputs[0])

    class Frame:   # a frame of tracearray's or NumPy's code, and a user's
        def __init__(self, module: str):
            self.f_globals = {"__name__": module}
    assert numpy_class(t, Frame("tracearray.trace.build")) is Tracer
    assert numpy_class(t, Frame("numpy.lib._function_base_impl")) is Tracer
    assert numpy_class(t, Frame("numpy_helpers")) is np.ndarray


def test_return_structure_is_rebuilt() -> None:
    def fn(x: Any) -> Any:
        return {"sum": x.sum(), "rows": [x[0], x[1]], "shape": x.shape, "pair": (x, 2)}

    graph = trace(fn, X)
    out = run(graph, X)
    assert out["shape"] == (2, 3) and out["pair"][1] == 2
    np.testing.assert_array_equal(out["rows"][1], X[1])
    np.testing.assert_array_equal(out["pair"][0], X)
    assert out["sum"] == X.sum()


def test_pytree_arguments_become_inputs_in_order() -> None:
    def fn(params: dict, xs: list) -> Any:
        return params["w"] * xs[0] + params["b"] - xs[1]

    w, b = np.float32(2.0), np.ones(3, np.float32)
    xs = [np.arange(3, dtype=np.float32), np.full(3, 0.5, np.float32)]
    graph = trace(fn, {"w": w, "b": b}, xs)
    assert len(graph.inputs) == 4
    np.testing.assert_array_equal(run(graph, np.asarray(w), b, *xs), fn({"w": w, "b": b}, xs))


def test_format_graph_lists_every_node() -> None:
    graph = trace(lambda x: (x * 2.0).sum(axis=1), X)
    text = format_graph(graph)
    assert "input" in text and "multiply" in text and "sum" in text and "f32[2,3]" in text
    assert text.splitlines()[-1].startswith("return ")
    assert len(text.splitlines()) == len(graph.nodes()) + 1


# ============================================================================================
# Unsupported NumPy
# ============================================================================================

def _shares_memory(x: Any) -> Any:
    return np.shares_memory(x > 2, x)  # <- shares_memory


def _reduce_of_composite(x: Any) -> Any:
    return np.arctan2.reduce(x)  # <- arctan2


def _ufunc_out(x: Any) -> Any:
    return np.exp(x, out=np.empty((2, 3), np.float32))


def test_ufunc_out_into_an_array_the_function_made() -> None:
    np.testing.assert_allclose(tracearray.compile(_ufunc_out, device="cpu")(X), np.exp(X),
                               rtol=1e-6)


def _ufunc_where(x: Any) -> Any:
    return np.add(x, 1, where=x > 2)  # <- where


def _complex(x: Any) -> Any:
    # complex values trace (trace/complex.py); a result type that depends on the data does not
    return np.real_if_close(x * 1j)  # <- complex


def _unsupported_dtype(x: Any) -> Any:
    return x.astype("datetime64[s]")  # <- dtype


def _nonzero_where(x: Any) -> Any:
    return np.where(x > 2)  # <- one-arg where


def _unsupported_method(x: Any) -> Any:
    return x.tobytes()  # <- tobytes


UNSUPPORTED = [
    (_shares_memory, "<- shares_memory", "shares_memory"),
    (_reduce_of_composite, "<- arctan2", "arctan2.reduce"),
    (_ufunc_where, "<- where", "where="),
    (_complex, "<- complex", "real_if_close"),
    (_unsupported_dtype, "<- dtype", "datetime64"),
    (_unsupported_method, "<- tobytes", "ndarray.tobytes"),
]


@pytest.mark.parametrize("fn,marker,name", UNSUPPORTED, ids=[u[2] for u in UNSUPPORTED])
def test_unsupported_operations_name_the_function_and_line(fn: Callable, marker: str,
                                                           name: str) -> None:
    with pytest.raises(TypeError) as info:             # UnsupportedOperationError / dtype error
        trace(fn, X)
    assert name in str(info.value), str(info.value)
    assert "not supported" in str(info.value), str(info.value)
    assert_points_at(info.value, fn, marker)


def test_unsupported_error_is_a_tracearray_error() -> None:
    with pytest.raises(UnsupportedOperationError):
        trace(_shares_memory, X)


# ============================================================================================
# Shape errors: NumPy's message plus the user's line
# ============================================================================================

def _bad_broadcast(x: Any) -> Any:
    return x + np.ones(4, np.float32)  # <- broadcast


def _bad_where_broadcast(x: Any) -> Any:
    return np.where(x[0] > 1, x[:, :2], 0.0)  # <- where broadcast


def _bad_reshape(x: Any) -> Any:
    return x.reshape(4, 2)  # <- reshape


def _axis_out_of_range(x: Any) -> Any:
    return x.sum(axis=2)  # <- axis


def _negative_axis_out_of_range(x: Any) -> Any:
    return np.mean(x, axis=-3)  # <- negative axis


def _bad_matmul(x: Any) -> Any:
    return x @ np.ones(2, np.float32)  # <- matmul


def _bad_concatenate(x: Any) -> Any:
    return np.concatenate([x, x.T], axis=1)  # <- concatenate


def _bad_broadcast_to(x: Any) -> Any:
    return np.broadcast_to(x, (3, 3))  # <- broadcast_to


def _index_out_of_range(x: Any) -> Any:
    return x[5]  # <- index


def _too_many_indices(x: Any) -> Any:
    return x[0, 0, 0]  # <- too many


def _bad_squeeze(x: Any) -> Any:
    return np.squeeze(x, axis=0)  # <- squeeze


def _repeated_transpose_axis(x: Any) -> Any:
    return x.transpose(0, 0)  # <- transpose


def _empty_max(x: Any) -> Any:
    return x[:, :0].max(axis=1)  # <- empty max


SHAPE_ERRORS = [
    (_bad_broadcast, "<- broadcast", ValueError),
    (_bad_where_broadcast, "<- where broadcast", ValueError),
    (_bad_reshape, "<- reshape", ValueError),
    (_axis_out_of_range, "<- axis", np.exceptions.AxisError),
    (_negative_axis_out_of_range, "<- negative axis", np.exceptions.AxisError),
    (_bad_matmul, "<- matmul", ValueError),
    (_bad_concatenate, "<- concatenate", ValueError),
    (_bad_broadcast_to, "<- broadcast_to", ValueError),
    (_index_out_of_range, "<- index", IndexError),
    (_too_many_indices, "<- too many", IndexError),
    (_bad_squeeze, "<- squeeze", ValueError),
    (_repeated_transpose_axis, "<- transpose", ValueError),
    (_empty_max, "<- empty max", ValueError),
]


@pytest.mark.parametrize("fn,marker,cls", SHAPE_ERRORS,
                         ids=[s[1].strip("<- ") for s in SHAPE_ERRORS])
def test_shape_errors_read_like_numpy_plus_line(fn: Callable, marker: str, cls: type) -> None:
    expected = numpy_message(fn, X)
    with pytest.raises(cls) as info:
        trace(fn, X)
    assert expected in str(info.value), f"NumPy says {expected!r}; tracearray:\n{info.value}"
    assert_points_at(info.value, fn, marker)


def test_broadcast_error_is_a_trace_shape_error() -> None:
    with pytest.raises(TraceShapeError):
        trace(_bad_broadcast, X)


def test_error_location_skips_numpy_frames() -> None:
    def fn(x: Any) -> Any:
        return np.apply_along_axis(np.shares_memory, 1, x > 2, x)  # <- apply

    with pytest.raises(TypeError) as info:   # shares_memory, called inside NumPy's Python code
        trace(fn, X)
    assert_points_at(info.value, fn, "<- apply")
    assert "_shape_base_impl.py" not in str(info.value)


def test_every_linalg_and_fft_function_has_an_entry() -> None:
    """np.linalg and np.fft functions without an entry are refused by the name users write,
    before NumPy's wrapper code fails inside on a traced value (it asks for __array_wrap__);
    today every one of them has an entry, so the refusal only meets a newer NumPy's."""
    from tracearray.trace import composites
    from tracearray.trace.dispatch import refusal
    for mod in (np.linalg, np.fft):
        for name in dir(mod):
            fn = getattr(mod, name)
            if type(fn).__name__ == "_ArrayFunctionDispatcher":
                assert composites.lookup(fn) is not None, f"{mod.__name__}.{name}"

    def newer(a):   # a function of a future np.linalg, as NumPy defines them
        return a
    newer._implementation = lambda a: a
    newer.__module__ = "numpy.linalg._linalg"
    assert "does not implement this np.linalg function" in refusal(newer)


def test_linalg_wrappers_of_supported_ops_compile() -> None:
    x = np.arange(9.0).reshape(3, 3) / 7
    f = tracearray.compile(lambda a: (np.linalg.matrix_power(a, 5), np.linalg.trace(a),
                                      np.linalg.vecdot(a, a), np.linalg.multi_dot([a, a.T, a])))
    got = f(x)
    want = (np.linalg.matrix_power(x, 5), np.linalg.trace(x), np.linalg.vecdot(x, x),
            np.linalg.multi_dot([x, x.T, x]))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_weak_scalar_overflow_points_at_line() -> None:
    def fn(x: Any) -> Any:
        return x.astype(np.uint8) + 300  # <- overflow

    with pytest.raises(OverflowError) as info:
        trace(fn, X)
    assert numpy_message(fn, X) in str(info.value)
    assert_points_at(info.value, fn, "<- overflow")


# ============================================================================================
# Indexing, item assignment, in-place updates
# ============================================================================================

def test_data_dependent_sizes_compile() -> None:
    """x[mask] with a traced mask, one-argument np.where and a traced integer used as an
    index have sizes (or values) only the data knows: a probe finds them, then the function
    is traced with them (tests/test_data_sizes.py has the rest)."""
    x = np.array([[0, 1, 0], [0, 0, 3]], np.float32)
    for fn in (lambda x: x[x > 2], _nonzero_where, _index_with_tracer):
        got = tracearray.compile(fn, device="cpu")(x)
        want = fn(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g, w)


def test_invalid_index_type_is_an_index_error() -> None:
    with pytest.raises(IndexError) as info:
        trace(lambda x: x[1.5], X)
    assert numpy_message(lambda x: x[1.5], X) in str(info.value)


def _scatter(x: Any) -> Any:
    y = x * 2
    y[x[0].astype(np.int64) % 3] = 1.0  # <- scatter
    return y


def test_setitem_with_a_traced_index_array_is_a_scatter() -> None:
    x = np.array([[0, 1, 0], [1, 0, 3]], np.float32)
    np.testing.assert_array_equal(tracearray.compile(_scatter, device="cpu")(x), _scatter(x))


def _iadd_argument(x: Any) -> Any:
    x += 1
    return x


def _iadd_view_of_argument(x: Any) -> Any:
    row = x[0]
    row *= 2
    return row


def _iadd_transposed_argument(x: Any) -> Any:
    t = x.T
    t -= 1
    return t


def _item_iadd_argument(x: Any) -> Any:
    x[0] += 1


@pytest.mark.parametrize("fn", [_iadd_argument, _iadd_view_of_argument,
                                _iadd_transposed_argument, _item_iadd_argument])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_inplace_update_of_an_argument_writes_the_callers_array(fn: Callable, layout: str
                                                                ) -> None:
    """NumPy writes into the caller's array (also through a view): so does the compiled
    function, whatever the argument's layout."""
    base = {"C": X.copy(), "F": np.asfortranarray(X), "strided": np.repeat(X, 2, 1)[:, ::2]}
    ref, arg = base[layout].copy(order="K"), base[layout].copy(order="K")
    if layout == "strided":
        ref, arg = np.repeat(X, 2, 1)[:, ::2], np.repeat(X, 2, 1)[:, ::2]
    want = fn(ref)
    got = tracearray.compile(fn, device="cpu")(arg)
    np.testing.assert_array_equal(arg, ref)
    if want is not None:
        np.testing.assert_array_equal(got, want)


def test_inplace_update_of_overlapping_arguments_is_refused() -> None:
    def fn(a: Any, b: Any) -> None:
        a += b

    f = tracearray.compile(fn, device="cpu")
    a = np.ones(4)
    with pytest.raises(InputError, match="share memory"):
        f(a, a)
    with pytest.raises(InputError, match="share memory"):
        f(a[1:], a[:-1])
    np.testing.assert_array_equal(a, 1.0)      # nothing was written
    b = np.arange(4.0)
    f(a, b)
    np.testing.assert_array_equal(a, 1.0 + b)
    ro = np.ones(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        f(ro, b)


def test_inplace_update_of_a_local_works() -> None:
    def fn(x: Any) -> Any:
        y = x * 2
        y += 1
        y **= 2
        z = x.copy()        # a copy is not the caller's array
        z -= 3
        w = np.ones_like(x, dtype=np.int32)
        w *= 2.0 if False else 2
        return y, z, w

    graph = trace(fn, X)
    for got, want in zip(run(graph, X), fn(X.copy())):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_inplace_operators_keep_numpys_aliasing() -> None:
    """``y += v`` updates the memory: every name, view and list element of it sees it."""
    def fn(x: Any) -> Any:
        y = x.copy()
        alias = y
        held = [y, y[0], y.T]
        y += 1
        y[:, 0] *= 10
        return alias, held[1], held[2], y.T[1]

    for got, want in zip(tracearray.compile(fn, device="cpu")(X), fn(X.copy())):
        np.testing.assert_array_equal(got, want)


def _ndarray_iadd_tracer(x: Any) -> Any:
    buf = np.zeros((2, 3), np.float32)
    buf += x
    return buf


def test_updating_an_array_the_function_made_with_a_traced_value() -> None:
    np.testing.assert_array_equal(tracearray.compile(_ndarray_iadd_tracer, device="cpu")(X),
                                  _ndarray_iadd_tracer(X))


def test_inplace_on_scalar_results_rebinds_like_numpy() -> None:
    """Reductions and integer indexing give NumPy *scalars*, which are immutable: ``s += v``
    is ``s = s + v`` (promoting and broadcasting), even when s came from an argument."""
    def fn(x: Any) -> Any:
        s = x.sum()
        s += 1.5            # int64 scalar + float -> float64
        t = x[0]
        t *= x              # scalar *= array -> array
        u = x.max()
        u **= 2
        return s, t, u

    xi = np.array([3, -4], np.int32)
    graph = trace(fn, xi)
    for got, want in zip(run(graph, xi), fn(xi.copy())):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == np.shape(want)


def test_inplace_on_0d_arrays_writes_and_on_numpy_scalar_arguments_rebinds() -> None:
    """A 0-d *array* the function makes (np.zeros(()), np.array(v), np.full((), v), a copy
    or astype of a 0-d array) is an ndarray: ``y += v`` writes into it, seen through its
    other names, views and containers, in its own dtype (same_kind cast or NumPy's
    casting error). A NumPy scalar argument is immutable: ``s += v`` rebinds s (promoting),
    and a 0-d array argument is written in place; the two are different traces. (Every
    0-d value that was not a view or an argument counted as a scalar: the aliases kept the
    old value, float32 and int8 accumulators became float64 and int64; probe of the
    twelfth session.)"""
    def alias(a):
        y = np.zeros(())
        z, v, held = y, y.view(), [y]
        y += a.sum()
        return z, v, held[0]

    def kinds(a):
        f32 = np.zeros((), np.float32)
        f32 += a.sum()              # float32 accumulator: stays float32
        i8 = np.zeros((), np.int8)
        i8 += np.int64(300)         # wraps in int8 (44)
        made = np.array(a.sum())
        same = made
        made *= 2
        full = np.full((), a[0])
        copy = full.copy()
        ref = copy
        copy -= 1
        return f32, i8, same, ref, full

    def into_int(a):
        acc = np.zeros((), np.int64)
        acc += a.sum()              # float64 into int64: NumPy's same_kind error
        return acc

    def bump(s):
        t = s
        s += 0.5                    # NumPy scalar: s + 0.5, a float64; t keeps the old value
        return t, s

    a = np.array([0.1, 0.2, 0.5])
    for fn in (alias, kinds):
        got, want = tracearray.compile(fn, device="cpu")(a), fn(a)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype, fn.__name__
            np.testing.assert_array_equal(g, w, err_msg=fn.__name__)
    with pytest.raises(TypeError, match="same_kind"):
        tracearray.compile(into_int, device="cpu")(a)
    f = tracearray.compile(bump, device="cpu")
    for s in (np.int8(3), np.float32(2.0), np.int64(5)):
        got, want = f(s), bump(s)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype and g == w, (s, g, w)
    arr = np.array(3.0)
    f2 = tracearray.compile(lambda s: s.__iadd__(0.5), device="cpu")
    f2(arr)                         # a 0-d array argument: written in place (back to it)
    assert arr == 3.5
    with pytest.raises(TypeError, match="same_kind"):   # int8 array += 0.5, after int8 scalar
        f(np.array(3, np.int8))


def test_numpy_scalars_have_no_memory_to_share_or_write() -> None:
    """A NumPy scalar (a reduction's, an element's, ``y[()]`` of a 0-d array, a scalar
    argument, complex ones too) is immutable: ``v = y[()]`` is a copy, its reshape, ``s[None]``
    and ravel() are new arrays, ``s op= v`` rebinds, and ``s[...] = v`` or ``out=s`` raise
    NumPy's TypeError. These were views or in-place writes (and a complex scalar argument's
    ``s += 1j`` an internal error; probe of the twelfth session)."""
    def snap(x):
        y = np.zeros(())
        v = y[()]
        y += 5
        return v, y

    def through(x):
        v = x[()]
        v *= 2
        return v

    def scalar_views(x):
        s = x.sum()
        r, e = s.reshape(1), s[None]
        r += 1
        e += 2
        return s, r, e

    def complex_alias(x):
        s = (x * 1j).sum()
        t = s
        s += 1
        c = (x + 1j)[0]
        u = c
        c -= 1
        w = (x * 1j).astype(np.complex64).sum()
        w *= np.float64(2.0)       # a scalar: promoted to complex128
        return t, s, u, c, w

    x = np.arange(1.0, 5.0)
    for fn, arg in ((snap, x), (scalar_views, x), (complex_alias, x)):
        got, want = tracearray.compile(fn, device="cpu")(arg), fn(arg)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype, fn.__name__
            np.testing.assert_array_equal(g, w, err_msg=fn.__name__)
    arr = np.array(3)
    assert tracearray.compile(through, device="cpu")(arr) == 6 and arr == 3
    f = tracearray.compile(lambda s: s.__iadd__(1j), device="cpu")
    for s in (np.complex128(1), np.complex64(1)):
        got = f(s)
        assert got == 1 + 1j and got.dtype == s.dtype and s == 1

    def item(x):
        s = x.sum()
        s[...] = 1
        return s

    def into(x):
        s = x.sum()
        np.add(s, 1, out=s)
        return s
    # np.where and np.copy return ndarrays, 0-d too: written in place, through their aliases
    # (soak cpu-2026-12-07-twelfth-reread, program 218: np.copyto into a copy of np.where's
    # 0-d result raised the scalar's item-assignment error)
    def arrays(x):
        w = np.where(x[0] > 0, x[0], -x[0])
        z = w
        w += 1
        c = np.copy(x.sum())
        d = c
        c *= 2
        t = w.copy()
        np.copyto(t, 3, casting="unsafe")
        return z, d, t
    for g, want in zip(tracearray.compile(arrays, device="cpu")(x), arrays(x)):
        np.testing.assert_array_equal(g, want)
    with pytest.raises(TypeError, match="does not support item assignment"):
        tracearray.compile(item, device="cpu")(x)
    with pytest.raises(TypeError, match="ArrayType"):
        tracearray.compile(into, device="cpu")(x)


def test_inplace_same_kind_casting_like_numpy() -> None:
    def fn(x: Any) -> Any:
        y = x.astype(np.int32)
        y += 1.5            # float64 result into int32: NumPy's UFuncTypeError (a TypeError)
        return y

    with pytest.raises(TypeError) as info:
        trace(fn, X)
    assert "same_kind" in str(info.value)

    def widening(x: Any) -> Any:
        y = x.astype(np.float16)
        y += x              # float32 result cast back into float16 (same kind): fine
        return y

    graph = trace(widening, X)
    assert graph.outputs[0].dtype == np.float16
    np.testing.assert_array_equal(run(graph, X), widening(X))


def test_inplace_cannot_broadcast_the_target() -> None:
    def fn(x: Any) -> Any:
        y = x[0] * 1
        y += x              # (3,) += (2, 3): NumPy's "non-broadcastable output operand"
        return y

    expected = numpy_message(fn, X)
    with pytest.raises(ValueError) as info:
        trace(fn, X)
    assert expected in str(info.value)


# ============================================================================================
# The IR: hash-consing and the verifier
# ============================================================================================

def _model(x: Any, y: Any) -> Any:
    return np.tanh(x @ y.T).sum(axis=0) + x.mean()


def test_tracing_twice_gives_identical_nodes() -> None:
    y = np.ones((4, 3), np.float32)
    g1 = trace(_model, X, y)
    g2 = trace(_model, X, y)
    assert g1.outputs[0] is g2.outputs[0]
    assert all(a is b for a, b in zip(g1.nodes(), g2.nodes()))
    g3 = trace(_model, X, y.astype(np.float64))
    assert g3.outputs[0] is not g1.outputs[0]          # a different signature: new nodes


def test_same_expression_is_one_node() -> None:
    def fn(x: Any, y: Any) -> Any:
        return x + y, x + y, (x + y) * (x + y)

    graph = trace(fn, X, X)
    a, b, c = graph.outputs
    assert a is b and c.args[0] is c.args[1] is a
    assert sum(n.op == "add" for n in graph.nodes()) == 1


def test_dead_nodes_leave_the_intern_table() -> None:
    """The intern table holds weak references, swept of the nodes that died when it has
    doubled: a long-running process that traces many shapes does not grow without bound,
    and a live node is still found by its structure."""
    keep = Node.make("input", (), {"index": 0, "name": "x", "shape": (7,), "dtype": "<f4"},
                     (7,), np.float32)
    kept = Node.make("negative", (keep,), {}, (7,), np.float32)
    for n in range(3 * Node._sweep_at):   # made and dropped at once
        Node.make("input", (), {"index": 0, "name": "x", "shape": (n + 8,), "dtype": "<f4"},
                  (n + 8,), np.float32)
    assert len(Node._interned) < 2 * Node._sweep_at
    assert Node.make("negative", (keep,), {}, (7,), np.float32) is kept
    assert kept.resized((keep,), (7,)) is kept
    # a large constant's key (which holds its bytes) goes as soon as its node dies
    from tracearray.trace.build import constant
    big = constant(np.arange(100_000, dtype=np.float64))
    key = big._key
    assert key in Node._interned
    del big
    gc.collect()
    Node.make("negative", (keep,), {}, (7,), np.float32)   # (entries are dropped here)
    assert key not in Node._interned


def test_nodes_are_frozen() -> None:
    node = trace(lambda x: x + 1, X).outputs[0]
    with pytest.raises(AttributeError):
        node.op = "subtract"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Node()                                         # construction goes through make()
    assert hash(node) == hash(node) and node == node


def test_every_node_has_shape_and_dtype() -> None:
    graph = trace(_model, X, np.ones((4, 3), np.float32))
    for node in graph.nodes():
        assert isinstance(node.shape, tuple) and all(isinstance(s, int) for s in node.shape)
        assert isinstance(node.dtype, np.dtype) and node.op in OPS


def test_verifier_rejects_hand_built_bad_nodes() -> None:
    x = Node.make("input", (), {"index": 0, "name": "x", "shape": (2, 3), "dtype": "<f4"},
                  (2, 3), np.float32)
    y = Node.make("input", (), {"index": 1, "name": "y", "shape": (3,), "dtype": "<f4"},
                  (3,), np.float32)
    good = Node.make("add", (x, y), {}, (2, 3), np.float32)
    verify(Graph((x, y), (good,), ("leaf",)))

    bad = {
        "wrong shape": Node.make("add", (x, y), {}, (3, 2), np.float32),
        "wrong dtype": Node.make("add", (x, y), {}, (2, 3), np.float64),
        "unknown op": Node.make("frobnicate", (x,), {}, (2, 3), np.float32),
        "wrong arity": Node.make("add", (x,), {}, (2, 3), np.float32),
        "operand not the loop dtype": Node.make(
            "add", (x, Node.make("cast", (y,), {"dtype": "<f8"}, (3,), np.float64)), {},
            (2, 3), np.float64),
        "bad reduce axes": Node.make("sum", (x,), {"axes": (1, 0), "dtype": "<f4"}, (1, 1),
                                     np.float32),
        "missing attribute": Node.make("sum", (x,), {"dtype": "<f4"}, (1, 1), np.float32),
        "no loop for the operands": Node.make("invert", (x,), {}, (2, 3), np.float32),
        "where condition not bool": Node.make("where", (x, x, x), {}, (2, 3), np.float32),
        "sum operand not cast": Node.make(
            "sum", (x,), {"axes": (0,), "dtype": "<f8"}, (1, 3), np.float64),
        "matmul operands not cast": Node.make(
            "matmul", (x, Node.make("cast", (x,), {"dtype": "<f2"}, (2, 3), np.float16)), {},
            (2, 2), np.float32),
    }
    for what, node in bad.items():
        with pytest.raises(GraphVerificationError):
            verify(Graph((x, y), (node,), ("leaf",)))
        assert what  # (named for the failure message)
    with pytest.raises(GraphVerificationError):
        verify(Graph((y, x), (good,), ("leaf",)))       # inputs out of order


# ============================================================================================
# Callables, generators, errors of later stages
# ============================================================================================

def test_partials_methods_and_callable_objects_compile() -> None:
    import functools


    def scale(x, k):
        return x * k

    class Shift:
        def __init__(self, by):
            self.by = by

        def __call__(self, x):
            return x + self.by

        def twice(self, x):
            return x * 2 + self.by

    p = tracearray.compile(functools.partial(scale, k=3.0), device="cpu")
    np.testing.assert_array_equal(p(X), X * 3.0)
    assert p.__name__ == "scale" and "scale" in repr(p)
    np.testing.assert_array_equal(tracearray.compile(Shift(1.5), device="cpu")(X), X + 1.5)
    np.testing.assert_array_equal(tracearray.compile(Shift(1.5).twice, device="cpu")(X),
                                  X * 2 + 1.5)


def test_generator_functions_are_refused() -> None:
    def gen(x):
        yield x + 1
    with pytest.raises(UnsupportedOperationError, match="generator"):
        trace(gen, X)


def _missing_method(x: Any) -> Any:
    return x.byteswap()  # <- missing


def test_a_missing_ndarray_method_is_a_located_tracearray_error() -> None:
    from tracearray.errors import UnsupportedAttributeError
    with pytest.raises(UnsupportedAttributeError) as info:
        trace(_missing_method, X)
    assert isinstance(info.value, AttributeError) and "ndarray.byteswap" in str(info.value)
    assert_points_at(info.value, _missing_method, "<- missing")
    assert not hasattr(trace(lambda x: x, X), "no_such_attribute")


def _two_ops(x: Any) -> Any:
    y = np.exp(x)  # <- exp
    return y.sum()


def test_a_failure_after_tracing_names_the_ops_and_lines(monkeypatch) -> None:
    """An unexpected failure in code generation is a CompileError (a TracearrayError, so
    fallback='numpy' catches it) naming the kernel's ops and the user's lines."""
    from tracearray.codegen import kernel
    from tracearray.errors import CompileError

    def broken(*args, **kwargs):
        raise KeyError("simulated code generator bug")
    monkeypatch.setattr(kernel, "lower_kernel", broken)
    f = tracearray.compile(_two_ops, device="cpu")
    with pytest.raises(CompileError) as info:
        f(X)
    msg = str(info.value)
    assert "exp (at " in msg and f"{THIS_FILE}:{marker_line(_two_ops, '<- exp')}" in msg, msg
    assert "KeyError" in msg and "please report" in msg
    g = tracearray.compile(_two_ops, device="cpu", fallback="numpy")
    with pytest.warns(RuntimeWarning, match="fallback"):
        np.testing.assert_allclose(g(X), np.exp(X).sum(), rtol=1e-6)


def _index_a_numpy_array(i: Any) -> Any:
    table = np.array([1.0, 2.0, 3.0])
    return table[i]


LOOKUP_TABLE = np.array([1.0, 2.0, 3.0])


def test_indexing_an_array_the_function_made_with_a_traced_index() -> None:
    """An array the function made is traced (its own memory), so indexing it with a traced
    index compiles (soak cpu-2026-12-01-d, programs 2504 and 2971, once refused); so does
    indexing a global array."""
    np.testing.assert_array_equal(
        tracearray.compile(_index_a_numpy_array, device="cpu")(np.array([0, 2])), [1.0, 3.0])
    f = tracearray.compile(lambda i: LOOKUP_TABLE[i] * 2, device="cpu")
    np.testing.assert_array_equal(f(np.array([0, 2])), [2.0, 6.0])


def test_keyword_arguments_in_any_order() -> None:
    """Keyword arguments given out of sorted order were bound to the wrong graph inputs
    (f(y=b, x=a) computed b - a): found rereading the write-back path, which flattens them
    sorted as the call path does."""
    f = tracearray.compile(lambda x, y: x - y * 2, device="cpu")
    a, b = np.arange(3.0), np.ones(3) * 10
    np.testing.assert_array_equal(f(y=b, x=a), a - b * 2)
    np.testing.assert_array_equal(f(x=a, y=b), a - b * 2)
    np.testing.assert_array_equal(f(a, y=b), a - b * 2)

    def update(*, z, w):
        w += z
    g = tracearray.compile(update, device="cpu")
    w, z = np.zeros(3), np.arange(3.0)
    g(z=z, w=w)
    np.testing.assert_array_equal(w, z)


def test_arrays_numpys_code_makes_from_shapes_are_traced_constants() -> None:
    # soak cpu-2026-12-01-n, program 2117: np.iscomplex of a real array is NumPy's
    # np.zeros(x.shape, bool); indexing it with a traced index needs it traced
    def f(x, i):
        m = np.iscomplex(x)
        if m.any():            # its values are still known while tracing
            return x[i]
        r = np.isreal(x) * 1
        r[0] = 7               # and it can be written, as any array the function made
        return r[i] + m[i]

    x, i = np.arange(5.0), np.array([0, 3, -1])
    np.testing.assert_array_equal(tracearray.compile(f, device="cpu")(x, i), f(x, i))


def test_np_vectorize_traces_elementwise_functions_and_names_branches() -> None:
    """np.vectorize runs (trace/vectorize.py; tests/test_vectorize.py); a branch on an
    element's value runs both ways; math.* of an element is refused at the user's line with
    NumPy's way to write it."""
    f = tracearray.compile(lambda a: np.vectorize(lambda v: v * 2)(a), device="cpu")
    np.testing.assert_array_equal(f(np.arange(3.0)), np.arange(3.0) * 2)
    g = tracearray.compile(lambda a: np.vectorize(lambda v: v * 2 if v > 0 else v)(a),
                           device="cpu")
    np.testing.assert_array_equal(g(np.arange(-1.0, 2.0)), [-1.0, 0.0, 2.0])
    import math
    h = tracearray.compile(lambda a: np.vectorize(lambda v: math.exp(v))(a), device="cpu")
    with pytest.raises(tracearray.ConcretizationError, match="np.sin") as e:
        h(np.arange(3.0))
    assert "test_tracing_semantics.py" in str(e.value)


def test_builtin_round_of_traced_values() -> None:
    x = np.array([0.125, 1.5, 2.5, -3.14159])
    f = tracearray.compile(lambda a: (round(a.sum(), 2), round(a[1], 0)), device="cpu")
    for got, want in zip(f(x), (round(x.sum(), 2), round(x[1], 0))):
        assert got == want and np.asarray(got).dtype == np.asarray(want).dtype
    # a Python int: the value, staged (int() of it)
    g = tracearray.compile(lambda a: round(a.sum()), device="cpu")
    for a in (x, -x * 3):
        assert g(a) == round(a.sum()) and type(g(a)) is int
    with pytest.raises(TypeError, match="__round__"):      # as NumPy's arrays
        tracearray.compile(lambda a: round(a, 1), device="cpu")(x)


def test_tile_of_a_traced_integer_count() -> None:
    """np.tile(x, n) with n a 0-d traced integer (or a 0-d NumPy array) tiles as with an int:
    the count is a size the data decides (staged); it raised 'iteration over a 0-d array'."""
    from tracearray.testing import assert_matches_numpy
    x = np.arange(12.0).reshape(3, 4) - 1
    assert_matches_numpy(lambda a: np.tile(a, (a[0, 1] > 0).astype(int) + 1), x)
    assert_matches_numpy(lambda a: np.tile(a[0], np.array(3)), x)
    assert_matches_numpy(lambda a: np.tile(a, (2, 1)), x)


CONSTANT_MAKERS = {
    "rfftfreq_at_peak": lambda p: np.fft.rfftfreq(30, 0.5)[np.argmax(p)],
    "fftfreq_sorted": lambda p: np.fft.fftfreq(16, 0.1)[np.argsort(p)],
    "hanning_at_peak": lambda p: np.hanning(16)[np.argmax(p)],
    "kaiser_masked": lambda p: np.kaiser(16, 5.0)[p > 0],
    "indices_row": lambda p: np.indices((4, 4))[0][np.argmax(p) % 4],
    "windowed": lambda p: p * np.hamming(16) + np.blackman(16)[::-1] - np.bartlett(16),
    "python_reads_it": lambda p: p * (2.0 if np.hanning(5)[2] > 0.5 else 3.0),
}


@pytest.mark.parametrize("name", sorted(CONSTANT_MAKERS))
def test_numpy_constant_arrays_can_be_indexed_by_traced_values(name):
    """Window functions, FFT sample frequencies and index grids made by the user's code are
    traced constants (a NumPy array cannot be indexed by a traced value: spectrum code's
    ``np.fft.rfftfreq(n)[np.argmax(power)]`` needed the data while tracing)."""
    from tracearray.testing import assert_matches_numpy
    p = np.random.default_rng(3).standard_normal(16)
    assert_matches_numpy(CONSTANT_MAKERS[name], p, device="cpu")


def test_hasattr_ptp_is_false_as_for_a_numpy_2_array():
    def span(x):
        return x.ptp() if hasattr(x, "ptp") else np.ptp(x)

    x = np.array([3.0, -1.0, 4.0])
    assert tracearray.compile(span, device="cpu")(x) == span(x)


def test_lists_of_traced_values_as_numpy_converts_them():
    # np.full with a row of traced values; np.concatenate of tuples of different lengths
    def f(x):
        return np.full((2, 2), (x[0], x[1])), np.concatenate([(x[0], 1.0), (x[2],)])

    x = np.array([1.0, 2.0, 3.0])
    for got, want in zip(tracearray.compile(f, device="cpu")(x), f(x)):
        np.testing.assert_array_equal(got, want)


def test_a_ufunc_of_a_list_of_traced_values_names_the_way_around():
    with pytest.raises(tracearray.errors.ConcretizationError, match=r"np\.exp\(np\.array"):
        tracearray.compile(lambda x: np.exp([x[:2], x[1:]]), device="cpu")(np.ones(3))
    # (of one-element values, NumPy's conversion takes each value: staged)
    f = tracearray.compile(lambda x: np.exp([x[0], 0.0]), device="cpu")
    np.testing.assert_array_equal(f(np.ones(2)), np.exp([1.0, 0.0]))


@pytest.mark.parametrize("axes", [(), (None,), ((1, 2, 0),), ([2, 0, 1],), (2, 1, 0),
                                  ("array",)])
def test_transpose_takes_axes_as_ndarray_does(axes):
    # ndarray.transpose(np.argsort(axis)) in NumPy's own np.average
    x = np.arange(24.0).reshape(2, 3, 4)
    if axes == ("array",):
        def f(x):
            return x.transpose(np.array([2, 0, 1]))
    else:
        def f(x):
            return x.transpose(*axes)
    np.testing.assert_array_equal(tracearray.compile(f, device="cpu")(x), f(x))


def test_rebinding_an_item_of_a_container_argument_is_refused_not_lost():
    """``params["w"] = params["w"] - g`` changes the caller's dict in NumPy; the trace runs
    on a copy of the container, so the caller's would silently keep the old array: refused
    (an append to a list argument too). Writing into its arrays in place is written back."""
    def rebind(params, g):
        params["w"] = params["w"] - 0.1 * g
        return params["w"].sum()

    def append(xs, g):
        xs.append(g * 2)
        return g

    def in_place(params, g):
        params["w"] -= 0.1 * g
        return params["w"].sum()

    g = np.ones(3)
    for fn, arg in ((rebind, {"w": np.ones(3)}), (append, [np.ones(3)])):
        with pytest.raises(tracearray.UnsupportedOperationError, match="container passed") as e:
            tracearray.compile(fn, device="cpu")(arg, g)
        # the error names the line that made the new item (not the call's)
        line = "params[\"w\"] = params[\"w\"] - 0.1 * g" if fn is rebind else "xs.append(g * 2)"
        assert line in str(e.value), str(e.value)
    params = {"w": np.ones(3)}
    out = tracearray.compile(in_place, device="cpu")(params, g)
    np.testing.assert_allclose(out, 2.7)
    np.testing.assert_allclose(params["w"], np.full(3, 0.9))


def test_a_refusal_the_function_catches_is_raised() -> None:
    """A refusal is an error NumPy would not raise: the function's own ``except`` (or
    ``hasattr``) taking it would go on along another path than NumPy's, silently."""
    from tracearray.errors import UnsupportedOperationError

    @tracearray.compile
    def f(x):
        try:
            return x.ctypes.data + x   # (NumPy: an address plus x)
        except TypeError:
            return x

    @tracearray.compile
    def g(x):
        return x + (1 if hasattr(x, "ctypes") else 0)

    @tracearray.compile
    def h(x):
        try:
            return np.asarray(x, dtype=np.float32) + 1
        except ValueError:   # (nothing raised: NumPy's own errors may still be caught)
            return x

    for fn in (f, g):
        with pytest.raises(UnsupportedOperationError, match="caught this error"):
            fn(np.ones(3))
    np.testing.assert_array_equal(h(np.ones(3)), np.full(3, 2.0, np.float32))

    @tracearray.compile
    def k(x):
        try:
            return np.broadcast_to(x, (2, 4))   # NumPy's ValueError, caught as NumPy's is
        except ValueError:
            return x * 2

    np.testing.assert_array_equal(k(np.ones(3)), np.full(3, 2.0))


def test_a_0d_array_argument_is_an_ndarray_in_the_trace():
    """isinstance / np.isscalar of a 0-d array argument answer as NumPy's (a probe found the
    argument taken for a NumPy scalar, and np.outer's branch skipped); a NumPy scalar
    argument and a reduction's 0-d result stay scalars."""
    def f(x, t):
        if np.isscalar(t):
            return x * t
        return np.outer(t, x)

    def kinds(s):
        r = s.sum()
        return (np.float64(isinstance(s, np.ndarray)), np.float64(isinstance(r, np.ndarray)),
                np.float64(isinstance(np.array(2.0), np.ndarray)))

    x = np.arange(3.0)
    for t in (np.array(2.0), np.float64(2.0)):
        np.testing.assert_array_equal(tracearray.compile(f)(x, t), f(x, t))
        assert tracearray.compile(kinds)(t) == kinds(t)


def test_a_parameter_named_self_passes_by_keyword():
    def f(self, y):
        return self + y

    np.testing.assert_array_equal(tracearray.compile(f)(self=np.ones(2), y=np.ones(2)),
                                  np.full(2, 2.0))


def test_a_changed_keyword_of_a_compiled_partial_traces_again():
    import functools

    def fn(a, k=1.0):
        return a + k

    p = functools.partial(fn, k=2.0)
    cp = tracearray.compile(p)
    x = np.arange(4.0)
    np.testing.assert_array_equal(cp(x), x + 2.0)
    p.keywords["k"] = 10.0
    np.testing.assert_array_equal(cp(x), x + 10.0)


def test_builtin_max_and_min_of_traced_scalars_are_selects():
    """Python's max / min of traced NumPy scalars of one dtype is the fold Python makes, as
    traced selects (first of ties, NaN only where it comes first), not a data-dependent
    branch per comparison: a DP table of 120 cells (past the 64 data-dependent values a
    call may need) compiles in one trace, and other argument kinds keep Python's own."""
    def nw(s, g=1.0):
        n, m = s.shape
        dp = np.zeros((n + 1, m + 1))
        for i in range(1, n + 1):
            dp[i, 0] = -g * i
        for j in range(1, m + 1):
            dp[0, j] = -g * j
        for i in range(1, n + 1):
            for j in range(1, m + 1):
                dp[i, j] = max(dp[i - 1, j - 1] + s[i - 1, j - 1], dp[i - 1, j] - g,
                               dp[i, j - 1] - g)
        return dp

    s = np.random.default_rng(0).standard_normal((12, 10))
    f = tracearray.compile(nw, device="cpu")
    np.testing.assert_array_equal(f(s), nw(s))
    assert f.stats.traces == 1

    def mixed(x):
        a, b = x.sum(), x.max()
        return (max(a, b), min(a, b, x[0]), max([x[1], x[2]]), max(x[k] for k in range(3)),
                min(x[0], -0.0 * x[0]), max(x[0], 0.5), max(np.float32(1), x[0]))

    g = tracearray.compile(mixed, device="cpu")
    for x in (np.array([3.0, np.nan, -1.0, 2.0]), np.array([np.nan, 1.0, -1.0, 2.0]),
              np.array([0.0, 1.0, 1.0, -2.0])):
        want, got = mixed(x), g(x)
        for w, v in zip(want, got):
            assert type(v) is type(w)
            np.testing.assert_array_equal(np.signbit(v), np.signbit(w))
            np.testing.assert_array_equal(v, w)


def test_calls_through_numpys_classes_are_refused_at_the_users_line():
    from tracearray.errors import UnsupportedOperationError

    def through_class(x):
        return np.ndarray.sum(x)

    def type_call(x):
        return type(x.sum())(1.0)

    for f, match in ((through_class, "numpy.ndarray.sum"), (type_call, "type of a traced")):
        with pytest.raises(UnsupportedOperationError, match=match) as info:
            tracearray.compile(f)(np.arange(3.0))
        assert "test_tracing_semantics.py" in str(info.value)


def test_a_dtype_refusal_the_function_caught_is_raised():
    def as_text(x):
        try:
            return x.astype(str)
        except TypeError:
            return x

    with pytest.raises(tracearray.TracearrayError, match="caught this error"):
        tracearray.compile(as_text)(np.arange(3.0))


@pytest.mark.skipif(not hasattr(ValueError(), "add_note"), reason="Python 3.11's add_note")
def test_numpys_own_errors_name_the_users_line_in_a_note():
    """NumPy's errors raised while tracing keep NumPy's type and message, and carry the
    user's line as a note (shown under the message in a traceback)."""
    def f(x):
        return np.split(x, 4)

    with pytest.raises(ValueError, match="equal division") as info:
        tracearray.compile(f, device="cpu")(np.arange(6.0))
    notes = getattr(info.value, "__notes__", [])
    assert any("test_tracing_semantics.py" in n for n in notes), notes


def test_values_made_from_constants_many_steps_deep_are_known():
    """A mel filterbank built inside the function: its bins come from np.linspace through
    ten operations, and Python loops over them (range(l, c)) need them as numbers: known
    while tracing, not 20 x 3 values staged by probes (more than the 64 a call may have)."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    def log_mel(spec, sr):
        n_mels, n_fft = 20, 2 * (spec.shape[-1] - 1)
        mels = np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
        bins = np.floor((n_fft + 1) * mel_to_hz(mels) / sr).astype(int)
        fb = np.zeros((n_mels, n_fft // 2 + 1))
        for m in range(1, n_mels + 1):
            lo, c, hi = bins[m - 1], bins[m], bins[m + 1]
            for k in range(lo, c):
                fb[m - 1, k] = (k - lo) / (c - lo)
            for k in range(c, hi):
                fb[m - 1, k] = (hi - k) / (hi - c)
        return np.log(spec @ fb.T + 1e-10)

    x = np.random.default_rng(0).random((4, 129))
    f = tracearray.compile(log_mel, device="cpu")
    np.testing.assert_allclose(f(x, 8000), log_mel(x, 8000), rtol=1e-12)
    assert f.cache_info().traces == 1


def test_staged_values_stored_into_arrays_and_numpys_other_scalar_spellings():
    """(changes probe, sixteenth session) ``out[0] = float(x.sum())`` into an array the
    function made was refused as if NumPy stored into a NumPy array (a regex on the line);
    x.dtype.type(s), numpy.float32(s), a list of elements given to np.float32, float() of a
    complex NumPy scalar (its real part, NumPy's ComplexWarning) now run as NumPy does."""
    import warnings
    import numpy
    from numpy import float32

    def stores(x):
        out = np.zeros(3)
        out[0] = float(x.sum())
        out[1:] = x[:2].mean().item()
        d = {}
        d["loss"] = float(x.max())
        return out, d

    for fn in (stores, lambda x: np.float32([x[0], x[1]]), lambda x: x.dtype.type(x.sum()),
               lambda x: numpy.float32(x.sum()), lambda x: float32(x.max()) * 2,
               lambda x: float((x * 1j + 1).sum())):
        f = tracearray.compile(fn, device="cpu")
        for x in (np.array([1.5, 2.5, 3.0]), np.array([-0.0, 7.0, 1e30])):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want, got = fn(x), f(x)
            assert repr(got) == repr(want), (got, want)


def test_an_element_numpy_stores_into_a_numpy_array_is_still_refused():
    def f(x):
        out = np.ndarray(2)    # a NumPy array (np.empty would be traced)
        out[0] = x.sum()
        return out

    with pytest.raises(ConcretizationError, match="assigning a traced value into a NumPy"):
        tracearray.compile(f, device="cpu")(X)


def test_elements_of_traced_arrays_hash_as_numpy_scalars():
    """An element of a traced array is a NumPy scalar, hashable by its value (a dict of
    class weights looked up by label, ``y[0] in {1, 2}``): the value is staged as int() of
    it is; arrays, 0-d ones included, stay unhashable."""
    weights = {0: 1.0, 1: 2.0, 7: -1.0}

    def f(y):
        return np.array([weights[c] for c in y]), weights.get(y[0]), y[-1] in {1, 2}

    g = tracearray.compile(f)
    for y in (np.array([0, 1, 1]), np.array([7, 0, 1]), np.array([0, 1, 1])):
        got, want = g(y), f(y)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1:] == want[1:]
    with pytest.raises(TypeError, match="unhashable type: 'numpy.ndarray'"):
        tracearray.compile(lambda x: hash(x))(np.array([0, 1]))
    with pytest.raises(TypeError, match="unhashable"):
        tracearray.compile(lambda x: {x.sum(keepdims=True): 1})(np.array([0, 1]))


def test_counting_into_a_dict_keyed_by_elements():
    """counts[c] = counts.get(c, 0) + 1 over the elements: the user's dict store is not a
    NumPy element store (it was refused as one)."""
    from collections import defaultdict

    def count(y):
        counts, tally = {}, defaultdict(int)
        for c in y:
            counts[c] = counts.get(c, 0) + 1
            tally[c] += 1
        return counts[0], counts[1], tally[1]

    f = tracearray.compile(count)
    for y in (np.array([0, 1, 1]), np.array([1, 0, 0, 1, 1])):
        assert f(y) == count(y)


def test_a_bare_except_around_a_value_the_data_decides_takes_numpys_path():
    """The trace stops to ask the data for a number (int() of a count, a branch, a mask's
    size) by raising a BaseException; a bare ``except:`` or ``except BaseException`` of the
    user's caught it and the function went on along the except path (silently wrong). The
    request is kept and the trace runs again with the number, whatever the function
    did with it."""
    def count_scale(a):
        try:
            n = int(np.count_nonzero(a > 0))
        except:  # noqa: E722
            n = -1
        return a * n

    def branch(a):
        try:
            r = a * 2 if a.sum() > 0 else a * 3
        except BaseException:
            r = a * 0
        return r

    def selected(a):
        try:
            s = a[a > 0]
        except BaseException:
            s = a[:1]
        return s.sum(), s.shape

    a = np.array([1.0, -2.0, 3.0])
    for fn in (count_scale, branch, selected):
        g = tracearray.compile(fn)
        for v in (a, -a, a):
            got, want = g(v), fn(v)
            if isinstance(want, tuple):
                assert got[1] == want[1]
                got, want = got[0], want[0]
            np.testing.assert_array_equal(got, want)


def test_a_module_imported_while_tracing_keeps_numpys_arrays(tmp_path, monkeypatch):
    """A module imported for the first time inside a compiled function (np.polynomial's
    class attributes, a user module's constants): its module-level and class-body arrays
    are NumPy's own, not the trace's (they became tracers and broke every later use of the
    module, in NumPy too)."""
    import importlib
    import sys
    name = "tracearray_probe_constants_mod"
    (tmp_path / f"{name}.py").write_text(
        "import numpy as np\nCONST = np.arange(3.0)\nclass K:\n    W = np.ones(3)\n"
        "def _build(n):\n    return np.hanning(n)\nWIN = _build(3)\n"
        "NOISE = np.random.default_rng(0).random(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)

    def f(x):
        mod = importlib.import_module(name)
        return x + mod.CONST * mod.K.W

    g = tracearray.compile(f)
    np.testing.assert_array_equal(g(np.ones(3)), [1.0, 2.0, 3.0])
    mod = sys.modules[name]
    assert type(mod.CONST) is np.ndarray and type(mod.K.W) is np.ndarray
    assert type(mod.WIN) is np.ndarray and type(mod.NOISE) is np.ndarray   # (made by a
    # function the module's top level calls, and drawn at its import: NumPy's too)
    np.testing.assert_array_equal(g(np.zeros(3)), mod.CONST)
    sys.modules.pop(name, None)


def test_constants_a_users_cache_keeps_across_traces():
    """A helper memoised by functools.cache (or into a dict) that makes a constant array
    keeps the traced value it made in the first trace: later traces use it as that
    constant, and np.asarray of it outside any trace is the array (every later trace
    failed, and the user's cache held a dead value)."""
    import functools

    @functools.cache
    def window(n):
        return np.hanning(n)

    memo = {}

    def eye(n):
        if n not in memo:
            memo[n] = np.eye(n)
        return memo[n]

    spectrum = tracearray.compile(lambda x: np.abs(np.fft.rfft(x * window(x.shape[-1]))))
    for x in (np.ones(16), np.ones(16, np.float32), np.arange(16.0)):
        np.testing.assert_allclose(spectrum(x), np.abs(np.fft.rfft(x * np.hanning(16))),
                                   rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(window(16)), np.hanning(16))
    h = window(16)      # NumPy's own operations on it, outside any trace: NumPy's arrays
    for got, want in ((h * 2, np.hanning(16) * 2), (np.ones(16) * h, np.hanning(16)),
                      (1 - h, 1 - np.hanning(16)), (h @ h, np.hanning(16) @ np.hanning(16)),
                      (np.cumsum(h), np.cumsum(np.hanning(16)))):
        assert isinstance(got, (np.ndarray, np.generic))
        np.testing.assert_allclose(got, want)
    # in place, it is refused (the traces that read it hold its value): never a write lost
    # in a copy
    for write in (lambda: np.add(h, 1, out=h), lambda: h.fill(3.0),
                  lambda: h.__setitem__(0, 7.0), lambda: h.__iadd__(1)):
        with pytest.raises((ValueError, UnexpectedTracerError)):
            write()
    np.testing.assert_array_equal(np.asarray(window(16)), np.hanning(16))
    f = tracearray.compile(lambda a: a @ eye(a.shape[0]))
    a = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(f(a), a)
    np.testing.assert_array_equal(f(a.astype(np.float32)), a)
    escaped = []
    g = tracearray.compile(lambda x: (escaped.append(x * 2), x)[1])
    with pytest.raises(tracearray.UnsupportedOperationError):
        g(np.ones(2))       # a value of the data kept by the function: still refused


def test_a_print_of_values_the_data_decides_prints_once(capsys):
    """print('max', a.max(), 'min', a.min()) stops the trace at each value to probe it; the
    text an attempt printed before stopping was printed again by the next attempt
    ('max max 3.0 min max 3.0 min 1.0'). An attempt's output is kept until it ends: once
    per trace, as NumPy prints once per call with a new value."""
    def f(a):
        print("max", a.max(), "min", a.min())
        return a * 2

    g = tracearray.compile(f)
    g(np.array([1.0, 3.0]))
    g(np.array([1.0, 3.0]))
    g(np.array([2.0, 5.0]))
    assert capsys.readouterr().out == "max 3.0 min 1.0\nmax 5.0 min 2.0\n"


def test_flushed_prints_and_writelines_are_written_once(capsys):
    """print(..., flush=True) before a value the data decides is written once, not once per
    attempt of the trace; sys.stdout.writelines is kept with the prints."""
    import sys

    def f(a):
        print("a", flush=True)
        print("b", a.max())
        sys.stdout.writelines(["hello ", f"v={float(a.min())}\n"])
        return a * 2

    g = tracearray.compile(f)
    g(np.array([1.0, 3.0]))
    g(np.array([2.0, 5.0]))
    assert capsys.readouterr().out == "a\nb 3.0\nhello v=1.0\na\nb 5.0\nhello v=2.0\n"
