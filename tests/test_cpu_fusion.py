"""Differential tests of fused programs on the CPU backend.

The worked examples of FUSION.md §2.8 and the usual suspects of array code (softmax, log-softmax,
logsumexp, layernorm, rmsnorm, l2-normalisation, z-scores, moments, argmax of an expression,
where-chains, shifted slices, slicing with broadcasting, an Adam step, a Black-Scholes-like
chain, multi-output functions, inputs returned unchanged, 0-d results) are compiled once each
and run on random shapes (0, 1 and odd sizes past vector and tile edges), dtypes and memory
layouts (C, Fortran, transposed, negative strides, strided views, stride-0 broadcasts), and
compared with NumPy under ``numpy_compare``'s tolerance table. Also: the kernel counts of the
worked examples, NaN placement in max/min/argmax/argmin, and determinism (20 runs, and 1 vs
several threads give bitwise-equal results).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

import tracearray
from numpy_compare import assert_matches, assert_tree_matches, relayout

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = (F16, F32, F64)
INTS = (np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint16))

# 0 and 1, odd sizes around vector widths, and past the column tile (1024) of col reductions.
SIDES = (0, 1, 3, 7, 17, 33, 127, 1025)
MAX_ELEMENTS = 40_000


# ============================================================================================
# The programs (plain NumPy), compiled once each
# ============================================================================================

def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    s = x - x.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=-1)) + m[:, 0]


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def rmsnorm(x, w):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def l2_normalise(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def zscore_cols(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def zscore_rows(x):
    return (x - x.mean(axis=-1, keepdims=True)) / x.std(axis=-1, keepdims=True)


def moments(x):
    return x.var(axis=-1), x.std(axis=0, ddof=1), x.var(), x.mean(axis=0)


def argmax_of_expression(x, y):
    d = np.abs(x - y) * 2 - y
    return d.argmax(axis=-1), d.argmin(axis=0), d.argmax()


def where_chain(x):
    return np.where(x > 0, x, np.where(x < -1, -x, x * 3)), np.where(x == 0, 1, x // 2)


def shifted_difference(x):
    return x[:, 2:] - x[:, :-2]


def slicing_with_broadcast(x, y):
    """A reversed, strided row vector broadcast against a strided block, plus a column slice
    broadcast along rows."""
    return x[1:, ::2] * y[::-2] + x[:1, ::2] - x[1:, :1]


def adam(p, g, m, v):
    lr, b1, b2, eps, t = 1e-3, 0.9, 0.999, 1e-8, 3
    m1 = b1 * m + (1 - b1) * g
    v1 = b2 * v + (1 - b2) * g * g
    mhat = m1 / (1 - b1 ** t)
    vhat = v1 / (1 - b2 ** t)
    return p - lr * mhat / (np.sqrt(vhat) + eps), m1, v1


def _norm_cdf(z):
    return 0.5 * (1 + np.tanh(0.7978845608 * (z + 0.044715 * z ** 3)))


def black_scholes(s, k, t):
    r, sigma = 0.02, 0.3
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / k) + (r + 0.5 * sigma ** 2) * t) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    disc = k * np.exp(-r * t)
    call = s * _norm_cdf(d1) - disc * _norm_cdf(d2)
    put = disc * _norm_cdf(-d2) - s * _norm_cdf(-d1)
    return call, put


def multi_output(x, y):
    return {"sum": x + y, "rows": (x * y).sum(axis=-1), "pair": (x - y, np.maximum(x, y))}


def passthrough(x, y):
    return x, (y, x * 2), x


def zero_d(x, y):
    return x.sum(), (x * y).sum(), x.max() - x.min(), np.dot(x[0], y[0]), x[0, 0]


def relu_linear(x, w, b):
    return np.maximum(x @ w + b, 0)


_COMPILED: dict[Any, Any] = {}


def compiled(fn: Callable) -> Any:
    """The session's compiled version of ``fn`` (kernels named ``fusion_k*``)."""
    if fn not in _COMPILED:
        _COMPILED[fn] = tracearray.compile(fn)
    return _COMPILED[fn]


def numpy_ref(fn: Callable, *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def run_both(fn: Callable, *args: Any) -> tuple[Any, Any]:
    """(compiled, NumPy); when NumPy raises, the compiled call must raise the same class."""
    try:
        want = numpy_ref(fn, *args)
    except Exception as e:   # noqa: BLE001
        with pytest.raises(type(e)):
            compiled(fn)(*args)
        return None, None
    return compiled(fn)(*args), want


# ============================================================================================
# Inputs: shapes, values, layouts
# ============================================================================================

@st.composite
def matrix_shape(draw: st.DrawFn, min_side: int = 0) -> tuple[int, int]:
    sides = [s for s in SIDES if s >= min_side]
    m, n = draw(st.sampled_from(sides)), draw(st.sampled_from(sides))
    while m * n > MAX_ELEMENTS:
        m = max(1, m // 4)
    return m, n


def values(dtype: np.dtype, shape: tuple[int, ...], seed: int, kind: str = "normal"
           ) -> np.ndarray:
    """Random values: "normal" (N(0, 1) x 2), "positive" (in [0.5, 2]), "int" (small ints,
    zeros included)."""
    rng = np.random.default_rng(seed)
    if dtype.kind in "iu" or kind == "int":
        lo = 0 if dtype.kind == "u" else -9
        return rng.integers(lo, 10, shape).astype(dtype)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape).astype(dtype)
    return (rng.standard_normal(shape) * 2).astype(dtype)


MATRIX_LAYOUTS = ("C", "F", "transposed", "reversed", "strided", "broadcast_rows",
                  "broadcast_cols")


def with_layout(a: np.ndarray, layout: str) -> np.ndarray:
    """``a`` (2-d) in a layout; the broadcast layouts replace ``a`` by a stride-0 view of its
    first row / column (so the values change: the caller uses the returned array)."""
    if layout == "transposed":
        return np.ascontiguousarray(a.T).T
    if layout == "broadcast_rows":
        return np.broadcast_to(a[:1], a.shape)
    if layout == "broadcast_cols":
        return np.broadcast_to(a[:, :1], a.shape)
    return relayout(a, layout)


@st.composite
def matrix(draw: st.DrawFn, shape: tuple[int, int], dtype: np.dtype, kind: str = "normal",
           layouts: tuple[str, ...] = MATRIX_LAYOUTS) -> np.ndarray:
    seed = draw(st.integers(0, 2**32 - 1))
    layout = draw(st.sampled_from(layouts), label="layout")
    return with_layout(values(dtype, shape, seed, kind), layout)


@st.composite
def vector(draw: st.DrawFn, n: int, dtype: np.dtype, kind: str = "normal") -> np.ndarray:
    seed = draw(st.integers(0, 2**32 - 1))
    a = values(dtype, (n,), seed, kind)
    layout = draw(st.sampled_from(("C", "reversed", "strided", "broadcast")))
    if layout == "broadcast":
        return np.broadcast_to(a[:1], a.shape) if n else a
    return relayout(a, layout)


def fused_family(want: Any) -> str:
    return "fused" if np.asarray(want).dtype.kind == "f" else "exact"


def check(fn: Callable, *args: Any, family: str | None = None) -> None:
    got, want = run_both(fn, *args)
    if want is None:
        return
    if family is None:
        _check_tree(got, want)
    else:
        assert_tree_matches(got, want, family, inputs=args)


def _check_tree(got: Any, want: Any) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for k in want:
            _check_tree(got[k], want[k])
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _check_tree(g, w)
    else:
        assert_matches(got, want, fused_family(want))


# ============================================================================================
# Row programs: softmax, log-softmax, logsumexp, layernorm, rmsnorm, l2, z-scores, moments
# ============================================================================================

ROW_PROGRAMS = {"softmax": softmax, "log_softmax": log_softmax, "logsumexp": logsumexp,
                "l2_normalise": l2_normalise, "zscore_rows": zscore_rows,
                "zscore_cols": zscore_cols, "moments": moments}
# z-scores and moments divide by a standard deviation: a stride-0 (constant) row or column has
# a deviation that is 0 in exact arithmetic but a rounding residue in both implementations,
# so the quotient is noise. Those layouts are used for the other programs.
WELL_CONDITIONED_ONLY = {"zscore_rows", "zscore_cols", "moments"}


@pytest.mark.parametrize("name", sorted(ROW_PROGRAMS))
@settings(max_examples=examples(10))
@given(data=st.data())
def test_row_programs(name: str, data: st.DataObject) -> None:
    fn = ROW_PROGRAMS[name]
    dt = data.draw(st.sampled_from(FLOATS), label="dtype")
    shape = data.draw(matrix_shape(), label="shape")
    layouts = MATRIX_LAYOUTS[:5] if name in WELL_CONDITIONED_ONLY else MATRIX_LAYOUTS
    x = data.draw(matrix(shape, dt, layouts=layouts), label="x")
    check(fn, x)


@settings(max_examples=examples(16))
@given(data=st.data())
def test_layernorm_and_rmsnorm(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(FLOATS), label="dtype")
    m, n = data.draw(matrix_shape(), label="shape")
    # Not "broadcast_cols": a constant row has variance 0 in exact arithmetic, so layernorm's
    # (x - mu) / sqrt(var + eps) is rounding noise amplified by 1 / sqrt(eps) in both.
    x = data.draw(matrix((m, n), dt, layouts=MATRIX_LAYOUTS[:-1]), label="x")
    w = data.draw(vector(n, dt), label="w")
    b = data.draw(vector(n, dt), label="b")
    check(layernorm, x, w, b)
    check(rmsnorm, x, w)


# ============================================================================================
# Map programs: where-chains, shifted slices, slicing with broadcast, adam, black-scholes
# ============================================================================================

@settings(max_examples=examples(16))
@given(data=st.data())
def test_where_chain_and_slices(data: st.DataObject) -> None:
    """Exact programs (no rounding differences): compared bit for bit, ints too."""
    dt = data.draw(st.sampled_from(FLOATS + INTS), label="dtype")
    m, n = data.draw(matrix_shape(), label="shape")
    x = data.draw(matrix((m, n), dt), label="x")
    y = data.draw(vector(n, dt), label="y")
    check(where_chain, x, family="exact")
    check(shifted_difference, x, family="exact")
    if n:
        check(slicing_with_broadcast, x, y, family="exact")


@settings(max_examples=examples(12))
@given(data=st.data())
def test_argmax_of_fused_expression(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(FLOATS + INTS[:2]), label="dtype")
    shape = data.draw(matrix_shape(min_side=1), label="shape")
    x = data.draw(matrix(shape, dt), label="x")
    y = data.draw(matrix(shape, dt), label="y")
    check(argmax_of_expression, x, y, family="exact")


@settings(max_examples=examples(16))
@given(data=st.data())
def test_adam_and_black_scholes(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(FLOATS), label="dtype")
    shape = data.draw(st.sampled_from([(0,), (1,), (7,), (33,), (1025,), (17, 33), (3, 127)]),
                      label="shape")

    def arr(kind: str = "normal") -> np.ndarray:
        seed = data.draw(st.integers(0, 2**32 - 1))
        a = values(dt, shape, seed, kind)
        return relayout(a, data.draw(st.sampled_from(("C", "F", "reversed", "strided"))))
    check(adam, arr(), arr(), arr(), np.abs(arr()))
    check(black_scholes, arr("positive"), arr("positive"), arr("positive"))


# ============================================================================================
# Output structures: dicts and tuples, inputs returned unchanged, 0-d results
# ============================================================================================

@settings(max_examples=examples(10))
@given(data=st.data())
def test_output_structures(data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(FLOATS + INTS[:1]), label="dtype")
    shape = data.draw(matrix_shape(min_side=1), label="shape")
    x = data.draw(matrix(shape, dt), label="x")
    y = data.draw(matrix(shape, dt), label="y")
    got, want = run_both(multi_output, x, y)
    rows_got, rows_want = got.pop("rows"), want.pop("rows")
    _check_tree(got, want)
    # A reduction is compared against the size of its terms: NumPy's own float16 row sum
    # rounds every partial sum to float16 in a layout-dependent order (0.1406 where the
    # exact sum of the float16 products is 0.1084, which we return).
    if np.asarray(rows_want).dtype.kind == "f":
        scale = np.abs(x.astype(F64) * y.astype(F64)).sum(axis=-1)
        assert_matches(rows_got, rows_want, "reduction", scale=scale, n=shape[-1])
    else:
        assert_matches(rows_got, rows_want, "exact")
    got, want = run_both(passthrough, x, y)
    assert_tree_matches(got, want)
    got, want = run_both(zero_d, x, y)
    for g in got:   # the types: NumPy scalars, not 0-d arrays
        assert isinstance(g, np.generic), type(g)
    if np.dtype(dt).kind != "f":
        _check_tree(got, want)
        return
    # The sums and the dot product are compared against the size of their terms.
    x64, y64 = x.astype(F64), y.astype(F64)
    scales = [(np.abs(x64).sum(), x.size), (np.abs(x64 * y64).sum(), x.size), None,
              (np.abs(x64[0] * y64[0]).sum(), shape[-1]), None]
    for g, w, sc in zip(got, want, scales):
        if sc is None:
            _check_tree(g, w)
        else:
            assert_matches(g, w, "reduction", scale=sc[0], n=sc[1])


# ============================================================================================
# Kernel counts of the FUSION.md worked examples
# ============================================================================================

def plan_kinds(fn: Callable, *args: Any) -> list[str]:
    return [k.kind for k in compiled(fn).lower(*args).plan.kernels]


@pytest.mark.parametrize("shape", [(7, 33), (128, 1025), (1, 5)])
def test_worked_examples_kernel_counts(shape: tuple[int, int]) -> None:
    x = values(F32, shape, 1)
    w, b = values(F32, shape[-1:], 2), values(F32, shape[-1:], 3)
    assert plan_kinds(softmax, x) == ["reduce"]
    assert plan_kinds(layernorm, x, w, b) == ["reduce"]
    assert plan_kinds(logsumexp, x) == ["reduce"]
    assert plan_kinds(adam, x, x, x, x) == ["map"]
    lin_w = values(F32, (shape[-1], 9), 4)
    assert plan_kinds(relu_linear, x, lin_w, values(F32, (9,), 5)) == ["matmul", "map"]
    assert plan_kinds(zscore_cols, x) == ["reduce"]
    assert plan_kinds(shifted_difference, x) == ["map"]


def test_relu_linear_values() -> None:
    for m, k, n in ((7, 33, 9), (1, 1, 1), (0, 5, 3), (65, 127, 17)):
        for dt in (F32, F64):
            x, w, b = values(dt, (m, k), 1), values(dt, (k, n), 2), values(dt, (n,), 3)
            got, want = run_both(relu_linear, relayout(x, "F"), w, b)
            assert_matches(got, want, "reduction",
                           scale=np.abs(x.astype(F64)) @ np.abs(w.astype(F64)) + np.abs(b),
                           n=k + 1)


# ============================================================================================
# NaN placement: max / min / argmax / argmin (first NaN wins; ties take the lowest index)
# ============================================================================================

def nan_reductions(x):
    return (x.max(axis=-1), x.min(axis=-1), x.argmax(axis=-1), x.argmin(axis=-1),
            x.max(axis=0), x.argmin(axis=0), x.max(), x.min(), x.argmax(), x.argmin())


@pytest.mark.parametrize("dt", [str(d) for d in FLOATS])
@pytest.mark.parametrize("n", [1, 5, 37, 1031])
def test_nan_placement(dt: str, n: int) -> None:
    """NaN first, last, in a vector tail, twice, next to infinities; rows of all -inf / +inf
    (argmax 0); ties (first index wins)."""
    dt = np.dtype(dt)
    rows = []
    base = values(dt, (n,), n)
    for pos in sorted({0, n - 1, n - 2, n - 3, n // 2, max(0, n - n % 8 - 1)}):
        if pos < 0:
            continue
        r = base.copy()
        r[pos] = np.nan
        rows.append(r)
    two = base.copy()
    two[n // 3] = two[-1] = np.nan
    rows.append(two)
    rows.append(np.full(n, -np.inf, dt))
    rows.append(np.full(n, np.inf, dt))
    ties = np.zeros(n, dt)
    ties[n // 2:] = 5
    rows.append(ties)
    mixed = base.copy()
    mixed[0], mixed[-1] = np.inf, -np.inf
    rows.append(mixed)
    nan_after_inf = mixed.copy()
    nan_after_inf[n // 2] = np.nan
    rows.append(nan_after_inf)
    x = np.stack(rows)
    for layout in ("C", "F", "reversed"):
        got, want = run_both(nan_reductions, relayout(x, layout))
        assert_tree_matches(got, want, "exact", inputs=x)


# ============================================================================================
# Determinism: 20 runs, and 1 vs several threads, are bitwise equal
# ============================================================================================

def reductions_for_determinism(x, y):
    return (x.sum(), (x * y).sum(axis=0), x.sum(axis=-1), softmax(x), x.var(), x.argmax(),
            np.abs(x).max(axis=0), layernorm(x, y[0], y[1]), x.mean(axis=0))


def _bits(tree: Any) -> list[bytes]:
    return [np.asarray(v).tobytes() for v in (tree if isinstance(tree, tuple) else (tree,))]


@pytest.mark.parametrize("shape", [(513, 1031), (3, 100_003), (100_003, 3)])
def test_determinism_runs_and_threads(shape: tuple[int, int], monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    """Each reduction kernel (full, row, column, fused row) gives bitwise-equal results over
    20 runs, and the same bits with TRACEARRAY_NUM_THREADS=1, 2 and 7 (full reductions use a
    fixed number of slots that depends on the sizes only)."""
    x, y = values(F32, shape, 11), values(F32, shape, 12)
    results = {}
    for threads in ("1", "2", "7"):
        monkeypatch.setenv("TRACEARRAY_NUM_THREADS", threads)
        f = tracearray.compile(reductions_for_determinism)   # a fresh executable per setting
        first = _bits(f(x, y))
        for _ in range(19 if threads == "2" else 2):
            assert _bits(f(x, y)) == first, f"run-to-run difference with {threads} threads"
        results[threads] = first
    names = ["sum", "col sum", "row sum", "softmax", "var", "argmax", "col max", "layernorm",
             "col mean"]
    for threads in ("2", "7"):
        diff = [n for n, a, b in zip(names, results["1"], results[threads]) if a != b]
        assert not diff, f"{threads} threads differ from 1 thread in {diff}"
    # And the values are NumPy's, within the summation bound (numpy_compare): sums of
    # 10^5..10^6 N(0, 4) terms cancel, so a relative tolerance would not do.
    got, want = run_both(reductions_for_determinism, x, y)
    ax, axy = np.abs(x.astype(F64)), np.abs(x.astype(F64) * y)
    m, n = shape
    bounds = {0: (ax.sum(), x.size), 1: (axy.sum(axis=0), m), 2: (ax.sum(axis=-1), n),
              4: (((ax + ax.mean()) ** 2).mean(), 2 * x.size + 2),
              8: (ax.sum(axis=0) / m, m + 1)}
    for i, (g, w) in enumerate(zip(got, want)):
        if i in bounds:
            assert_matches(g, w, "reduction", scale=bounds[i][0], n=bounds[i][1])
        else:
            assert_matches(g, w, fused_family(w))


# ============================================================================================
# Random programs: compositions of maps, reductions broadcast back, views, scans, concatenation
# ============================================================================================

UNARY = {
    "neg": lambda a: -a,
    "abs": lambda a: np.abs(a),
    "affine": lambda a: a * 3 + 1,
    "flip0": lambda a: a[::-1],
    "flip1": lambda a: a[:, ::-1],
    "roll1": lambda a: np.concatenate([a[:, 1:], a[:, :1]], axis=1),
    "cumsum0": lambda a: np.cumsum(a, axis=0),
    "cummax_like": lambda a: np.maximum(a, a[:, :1]),
    "sub_rowsum": lambda a: a - a.sum(axis=-1, keepdims=True),
    "mul_colmax": lambda a: a * a.max(axis=0, keepdims=True),
    "sub_total_min": lambda a: a - a.min(),
    "row_argmax": lambda a: a + a.argmax(axis=-1)[:, None].astype(a.dtype),
}
FLOAT_UNARY = {"tanh": lambda a: np.tanh(a), "sqrt1": lambda a: np.sqrt(np.abs(a) + 1),
               "sub_rowmean": lambda a: a - a.mean(axis=-1, keepdims=True)}
INT_UNARY = {"floordiv": lambda a: a // 3, "mod": lambda a: a % 7}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "max": lambda a, b: np.maximum(a, b),
    "where": lambda a, b: np.where(a > b, a, b * 2),
}


@st.composite
def program(draw: st.DrawFn, floats: bool, depth: int = 0) -> tuple[str, Callable]:
    """A random expression over x (M, N), y (M, N), r (N,) and c (M, 1): (text, function)."""
    unary = {**UNARY, **(FLOAT_UNARY if floats else INT_UNARY)}
    choice = draw(st.sampled_from(["leaf", "unary", "binary"] if depth < 4 else ["leaf"]))
    if choice == "leaf":
        name = draw(st.sampled_from(["x", "y", "r", "c"]))
        return name, (lambda env: env[name])
    if choice == "unary":
        op = draw(st.sampled_from(sorted(unary)))
        text, sub = draw(program(floats, depth + 1))
        fn = unary[op]
        # a leaf r (N,) or c (M, 1) is first broadcast to (M, N) so every op sees a matrix
        return f"{op}({text})", (lambda env: fn(np.broadcast_to(sub(env), env["x"].shape)))
    op = draw(st.sampled_from(sorted(BINARY)))
    (ta, fa), (tb, fb) = draw(program(floats, depth + 1)), draw(program(floats, depth + 1))
    fn2 = BINARY[op]
    return f"{op}({ta}, {tb})", (lambda env: fn2(fa(env), fb(env)))


@pytest.mark.parametrize("floats", [False, True], ids=["int32", "float64"])
@settings(max_examples=examples(20))
@given(data=st.data())
def test_random_programs(floats: bool, data: st.DataObject) -> None:
    """Random compositions (depth <= 4): int32 programs are compared bit for bit (wrap-around
    included); float64 programs within 1e-9 of the output's magnitude."""
    text, expr = data.draw(program(floats), label="program")
    dt = F64 if floats else np.dtype(np.int32)
    m, n = data.draw(matrix_shape(min_side=1), label="shape")
    kind = "normal" if floats else "int"
    x = data.draw(matrix((m, n), dt, kind), label="x")
    y = data.draw(matrix((m, n), dt, kind), label="y")
    r, c = values(dt, (n,), 5, kind), values(dt, (m, 1), 6, kind)

    def fn(x, y, r, c):
        out = expr({"x": x, "y": y, "r": r, "c": c})
        return out, out.sum(axis=0), out.max()
    fn.__name__ = "random_program"
    f = tracearray.compile(fn)
    want = numpy_ref(fn, x, y, r, c)
    got = f(x, y, r, c)
    if floats:
        for g, w in zip(got, want):
            # |got - want| <= 1e-9 * (1 + max|want|), written as a "reduction" bound
            # (2 * n * eps * scale with n = 1): sums and scans of up to 10^3 terms of a few
            # units, any order, are far inside it; a wrong index or a lost term is not.
            magnitude = 1 + np.max(np.abs(np.nan_to_num(np.asarray(w, F64), posinf=0,
                                                        neginf=0)), initial=0)
            scale = 1e-9 * magnitude / (2 * np.finfo(F64).eps)
            assert_matches(g, w, "reduction", scale=scale, n=1, inputs=text)
    else:
        assert_tree_matches(got, want, "exact", inputs=text)


# ============================================================================================
# Regressions (shrunk programs of bugs found by these tests)
# ============================================================================================

def test_regression_size_one_dims_in_map_kernels() -> None:
    """runtime: a kernel's extents were written to params[:len(space)] although size-1 space
    dims are dropped from the loop geometry: (1,) and (1, 5, 1, 7) arrays raised."""
    f = tracearray.compile(lambda x: x + 1)
    for shape in ((1,), (1, 5, 1, 7), (2, 1, 3, 1), (1, 1)):
        x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
        assert_matches(f(x), x + 1)


def test_regression_bool_full_reductions() -> None:
    """codegen: the partial results of full max/min/any/all/argmax of bools were stored as i1
    into the byte buffer ("cannot store i1 to i8*")."""
    f = tracearray.compile(lambda x: (x.max(), x.min(), x.any(), x.all(), x.argmax()))
    for x in (np.array([False, True, False]), np.ones(3000, bool), np.zeros((7, 5), bool)):
        assert_tree_matches(f(x), (x.max(), x.min(), x.any(), x.all(), x.argmax()))


def test_regression_signed_zero_sums_and_scans() -> None:
    """codegen: float sums started at -0.0 on the belief that NumPy starts from the first
    element; NumPy 2 starts from the identity +0.0, so its sum of -0.0s (and of nothing) is
    +0.0: we gave -0.0 (and 1 / sum gave -inf). Conversely cumsum (accumulate) does start
    from the first element, and ours started at +0.0: cumsum([-0.0]) gave +0.0."""
    def prog(a):
        return a.sum(axis=-1), 1 / a.sum(), a.sum(axis=0), a.mean(axis=-1), np.cumsum(a, -1)
    f = tracearray.compile(prog)
    for shape in ((3, 0), (0, 3), (4, 3), (3, 1025), (1025, 3)):
        for dt in (F16, F32, F64):
            for x in (np.zeros(shape, dt), np.full(shape, -0.0, dt)):
                assert_tree_matches(f(x), numpy_ref(prog, x))


def test_regression_scalar_constant_output() -> None:
    """runtime: a scalar constant returned by the function (``np.max(True)`` of a static
    Python argument) is a kernel parameter, not a buffer: returning it raised KeyError."""
    f = tracearray.compile(lambda x, c: (np.max(c), x * c, np.float32(2)), static_argnums=1)
    x = np.ones(3, np.float32)
    got = f(x, True)
    want = (np.max(True), x * True, np.float32(2))
    assert_tree_matches(got, want)


def test_regression_stencil_time_loop_stores_steps_it_would_recompute() -> None:
    """fuse: the steps of a stencil's time loop were all fused into one kernel, which
    recomputed step t at every shift its readers reach: O(t^2) shifts in two dimensions, a
    body that grows as the cube of the number of steps (npbench's fdtd_2d, ten steps, spent
    minutes in LLVM). A value read at more than a few shifts is now stored."""
    def relax(a, b, steps):
        for _ in range(steps):
            b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1]
                                   + a[1:-1, :-2] + a[1:-1, 2:])
            a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[:-2, 1:-1] + b[2:, 1:-1]
                                   + b[1:-1, :-2] + b[1:-1, 2:])
        return a
    from tracearray.fuse.plan import plan_graph
    from tracearray.trace import trace_function
    a = np.random.default_rng(3).random((12, 13))
    graph = trace_function(relax, (a, a.copy(), 6), {}, frozenset({2}), frozenset()).graph
    loads = max(len(k.body.accesses) for k in plan_graph(graph).kernels)
    assert loads <= 60, f"a kernel loads {loads} shifted values"   # 52; it was 72,865
    f = tracearray.compile(relax, static_argnums=2)
    assert_matches(f(a.copy(), a.copy(), 6), relax(a.copy(), a.copy(), 6))


def test_regression_placing_a_value_tries_only_kernels_after_its_inputs(monkeypatch) -> None:
    """fuse: each value was tried in every earlier kernel before one was found (or made),
    even kernels running before those that store what it reads, where the walker must refuse
    it: planning a loop of stored steps was quadratic in its length (npbench's cavity_flow,
    10 steps, timed out in the planner)."""
    from tracearray.fuse import plan as fuse_plan
    from tracearray.trace import trace_function

    def layers(a, m):
        for _ in range(30):
            a = np.tanh(a @ m)    # each product is stored (a library call): a chain of them
        return a
    a, m = np.ones((4, 5)), np.eye(5)
    graph = trace_function(layers, (a, m), {}, frozenset(), frozenset()).graph
    tries = []
    real_try = fuse_plan._try
    monkeypatch.setattr(fuse_plan, "_try", lambda *args, **kw: tries.append(1) or real_try(*args, **kw))
    kernels = len(fuse_plan.plan_graph(graph).kernels)
    assert len(tries) <= 2 * kernels, (len(tries), kernels)
    monkeypatch.undo()
    np.testing.assert_allclose(tracearray.compile(layers)(a, m), layers(a, m), rtol=1e-12)


# ------------------------------------------------ the planner's continued walks

def _plan_fingerprint(plan) -> list:
    """Everything the planner decided, by node identity (one graph, planned twice)."""
    out = [sorted(map(id, plan.stored)), list(plan.rejected)]
    for k in plan.kernels:
        out.append((k.kind, k.space, k.reduce_axes, [id(r) for r in k.reductions],
                    [(id(s.node), repr(s.index), id(s.dest), s.axis, s.offset) for s in k.roots],
                    [(id(s.node), repr(s.index), id(s.dest)) for s in k.stores],
                    len(k.body.accesses), len(k.body.params), list(k.body.nested_extents)))
    return out


def test_continued_walks_plan_as_whole_walks(monkeypatch) -> None:
    """``fuse.plan._try`` continues a kernel's last walk when a root joins it instead of
    walking the whole kernel again (a kernel of r roots was walked r times over): over every
    registry case, the 13 workloads and 300 of the soak's random programs, both give the
    same plan, decision for decision."""
    import sys
    from pathlib import Path
    from test_registry import CASES, _seed, draw_inputs, program
    from tracearray.fuse import plan as fplan
    from tracearray.trace import trace_function
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import workloads as W
    from benchmarks.overhead import inputs_for
    programs = [(program(c[1], c[2]), draw_inputs(_seed(c, 0), c)) for c in CASES]
    programs += [(W.get(n).fn, inputs_for(W.get(n), W.get(n).dims("check"))) for n in W.names()]
    from tracearray.testing.fuzz import program_for   # the soak's random programs too
    programs += [(p.fn, list(p.inputs))
                 for p in (program_for("plan-walks", i) for i in range(300))]
    compared = 0
    for fn, args in programs:
        try:
            graph = trace_function(fn, args, {}, (), (), ()).graph
        except Exception:   # noqa: BLE001 -- NumPy's own errors, mirrored at trace time
            continue
        fingerprints, plans = [], []   # (the plans kept: a rewrite's nodes live as long)
        for incremental in (True, False):
            monkeypatch.setattr(fplan, "INCREMENTAL", incremental)
            try:
                plans.append(fplan.plan_graph(graph))
                fingerprints.append(_plan_fingerprint(plans[-1]))
            except Exception as e:   # noqa: BLE001 -- the same refusal both ways
                fingerprints.append(repr(e))
        assert fingerprints[0] == fingerprints[1], fn
        compared += 1
    assert compared > 0.8 * len(programs)


def test_values_read_by_several_kernels_are_stored_not_regrown() -> None:
    """An unrolled time loop (``p = p + dt * v``, read by the next step's pairwise
    differences and update): each step's value is stored once it takes more than
    SHARED_INLINE_MAX ops to compute inline, so the kernels stay the same size (inline, step
    t recomputed every step before it: 50 steps ran 4x slower than NumPy, 61 kernels)."""
    from tracearray.fuse import plan as fplan
    from tracearray.testing import assert_matches_numpy

    def nbody(p, v):
        for _ in range(30):
            d = p[:, None, :] - p[None, :, :]
            r = np.sqrt((d ** 2).sum(-1) + 0.01)
            v = v - 0.01 * (d / r[..., None] ** 3).sum(1)
            p = p + 0.01 * v
        return p
    rng = np.random.default_rng(4)
    args = rng.random((12, 3)), np.zeros((12, 3))
    f = tracearray.compile(nbody, device="cpu")
    assert_matches_numpy(nbody, *args, device="cpu")
    plan = f.lower(*args).plan
    info = f.cache_info()
    assert info.compiles + info.disk_hits <= 8      # (inline: 29 distinct kernels)
    stores = plan.planned_stores
    assert max(fplan._inline_ops(n, stores - {n}, 10 ** 6) for n in stores) <= 40   # (157)


def test_rolls_fuse_into_a_stencil_step() -> None:
    """np.roll along an axis of up to ROLL_TABLE_MAX elements is a gather read inline: a
    periodic Laplacian's step is one kernel, not one per roll; longer axes join slices."""
    from tracearray.testing import assert_matches_numpy

    def step(u):
        return u + 0.1 * (np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) +
                          np.roll(u, -1, 1) - 4 * u)
    u = np.random.default_rng(5).random((33, 40))
    assert_matches_numpy(step, u, device="cpu")
    assert len(tracearray.compile(step, device="cpu").lower(u).plan.kernels) == 1
    assert_matches_numpy(lambda a: np.roll(np.resize(a, 5000), 7), u, device="cpu")


def test_a_reduction_per_loop_step_is_split_across_kernels():
    """``out[t] = rets[t].sum()`` over 256 steps: at most MAX_REDUCTIONS_PER_KERNEL in one
    kernel (one kernel of all of them took LLVM 48 s to optimise)."""
    from tracearray.fuse.plan import MAX_REDUCTIONS_PER_KERNEL

    def f(rets):
        out = np.ones(len(rets))
        for t in range(len(rets)):
            out[t] = rets[t].sum()
        return out
    r = np.random.default_rng(0).random((40, 4))
    c = tracearray.compile(f)
    np.testing.assert_allclose(c(r), f(r))
    plan = c.lower(r).plan
    assert max(len(k.reductions) for k in plan.kernels) <= MAX_REDUCTIONS_PER_KERNEL


def test_a_long_scalar_recurrence_compiles_in_bounded_time():
    """A Python loop over samples (a biquad filter) stores two scalars a step: at most
    MAX_ROOTS_PER_KERNEL of them in one kernel (127 steps in one kernel took LLVM more than
    a minute; 126 steps 1.2 s)."""
    import time
    from tracearray.fuse.plan import MAX_ROOTS_PER_KERNEL

    def biquad(x, b0=0.2, b1=0.4, b2=0.2, a1=-0.5, a2=0.3):
        z1 = z2 = 0.0
        out = np.empty_like(x)
        for n in range(x.shape[0]):
            xn = x[n]
            yn = b0 * xn + z1
            z1 = b1 * xn - a1 * yn + z2
            z2 = b2 * xn - a2 * yn
            out[n] = yn
        return out

    x = np.random.default_rng(0).random(300)
    f = tracearray.compile(biquad, device="cpu")
    start = time.perf_counter()
    np.testing.assert_allclose(f(x), biquad(x), rtol=1e-12)
    assert time.perf_counter() - start < 60
    lowered = f.lower(x)
    assert all(len(k.roots) <= MAX_ROOTS_PER_KERNEL for k in lowered.plan.kernels)
