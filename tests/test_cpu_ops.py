"""Differential tests of the CPU backend against NumPy, generated from the op table.

Every op of ``tracearray.trace.ops.OPS`` is compiled (trace -> plan -> tile -> LLVM -> JIT ->
thread pool) and run on random and special inputs, and the result is compared with NumPy's:
same type, shape and dtype, and values equal under the family of ``numpy_compare`` (bit-exact,
ulps for transcendentals, a summation bound for float reductions). The tolerance table lives
in ``tests/numpy_compare.py``.

Deliberate divergences (``tracearray.ops.divergences``) are avoided explicitly where
inputs are drawn: see ``avoid_divergences``; nothing is skipped silently.

Cost: kernels are cached by their IR text and sizes are kernel arguments, so the programs
here are few and fixed (every compiled function is named ``ops``, so identical programs built
by different tests share kernels) and Hypothesis varies sizes, values and layouts.
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

import strategies as S
from external_cases import EXTERNAL_CALLS, SPD
import tracearray
from tracearray.testing import assert_matches_numpy
from numpy_compare import LAYOUTS, assert_matches, assert_tree_matches, relayout
from tracearray.codegen import scalar
from tracearray.ops import ALL_DTYPES, FLOAT_DTYPES, OPS, Kind

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BOOL = np.dtype(bool)
INT_KINDS = "iu"


# ============================================================================================
# Compiled-function cache, the NumPy reference and layouts
# ============================================================================================

_COMPILED: dict[Any, Any] = {}


def compiled(key: Any, make: Callable[[], Callable], **options: Any) -> Any:
    """One compiled function per program ``key`` for the whole session. Every function is
    named ``ops`` so that kernel names (and thus IR text) depend only on the program."""
    f = _COMPILED.get(key)
    if f is None:
        fn = make()
        fn.__name__ = fn.__qualname__ = "ops"
        f = _COMPILED[key] = tracearray.compile(fn, **options)
    return f


def numpy_ref(fn: Callable, *args: Any) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def run_both(f: Any, fn: Callable, *args: Any) -> tuple[Any, Any]:
    """(compiled result, NumPy result); if NumPy raises, the compiled call must raise the
    same class of exception and (None, None) is returned."""
    try:
        want = numpy_ref(fn, *args)
    except Exception as e:   # noqa: BLE001 - any NumPy error must be mirrored
        with pytest.raises(type(e)):
            f(*args)
        return None, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = f(*args)
    return got, want


def layouts() -> st.SearchStrategy[str]:
    return st.sampled_from(LAYOUTS)


# Sides: 0 and 1, odd sizes around vector widths (4/8/16 lanes) and a tile/chunk edge.
SIDES = (0, 1, 2, 3, 5, 7, 8, 9, 16, 17, 33)
BIG_1D = (127, 1025, 4099)


@st.composite
def shapes(draw: st.DrawFn, min_dims: int = 0, max_dims: int = 3,
           max_size: int = 6000) -> tuple[int, ...]:
    nd = draw(st.integers(min_dims, max_dims))
    if nd == 1 and draw(st.booleans()):
        return (draw(st.sampled_from(BIG_1D)),)
    shape = tuple(draw(st.sampled_from(SIDES)) for _ in range(nd))
    while math.prod(shape) > max_size:
        shape = tuple(max(1, s // 2) for s in shape)
    return shape


def _moderate(dtype: np.dtype, rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    return rng.uniform(lo, hi, n).astype(dtype)


def random_values(dtype: np.dtype, shape: tuple[int, ...], values: str, seed: int,
                  specials: int = 0, moderate: bool = False) -> np.ndarray:
    """Random values of ``dtype`` in the value class ``values`` (see ``ops.Domain``), with
    ``specials`` elements replaced by the class's special values (NaN, +-inf, +-0, extremes).
    ``moderate``: floats in [-4, 4] (sums and products that neither overflow nor cancel
    catastrophically, so the summation bound is meaningful)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if dtype.kind == "b":
        out = rng.integers(0, 2, n).astype(bool) if values not in ("positive", "ge1") \
            else np.ones(n, bool)
    elif dtype.kind in INT_KINDS:
        lo, hi = S._int_range(dtype, values)
        if moderate:
            lo, hi = max(lo, -9), min(hi, 9)
        out = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
    else:
        lo, hi = {"any": (-8.0, 8.0), "positive": (1e-3, 8.0), "unit": (-1.0, 1.0),
                  "ge1": (1.0, 8.0), "small": (-7.5, 7.5)}[values]
        if moderate:
            lo, hi = max(lo, -4.0), min(hi, 4.0)
        out = _moderate(dtype, rng, n, lo, hi)
        if values == "any" and not moderate:   # a spread of magnitudes, not just [-8, 8]
            with np.errstate(over="ignore"):   # float16 overflows to inf: a special value
                out = (out * np.exp2(rng.integers(-20, 20, n))).astype(dtype)
    if specials and n:
        sp = S.special_values(dtype, values)
        if moderate and dtype.kind == "f":
            # NaN, +-inf and +-0 only: extremes and subnormals make a sum or product overflow
            # or underflow in some orders and not others (divergences float-sum- and
            # float-prod-reassociation: "not compared").
            with np.errstate(invalid="ignore"):
                sp = sp[~np.isfinite(sp) | (sp == 0) | ((np.abs(sp) >= 1e-3) & (np.abs(sp) <= 8))]
        pos = rng.integers(0, n, specials)
        out[pos] = sp[rng.integers(0, len(sp), specials)]
    return out.reshape(shape)


@st.composite
def arrays(draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...], values: str = "any",
           moderate: bool = False, layout: bool = True) -> np.ndarray:
    seed = draw(st.integers(0, 2**32 - 1))
    n = math.prod(shape)
    specials = draw(st.sampled_from([0, 1, 3, max(1, n // 4)])) if n else 0
    a = random_values(dtype, shape, values, seed, specials, moderate)
    return relayout(a, draw(layouts()), seed) if layout else a


# ============================================================================================
# Divergences: inputs we deliberately avoid (each names its entry in ops.divergences)
# ============================================================================================

def float_to_int_ok(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """Mask of float values whose cast to the integer ``dst`` NumPy defines. DIVERGENCE
    'float -> integer casts of NaN, inf or out-of-range values': avoided."""
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        info = np.iinfo(dst)
        # truncation toward zero must land in range (exclusive bounds keep rounding out)
        return np.isfinite(x64) & (x64 > float(info.min) - 1) & (x64 < float(info.max) + 1) & \
            (np.abs(x64) < 2.0**62)


def avoid_divergences(op: str, cols: list[np.ndarray]) -> np.ndarray:
    """Boolean mask of the elements of the (same-shape) operand arrays ``cols`` whose result
    NumPy defines the way we do."""
    keep = np.ones(cols[0].shape, bool)
    dts = [c.dtype for c in cols]
    if op == "power" and dts[1].kind == "i":
        # DIVERGENCE 'power on integers with a negative exponent': NumPy raises ValueError.
        keep &= cols[1] >= 0
    if op == "reciprocal" and dts[0].kind in INT_KINDS:
        # DIVERGENCE 'float -> integer casts ... (and reciprocal of integer 0)'.
        keep &= cols[0] != 0
    if op in ("fmax", "fmin") and dts[0] in (np.dtype(np.float32), np.dtype(np.float64)):
        # DIVERGENCE 'fmax/fmin on float32/float64 with (+0.0, -0.0) operands or two NaNs'.
        x, y = cols
        keep &= ~((x == 0) & (y == 0) & (np.signbit(x) != np.signbit(y)))
        keep &= ~(np.isnan(x) & np.isnan(y))
    return keep


def family(op: str, dtype: np.dtype) -> str:
    """Comparison family of an elementwise op: libm-backed ops are within a few ulp
    (DIVERGENCE 'transcendental functions ... agree within a few ulp'); the rest is exact."""
    return OPS[op].accuracy.family if dtype.kind == "f" else "exact"


# ============================================================================================
# Meta-test: every op of the table has a differential test here.
# ============================================================================================

UFUNC_OPS = sorted(n for n, s in OPS.items() if s.kind is Kind.ELEMENTWISE and s.ufunc is not None)
UNARY_UFUNCS = [n for n in UFUNC_OPS if OPS[n].arity == 1]
BINARY_UFUNCS = [n for n in UFUNC_OPS if OPS[n].arity == 2]

TESTED_BY = {
    "input": "test_ufunc_special_values", "constant": "test_ufunc_weak_python_scalar",
    "size": "test_reductions", "where": "test_where_every_dtype_pair",
    "cast": "test_astype_every_dtype_pair", "bitcast": "test_view_every_same_size_pair",
    **{r: "test_reductions" for r in ("sum", "prod", "max", "min", "any", "all", "argmax",
                                      "argmin")},
    **{m: "test_movement" for m in ("reshape", "transpose", "slice", "broadcast_to", "squeeze",
                                    "expand_dims")},
    "cumsum": "test_scans", "cumprod": "test_scans", "matmul": "test_matmul",
    "concatenate": "test_concatenate", "gather": "test_gather", "scatter": "test_scatter",
    **{p: "test_extra_primitives" for p in (
        "cummax", "cummin", "diagonal", "sliding_window", "frexp_mantissa", "frexp_exponent",
        "reduce_fmax", "reduce_fmin", "reduce_bitwise_and", "reduce_bitwise_or",
        "reduce_bitwise_xor", "reduce_logical_xor")},
    **{op: "test_external_ops" for op in EXTERNAL_CALLS},
    "philox": "test_philox",
    "fma": "test_fma_in_complex_multiplication",
}


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_fma_in_complex_multiplication(dt) -> None:
    """The ``fma`` primitive (llvm.fma, one rounding) computes complex products as NumPy's
    SIMD loops do; the comparator also accepts the unfused rounding of NumPy's other loops.
    Values with cancelling parts, infinities and NaN, and strided operands."""
    rng = np.random.default_rng(5)
    z = (rng.standard_normal((7, 9)) + 1j * rng.standard_normal((7, 9))).astype(dt)
    w = (z.real * (1 + 1e-7) + 1j * z.imag * (1 - 1e-7)).astype(dt)   # near cancellation
    z[0, :3] = [np.inf + 1j, np.nan, 1 - 1j * np.inf]
    assert_matches_numpy(lambda a, b: a * b, z, w, device="cpu")
    assert_matches_numpy(lambda a, b: a[::-1, ::2] * b[:, ::2].conj(), z, w, device="cpu")


@pytest.mark.parametrize("op", sorted(EXTERNAL_CALLS))
def test_external_ops(op: str) -> None:
    """Each external op (a library call) on a Fortran-ordered operand and behind an
    elementwise producer: NumPy's exact results (tests/test_sort.py, tests/test_linalg.py
    test every form)."""
    fn = EXTERNAL_CALLS[op]
    a = np.asfortranarray(SPD)
    for g in (fn, lambda x: fn(x * 1.0 + 0.0)):
        got = tracearray.compile(g, device="cpu")(a)
        want = g(a)
        got_leaves = got if isinstance(got, tuple) else (got,)
        want_leaves = want if isinstance(want, tuple) else (want,)
        assert type(got) is type(want) and len(got_leaves) == len(want_leaves)
        for x, y in zip(got_leaves, want_leaves):
            assert np.asarray(x).dtype == np.asarray(y).dtype
            np.testing.assert_array_equal(x, y)


def test_every_op_has_a_cpu_differential_test() -> None:
    untested = set(OPS) - set(UFUNC_OPS) - set(TESTED_BY)
    assert not untested, f"ops without a CPU differential test: {sorted(untested)}"
    for name in set(TESTED_BY.values()):
        assert name in globals(), name


# ============================================================================================
# Elementwise ufuncs
# ============================================================================================

def _ufunc_program(name: str) -> Callable:
    uf = getattr(np, name)
    return lambda *xs: uf(*xs)


def check_elementwise(name: str, args: list[np.ndarray]) -> None:
    f = compiled(("ufunc", name), lambda: _ufunc_program(name))
    uf = getattr(np, name)
    got, want = run_both(f, uf, *args)
    if want is None:
        return
    assert_matches(got, want, family(name, np.asarray(want).dtype), inputs=args)


def _batched_program(name: str, n_dtypes: int) -> Callable:
    """``uf`` applied to each of ``n_dtypes`` groups of operands: one multi-output kernel."""
    uf, k = getattr(np, name), OPS[name].arity
    return lambda *xs: tuple(uf(*xs[k * i:k * i + k]) for i in range(n_dtypes))


@pytest.mark.parametrize("name", UFUNC_OPS)
def test_ufunc_special_values(name: str) -> None:
    """Every dtype of the op's domain, every combination of its special values (1-d arrays
    of equal length, 9..324 distinct combinations tiled to a common length: vector bodies and
    scalar tails), contiguous and reversed. All dtypes run in one program (one multi-output
    kernel); each output is compared with NumPy's."""
    spec = OPS[name]
    groups = []
    for dt in spec.domain.dtypes:
        cols = S.cross_values(*[S.special_values(d, spec.domain.values)
                                for d in S.operand_dtypes(name, dt)])
        keep = avoid_divergences(name, cols)
        groups.append([c[keep] for c in cols])
    length = max(len(g[0]) for g in groups) + 3
    groups = [[np.resize(c, length) for c in g] for g in groups]
    f = compiled(("ufuncs", name), lambda: _batched_program(name, len(groups)))
    uf = getattr(np, name)
    for layout in ("C", "reversed"):
        args = [relayout(c, layout) for g in groups for c in g]
        got, want = run_both(f, _batched_program(name, len(groups)), *args)
        for g, w, cols in zip(got, want, groups):
            assert_matches(g, w, family(name, w.dtype), inputs=(uf, cols))


@pytest.mark.parametrize("name", UFUNC_OPS)
@settings(max_examples=examples(8))
@given(data=st.data())
def test_ufunc_random(name: str, data: st.DataObject) -> None:
    """Random broadcast shapes, values of the op's domain with specials mixed in, and every
    layout per operand."""
    spec = OPS[name]
    dt = data.draw(st.sampled_from(spec.domain.dtypes), label="dtype")
    shps = data.draw(st.sampled_from([1, 2, 3]).flatmap(
        lambda nd: S.broadcast_shapes(spec.arity, max_dims=nd, max_side=9)), label="shapes")
    args = [data.draw(arrays(d, s, spec.domain.values), label=f"x{i}")
            for i, (s, d) in enumerate(zip(shps, S.operand_dtypes(name, dt)))]
    full = np.broadcast_arrays(*args)
    keep = avoid_divergences(name, [np.ascontiguousarray(a) for a in full])
    if not keep.all():   # divergent elements (see avoid_divergences) become 1 (in every domain)
        args = [np.where(keep, a, np.ones((), a.dtype)) for a in full]
    check_elementwise(name, args)


MIXED_PAIRS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES if a != b]


@pytest.mark.parametrize("name", BINARY_UFUNCS)
@settings(max_examples=examples(4))
@given(data=st.data())
def test_ufunc_mixed_dtypes(name: str, data: st.DataObject) -> None:
    """Two different dtypes: NumPy 2's promotion picks the loop (or raises, and so must we)."""
    a_dt, b_dt = data.draw(st.sampled_from(MIXED_PAIRS), label="dtypes")
    shp = data.draw(shapes(1, 2), label="shape")
    values = OPS[name].domain.values
    x = data.draw(arrays(a_dt, shp, values), label="x")
    y = data.draw(arrays(b_dt, shp, values), label="y")
    try:
        loop = np.dtype(getattr(np, name).resolve_dtypes((a_dt, b_dt, None))[0])
    except Exception:   # noqa: BLE001 - no loop: run_both checks that we raise too
        loop = None
    if loop is not None and loop.kind in INT_KINDS or loop is not None and loop.kind == "f":
        cx, cy = (np.asarray(v).astype(loop) for v in (x, y))
        keep = avoid_divergences(name, [cx, cy]) if cx.shape == cy.shape else True
        if loop.kind in INT_KINDS and x.dtype.kind == "f":
            keep = keep & float_to_int_ok(x, loop)
        x, y = np.where(keep, x, np.ones_like(x)), np.where(keep, y, np.ones_like(y))
    check_elementwise(name, [x, y])


WEAK_SCALARS = [0, 1, -1, 2, 3, 7, 300, -129, 2**31, True, False, 0.0, -0.0, 0.5, -1.5, 2.0,
                1e300, float("inf"), float("nan")]


@pytest.mark.parametrize("name", BINARY_UFUNCS)
@settings(max_examples=examples(6))
@given(data=st.data())
def test_ufunc_weak_python_scalar(name: str, data: st.DataObject) -> None:
    """A Python scalar operand is weak (NEP 50) and becomes a constant of the array's loop
    dtype (a run-time parameter of the kernel)."""
    dt = data.draw(st.sampled_from(OPS[name].domain.dtypes), label="dtype")
    s = data.draw(st.sampled_from(WEAK_SCALARS), label="scalar")
    left = data.draw(st.booleans(), label="scalar_on_left")
    shp = data.draw(shapes(0, 2), label="shape")
    x = data.draw(arrays(dt, shp, OPS[name].domain.values), label="x")
    uf = getattr(np, name)
    fn = (lambda a, c: uf(c, a)) if left else (lambda a, c: uf(a, c))
    f = compiled(("weak", name, left), lambda: fn, static_argnums=1)
    # The operands as NumPy's loop sees them, to steer clear of the divergent inputs. (A weak
    # int out of the array's range makes NumPy raise OverflowError, and run_both checks that
    # we raise too: the wrapped constant below is then never compared.)
    # (resolve_dtypes takes Python int/float as weak types; a Python bool is NumPy's bool)
    s_key = np.dtype(bool) if isinstance(s, bool) else type(s)
    try:
        loop = uf.resolve_dtypes((dt, s_key, None) if not left else (s_key, dt, None))
    except Exception:   # noqa: BLE001 - no loop: run_both checks that we raise too
        loop = None
    if loop is not None:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cx = np.asarray(x).astype(loop[1 if left else 0])
            cs = np.full(cx.shape, s).astype(loop[0 if left else 1])
        keep = avoid_divergences(name, [cs, cx] if left else [cx, cs])
        if not keep.all():
            if left:   # the array is the exponent / second operand: replace its bad elements
                x = np.where(keep, x, np.ones_like(x))
            else:      # the constant itself diverges (x ** -1 on ints, fmax(x, -0.0)): use 1
                s = 1 if isinstance(s, int) else 1.0
    got, want = run_both(f, fn, x, s)
    if want is not None:
        assert_matches(got, want, family(name, np.asarray(want).dtype), inputs=(x, s))


# ============================================================================================
# where, clip and astype over every dtype pair
# ============================================================================================

def _pair_values(dt: np.dtype) -> np.ndarray:
    return S.special_values(dt, "any")


def _per_dtype(fn: Callable[..., Any]) -> Callable:
    """``fn(first, other)`` for each ``other`` operand: a tuple (one multi-output kernel)."""
    return lambda first, *others: tuple(fn(first, o) for o in others)


@pytest.mark.parametrize("x_dt", [str(d) for d in ALL_DTYPES])
def test_where_every_dtype_pair(x_dt: str) -> None:
    """np.where(c, x, y) for y of every dtype (NumPy's promotion), and a broadcast form: a
    column condition, a row of x and a Fortran-ordered y."""
    n = 18 * 3 + 1   # past a vector width, with a tail
    x = np.resize(_pair_values(np.dtype(x_dt)), n)
    ys = [np.resize(_pair_values(d)[::-1], n) for d in ALL_DTYPES]
    c = (np.arange(n) % 3) == 1

    def flat(c_x: tuple, *ys_: np.ndarray) -> tuple:
        return tuple(np.where(c_x[0], c_x[1], y) for y in ys_)

    def bcast(c_x: tuple, *ys_: np.ndarray) -> tuple:
        return tuple(np.where(c_x[0][:, None][:5], c_x[1][:7][None, :], y) for y in ys_)

    for prog, y_args in ((flat, ys), (bcast, [relayout(np.resize(y, (5, 7)), "F") for y in ys])):
        f = compiled(("where", prog.__name__), lambda: prog)
        got, want = run_both(f, prog, (c, x), *y_args)
        assert_tree_matches(got, want)


@pytest.mark.parametrize("x_dt", [str(d) for d in ALL_DTYPES])
def test_clip_every_dtype_pair(x_dt: str) -> None:
    """np.clip(x, lo, hi) with array bounds of every dtype (NumPy's promotion; a NaN bound
    propagates; lo > hi gives hi)."""
    x = np.resize(_pair_values(np.dtype(x_dt)), 61)
    bounds = []
    for b_dt in ALL_DTYPES:
        bv = np.sort(_pair_values(b_dt))
        bounds.append((np.resize(bv, 61), np.resize(bv[::-1], 61)))
    prog = _per_dtype(lambda a, lo_hi: np.clip(a, lo_hi[0], lo_hi[1]))
    f = compiled("clip", lambda: prog)
    got, want = run_both(f, prog, x, *bounds)
    if want is not None:
        assert_tree_matches(got, want)
    else:   # NumPy raised for some pair: find it, pair by pair (each must raise too)
        single = lambda a, lo, hi: np.clip(a, lo, hi)   # noqa: E731
        g = compiled("clip1", lambda: single)
        for lo, hi in bounds:
            got, want = run_both(g, single, x, lo, hi)
            if want is not None:
                assert_matches(got, want)


@pytest.mark.parametrize("src", [str(d) for d in ALL_DTYPES])
def test_astype_every_dtype_pair(src: str) -> None:
    """x.astype(d) for every d, contiguous and reversed: one program per source dtype whose
    second argument has the values a float -> int cast may take (DIVERGENCE 'float -> integer
    casts of NaN, inf or out-of-range values': NaN, inf and out-of-range values avoided)."""
    src_dt = np.dtype(src)
    vals = np.resize(S.special_values(src_dt, "any"), 41)
    per_dst = []
    for dst in ALL_DTYPES:
        x = vals
        if src_dt.kind == "f" and dst.kind in INT_KINDS:
            x = np.resize(x[float_to_int_ok(x, dst)], len(vals))
        per_dst.append(x)

    def prog(*xs: np.ndarray) -> tuple:
        return tuple(x.astype(d) for x, d in zip(xs, ALL_DTYPES))
    f = compiled("astype", lambda: prog)
    for layout in ("C", "reversed"):
        got, want = run_both(f, prog, *[relayout(x, layout) for x in per_dst])
        for g, w, x in zip(got, want, per_dst):
            assert_matches(g, w, inputs=x)


@pytest.mark.parametrize("src", [str(d) for d in ALL_DTYPES])
def test_view_every_same_size_pair(src: str) -> None:
    """x.view(d) (the bitcast op) for every d of x's item size that a view may read as
    (bool as bytes, not bytes as bool), on special values (NaN payloads included: an input's
    bits are moved, never computed), contiguous and reversed."""
    from tracearray.ops.elementwise import bitcast_allowed
    src_dt = np.dtype(src)
    dsts = [d for d in ALL_DTYPES if bitcast_allowed(src_dt, d)]
    assert dsts      # every supported dtype has a partner of its item size
    x = np.resize(S.special_values(src_dt, "any"), 41)

    def prog(a: np.ndarray) -> tuple:
        return tuple(a.view(d) for d in dsts)
    f = compiled(("view", src), lambda: prog)
    for layout in ("C", "reversed"):
        got, want = run_both(f, prog, relayout(x, layout))
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == w.dtype
            np.testing.assert_array_equal(np.asarray(g).view(np.uint8),
                                          np.ascontiguousarray(w).view(np.uint8))


# ============================================================================================
# Reductions: sum prod max min any all argmax argmin mean var std norm
# ============================================================================================

REDUCTIONS = ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "mean", "var",
              "std", "norm")
EXACT_REDUCTIONS = ("max", "min", "any", "all", "argmax", "argmin")


def reduction_program(name: str, axis: Any, keepdims: bool, ddof: int = 0,
                      dtype: Any = None, ord: Any = None) -> Callable:
    if name in ("argmax", "argmin"):
        return lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims)
    if name in ("var", "std"):
        return lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims, ddof=ddof)
    if name == "norm":
        return lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    if name in ("sum", "prod", "mean") and dtype is not None:
        return lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims, dtype=dtype)
    return lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims)


def _float64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def reduction_tolerance(name: str, x: np.ndarray, axis: Any, keepdims: bool, ddof: int,
                        want: np.ndarray, ord: Any = None) -> tuple[np.ndarray, int]:
    """(scale, n) of the summation bound for a float reduction (see numpy_compare):
    any two summation orders of n terms differ by at most 2 * n * eps * sum(|terms|)."""
    ax = tuple(range(x.ndim)) if axis is None else axis
    n = math.prod(x.shape[a] for a in (ax if isinstance(ax, tuple) else (ax,)))
    ax64 = np.abs(_float64(x))
    with np.errstate(all="ignore"):
        if name == "sum":
            return np.sum(ax64, axis=axis, keepdims=keepdims), n
        if name == "mean":
            return np.sum(ax64, axis=axis, keepdims=keepdims) / max(n, 1), n + 1
        if name == "prod":   # relative: each product rounds once
            return np.prod(ax64, axis=axis, keepdims=keepdims), n + 1
        if name in ("var", "std"):
            m = np.mean(ax64, axis=axis, keepdims=True)
            s = np.sum((ax64 + m) ** 2, axis=axis, keepdims=keepdims) / max(n - ddof, 1)
            return s, 2 * n + 2
        # norm: all terms positive, so the relative error of the result is ~ n * eps
        return np.abs(_float64(want)), n + 8


def check_reduction(name: str, x: np.ndarray, axis: Any, keepdims: bool, ddof: int = 0,
                    dtype: Any = None, ord: Any = None) -> None:
    fn = reduction_program(name, axis, keepdims, ddof, dtype, ord)
    f = compiled(("reduce", name, axis, keepdims, ddof, str(dtype), ord), lambda: fn)
    got, want = run_both(f, fn, x)
    if want is not None:
        compare_reduction(name, x, axis, keepdims, got, want, ddof, ord)


def compare_reduction(name: str, x: np.ndarray, axis: Any, keepdims: bool, got: Any, want: Any,
                      ddof: int = 0, ord: Any = None) -> None:
    wd = np.asarray(want).dtype
    if wd.kind != "f" or name in EXACT_REDUCTIONS or (name == "norm" and ord in (
            np.inf, -np.inf, 0)) or x.size == 0 or x.dtype.kind in "biu" and name != "norm" \
            and name not in ("var", "std", "mean"):
        # max/min over +0.0 and -0.0 may return either zero (divergence max-min-signed-zero)
        assert_matches(got, want, "exact", inputs=x, zero_sign=name not in ("max", "min"))
        return
    scale, n = reduction_tolerance(name, x, axis, keepdims, ddof, want, ord)
    if name == "std":
        # |sqrt(a) - sqrt(b)| <= min(sqrt(|a - b|), |a - b| / sqrt(b)): from var's bound.
        eps = float(np.finfo(wd).eps)
        tvar = 2.0 * n * eps * np.asarray(scale)
        w64 = np.abs(_float64(want))
        with np.errstate(all="ignore"):
            tol = np.minimum(np.sqrt(tvar), np.where(w64 > 0, tvar / w64, np.inf))
        scale, n = tol / (2.0 * eps), 1
    assert_matches(got, want, "reduction", scale=scale, n=n, inputs=(name, x))


@st.composite
def axis_for(draw: st.DrawFn, ndim: int, name: str) -> Any:
    if name in ("argmax", "argmin"):
        return draw(st.none() | st.integers(-ndim, ndim - 1)) if ndim else None
    if name == "norm":   # vector norms over one axis, Frobenius over two, or everything
        choices = [st.none()]
        if ndim:
            choices.append(st.integers(-ndim, ndim - 1))
        if ndim >= 2:
            choices.append(st.permutations(range(ndim)).map(lambda p: tuple(p[:2])))
        return draw(st.one_of(*choices))
    return draw(S.axis_args(ndim))


@pytest.mark.parametrize("name", REDUCTIONS)
@settings(max_examples=examples(16))
@given(data=st.data())
def test_reductions(name: str, data: st.DataObject) -> None:
    dt = data.draw(st.sampled_from(ALL_DTYPES if name != "norm" else
                                   [d for d in ALL_DTYPES if d != BOOL]), label="dtype")
    shp = data.draw(shapes(0, 3), label="shape")
    axis = data.draw(axis_for(len(shp), name), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    ddof = data.draw(st.sampled_from([0, 1, 2]), label="ddof") if name in ("var", "std") else 0
    dtype = None
    if name in ("sum", "prod", "mean") and data.draw(st.booleans(), label="with_dtype"):
        dtype = data.draw(st.sampled_from(["float64", "float32", "int64", "uint32"] if name !=
                                          "mean" else ["float64", "float32"]), label="dtype=")
    ord = None
    if name == "norm":
        two = isinstance(axis, tuple) or (axis is None and len(shp) == 2)
        ord = data.draw(st.sampled_from([None, "fro"] if two else
                                        [None, 1, 2, np.inf, -np.inf, 0, 3]), label="ord")
        if axis is None and len(shp) != 1 and ord not in (None, "fro"):
            ord = None
    moderate = name not in EXACT_REDUCTIONS
    x = data.draw(arrays(dt, shp, "any", moderate=moderate), label="x")
    if name == "prod" and dt.kind == "f":   # keep products far from overflow in any order
        x = np.where(np.isfinite(x), 1 + (x / 64), x).astype(dt)
    if dtype is not None and np.dtype(dtype).kind in INT_KINDS and dt.kind == "f":
        x = np.where(float_to_int_ok(x, np.dtype(dtype)), x, 1).astype(dt)   # DIVERGENCE cast
    check_reduction(name, x, axis, keepdims, ddof, dtype, ord)


def _all_reductions(names: tuple[str, ...], axis: Any, keepdims: bool) -> Callable:
    """Every reduction of ``names`` in one program (they share a kernel): the exact ones of
    ``xs`` (special values), prod of ``xp`` (near 1), the others of ``xm`` (moderate)."""
    progs = {n: reduction_program(n, axis, keepdims) for n in names}

    def prog(xs: np.ndarray, xm: np.ndarray, xp: np.ndarray) -> dict:
        return {n: p(xs if n in EXACT_REDUCTIONS else xp if n == "prod" else xm)
                for n, p in progs.items()}
    return prog


def _every_dtype_inputs(dt: np.dtype, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    vals = S.special_values(dt, "any")
    xs = np.resize(vals, shape)
    if dt.kind == "f":   # overflow is order-dependent: finite moderate values, and one NaN
        mod = vals[np.isfinite(vals) & (np.abs(vals) < 1e4)]
        xm = np.resize(mod, shape)
        xm.flat[7] = np.nan
        xp = np.where(np.abs(xm) > 2, np.sign(xm), xm).astype(dt)
    else:
        xm = xp = xs
    return xs, xm, xp


@pytest.mark.parametrize("dt", [str(d) for d in ALL_DTYPES])
def test_reductions_every_dtype(dt: str) -> None:
    """Every reduction of every input dtype on a fixed (5, 37) array holding the dtype's
    special values: over axis None (full), 0 (columns) and -1 with keepdims on a
    Fortran-ordered copy (rows read with a stride). (np.linalg.norm of bools raises in
    NumPy: see test_norm_of_bool_raises_like_numpy.)"""
    dt = np.dtype(dt)
    names = tuple(n for n in REDUCTIONS if not (n == "norm" and dt == BOOL))
    xs, xm, xp = _every_dtype_inputs(dt, (5, 37))
    for axis, keepdims, layout in ((None, False, "C"), (0, False, "C"), (-1, True, "F")):
        prog = _all_reductions(names, axis, keepdims)
        f = compiled(("all-reductions", names, axis, keepdims), lambda: prog)
        args = [relayout(a, layout) for a in (xs, xm, xp)]
        got, want = run_both(f, prog, *args)
        assert got.keys() == want.keys()
        for n in names:
            x = xs if n in EXACT_REDUCTIONS else xp if n == "prod" else xm
            compare_reduction(n, x, axis, keepdims, got[n], want[n])


def test_norm_of_bool_raises_like_numpy() -> None:
    x = np.ones((3, 4), bool)
    fn = reduction_program("norm", None, False)
    f = compiled(("reduce", "norm", None, False, 0, "None", None), lambda: fn)
    got, want = run_both(f, fn, x)
    if want is not None:
        assert_matches(got, want, "reduction", scale=np.abs(want), n=12)


@pytest.mark.parametrize("shape_axis", [((0,), None), ((0, 3), 0), ((3, 0), 1), ((3, 0), None),
                                        ((2, 0, 3), (0, 1)), ((1025, 0), -1)], ids=str)
def test_reductions_of_empty_arrays(shape_axis: tuple) -> None:
    """Empty reductions give the identity (sum +0.0, prod 1, any False, all True) or NaN
    (mean, var, std), or raise ValueError like NumPy (max, min, argmax, argmin)."""
    shp, axis = shape_axis
    names = ("sum", "prod", "any", "all", "mean", "var", "std")
    prog = _all_reductions(names, axis, False)
    f = compiled(("all-reductions", names, axis, False), lambda: prog)
    for dt in (np.dtype(np.float32), np.dtype(np.int16), BOOL):
        x = np.zeros(shp, dt)
        got, want = run_both(f, prog, x, x, x)
        for n in names:
            compare_reduction(n, x, axis, False, got[n], want[n])
        for n in ("max", "min") + (("argmax", "argmin") if not isinstance(axis, tuple) else ()):
            check_reduction(n, x, axis, False)   # both raise (at trace time for us)


def want_0d_array_as_scalar(want: Any) -> Any:
    """Documented divergence ``zero-d-results-are-scalars`` (docs/divergences.md): NumPy returns
    a 0-d *array* for a view of a 0-d array (``x[...]``, ``x.reshape(())``, ``x.T``), np.where
    and astype of 0-d arrays, and a 0-d input returned unchanged; a compiled function returns
    every 0-d result as a NumPy scalar. Values, dtype and shape are still compared."""
    if isinstance(want, np.ndarray) and want.ndim == 0:
        return want[()]
    return want


def test_zero_d_results_are_scalars_even_for_views() -> None:
    """The divergence above, pinned down (should it ever be fixed, this test must change)."""
    f = compiled(("move", "index", "(Ellipsis,)"), lambda: lambda x: x[...])
    got = f(np.array(3.0))
    assert isinstance(got, np.float64) and got == 3.0


# ============================================================================================
# Movement: reshape, transpose, slicing (negative steps), broadcast_to, squeeze, expand_dims
# ============================================================================================

MOVEMENTS = ("index", "transpose", "reshape", "broadcast_to", "squeeze", "expand_dims", "flip",
             "swapaxes", "moveaxis", "ravel")


@st.composite
def movement_case(draw: st.DrawFn, kind: str) -> tuple[tuple[int, ...], Callable, Any]:
    """(input shape, program, static description)."""
    if kind == "broadcast_to":
        src, target = draw(S.broadcast_to_pair(max_dims=3))
        return src, (lambda x: np.broadcast_to(x, target)), target
    shp = draw(shapes(1 if kind in ("swapaxes", "moveaxis") else 0, 4, max_size=3000))
    nd = len(shp)
    if kind == "index":
        key = draw(S.basic_index(shp))
        return shp, (lambda x: x[key]), repr(key)
    if kind == "transpose":
        perm = tuple(draw(st.permutations(range(nd))))
        return shp, (lambda x: x.transpose(perm)), perm
    if kind == "reshape":
        target = draw(S.reshape_target(shp))
        return shp, (lambda x: x.reshape(target)), target
    if kind == "squeeze":
        ones = [d for d, s in enumerate(shp) if s == 1]
        axes = tuple(draw(st.lists(st.sampled_from(ones), unique=True))) if ones else ()
        axis = axes if axes else None
        return shp, (lambda x: np.squeeze(x, axis=axis)), axis
    if kind == "expand_dims":
        axis = draw(st.integers(-nd - 1, nd))
        return shp, (lambda x: np.expand_dims(x, axis)), axis
    if kind == "flip":
        axis = draw(S.axis_args(nd))
        return shp, (lambda x: np.flip(x, axis)), axis
    if kind == "swapaxes":
        a, b = draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))
        return shp, (lambda x: np.swapaxes(x, a, b)), (a, b)
    if kind == "moveaxis":
        a, b = draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))
        return shp, (lambda x: np.moveaxis(x, a, b)), (a, b)
    return shp, (lambda x: x.ravel()), None


@pytest.mark.parametrize("kind", MOVEMENTS)
@settings(max_examples=examples(14))
@given(data=st.data())
def test_movement(kind: str, data: st.DataObject) -> None:
    """A view op alone (the kernel copies through an affine index map), then the same view
    fused into a consumer (``view * 3 + 1`` in the input dtype)."""
    shp, view, desc = data.draw(movement_case(kind), label="case")
    dt = data.draw(st.sampled_from([np.dtype(np.int32), np.dtype(np.float64),
                                    np.dtype(np.float16), np.dtype(np.uint8), BOOL]),
                   label="dtype")
    x = data.draw(arrays(dt, shp), label="x")
    f = compiled(("move", kind, repr(desc)), lambda: view)
    got, want = run_both(f, view, x)
    if want is not None:
        assert_matches(got, want_0d_array_as_scalar(want), inputs=x)

    is_bool = dt == BOOL

    def consumer(v: Any) -> Any:
        w = view(v)
        return ~w if is_bool else w * 3 + 1
    g = compiled(("move+", kind, repr(desc), is_bool), lambda: consumer)
    got, want = run_both(g, consumer, x)
    if want is not None:
        assert_matches(got, want, inputs=x)


@settings(max_examples=examples(12))
@given(data=st.data())
def test_reshape_of_computed_and_noncontiguous_values(data: st.DataObject) -> None:
    """Reshape that merges dimensions: of a transposed / strided input (a view NumPy must
    copy) and of a computed value (stored by the planner first), then a reduction."""
    shp = data.draw(shapes(2, 3, max_size=2000), label="shape")
    x = data.draw(arrays(np.dtype(np.float32), shp, moderate=True), label="x")
    target = data.draw(S.reshape_target(shp), label="target")

    def prog(v: Any) -> Any:
        a = v.T.reshape(target)
        b = (v * 2 - 1).reshape(target)
        c = np.flip(v, 0)[..., ::2].reshape(-1)
        return a, b, c, (v + 1).reshape(-1).sum()
    f = compiled(("reshape-merge", target), lambda: prog)
    got, want = run_both(f, prog, x)
    assert_tree_matches(got[:3], tuple(want_0d_array_as_scalar(w) for w in want[:3]))
    scale = np.sum(np.abs(x.astype(np.float64) + 1))
    assert_matches(got[3], want[3], "reduction", scale=scale, n=x.size + 1)


# ============================================================================================
# Scans, concatenation, matmul
# ============================================================================================

@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@settings(max_examples=examples(20))
@given(data=st.data())
def test_scans(name: str, data: st.DataObject) -> None:
    """Scans are sequential in NumPy and in the kernel: bit-exact, integer wrap-around
    included. ``dtype=`` and every input dtype."""
    dt = data.draw(st.sampled_from(ALL_DTYPES), label="dtype")
    shp = data.draw(shapes(0, 3), label="shape")
    axis = data.draw(st.none() | st.integers(-len(shp), len(shp) - 1) if shp else st.none(),
                     label="axis")
    out_dt = data.draw(st.sampled_from([None, "int64", "float32", "float64", "uint8", "int8"]),
                       label="dtype=")
    x = data.draw(arrays(dt, shp, "any", moderate=dt.kind == "f" and name == "cumprod"),
                  label="x")
    fn = lambda v: getattr(np, name)(v, axis=axis, dtype=out_dt)   # noqa: E731
    f = compiled((name, axis, out_dt), lambda: fn)
    if out_dt is not None and np.dtype(out_dt).kind in INT_KINDS and dt.kind == "f":
        x = np.where(float_to_int_ok(x, np.dtype(out_dt)), x, 1).astype(dt)   # DIVERGENCE cast
    got, want = run_both(f, fn, x)
    if want is None:
        return
    if f.stats.device == "cuda" and np.asarray(want).dtype.kind == "f":
        # a long GPU scan runs in tiles (scan_tiled): float partial sums and products
        # associate differently from NumPy's in-order loop, each within its in-order error
        # bound (divergences float-sum-reassociation, float-prod-reassociation); integers
        # stay exact. A product's bound is relative to the product itself.
        a = np.abs(x.astype(np.float64))
        scan = np.cumsum if name == "cumsum" else np.cumprod
        scale = scan(a, axis=axis) if axis is not None else scan(a)
        n = x.size if axis is None else (x.shape[axis] if x.ndim else 1)
        got, want = np.asarray(got), np.asarray(want)
        if name == "cumprod" and want.size:
            # where NumPy's running product overflowed to inf or underflowed to 0, it stays
            # there; another association may not pass through that step (both are within
            # the comparator's bound, which widens there): compared up to that point
            info = np.finfo(want.dtype)
            ax = 0 if axis is None else axis
            with np.errstate(all="ignore"):
                hi = np.maximum.accumulate(scale.reshape(want.shape), axis=ax)
                lo = np.minimum.accumulate(scale.reshape(want.shape), axis=ax)
            keep = (hi <= float(info.max) / 2) & (lo >= float(info.tiny) * 2) | (lo == 0)
            got, want, scale = got[keep], want[keep], scale.reshape(keep.shape)[keep]
        assert_matches(got, want, "reduction", scale=scale, n=max(n, 1), inputs=x)
        return
    assert_matches(got, want, inputs=x)


@settings(max_examples=examples(25))
@given(data=st.data())
def test_concatenate(data: st.DataObject) -> None:
    """np.concatenate / np.stack of 1-4 parts of mixed dtypes and layouts, empty parts too."""
    stack = data.draw(st.booleans(), label="stack")
    base = data.draw(shapes(1, 3, max_size=1500), label="base")
    nd = len(base)
    k = data.draw(st.integers(1, 4), label="parts")
    if stack:
        axis = data.draw(st.integers(-nd - 1, nd), label="axis")
        part_shapes = [base] * k
    else:
        axis = data.draw(st.none() | st.integers(-nd, nd - 1), label="axis")
        part_shapes = []
        for _ in range(k):
            s = list(base)
            if axis is not None:
                s[axis] = data.draw(st.sampled_from([0, 1, 2, 5, 17]))
            part_shapes.append(tuple(s))
    dts = data.draw(st.lists(st.sampled_from(ALL_DTYPES), min_size=k, max_size=k), label="dts")
    parts = [data.draw(arrays(d, s), label="part") for d, s in zip(dts, part_shapes)]
    if stack:
        fn = lambda *ps: np.stack(ps, axis=axis)   # noqa: E731
    else:
        fn = lambda *ps: np.concatenate(ps, axis=axis)   # noqa: E731
    f = compiled(("concat", stack, axis, k), lambda: fn)
    got, want = run_both(f, fn, *parts)
    if want is not None:
        assert_matches(got, want)


MATMUL_SHAPES = [
    ((7,), (7,)), ((5,), (5, 3)), ((4, 5), (5,)), ((4, 5), (5, 3)), ((1, 1), (1, 1)),
    ((3, 4, 5), (5, 2)), ((2, 1, 4, 5), (3, 5, 2)), ((0, 5), (5, 3)), ((4, 0), (0, 3)),
    ((17, 33), (33, 9)), ((2, 3, 4), (2, 4, 5)),
]


@pytest.mark.parametrize("shapes_ab", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("dts", [("float32", "float32"), ("float64", "float64"),
                                 ("float16", "float16"), ("int32", "int32"),
                                 ("int8", "float32"), ("uint8", "int64"), ("bool", "float64")])
def test_matmul(shapes_ab: tuple, dts: tuple[str, str]) -> None:
    """matmul / ``@`` / dot, 1-d operands (a 0-d result is a NumPy scalar), batched with
    broadcasting; every layout of the operands; ``relu(a @ b + 1)`` as an epilogue."""
    (sa, sb), (da, db) = shapes_ab, dts
    rng_seed = sum(sa) * 31 + sum(sb)
    a = random_values(np.dtype(da), sa, "any", rng_seed, moderate=True)
    b = random_values(np.dtype(db), sb, "any", rng_seed + 1, moderate=True)
    progs = {"matmul": lambda p, q: p @ q,
             "relu": lambda p, q: np.maximum(np.matmul(p, q) + 1, 0)}
    if len(sa) <= 2 and len(sb) <= 2:
        progs["dot"] = lambda p, q: np.dot(p, q)
    for layout_a, layout_b in (("C", "C"), ("F", "reversed"), ("strided", "permuted")):
        pa, pb = relayout(a, layout_a), relayout(b, layout_b)
        for pname, prog in progs.items():
            f = compiled(("matmul", pname), lambda: prog)
            got, want = run_both(f, prog, pa, pb)
            if want is None:
                continue
            if np.asarray(want).dtype.kind != "f":
                assert_matches(got, want)
                continue
            scale = np.abs(_float64(a)) @ np.abs(_float64(b))
            if pname == "relu":
                scale = scale + 1
            assert_matches(got, want, "reduction", scale=scale, n=sa[-1] + 1)


# ============================================================================================
# Regressions (shrunk programs of bugs found by these tests)
# ============================================================================================

def test_regression_reshape_of_computed_empty_array() -> None:
    """fuse/index: the reshape index map grouped dimensions by element count and ran off the
    end for 0-sized dims (IndexError while planning ``(x * 2 - 1).reshape(0, 5)``)."""
    prog = lambda v: ((v * 2 - 1).reshape(0, 5), (v + 1).reshape(-1).sum())   # noqa: E731
    f = compiled("regression-empty-reshape", lambda: prog)
    for shape in ((2, 0), (0, 0), (3, 0, 2)):
        x = np.zeros(shape, np.float32)
        assert_tree_matches(f(x), prog(x))


# ============================================================================================
# Primitives reached through NumPy functions and ufunc methods
# ============================================================================================

def _extra_programs(kind: str) -> Callable:
    from numpy.lib.stride_tricks import sliding_window_view
    common = lambda a: (np.maximum.accumulate(a, axis=1), np.minimum.accumulate(a),  # noqa: E731
                        np.diagonal(a, 1), a.diagonal(-2) * 2, np.trace(a),
                        sliding_window_view(a, 3, axis=1).sum(-1, dtype=a.dtype))
    if kind == "f":
        return lambda a: common(a) + (np.fmax.reduce(a, axis=0), np.fmin.reduce(a, axis=1),
                                      np.nanmax(a), np.frexp(a), np.ldexp(a, 3))
    if kind == "b":
        return lambda a: common(a) + (np.logical_xor.reduce(a, axis=0),
                                      np.bitwise_or.reduce(a, axis=1))
    return lambda a: common(a) + (np.bitwise_and.reduce(a, axis=0),
                                  np.bitwise_or.reduce(a, axis=1), np.bitwise_xor.reduce(a))


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int16", "uint8", "int64",
                                "bool"])
def test_extra_primitives(dt: str) -> None:
    """Scans of maximum/minimum, ufunc.reduce of the other associative ufuncs (fmax.reduce is
    nanmax), diagonal views, sliding windows, frexp/ldexp, compiled and against NumPy on
    random values with NaN, on contiguous and strided layouts."""
    rng = np.random.default_rng(3)
    kind = np.dtype(dt).kind
    f = compiled(("extra", kind), lambda: _extra_programs(kind))
    for shape in ((4, 5), (9, 33), (1, 7)):
        x = (rng.standard_normal(shape) * 10).astype(dt)
        if kind == "f":
            x.flat[::7] = np.nan
        for layout in ("C", "reversed"):
            args = [relayout(x, layout)]
            got, want = run_both(f, _extra_programs(kind), *args)
            if kind == "f" and dt == "float32":
                # the window sums of a reversed (strided) float32 array add in float64
                # (codegen/summation.py), NumPy in float32: the last bit may differ
                from numpy.lib.stride_tricks import sliding_window_view
                scale = sliding_window_view(np.abs(args[0]), 3, axis=1).sum(-1)
                assert_matches(got[5], want[5], "reduction", scale=scale, n=3)
                got, want = got[:5] + got[6:], want[:5] + want[6:]
            assert_tree_matches(got, want, "exact")


def test_philox() -> None:
    """The random bit generator compiled for the CPU, bit for bit against its NumPy reference
    (itself checked against Random123's known answers in tests/test_random.py), with operands
    at the 32- and 64-bit edges and broadcast (tests/test_random.py has the distributions)."""
    from tracearray.ops.random import philox_reference
    from tracearray.trace.random import philox
    f = compiled(("philox",), lambda: lambda p, s, k: philox(p, s, k))
    edges = np.array([0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1], np.uint64)
    rng = np.random.default_rng(5)
    p = np.concatenate([edges, rng.integers(0, 2**64, 30, dtype=np.uint64, endpoint=False)])
    for s, k in ((edges[:, None], np.uint64(0)), (np.uint64(7), edges[::-1, None])):
        got = f(p, np.asarray(s), np.asarray(k))
        np.testing.assert_array_equal(got, philox_reference(p, s, k))


def test_scatter() -> None:
    """The scatter primitive compiled for the CPU over every dtype (tests/test_scatter.py has
    every form, random scatters and the errors)."""
    from tracearray.testing import assert_matches_numpy
    rng = np.random.default_rng(0)
    i = np.array([[2, -1], [0, 2]])
    for dt in ALL_DTYPES:
        x = (rng.standard_normal((4, 5)) * 10).astype(dt)

        def put(a, i):
            y = a.copy()
            y[i] = a[0]
            return y

        def at(a, i):
            y = a.copy()
            (np.logical_or if dt == np.dtype(bool) else np.add).at(y, (slice(None), i), a[:, :1, None])
            return y
        for g in (put, at):
            assert_matches_numpy(g, x, i, device="cpu")


def test_gather() -> None:
    """The gather primitive compiled for the CPU over every dtype (tests/test_indexing.py
    has every indexing form, random keys and the errors)."""
    from tracearray.testing import assert_matches_numpy
    rng = np.random.default_rng(0)
    i = np.array([[2, -1], [0, 3]])
    for dt in ALL_DTYPES:
        x = (rng.standard_normal((4, 5)) * 10).astype(dt)
        for g in (lambda a, i: a[i], lambda a, i: a[:, i] + a[0, 0], lambda a, i: a[i, i % 5],
                  lambda a, i: a.T[i].sum(axis=0)):
            assert_matches_numpy(g, x, i, device="cpu")


@pytest.mark.parametrize("dt", ["float32", "float64", "int8", "uint16", "int64"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_over_long_rows(name: str, dt: str) -> None:
    """argmax/argmin of contiguous rows run in blocks (codegen/kernel.py ``_arg_two_pass``):
    the winner and its ties placed at and around block edges, NaNs after and before a tie,
    rows of one repeated value and of the dtype's extremes, a fused producer, and a strided
    row (the one-pass path), each against NumPy."""
    from tracearray.codegen.kernel import ARG_BLOCK
    n = 2 * ARG_BLOCK + 905
    info = np.finfo(dt) if dt.startswith("float") else np.iinfo(dt)
    rng = np.random.default_rng(7)
    lo, hi = (-100, 100) if dt != "uint16" else (0, 200)
    rows = []
    for pos in (0, 1, ARG_BLOCK - 1, ARG_BLOCK, 2 * ARG_BLOCK - 1, 2 * ARG_BLOCK, n - 1):
        r = rng.integers(lo + 1, hi - 1, n).astype(dt)
        r[pos] = hi if name == "argmax" else lo          # the winner
        r[min(pos + ARG_BLOCK, n - 1)] = r[pos]           # a later tie: the first one wins
        rows.append(r)
    rows.append(np.full(n, info.min, dt))
    rows.append(np.full(n, info.max, dt))
    if dt.startswith("float"):
        for pos in (3, ARG_BLOCK + 1, n - 1):
            r = rng.standard_normal(n).astype(dt)
            r[pos] = np.nan
            r[-1 if pos != n - 1 else 0] = np.nan
            rows.append(r)
        r = np.zeros(n, dt)
        r[ARG_BLOCK + 5::3] = -0.0
        rows.append(r)
        rows.append(np.full(n, -np.inf if name == "argmax" else np.inf, dt))
    x = np.stack(rows)
    fn = getattr(np, name)
    assert_matches_numpy(lambda a: fn(a, axis=1), x, device="cpu")
    assert_matches_numpy(lambda a: fn(a, axis=-1, keepdims=True), x[::-1], device="cpu")
    assert_matches_numpy(lambda a: fn(a[:, ::2], axis=1), x, device="cpu")
    assert_matches_numpy(lambda a: fn(a.T, axis=0), np.ascontiguousarray(x.T), device="cpu")
    if dt.startswith("float"):
        assert_matches_numpy(lambda a: fn(a * 2 - 1, axis=1), x, device="cpu")
    else:
        assert_matches_numpy(lambda a: fn(a ^ 1, axis=1), x, device="cpu")


@pytest.mark.parametrize("dt", ["float32", "float64", "int16", "uint8"])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_over_columns(name: str, dt: str) -> None:
    """argmax/argmin along an outer axis run as column reductions (tile/geometry.py "col":
    a tile of COL_TILE (value, position) accumulators updated row by row), with ties, NaNs in
    several rows of a column and columns past a tile edge, against NumPy."""
    from tracearray.tile.geometry import COL_TILE
    rng = np.random.default_rng(11)
    x = rng.integers(0, 5, (37, COL_TILE + 77)).astype(dt)       # many ties
    if dt.startswith("float"):
        x[3, ::7] = np.nan
        x[20, ::5] = np.nan
        x[:, COL_TILE] = -np.inf
    fn = getattr(np, name)
    assert_matches_numpy(lambda a: fn(a, axis=0), x, device="cpu")
    assert_matches_numpy(lambda a: fn(a.reshape(37, 1, -1) * 2, axis=0), x, device="cpu")
    assert_matches_numpy(lambda a: fn(a[:36].reshape(4, 9, -1), axis=1), x, device="cpu")
    assert_matches_numpy(lambda a: fn(a[:, ::-3], axis=0), x, device="cpu")


@pytest.mark.parametrize("shape", [(), (1,), (9,), (3, 17), (2, 0), (4, 3, 9)])
def test_packbits_and_unpackbits_match_numpy(shape) -> None:
    """np.packbits / np.unpackbits (composites): every axis, both bit orders, counts that
    trim, pad and empty, 0-d arrays as 1-d; NumPy's errors for wrong dtypes, bit orders and
    counts."""
    rng = np.random.default_rng(len(shape))
    cases = []
    for dt in (np.int16, np.bool_, np.uint64, np.int8):
        a = rng.integers(-2, 3, shape).astype(dt)
        for kw in ({}, {"axis": -1}, {"axis": 0, "bitorder": "little"}):
            cases.append((np.packbits, a, kw))
    u = rng.integers(0, 256, shape).astype(np.uint8)
    for kw in ({}, {"axis": -1, "count": -3}, {"axis": 0, "count": 11, "bitorder": "little"},
               {"count": 0}, {"count": -100}, {"axis": 0, "count": np.int64(2)}):
        cases.append((np.unpackbits, u, kw))
    cases += [(np.packbits, np.ones(shape, np.float32), {}),
              (np.packbits, u, {"bitorder": "middle"}),
              (np.unpackbits, u.astype(np.int8), {}),
              (np.unpackbits, u, {"axis": len(shape) + 1})]
    for fn, x, kw in cases:
        try:
            want = fn(x, **kw)
        except Exception as e:   # noqa: BLE001 - NumPy's error is the expected one
            with pytest.raises(type(e)):
                tracearray.compile(lambda v: fn(v, **kw), device="cpu")(x)
            continue
        got = tracearray.compile(lambda v: fn(v, **kw), device="cpu")(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (fn, x.dtype, kw)
        np.testing.assert_array_equal(got, want, err_msg=f"{fn.__name__} {x.dtype} {kw}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int8, np.int32, np.uint8])
def test_select_keeps_python_scalar_choices_weak(dtype) -> None:
    """np.select's choices and default as NumPy's dtype rules see them: a Python scalar in
    the choice list is weak (float32 with 2 stays float32). The list's scalars were made
    strong int64 / float64 arrays: float32 became float64, int8 int64."""
    from tracearray.testing import assert_matches_numpy
    x = np.array([0, 1, 3, 2], dtype)
    for fn in (lambda x: np.select([x > 1, x < 1], [x, 2]),
               lambda x: np.select([x > 1], [1.5], default=x),
               lambda x: np.select([x > 1, x == 0], [x, 2], default=3),
               lambda x: np.select([x > 1], [x], default=-1)):
        assert_matches_numpy(fn, x, device="cpu")


def test_uint64_indices_as_numpy_casts_them() -> None:
    """np.bincount takes uint64 values (2**63 and up: its negative-elements error); np.put
    and np.choose cast their indices to intp by the 'safe' rule, so uint64 raises
    TypeError (np.take does not). bincount refused uint64, put and choose returned values
    (probe of the twelfth session)."""
    i = np.array([1, 2, 2, 5], np.uint64)
    assert_matches_numpy(np.bincount, i, device="cpu")
    assert_matches_numpy(lambda i, w: np.bincount(i, weights=w, minlength=9), i,
                         np.arange(4.0), device="cpu")
    assert_matches_numpy(lambda x, i: np.take(x, i), np.arange(10.0), i, device="cpu")
    with pytest.raises(ValueError, match="no negative elements"):
        tracearray.compile(np.bincount, device="cpu")(np.array([1, 2**63], np.uint64))

    def put(x, i):
        np.put(x, i, -1.0)
        return x
    for fn, args in ((put, (np.arange(10.0), i)),
                     (lambda i: np.choose(i, [np.zeros(4), np.ones(4)]), (i % 2,))):
        with pytest.raises(TypeError, match="rule 'safe'"):
            fn(*args)
        with pytest.raises(TypeError, match="rule 'safe'"):
            tracearray.compile(fn, device="cpu")(*args)


def test_round_with_decimals_past_float64s_range() -> None:
    """np.round(x, 400) and np.round(x, -400): NumPy's power of ten is inf there (NaN for
    floats, int64's NaN cast for integers); Python's float power raised OverflowError
    inside the trace (probe of the twelfth session)."""
    import warnings
    r = np.array([0.125, 12345.5, -0.0])
    i = np.array([7, -12], np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for d in (400, -400, 309, 308, -308):
            assert_matches_numpy(lambda a, d=d: np.round(a, d), r, device="cpu")
            assert_matches_numpy(lambda a, d=d: np.round(a.astype(np.float32), d), r,
                                 device="cpu")
        assert_matches_numpy(lambda a: np.around(a, -400), i, device="cpu")


def test_select_of_an_array_of_conditions_and_of_string_choices() -> None:
    """np.select with its conditions stacked in one array (NumPy iterates its first axis),
    and with string choices: the clear dtype error at the user's line. The string list made
    the first attempt fail, the retry passed the conditions as one traced array, and
    ``if not condlist`` asked that array for its truth value (a confusing ValueError; probe
    of the twelfth session)."""
    from tracearray.errors import TraceDTypeError
    from tracearray.testing import assert_matches_numpy
    x = np.array([-1.0, 0.5, 2.0])
    assert_matches_numpy(lambda x: np.select(np.stack([x < 0, x < 1]), [x * 2, x * 3],
                                             default=7.0), x, device="cpu")
    f = tracearray.compile(lambda x: np.select([x < 0, x < 1], ["neg", "small"],
                                               default="big"))
    with pytest.raises(TraceDTypeError, match="dtype <U"):
        f(x)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int64])
def test_average_multiplies_integers_in_the_result_dtype(dtype) -> None:
    """np.average(a, weights=w) of integers multiplies in float64 (NumPy's
    np.multiply(a, w, dtype=result_dtype)); the product was formed in the integer dtype and
    wrapped before the cast (uint8 200 * 3)."""
    from tracearray.testing import assert_matches_numpy
    big = np.iinfo(dtype).max // 2
    a = np.array([[big, big - 7], [10, 20]], dtype)
    w = np.array([3, 1], dtype)
    assert_matches_numpy(lambda a, w: (np.average(a, axis=1, weights=w),
                                       np.average(a, weights=np.stack([w, w]),
                                                  returned=True)), a, w, device="cpu")


@pytest.mark.parametrize("axis,wshape", [((0, 2), (2, 4)), ((2, 0), (4, 2)), (-1, (4,)),
                                         ((2, 1), (4, 3)), ((0, 2), (4, 2)), (5, (3,))])
@pytest.mark.parametrize("keepdims", [False, True])
def test_average_weights_along_several_axes(axis, wshape, keepdims) -> None:
    """NumPy 2's np.average takes weights shaped like ``a`` along the axes, in the order
    given (transposed into place); a probe found an internal unpacking error for a tuple."""
    from tracearray.testing import assert_matches_numpy
    x = np.arange(24.0).reshape(2, 3, 4)
    w = np.arange(1.0, 1.0 + math.prod(wshape)).reshape(wshape)
    assert_matches_numpy(lambda x, w: np.average(x, axis=axis, weights=w, keepdims=keepdims,
                                                 returned=True), x, w, device="cpu")


@pytest.mark.parametrize("name", ["mean_int8_into_int8", "mean_f16_into_f32", "sum_into_f32",
                                  "cumsum_into_f32", "prod_into_f64", "sum_floats_into_int",
                                  "sum_f64_into_f32"])
def test_reductions_into_out_accumulate_in_outs_dtype(name) -> None:
    """NumPy's add.reduce(x, out=o) adds in the promotion of x's dtype and o's (int64
    values into a float32 out add in float64; floats into an int64 out add as floats, then
    are cast); np.mean(x, out=o) stores the sum into o's dtype, then divides there (probe
    session 5: int64 values summed into a float32 out wrapped; a mean of int8 into int8 did
    not wrap its sum first)."""
    import warnings
    specs = {"mean_int8_into_int8": (np.mean, np.array([100, 100, -50], np.int8), (), np.int8),
             "mean_f16_into_f32": (np.mean, np.array([0.1, 0.2, 0.7], np.float16), (),
                                   np.float32),
             "sum_into_f32": (np.sum, np.full(3, 2 ** 62, np.int64), (), np.float32),
             "cumsum_into_f32": (np.cumsum, np.full(3, 2 ** 62, np.int64), (3,), np.float32),
             "prod_into_f64": (np.prod, np.array([3, 5, 7, 11] * 6, np.int32), (), np.float64),
             "sum_floats_into_int": (np.sum, np.array([0.6, 0.6, 0.7]), (), np.int64),
             "sum_f64_into_f32": (np.sum, np.array([1e8, 1.0, -1e8]), (), np.float32)}
    fn, x, shape, dt = specs[name]

    def f(x):
        o = np.zeros(shape, dt)
        fn(x, out=o)
        return o
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_matches_numpy(f, x, device="cpu")


@pytest.mark.parametrize("name", ["nan_to_num_in_place", "nanvar_no_dof", "full_like_bool_1j",
                                  "arange_uint64", "concat_real_dtype", "cumsum_real_dtype",
                                  "stack_complex_dtype"])
def test_numpy_semantics_corners_of_probe_session_5(name) -> None:
    """Silent differences the fifth probe session found: np.nan_to_num(copy=False) did not
    update its argument; nanvar with no degree of freedom left was inf (NumPy: NaN); a
    bool full_like of 1j was False; np.arange of a traced uint64 stop was int64 (float64);
    a real dtype= of complex operands kept them complex (np.stack with a complex dtype=
    recursed)."""
    import warnings
    z = np.array([1 + 2j, 3 - 1j, 0.5 + 0.5j], np.complex64)

    def in_place(x):
        np.nan_to_num(x, copy=False)
        return x.sum()
    specs = {
        "nan_to_num_in_place": (in_place, (np.array([1.0, np.nan, np.inf]),)),
        "nanvar_no_dof": (lambda a: (np.nanvar(a, axis=1, ddof=2), np.nanstd(a, ddof=5)),
                          (np.array([[-2.5, 0.5, 1.5], [1.0, np.nan, 2.0]]),)),
        "full_like_bool_1j": (lambda b: np.full_like(b, 1j), (np.array([True, False]),)),
        "arange_uint64": (lambda n: np.arange(n), (np.uint64(3),)),
        "concat_real_dtype": (lambda z: np.concatenate((z, z), dtype=np.float32,
                                                       casting="unsafe"), (z,)),
        "cumsum_real_dtype": (lambda z: np.cumsum(z, dtype=np.float32), (z,)),
        "stack_complex_dtype": (lambda z: np.stack((z, z), dtype=np.complex128), (z,)),
    }
    fn, args = specs[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_numpy(fn, *args, device="cpu")


def test_fmax_fmin_folds_of_integers_and_bools() -> None:
    """np.fmax / np.fmin .reduce, .reduceat and .accumulate of integers and bools are
    maximum / minimum (their fold started from NaN: a compile error for integers, True for
    every bool segment; probe session 5)."""
    a = np.array([[3, -1, 7], [2, 5, -4]], np.int32)
    b = np.array([False, True, True, False, True, False, False, True, False, True, True,
                  False])
    assert_matches_numpy(lambda a: (np.fmax.reduce(a, axis=0), np.fmin.reduce(a, axis=None),
                                    np.fmax.reduceat(a.ravel(), [0, 3]),
                                    np.fmin.accumulate(a, axis=1)), a, device="cpu")
    assert_matches_numpy(lambda b: (np.fmax.reduceat(b, [0, 5, 5, 11]), np.fmin.reduce(b)),
                         b, device="cpu")


def test_a_one_element_exponent_of_one_half_known_at_run_time_is_sqrt() -> None:
    """NumPy's float32/float64 power loops compute a scalar exponent of 0.5 with sqrt, also
    when it is a value the call passes (sqrt(-inf) is NaN and sqrt(-0.0) -0.0 where pow
    gives inf and 0.0; probe session 5)."""
    import warnings
    x = np.array([-np.inf, -0.0, 4.0, 2.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for e in (np.float64(0.5), np.float32(0.5), np.array(0.5), np.float64(1.5)):
            assert_matches_numpy(lambda x, e: (x ** e, np.power(x, e)), x, e, device="cpu")


@pytest.mark.parametrize("name", ["spacing", "fabs", "deg2rad", "rad2deg", "conjugate",
                                  "logaddexp", "heaviside"])
def test_ufuncs_computed_as_composites_take_dtype(name) -> None:
    """dtype= selects the loop (its inputs cast to it) for ufuncs tracearray computes as
    composites too: np.spacing(int8, dtype=np.float64) is float64's spacing, not float16's
    (probe session 5)."""
    uf = getattr(np, name)
    x = np.array([1, 2, 90], np.int8)
    if uf.nin == 1:
        assert_matches_numpy(lambda a: uf(a, dtype=np.float64), x, device="cpu")
        assert_matches_numpy(lambda a: uf(a, dtype=np.float32), x, device="cpu")
    else:
        assert_matches_numpy(lambda a: uf(a, a, dtype=np.float32), x, device="cpu")
