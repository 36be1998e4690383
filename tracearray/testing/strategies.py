"""Hypothesis strategies for arrays: shapes, dtypes, memory layouts and values.

Everything is written once against a small ``Source`` of choices, with two implementations:
``HypothesisSource`` (inside ``st.composite``: drawn by Hypothesis, so failures shrink) and
``RandomSource`` (a seeded ``random.Random``: what the soak script uses to draw thousands of
programs quickly and reproducibly, one seed per program).

- shapes: 0-d to 4-d, sides from ``SIDES`` -- empty (0), size 1, and odd sizes around the
  vector width (8/16 lanes) and the tile widths of ``tracearray.tile`` (16, 32, 64);
- layouts (``Layout``): C order, transposed (any axis order), negative strides (flipped
  axes), gaps (a step along an axis) and zero strides (broadcast axes), built by
  ``strided(values, ...)``, which a reproducer calls to rebuild the same view;
- values: NaN, +-inf, signed zeros, subnormals, the dtype's extremes, integer edge values, small
  integers (ties, exact zeros) and ordinary random values, restricted by a value class
  (``VALUE_CLASSES``, the op table's ``Domain.values`` plus "finite" and "extremes": mostly
  the dtype's edge values -- ``MIN, MIN+1, -1, 0, 1, MAX-1, MAX`` for integers, where NumPy's
  arithmetic wraps -- and few ordinary ones).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..ops import ALL_DTYPES

Shape = tuple[int, ...]

# Sides of drawn shapes: empty, size 1, small, and around vector/tile widths (8, 16, 32, 64).
SIDES = (0, 1, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65)
VALUE_CLASSES = ("any", "finite", "positive", "unit", "ge1", "small", "extremes")
MAX_DIMS = 4
# Default cap on the elements of one drawn array (keeps Hypothesis and NumPy fast).
MAX_SIZE = 4096


# ============================================================================================
# Sources of choices
# ============================================================================================

class Source(Protocol):
    """What the generators draw from."""

    def integer(self, lo: int, hi: int) -> int: ...              # lo <= n <= hi
    def choice(self, options: Sequence[Any]) -> Any: ...
    def boolean(self, p: float = 0.5) -> bool: ...
    def values(self, dtype: np.dtype, n: int, values: str) -> np.ndarray: ...   # 1-d


class HypothesisSource:
    """Choices drawn by Hypothesis (shrinkable)."""

    def __init__(self, draw: st.DrawFn):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))

    def boolean(self, p: float = 0.5) -> bool:
        # Hypothesis has no biased coin; an integer draw that shrinks towards False.
        return self.draw(st.integers(0, 999)) >= round(1000 * (1 - p))

    def values(self, dtype: np.dtype, n: int, values: str) -> np.ndarray:
        return self.draw(hnp.arrays(dtype, (n,), elements=elements(dtype, values)))


class RandomSource:
    """Choices drawn from a seeded ``random.Random`` (fast, reproducible, not shrinkable)."""

    def __init__(self, seed: int | str):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def boolean(self, p: float = 0.5) -> bool:
        return self.rng.random() < p

    def values(self, dtype: np.dtype, n: int, values: str) -> np.ndarray:
        return random_values(self.rng, dtype, n, values)


# ============================================================================================
# Values
# ============================================================================================

def _int_range(dtype: np.dtype, values: str) -> tuple[int, int]:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if values in ("positive", "ge1"):
        return 1, hi
    if values == "unit":
        return max(lo, -1), 1
    if values == "small":
        return max(lo, -7), 7
    return lo, hi   # "any", "finite", "extremes"


def special_values(dtype: Any, values: str = "any") -> np.ndarray:
    """The interesting values of ``dtype`` inside a value class: NaN, +-inf, signed zeros,
    subnormals, extremes and integer edge values."""
    dtype = np.dtype(dtype)
    if values not in VALUE_CLASSES:
        raise ValueError(f"unknown value class {values!r}; expected one of {VALUE_CLASSES}")
    if dtype.kind == "b":
        return np.array([True] if values in ("positive", "ge1") else [False, True])
    if dtype.kind in "iu":
        lo, hi = _int_range(dtype, values)
        cands = {lo, hi, lo + 1, hi - 1, 0, 1, -1}
        if values != "extremes":
            cands |= {2, -2, 7, -8, 127, 128, 255, 256, 2**31 - 1, -2**31, 2**32 - 1}
        return np.array(sorted(c for c in cands if lo <= c <= hi), dtype=dtype)
    info = np.finfo(dtype)
    tiny, sub = float(info.tiny), float(info.smallest_subnormal)
    big, eps = float(info.max), float(info.eps)
    nan, inf = math.nan, math.inf
    table = {
        "any": [nan, inf, -inf, 0.0, -0.0, big, -big, tiny, -tiny, sub, -sub, 1.0, -1.0,
                1.0 + eps, 0.5, -2.5, 65504.0],
        "finite": [0.0, -0.0, big, -big, tiny, -tiny, sub, 1.0, -1.0, 1.0 + eps, 0.5, -2.5],
        "positive": [sub, tiny, 0.5, 1.0, 1.0 + eps, 3.75, big, inf, nan],
        "ge1": [1.0, 1.0 + eps, 1.5, 10.0, big, inf, nan],
        "unit": [-1.0, -0.5, -0.0, 0.0, sub, 0.25, 0.5, 1.0, nan],
        "small": [-7.5, -3.0, -1.0, -0.5, -0.0, 0.0, sub, 0.5, 1.0, 2.0, 2.5, 7.0, nan],
        "extremes": [big, -big, tiny, -tiny, sub, -sub, inf, -inf, 0.0, -0.0, nan],
    }[values]
    with np.errstate(over="ignore"):
        return np.array(table, dtype=dtype)


def elements(dtype: Any, values: str = "any") -> st.SearchStrategy:
    """Hypothesis scalars of ``dtype`` in a value class: special values, small integers (ties
    and exact zeros) and any other value of the class."""
    dtype = np.dtype(dtype)
    specials = st.sampled_from(special_values(dtype, values).tolist())
    if dtype.kind == "b" or values == "extremes":
        return specials
    if dtype.kind in "iu":
        lo, hi = _int_range(dtype, values)
        return st.one_of(st.integers(max(lo, -4), min(hi, 4)), specials, st.integers(lo, hi))
    width = dtype.itemsize * 8
    kw: dict[str, Any] = dict(width=width, allow_nan=False)
    if values in ("any",):
        body = st.floats(width=width, allow_nan=True, allow_infinity=True)
    elif values == "finite":
        body = st.floats(allow_infinity=False, **kw)
    elif values == "positive":
        body = st.floats(min_value=0.0, exclude_min=True, allow_infinity=False, **kw)
    elif values == "ge1":
        body = st.floats(min_value=1.0, allow_infinity=False, **kw)
    elif values == "unit":
        body = st.floats(-1.0, 1.0, **kw)
    else:
        body = st.floats(-7.5, 7.5, **kw)
    small = st.integers(-4, 4).map(float)
    if values in ("positive", "ge1"):
        small = st.integers(1, 4).map(float)
    elif values == "unit":
        small = st.sampled_from([-1.0, 0.0, 1.0])
    return st.one_of(small, specials, body)


def random_values(rng: random.Random, dtype: Any, n: int, values: str = "any",
                  p_special: float = 0.08) -> np.ndarray:
    """``n`` values drawn from ``rng``: mostly small integers and ordinary values (so that
    programs compute something), with special values mixed in."""
    dtype = np.dtype(dtype)
    if n == 0:
        return np.zeros(0, dtype)
    specials = special_values(dtype, values)
    if dtype.kind == "b":
        return np.array([rng.random() < 0.5 for _ in range(n)], dtype=bool)
    np_rng = np.random.default_rng(rng.getrandbits(64))
    pick = np_rng.random(n)
    if values == "extremes":   # edge values, with a few ordinary ones among them
        p_special = 0.85
        values = "any"
    out: np.ndarray
    if dtype.kind in "iu":
        lo, hi = _int_range(dtype, values)
        small = np_rng.integers(max(lo, -4), min(hi, 4) + 1, n, endpoint=False)
        mid = np_rng.integers(max(lo, -1000), min(hi, 1000), n, endpoint=True)
        wide = np_rng.integers(lo, hi, n, endpoint=True, dtype=dtype)
        out = np.where(pick < 0.35, small, np.where(pick < 0.8, mid, 0)).astype(dtype)
        out = np.where((pick >= 0.8) & (pick < 1 - p_special), wide, out)
    else:
        if values in ("any", "finite"):
            scale = np.array([1.0, 10.0, 1000.0, 1e-3])[np_rng.integers(0, 4, n)]
            body = np_rng.standard_normal(n) * scale
            small = np_rng.integers(-4, 5, n).astype(np.float64)
        elif values == "positive":
            body = np.exp(np_rng.uniform(-6, 6, n))
            small = np_rng.integers(1, 5, n).astype(np.float64)
        elif values == "ge1":
            body = 1.0 + np.exp(np_rng.uniform(-6, 6, n))
            small = np_rng.integers(1, 5, n).astype(np.float64)
        elif values == "unit":
            body = np_rng.uniform(-1, 1, n)
            small = np_rng.integers(-1, 2, n).astype(np.float64)
        else:
            body = np_rng.uniform(-7.5, 7.5, n)
            small = np_rng.integers(-4, 5, n).astype(np.float64)
        with np.errstate(over="ignore"):
            out = np.where(pick < 0.3, small, body).astype(dtype)
    if len(specials):
        special = specials[np_rng.integers(0, len(specials), n)]
        out = np.where(pick >= 1 - p_special, special, out).astype(dtype)
    return out


# ============================================================================================
# Layouts
# ============================================================================================

@dataclass(frozen=True)
class Layout:
    """How an array's elements lie in memory, relative to C order.

    ``perm``: axes from outermost to innermost in memory (C order is ``range(ndim)``);
    ``flip``: axes walked with a negative stride; ``step``: per axis, the gap factor between
    consecutive elements (1 = dense); ``broadcast``: axes with stride 0 (values constant along
    them)."""
    perm: tuple[int, ...] = ()
    flip: tuple[int, ...] = ()
    step: tuple[int, ...] = ()
    broadcast: tuple[int, ...] = ()

    def is_c(self) -> bool:
        return (list(self.perm) in ([], sorted(self.perm)) and not self.flip and not
                self.broadcast and all(s == 1 for s in self.step))

    def describe(self) -> str:
        if self.is_c():
            return "C"
        parts = []
        if self.perm and list(self.perm) != sorted(self.perm):
            parts.append(f"perm={self.perm}")
        if self.flip:
            parts.append(f"flip={self.flip}")
        if any(s != 1 for s in self.step):
            parts.append(f"step={self.step}")
        if self.broadcast:
            parts.append(f"broadcast={self.broadcast}")
        return ", ".join(parts)


def strided(values: Any, perm: Sequence[int] | None = None, flip: Sequence[int] = (),
            step: Sequence[int] | None = None, broadcast: Sequence[int] = ()) -> np.ndarray:
    """An array equal to ``values`` laid out in memory as ``Layout(perm, flip, step,
    broadcast)`` says: a view into a larger buffer, with transposed, negative, gapped or zero
    strides. ``values`` must be constant along the ``broadcast`` axes."""
    a = np.asarray(values)
    nd = a.ndim
    if nd == 0:
        return a.copy()
    perm = tuple(range(nd)) if not perm else tuple(perm)
    step = (1,) * nd if not step else tuple(step)
    if sorted(perm) != list(range(nd)) or len(step) != nd:
        raise ValueError(f"layout does not fit a {nd}-d array: perm={perm}, step={step}")
    bcast = tuple(d for d in broadcast if a.shape[d] > 1)
    core = a[tuple(slice(0, 1) if d in bcast else slice(None) for d in range(nd))]
    if bcast and not np.array_equal(np.broadcast_to(core, a.shape), a,
                                    equal_nan=a.dtype.kind in "fc"):
        raise ValueError("values are not constant along the broadcast axes")
    flips = tuple(slice(None, None, -1) if d in flip else slice(None) for d in range(nd))
    mem = core[flips].transpose(perm)                      # memory order, flipped
    steps = tuple(slice(None, None, step[d]) for d in perm)
    base = np.zeros(tuple(n * step[d] for n, d in zip(mem.shape, perm)), dtype=a.dtype)
    base[steps] = mem
    view = base[steps].transpose(np.argsort(perm))[flips]
    return np.broadcast_to(view, a.shape) if bcast else view


def layout_of(a: np.ndarray) -> Layout | None:
    """The ``Layout`` of an array (``strided(a.copy(), **layout)`` has its strides), or None
    when its strides are not of that form."""
    nd = a.ndim
    if a.size == 0 or a.flags.c_contiguous:
        return Layout()
    bcast = tuple(d for d in range(nd) if a.strides[d] == 0 and a.shape[d] > 1)
    flip = tuple(d for d in range(nd) if a.strides[d] < 0 and a.shape[d] > 1)
    perm = tuple(sorted(range(nd), key=lambda d: (-abs(a.strides[d]) if a.shape[d] > 1 and
                                                  d not in bcast else 0, d)))
    # size-1 and broadcast axes sort innermost (their stride does not matter)
    step = [1] * nd
    expected = a.itemsize
    for d in reversed(perm):
        if a.shape[d] <= 1 or d in bcast:
            continue
        s = abs(a.strides[d])
        if s % expected:
            return None
        step[d] = s // expected
        expected = s * a.shape[d]
    return Layout(perm, flip, tuple(step), bcast)


LAYOUT_KINDS = ("C", "transposed", "negative", "gapped", "broadcast", "mixed")


def draw_layout(src: Source, shape: Shape, kind: str | None = None) -> Layout:
    """A layout for ``shape`` of one of ``LAYOUT_KINDS`` (drawn when ``kind`` is None)."""
    nd = len(shape)
    if kind is None:
        kind = src.choice(LAYOUT_KINDS) if nd else "C"
    if kind not in LAYOUT_KINDS:
        raise ValueError(f"unknown layout {kind!r}; expected one of {LAYOUT_KINDS}")
    perm, flip, step, bcast = list(range(nd)), [], [1] * nd, []
    if kind in ("transposed", "mixed") and nd >= 2:
        perm = list(reversed(perm)) if src.boolean() else \
            sorted(range(nd), key=lambda d: src.integer(0, 99))
    if kind in ("negative", "mixed") and nd:
        flip = [d for d in range(nd) if src.boolean()] or [nd - 1]
    if kind in ("gapped", "mixed") and nd:
        step = [src.choice((1, 2, 3)) for _ in range(nd)]
        if all(s == 1 for s in step):
            step[-1] = 2
    if kind == "broadcast" and nd:
        bcast = [d for d in range(nd) if shape[d] > 1 and src.boolean()]
    return Layout(tuple(perm), tuple(flip), tuple(step), tuple(bcast))


def apply_layout(values: np.ndarray, layout: Layout) -> np.ndarray:
    """``values`` (made constant along broadcast axes first) laid out as ``layout``."""
    v = values
    for d in layout.broadcast:
        v = np.broadcast_to(np.take(v, [0], axis=d) if v.shape[d] else v, v.shape)
    return strided(np.array(v), layout.perm, layout.flip, layout.step, layout.broadcast)


# ============================================================================================
# Shapes and dtypes
# ============================================================================================

# How often each rank is drawn (0-d arrays are legal but exercise little of a kernel).
RANK_WEIGHTS = {0: 1, 1: 3, 2: 4, 3: 3, 4: 2}


def draw_shape(src: Source, min_dims: int = 0, max_dims: int = MAX_DIMS,
               sides: Sequence[int] = SIDES, max_size: int = MAX_SIZE) -> Shape:
    ranks = [r for r in range(min_dims, max_dims + 1) for _ in range(RANK_WEIGHTS.get(r, 1))]
    nd = src.choice(ranks)
    shape: list[int] = []
    for _ in range(nd):
        room = max_size // max(1, math.prod(shape))
        side = src.choice(sides)
        if side == 0 and nd > 1 and src.boolean(0.6):
            side = src.choice(sides)   # empty arrays: drawn, but not in every other program
        shape.append(side if side <= room else src.choice([s for s in sides if s <= room] or [1]))
    return tuple(shape)


def draw_broadcastable(src: Source, n: int, base: Shape) -> list[Shape]:
    """``n`` shapes that broadcast together to (a suffix-compatible subset of) ``base``:
    leading axes dropped and axes set to 1 at random."""
    out = []
    for _ in range(n):
        lead = src.integer(0, len(base)) if src.boolean(0.3) else 0
        out.append(tuple(1 if src.boolean(0.25) else s for s in base[lead:]))
    return out


def draw_array(src: Source, dtype: Any, shape: Shape, values: str = "any",
               layout: Layout | str | None = "C") -> np.ndarray:
    dtype = np.dtype(dtype)
    flat = src.values(dtype, math.prod(shape), values)
    arr = flat.reshape(shape)
    if isinstance(layout, str) or layout is None:
        layout = draw_layout(src, shape, layout) if layout != "C" else Layout()
    return arr if layout.is_c() else apply_layout(arr, layout)


# ============================================================================================
# Public Hypothesis strategies
# ============================================================================================

def dtypes(kinds: str = "biuf") -> st.SearchStrategy[np.dtype]:
    """The dtypes tracearray supports whose ``dtype.kind`` is in ``kinds``."""
    return st.sampled_from([d for d in ALL_DTYPES if d.kind in kinds])


def shapes(min_dims: int = 0, max_dims: int = MAX_DIMS, sides: Sequence[int] = SIDES,
           max_size: int = MAX_SIZE) -> st.SearchStrategy[Shape]:
    """Shapes whose sides come from ``sides`` (empty, size 1, odd sizes around vector and
    tile widths), at most ``max_size`` elements."""
    return st.composite(lambda draw: draw_shape(HypothesisSource(draw), min_dims, max_dims,
                                                sides, max_size))()


def broadcastable_shapes(n: int, min_dims: int = 0, max_dims: int = MAX_DIMS,
                         sides: Sequence[int] = SIDES, max_size: int = MAX_SIZE
                         ) -> st.SearchStrategy[tuple[Shape, ...]]:
    """``n`` shapes that broadcast together (dropped leading axes, size-1 axes)."""
    @st.composite
    def group(draw: st.DrawFn) -> tuple[Shape, ...]:
        src = HypothesisSource(draw)
        return tuple(draw_broadcastable(src, n, draw_shape(src, min_dims, max_dims, sides,
                                                           max_size)))
    return group()


def layouts(shape: Shape, kind: str | None = None) -> st.SearchStrategy[Layout]:
    """Memory layouts (``Layout``: axis order, flipped axes, steps, broadcast axes) for arrays
    of ``shape``: of one of ``LAYOUT_KINDS`` (``C``, ``transposed``, ``negative``, ``gapped``,
    ``broadcast``, ``mixed``), drawn when ``kind`` is None; ``strided(values, perm=, flip=,
    step=, broadcast=)`` lays an array out with those fields."""
    return st.composite(lambda draw: draw_layout(HypothesisSource(draw), shape, kind))()


def arrays(dtype: Any = None, shape: Any = None, *, values: str = "any",
           layout: str | None = None, max_size: int = MAX_SIZE) -> st.SearchStrategy[np.ndarray]:
    """Arrays for testing compiled functions.

    ``dtype``: a dtype, a strategy of dtypes, or None (any supported dtype). ``shape``: a
    shape, a strategy of shapes, or None (``shapes()``). ``values``: a value class of
    ``VALUE_CLASSES`` ("any" includes NaN, +-inf, signed zeros, subnormals, extremes).
    ``layout``: one of ``LAYOUT_KINDS`` (C, transposed, negative strides, gapped, broadcast,
    mixed) or None to draw any."""
    if values not in VALUE_CLASSES:
        raise ValueError(f"unknown value class {values!r}; expected one of {VALUE_CLASSES}")

    @st.composite
    def strategy(draw: st.DrawFn) -> np.ndarray:
        src = HypothesisSource(draw)
        dt = draw(dtype) if isinstance(dtype, st.SearchStrategy) else (
            np.dtype(dtype) if dtype is not None else draw(dtypes()))
        shp = draw(shape) if isinstance(shape, st.SearchStrategy) else (
            tuple(shape) if shape is not None else draw_shape(src, max_size=max_size))
        return draw_array(src, dt, shp, values, layout)
    return strategy()


def array_groups(n: int, dtype: Any = None, *, values: str = "any", layout: str | None = None,
                 max_dims: int = MAX_DIMS, max_size: int = MAX_SIZE
                 ) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    """``n`` arrays with broadcast-compatible shapes (one dtype each, drawn independently when
    ``dtype`` is None)."""
    @st.composite
    def strategy(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
        src = HypothesisSource(draw)
        group = draw_broadcastable(src, n, draw_shape(src, 0, max_dims, max_size=max_size))
        out = []
        for shp in group:
            dt = draw(dtype) if isinstance(dtype, st.SearchStrategy) else (
                np.dtype(dtype) if dtype is not None else draw(dtypes()))
            out.append(draw_array(src, dt, shp, values, layout))
        return tuple(out)
    return strategy()
