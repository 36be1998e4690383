"""Results whose size the data decides: ``x[mask]`` as an array, ``np.nonzero``, ``argwhere``,
``flatnonzero``, ``extract``, one-argument ``np.where``, ``np.bincount``, a traced integer used
as a size, against NumPy.

The trace stops at the first such size, a probe computes it on the call's arguments, and the
function is traced again with it known (``trace.context.data_size``); the selected positions are
a parallel scatter at the mask's prefix count (``trace.selection.true_positions``). Checked on
the CPU, under the GPU emulator and (``-m gpu``) on the GPU, with masks selecting nothing,
everything and some, across calls whose counts differ.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tracearray
from tracearray.gpu import driver
from tracearray.testing import assert_matches_numpy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
HAVE_GPU = driver.is_available()

RNG = np.random.default_rng(3)
X = RNG.standard_normal((5, 7))
Y = RNG.standard_normal(40)


def _chain(x, y):
    s = x[x > 0]
    return s * 2 + 1, s.shape[0], np.sort(s) if False else s[::2], s.reshape(-1, 1) * s


def _rows(x, y):
    return x[x[:, 0] > 0], x[:, x[1] > -0.5], x[x[:, 0] > 0].sum(axis=1)


def _assign_from(x, y):
    z = np.zeros(x.size)
    sel = x[x > 0]
    z[:sel.size] = sel            # its size used as a slice bound
    return z


def _count_as_size(x, y):
    n = np.count_nonzero(x > 0)
    out = np.zeros(n) + np.arange(n)
    return out, np.ones((n, 2)).sum(axis=0)


PROGRAMS: dict[str, Callable[..., Any]] = {
    "x[mask]": lambda x, y: x[x > 0.3],
    "x[mask] * 2 + 1 and other uses": _chain,
    "rows and columns": _rows,
    "nothing selected": lambda x, y: (x[x > 100], np.nonzero(y > 100)[0]),
    "everything selected": lambda x, y: x[np.isfinite(x)],
    "np.nonzero 2-d": lambda x, y: np.nonzero(x > 0.5),
    "x.nonzero() 1-d": lambda x, y: (y > 0).nonzero(),
    "np.argwhere": lambda x, y: np.argwhere(x > 1),
    "np.flatnonzero": lambda x, y: np.flatnonzero(y > 0),
    "np.extract": lambda x, y: np.extract(x < 0, x * 3),
    "np.where(cond)": lambda x, y: np.where(y > 1),
    "x[np.nonzero(m)]": lambda x, y: x[np.nonzero(x < 0)] * 2,
    "np.bincount": lambda x, y: np.bincount((np.abs(y) * 3).astype(np.int64)),
    "np.bincount weights minlength": lambda x, y: np.bincount(
        (np.abs(y) * 3).astype(np.int32), weights=y, minlength=20),
    "selection assigned into a slice": _assign_from,
    "count_nonzero as a size": _count_as_size,
    "np.repeat by traced counts": lambda x, y: (
        np.repeat(np.arange(7), (np.abs(y[:7]) * 3).astype(np.int64)),
        np.repeat(x, (x[0] > 0).astype(np.int32) * 2, axis=1),
        np.repeat(y, (y > 0.5).astype(np.int64))),
}


def _args(k: int = 0) -> tuple:
    return X + 0.4 * k, Y - 0.3 * k


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_data_sizes_cpu(name: str) -> None:
    for k in range(3):    # counts differ from call to call
        assert_matches_numpy(PROGRAMS[name], *_args(k), device="cpu")


@pytest.mark.parametrize("name", ["x[mask] * 2 + 1 and other uses", "np.nonzero 2-d",
                                  "np.bincount weights minlength", "rows and columns",
                                  "np.repeat by traced counts"])
def test_data_sizes_emulated_gpu(name: str, emulated_gpu) -> None:
    assert_matches_numpy(PROGRAMS[name], *_args(), device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_data_sizes_cuda(name: str) -> None:
    for k in range(2):
        assert_matches_numpy(PROGRAMS[name], *_args(k), device="cuda")


def test_one_compiled_function_follows_the_counts() -> None:
    """Calls with different counts give NumPy's results; a count seen before reuses its
    trace (the probe runs on every call)."""
    f = tracearray.compile(lambda x: x[x > 0] * 2, device="cpu")
    xs = [RNG.standard_normal(50) for _ in range(3)]
    for x in xs + xs:
        np.testing.assert_array_equal(f(x), x[x > 0] * 2)
    counts = {int((x > 0).sum()) for x in xs}
    assert f.stats.traces == 1 + len(counts)      # the probe's trace, then one per count


def test_compaction_is_a_parallel_scatter() -> None:
    """``x[m] * 2 + 1``: the prefix count, the positions (a scatter with no ordered
    dimension: parallel) and the gather fused into the arithmetic -- no kernel per op."""
    f = tracearray.compile(lambda x: x[x > 0] * 2 + 1, device="cpu")
    plan = f.lower(Y).plan
    kinds = [k.kind for k in plan.kernels]
    assert kinds.count("scatter") == 1 and "scan" in kinds, kinds
    scatter = next(k for k in plan.kernels if k.kind == "scatter")
    assert scatter.reduce_axes == ()
    last = plan.kernels[-1]
    assert {"gather", "multiply", "add"} <= {n.op for n in last.nodes}
    assert "scatter" in str(f.explain(Y))
    # (bug 33: printing the loaded indices of a bisection -- each reads the previous ones --
    # as expression trees doubled per step: a 2^16-element search hung)
    search = tracearray.compile(lambda a, v: np.searchsorted(a, v), device="cpu")
    text = search.lower(np.arange(1 << 16, dtype=np.float64), Y).as_text("plan")
    assert "loaded<" in text and len(text) < 100_000


def test_bincount_errors() -> None:
    f = tracearray.compile(lambda i: np.bincount(i), device="cpu")
    with pytest.raises(ValueError, match="negative"):
        f(np.array([1, -1, 2]))
    with pytest.raises(TypeError, match="safe"):
        tracearray.compile(lambda i: np.bincount(i), device="cpu")(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(f(np.zeros(0, np.int64)), np.bincount(np.zeros(0, np.int64)))


def test_nonzero_of_0d_raises_numpys_error() -> None:
    with pytest.raises(ValueError, match="0d arrays"):
        tracearray.compile(lambda x: np.nonzero(x.sum()), device="cpu")(X)


def test_a_loop_of_data_dependent_sizes_is_bounded() -> None:
    """Each traced integer used as a size is a stage of the trace; a Python loop of them
    stops with a clear error instead of tracing without end."""
    from tracearray.errors import UnsupportedOperationError

    def walk(x):
        total = x[:0].sum()
        for i in range(100):
            n = np.count_nonzero(x > i * 1e-3)
            total = total + np.ones(n).sum()
        return total
    with pytest.raises(UnsupportedOperationError, match="more than 64 values that depend"):
        tracearray.compile(walk, device="cpu")(np.linspace(0, 1, 50))


def test_numpys_error_on_selected_elements_only() -> None:
    """``x[m] ** -1`` of integers raises NumPy's ValueError only when something is selected
    (GPU soak gpu-2026-12-01-g, program 936): the element-wise shortcut would have raised
    for the unselected elements too."""
    f = tracearray.compile(lambda x: x[x < 0] ** -1, device="cpu")
    np.testing.assert_array_equal(f(np.array([256, 3])), np.array([256, 3])[:0])
    with pytest.raises(ValueError, match="negative integer powers"):
        f(np.array([-3, 2]))


def test_bincount_checks_negative_elements_in_its_probe() -> None:
    """The probe that finds np.bincount's length also finds the negative elements NumPy
    refuses (its min and max reductions share one kernel: one pass over x), so the compiled
    result is the zeroed counts and the scatter, with no second pass for a run-time check."""
    f = tracearray.compile(lambda i: np.bincount(i, minlength=3), device="cpu")
    i = np.array([4, 0, 4, 1])
    kinds = [k.kind for k in f.lower(i).plan.kernels]
    assert kinds == ["map", "scatter"], kinds
    np.testing.assert_array_equal(f(i), np.bincount(i, minlength=3))
    with pytest.raises(ValueError, match="'list' argument must have no negative elements"):
        f(np.array([4, -1, 4]))
    np.testing.assert_array_equal(f(i[:2]), np.bincount(i[:2], minlength=3))


def test_repeat_by_traced_counts_raises_numpys_errors() -> None:
    f = tracearray.compile(lambda x, c: np.repeat(x, c, axis=1), device="cpu")
    x = np.arange(12.0).reshape(3, 4)
    for bad, error in ((np.array([1, -1, 2, 0]), ValueError), (np.ones(4), TypeError),
                       (np.array([1, 2]), ValueError), (np.ones(4, np.uint64), TypeError)):
        with pytest.raises(error) as numpy_error:
            np.repeat(x, bad, axis=1)
        with pytest.raises(error, match=str(numpy_error.value).split("(")[0]):
            f(x, bad)
