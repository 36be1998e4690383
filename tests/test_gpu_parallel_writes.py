"""Scatters and scans that the GPU runs in parallel along their ordered dimensions, with
NumPy's result, deterministically (gpu/codegen.py: ``scatter_last``).

``x[idx] = v`` with repeated positions keeps the last write in C order. On the GPU, when the
index dimensions are long (or the rows few: ``tile.ordered_in_parallel``), three passes of a
thread per element choose each target's winner by an atomic max of the element's position,
then the winner writes. Each case checks that the parallel strategy is the one that runs and
compares with NumPy under the SIMT emulator, whose grid-stride kernels run here with their
threads in reverse order (``reverse_threads``: a scheme that depended on which thread writes
first would differ), and on the CPU; ``-m gpu`` runs them on a GPU.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

import tracearray
from gpu_differential import assemble_kernels
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.testing import assert_matches_numpy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
HAVE_GPU = driver.is_available()
RNG = np.random.default_rng(11)


@pytest.fixture
def reversed_gpu():
    """The SIMT emulator, grid-stride kernels' threads run last to first."""
    from gpu_emulator import EmulatedDevice
    prev = driver.set_device_for_testing(EmulatedDevice(reverse_threads=True))
    yield
    driver.set_device_for_testing(prev)


def _set(x, key, v):
    y = x.copy()
    y[key] = v
    return y


def _case(fn: Callable, *args) -> tuple[Callable, tuple]:
    return fn, args


N = 1003                                   # past several 256-thread blocks, odd
X1 = RNG.standard_normal(N)
X2 = RNG.standard_normal((40, 3))
X3 = RNG.standard_normal((7, 4, 5))
HEAVY = np.zeros(5000, np.int64) + 3       # every position on one target
PERM = RNG.permutation(N)                  # no duplication
DUPS = RNG.integers(-N, N, 5000)           # repeated and negative
V1 = RNG.standard_normal(5000)

ASSIGN_CASES: dict[str, tuple[Callable, tuple]] = {
    "1-d, repeated and negative": _case(lambda x, i, v: _set(x, i, v), X1, DUPS, V1),
    "1-d, no duplication": _case(lambda x, i, v: _set(x, i, v), X1, PERM, V1[:N]),
    "1-d, all on one target": _case(lambda x, i, v: _set(x, i, v), X1, HEAVY, V1[:5000]),
    "size-1 target": _case(lambda x, i, v: _set(x, i, v), X1[:1], DUPS % 1, V1),
    "rows of a 2-d target (trailing dim)":
        _case(lambda x, i, v: _set(x, i, v[:, None] * np.arange(1.0, 4.0)), X2,
              RNG.integers(-40, 40, 900), V1[:900]),
    "columns y[:, j] = v": _case(lambda x, j, v: _set(x, (slice(None), j), v), X2,
                                 RNG.integers(-3, 3, 700), V1[:700]),
    "y3[i, :, j] = v (separated)":
        _case(lambda x, i, j, v: _set(x, (i, slice(None), j), v[:, None]), X3,
              RNG.integers(-7, 7, 300), RNG.integers(-5, 5, 300), V1[:300]),
    "two index arrays, 2-d broadcast":
        _case(lambda x, i, j, v: _set(x, (i[:, None], j[None, :]), v.reshape(60, 3)), X2,
              RNG.integers(0, 40, 60), np.array([2, 0, 2]), V1[:180]),
    "int16 target, cast values": _case(lambda x, i, v: _set((x * 100).astype(np.int16), i,
                                                            v * 1000), X1, DUPS, V1),
    "bool target": _case(lambda x, i, v: _set(x > 0, i, v > 0.5), X1, DUPS, V1),
    "complex target": _case(lambda x, i, v: _set(x * 1j, i, v + 2j), X1, DUPS, V1),
    "scalar value": _case(lambda x, i: _set(x, i, 7.5), X1, DUPS),
}


def _strategies(fn: Callable, args: tuple) -> list[str]:
    """The GPU strategies of the kernels ``fn`` compiles to for ``args``."""
    return [k.strategy for k in tracearray.compile(fn, device="cuda").lower(*args)
            .executable.kernels]


@pytest.mark.parametrize("name", sorted(ASSIGN_CASES))
def test_assignment_scatter_parallel(name: str, reversed_gpu) -> None:
    fn, args = ASSIGN_CASES[name]
    assert "scatter_last" in _strategies(fn, args)
    assert_matches_numpy(fn, *args, device="cuda")
    np.testing.assert_array_equal(tracearray.compile(fn, device="cuda")(*args), fn(*args))
    # the CPU keeps its sequential scatter (right and fast there): the same answer
    np.testing.assert_array_equal(tracearray.compile(fn, device="cpu")(*args), fn(*args))


def test_assignment_scatter_empty_index(reversed_gpu) -> None:
    """The same function, parallel for a long index, then with an empty one."""
    fn = lambda x, i, v: _set(x, i, v)     # noqa: E731
    g = tracearray.compile(fn, device="cuda")
    assert "scatter_last" in _strategies(fn, (X1, DUPS, V1))
    for args in ((X1, DUPS, V1), (X1, DUPS[:0], V1[:0])):
        np.testing.assert_array_equal(g(*args), fn(*args))


def test_assignment_scatter_out_of_range_raises(reversed_gpu) -> None:
    def f(x, i, v):
        y = x.copy()
        y[i] = v
        return y
    bad = DUPS.copy()
    bad[500] = N + 4
    g = tracearray.compile(f, device="cuda")
    assert "scatter_last" in _strategies(f, (X1, bad, V1))
    with pytest.raises(IndexError) as want:
        f(X1, bad, V1)
    with pytest.raises(IndexError) as got:
        g(X1, bad, V1)
    assert str(want.value).splitlines()[0] == str(got.value).splitlines()[0]
    assert "y[i] = v" in str(got.value)


def test_short_index_dims_over_many_rows_stay_sequential() -> None:
    """A few positions per column over many columns: a thread per column (one pass) is
    better than three passes; the policy is ``tile.ordered_in_parallel``."""
    from tracearray.tile.gpu import ordered_in_parallel
    x = np.zeros((4, 1 << 16))
    fn = lambda x, i, v: _set(x, i, v)     # noqa: E731
    args = (x, np.array([1, 1, 2]), np.ones((3, 1 << 16)))
    assert _strategies(fn, args) == ["map", "scatter"]
    assert not ordered_in_parallel(1 << 16, 3) and not ordered_in_parallel(1 << 16, 1000)
    assert ordered_in_parallel(1, 65) and ordered_in_parallel(1 << 16, 5000)
    assert not ordered_in_parallel(1, 64) and not ordered_in_parallel(None, 100)


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", ["1-d, repeated and negative", "y3[i, :, j] = v (separated)",
                                  "bool target", "complex target"])
def test_parallel_scatter_ptx(name: str) -> None:
    fn, args = ASSIGN_CASES[name]
    lowered = tracearray.compile(fn, device="cuda").lower(*args)
    assert "scatter_last" in [k.strategy for k in lowered.executable.kernels]
    assemble_kernels(lowered)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(ASSIGN_CASES))
def test_assignment_scatter_cuda(name: str) -> None:
    fn, args = ASSIGN_CASES[name]
    assert "scatter_last" in _strategies(fn, args)
    g = tracearray.compile(fn, device="cuda")
    first = g(*args)
    np.testing.assert_array_equal(first, fn(*args))
    for _ in range(3):       # run to run: the same bits
        np.testing.assert_array_equal(g(*args), first)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
def test_assignment_scatter_cuda_large() -> None:
    """2^22 writes into 2^12 targets: thousands of threads race for each target."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1 << 12).astype(np.float32)
    i = rng.integers(0, 1 << 12, 1 << 22)
    v = rng.standard_normal(1 << 22).astype(np.float32)
    fn = lambda x, i, v: _set(x, i, v)     # noqa: E731
    np.testing.assert_array_equal(tracearray.compile(fn, device="cuda")(x, i, v), fn(x, i, v))



# ------------------------------------------------------------------------------------------
# Scans: scan_tiled (tiles scanned in parallel, then their totals, then the offsets added)
# ------------------------------------------------------------------------------------------

# tiles of 128 (the shortest), the last one short: small enough for the emulator, which runs
# the warp-per-tile scans as blocks of OS threads (a GPU-only test below takes long rows)
L = 1500
SCAN_CASES: dict[str, tuple[Callable, tuple]] = {
    "int64 cumsum (exact)": _case(lambda x: np.cumsum(x), RNG.integers(-99, 99, L)),
    "int8 cumsum wraps": _case(lambda x: np.cumsum(x, dtype=np.int8),
                               RNG.integers(-99, 99, L).astype(np.int8)),
    "bool cumsum (the count of x[mask])": _case(lambda x: np.cumsum(x > 0),
                                               RNG.standard_normal(L)),
    "float64 cumsum": _case(lambda x: np.cumsum(x), RNG.standard_normal(L)),
    "float32 cumsum of a computed value": _case(lambda x: np.cumsum(np.exp(x) - 1),
                                                RNG.standard_normal(L).astype(np.float32)),
    "float16 cumsum": _case(lambda x: np.cumsum(x), RNG.standard_normal(1500)
                            .astype(np.float16)),
    "complex128 cumsum": _case(lambda x: np.cumsum(x * (1 + 2j)), RNG.standard_normal(L)),
    "float64 cumprod": _case(lambda x: np.cumprod(1 + x * 1e-3), RNG.standard_normal(L)),
    "int64 cumprod wraps": _case(lambda x: np.cumprod(x), RNG.integers(-3, 4, L)),
    "cummax with NaN": _case(lambda x: np.maximum.accumulate(np.where(x > 3.5, np.nan, x)),
                             RNG.standard_normal(L)),
    "cummin uint16": _case(lambda x: np.minimum.accumulate(x),
                           RNG.integers(0, 60000, L).astype(np.uint16)),
    "exact multiple of the tile (128 x 12)": _case(lambda x: np.cumsum(x),
                                                   RNG.integers(-9, 9, 128 * 12)),
    "one past a multiple": _case(lambda x: np.cumsum(x), RNG.integers(-9, 9, 128 * 12 + 1)),
    "three rows along axis 1": _case(lambda x: np.cumsum(x, axis=1),
                                     RNG.standard_normal((3, 1029))),
    "along axis 0 (strided), 5 columns": _case(lambda x: np.cumsum(x, axis=0),
                                               RNG.integers(-5, 5, (1100, 5))),
    "scan of a transposed view": _case(lambda x: np.cumsum(x.T, axis=1),
                                       RNG.integers(-5, 5, (1029, 2))),
    "x[x > 0] (compaction through the count)": _case(lambda x: x[x > 0] * 2,
                                                     RNG.standard_normal(L)),
}


@pytest.mark.parametrize("name", sorted(SCAN_CASES))
def test_scan_tiled(name: str, reversed_gpu) -> None:
    fn, args = SCAN_CASES[name]
    assert "scan_tiled" in _strategies(fn, args)
    assert_matches_numpy(fn, *args, device="cuda")
    got = tracearray.compile(fn, device="cuda")(*args)
    if got.dtype.kind not in "fc":        # exact in any association
        np.testing.assert_array_equal(got, fn(*args))
    assert_matches_numpy(fn, *args, device="cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("n", [20011, 1 << 22, (1 << 22) + 33])
def test_scan_tiled_long_rows_cuda(n: int) -> None:
    """Long rows on the GPU: tiles longer than 128 (a square root of the length), every
    warp's chunks, the last tile and chunk short; float sums within the in-order bound,
    integers exact, the same bits run to run."""
    x = RNG.standard_normal(n).astype(np.float32)
    assert "scan_tiled" in _strategies(lambda v: np.cumsum(v), (x,))
    assert_matches_numpy(lambda v: np.cumsum(v), x, device="cuda")
    i = RNG.integers(-9, 9, n)
    g = tracearray.compile(lambda v: np.cumsum(v), device="cuda")
    np.testing.assert_array_equal(g(i), np.cumsum(i))
    np.testing.assert_array_equal(g(x), g(x))


def test_scan_tiled_float_is_deterministic(reversed_gpu) -> None:
    """The tile length is a function of the length alone: the same bits on every run and
    for any thread order (here: the forward order of the emulator, then the reverse)."""
    from gpu_emulator import EmulatedDevice
    x = RNG.standard_normal(L)
    g = tracearray.compile(lambda x: np.cumsum(x), device="cuda")
    assert "scan_tiled" in _strategies(lambda x: np.cumsum(x), (x,))
    first = g(x)
    prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        np.testing.assert_array_equal(tracearray.compile(lambda x: np.cumsum(x),
                                                         device="cuda")(x), first)
    finally:
        driver.set_device_for_testing(prev)


def test_scan_stays_a_thread_per_row_for_many_short_rows(reversed_gpu) -> None:
    from tracearray.tile.gpu import scan_tile_length
    x = RNG.standard_normal((1 << 15, 8))
    fn = lambda x: np.cumsum(x, axis=1)    # noqa: E731
    assert _strategies(fn, (x,)) == ["scan"]
    assert _strategies(fn, (x[:1],)) == ["scan"]          # one short row
    assert scan_tile_length(10**8) == 10**4 and scan_tile_length(5) == 128


def test_scan_tiled_empty_and_size_1(reversed_gpu) -> None:
    """The same function, tiled for a long row, then with no rows, one element, short rows."""
    fn = lambda x: np.cumsum(x, axis=-1)    # noqa: E731
    g = tracearray.compile(fn, device="cuda")
    long_row = RNG.integers(-9, 9, (1, 5000))
    assert _strategies(fn, (long_row,)) == ["scan_tiled"]
    for x in (long_row, np.zeros((0, 5000), np.int64), np.ones(1), np.ones((2, 1))):
        np.testing.assert_array_equal(g(x), fn(x))


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", ["float64 cumsum", "bool cumsum (the count of x[mask])",
                                  "complex128 cumsum", "float16 cumsum", "cummax with NaN",
                                  "along axis 0 (strided), 5 columns"])
def test_scan_tiled_ptx(name: str) -> None:
    fn, args = SCAN_CASES[name]
    lowered = tracearray.compile(fn, device="cuda").lower(*args)
    assert "scan_tiled" in [k.strategy for k in lowered.executable.kernels]
    assemble_kernels(lowered)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(SCAN_CASES))
def test_scan_tiled_cuda(name: str) -> None:
    fn, args = SCAN_CASES[name]
    assert "scan_tiled" in _strategies(fn, args)
    assert_matches_numpy(fn, *args, device="cuda")
    g = tracearray.compile(fn, device="cuda")
    first = g(*args)
    for _ in range(3):
        np.testing.assert_array_equal(g(*args), first)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
def test_scan_tiled_cuda_large() -> None:
    x = np.random.default_rng(5).integers(-9, 9, 1 << 24)
    np.testing.assert_array_equal(tracearray.compile(lambda x: np.cumsum(x),
                                                     device="cuda")(x), np.cumsum(x))


# ------------------------------------------------------------------------------------------
# ufunc.at with an order-dependent combine: scatter_sorted (a stable radix sort by target,
# then a thread per target combining its run in NumPy's order: bit for bit)
# ------------------------------------------------------------------------------------------

def _at(ufunc, x, key, *v, dtype=None):
    y = x.astype(dtype) if dtype is not None else x.copy()
    ufunc.at(y, key, *v)
    return y


BIG = RNG.standard_normal(70001)            # offsets of 17 bits: three radix passes
AT_CASES: dict[str, tuple[Callable, tuple]] = {
    "np.add.at float64, repeated and negative": _case(lambda x, i, v: _at(np.add, x, i, v),
                                                      X1, DUPS, V1),
    "np.add.at, no duplication": _case(lambda x, i, v: _at(np.add, x, i, v), X1, PERM,
                                       V1[:N]),
    "np.add.at, all on one target": _case(lambda x, i, v: _at(np.add, x, i, v), X1, HEAVY,
                                          V1 * 1e3),
    "np.add.at, size-1 target": _case(lambda x, i, v: _at(np.add, x, i, v), X1[:1], DUPS % 1,
                                      V1),
    "np.add.at, 70001 targets (three radix passes)":
        _case(lambda x, i, v: _at(np.add, x, i, v), BIG, RNG.integers(-70001, 70001, 5000), V1),
    "np.add.at float32 += float64 (cast loop)":
        _case(lambda x, i, v: _at(np.add, x, i, v * 1e-3, dtype=np.float32), X1, DUPS, V1),
    "np.subtract.at rows (trailing dim)":
        _case(lambda x, i, v: _at(np.subtract, x, i, v[:, None] * np.arange(1.0, 4.0)), X2,
              RNG.integers(-40, 40, 900), V1[:900]),
    "np.multiply.at (:, j)": _case(lambda x, j, v: _at(np.multiply, x, (slice(None), j),
                                                       1 + v * 1e-2), X2,
                                   RNG.integers(-3, 3, 700), V1[:700]),
    "np.maximum.at with NaN": _case(lambda x, i, v: _at(np.maximum, x, i,
                                                        np.where(v > 2.5, np.nan, v)),
                                    X1, DUPS, V1),
    "np.minimum.at float32": _case(lambda x, i, v: _at(np.minimum, x.astype(np.float32), i,
                                                       v.astype(np.float32)), X1, DUPS, V1),
    "np.negative.at (unary)": _case(lambda x, i: _at(np.negative, x, i), X1, DUPS),
    "np.add.at int8 wraps (no 8-bit atomics)":
        _case(lambda x, i: _at(np.add, x, i, 100, dtype=np.int8), X1, DUPS),
    "np.add.at y3[i, :, j] (separated)":
        _case(lambda x, i, j, v: _at(np.add, x, (i, slice(None), j), v[:, None]), X3,
              RNG.integers(-7, 7, 300), RNG.integers(-5, 5, 300), V1[:300]),
    "np.add.at 2-d index array": _case(lambda x, i, v: _at(np.add, x, i.reshape(50, 20),
                                                           v.reshape(50, 20)), X1,
                                       DUPS[:1000], V1[:1000]),
    "np.bincount with weights": _case(lambda i, w: np.bincount(i, w, minlength=50),
                                      RNG.integers(0, 40, 3000), V1[:3000]),
}


@pytest.mark.parametrize("name", sorted(AT_CASES))
def test_ufunc_at_sorted(name: str, reversed_gpu) -> None:
    fn, args = AT_CASES[name]
    assert "scatter_sorted" in _strategies(fn, args)
    assert_matches_numpy(fn, *args, device="cuda")
    got, want = tracearray.compile(fn, device="cuda")(*args), fn(*args)
    np.testing.assert_array_equal(got, want)          # NumPy's order: bit for bit
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(tracearray.compile(fn, device="cpu")(*args), want)


def test_ufunc_at_sorted_empty_index(reversed_gpu) -> None:
    """The same function, sorted for a long index, then with an empty one."""
    fn = lambda x, i, v: _at(np.add, x, i, v)     # noqa: E731
    g = tracearray.compile(fn, device="cuda")
    assert "scatter_sorted" in _strategies(fn, (X1, DUPS, V1))
    for args in ((X1, DUPS, V1), (X1, DUPS[:0], V1[:0])):
        np.testing.assert_array_equal(g(*args), fn(*args))


def test_ufunc_at_sorted_out_of_range_raises(reversed_gpu) -> None:
    def f(x, i, v):
        y = x.copy()
        np.add.at(y, i, v)
        return y
    bad = DUPS.copy()
    bad[4000] = -N - 1
    assert "scatter_sorted" in _strategies(f, (X1, bad, V1))
    with pytest.raises(IndexError) as want:
        f(X1, bad, V1)
    with pytest.raises(IndexError) as got:
        tracearray.compile(f, device="cuda")(X1, bad, V1)
    assert str(want.value).splitlines()[0] == str(got.value).splitlines()[0]
    assert "np.add.at(y, i, v)" in str(got.value)


def test_ufunc_at_sorted_updates_the_argument(reversed_gpu) -> None:
    def into(out, i, v):
        np.add.at(out, i, v)
    base = np.zeros((N, 2))
    got, want = base.copy(), base.copy()
    assert "scatter_sorted" in _strategies(into, (got[:, 1], DUPS, V1))
    tracearray.compile(into, device="cuda")(got[:, 1], DUPS, V1)
    into(want[:, 1], DUPS, V1)
    np.testing.assert_array_equal(got, want)


def test_sort_split_is_a_function_of_the_sizes() -> None:
    from tracearray.tile.gpu import radix_passes, sort_chunks
    assert [sort_chunks(n) for n in (1, 256, 257, 1 << 20, 1 << 26)] == [1, 1, 2, 4096,
                                                                         1 << 15]
    assert [radix_passes(d) for d in (1, 255, 256, 70001, 1 << 26)] == [1, 1, 2, 3, 4]


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", ["np.add.at float64, repeated and negative",
                                  "np.add.at float32 += float64 (cast loop)",
                                  "np.negative.at (unary)",
                                  "np.add.at int8 wraps (no 8-bit atomics)",
                                  "np.maximum.at with NaN", "np.add.at y3[i, :, j] (separated)"])
def test_ufunc_at_sorted_ptx(name: str) -> None:
    fn, args = AT_CASES[name]
    lowered = tracearray.compile(fn, device="cuda").lower(*args)
    assert "scatter_sorted" in [k.strategy for k in lowered.executable.kernels]
    assemble_kernels(lowered)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(AT_CASES))
def test_ufunc_at_sorted_cuda(name: str) -> None:
    fn, args = AT_CASES[name]
    assert "scatter_sorted" in _strategies(fn, args)
    g = tracearray.compile(fn, device="cuda")
    first = g(*args)
    np.testing.assert_array_equal(first, fn(*args))
    for _ in range(3):
        np.testing.assert_array_equal(g(*args), first)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
def test_ufunc_at_sorted_cuda_large() -> None:
    """2^22 float32 contributions into 2^20 targets, and 2^20 into one."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(1 << 20).astype(np.float32)
    i = rng.integers(0, 1 << 20, 1 << 22)
    v = rng.standard_normal(1 << 22).astype(np.float32)
    fn = lambda x, i, v: _at(np.add, x, i, v)     # noqa: E731
    np.testing.assert_array_equal(tracearray.compile(fn, device="cuda")(x, i, v), fn(x, i, v))
    one = np.zeros(1 << 20, np.int64)
    np.testing.assert_array_equal(tracearray.compile(fn, device="cuda")(x[:1], one, v[:1 << 20]),
                                  fn(x[:1], one, v[:1 << 20]))


def test_assignment_scatter_checks_every_value_gather(reversed_gpu) -> None:
    """``y[i] = x[j]``: a bad j at a position that loses (a later write to the same target
    wins) still raises NumPy's IndexError: every value is computed, only winners stored."""
    def f(x, i, j):
        y = x.copy()
        y[i] = x[j]
        return y
    i = np.zeros(200, np.int64)        # every write on target 0: only the last one wins
    j = np.arange(200) % N
    assert "scatter_last" in _strategies(f, (X1, i, j))
    np.testing.assert_array_equal(tracearray.compile(f, device="cuda")(X1, i, j), f(X1, i, j))
    j[5] = N + 3
    with pytest.raises(IndexError) as want:
        f(X1, i, j)
    with pytest.raises(IndexError) as got:
        tracearray.compile(f, device="cuda")(X1, i, j)
    assert str(want.value).splitlines()[0] == str(got.value).splitlines()[0]


# ------------------------------------------------------------------------------------------
# Random scatters and scans on the parallel paths (reversed thread order)
# ------------------------------------------------------------------------------------------

@settings(max_examples=examples(12), deadline=None)
@given(n=st.integers(1, 300), m=st.integers(65, 700), cols=st.integers(1, 3),
       op=st.sampled_from(["set", "add", "subtract", "multiply", "maximum", "minimum"]),
       dtype=st.sampled_from(["float64", "float32", "int64", "int16", "uint8"]),
       seed=st.integers(0, 2**16))
def test_random_parallel_scatters(n, m, cols, op, dtype, seed) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, cols)) * 50).astype(dtype)
    idx = rng.integers(-n, n, m)
    v = (rng.standard_normal((m, cols)) * 50).astype(dtype)

    def f(x, idx, v):
        y = x.copy()
        if op == "set":
            y[idx] = v
        else:
            getattr(np, op).at(y, idx, v)
        return y
    from gpu_emulator import EmulatedDevice
    prev = driver.set_device_for_testing(EmulatedDevice(reverse_threads=True))
    try:
        strategies = _strategies(f, (x, idx, v))
        assert {"scatter_last", "scatter_sorted", "scatter_atomic"} & set(strategies)
        np.testing.assert_array_equal(tracearray.compile(f, device="cuda")(x, idx, v),
                                      f(x, idx, v))
    finally:
        driver.set_device_for_testing(prev)


@settings(max_examples=examples(8), deadline=None)
@given(rows=st.integers(1, 3), length=st.integers(65, 3000),
       op=st.sampled_from(["cumsum", "cumprod", "maximum", "minimum"]),
       dtype=st.sampled_from(["int64", "int32", "uint8", "float64", "float32"]),
       seed=st.integers(0, 2**16))
def test_random_parallel_scans(rows, length, op, dtype, seed) -> None:
    x = (np.random.default_rng(seed).standard_normal((rows, length)) * 3).astype(dtype)
    if op == "cumprod":
        x = (np.abs(x) % 2 + 1).astype(dtype) if dtype[0] in "iu" else 1 + x * 1e-3

    def f(x):
        if op in ("cumsum", "cumprod"):
            return getattr(np, op)(x, axis=1)
        return getattr(np, op).accumulate(x, axis=1)
    from gpu_emulator import EmulatedDevice
    prev = driver.set_device_for_testing(EmulatedDevice(reverse_threads=True))
    try:
        assert _strategies(f, (x,)) == ["scan_tiled"]
        assert_matches_numpy(f, x, device="cuda")
        if np.dtype(dtype).kind != "f":
            np.testing.assert_array_equal(tracearray.compile(f, device="cuda")(x), f(x))
    finally:
        driver.set_device_for_testing(prev)
