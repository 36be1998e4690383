"""Shared Hypothesis strategies for tracearray's tests.

Shapes include 0- and 1-sized axes; dtypes come from an op's ``OpSpec.domain``; values follow
the domain's value class and include NaN, infinities, signed zeros, subnormals and integer
extremes wherever the class allows them. (A public ``tracearray.testing`` package will grow out
of this module; keep it free of test-only imports.)
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tracearray.testing.strategies import _int_range   # the value ranges users' strategies use
from tracearray.ops import ALL_DTYPES, OPS

Shape = tuple[int, ...]

MAX_DIMS = 4
MAX_SIDE = 5

VALUE_CLASSES = ("any", "positive", "unit", "ge1", "small")


# --------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------

def shapes(min_dims: int = 0, max_dims: int = MAX_DIMS, min_side: int = 0,
           max_side: int = MAX_SIDE) -> st.SearchStrategy[Shape]:
    """Array shapes, 0-d to ``max_dims``-d, with sides from ``min_side`` (0 by default)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def broadcast_shapes(n: int, min_dims: int = 0, max_dims: int = MAX_DIMS,
                     min_side: int = 0, max_side: int = MAX_SIDE
                     ) -> st.SearchStrategy[tuple[Shape, ...]]:
    """``n`` mutually broadcast-compatible shapes (size-1 axes, missing leading axes and
    0-sized axes included)."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=n, min_dims=min_dims, max_dims=max_dims, min_side=min_side,
        max_side=max_side).map(lambda b: tuple(b.input_shapes))


@st.composite
def broadcast_to_pair(draw: st.DrawFn, max_dims: int = MAX_DIMS) -> tuple[Shape, Shape]:
    """(source shape, target shape) such that ``np.broadcast_to(source, target)`` works."""
    target = draw(shapes(max_dims=max_dims))
    n_lead = draw(st.integers(0, len(target)))
    src = tuple(1 if draw(st.booleans()) else s for s in target[n_lead:])
    return src, target


@st.composite
def reshape_target(draw: st.DrawFn, shape: Shape) -> tuple[int, ...]:
    """A shape with the same number of elements as ``shape`` (possibly with one -1)."""
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        # Any shape containing a zero works; -1 is ambiguous with a zero elsewhere.
        out = list(draw(shapes(min_dims=1, max_dims=3)))
        out[draw(st.integers(0, len(out) - 1))] = 0
        return tuple(out)
    # Split the size into factors, then optionally insert ones and replace one dim by -1.
    factors: list[int] = []
    rest = size
    while rest > 1:
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        d = draw(st.sampled_from(divisors))
        factors.append(d)
        rest //= d
    n_ones = draw(st.integers(0, 2))
    for _ in range(n_ones):
        factors.insert(draw(st.integers(0, len(factors))), 1)
    if factors and draw(st.booleans()):
        factors[draw(st.integers(0, len(factors) - 1))] = -1
    return tuple(factors)


@st.composite
def axis_args(draw: st.DrawFn, ndim: int, allow_none: bool = True,
              allow_tuple: bool = True) -> int | tuple[int, ...] | None:
    """An ``axis=`` argument for an ``ndim``-d array: None, an int (possibly negative) or a
    tuple of distinct axes."""
    choices = []
    if allow_none:
        choices.append(st.none())
    if ndim > 0:
        choices.append(st.integers(-ndim, ndim - 1))
        if allow_tuple:
            choices.append(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)
                           .flatmap(lambda axes: st.permutations(axes))
                           .flatmap(lambda axes: st.tuples(*[st.sampled_from([a, a - ndim])
                                                             for a in axes])))
    return draw(st.one_of(*choices)) if choices else None


def keepdims() -> st.SearchStrategy[bool]:
    return st.booleans()


@st.composite
def basic_index(draw: st.DrawFn, shape: Shape) -> tuple:
    """A basic-indexing key for ``shape``: ints (negative too), slices with any step
    (negative included, bounds possibly out of range), None and at most one Ellipsis."""
    key: list = []
    ndim = len(shape)
    n_real = draw(st.integers(0, ndim))
    for dim in range(n_real):
        size = shape[dim]
        choices = [st.builds(slice, st.none() | st.integers(-size - 2, size + 2),
                             st.none() | st.integers(-size - 2, size + 2),
                             st.none() | st.integers(-3, 3).filter(bool))]
        if size > 0:
            choices.append(st.integers(-size, size - 1))
        key.append(draw(st.one_of(*choices)))
    for _ in range(draw(st.integers(0, 2))):
        key.insert(draw(st.integers(0, len(key))), None)
    if n_real < ndim or draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), Ellipsis)
    return tuple(key)


# --------------------------------------------------------------------------------------------
# Dtypes
# --------------------------------------------------------------------------------------------

def domain_dtypes(op: str) -> tuple[np.dtype, ...]:
    """The dtypes an op's table entry accepts."""
    return OPS[op].domain.dtypes


def operand_dtypes(op: str, dtype: np.dtype) -> tuple[np.dtype, ...]:
    """The dtype of each operand of ``op`` for one of its domain dtypes (they differ for
    ``ldexp(float, int)``)."""
    spec = OPS[op]
    return spec.domain.operand_dtypes(dtype, spec.arity)


def dtypes_for(op: str) -> st.SearchStrategy[np.dtype]:
    return st.sampled_from(domain_dtypes(op))


def any_dtype() -> st.SearchStrategy[np.dtype]:
    return st.sampled_from(ALL_DTYPES)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------

def elements(dtype: np.dtype, values: str = "any") -> st.SearchStrategy:
    """Scalars of ``dtype`` from value class ``values`` (see ``ops.Domain``).

    Floats: "any" allows NaN, +-inf, -0.0, subnormals and the extremes; "positive" and "ge1"
    allow +inf and NaN; "unit" and "small" are finite ranges plus NaN (NaN is in every float
    domain: it must propagate). Integers: the full range for "any", so wrap-around and
    INT_MIN // -1 are exercised."""
    dtype = np.dtype(dtype)
    if values not in VALUE_CLASSES:
        raise ValueError(f"unknown value class {values!r}")
    if dtype.kind == "b":
        return st.just(True) if values in ("positive", "ge1") else st.booleans()
    if dtype.kind in "iu":
        lo, hi = _int_range(dtype, values)
        return st.integers(lo, hi)
    width = dtype.itemsize * 8
    nan = st.just(float("nan"))
    if values == "any":
        return st.floats(width=width, allow_nan=True, allow_infinity=True,
                         allow_subnormal=True)
    if values == "positive":
        body = st.floats(min_value=0.0, exclude_min=True, width=width, allow_infinity=True,
                         allow_nan=False, allow_subnormal=True)
    elif values == "ge1":
        body = st.floats(min_value=1.0, width=width, allow_infinity=True, allow_nan=False)
    elif values == "unit":
        body = st.floats(-1.0, 1.0, width=width, allow_nan=False, allow_subnormal=True)
    else:  # small
        body = st.floats(-7.5, 7.5, width=width, allow_nan=False, allow_subnormal=True)
    return st.one_of(body, nan)


def arrays(dtype: np.dtype, shape: Shape | st.SearchStrategy[Shape],
           values: str = "any") -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` and ``shape`` with elements from value class ``values``."""
    dtype = np.dtype(dtype)
    return hnp.arrays(dtype, shape, elements=elements(dtype, values))


def special_values(dtype: np.dtype, values: str = "any") -> np.ndarray:
    """A fixed 1-d array of the interesting values of ``dtype`` inside value class ``values``:
    extremes, zeros of both signs, NaN, infinities, subnormals, small integers. Used where a
    test must cover every dtype deterministically without drawing."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.array([True] if values in ("positive", "ge1") else [False, True])
    if dtype.kind in "iu":
        lo, hi = _int_range(dtype, values)
        cands = [lo, hi, 0, 1, -1, 2, -2, 3, 5, -7, 7, lo + 1, hi - 1]
        return np.array(sorted({c for c in cands if lo <= c <= hi}), dtype=dtype)
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    cands = {
        "any": [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, float(info.max), float(info.min),
                tiny, -tiny, float(info.tiny), np.inf, -np.inf, np.nan, 7.25, -6.75, 100.0],
        "positive": [tiny, float(info.tiny), 0.5, 1.0, 2.0, 3.75, float(info.max), np.inf,
                     np.nan],
        "ge1": [1.0, 1.5, 2.0, 10.0, float(info.max), np.inf, np.nan],
        "unit": [-1.0, -0.5, -0.0, 0.0, tiny, 0.25, 0.5, 1.0, np.nan],
        "small": [-7.5, -3.0, -1.0, -0.5, -0.0, 0.0, tiny, 0.5, 1.0, 2.0, 2.5, 7.0, np.nan],
    }[values]
    return np.array(cands, dtype=dtype)


def cross_values(*columns: np.ndarray) -> list[np.ndarray]:
    """Every combination of the given 1-d value arrays, as equally long 1-d arrays (so a
    binary op sees each pair of special values once)."""
    grids = np.meshgrid(*columns, indexing="ij")
    return [g.ravel() for g in grids]


def python_scalars() -> st.SearchStrategy:
    """Python bool/int/float scalars (weak under NEP 50), including values out of range of
    small integer dtypes (300, -1, 2**63) and non-finite floats."""
    return st.one_of(
        st.booleans(),
        st.sampled_from([0, 1, -1, 2, 3, 7, -8, 127, 128, 255, 256, 300, -129, 2**31,
                         2**63 - 1, -2**63]),
        st.integers(-1000, 1000),
        st.sampled_from([0.0, -0.0, 0.5, 2.0, -1.5, 1e300, float("inf"), float("-inf"),
                         float("nan")]),
        st.floats(-1e6, 1e6, allow_nan=False),
    )

