"""Random draws inside compiled functions (``tracearray/trace/random.py``).

The numbers are not NumPy's (divergence ``random-bit-stream``): distributions are checked
statistically -- moments, Kolmogorov-Smirnov and chi-square tests at significance 0.001, on
fixed seeds so that every run is the same -- and the rest exactly: determinism for a seed,
generators advancing, NumPy's global state, shapes, dtypes, broadcasting, fusion, errors, and
the CPU and the GPU (emulated here; ``test_cpu_equals_gpu_device`` on a real one) giving the
same bits.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import threading

import tracearray
from numpy.random import rand as imported_rand   # a user's binding of a legacy function
from tracearray.errors import UnsupportedOperationError
from tracearray.ops.random import philox4x32, philox_reference

N = 200_000
# Kolmogorov's asymptotic critical value at significance 0.001: P(sqrt(n) D > 1.9495) = 0.001
KS_CRITICAL = 1.9495
Z_0001 = 3.0902   # the standard normal's 0.999 quantile


def cpu(fn, **kw):
    return tracearray.compile(fn, device="cpu", **kw)


def ks_statistic(sample: np.ndarray, cdf) -> float:
    """sqrt(n) * max |F_n(x) - F(x)| of a sample against a continuous CDF."""
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = len(x)
    f = cdf(x)
    upper = np.arange(1, n + 1) / n - f
    lower = f - np.arange(0, n) / n
    return math.sqrt(n) * max(upper.max(), lower.max())


def assert_ks(sample: np.ndarray, cdf) -> None:
    d = ks_statistic(sample, cdf)
    assert d < KS_CRITICAL, f"KS statistic {d:.3f} >= {KS_CRITICAL} (significance 0.001)"


def chi_square_critical(df: int) -> float:
    """The chi-square distribution's 0.999 quantile (Wilson-Hilferty)."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + Z_0001 * math.sqrt(a)) ** 3


def assert_chi_square(counts: np.ndarray, expected: np.ndarray) -> None:
    counts, expected = np.asarray(counts, float), np.asarray(expected, float)
    stat = float(((counts - expected) ** 2 / expected).sum())
    crit = chi_square_critical(len(counts) - 1)
    assert stat < crit, f"chi-square {stat:.1f} >= {crit:.1f} (df {len(counts) - 1})"


_normal_cdf = np.vectorize(lambda v: 0.5 * (1.0 + math.erf(v / math.sqrt(2.0))))


# ============================================================================================
# The bit generator
# ============================================================================================

def test_philox_known_answers() -> None:
    """Random123's known-answer vectors of Philox-4x32-10 (kat_vectors)."""
    f = 0xFFFFFFFF
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((f, f, f, f), (f, f), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in cases:
        assert tuple(int(w) for w in philox4x32(ctr, key)) == want
    # the primitive's 64 bits are words 0 and 1 of the counter (position, stream)
    assert int(philox_reference(np.uint64(0), np.uint64(0), np.uint64(0))) == \
        0xE169C58D << 32 | 0x6627E8D5


def test_draws_are_the_evaluators_bit_for_bit() -> None:
    """The compiled kernels compute what the graph means (the NumPy evaluator of the op
    table): integers and uniforms exactly."""
    from tracearray.trace.evaluate import evaluate_graph

    def f(x):
        rng = np.random.default_rng(7)
        return rng.integers(-5, 1000, size=x.shape), rng.random(x.shape) + x, \
            rng.random((3, 4), dtype=np.float32)
    x = np.zeros((5, 6))
    got = cpu(f)(x)
    graph = cpu(f).lower(x).graph
    want = evaluate_graph(graph, [x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_position_is_the_flat_c_order_index() -> None:
    """An element's bits depend on its flat position only: a (3, 4, 5) draw is the ravelled
    60-element draw (the counter of ``_positions``), and shapes with size-1 axes too."""
    def f():
        return (np.random.default_rng(3).random((3, 4, 5)),
                np.random.default_rng(3).random(60),
                np.random.default_rng(3).random((1, 60, 1)))
    a, b, c = cpu(f)()
    np.testing.assert_array_equal(a.ravel(), b)
    np.testing.assert_array_equal(c.ravel(), b)


# ============================================================================================
# Distributions
# ============================================================================================

def test_uniform_floats_moments_and_ks() -> None:
    def f():
        rng = np.random.default_rng(11)
        return rng.random(N), rng.random(N, dtype=np.float32), rng.uniform(-2.0, 3.0, N)
    u64, u32, u = cpu(f)()
    assert u64.dtype == np.float64 and u32.dtype == np.float32
    for s in (u64, u32):
        assert s.min() >= 0.0 and s.max() < 1.0
        assert abs(s.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
        assert abs(s.var() - 1 / 12) < 0.002
        assert_ks(s, lambda x: x)
    assert u.min() >= -2.0 and u.max() < 3.0
    assert_ks(u, lambda x: (x + 2.0) / 5.0)
    # float32 has 24 random bits: every value is a multiple of 2**-24
    assert np.all((u32.astype(np.float64) * 2 ** 24) % 1 == 0)


def test_normal_moments_and_ks() -> None:
    def f(mu):
        rng = np.random.default_rng(12)
        return rng.standard_normal(N), rng.normal(mu, 0.5, N), \
            rng.standard_normal(N, dtype=np.float32)
    z, y, z32 = cpu(f)(np.float64(3.0))
    assert z32.dtype == np.float32 and y.dtype == np.float64
    for s, m, sd in ((z, 0.0, 1.0), (y, 3.0, 0.5), (z32, 0.0, 1.0)):
        assert abs(s.mean() - m) < 5 * sd / math.sqrt(N)
        assert abs(s.std() - sd) < 0.01 * sd
        assert abs(((s - m) ** 3).mean() / sd ** 3) < 0.03          # skewness 0
        assert abs(((s - m) ** 4).mean() / sd ** 4 - 3.0) < 0.06    # kurtosis 3
        assert_ks((s - m) / sd, _normal_cdf)
    assert np.all(np.isfinite(z))


def test_exponential_moments_and_ks() -> None:
    def f():
        rng = np.random.default_rng(13)
        return rng.exponential(2.5, N), rng.standard_exponential(N, dtype=np.float32)
    e, e1 = cpu(f)()
    assert e.min() >= 0 and e1.min() >= 0 and e1.dtype == np.float32
    assert abs(e.mean() - 2.5) < 5 * 2.5 / math.sqrt(N)
    assert abs(e.std() - 2.5) < 0.03
    assert_ks(e, lambda x: 1.0 - np.exp(-x / 2.5))
    assert_ks(e1, lambda x: 1.0 - np.exp(-x))


@pytest.mark.parametrize("low,high,endpoint,dtype", [
    (0, 10, False, np.int64), (-3, 4, True, np.int32), (0, 256, False, np.uint8),
    (5, 6, False, np.int16), (0, 2, False, np.bool_),
    (-2**62, 2**62, False, np.int64),           # a range past 2**32: rejection with tries
])
def test_integers_chi_square(low, high, endpoint, dtype) -> None:
    def f():
        return np.random.default_rng(14).integers(low, high, size=N, dtype=dtype,
                                                  endpoint=endpoint)
    x = cpu(f)()
    assert x.dtype == np.dtype(dtype)
    top = high + 1 if endpoint else high
    values = x.astype(object)
    assert min(values) >= low and max(values) < top
    r = top - low
    if r <= 1000:
        counts = np.bincount((x.astype(np.int64) - low), minlength=r)
        if r == 1:
            assert counts[0] == N
            return
        assert_chi_square(counts, np.full(r, N / r))
    else:   # 16 equal bins of the range
        bins = ((values - low) * 16 // r).astype(np.int64)
        assert_chi_square(np.bincount(bins, minlength=16), np.full(16, N / 16))


def test_integers_full_64_bit_ranges() -> None:
    """Every 64-bit value (the range wraps to 0): the raw bits; the top and bottom bits are
    each fair."""
    def f():
        rng = np.random.default_rng(15)
        return (rng.integers(0, 2**64 - 1, size=N, dtype=np.uint64, endpoint=True),
                rng.integers(-2**63, 2**63 - 1, size=N, dtype=np.int64, endpoint=True))
    u, i = cpu(f)()
    for bit in (0, 63):
        ones = int(((u >> np.uint64(bit)) & np.uint64(1)).sum())
        assert abs(ones - N / 2) < 5 * math.sqrt(N / 4)
    assert abs(int((i < 0).sum()) - N / 2) < 5 * math.sqrt(N / 4)


def test_integers_with_array_bounds_broadcast() -> None:
    """Traced bounds (per element), broadcast against each other: each column stays in its
    own range, uniformly (chi-square), and a range of 1 gives its one value."""
    low = np.array([0, 10, -5, 7])
    high = np.array([[3], [3]]) + low
    f = cpu(lambda rng, lo, hi: rng.integers(lo, hi, size=(N // 4, 2, 4)))
    x = f(np.random.default_rng(16), low, high)
    assert x.shape == (N // 4, 2, 4)
    for j in range(4):
        col = x[:, :, j].ravel() - low[j]
        assert col.min() >= 0 and col.max() < 3
        assert_chi_square(np.bincount(col, minlength=3), np.full(3, col.size / 3))
    one = f(np.random.default_rng(16), low, low + 1)
    np.testing.assert_array_equal(one, np.broadcast_to(low, one.shape))


def test_choice_chi_square() -> None:
    p = np.array([0.1, 0.2, 0.3, 0.4])
    a = np.array([10.0, 20.0, 30.0, 40.0])

    def f(p, a):
        rng = np.random.default_rng(17)
        return rng.choice(4, size=N, p=p), rng.choice(a, size=N), rng.choice(5, N), \
            np.random.default_rng(17).choice(a, size=(2, 3), p=[0, 0, 1, 0])
    weighted, picked, uniform, certain = cpu(f)(p, a)
    assert weighted.dtype == np.int64 and picked.dtype == np.float64
    assert_chi_square(np.bincount(weighted, minlength=4), N * p)
    assert set(np.unique(picked)) <= set(a)
    assert_chi_square(np.bincount((picked / 10).astype(int) - 1, minlength=4), np.full(4, N / 4))
    assert_chi_square(np.bincount(uniform, minlength=5), np.full(5, N / 5))
    np.testing.assert_array_equal(certain, np.full((2, 3), 30.0))


def test_permutations_are_uniform_and_are_permutations() -> None:
    """permutation/permuted/shuffle are argsorts of random keys: every result is a
    permutation, and over many draws each of the 3! orders of 3 items is as likely (chi-square),
    as is each position of an item of a longer one."""
    M = 6000

    def f(x):
        rng = np.random.default_rng(23)
        rows = rng.permuted(np.broadcast_to(np.arange(3), (M, 3)), axis=1)
        return rows, rng.permutation(10), rng.permutation(x), rng.permuted(x)
    x = np.arange(40.0).reshape(8, 5)
    rows, p10, px, qx = cpu(f)(x)
    assert rows.shape == (M, 3) and (np.sort(rows, axis=1) == np.arange(3)).all()
    codes = rows[:, 0] * 9 + rows[:, 1] * 3 + rows[:, 2]
    orders = [0 * 9 + 1 * 3 + 2, 0 + 2 * 3 + 1, 9 + 0 + 2, 9 + 6 + 0, 18 + 0 + 1, 18 + 3 + 0]
    assert set(np.unique(codes)) == set(orders)
    assert_chi_square(np.array([(codes == c).sum() for c in orders]), np.full(6, M / 6))
    assert p10.dtype == np.int64 and sorted(p10) == list(range(10))
    assert sorted(map(tuple, px)) == sorted(map(tuple, x))   # rows moved whole (axis 0)
    assert sorted(qx.ravel()) == sorted(x.ravel()) and qx.shape == x.shape


def test_shuffle_in_place_of_an_argument_and_of_an_owned_value() -> None:
    def f(x, rng):
        rng.shuffle(x)                   # the caller's array, in place (along axis 0)
        y = np.arange(6.0)
        rng.shuffle(y)
        np.random.shuffle(y)             # the legacy function, NumPy's global state
        return y, np.random.permutation(5)
    x = np.arange(20.0).reshape(10, 2)
    before = x.copy()
    y, p5 = cpu(f)(x, np.random.default_rng(4))
    assert sorted(map(tuple, x)) == sorted(map(tuple, before)) and not np.array_equal(x, before)
    assert sorted(y) == list(range(6)) and sorted(p5) == list(range(5))


def test_choice_without_replacement() -> None:
    """Distinct picks; uniform without p; with p, the first pick is distributed as p and
    zero-probability entries are never picked; NumPy's errors."""
    M = 4000
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.0])

    def f(p):
        rng = np.random.default_rng(29)
        return np.stack([rng.choice(5, 2, replace=False, p=p) for _ in range(40)]), \
            rng.choice(np.arange(10.0, 15.0), 5, replace=False)
    weighted, all5 = cpu(f)(p)
    three = cpu(lambda rng: rng.choice(7, size=(1, 3), replace=False))
    rng = np.random.default_rng(29)
    picks = np.concatenate([three(rng) for _ in range(M // 3)])
    assert picks.dtype == np.int64 and (np.sort(picks, 1)[:, 1:] != np.sort(picks, 1)[:, :-1]).all()
    assert_chi_square(np.bincount(picks.ravel(), minlength=7), np.full(7, picks.size / 7))
    assert sorted(all5) == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert (weighted != 4).all() and (weighted[:, 0] != weighted[:, 1]).all()
    first = cpu(lambda p, rng: rng.choice(5, 1, replace=False, p=p))
    rng = np.random.default_rng(31)
    firsts = np.array([first(p, rng)[0] for _ in range(2000)])
    assert_chi_square(np.bincount(firsts, minlength=4)[:4], 2000 * p[:4])
    for fn, match in ((lambda r: r.choice(3, 4, replace=False), "larger sample"),
                      (lambda r: r.choice(3, 3, replace=False, p=[0.5, 0.5, 0.0]),
                       "non-zero entries")):
        with pytest.raises(ValueError, match=match):
            cpu(fn)(np.random.default_rng(0))
        with pytest.raises(ValueError, match=match):
            fn(np.random.default_rng(0))


def test_choice_along_an_axis_of_a_traced_array() -> None:
    x = np.arange(12.0).reshape(3, 4)
    got = cpu(lambda x: np.random.default_rng(18).choice(x, 5, axis=1))(x)
    assert got.shape == (3, 5)
    # whole columns of x are picked
    for j in range(5):
        assert any(np.array_equal(got[:, j], x[:, k]) for k in range(4))


def test_two_draws_in_one_function_are_independent() -> None:
    def f():
        rng = np.random.default_rng(19)
        return rng.random(N), rng.random(N), rng.standard_normal(N)
    a, b, z = cpu(f)()
    assert not np.array_equal(a, b)
    for x, y in ((a, b), (a, z), (a[1:], a[:-1])):   # across draws, and lag 1 within one
        assert abs(np.corrcoef(x, y)[0, 1]) < 5 / math.sqrt(N)


# ============================================================================================
# Where keys come from: seeds, generators passed in, NumPy's global state
# ============================================================================================

def test_a_fixed_seed_reproduces_on_every_call() -> None:
    f = cpu(lambda x: x + np.random.default_rng(123).normal(size=x.shape))
    x = np.zeros(1000)
    a, b = f(x), f(x)
    np.testing.assert_array_equal(a, b)
    other = cpu(lambda x: x + np.random.default_rng(124).normal(size=x.shape))(x)
    assert not np.array_equal(a, other)
    # two generators made from one seed draw the same numbers, as NumPy's do
    same = cpu(lambda: (np.random.default_rng(5).random(4), np.random.default_rng(5).random(4)))()
    np.testing.assert_array_equal(*same)
    # a SeedSequence and a list of ints seed too, reproducibly
    seq = np.random.SeedSequence(5)
    ss = cpu(lambda: np.random.default_rng(seq).random(4))
    np.testing.assert_array_equal(ss(), ss())
    assert cpu(lambda: np.random.default_rng([1, 2]).random(3))().shape == (3,)


def test_a_traced_seed_draws_what_the_same_python_int_draws() -> None:
    """default_rng(seed) of a NumPy integer argument: one trace serves every seed, and each
    seed draws what the same Python int seed draws."""
    f = cpu(lambda s, x: x + np.random.default_rng(s).random(x.shape))
    x = np.zeros(16)
    a5, a6 = f(np.int64(5), x), f(np.uint32(6), x)
    assert f.stats.traces == 2          # (one per dtype of the seed)
    np.testing.assert_array_equal(f(np.int64(5), x), a5)
    assert f.stats.traces == 2 and not np.array_equal(a5, a6)
    for seed, want in ((5, a5), (6, a6)):
        np.testing.assert_array_equal(cpu(lambda x: x + np.random.default_rng(seed).random(
            x.shape))(x), want)
    with pytest.raises(ValueError, match="non-negative"):
        f(np.int64(-1), x)
    with pytest.raises(ValueError, match="non-negative"):
        cpu(lambda: np.random.default_rng(-1).random(2))()


def test_a_generator_passed_in_advances_and_reproduces() -> None:
    f = cpu(lambda rng, x: x + rng.random(x.shape))
    x = np.zeros(64)
    rng = np.random.default_rng(0)
    a, b = f(rng, x), f(rng, x)
    assert not np.array_equal(a, b)                  # successive calls differ
    assert f.stats.traces == 1                       # ... from one trace and one executable
    assert f.stats.executables == 1
    again = np.random.default_rng(0)
    np.testing.assert_array_equal(f(again, x), a)    # the same seed reproduces
    np.testing.assert_array_equal(f(again, x), b)
    # it advanced by exactly one 64-bit draw per call, as random_raw() does
    ref = np.random.default_rng(0)
    ref.bit_generator.random_raw(2)
    assert rng.bit_generator.state == ref.bit_generator.state
    assert rng.random() == ref.random()


def test_lower_and_explain_advance_nothing() -> None:
    f = cpu(lambda rng, x: x + rng.random(x.shape) + np.random.random(x.shape))
    rng, x = np.random.default_rng(0), np.zeros(4)
    before, legacy = rng.bit_generator.state, np.random.get_state()[1].copy()
    f.lower(rng, x)
    assert "philox" in str(f.explain(rng, x))
    assert rng.bit_generator.state == before
    np.testing.assert_array_equal(np.random.get_state()[1], legacy)
    f(rng, x)
    assert rng.bit_generator.state != before


def test_generators_in_pytrees_and_keywords() -> None:
    f = cpu(lambda gens, x, *, other: (gens[0].random(3) + x, gens[1].random(3),
                                       other.integers(0, 5, 3)))
    r1, r2, r3 = (np.random.default_rng(i) for i in range(3))
    a, b, c = f([r1, r2], np.zeros(3), other=r3)
    assert not np.array_equal(a, b) and c.dtype == np.int64
    # a generator is not a uint64 scalar: the same tree with an array traces anew
    g = cpu(lambda k: k * 2)
    assert g(np.uint64(3)) == 6


def test_the_legacy_functions_use_numpys_global_state() -> None:
    def f(x):
        return (x + np.random.rand(*x.shape), np.random.randn(2, 3), np.random.randint(5, size=4),
                np.random.random(3), np.random.uniform(1, 2, 3), np.random.normal(size=3),
                np.random.standard_normal(2), np.random.exponential(2.0, 3),
                np.random.choice(3, 4), np.random.random_sample(2))
    g = cpu(f)
    x = np.zeros(5)
    np.random.seed(0)
    a = g(x)
    np.random.seed(0)
    b = g(x)
    c = g(x)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])
    assert a[1].shape == (2, 3) and a[2].dtype == np.dtype(int) and a[4].min() >= 1
    # the call drew one 64-bit key from the global RandomState
    np.random.seed(0)
    g(x)
    after = np.random.random()
    np.random.seed(0)
    np.random.randint(0, 2**64, dtype=np.uint64)
    assert after == np.random.random()


def test_np_random_seed_inside_the_function_reproduces_every_call() -> None:
    """np.random.seed(s) in the function: the legacy draws after it are the same at every
    call (as NumPy's); those before it still come from the global state; seed(None) is fresh
    entropy; NumPy's argument errors."""
    def f(x):
        before = np.random.rand(3)
        np.random.seed(42)
        return before, x + np.random.randn(*x.shape), np.random.randint(0, 10, 6)
    g = cpu(f)
    a, b = g(np.zeros(5)), g(np.zeros(5))
    assert not np.array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])
    other = cpu(lambda x: (np.random.seed(43), x + np.random.randn(*x.shape))[1])(np.zeros(5))
    assert not np.array_equal(other, a[1])
    fresh = cpu(lambda x: (np.random.seed(None), x + np.random.rand(*x.shape))[1])
    assert not np.array_equal(fresh(np.zeros(4)), fresh(np.zeros(4)))
    for seed, error in ((-1, ValueError), (2 ** 32, ValueError), (1.5, TypeError)):
        with pytest.raises(error):
            np.random.seed(seed)
        with pytest.raises(error):
            cpu(lambda x, s=seed: (np.random.seed(s), x)[1])(np.zeros(1))
    np.random.seed()


def test_legacy_functions_bound_in_the_users_module() -> None:
    """``from numpy.random import rand`` in the function's module is the traced draw too (it
    ran NumPy's own random code on tracers while tracing: a segfault)."""
    f = cpu(lambda x: x + imported_rand(*x.shape))
    np.random.seed(3)
    a = f(np.zeros(4))
    np.random.seed(3)
    np.testing.assert_array_equal(f(np.zeros(4)), a)
    assert np.all((a >= 0) & (a < 1))
    # the guard on the module's binding holds NumPy's function, which the module binds
    # again after the trace (it held the traced replacement: a trace at every call)
    assert f.stats.traces == 1


def test_other_threads_get_numpys_random_functions_while_a_trace_runs() -> None:
    """np.random's functions are replaced for the whole process while a trace runs; a thread
    that is not tracing meanwhile gets NumPy's own functions."""
    seen = []

    def other_thread():
        np.random.seed(0)
        seen.append((np.random.rand(2), np.random.default_rng(1).random(2)))

    def f(x):
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        return x + 1
    cpu(f)(np.zeros(2))
    np.random.seed(0)
    np.testing.assert_array_equal(seen[0][0], np.random.rand(2))
    np.testing.assert_array_equal(seen[0][1], np.random.default_rng(1).random(2))


def test_default_rng_without_a_seed_is_fresh_every_call() -> None:
    f = cpu(lambda: (np.random.default_rng().random(8), np.random.default_rng().random(8)))
    a1, a2 = f()
    b1, _ = f()
    assert not np.array_equal(a1, b1) and not np.array_equal(a1, a2)


def test_a_data_dependent_size_sees_one_key_per_call() -> None:
    """x[u < 0.5] is traced in stages (a probe counts the selection first): every stage of
    one call must draw the same numbers, whatever the key's source."""
    def f(rng, x):
        u = rng.random(x.shape)
        v = np.random.random(x.shape)
        return u, v, x[(u < 0.5) & (v < 0.5)]
    g = cpu(f)
    x = np.arange(200.0)
    for _ in range(2):
        u, v, sel = g(np.random.default_rng(1), x)
        np.testing.assert_array_equal(sel, x[(u < 0.5) & (v < 0.5)])


# ============================================================================================
# Shapes, dtypes, parameters
# ============================================================================================

def test_sizes_and_parameter_broadcasting() -> None:
    mu = np.array([[0.0], [10.0], [100.0]])

    def f(mu, sigma):
        rng = np.random.default_rng(20)
        return (rng.normal(mu, sigma), rng.normal(mu, 1.0, size=(3, 4)), rng.random(),
                rng.random(0), rng.random((2, 0, 3)), rng.random(1), rng.random((1,)),
                rng.integers(3), rng.uniform(size=(2, 2)), rng.exponential(mu),
                rng.normal(mu.astype(np.float32), 1.0))
    out = cpu(f)(mu, np.full(4, 0.001))
    (a, b, s, e0, e1, one, one_t, i, u, ex, n32) = out
    assert a.shape == (3, 4) and b.shape == (3, 4) and np.shape(s) == ()
    assert e0.shape == (0,) and e1.shape == (2, 0, 3) and one.shape == (1,) == one_t.shape
    assert np.shape(i) == () and 0 <= i < 3 and u.shape == (2, 2) and ex.shape == (3, 1)
    np.testing.assert_allclose(a, np.broadcast_to(mu, (3, 4)), atol=0.01)
    assert n32.dtype == np.float64          # parameters are float64, as in NumPy
    with pytest.raises(ValueError, match="shape mismatch"):
        cpu(lambda mu: np.random.default_rng(0).normal(mu, 1.0, size=(4, 3)))(mu)


def test_draws_fuse_into_their_consumers() -> None:
    """A draw is elementwise: a Monte Carlo estimate of pi (two draws, a test, a mean) is one
    kernel, as is a draw added to an input."""
    def pi(rng, n_like):
        x = rng.random(n_like.shape)
        y = rng.random(n_like.shape)
        return 4.0 * ((x * x + y * y) <= 1.0).mean()
    f = cpu(pi)
    like = np.empty(N)
    assert len(f.lower(np.random.default_rng(0), like).plan.kernels) == 1
    est = f(np.random.default_rng(0), like)
    assert abs(est - np.pi) < 5 * math.sqrt(np.pi * (4 - np.pi) / N)
    g = cpu(lambda x: np.exp(x) + np.random.default_rng(0).standard_normal(x.shape))
    assert len(g.lower(np.zeros((30, 40))).plan.kernels) == 1
    assert "philox" in str(g.explain(np.zeros((30, 40))))


# ============================================================================================
# Errors
# ============================================================================================

def test_unsupported_draws_name_the_call_and_the_line() -> None:
    def gamma(rng, x):
        return x + rng.gamma(2.0, size=x.shape)   # <- gamma
    with pytest.raises(UnsupportedOperationError, match="gamma is not supported") as info:
        cpu(gamma)(np.random.default_rng(0), np.zeros(3))
    assert "<- gamma" in str(info.value)
    for fn, what in ((lambda r: r.random(3, out=np.empty(3)), "out="),
                     (lambda r: r.shuffle([1, 2, 3]), "shuffle"),
                     (lambda r: np.random.set_state(np.random.get_state()), "get_state")):
        with pytest.raises(UnsupportedOperationError, match=what):
            cpu(fn)(np.random.default_rng(0))


def test_parameter_errors_are_numpys() -> None:
    """Parameters known while tracing raise NumPy's error when the function is traced."""
    for fn, match in ((lambda r: r.normal(0, -1.0, 3), "scale < 0"),
                      (lambda r: r.exponential(-1.0, 3), "scale < 0"),
                      (lambda r: r.integers(5, 5), "low >= high"),
                      (lambda r: r.integers(5, 4, endpoint=True), "low > high"),
                      (lambda r: r.integers(0, 300, dtype=np.uint8), "high is out of bounds"),
                      (lambda r: r.integers(-1, 3, dtype=np.uint8), "low is out of bounds"),
                      (lambda r: r.random(-1), "negative dimensions"),
                      (lambda r: r.uniform(0, np.inf), "exceeds valid bounds"),
                      (lambda r: r.choice(3, 2, p=[0.5, 0.6, 0.1]), "do not sum to 1"),
                      (lambda r: r.choice(3, 2, p=[0.5, 0.5]), "same size"),
                      (lambda r: r.choice([], 2), "cannot be empty")):
        error = OverflowError if match == "exceeds valid bounds" else ValueError
        with pytest.raises(error, match=match):
            fn(np.random.default_rng(0))          # NumPy's own error ...
        with pytest.raises(error, match=match):
            cpu(fn)(np.random.default_rng(0))     # ... and the compiled function's
    with pytest.raises(TypeError, match="Unsupported dtype"):
        cpu(lambda: np.random.default_rng(0).random(3, dtype=np.int32))()
    # traced parameters are checked when the compiled function runs
    g = cpu(lambda s: np.random.default_rng(0).normal(0.0, s, 3))
    assert g(np.array(1.0)).shape == (3,)
    with pytest.raises(ValueError, match="scale < 0"):
        g(np.array(-1.0))
    h = cpu(lambda lo, hi: np.random.default_rng(0).integers(lo, hi, 3))
    with pytest.raises(ValueError, match="low >= high"):
        h(np.array(3), np.array(3))
    u = cpu(lambda lo, hi: np.random.default_rng(0).uniform(lo, hi, 2))
    with pytest.raises(OverflowError, match="Range exceeds valid bounds"):
        u(np.array([0.0, 1.0]), np.array([1.0, np.nan]))
    p = cpu(lambda p: np.random.default_rng(0).choice(3, 4, p=p))
    with pytest.raises(ValueError, match="non-negative"):
        p(np.array([1.5, -0.5, 0.0]))


def test_generators_the_call_cannot_advance_are_refused() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(UnsupportedOperationError, match="closure variable 'rng'"):
        cpu(lambda x: x + rng.random(3))(np.zeros(3))
    with pytest.raises(UnsupportedOperationError, match="static argument"):
        cpu(lambda r, x: x + r.random(3), static_argnums=0)(rng, np.zeros(3))
    with pytest.raises(UnsupportedOperationError, match="RandomState"):
        cpu(lambda r, x: x + r.random(3))(np.random.RandomState(0), np.zeros(3))


AUG_RNG = np.random.default_rng(0)
LEGACY = np.random.RandomState(0)
STATE = {"rng": np.random.default_rng(0)}


class _Cfg:
    rng = np.random.default_rng(0)


CFG = _Cfg()


def _add_noise(x):
    return x + 0.1 * AUG_RNG.standard_normal(x.shape)


def _jitter(n):
    return LEGACY.rand(n)


@pytest.mark.parametrize("fn, where", [
    (lambda x: _add_noise(x) * 2, "the global 'AUG_RNG' of _add_noise"),
    (lambda x: x + _jitter(3), "the global 'LEGACY' of _jitter"),
    (lambda x: x + CFG.rng.random(x.shape), "CFG.rng"),
    (lambda x: x + STATE["rng"].random(x.shape), "STATE\\['rng'\\]")])
def test_generators_reached_through_helpers_and_attributes_are_refused(fn, where) -> None:
    # (a Generator reached so drew once while tracing; its Cython code wrote into a traced
    # placeholder from np.empty and crashed the interpreter: probe of 2026-12-07)
    with pytest.raises(UnsupportedOperationError, match=where):
        cpu(fn)(np.zeros(3))


# ============================================================================================
# The random programs
# ============================================================================================

def test_the_program_generator_draws_random_draws() -> None:
    """``tracearray.testing.programs`` has a family of draws (``f_random``) whose values do not
    depend on the bit stream, so the soak compares them with NumPy like any program."""
    from tracearray.testing import RandomSource, fuzz
    from tracearray.testing.programs import ProgramSpace, generate
    space = ProgramSpace(families=("random",), max_steps=4)
    drawn = 0
    for i in range(40):
        p = generate(RandomSource(f"random-{i}"), space)
        if "np.random.default_rng" not in p.source():
            continue
        drawn += 1
        out = fuzz.run_program(p, "cpu")
        assert out.status == "match", f"{p}\n{out.detail}"
    assert drawn >= 20


# ============================================================================================
# CPU and GPU
# ============================================================================================

def _targets_program(rng, x):
    return (rng.integers(0, 1000, x.shape), rng.random(x.shape), rng.random(x.shape, np.float32),
            x * rng.standard_normal(x.shape), rng.exponential(2.0, x.shape),
            rng.choice(7, x.shape, p=np.full(7, 1 / 7)))


def _assert_same_draws(got, want) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        g = g.numpy() if hasattr(g, "numpy") else g
        if i in (0, 1, 2, 5):          # integers and uniforms: bit for bit
            np.testing.assert_array_equal(g, w)
        else:   # libm against libdevice: a few ulp of each function (cos near its zeros:
            # absolute), far inside these bounds for values of order 1
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-12)


def test_cpu_equals_gpu_emulated(emulated_gpu) -> None:
    x = np.linspace(1.0, 2.0, 3000).reshape(30, 100)
    want = cpu(_targets_program)(np.random.default_rng(9), x)
    got = tracearray.compile(_targets_program, device="cuda")(np.random.default_rng(9), x)
    _assert_same_draws(got, want)


@pytest.mark.gpu
def test_cpu_equals_gpu_device() -> None:
    from tracearray.gpu import driver
    if not driver.is_available():
        pytest.skip("needs an NVIDIA GPU")
    x = np.linspace(1.0, 2.0, 1 << 20).reshape(1024, 1024)
    want = cpu(_targets_program)(np.random.default_rng(9), x)
    got = tracearray.compile(_targets_program, device="cuda")(np.random.default_rng(9), x)
    _assert_same_draws(got, want)


def test_generator_uniform_refuses_high_below_low_as_numpy_does():
    with pytest.raises(ValueError, match="high - low < 0"):
        tracearray.compile(lambda rng: rng.uniform(5.0, -2.0, 3), device="cpu")(
            np.random.default_rng(0))
    f = tracearray.compile(lambda rng, lo, hi: rng.uniform(lo, hi), device="cpu")
    assert f(np.random.default_rng(0), np.zeros(2), np.ones(2)).shape == (2,)
    with pytest.raises(ValueError, match="high - low < 0"):    # checked when it runs
        f(np.random.default_rng(0), np.zeros(2), np.array([1.0, -1.0]))
    # the legacy function takes high < low, as NumPy's does
    assert tracearray.compile(lambda: np.random.uniform(5.0, -2.0, 3), device="cpu")().shape \
        == (3,)


def test_draws_without_a_size_are_weak_python_numbers():
    """(acceptance probe, sixteenth session) rng.uniform(0.9, 1.1), rng.random(), rng.choice(3),
    np.random.rand() and randint(3) are Python floats / ints in NumPy, weakly typed: a float32
    array times one stays float32, an int8 array plus choice(3) int8. They were float64 /
    int64 arrays in the trace, and widened the result's dtype."""
    fns = [lambda x, r: x * r.uniform(0.9, 1.1), lambda x, r: x + r.choice(3),
           lambda x, r: x * (r.random() * 2 - 1) + r.normal(),
           lambda x, r: x / r.exponential() - r.standard_normal(),
           lambda x, r: np.multiply(x, r.random()), lambda x, r: x + r.integers(3),
           lambda x, r: r.random() * 2, lambda x, r: x * np.random.rand() + np.random.randint(3)]
    for fn in fns:
        for dt in (np.float32, np.float16, np.int8, np.uint8):
            x = np.ones(4, dt)
            want = fn(x, np.random.default_rng(0))
            got = tracearray.compile(fn, device="cpu")(x, np.random.default_rng(0))
            assert type(got) is type(want), (got, want)
            assert np.asarray(got).dtype == np.asarray(want).dtype, (fn, dt)


def test_weak_draws_through_unary_ops_powers_complex_values_and_functions():
    """(changes probe, sixteenth session) -w, abs(w), w ** 2, x ** w, complex64 arrays with
    w, np.where / np.clip / np.select / np.linspace / np.ldexp / np.logaddexp of a weak draw
    kept NumPy's dtype only partly; randint(dtype=...) is NumPy's scalar of that dtype; a
    list times an integer scalar repeats the list."""
    R = np.random.default_rng
    x = np.arange(1, 5, dtype=np.float32)
    fns = [lambda x: x * -R(0).random(), lambda x: x * abs(R(0).normal()),
           lambda x: x * R(0).random() ** 2, lambda x: x ** R(0).random(),
           lambda x: -R(0).random(), lambda x: R(0).random() ** 2,
           lambda x: x.astype(np.complex64) * R(0).random(),
           lambda x: np.add(x.astype(np.complex64), np.random.randint(3)),
           lambda x: x + np.random.randint(1, 3, dtype=np.int64),
           lambda x: x * np.random.randint(1, 3, dtype=np.int32),
           lambda x: np.where(x > 2, x, R(0).random()), lambda x: np.clip(x, 0, R(0).random()),
           lambda x: x.clip(0, np.random.randint(2, 4)),
           lambda x: np.select([x > 2], [x], default=R(0).random()),
           lambda x: np.linspace(x[0], R(0).random(), 3),
           lambda x: np.ldexp(x, np.random.randint(1, 3)), lambda x: np.logaddexp(x, R(0).random()),
           lambda x: [0.5] * x.argmax(), lambda x: [0.5] * np.random.randint(2, 3)]
    for fn in fns:
        want, got = fn(x), tracearray.compile(fn, device="cpu")(x)
        assert type(got) is type(want), (got, want)
        if isinstance(want, list):
            assert len(got) == len(want)
        else:
            assert np.asarray(got).dtype == np.asarray(want).dtype, (fn, got, want)


def test_weak_draws_in_functions_that_convert_their_items():
    """np.concatenate / np.append convert each item with np.asarray: a draw there is a
    strong float64, as in NumPy; np.interp computes in float64."""
    x = np.ones(3, np.float32)
    for fn in (lambda a: np.concatenate([a, [np.random.rand()]]),
               lambda a: np.append(a, np.random.rand()),
               lambda a: np.interp(np.random.rand(), a, a)):
        got, want = tracearray.compile(fn, device="cpu")(x), fn(x)
        assert np.asarray(got).dtype == np.asarray(want).dtype


def test_an_index_past_two_to_the_63():
    f = lambda a: [10, 20, 30][a[0]]   # noqa: E731
    a = np.array([2**64 - 1], np.uint64)
    with pytest.raises(IndexError):
        f(a)
    with pytest.raises(IndexError):
        tracearray.compile(f, device="cpu")(a)


def test_pythons_random_module_is_refused():
    """(acceptance probe, sixteenth session) random.random() / randrange in the function ran
    once while tracing: every call returned the trace's numbers."""
    import random

    def eps_greedy(q, eps=0.5):
        if random.random() < eps:
            return random.randrange(len(q))
        return int(np.argmax(q))

    with pytest.raises(tracearray.UnsupportedOperationError, match="Python's random module"):
        tracearray.compile(eps_greedy, device="cpu")(np.array([0.0, 1.0, 0.0]))


def test_a_random_object_is_refused_too():
    import random
    rnd = random.Random(0)
    with pytest.raises(tracearray.UnsupportedOperationError, match="Python's random module"):
        tracearray.compile(lambda a: a + rnd.random(), device="cpu")(np.zeros(2))
    assert "watched" not in repr(random.Random.__dict__.get("random"))   # (put back)


# ============================================================================================
# np.random's classes inside a trace; generators returned
# ============================================================================================

def test_a_generator_argument_returned_is_the_callers_own() -> None:
    """``return x, rng``: the caller gets its own Generator back (NumPy returns the same
    object), advanced by the call, at every call, as a keyword argument and inside a
    container too."""
    def step(x, rng):
        return x + rng.standard_normal(x.shape), rng

    def in_a_dict(x, *, rng):
        return {"x": x * 2, "state": [rng]}

    rng = np.random.default_rng(5)
    f = cpu(step)
    for _ in range(3):
        y, back = f(np.zeros(4), rng)
        assert back is rng and y.shape == (4,)
    before = rng.bit_generator.state["state"]["state"]
    out = cpu(in_a_dict)(np.ones(2), rng=rng)
    assert out["state"][0] is rng
    assert rng.bit_generator.state["state"]["state"] != before   # advanced by the call
    np.testing.assert_array_equal(out["x"], [2.0, 2.0])


class _Holder:
    def __init__(self, x):
        self.x = x


@pytest.mark.parametrize("fn, what", [
    (lambda x: _Holder(x + 1), "an object of type _Holder holding traced values"),
    (lambda x: {"a": [_Holder(x)]}, "_Holder"),
    (lambda x: (x, np.random.default_rng(1)), "a np.random.Generator made inside it")])
def test_returned_objects_holding_traced_values_are_refused(fn, what) -> None:
    """An object the result tree does not rebuild (not a tuple, list, dict, namedtuple or
    dataclass) that holds traced values is refused at the return: its attributes would be
    the trace's tracers (a later use failed far from the call)."""
    with pytest.raises(UnsupportedOperationError, match=what):
        cpu(fn)(np.ones(2))


def test_numpys_generator_classes_inside_a_trace() -> None:
    """np.random.Generator(np.random.PCG64(seed)) is default_rng(seed) (NumPy's definition),
    unseeded fresh at every call; SeedSequence of a known seed is NumPy's own; isinstance
    sees a traced generator as a Generator; bit generators of other streams, RandomState
    and an unseeded SeedSequence are refused by name (their draws would be frozen);
    outside a trace the classes are NumPy's."""
    def pcg(x, s):
        return (x + np.random.Generator(np.random.PCG64(s)).random(3),
                x + np.random.default_rng(s).random(3),
                x + np.random.default_rng(np.random.PCG64(s)).random(3))

    got = cpu(pcg)(np.zeros(3), 7)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[2], got[1])
    fresh = cpu(lambda x: x + np.random.Generator(np.random.PCG64()).random(3))
    assert not np.array_equal(fresh(np.zeros(3)), fresh(np.zeros(3)))
    seq = cpu(lambda x: x + np.random.default_rng(np.random.SeedSequence(11)).random(3))
    np.testing.assert_array_equal(seq(np.zeros(3)), seq(np.zeros(3)))
    same = cpu(lambda x, r: (isinstance(r, np.random.Generator),
                             isinstance(np.random.default_rng(1), np.random.Generator), x))
    assert same(np.zeros(1), np.random.default_rng(0))[:2] == (True, True)
    for fn, name in ((lambda x: x + np.random.RandomState(0).rand(3), "RandomState"),
                     (lambda x: x + np.random.Generator(np.random.Philox(3)).random(3),
                      "Philox"),
                     (lambda x: x + np.random.Generator(np.random.MT19937(3)).random(3),
                      "MT19937"),
                     (lambda x: x + np.random.default_rng(np.random.SeedSequence()).random(3),
                      "SeedSequence")):
        with pytest.raises(UnsupportedOperationError, match=name):
            cpu(fn)(np.zeros(3))
    assert type(np.random.default_rng(0)) is np.random.Generator
    assert np.random.Generator(np.random.PCG64(3)).random() == \
        np.random.default_rng(3).random()


def test_binomial_of_few_trials() -> None:
    """binomial(n, p) for n known while tracing, at most BINOMIAL_TRIALS_MAX (a dropout mask
    binomial(1, keep)): int64 counts in [0, n] with the binomial's mean and variance,
    parameters broadcast, a Python int without a size, the legacy np.random.binomial, and
    NumPy's errors; more trials, or trials read at run time, refused by name."""
    from tracearray.trace.random import BINOMIAL_TRIALS_MAX

    def draws(rng):
        return (rng.binomial(10, 0.3, size=200_000), rng.binomial([1, 5, 20], [0.5, 0.1, 0.9]),
                rng.binomial(3, 0.5), rng.binomial(1, 0.8, size=(400, 250)))

    a, b, c, d = cpu(draws)(np.random.default_rng(1))
    assert a.dtype == np.int64 and a.min() >= 0 and a.max() <= 10
    assert abs(a.mean() - 3.0) < 0.02 and abs(a.var() - 2.1) < 0.05
    assert b.shape == (3,) and b.dtype == np.int64 and 0 <= b[0] <= 1 and 0 <= b[2] <= 20
    assert type(c) is int and 0 <= c <= 3
    assert set(np.unique(d)) <= {0, 1} and abs(d.mean() - 0.8) < 0.01
    legacy = cpu(lambda x: np.random.binomial(1, 0.5, size=x.shape) + x)
    assert set(np.unique(legacy(np.zeros(1000)))) == {0.0, 1.0}
    for fn, error, match in (
            (lambda r: r.binomial(BINOMIAL_TRIALS_MAX + 1, 0.5), UnsupportedOperationError,
             "more than"),
            (lambda r: r.binomial(-1, 0.5), ValueError, "n < 0"),
            (lambda r: r.binomial(2, 1.5), ValueError, "p > 1")):
        with pytest.raises(error, match=match):
            cpu(fn)(np.random.default_rng(0))
    with pytest.raises(UnsupportedOperationError, match="number of trials"):
        cpu(lambda r, n: r.binomial(n, 0.5))(np.random.default_rng(0), np.int64(3))


def test_generators_of_one_bit_generator_share_its_stream() -> None:
    """Two Generators of one PCG64 draw from its one stream in turn (not the same numbers);
    a bit generator made inside is a np.random.BitGenerator to isinstance; binomial's n
    past int64 raises NumPy's OverflowError."""
    def share(x):
        bg = np.random.PCG64(1)
        g1, g2 = np.random.Generator(bg), np.random.Generator(bg)
        return g1.random(3), g2.random(3), isinstance(bg, np.random.BitGenerator)

    a, b, is_bitgen = cpu(share)(np.zeros(1))
    assert not np.array_equal(a, b) and is_bitgen
    with pytest.raises(OverflowError):
        cpu(lambda r: r.binomial(1e20, 0.3))(np.random.default_rng(0))


def test_lognormal_is_exp_of_a_normal_draw() -> None:
    """lognormal(mean, sigma): exp of a normal draw (NumPy's definition): float64, the
    log's mean and spread, a Python float without a size, the legacy function, NumPy's
    check of sigma."""
    g = cpu(lambda r: (r.lognormal(0.1, 0.2, size=200_000), r.lognormal(),
                       np.random.lognormal(0, 1, 3)))
    a, b, c = g(np.random.default_rng(0))
    assert a.dtype == np.float64 and a.min() > 0
    assert abs(np.log(a).mean() - 0.1) < 0.005 and abs(np.log(a).std() - 0.2) < 0.005
    assert type(b) is float and c.shape == (3,)
    with pytest.raises(ValueError, match="sigma < 0"):
        cpu(lambda r: r.lognormal(0, -1))(np.random.default_rng(0))


def test_scale_checks_read_the_sign_bit_as_numpy() -> None:
    """NumPy refuses a scale whose sign bit is set (-0.0 too) and lets NaN through."""
    for f in (lambda r, s: r.normal(0, s, size=3), lambda r, s: r.lognormal(0, s, size=3),
              lambda r, s: r.exponential(s, size=2)):
        assert np.isnan(cpu(f)(np.random.default_rng(0), np.nan)).all()
        with pytest.raises(ValueError, match="< 0"):
            cpu(f)(np.random.default_rng(0), -0.0)
