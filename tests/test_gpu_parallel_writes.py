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

import tracearray
from gpu_differential import assemble_kernels
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.testing import assert_matches_numpy

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
    fn = lambda x, i, v: _set(x, i, v)     # noqa: E731
    args = (X1, DUPS[:0], V1[:0])
    np.testing.assert_array_equal(tracearray.compile(fn, device="cuda")(*args), fn(*args))


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
    from tracearray.tile import ordered_in_parallel
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

L = 20011                                  # tiles of 142: the last one short
SCAN_CASES: dict[str, tuple[Callable, tuple]] = {
    "int64 cumsum (exact)": _case(lambda x: np.cumsum(x), RNG.integers(-99, 99, L)),
    "int8 cumsum wraps": _case(lambda x: np.cumsum(x, dtype=np.int8),
                               RNG.integers(-99, 99, L).astype(np.int8)),
    "bool cumsum (the count of x[mask])": _case(lambda x: np.cumsum(x > 0),
                                               RNG.standard_normal(L)),
    "float64 cumsum": _case(lambda x: np.cumsum(x), RNG.standard_normal(L)),
    "float32 cumsum of a computed value": _case(lambda x: np.cumsum(np.exp(x) - 1),
                                                RNG.standard_normal(L).astype(np.float32)),
    "float16 cumsum": _case(lambda x: np.cumsum(x), RNG.standard_normal(3001)
                            .astype(np.float16)),
    "complex128 cumsum": _case(lambda x: np.cumsum(x * (1 + 2j)), RNG.standard_normal(L)),
    "float64 cumprod": _case(lambda x: np.cumprod(1 + x * 1e-3), RNG.standard_normal(L)),
    "int64 cumprod wraps": _case(lambda x: np.cumprod(x), RNG.integers(-3, 4, L)),
    "cummax with NaN": _case(lambda x: np.maximum.accumulate(np.where(x > 3.5, np.nan, x)),
                             RNG.standard_normal(L)),
    "cummin uint16": _case(lambda x: np.minimum.accumulate(x),
                           RNG.integers(0, 60000, L).astype(np.uint16)),
    "exact multiple of the tile (128 x 128)": _case(lambda x: np.cumsum(x),
                                                    RNG.integers(-9, 9, 128 * 128)),
    "one past a multiple": _case(lambda x: np.cumsum(x), RNG.integers(-9, 9, 128 * 128 + 1)),
    "three rows along axis 1": _case(lambda x: np.cumsum(x, axis=1),
                                     RNG.standard_normal((3, 4099))),
    "along axis 0 (strided), 5 columns": _case(lambda x: np.cumsum(x, axis=0),
                                               RNG.integers(-5, 5, (3001, 5))),
    "scan of a transposed view": _case(lambda x: np.cumsum(x.T, axis=1),
                                       RNG.integers(-5, 5, (2049, 2))),
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
    from tracearray.gpu.codegen import scan_tile_length
    x = RNG.standard_normal((1 << 15, 8))
    fn = lambda x: np.cumsum(x, axis=1)    # noqa: E731
    assert _strategies(fn, (x,)) == ["scan"]
    assert _strategies(fn, (x[:1],)) == ["scan"]          # one short row
    assert scan_tile_length(10**8) == 10**4 and scan_tile_length(5) == 128


def test_scan_tiled_empty_and_size_1(reversed_gpu) -> None:
    for x in (np.zeros((0, 5000)), np.ones(1), np.ones((2, 1))):
        np.testing.assert_array_equal(tracearray.compile(lambda x: np.cumsum(x, axis=-1),
                                                         device="cuda")(x),
                                      np.cumsum(x, axis=-1))


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
