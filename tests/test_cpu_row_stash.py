"""The CPU row kernel's stash (``codegen.kernel.RowStash``): a costly value that one phase of
a row computes and a later phase reads again (softmax's ``exp(x - max)``) is kept in a
per-thread buffer instead of computed twice. Each case runs with the stash and again with it
turned off (fresh code both times), for rows that fit the stash and rows that do not (those
take the recomputing sweep): both must match NumPy, and each other within the few ulps by which
recomputing can differ from itself (a vector loop's scalar tail evaluates an element with the
scalar libm function, so the phase that sums exp and the phase that divides by it may not
see the same value for it; the stash's phases always do)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tracearray
from tracearray.codegen.kernel import RowStash
from tracearray.cpu import codecache

from numpy_compare import ULPS, assert_tree_matches, ulp_distance


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_2axes(x):
    e = np.exp(x - np.max(x, axis=(1, 2), keepdims=True))
    return e / np.sum(e, axis=(1, 2), keepdims=True)


def tanh_of_exp(x):
    t = np.tanh(np.exp(x - np.max(x, axis=-1, keepdims=True)))
    return t / np.sum(t, axis=-1, keepdims=True)


# (values that need no reduction of the row would be computed by a map kernel before it)
def two_values(x):
    c = x - np.max(x, axis=-1, keepdims=True)
    s = np.sum(np.exp(c) + np.log1p(c * c), axis=-1, keepdims=True)
    return np.exp(c) / s - np.log1p(c * c)


def with_argmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True), np.argmax(e, axis=-1)


def layernorm(x):
    c = x - np.mean(x, axis=-1, keepdims=True)
    return c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + 1e-5)


def logsumexp(x):
    m = np.max(x, axis=-1)
    return m + np.log(np.sum(np.exp(x - m[:, None]), axis=-1))


CAPACITY_F32 = RowStash.STASH_BYTES // 4

# (function, input, values the stash keeps: None when it is not planned)
CASES = [
    (softmax, ((7, 300), np.float32), 1),
    (softmax, ((3, 1), np.float32), None),                  # no row loop to keep
    (softmax, ((0, 300), np.float32), 1),
    (softmax, ((2, CAPACITY_F32), np.float32), 1),          # the longest row it holds
    (softmax, ((2, CAPACITY_F32 + 1), np.float32), 1),      # recomputes
    (softmax, ((5, 129), np.float64), 1),
    (softmax, ((5, 129), np.float16), 1),
    (softmax_2axes, ((3, 5, 40), np.float64), 1),
    (tanh_of_exp, ((6, 77), np.float32), 1),                # tanh kept, not exp below it
    (two_values, ((6, 77), np.float64), 2),
    (with_argmax, ((9, 513), np.float32), 1),
    (layernorm, ((6, 77), np.float32), None),               # nothing costly to keep
    (logsumexp, ((6, 77), np.float32), None),               # exp is read by one phase only
]


def _input(shape: tuple[int, ...], dtype: Any, strided: bool = False) -> np.ndarray:
    rng = np.random.default_rng(len(shape) * 1000 + sum(shape))
    x = rng.uniform(-6, 6, size=shape).astype(dtype)
    if strided:   # a negative-stride, non-contiguous view of the same shape
        wide = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)
        wide[..., ::2] = x[..., ::-1]
        return wide[..., ::-2]
    return x


def _run(fn: Callable, x: np.ndarray, monkeypatch, stash: bool) -> tuple[Any, list]:
    """fn's compiled result with fresh code (no disk or memory cache) and the stash plans
    its kernels made."""
    monkeypatch.setattr(codecache, "_memory", {})
    planned: list = []
    real = RowStash.plan.__func__

    def plan(cls, low):
        got = real(cls, low) if stash else None
        planned.append(got)
        return got

    monkeypatch.setattr(RowStash, "plan", classmethod(plan))
    return tracearray.compile(fn)(x), planned


@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("fn, spec, kept", CASES,
                         ids=[f"{c[0].__name__}-{c[1][0]}-{np.dtype(c[1][1])}" for c in CASES])
def test_stash_changes_no_bit(fn, spec, kept, strided, monkeypatch) -> None:
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", "off")
    x = _input(*spec, strided=strided)
    got, plans = _run(fn, x, monkeypatch, stash=True)
    plans = [p for p in plans if p is not None]
    if kept is None:
        assert plans == []
    else:
        assert len(plans) == 1 and len(plans[0].kept) == kept
    plain, _ = _run(fn, x, monkeypatch, stash=False)
    for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, plain))):
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "f":
            assert ulp_distance(a, b).max(initial=0) <= 2 * ULPS[a.dtype]
        else:
            assert np.array_equal(a, b)
    assert_tree_matches(got, fn(x), "fused")
    assert_tree_matches(plain, fn(x), "fused")
