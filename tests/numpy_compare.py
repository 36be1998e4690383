"""Comparing compiled results with NumPy: the tolerance table of the CPU differential tests.

Used by ``test_cpu_ops.py`` and ``test_cpu_fusion.py``. A compiled result must have NumPy's
type (a NumPy scalar where NumPy returns one), shape and dtype, NaN at exactly the same
positions, and values that are

- bit-exact (signed zeros included) for integers, bools and every float op NumPy computes
  exactly: + - * /, sqrt, comparisons, min/max, rounding, casts, movement ops, scans, integer
  reductions, max/min/argmax/argmin ("exact");
- within ``ULPS[dtype]`` units in the last place for transcendental elementwise ops
  ("transcendental"): we call glibc's libm/libmvec, NumPy uses its own SIMD implementations
  (tracearray/ops/divergences.py); both are accurate to a few ulp, so they differ by a few;
- within a rigorous summation bound for float reductions ("reduction"): NumPy sums pairwise,
  we sum with several vector partial sums (and, for full reductions, per-slot partials
  combined in slot order), so the rounding differs. Any order of summing n terms is within
  ``(n - 1) * eps * sum(|x|)`` of the exact sum, so two orders are within twice that; we allow
  ``REDUCTION_SLACK * n * eps * scale`` where the caller passes ``scale`` = the same reduction
  of ``|x|`` (float16: eps of float16, as NumPy adds a strided axis in float16; plus one
  float16 ulp for the final rounding of our float32 accumulator);
- within ``FUSED[dtype]`` (rtol, atol) for composite programs (softmax, layernorm, var, ...)
  whose intermediate values are O(1) ("fused"): sums and transcendentals both differ.

NaN payloads and NaN signs are never compared (DIVERGENCES: NumPy itself differs between its
SIMD body and its scalar tail).
"""
from __future__ import annotations

from typing import Any

import numpy as np

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)

# ---------------------------------------------------------------------------------------------
# THE TOLERANCE TABLE (one place; see the module docstring for why each entry is what it is).
# ---------------------------------------------------------------------------------------------
# "transcendental": max distance in ulps. float16 ops are computed in float32 and rounded once
# by both NumPy and us, so they differ only when the float32 results straddle a float16
# rounding boundary: 1 ulp. float32/float64: glibc vs NumPy's SIMD code, measured <= 3 ulp.
ULPS = {F16: 1, F32: 4, F64: 4}
# "reduction": multiple of n * eps * scale (see above); 2 covers two different orders.
REDUCTION_SLACK = 2.0
# "fused": (rtol, atol) for composites of reductions and transcendentals on O(1) data. The
# atol (~100 eps) covers results near 0 that come out of sums of O(1) terms (a column mean of
# 1025 N(0, 4) values is ~0.06 and is off by ~1e-6 in float32 in either summation order).
FUSED = {F16: (2e-2, 2e-2), F32: (2e-5, 1e-5), F64: (1e-12, 1e-13)}
# "matmul": BLAS is called by both; the runtime may see a differently laid out copy, so the
# blocking (and summation order) can differ: a reduction bound over K with scale |A| @ |B|.

FAMILIES = ("exact", "transcendental", "reduction", "fused")


def ordered_ints(a: np.ndarray) -> np.ndarray:
    """Floats mapped to integers that are consecutive for consecutive floats (so that the
    difference of two is their distance in ulps; +0.0 and -0.0 map to 0)."""
    bits = 8 * a.dtype.itemsize
    u = np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}").astype(np.uint64)
    magnitude = (u & np.uint64((1 << (bits - 1)) - 1)).astype(np.int64)
    negative = (u >> np.uint64(bits - 1)).astype(bool)
    return np.where(negative, -magnitude, magnitude)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(ordered_ints(got) - ordered_ints(want))


def describe(got: np.ndarray, want: np.ndarray, bad: np.ndarray, inputs: Any = None) -> str:
    got, want, bad = np.atleast_1d(got), np.atleast_1d(want), np.atleast_1d(bad)
    lines = [f"{int(bad.sum())} of {bad.size} elements differ; first at:"]
    for idx in np.argwhere(bad)[:5]:
        t = tuple(int(i) for i in idx)
        lines.append(f"  {t}: got {got[t]!r}, want {want[t]!r}")
    if inputs is not None:
        lines.append(f"inputs: {inputs!r}"[:2000])
    return "\n".join(lines)


def assert_same_kind(got: Any, want: Any) -> None:
    """Same Python/NumPy type (ndarray vs NumPy scalar), shape and dtype."""
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), f"expected an ndarray, got {type(got).__name__}"
    else:
        assert isinstance(want, np.generic), f"reference is a {type(want).__name__}"
        assert type(got) is type(want), \
            f"expected a NumPy scalar {type(want).__name__}, got {type(got).__name__}"
    assert got.shape == want.shape, f"shape {got.shape} != NumPy's {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != NumPy's {want.dtype}"


def assert_matches(got: Any, want: Any, family: str = "exact", *, scale: Any = None,
                   n: int = 1, inputs: Any = None, zero_sign: bool = True) -> None:
    """Assert a compiled result equals NumPy's under ``family`` (see the table above).
    ``scale``/``n``: for "reduction", the same reduction of |x| and the number of terms.
    ``zero_sign=False``: the sign of a zero result is not compared (documented divergence
    ``max-min-signed-zero`` of max/min reductions over both +0.0 and -0.0)."""
    assert family in FAMILIES, family
    assert_same_kind(got, want)
    g, w = np.asarray(got), np.asarray(want)
    if w.dtype.kind != "f":
        bad = g != w
        assert not bad.any(), describe(g, w, bad, inputs)
        return
    gnan, wnan = np.isnan(g), np.isnan(w)
    bad = gnan != wnan
    assert not bad.any(), "NaN positions differ: " + describe(g, w, bad, inputs)
    ok = ~wnan
    if family == "exact":
        bad = ok & (ulp_distance(g, w) != 0)
        # +0.0 and -0.0 are both 0 in ordered_ints: compare the sign bits too.
        if zero_sign:
            bad |= ok & (np.signbit(g) != np.signbit(w))
    elif family == "transcendental":
        bad = ok & (ulp_distance(g, w) > ULPS[w.dtype])
    elif family == "reduction":
        assert scale is not None, "a reduction comparison needs the scale sum(|x|)"
        # float16: we accumulate in float32, but NumPy sums a strided axis in float16 (one
        # rounding per step), so the bound uses float16's eps.
        eps = float(np.finfo(w.dtype).eps)
        with np.errstate(all="ignore"):
            sc = np.asarray(scale, dtype=np.float64)
            tol = REDUCTION_SLACK * max(n, 1) * eps * sc
            if w.dtype == F16:
                tol = tol + np.abs(np.spacing(w.astype(F16))).astype(np.float64)
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            same_inf = np.isinf(w) & (g == w)
            bad = ok & ~same_inf & ~(diff <= tol)
    else:  # fused
        rtol, atol = FUSED[w.dtype]
        with np.errstate(all="ignore"):
            gd, wd = g.astype(np.float64), w.astype(np.float64)
            same_inf = np.isinf(wd) & (gd == wd)
            bad = ok & ~same_inf & ~(np.abs(gd - wd) <= atol + rtol * np.abs(wd))
    assert not bad.any(), f"[{family}] " + describe(g, w, bad, inputs)


def assert_tree_matches(got: Any, want: Any, family: str = "exact", **kw: Any) -> None:
    """``assert_matches`` over tuples, lists and dicts of results (same structure)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), (type(got), type(want))
        for k in want:
            assert_tree_matches(got[k], want[k], family, **kw)
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (type(got), type(want))
        for g, w in zip(got, want):
            assert_tree_matches(g, w, family, **kw)
    else:
        assert_matches(got, want, family, **kw)


# ---------------------------------------------------------------------------------------------
# Memory layouts: the same values seen through other strides.
# ---------------------------------------------------------------------------------------------

LAYOUTS = ("C", "F", "reversed", "strided", "permuted")


def relayout(a: np.ndarray, layout: str, seed: int = 0) -> np.ndarray:
    """The same values in another memory layout (a view with other strides)."""
    a = np.asarray(a)
    if a.ndim == 0:
        return a.copy()   # (np.ascontiguousarray would make it 1-d)
    if layout == "C":
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
