"""Differential tests of the CPU backend against NumPy, generated from the op table.

Every op of ``tracearray.trace.ops.OPS`` is compiled (trace -> plan -> tile -> LLVM -> JIT ->
thread pool) and run on random and special inputs, and the result is compared with NumPy's:
same type, shape and dtype, and values equal under the family of ``numpy_compare`` (bit-exact,
ulps for transcendentals, a summation bound for float reductions). The tolerance table lives
in ``tests/numpy_compare.py``.

Deliberate divergences (``tracearray.codegen.scalar.DIVERGENCES``) are avoided explicitly where
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

import strategies as S
import tracearray
from numpy_compare import assert_matches, assert_tree_matches
from tracearray.codegen import scalar
from tracearray.trace.ops import ALL_DTYPES, FLOAT_DTYPES, OPS, Kind

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


LAYOUTS = ("C", "F", "reversed", "strided", "permuted")


def relayout(a: np.ndarray, layout: str, seed: int = 0) -> np.ndarray:
    """The same values in another memory layout (a view with other strides)."""
    a = np.asarray(a)
    if a.ndim == 0 or layout == "C":
        return np.ascontiguousarray(a)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "reversed":   # negative strides on every axis
        return np.flip(np.flip(a).copy())
    if layout == "strided":    # every other element of a larger buffer, at an offset
        big = np.zeros(tuple(2 * s + 1 for s in a.shape), dtype=a.dtype)
        view = big[tuple(slice(1, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    perm = np.random.default_rng(seed).permutation(a.ndim)   # "permuted": transposed storage
    return np.ascontiguousarray(a.transpose(perm)).transpose(np.argsort(perm))


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
        lo, hi = S._int_bounds(dtype, values)
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
            out = (out * np.exp2(rng.integers(-20, 20, n))).astype(dtype)
    if specials and n:
        sp = S.special_values(dtype, values)
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
# Divergences: inputs we deliberately avoid (each names its entry in scalar.DIVERGENCES)
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
    return "transcendental" if op in scalar.MATH_FUNCTIONS and dtype.kind == "f" else "exact"


# ============================================================================================
# Meta-test: every op of the table has a differential test here.
# ============================================================================================

UFUNC_OPS = sorted(n for n, s in OPS.items() if s.kind is Kind.ELEMENTWISE and s.ufunc is not None)
UNARY_UFUNCS = [n for n in UFUNC_OPS if OPS[n].arity == 1]
BINARY_UFUNCS = [n for n in UFUNC_OPS if OPS[n].arity == 2]

TESTED_BY = {
    "input": "test_ufunc_special_values", "constant": "test_ufunc_weak_python_scalar",
    "size": "test_reductions", "where": "test_where_every_dtype_pair",
    "cast": "test_astype_every_dtype_pair",
    **{r: "test_reductions" for r in ("sum", "prod", "max", "min", "any", "all", "argmax",
                                      "argmin")},
    **{m: "test_movement" for m in ("reshape", "transpose", "slice", "broadcast_to", "squeeze",
                                    "expand_dims")},
    "cumsum": "test_scans", "cumprod": "test_scans", "matmul": "test_matmul",
    "concatenate": "test_concatenate",
}


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


@pytest.mark.parametrize("name", UFUNC_OPS)
def test_ufunc_special_values(name: str) -> None:
    """Every dtype of the op's domain, every combination of its special values (a 1-d array
    of 9..324 elements: vector bodies and scalar tails), contiguous and reversed."""
    spec = OPS[name]
    for dt in spec.domain.dtypes:
        vals = S.special_values(dt, spec.domain.values)
        cols = S.cross_values(*([vals] * spec.arity))
        keep = avoid_divergences(name, cols)
        cols = [c[keep] for c in cols]
        check_elementwise(name, cols)
        check_elementwise(name, [relayout(c, "reversed") for c in cols])


@pytest.mark.parametrize("name", UFUNC_OPS)
@settings(max_examples=8)
@given(data=st.data())
def test_ufunc_random(name: str, data: st.DataObject) -> None:
    """Random broadcast shapes, values of the op's domain with specials mixed in, and every
    layout per operand."""
    spec = OPS[name]
    dt = data.draw(st.sampled_from(spec.domain.dtypes), label="dtype")
    shps = data.draw(st.sampled_from([1, 2, 3]).flatmap(
        lambda nd: S.broadcast_shapes(spec.arity, max_dims=nd, max_side=9)), label="shapes")
    args = [data.draw(arrays(dt, s, spec.domain.values), label=f"x{i}")
            for i, s in enumerate(shps)]
    full = np.broadcast_arrays(*args)
    keep = avoid_divergences(name, [np.ascontiguousarray(a) for a in full])
    if not keep.all():   # replace divergent elements by a harmless value of the domain
        safe = S.special_values(dt, spec.domain.values)
        safe = safe[avoid_divergences(name, [safe] * spec.arity) &
                    (~np.isnan(safe) if dt.kind == "f" else True)][-1]
        args = [np.where(keep if a.shape == keep.shape else False, a, safe)
                if a.shape == keep.shape else a for a in args]
        full = np.broadcast_arrays(*args)
        if not avoid_divergences(name, [np.ascontiguousarray(a) for a in full]).all():
            args = [np.full(a.shape, safe, dt) for a in args]
    check_elementwise(name, args)


MIXED_PAIRS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES if a != b]


@pytest.mark.parametrize("name", BINARY_UFUNCS)
@settings(max_examples=4)
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
@settings(max_examples=6)
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
    try:
        loop = uf.resolve_dtypes((dt, type(s), None) if not left else (type(s), dt, None))
        cx = np.asarray(x).astype(loop[1 if left else 0])
        cs = np.full(cx.shape, s).astype(loop[0 if left else 1]) \
            if not (isinstance(s, int) and not isinstance(s, bool) and cx.dtype.kind in "iu"
                    and not np.can_cast(np.min_scalar_type(s), cx.dtype)) else None
    except Exception:   # noqa: BLE001 - NumPy raises (e.g. 300 for uint8): we must too
        cs = None
    if cs is not None:
        cols = [cs, cx] if left else [cx, cs]
        if not avoid_divergences(name, cols).all():
            return   # a divergent constant (e.g. x ** -1 on ints): nothing left to compare
    got, want = run_both(f, fn, x, s)
    if want is not None:
        assert_matches(got, want, family(name, np.asarray(want).dtype), inputs=(x, s))


# ============================================================================================
# where, clip and astype over every dtype pair
# ============================================================================================

def _pair_values(dt: np.dtype) -> np.ndarray:
    return S.special_values(dt, "any")


@pytest.mark.parametrize("x_dt", [str(d) for d in ALL_DTYPES])
def test_where_every_dtype_pair(x_dt: str) -> None:
    f = compiled("where", lambda: lambda c, x, y: np.where(c, x, y))
    for y_dt in ALL_DTYPES:
        xv, yv = _pair_values(np.dtype(x_dt)), _pair_values(y_dt)
        n = max(len(xv), len(yv)) * 3 + 1   # past a vector width, with a tail
        x, y = np.resize(xv, n), np.resize(yv[::-1], n)
        c = (np.arange(n) % 3) == 1
        got, want = run_both(f, np.where, c, x, y)
        assert_matches(got, want)
        # a where-chain with a broadcast condition and a column of the other operand
        got, want = run_both(f, np.where, c[:, None][:5], x[:7][None, :],
                             relayout(np.resize(y, (5, 7)), "F"))
        assert_matches(got, want)


@pytest.mark.parametrize("x_dt", [str(d) for d in ALL_DTYPES])
def test_clip_every_dtype_pair(x_dt: str) -> None:
    """np.clip(x, lo, hi) with array bounds of every dtype (NumPy's promotion; a NaN bound
    propagates; lo > hi gives hi)."""
    f = compiled("clip", lambda: lambda x, lo, hi: np.clip(x, lo, hi))
    x_dt = np.dtype(x_dt)
    x = np.resize(_pair_values(x_dt), 61)
    for b_dt in ALL_DTYPES:
        bv = _pair_values(b_dt)
        lo = np.resize(np.sort(bv), 61)
        hi = np.resize(np.sort(bv)[::-1], 61)
        got, want = run_both(f, np.clip, x, lo, hi)
        if want is not None:
            assert_matches(got, want)


@pytest.mark.parametrize("src", [str(d) for d in ALL_DTYPES])
def test_astype_every_dtype_pair(src: str) -> None:
    f = compiled("astype", lambda: lambda x, dt: x.astype(dt), static_argnums=1)
    src_dt = np.dtype(src)
    vals = np.resize(S.special_values(src_dt, "any"), 41)
    for dst in ALL_DTYPES:
        x = vals
        if src_dt.kind == "f" and dst.kind in INT_KINDS:
            x = x[float_to_int_ok(x, dst)]   # DIVERGENCE 'float -> integer casts of NaN ...'
        for layout in ("C", "reversed"):
            got, want = run_both(f, lambda a, d: a.astype(d), relayout(x, layout), dst)
            assert_matches(got, want, inputs=(x, dst))


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
    if want is None:
        return
    wd = np.asarray(want).dtype
    if wd.kind != "f" or name in EXACT_REDUCTIONS or (name == "norm" and ord in (
            np.inf, -np.inf, 0)) or x.size == 0 or x.dtype.kind in "biu" and name != "norm" \
            and name not in ("var", "std", "mean"):
        assert_matches(got, want, "exact", inputs=x)
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
    assert_matches(got, want, "reduction", scale=scale, n=n, inputs=x)


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
@settings(max_examples=16)
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
    check_reduction(name, x, axis, keepdims, ddof, dtype, ord)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_every_dtype(name: str) -> None:
    """Every input dtype on a fixed (5, 37) array holding the dtype's special values, over
    axis None, 0 and -1 (and a Fortran-ordered copy)."""
    for dt in ALL_DTYPES:
        if name == "norm" and dt == BOOL:
            continue   # np.linalg.norm of bool arrays raises in NumPy: tested below
        vals = S.special_values(dt, "any")
        if name not in EXACT_REDUCTIONS and dt.kind == "f":
            vals = vals[np.isfinite(vals) & (np.abs(vals) < 1e4)]   # overflow is order-dependent
            vals = np.concatenate([vals, [np.nan] if name in ("sum", "max") else []]).astype(dt)
        x = np.resize(vals, (5, 37))
        if name == "prod" and dt.kind == "f":
            x = np.where(np.abs(x) > 2, np.sign(x), x).astype(dt)
        for axis in (None, 0, -1):
            check_reduction(name, x, axis, False)
        check_reduction(name, relayout(x, "F"), -1, True)


def test_norm_of_bool_raises_like_numpy() -> None:
    x = np.ones((3, 4), bool)
    fn = reduction_program("norm", None, False)
    f = compiled(("reduce", "norm", None, False, 0, "None", None), lambda: fn)
    got, want = run_both(f, fn, x)
    if want is not None:
        assert_matches(got, want, "reduction", scale=np.abs(want), n=12)


@pytest.mark.parametrize("name", ["sum", "prod", "any", "all", "mean", "var", "max", "argmax"])
def test_reductions_of_empty_arrays(name: str) -> None:
    """Empty reductions give the identity (sum 0, prod 1, any False, all True), NaN (mean,
    var), or raise ValueError like NumPy (max, argmax)."""
    for shp, axis in (((0,), None), ((0, 3), 0), ((3, 0), 1), ((3, 0), None), ((2, 0, 3), (0, 1))):
        if name == "argmax" and isinstance(axis, tuple):
            continue
        for dt in (np.dtype(np.float32), np.dtype(np.int16), BOOL):
            check_reduction(name, np.zeros(shp, dt), axis, False)


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
@settings(max_examples=14)
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
        assert_matches(got, want, inputs=x)
        assert isinstance(got, np.ndarray) and not np.shares_memory(got, x)

    def consumer(v: Any) -> Any:
        w = view(v)
        return w * 3 + 1 if dt != BOOL else ~w
    g = compiled(("move+", kind, repr(desc)), lambda: consumer)
    got, want = run_both(g, consumer, x)
    if want is not None:
        assert_matches(got, want, inputs=x)


@settings(max_examples=12)
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
    assert_tree_matches(got[:3], want[:3])
    scale = np.sum(np.abs(x.astype(np.float64) + 1))
    assert_matches(got[3], want[3], "reduction", scale=scale, n=x.size + 1)


# ============================================================================================
# Scans, concatenation, matmul
# ============================================================================================

@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@settings(max_examples=20)
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
    if want is not None:
        assert_matches(got, want, inputs=x)


@settings(max_examples=25)
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
