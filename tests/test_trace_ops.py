"""Differential tests generated from the op table: tracing each op (and each NumPy-level
composite) gives the shape and dtype NumPy gives, and the graph evaluator's values equal
NumPy's.

Every check goes through ``check``: run ``fn`` with NumPy, trace it with ``trace_function``,
evaluate the graph node by node (asserting that each node's NumPy reference produces exactly
the node's shape and dtype, so a wrong rule cannot hide behind the evaluator's final cast),
and compare. If NumPy raises, tracing must raise the same kind of error.

Comparison: integers and bools bit-exact; floats with ``assert_array_equal`` (NaN positions
equal) plus equal signs of zeros. The evaluator computes each node with NumPy itself, so
floats are exact too, except in the places listed in ``DIVERGENCES`` below, where the graph
deliberately computes differently from NumPy's implementation.
"""
from __future__ import annotations

import operator
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strategies as S
from external_cases import EXTERNAL_CALLS, SPD as _SPD
from tracearray.errors import UnsupportedOperationError
from tracearray.trace import trace_function
from tracearray.trace.evaluate import evaluate_graph
from tracearray.ops import ALL_DTYPES, OPS, Kind, OpSpec
from tracearray.trace.pytree import flatten, unflatten

# NumPy's overflow / invalid / divide-by-zero warnings are expected on these inputs.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# Deliberate divergences from NumPy's *implementation* (not its semantics): places where the
# graph computes a value in another order or by another path than NumPy does. Keyed by their
# ids in the project's one list (tracearray.testing.divergences, rendered to
# docs/divergences.md); here each says how this comparator relaxes, and a check names the
# entry it relies on.


@dataclass(frozen=True)
class Divergence:
    why: str
    ulps: int = 0                # floats compared within ulps * eps(dtype) relative, not exactly
    signed_zeros: bool = True    # False: the sign of a zero result may differ


DIVERGENCES = {
    "norm-dot": Divergence(
        "np.linalg.norm(x) with axis=None and ord None/'fro' (2-d)/2 (1-d) computes "
        "sqrt(dot(x.ravel(), x.ravel())) (BLAS, blocked summation); the graph computes "
        "sqrt(sum(x * x)) (pairwise summation).", ulps=64),
    "scalar-power": Divergence(
        "A reduction's 0-d result is a NumPy *scalar*, and scalar arithmetic uses the C "
        "library (np.float64(s) ** y is libm pow); the graph cannot tell a scalar from a 0-d "
        "array and evaluates power with the ufunc loop, which can differ by an ulp. Seen in "
        "np.linalg.norm(vector, ord=p), p not in {0, 1, 2, inf, -inf}.", ulps=4),
    "clip-signed-zero": Divergence(
        "np.clip with scalar bounds returns x itself when x equals a bound (x=0.0, hi=-0.0 "
        "gives 0.0), with array bounds the bound; the graph's maximum/minimum always gives "
        "np.minimum's sign. Only the sign of a zero result can differ.", signed_zeros=False),
}


def test_divergences_are_in_the_project_list() -> None:
    from tracearray.testing.divergences import DIVERGENCES as PROJECT  # only this test needs it

    ids = {d.id for d in PROJECT}
    missing = set(DIVERGENCES) - ids
    assert not missing, f"divergences used here but not listed in the docs: {sorted(missing)}"


UFUNC_OPS = sorted(n for n, s in OPS.items() if s.kind is Kind.ELEMENTWISE and s.ufunc is not None)
UNARY_UFUNCS = [n for n in UFUNC_OPS if OPS[n].arity == 1]
BINARY_UFUNCS = [n for n in UFUNC_OPS if OPS[n].arity == 2]
ARRAY_TYPES = (np.ndarray, np.generic)


# ============================================================================================
# The comparator
# ============================================================================================

def numpy_call(fn: Callable, args: tuple) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


_CAPTURED: dict = {}   # the arrays closures hold, by graph input name (of the last traces)


def trace(fn: Callable, *args: Any):
    t = trace_function(fn, args, {}, frozenset(), frozenset())
    _CAPTURED.update({name: c.array for name, c in t.captured.items()})
    return t.graph


def graph_inputs(args: tuple, graph: Any = None) -> list[np.ndarray]:
    """The graph's inputs: the arguments' arrays, then (with ``graph``) the arrays its
    function reads from closures (``lambda b: op(x, b)``: x is a graph input, read at every
    call: trace/captured.py)."""
    leaves, _ = flatten(list(args), lambda v: isinstance(v, ARRAY_TYPES))
    extra = [np.asarray(_CAPTURED[name]) for name in graph.globals] if graph is not None else []
    return [np.asarray(v) for v in leaves] + extra


def evaluate_checked(graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """``evaluate_graph``, plus a node-by-node check that the op table's NumPy reference gives
    exactly each node's declared shape and dtype."""
    values: dict = {}
    for node, value in zip(graph.inputs, inputs):
        assert (node.shape, node.dtype) == (value.shape, value.dtype), node
        values[node] = value
    with np.errstate(all="ignore"):
        for node in graph.nodes():
            if node in values:
                continue
            spec = OPS[node.op]
            attrs = dict(node.attrs)
            if spec.kind is Kind.SOURCE:
                out = np.asarray(spec.numpy_ref(**attrs))
            else:
                out = np.asarray(spec.numpy_ref(*[values[a] for a in node.args], **attrs))
            assert (out.shape, out.dtype) == (node.shape, node.dtype), (
                f"{node.op}{dict(node.attrs) if node.op != 'constant' else ''} on "
                f"{[a for a in node.args]}: NumPy gives {out.dtype}{list(out.shape)}, the "
                f"graph says {node.dtype}{list(node.shape)}")
            values[node] = out
    result = evaluate_graph(graph, inputs)
    for mine, theirs in zip((values[o] for o in graph.outputs), result):
        assert_same(mine, theirs)
    return result


def assert_same(expected: Any, got: Any, ulps: int = 0, what: str = "",
                signed_zeros: bool = True) -> None:
    e, g = np.asarray(expected), np.asarray(got)
    assert g.shape == e.shape, f"{what}shape {g.shape} != NumPy's {e.shape}"
    assert g.dtype == e.dtype, f"{what}dtype {g.dtype} != NumPy's {e.dtype}"
    if e.dtype.kind != "f":
        assert np.array_equal(g, e), f"{what}values differ:\n{g!r}\nNumPy:\n{e!r}"
        return
    if ulps:
        rtol = ulps * float(np.finfo(e.dtype).eps)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=0, equal_nan=True, err_msg=what)
        return
    np.testing.assert_array_equal(g, e, err_msg=what)
    if not signed_zeros:
        return
    finite_or_inf = ~np.isnan(e)
    np.testing.assert_array_equal(np.signbit(g[finite_or_inf]), np.signbit(e[finite_or_inf]),
                                  err_msg=f"{what}signs of zeros differ")


def _error_class(exc: BaseException) -> type[BaseException]:
    for cls in (OverflowError, np.exceptions.AxisError, IndexError, ValueError, TypeError):
        if isinstance(exc, cls):
            return cls
    return type(exc)


def check(fn: Callable, *args: Any, divergence: str | None = None) -> Any:
    """Trace ``fn(*args)`` and compare with NumPy. Returns the graph (None if NumPy raised).
    ``divergence`` names the entry of ``DIVERGENCES`` that relaxes the comparison."""
    allowed = DIVERGENCES[divergence] if divergence else Divergence("exact")
    try:
        expected = numpy_call(fn, args)
    except Exception as exc:  # NumPy rejects the call: tracing (or evaluating) must too
        with pytest.raises(_error_class(exc)):
            graph = trace(fn, *args)
            evaluate_checked(graph, graph_inputs(args, graph))
        return None
    graph = trace(fn, *args)
    got = unflatten(graph.out_tree, evaluate_checked(graph, graph_inputs(args, graph)))
    exp_leaves, exp_tree = flatten(expected, lambda v: isinstance(v, ARRAY_TYPES))
    got_leaves, got_tree = flatten(got, lambda v: isinstance(v, ARRAY_TYPES))
    assert exp_tree == got_tree, f"result structure {got_tree} != NumPy's {exp_tree}"
    for i, (e, g) in enumerate(zip(exp_leaves, got_leaves)):
        assert_same(e, g, allowed.ulps, what=f"output {i}: ",
                    signed_zeros=allowed.signed_zeros)
    for node, e in zip(graph.outputs, exp_leaves):
        assert (node.shape, node.dtype) == (np.shape(e), np.asarray(e).dtype)
    return graph


def ops_in(graph) -> set[str]:
    return {n.op for n in graph.nodes()}


# ============================================================================================
# Meta-tests: the table is complete, every op is tested here, every op has a lowering.
# ============================================================================================

# Ops with a dedicated test below (the ufunc ops are covered generically). A new op that is
# in neither list fails test_every_op_is_tested.
EXPLICITLY_TESTED = {
    "input": "test_sources", "constant": "test_sources", "size": "test_mean_var_std",
    "where": "test_where", "cast": "test_cast_every_pair", "bitcast": "test_bitcast_every_pair",
    "sum": "test_reductions", "prod": "test_reductions", "max": "test_reductions",
    "min": "test_reductions", "any": "test_reductions", "all": "test_reductions",
    "argmax": "test_arg_reductions", "argmin": "test_arg_reductions",
    "reshape": "test_reshape", "transpose": "test_transpose", "slice": "test_basic_indexing",
    "broadcast_to": "test_broadcast_to", "squeeze": "test_squeeze",
    "expand_dims": "test_expand_dims", "cumsum": "test_scans", "cumprod": "test_scans",
    "matmul": "test_matmul", "concatenate": "test_concatenate",
    "cummax": "test_extra_primitives", "cummin": "test_extra_primitives",
    "diagonal": "test_extra_primitives", "sliding_window": "test_extra_primitives",
    "frexp_mantissa": "test_extra_primitives", "frexp_exponent": "test_extra_primitives",
    "reduce_fmax": "test_extra_primitives", "reduce_fmin": "test_extra_primitives",
    "reduce_bitwise_and": "test_extra_primitives", "reduce_bitwise_or": "test_extra_primitives",
    "reduce_bitwise_xor": "test_extra_primitives", "reduce_logical_xor": "test_extra_primitives",
    "gather": "test_gather_primitive", "scatter": "test_scatter_primitive",
    "philox": "test_philox_primitive",
    "fma": "test_fma_primitive",
}
# External ops (library calls): each made by a NumPy call (tests/external_cases.py), compiled
# and run on the CPU (tests/test_sort.py and tests/test_linalg.py test every form)
EXPLICITLY_TESTED.update({op: "test_external_primitives" for op in EXTERNAL_CALLS})


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_reference_is_exact_where_it_skips_fractions(dt) -> None:
    """The fma reference computes most elements by error-free transformations (fractions
    for every element took minutes on 10^5 complex products: soak
    cpu-2026-12-06-ninth-review, program 1453, timed out in the comparator); the result
    has the bits of the exact, once-rounded value element by element: cancellations, tiny
    and huge magnitudes, signed zeros and subnormals."""
    from fractions import Fraction

    from tracearray.ops.elementwise import _round_fraction, exact_fma
    rng = np.random.default_rng(3)
    n = 3000
    a, b = (rng.standard_normal(n).astype(dt) for _ in range(2))
    c = -(a.astype(np.float64) * b).astype(dt)                 # cancellation
    c[::3] = (rng.standard_normal(n)[::3] * 1e-8).astype(dt)
    c[1::7] = (a[1::7].astype(np.float64) * b[1::7] * (1 + 2.0 ** -30)).astype(dt)
    big, small = (2.0 ** 60, 2.0 ** -70) if dt == np.float64 else (2.0 ** 20, 2.0 ** -20)
    a[::11] *= dt(big)
    b[::13] *= dt(small)
    a[::17], b[::17], c[::17] = 0.0, -1.0, -0.0
    a[5::19], c[5::19] = -0.0, 0.0
    a[2::23] = dt(1e-310) if dt == np.float64 else dt(1e-40)
    # ties broken by a tiny c: 1.5 * b of an odd mantissa lies halfway between two floats
    # of dt, which the once-rounded sum leaves toward c's sign (not to even)
    ties = slice(3, n, 5)
    digits = np.finfo(dt).nmant               # an odd mantissa of every bit
    odd = rng.integers(1 << (digits - 1), 1 << digits, size=a[ties].size) * 2 + 1
    a[ties] = dt(1.5)
    b[ties] = np.ldexp(odd.astype(dt), -digits) * np.where(odd % 3, 1, -1).astype(dt)
    c[ties] = np.ldexp(np.where(odd % 4 == 1, 1.0, -1.0) * (1 + rng.random(odd.size)),
                       -120).astype(dt)   # (below what a second rounding keeps of it)
    with np.errstate(all="ignore"):
        want = (a.astype(np.float64) * b + c.astype(np.float64)).astype(dt)
        got = exact_fma(a, b, c)
    for i in range(n):
        q = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        if q != 0:
            want[i] = _round_fraction(q, np.dtype(dt))
    bits = np.uint32 if dt == np.float32 else np.uint64
    assert (got.view(bits) == want.view(bits)).all()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_primitive(dt) -> None:
    """fma (complex multiplication's fused products): one rounding, as NumPy's contiguous
    complex loops compute it; its reference is exact (fractions), infinities and NaNs as
    IEEE's fusedMultiplyAdd."""
    import tracearray
    from tracearray.ops.elementwise import exact_fma
    rng = np.random.default_rng(11)
    special = np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e30, -1e-30], dt)
    a, b, c = (np.concatenate([np.repeat(special, 81), rng.standard_normal(500).astype(dt)])
               for _ in range(3))
    b[:729] = np.tile(np.repeat(special, 9), 9)
    c[:729] = np.tile(special, 81)
    with np.errstate(all="ignore"):
        if dt == np.float32:
            # one rounding: the product -1.5 * 1e30f is a float32 midpoint, and + 1 moves the
            # exact sum below it (the float64 route rounds twice, to -1.5000001e30)
            one_rounding = exact_fma(dt(-1.5), dt(1e30), dt(1.0))
            assert one_rounding == dt(-1.5e30) != (np.float64(-1.5) * dt(1e30) + 1).astype(dt)
        z = np.empty(a.size, np.complex64 if dt == np.float32 else np.complex128)
        w = np.empty_like(z)
        z.real, z.imag, w.real, w.imag = a, c, b, c[::-1]
        want = z * w
    got = tracearray.compile(lambda z, w: z * w, device="cpu")(z, w)
    for g, v in ((got.real, want.real), (got.imag, want.imag)):
        same = (g == v) & (np.signbit(g) == np.signbit(v)) | (np.isnan(g) & np.isnan(v))
        assert same.all(), (z[~same][:3], w[~same][:3], got[~same][:3], want[~same][:3])


def test_every_op_is_tested() -> None:
    untested = set(OPS) - set(UFUNC_OPS) - set(EXPLICITLY_TESTED)
    assert not untested, f"ops without a differential test in {__name__}: {sorted(untested)}"
    for test in set(EXPLICITLY_TESTED.values()):
        assert test in globals(), test


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_table_entry_is_complete(name: str) -> None:
    spec = OPS[name]
    assert isinstance(spec, OpSpec) and spec.name == name
    assert isinstance(spec.kind, Kind)
    assert callable(spec.numpy_ref)
    assert callable(spec.shape_rule)
    assert callable(spec.dtype_rule)
    assert spec.domain is not None and len(spec.domain.dtypes) >= 1, "empty dtype domain"
    assert set(spec.domain.dtypes) <= set(ALL_DTYPES)
    assert spec.domain.values in S.VALUE_CLASSES
    assert isinstance(spec.arity, int) and isinstance(spec.cost, int) and spec.cost >= 0
    if spec.ufunc is not None:
        assert spec.kind is Kind.ELEMENTWISE and spec.numpy_ref is spec.ufunc
        assert spec.arity == spec.ufunc.nin
    if spec.kind is Kind.SOURCE:
        assert spec.arity == 0


def test_every_elementwise_op_has_a_scalar_lowering() -> None:
    from tracearray.codegen import scalar  # imported here: only this test needs codegen

    elementwise = {n for n, s in OPS.items() if s.kind is Kind.ELEMENTWISE}
    missing = elementwise - set(scalar.lowered_ops())
    assert not missing, f"elementwise ops without a lowering in codegen.scalar: {sorted(missing)}"


def test_every_reduction_has_a_lowering() -> None:
    # lowering_tables() -> {kind: set of op names}; kinds as ops.Kind or their string values.
    from tracearray.codegen import lowering_tables

    tables = lowering_tables()
    for kind in Kind:
        if kind is Kind.SOURCE:
            continue
        table = tables.get(kind, tables.get(kind.value))
        if table is None and kind is not Kind.REDUCE:
            continue  # other kinds are checked once their lowering table exists
        missing = {n for n, s in OPS.items() if s.kind is kind} - set(table or ())
        assert not missing, f"{kind.value} ops without a lowering: {sorted(missing)}"


# ============================================================================================
# Elementwise ufuncs
# ============================================================================================

def _ufunc_fn(name: str) -> Callable:
    ufunc = OPS[name].ufunc
    return lambda *xs: ufunc(*xs)


@pytest.mark.parametrize("name", UFUNC_OPS)
def test_ufunc_every_dtype(name: str) -> None:
    """Every dtype of the op's domain, on the domain's special values (NaN, inf, -0.0,
    extremes), each pair of values once for binary ops, with broadcasting."""
    spec = OPS[name]
    fn = _ufunc_fn(name)
    for dt in spec.domain.dtypes:
        vals = S.special_values(dt, spec.domain.values)
        if spec.arity == 1:
            graph = check(fn, vals)
            assert graph is not None and name in ops_in(graph)
            check(fn, vals.reshape(1, -1)[:, ::-1])
        else:
            exps = S.special_values(S.operand_dtypes(name, dt)[1], spec.domain.values)
            if name == "power" and dt.kind in "iu":
                exps = vals[vals >= 0]   # NumPy raises on negative integer powers
            a, b = S.cross_values(vals, exps)
            graph = check(fn, a, b)
            assert graph is not None and name in ops_in(graph), (dt, ops_in(graph))
            check(fn, vals[:, None], exps[None, :])        # broadcasting
            check(fn, vals, exps[:1].reshape(()))          # 0-d operand


@pytest.mark.parametrize("name", UFUNC_OPS)
@given(data=st.data())
def test_ufunc_random(name: str, data: st.DataObject) -> None:
    spec = OPS[name]
    dt = data.draw(S.dtypes_for(name), label="dtype")
    shapes = data.draw(S.broadcast_shapes(spec.arity), label="shapes")
    xs = [data.draw(S.arrays(d, s, spec.domain.values), label=f"x{i}")
          for i, (s, d) in enumerate(zip(shapes, S.operand_dtypes(name, dt)))]
    check(_ufunc_fn(name), *xs)


@pytest.mark.parametrize("name", BINARY_UFUNCS)
@given(data=st.data())
def test_ufunc_mixed_dtypes(name: str, data: st.DataObject) -> None:
    """Two different dtypes: NumPy 2 promotion (or NumPy's TypeError when no loop fits)."""
    spec = OPS[name]
    dts = data.draw(st.tuples(S.any_dtype(), S.any_dtype()), label="dtypes")
    shapes = data.draw(S.broadcast_shapes(2, max_dims=2), label="shapes")
    xs = [data.draw(S.arrays(dt, s, spec.domain.values)) for dt, s in zip(dts, shapes)]
    check(_ufunc_fn(name), *xs)


@pytest.mark.parametrize("name", BINARY_UFUNCS)
@given(data=st.data())
def test_ufunc_weak_python_scalar(name: str, data: st.DataObject) -> None:
    """A Python scalar operand is weak (NEP 50): it takes the array's dtype, raising
    OverflowError when it does not fit an integer dtype, as NumPy does."""
    spec = OPS[name]
    ufunc = spec.ufunc
    dt = data.draw(S.dtypes_for(name), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes(max_dims=2), spec.domain.values), label="x")
    scalar = data.draw(S.python_scalars(), label="scalar")
    if data.draw(st.booleans(), label="scalar first"):
        check(lambda a: ufunc(scalar, a), x)
    else:
        check(lambda a: ufunc(a, scalar), x)


UFUNC_KEYWORDS: dict[str, Callable] = {
    "out=None": lambda u, xs: u(*xs, out=None),
    "out=(None,)": lambda u, xs: u(*xs, out=(None,)),
    "where=True": lambda u, xs: u(*xs, where=True),
    "casting=same_kind": lambda u, xs: u(*xs, casting="same_kind"),
    "order=K": lambda u, xs: u(*xs, order="K"),
    "dtype=float64": lambda u, xs: u(*xs, dtype=np.float64),
    "dtype=float32": lambda u, xs: u(*xs, dtype=np.float32),
    "dtype=int16": lambda u, xs: u(*xs, dtype=np.int16),
    "signature": lambda u, xs: u(*xs, signature=None) if False else u(*xs),
}


@pytest.mark.parametrize("kw", sorted(UFUNC_KEYWORDS))
def test_ufunc_default_keywords(kw: str) -> None:
    """NumPy's defaults (out=None, where=True, ...) are accepted; dtype= selects the loop
    (or raises NumPy's TypeError when no loop has that output dtype)."""
    call = UFUNC_KEYWORDS[kw]
    for name in ("add", "multiply", "sqrt", "negative", "less", "logical_and", "floor_divide"):
        ufunc = OPS[name].ufunc
        for dt in (np.int8, np.float32, bool):
            xs = [S.special_values(np.dtype(dt), "positive")] * ufunc.nin
            check(lambda *a: call(ufunc, a), *xs)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "equal"])
def test_ufunc_numpy_scalar_operand_is_strong(name: str) -> None:
    ufunc = OPS[name].ufunc
    x = np.array([1.5, -2.0, np.nan], np.float32)
    for s in (np.float64(2.0), np.float16(3.0), np.int64(3), np.uint8(3), np.bool_(True)):
        check(lambda a: ufunc(a, s), x)
        check(lambda a: ufunc(s, a), x)
    check(lambda a, b: ufunc(a, b), x, np.float64(2.5))   # a NumPy scalar argument


def test_weak_scalars_nep50() -> None:
    f32 = np.array([1.5, -2.0, 3.25], np.float32)
    u8 = np.array([1, 2, 250], np.uint8)
    i32 = np.array([7, -7, 3], np.int32)
    graph = check(lambda x: x * 2.0, f32)
    assert graph.outputs[0].dtype == np.float32          # float32 array * Python float
    with pytest.raises(OverflowError):
        trace(lambda x: x + 300, u8)                     # 300 does not fit uint8
    assert check(lambda x: x + 255, u8).outputs[0].dtype == np.uint8   # wraps like NumPy
    assert check(lambda x: x / 2, i32).outputs[0].dtype == np.float64  # int / int
    assert check(lambda x: x // 2, i32).outputs[0].dtype == np.int32
    assert check(lambda x: x + True, u8).outputs[0].dtype == np.uint8
    assert check(lambda x: x + 1.5, u8).outputs[0].dtype == np.float64  # int array + float
    assert check(lambda x: x.astype(np.float16) + 1e10, u8).outputs[0].dtype == np.float16
    check(lambda x: x * np.float64(2.0), f32)            # NumPy scalars are strong
    check(lambda x: np.float64(2.0) * x, f32)


def test_integer_division_signs() -> None:
    a = np.array([7, -7, 7, -7, 0, 1, -1, np.iinfo(np.int32).min], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, 0, -1], np.int32)
    check(lambda x, y: (x // y, x % y, np.fmod(x, y) if False else x - y), a, b)
    check(lambda x, y: divmod(x, y), a, b)
    check(lambda x: (x // -3, x % -3, -3 // x, -3 % x, 7 % x), a)
    f = np.array([7.5, -7.5, 0.0, -0.0, np.inf, np.nan], np.float64)
    check(lambda x: (x // 2, x % 2, x // -2.0, x % -2.0, 1.0 % x, 2 // x), f)


def test_bool_arithmetic() -> None:
    b = np.array([True, False, True, False])
    c = np.array([True, True, False, False])
    check(lambda x, y: (x + y, x * y, x & y, x | y, x ^ y, ~x, x == y, x < y), b, c)
    check(lambda x, y: (x - 1, x + 1, x * 2.5, x / y, x // 1, -x.astype(np.int8)), b, c)
    check(lambda x, y: x - y, b, c)        # NumPy: TypeError (no boolean subtract)
    check(lambda x: -x, b)                 # NumPy: TypeError (no boolean negative)
    check(lambda x: (x.sum(), x.mean(), x.prod(), np.cumsum(x), x.max(), x.argmax()), b)


# ============================================================================================
# Python operators, reflected and in-place forms
# ============================================================================================

BINARY_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}
INPLACE_OPERATORS = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "&": operator.iand,
    "|": operator.ior, "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift,
}
UNARY_OPERATORS = {"-": operator.neg, "+": operator.pos, "abs": abs, "~": operator.invert}


@pytest.mark.parametrize("sym", sorted(BINARY_OPERATORS))
@given(data=st.data())
def test_binary_operator(sym: str, data: st.DataObject) -> None:
    op = BINARY_OPERATORS[sym]
    dts = data.draw(st.tuples(S.any_dtype(), S.any_dtype()), label="dtypes")
    values = "small" if sym in ("**", "<<", ">>") else "any"
    shapes = data.draw(S.broadcast_shapes(2, max_dims=3), label="shapes")
    x, y = (data.draw(S.arrays(dt, s, values)) for dt, s in zip(dts, shapes))
    form = data.draw(st.sampled_from(["tracers", "scalar right", "scalar left",
                                      "ndarray left", "ndarray right"]), label="form")
    scalar = data.draw(S.python_scalars() if values == "any" else
                       st.sampled_from([0, 1, 2, 3, -1, 0.5, 2.0, True]), label="scalar")
    if form == "tracers":
        check(op, x, y)
    elif form == "scalar right":
        check(lambda a: op(a, scalar), x)
    elif form == "scalar left":
        check(lambda a: op(scalar, a), x)                 # reflected: __radd__ etc.
    elif form == "ndarray left":
        check(lambda b: op(x, b), y)                      # ndarray.__add__(tracer)
    else:
        check(lambda a: op(a, y), x)


@pytest.mark.parametrize("sym", sorted(INPLACE_OPERATORS))
@given(data=st.data())
def test_inplace_operator_on_local(sym: str, data: st.DataObject) -> None:
    """``y op= v`` on a value computed inside the function: NumPy's same_kind casting back to
    y's dtype (TypeError when it would not be same_kind, OverflowError for big weak ints)."""
    iop = INPLACE_OPERATORS[sym]
    dts = data.draw(st.tuples(S.any_dtype(), S.any_dtype()), label="dtypes")
    values = "small" if sym in ("**", "<<", ">>") else "any"
    # x is at least 1-d: a 0-d local is a NumPy scalar in traced code (see
    # test_inplace_on_scalar_results_rebinds_like_numpy), while x.copy() of a 0-d ndarray is
    # a 0-d array in NumPy.
    shapes = data.draw(S.broadcast_shapes(2, max_dims=2), label="shapes")
    shapes = (shapes[0] or (1,), shapes[1])
    x, y = (data.draw(S.arrays(dt, s, values)) for dt, s in zip(dts, shapes))
    use_scalar = data.draw(st.booleans(), label="scalar operand")
    scalar = data.draw(st.sampled_from([1, 2, -1, 300, 0.5, 2.0, True]), label="scalar")

    def fn(a: Any, b: Any) -> Any:
        local = a.copy()   # a fresh array (an ndarray even when 0-d, unlike np.positive(a))
        local = iop(local, scalar if use_scalar else b)
        return local

    check(fn, x, y)


@pytest.mark.parametrize("sym", sorted(UNARY_OPERATORS))
def test_unary_operator(sym: str) -> None:
    op = UNARY_OPERATORS[sym]
    for dt in ALL_DTYPES:
        check(op, S.special_values(dt).reshape(-1, 1))


def test_inplace_matmul_and_divmod() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(9, dtype=np.float32).reshape(3, 3)

    def fn(x: Any, y: Any) -> Any:
        z = x * 1
        z @= y
        return z, divmod(x, 2), divmod(7, x + 1)

    check(fn, a, b)


# ============================================================================================
# Power fast paths
# ============================================================================================

POW_FORMS: dict[str, Callable] = {
    "x**2": lambda x: x ** 2, "x**0.5": lambda x: x ** 0.5, "x**-1": lambda x: x ** -1,
    "x**2.0": lambda x: x ** 2.0, "x**-1.0": lambda x: x ** -1.0, "x**1": lambda x: x ** 1,
    "x**0": lambda x: x ** 0, "x**3": lambda x: x ** 3, "x**1.5": lambda x: x ** 1.5,
    "x**f64(0.5)": lambda x: x ** np.float64(0.5), "x**f16(0.5)": lambda x: x ** np.float16(0.5),
    "x**f32(2)": lambda x: x ** np.float32(2), "np.power(x,0.5)": lambda x: np.power(x, 0.5),
    "np.power(x,2)": lambda x: np.power(x, 2), "2**x": lambda x: 2 ** x,
    "0.5**x": lambda x: 0.5 ** x, "x**=0.5": lambda x: _ipow(x, 0.5),
}


def _ipow(x: Any, e: Any) -> Any:
    y = x * 1
    y **= e
    return y


@pytest.mark.parametrize("form", sorted(POW_FORMS))
def test_power_forms(form: str) -> None:
    """NumPy's ``ndarray.__pow__`` computes ``x ** 2``, ``x ** -1`` (exact Python ints) and
    ``x ** 0.5`` (exact Python float) of float arrays with square / reciprocal / sqrt, and its
    float32/float64 power loop does the same for a scalar exponent; sqrt and pow differ at
    -inf and -0.0. The trace must reproduce each form."""
    fn = POW_FORMS[form]
    for dt in ALL_DTYPES:
        values = "small" if dt.kind in "iub" else "any"
        x = S.special_values(dt, values)
        if dt.kind in "iu" and "2**x" not in form and "0.5**x" not in form:
            x = x[x >= 0] if "-1" not in form else x
        check(fn, x)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_power_fast_paths_use_cheap_ops(dtype: str) -> None:
    x = np.array([4.0, -np.inf, -0.0], dtype)
    assert "square" in ops_in(check(lambda a: a ** 2, x))
    assert "sqrt" in ops_in(check(lambda a: a ** 0.5, x))
    assert "reciprocal" in ops_in(check(lambda a: a ** -1, x))


# ============================================================================================
# where and cast
# ============================================================================================

@given(data=st.data())
def test_where(data: st.DataObject) -> None:
    shapes = data.draw(S.broadcast_shapes(3), label="shapes")
    cdt, xdt, ydt = data.draw(st.tuples(S.any_dtype(), S.any_dtype(), S.any_dtype()))
    c = data.draw(S.arrays(cdt, shapes[0]), label="cond")
    x = data.draw(S.arrays(xdt, shapes[1]), label="x")
    y = data.draw(S.arrays(ydt, shapes[2]), label="y")
    scalar = data.draw(S.python_scalars(), label="scalar")
    form = data.draw(st.sampled_from(["arrays", "scalar x", "scalar y", "two scalars"]))
    if form == "arrays":
        graph = check(lambda a, b, d: np.where(a, b, d), c, x, y)
        assert graph is None or "where" in ops_in(graph)
    elif form == "scalar x":
        check(lambda a, d: np.where(a, scalar, d), c, y)
    elif form == "scalar y":
        check(lambda a, b: np.where(a, b, scalar), c, x)
    else:
        check(lambda a: np.where(a, scalar, 0.5), c)


def test_where_weak_scalars() -> None:
    u8 = np.array([1, 200, 0], np.uint8)
    f32 = np.array([1.5, np.nan, -2.0], np.float32)
    assert check(lambda x: np.where(x > 1, x, 0.5), f32).outputs[0].dtype == np.float32
    assert check(lambda x: np.where(x > 1, x, 7), u8).outputs[0].dtype == np.uint8
    assert check(lambda x: np.where(x > 1, 1, 2), u8).outputs[0].dtype == np.int64
    assert check(lambda x: np.where(x > 1, x, 1.5), u8).outputs[0].dtype == np.float64
    # NumPy's where casts an out-of-range Python int unsafely (300 -> 44) instead of raising.
    check(lambda x: np.where(x > 1, x, 300), u8)
    check(lambda x: np.where(x > 1, -1, x), u8)
    check(lambda x: np.where(x, x, 0), f32)                # non-bool condition (NaN is True)


@pytest.mark.parametrize("src", [str(d) for d in ALL_DTYPES])
def test_cast_every_pair(src: str) -> None:
    x = S.special_values(np.dtype(src))
    for dst in ALL_DTYPES:
        graph = check(lambda a: a.astype(dst), x)
        if np.dtype(src) != dst:
            assert "cast" in ops_in(graph)
        check(lambda a: np.astype(a, dst), x)
    check(lambda a: a.astype(np.float32, copy=False), x)


@pytest.mark.parametrize("src", [str(d) for d in ALL_DTYPES])
def test_bitcast_every_pair(src: str) -> None:
    """x.view(d) of every d of x's item size: the bitcast op (a view of x's memory), none
    for x's own dtype; other item sizes as NumPy reads them (or its ValueError where the
    bytes do not divide); bytes as bool refused by name."""
    from tracearray.ops.elementwise import bitcast_allowed
    x = S.special_values(np.dtype(src))
    for dst in ALL_DTYPES:
        def view(a, d=dst):
            return a.view(d)
        if bitcast_allowed(np.dtype(src), dst):
            assert "bitcast" in ops_in(check(view, x))
        elif dst == np.dtype(src):
            assert "bitcast" not in ops_in(check(view, x))
        elif dst.kind != "b":
            check(view, x)
        else:
            with pytest.raises(UnsupportedOperationError, match=r"ndarray\.view"):
                trace_function(view, (x,), {}, frozenset(), frozenset())


@pytest.mark.parametrize("casting", ["no", "equiv", "safe", "same_kind", "unsafe"])
def test_astype_casting_rules(casting: str) -> None:
    for src in ALL_DTYPES:
        x = S.special_values(src)
        for dst in ALL_DTYPES:
            check(lambda a: a.astype(dst, casting=casting), x)   # NumPy's TypeError or a cast


@given(data=st.data())
def test_cast_random(data: st.DataObject) -> None:
    src, dst = data.draw(st.tuples(S.any_dtype(), S.any_dtype()), label="dtypes")
    x = data.draw(S.arrays(src, S.shapes()), label="x")
    check(lambda a: (a.astype(dst), a.astype(dst).astype(src)), x)


# ============================================================================================
# Reductions
# ============================================================================================

REDUCTION_NAMES = ["sum", "prod", "max", "min", "any", "all"]


def _reduction_call(name: str, form: str, axis: Any, keepdims: bool, dtype: Any) -> Callable:
    kw: dict[str, Any] = {"axis": axis, "keepdims": keepdims}
    if dtype is not None:
        kw["dtype"] = dtype
    if form == "method":
        return lambda a: getattr(a, name)(**kw)
    return lambda a: getattr(np, name)(a, **kw)


@pytest.mark.parametrize("name", REDUCTION_NAMES)
@given(data=st.data())
def test_reductions(name: str, data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes()), label="x")
    axis = data.draw(S.axis_args(x.ndim), label="axis")
    keep = data.draw(S.keepdims(), label="keepdims")
    dtype = data.draw(st.none() | S.any_dtype(), label="dtype=") if name in ("sum", "prod") \
        else None
    form = data.draw(st.sampled_from(["method", "function"]), label="form")
    graph = check(_reduction_call(name, form, axis, keep, dtype), x)
    if graph is not None and x.ndim:
        assert ops_in(graph) & {name, "sum", "prod", "max", "min", "any", "all"}


@pytest.mark.parametrize("name", REDUCTION_NAMES)
def test_reductions_every_dtype(name: str) -> None:
    for dt in ALL_DTYPES:
        x = S.special_values(dt)
        x2 = np.resize(x, (3, x.size))
        for axis in (None, 0, 1, -1, (0, 1)):
            for keep in (False, True):
                check(_reduction_call(name, "method", axis, keep, None), x2)
        if name in ("sum", "prod"):
            for acc in ALL_DTYPES:
                check(_reduction_call(name, "function", 1, False, acc), x2)
    # Empty reductions: sum/prod/any/all have identities, max/min raise like NumPy.
    empty = np.zeros((0, 3), np.float32)
    check(_reduction_call(name, "method", 0, False, None), empty)
    check(_reduction_call(name, "method", 1, True, None), empty)
    check(_reduction_call(name, "method", None, False, None), empty)


def test_reduction_dtypes() -> None:
    i32 = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert check(lambda x: x.sum(), i32).outputs[0].dtype == np.int64          # int32 -> int64
    assert check(lambda x: x.astype(np.uint8).sum(), i32).outputs[0].dtype == np.uint64
    assert check(lambda x: x.mean(), i32.astype(np.float32)).outputs[0].dtype == np.float32
    assert check(lambda x: x.astype(bool).sum(), i32).outputs[0].dtype == np.int64
    assert check(lambda x: x.max(axis=0), i32).outputs[0].dtype == np.int32


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(data=st.data())
def test_arg_reductions(name: str, data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes(min_side=0)), label="x")
    axis = data.draw(S.axis_args(x.ndim, allow_tuple=False), label="axis")
    keep = data.draw(S.keepdims(), label="keepdims")
    if data.draw(st.booleans(), label="method"):
        check(lambda a: getattr(a, name)(axis=axis, keepdims=keep), x)
    else:
        check(lambda a: getattr(np, name)(a, axis, keepdims=keep), x)


def test_arg_reductions_nan_and_ties() -> None:
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, -np.inf, -np.inf],
                  [np.inf, np.inf, 0.0, -0.0]], np.float32)
    for dt in ALL_DTYPES:
        xd = x.astype(dt) if dt.kind == "f" else np.nan_to_num(x).astype(dt)
        check(lambda a: (a.argmax(), a.argmin(), a.argmax(axis=1), a.argmin(axis=0),
                         np.argmax(a, axis=None, keepdims=True), a.argmin(axis=-1, keepdims=True),
                         a.max(axis=1), a.min(axis=0)), xd)
    check(lambda a: a.argmax(axis=0), np.zeros((0, 2)))     # NumPy: ValueError


UFUNC_REDUCE = ["add", "multiply", "maximum", "minimum", "logical_and", "logical_or"]


@pytest.mark.parametrize("name", UFUNC_REDUCE)
@given(data=st.data())
def test_ufunc_reduce_method(name: str, data: st.DataObject) -> None:
    ufunc = getattr(np, name)
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes()), label="x")
    kw: dict[str, Any] = {}
    if data.draw(st.booleans(), label="pass axis"):
        kw["axis"] = data.draw(S.axis_args(x.ndim), label="axis")
    if data.draw(st.booleans(), label="pass keepdims"):
        kw["keepdims"] = data.draw(st.booleans())
    if name in ("add", "multiply") and data.draw(st.booleans(), label="pass dtype"):
        kw["dtype"] = data.draw(S.any_dtype())
    check(lambda a: ufunc.reduce(a, **kw), x)


@pytest.mark.parametrize("name", UFUNC_REDUCE)
def test_ufunc_reduce_every_dtype(name: str) -> None:
    ufunc = getattr(np, name)
    for dt in ALL_DTYPES:
        x = np.resize(S.special_values(dt), (2, 5))
        check(lambda a: (ufunc.reduce(a), ufunc.reduce(a, axis=1), ufunc.reduce(a, axis=None),
                         ufunc.reduce(a, axis=(0, 1), keepdims=True)), x)
        check(lambda a: ufunc.reduce(a), x[0, 0])          # 0-d: NumPy returns the element


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
@given(data=st.data())
def test_logaddexp_reduce(name: str, data: st.DataObject) -> None:
    """np.logaddexp.reduce / np.logaddexp2.reduce (a composite: the largest term factored
    out, divergence logaddexp-reduce), compiled, against NumPy's fold: special values, empty
    axes, ints (a float64 loop), axis, keepdims and dtype."""
    from tracearray.testing import assert_matches_numpy
    ufunc = getattr(np, name)
    dt = data.draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64]), label="dtype")
    x = data.draw(S.arrays(np.dtype(dt), S.shapes()), label="x")
    kw: dict[str, Any] = {}
    if data.draw(st.booleans(), label="pass axis"):
        kw["axis"] = data.draw(S.axis_args(x.ndim), label="axis")
    if data.draw(st.booleans(), label="pass keepdims"):
        kw["keepdims"] = data.draw(st.booleans())
    if data.draw(st.booleans(), label="pass dtype"):
        kw["dtype"] = data.draw(st.sampled_from([np.float32, np.float64]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_numpy(lambda a: ufunc.reduce(a, **kw), x, device="cpu")


def test_logaddexp_reduce_of_float16_is_refused_naming_the_fix() -> None:
    import tracearray
    from tracearray.errors import UnsupportedOperationError
    x = np.ones(4, np.float16)
    with pytest.raises(UnsupportedOperationError, match=r"dtype=np.float32"):
        tracearray.compile(lambda a: np.logaddexp.reduce(a), device="cpu")(x)
    got = tracearray.compile(lambda a: np.logaddexp.reduce(a, dtype=np.float32),
                             device="cpu")(x)
    np.testing.assert_allclose(got, np.logaddexp.reduce(x, dtype=np.float32), rtol=1e-6)


# ============================================================================================
# Movement
# ============================================================================================

@given(data=st.data())
def test_reshape(data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes()), label="x")
    target = data.draw(S.reshape_target(x.shape), label="target")
    form = data.draw(st.sampled_from(["method", "method *args", "function", "ravel"]))
    if form == "method":
        graph = check(lambda a: a.reshape(target), x)
    elif form == "method *args":
        graph = check(lambda a: a.reshape(*target), x)
    elif form == "function":
        graph = check(lambda a: np.reshape(a, target), x)
    else:
        graph = check(lambda a: (a.ravel(), np.ravel(a), a.flatten()), x)
    assert graph is not None or (form == "method *args" and not target)  # x.reshape(): TypeError


def test_reshape_errors_like_numpy() -> None:
    x = np.zeros((2, 3), np.float32)
    for target in [(4,), (-1, 4), (-1, -1), (0, -1), (5, -1), (2, 3, 1), (6,), (-1,)]:
        check(lambda a: a.reshape(target), x)
    check(lambda a: a.reshape(0, -1), np.zeros((0, 3)))


@given(data=st.data())
def test_transpose(data: st.DataObject) -> None:
    x = data.draw(S.arrays(data.draw(S.any_dtype()), S.shapes()), label="x")
    perm = tuple(data.draw(st.permutations(range(x.ndim)), label="perm"))
    neg = tuple(p - x.ndim for p in perm)
    graph = check(lambda a: (a.transpose(perm), a.T, np.transpose(a), np.transpose(a, neg),
                             a.transpose(*perm) if perm else a.transpose()), x)
    if x.ndim >= 2:
        assert "transpose" in ops_in(graph)


def test_transpose_errors_like_numpy() -> None:
    x = np.zeros((2, 3, 4), np.int8)
    for axes in [(0, 1, 5), (0, 1, -4), (1, 1, 0), (0, 1), (2, 0, 1, 3), (-1, -2, -3), ()]:
        check(lambda a: a.transpose(axes), x)
        check(lambda a: np.transpose(a, axes), x)
    check(lambda a: a.transpose(), x)


@given(data=st.data())
def test_basic_indexing(data: st.DataObject) -> None:
    x = data.draw(S.arrays(data.draw(S.any_dtype()), S.shapes(max_dims=3)), label="x")
    key = data.draw(S.basic_index(x.shape), label="key")
    check(lambda a: a[key], x)


def test_basic_indexing_forms() -> None:
    x = np.arange(60, dtype=np.int16).reshape(3, 4, 5)
    keys = [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 0), (0, None, Ellipsis, None),
            slice(None, None, -1), (slice(None), slice(None, None, -2)), (slice(3, 0, -1),),
            (slice(-1, -10, -1),), (slice(10, None, -3), Ellipsis), (1, slice(1, 3), -2),
            (Ellipsis,), (), (slice(0, 0),), (np.int64(2),), (slice(None), 5), (3,),
            (0, 0, 0, 0), (Ellipsis, Ellipsis), (slice(None, None, 0),), (slice(-100, 100),)]
    for key in keys:
        check(lambda a: a[key], x)
    check(lambda a: a[1:2, ::-1].sum(axis=0), x)


@given(data=st.data())
def test_broadcast_to(data: st.DataObject) -> None:
    src, target = data.draw(S.broadcast_to_pair(), label="shapes")
    x = data.draw(S.arrays(data.draw(S.any_dtype()), src), label="x")
    graph = check(lambda a: np.broadcast_to(a, target), x)
    if src != target:
        assert "broadcast_to" in ops_in(graph)


def test_broadcast_to_errors() -> None:
    x = np.zeros((3, 1), np.float32)
    for target in [(3,), (2, 3), (3, 4), 5, (0, 3, 0), (1, 3, 7)]:
        check(lambda a: np.broadcast_to(a, target), x)


@given(data=st.data())
def test_squeeze(data: st.DataObject) -> None:
    shape = data.draw(S.shapes(max_side=2), label="shape")
    x = data.draw(S.arrays(data.draw(S.any_dtype()), shape), label="x")
    ones = [i for i, s in enumerate(shape) if s == 1]
    some = tuple(data.draw(st.lists(st.sampled_from(ones), unique=True))) if ones else ()
    any_axis = data.draw(S.axis_args(x.ndim), label="axis")
    check(lambda a: (a.squeeze(), np.squeeze(a), np.squeeze(a, axis=some)), x)
    check(lambda a: np.squeeze(a, axis=any_axis), x)     # NumPy errors on non-1 axes


@given(data=st.data())
def test_expand_dims(data: st.DataObject) -> None:
    x = data.draw(S.arrays(data.draw(S.any_dtype()), S.shapes(max_dims=3)), label="x")
    n_new = data.draw(st.integers(1, 2))
    out_ndim = x.ndim + n_new
    axes = tuple(data.draw(st.lists(st.integers(-out_ndim, out_ndim - 1), min_size=n_new,
                                    max_size=n_new), label="axes"))
    check(lambda a: np.expand_dims(a, axes), x)           # duplicates: NumPy's ValueError
    check(lambda a: np.expand_dims(a, axes[0]), x)
    check(lambda a: (a[None], a[..., None], a[:, None] if a.ndim else a[None, None]), x)


# ============================================================================================
# Scans, contractions, concatenation
# ============================================================================================

@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@given(data=st.data())
def test_scans(name: str, data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes(max_dims=3)), label="x")
    axis = data.draw(S.axis_args(x.ndim, allow_tuple=False), label="axis")
    dtype = data.draw(st.none() | S.any_dtype(), label="dtype=")
    form = data.draw(st.sampled_from(["method", "function", "accumulate"]), label="form")
    if form == "method":
        graph = check(lambda a: getattr(a, name)(axis=axis, dtype=dtype), x)
    elif form == "function":
        graph = check(lambda a: getattr(np, name)(a, axis=axis, dtype=dtype), x)
    else:
        ufunc = np.add if name == "cumsum" else np.multiply
        ax = 0 if axis is None else axis
        graph = check(lambda a: ufunc.accumulate(a, axis=ax, dtype=dtype), x)
    if graph is not None:
        assert name in ops_in(graph)


def test_scans_every_dtype() -> None:
    for dt in ALL_DTYPES:
        x = np.resize(S.special_values(dt, "small"), (2, 6))
        check(lambda a: (np.cumsum(a), np.cumprod(a, axis=1), a.cumsum(axis=0),
                         np.cumsum(a, dtype=np.float32), np.cumprod(a, dtype=np.int8),
                         np.add.accumulate(a), np.multiply.accumulate(a, axis=1)), x)


@given(data=st.data())
def test_matmul(data: st.DataObject) -> None:
    shapes = data.draw(hnp.mutually_broadcastable_shapes(
        signature=np.matmul.signature, max_dims=4, min_side=0, max_side=4), label="shapes")
    adt, bdt = data.draw(st.tuples(S.dtypes_for("matmul"), S.dtypes_for("matmul")))
    values = data.draw(st.sampled_from(["small", "any"]), label="values")
    a = data.draw(S.arrays(adt, shapes.input_shapes[0], values), label="a")
    b = data.draw(S.arrays(bdt, shapes.input_shapes[1], values), label="b")
    form = data.draw(st.sampled_from(["@", "np.matmul", "np.dot", "method dot"]), label="form")
    if form == "@":
        graph = check(lambda x, y: x @ y, a, b)
    elif form == "np.matmul":
        graph = check(lambda x, y: np.matmul(x, y), a, b)
    elif a.ndim > 2 or b.ndim > 2:
        return  # np.dot of N-d arrays is not matmul (tracearray refuses it, see semantics tests)
    elif form == "np.dot":
        graph = check(lambda x, y: np.dot(x, y), a, b)
    else:
        graph = check(lambda x, y: x.dot(y), a, b)
    assert graph is not None and "matmul" in ops_in(graph)


def test_matmul_shapes_and_dtypes() -> None:
    r = np.arange(60, dtype=np.float32) % 7 - 3
    cases = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3,)),
             ((3,), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((0,), (0,)), ((2, 0), (0, 3)),
             ((2, 3), (4, 2)), ((3,), (4,))]
    for sa, sb in cases:
        a = r[:int(np.prod(sa))].reshape(sa)
        b = r[:int(np.prod(sb))].reshape(sb)
        for adt, bdt in [(np.float32, np.float32), (np.int8, np.int8), (np.int32, np.float32),
                         (np.uint8, np.int8), (np.float16, np.float64), (bool, bool)]:
            check(lambda x, y: x @ y, a.astype(adt), b.astype(bdt))
    check(lambda x: np.dot(x, 2.5), r[:4])          # dot with a scalar is multiply
    check(lambda x: x @ 2, r[:4])                   # NumPy: ValueError (0-d operand)


@given(data=st.data())
def test_concatenate(data: st.DataObject) -> None:
    base = list(data.draw(S.shapes(min_dims=1, max_dims=3), label="base"))
    axis = data.draw(st.integers(-len(base), len(base) - 1) | st.none(), label="axis")
    n = data.draw(st.integers(1, 6), label="n")
    xs = []
    for i in range(n):
        shape = list(base)
        if axis is not None:
            shape[axis] = data.draw(st.integers(0, 3))
        xs.append(data.draw(S.arrays(data.draw(S.any_dtype()), tuple(shape)), label=f"x{i}"))
    dtype = data.draw(st.none() | S.any_dtype(), label="dtype=")
    graph = check(lambda *a: np.concatenate(a, axis=axis, dtype=dtype), *xs)
    check(lambda *a: np.concatenate(list(a), axis), *xs)
    if graph is not None:
        # up to 4 non-empty parts: selects between gathers (fused); more: the concat op
        parts = sum(1 for x in xs if x.shape[axis or 0] > 0) if axis is not None else \
            sum(1 for x in xs if x.size)
        if parts > 4:
            assert "concatenate" in ops_in(graph)
        elif parts > 1:
            assert "concatenate" not in ops_in(graph) and "where" in ops_in(graph)


def test_concatenate_and_stack_forms() -> None:
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    check(lambda x, y: (np.concatenate([x, y]), np.concatenate([x, y], 1),
                        np.concatenate([x, y], axis=None), np.concatenate((x, x), -1),
                        np.stack([x, y]), np.stack([x, y], axis=1), np.stack([x, y], -1),
                        np.stack((x,)), np.stack([x, y], axis=2, dtype=np.float64)), a, b)
    check(lambda x, y: np.concatenate([x, y.T]), a, b)           # shape mismatch
    check(lambda x, y: np.stack([x, y.T]), a, b)                 # shape mismatch
    check(lambda x: np.concatenate([x, x], axis=2), a)           # AxisError
    check(lambda x: np.concatenate([x[0, 0], x[0, 0]]), a)       # 0-d
    check(lambda x: np.concatenate([x, np.ones((1, 3), np.uint8)]), a)


# ============================================================================================
# Sources
# ============================================================================================

GLOBAL_CONST = np.array([1.5, 2.5, -1.0], np.float32)
GLOBAL_SCALE = np.float32(2.5)


def test_sources() -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32)
    graph = check(lambda a: a, x)
    assert [n.op for n in graph.nodes()] == ["input"]
    # A global array is read at every call (NumPy reads its current values): a graph input.
    graph = trace(lambda a: a + GLOBAL_CONST, x)
    assert graph.globals == ("GLOBAL_CONST",) and len(graph.inputs) == 2
    got = evaluate_checked(graph, [x, GLOBAL_CONST])[0]
    assert_same(x + GLOBAL_CONST, got)
    # A global scalar is a constant of the trace (re-traced when it changes: the guards).
    graph = check(lambda a: a + GLOBAL_SCALE, x)
    assert "constant" in ops_in(graph) and graph.globals == ()
    check(lambda a: (a + np.zeros(3), a * np.ones((2, 3), np.int8), a + np.arange(3),
                     np.full(3, 7, np.int16) - a, a + np.eye(3)[1], np.zeros_like(a),
                     np.ones_like(a, dtype=np.int32), np.full_like(a, 2.5),
                     np.empty_like(a).shape, np.empty_like(a, np.int8).dtype,
                     np.zeros_like(a, shape=(2, 2))), x)
    graph = check(lambda: (np.zeros(3), np.arange(4, dtype=np.uint8), np.float32(2.5)))
    # (a uniform array the function makes is one constant, broadcast)
    assert graph.inputs == () and {n.op for n in graph.nodes()} <= {"constant", "broadcast_to"}
    check(lambda a: (np.float64(2) * a, a + np.int8(3), a + np.array(2.5, np.float16)), x)


# ============================================================================================
# Composites (expanded into primitives in trace/numpy_api.py)
# ============================================================================================

@given(data=st.data())
def test_mean_var_std(data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes()), label="x")
    axis = data.draw(S.axis_args(x.ndim), label="axis")
    keep = data.draw(S.keepdims(), label="keepdims")
    dtype = data.draw(st.none() | S.any_dtype(), label="dtype=")
    ddof = data.draw(st.sampled_from([0, 1, 2, 0.5]), label="ddof")
    name = data.draw(st.sampled_from(["mean", "var", "std"]), label="fn")
    kw: dict[str, Any] = {"axis": axis, "keepdims": keep, "dtype": dtype}
    if name != "mean":
        kw["ddof"] = ddof
    if data.draw(st.booleans(), label="method"):
        graph = check(lambda a: getattr(a, name)(**kw), x)
    else:
        graph = check(lambda a: getattr(np, name)(a, **kw), x)
    if graph is not None and x.size:
        assert "size" in ops_in(graph)   # element counts are run-time scalars, never immediates


def test_mean_var_std_every_dtype() -> None:
    for dt in ALL_DTYPES:
        x = np.resize(S.special_values(dt, "small"), (3, 4))
        check(lambda a: (a.mean(), a.mean(axis=0), np.mean(a, axis=1, keepdims=True),
                         a.var(), a.var(axis=1, ddof=1), np.std(a, axis=0), a.std(ddof=2),
                         a.mean(dtype=np.float64), np.var(a, dtype=np.float32),
                         np.std(a, axis=(0, 1), keepdims=True), np.var(a, correction=1)), x)
    check(lambda a: (a.mean(axis=0), a.var(axis=1)), np.zeros((0, 3), np.float32))


NORM_ORDS = [None, 1, 2, 3, 0.5, -1, -2, 0, np.inf, -np.inf]


@given(data=st.data())
def test_norm_vector(data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    x = data.draw(S.arrays(dt, S.shapes(min_dims=1, max_dims=3), "small"), label="x")
    ord_ = data.draw(st.sampled_from(NORM_ORDS), label="ord")
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    keep = data.draw(S.keepdims(), label="keepdims")
    divergence = "scalar-power" if ord_ in (3, 0.5, -1, -2) and x.ndim == 1 else None
    check(lambda a: np.linalg.norm(a, ord_, axis=axis, keepdims=keep), x, divergence=divergence)


def test_norm_forms() -> None:
    v = np.array([3.0, -4.0, 0.0, 1.5], np.float32)
    m = np.arange(12, dtype=np.float64).reshape(3, 4) - 5
    for dt in (np.float16, np.float32, np.float64, np.int32, np.uint8, bool):
        for ord_ in NORM_ORDS:
            check(lambda a: np.linalg.norm(a, ord_, axis=0), v.astype(dt),
                  divergence="scalar-power" if ord_ in (3, 0.5, -1, -2) else None)
        check(lambda a: np.linalg.norm(a, "fro", axis=(0, 1)), m.astype(dt))
        check(lambda a: np.linalg.norm(a, axis=(1, 0), keepdims=True), m.astype(dt))
        # axis=None: NumPy uses dot(x, x); the graph sums x*x (see DIVERGENCES).
        check(lambda a: (np.linalg.norm(a), np.linalg.norm(a, "fro"),
                         np.linalg.norm(a, keepdims=True)), m.astype(dt),
              divergence="norm-dot")
        check(lambda a: np.linalg.norm(a, 2), v.astype(dt), divergence="norm-dot")
        check(lambda a: np.linalg.norm(a, np.inf), v.astype(dt))


@given(data=st.data())
def test_clip(data: st.DataObject) -> None:
    dt = data.draw(S.any_dtype(), label="dtype")
    shapes = data.draw(S.broadcast_shapes(3), label="shapes")
    x = data.draw(S.arrays(dt, shapes[0]), label="x")
    bound = st.one_of(st.none(), S.python_scalars(),
                      st.builds(lambda s, d: np.asarray(s).astype(d)[()], st.integers(-3, 3),
                                S.any_dtype()))
    lo, hi = data.draw(bound, label="lo"), data.draw(bound, label="hi")
    form = data.draw(st.sampled_from(["function", "method", "keywords", "array bounds"]))
    if form == "function":
        check(lambda a: np.clip(a, lo, hi), x, divergence="clip-signed-zero")
    elif form == "method":
        check(lambda a: a.clip(lo, hi), x, divergence="clip-signed-zero")
    elif form == "keywords":
        check(lambda a: np.clip(a, min=lo, max=hi), x, divergence="clip-signed-zero")
    else:
        bdt = data.draw(S.any_dtype(), label="bound dtype")
        lo_a = data.draw(S.arrays(bdt, shapes[1]), label="lo array")
        hi_a = data.draw(S.arrays(bdt, shapes[2]), label="hi array")
        check(lambda a, l, h: np.clip(a, l, h), x, lo_a, hi_a, divergence="clip-signed-zero")


def test_clip_integer_bounds_out_of_range() -> None:
    u8 = np.array([0, 1, 200, 255], np.uint8)
    i8 = np.array([-128, -1, 0, 127], np.int8)
    for x in (u8, i8):
        for lo, hi in [(0, 300), (-1, 3), (-1000, 1000), (1000, 2000), (-1, -2), (2, 1),
                       (1.5, 2), (None, 5), (5, None), (None, None), (np.int64(-1), 3)]:
            check(lambda a: np.clip(a, lo, hi), x)
            check(lambda a: a.clip(lo, hi), x)


def test_movement_composites() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check(lambda a: (np.swapaxes(a, 0, 2), a.swapaxes(-1, 1), np.swapaxes(a, 1, 1),
                     np.moveaxis(a, 0, -1), np.moveaxis(a, [0, 1], [-1, -2]),
                     np.moveaxis(a, -1, 0), a.mT, np.flip(a), np.flip(a, 1),
                     np.flip(a, (0, 2)), np.flip(a, axis=-1)), x)
    check(lambda a: np.swapaxes(a, 0, 3), x)                # AxisError like NumPy
    check(lambda a: np.moveaxis(a, [0, 1], [0]), x)         # ValueError like NumPy
    check(lambda a: np.moveaxis(a, [0, 0], [1, 2]), x)      # repeated source axis


@given(data=st.data())
def test_axis_composites_random(data: st.DataObject) -> None:
    x = data.draw(S.arrays(data.draw(S.any_dtype()), S.shapes()), label="x")
    nd = x.ndim
    axis = st.integers(-nd - 1, nd)                 # out-of-range axes included: AxisError
    i, j = data.draw(axis, label="i"), data.draw(axis, label="j")
    flip_axes = data.draw(S.axis_args(nd), label="flip axes")
    src = data.draw(st.lists(st.integers(-nd, nd - 1) if nd else st.just(0), max_size=nd),
                    label="source")
    dst = data.draw(st.permutations(range(nd)), label="destination")[:len(src)]
    check(lambda a: np.swapaxes(a, i, j), x)
    check(lambda a: a.swapaxes(i, j), x)
    check(lambda a: np.flip(a, flip_axes), x)
    check(lambda a: np.moveaxis(a, src, dst), x)    # repeated source axes: ValueError
    if nd:
        check(lambda a: np.moveaxis(a, i, j), x)


@given(data=st.data())
def test_stack(data: st.DataObject) -> None:
    shape = data.draw(S.shapes(max_dims=3), label="shape")
    n = data.draw(st.integers(1, 3))
    xs = [data.draw(S.arrays(data.draw(S.any_dtype()), shape)) for _ in range(n)]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    check(lambda *a: np.stack(a, axis=axis), *xs)


def test_round() -> None:
    for dt in ALL_DTYPES:
        x = S.special_values(dt)
        check(lambda a: (np.round(a), a.round(), np.around(a)), x)


def test_shape_queries() -> None:
    x = np.zeros((2, 0, 3), np.float16)
    check(lambda a: (a.shape, a.ndim, a.size, a.dtype, a.itemsize, a.nbytes, np.shape(a),
                     np.ndim(a), np.size(a), np.size(a, 2), len(a), a.T.shape), x)


# ============================================================================================
# Whole programs, as users write them
# ============================================================================================

def _layernorm(x: Any, w: Any, b: Any) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def _softmax(x: Any, w: Any, b: Any) -> Any:
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True) + 0 * w * b


def _gelu_mlp(x: Any, w: Any, b: Any) -> Any:
    h = x * w + b
    g = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    return g @ g.T, np.abs(g).argmax(axis=1), np.cumsum(g, axis=0)[-1]


def _stats(x: Any, w: Any, b: Any) -> Any:
    centered = x - np.mean(x, axis=0)
    return (np.var(x, axis=0, ddof=1), np.std(x), np.linalg.norm(centered, axis=1),
            np.clip(x, -1, 1).sum(), np.where(x > w, x, b).min(axis=1),
            np.stack([x.T, x.T], axis=-1).reshape(-1, 2)[::-2], np.any(x > 3, axis=0))


@pytest.mark.parametrize("program", [_layernorm, _softmax, _gelu_mlp, _stats],
                         ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_programs(program: Callable, dtype: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 7)).astype(dtype)
    w = rng.normal(size=(7,)).astype(dtype)
    b = rng.normal(size=(7,)).astype(dtype)
    check(program, x, w, b)


def test_extra_primitives() -> None:
    """Primitives reached through NumPy functions and ufunc methods: scans of maximum and
    minimum, ufunc.reduce of the other associative ufuncs, diagonal views, sliding windows,
    frexp's two results."""
    from numpy.lib.stride_tricks import sliding_window_view
    rng = np.random.default_rng(0)
    for dt in ("float32", "float64", "float16", "int16", "uint8", "int64", "bool"):
        x = (rng.standard_normal((4, 5)) * 10).astype(dt)
        for g in (lambda a: np.maximum.accumulate(a, axis=1), lambda a: np.minimum.accumulate(a),
                  lambda a: np.diagonal(a, 1), lambda a: np.diagonal(a[None], -1, 1, 2),
                  lambda a: sliding_window_view(a, 3, axis=1), lambda a: a.diagonal(-2)):
            check(g, x)
        if x.dtype.kind == "f":
            x[1, 2] = np.nan
            for g in (lambda a: np.fmax.reduce(a, axis=0), lambda a: np.fmin.reduce(a, axis=1),
                      lambda a: np.frexp(a)):
                check(g, x)
        else:
            for g in (lambda a: np.bitwise_and.reduce(a, axis=0),
                      lambda a: np.bitwise_or.reduce(a, axis=1),
                      lambda a: np.bitwise_xor.reduce(a)):
                check(g, x)
    check(lambda a: np.logical_xor.reduce(a, axis=0), rng.integers(0, 2, (5, 3)).astype(bool))


def test_philox_primitive() -> None:
    """The random bit generator traces to ``philox`` (broadcast operands, uint64), which the
    evaluator computes as its NumPy reference."""
    from tracearray.ops.random import philox4x32
    from tracearray.trace.random import philox
    p = np.array([0, 1, 2**32 + 5, 2**64 - 1], np.uint64)
    s, k = np.array([[0], [2**40 + 3]], np.uint64), np.uint64(2**63 + 11)
    graph = trace(lambda a, b, c: philox(a, b, c), p, s, k)
    assert ops_in(graph) >= {"philox"} and graph.outputs[0].shape == (2, 4)
    (got,) = evaluate_checked(graph, graph_inputs((p, s, np.asarray(k))))
    for i in range(2):
        for j in range(4):
            w = philox4x32((int(p[j]) & 0xFFFFFFFF, int(p[j]) >> 32, int(s[i, 0]) & 0xFFFFFFFF,
                            int(s[i, 0]) >> 32), (int(k) & 0xFFFFFFFF, int(k) >> 32))
            assert int(got[i, j]) == int(w[0]) | (int(w[1]) << 32)


def test_scatter_primitive() -> None:
    """Assignment with traced indices and ``ufunc.at`` trace to ``scatter`` with NumPy's
    values (the evaluator runs the graph); tests/test_scatter.py compiles every form on
    every target."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5, 6))
    i, j = np.array([3, -1, 0, 3]), np.array([[1], [4]])

    def put(a, i, j):
        y = a.copy()
        y[i, :, j] = -1.0
        return y

    def add_at(a, i, j):
        y = a.copy()
        np.add.at(y, (i, slice(1, 3)), 1.5)
        np.maximum.at(y, (slice(None), j), a[:, :1] * 0)
        return y
    for g in (put, add_at):
        check(g, x, i, j)


@pytest.mark.parametrize("op", sorted(EXTERNAL_CALLS))
def test_external_primitives(op: str) -> None:
    """Each external op, traced by a NumPy call that makes it, gives NumPy's exact result."""
    import tracearray
    fn = EXTERNAL_CALLS[op]
    compiled = tracearray.compile(lambda a: fn(a), device="cpu")
    got, want = compiled(_SPD), fn(_SPD)
    first = trace_function(lambda a: fn(a), (_SPD,), {}, frozenset(), frozenset())   # a probe?
    assert op in {n.op for g in (first.graph, compiled.lower(_SPD).graph) for n in g.nodes()}
    got_leaves, _ = flatten(got, lambda v: isinstance(v, (np.ndarray, np.generic)))
    want_leaves, _ = flatten(want, lambda v: isinstance(v, (np.ndarray, np.generic)))
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


def test_gather_primitive() -> None:
    """Integer-array indexing traces to ``gather`` with NumPy's result shapes and values (the
    evaluator runs the graph); tests/test_indexing.py compiles every form on every target."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5, 6))
    i, j = np.array([3, -1, 0]), np.array([[1], [4]])
    for g in (lambda a, i, j: a[i], lambda a, i, j: a[i, j], lambda a, i, j: a[:, j, i],
              lambda a, i, j: a[i, :, j], lambda a, i, j: a[None, i, None],
              lambda a, i, j: a[[0, 1], 2], lambda a, i, j: np.take(a, i, axis=1, mode="wrap"),
              lambda a, i, j: a[i * 3]):
        check(g, x, i, j)
