"""fuse/rewrite.py: the centred sum of squares of a full reduction in one pass.

What must hold: the rewrite applies exactly where it saves a pass (a full reduction whose
centre comes from a reduction of the same data, float16/float32 terms, at least two of them),
the results match NumPy (comparator bounds) on awkward data on both targets, and they are at
least as accurate as NumPy's own two-pass float32 variance."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracearray
from tracearray.fuse import plan_graph
from tracearray.fuse.rewrite import rewrite_graph
from tracearray.testing import assert_matches_numpy


def moments(x):
    mean = np.mean(x)
    dev = x - mean
    return mean, np.mean(dev * dev)


def graph_of(fn, *args):
    return tracearray.compile(fn, device="cpu").lower(*args).graph


def kernels(fn, *args) -> int:
    return len(tracearray.compile(fn, device="cpu").lower(*args).plan.kernels)


F32 = np.random.default_rng(0).random(1000).astype(np.float32) * 4 + 1


@pytest.mark.parametrize("fn", [
    moments,
    lambda x: np.var(x),
    lambda x: np.std(x),
    lambda x: ((x - x.mean()) ** 2).sum(),
    lambda x: ((x.mean() - x) ** 2).mean(),      # c - x: the same square
    lambda x: np.var(x, ddof=1),
    lambda x: (np.var(x), np.std(x[::-1])),
], ids=["moments", "var", "std", "pow2", "c_minus_x", "ddof", "views"])
def test_one_pass(fn) -> None:
    """Two full-reduction kernels become one (one read of x), which explain() says; NumPy's
    results."""
    assert kernels(fn, F32) == 1
    text = str(tracearray.compile(fn, device="cpu").explain(F32))
    assert "rewritten: the sum of squared deviations at " in text and "test_rewrite.py" in text
    assert_matches_numpy(fn, F32, device="cpu")


@pytest.mark.parametrize("fn,x", [
    (moments, F32.astype(np.float64)),                   # float64 data: two passes kept
    (lambda x: np.var(x, axis=-1), F32.reshape(10, 100)),   # rows: cached, not rewritten
    (lambda x, c: ((x - c) ** 2).sum(), (F32, np.float32(2.0))),   # c from no reduction
    (lambda x: np.mean((x - x.mean()) ** 2, dtype=np.float64), F32),   # wider sum dtype
    (moments, F32[:1]),                                  # one term
], ids=["float64", "rows", "independent_centre", "float64_sum", "one_term"])
def test_not_rewritten(fn, x) -> None:
    args = x if isinstance(x, tuple) else (x,)
    g = graph_of(fn, *args)
    assert rewrite_graph(g) is g
    assert_matches_numpy(fn, *args, device="cpu")


def test_rewritten_graph_keeps_inputs_outputs_and_locations() -> None:
    g = graph_of(moments, F32)
    r = rewrite_graph(g)
    assert r.inputs == g.inputs and len(r.outputs) == len(g.outputs)
    assert r.outputs[0] is g.outputs[0] and r.outputs[1] is not g.outputs[1]
    plan = plan_graph(g)
    assert plan.graph.outputs == r.outputs
    sums = [n for n in r.nodes() if n.op == "sum"]
    assert len(sums) == 3 and all(n in r.locations for n in sums)
    assert "test_rewrite.py" in r.locations[sums[-1]]


def _awkward() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = [
        np.full(37, 3.25, np.float32),                         # constant: variance 0
        (1e4 + rng.standard_normal(4097)).astype(np.float32),  # large mean, small spread
        np.array([1e30, -1e30, 3.0], np.float32),              # squares overflow float32
        np.array([2.0, 3.0], np.float32),                      # two terms
        np.array([np.nan, 1.0, 2.0], np.float32),
        np.array([1.0, np.inf, 2.0], np.float32),
        np.array([np.inf, 1.0, 2.0], np.float32),              # K itself infinite
        np.array([-np.inf, np.inf], np.float32),
        (rng.random((33, 65)) * 10).astype(np.float32)[::-2, 1::3],   # strided 2-D view
        np.array([1e-30, 3e-30, 2e-30], np.float32),           # subnormal squares
        (rng.random(1001) * 2 - 1).astype(np.float16),
        np.array([60000, -60000, 1], np.float16),
    ]
    x = rng.random(513).astype(np.float32)
    x[0] = 1e6                                                 # K an outlier
    out.append(x)
    return out


@pytest.mark.parametrize("i", range(13))
def test_awkward_data_matches_numpy(i) -> None:
    x = _awkward()[i]
    with np.errstate(all="ignore"):
        assert_matches_numpy(moments, x, device="cpu")
        assert_matches_numpy(lambda a: (np.var(a), np.std(a)), x, device="cpu")


@pytest.mark.parametrize("i", [0, 1, 2, 4, 6, 8, 12])
def test_awkward_data_matches_numpy_gpu_driver(emulated_gpu, i) -> None:
    """The GPU's full-reduction driver (two stages, float64 partials) under the emulator."""
    x = _awkward()[i]
    with np.errstate(all="ignore"):
        assert_matches_numpy(moments, x, device="cuda")


def test_as_accurate_as_numpy() -> None:
    """A large mean and a small spread (the case the shift is for): the one-pass variance is
    at least as close to the exact one as NumPy's two-pass float32 value."""
    rng = np.random.default_rng(3)
    for n in (1000, 1 << 16, 1 << 20):
        x = (1e3 + 0.01 * rng.standard_normal(n)).astype(np.float32)
        exact = float(np.var(x.astype(np.float64)))
        # NumPy's two passes in float32, with the mean it computes (the rewrite's centre)
        got = float(tracearray.compile(np.var, device="cpu")(x))
        want = float(np.var(x))
        assert abs(got - exact) <= abs(want - exact) + 2 * np.finfo(np.float32).eps * exact, \
            (n, got, want, exact)
        assert math.isfinite(got) and got >= 0


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(13))
def test_awkward_data_matches_numpy_on_the_gpu(i) -> None:
    from tracearray.gpu import driver
    if not driver.is_available():
        pytest.skip("needs an NVIDIA GPU, its driver and cuda-bindings")
    x = _awkward()[i]
    with np.errstate(all="ignore"):
        assert_matches_numpy(moments, x, device="cuda")
        assert_matches_numpy(lambda a: (np.var(a), np.std(a[::-1])), x, device="cuda")


@pytest.mark.gpu
def test_large_one_pass_variance_on_the_gpu() -> None:
    """2^26 + 3 elements (many blocks, uneven shares): NumPy's results, one kernel."""
    from tracearray.gpu import driver
    if not driver.is_available():
        pytest.skip("needs an NVIDIA GPU, its driver and cuda-bindings")
    x = (50 + np.random.default_rng(5).standard_normal((1 << 26) + 3)).astype(np.float32)
    assert_matches_numpy(moments, x, device="cuda")
    assert kernels(moments, x) == 1


def test_a_rewrite_inside_a_rewritten_centre() -> None:
    """np.var(x * np.var(x)): the outer sum's operands are rebuilt from the inner rewrite,
    then rewritten themselves (two kernels: the outer needs the inner's full result)."""
    def f(x):
        return np.var(x * np.var(x))
    plan = tracearray.compile(f, device="cpu").lower(F32).plan
    assert len(plan.kernels) == 2
    assert [n.op for n in plan.graph.nodes()].count("sum") == 6
    assert_matches_numpy(f, F32, device="cpu")
