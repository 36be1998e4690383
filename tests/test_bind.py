"""The binding step (tracearray/tile/bind.py): one function of a kernel, its argument layouts
and a frozen tiling policy gives everything both runtimes launch; ``explain()`` reports the
bound kernel; a policy shapes launches, never the code or (on the CPU) a result.

The GPU cases run under the SIMT emulator (tests/gpu_emulator.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tracearray
from numpy_compare import assert_matches
from tracearray.tile import TileSpec
from tracearray.tile.bind import BoundKernel, Launch, bind_kernel, split_range
from tracearray.tile.policy import (MEASURED_DEVICE_DEFAULTS, CpuTiling, GpuTiling, gpu_tiling,
                                   policy_for, with_overrides)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((40, 300)).astype(np.float32)
SHORT = RNG.standard_normal((64, 20)).astype(np.float32)
LONG = RNG.standard_normal((6, 3000)).astype(np.float32)


def column_sum(x):
    return x.sum(axis=0)


def transposed(x):
    return np.exp(x.T) + 1.0


def row_norm(x):
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True))


def full_sum(x):
    return (x * 2.0).sum()


def cumsum(x):
    return np.cumsum(x, axis=1)


def _exe(fn, *args, device="cpu"):
    return tracearray.compile(fn, device=device).lower(*args).executable


# ------------------------------------------------------------------ the CPU runtime
@pytest.mark.parametrize("fn, driver", [(column_sum, "col"), (transposed, "map2d"),
                                        (row_norm, "row"), (full_sum, "full"),
                                        (cumsum, "scan")])
def test_cpu_kernels_are_bound_and_explain_says_what_runs(fn, driver):
    """The CPU executable's kernels are tile.bind's: the strategy that runs (col for a
    column sum the plan calls a row reduction, map2d for a transposed read), its chunks,
    and explain() reports that driver and its split."""
    exe = _exe(fn, X)
    bound = exe.bound_kernels()
    assert bound and all(isinstance(b, BoundKernel) for b in bound.values())
    kernels = {i: ck for i, ck in enumerate(exe.kernels) if ck is not None}
    assert set(bound) == set(kernels)
    for i, b in bound.items():
        ck = kernels[i]
        assert ck.bound is b and ck.geometry is b.geometry and ck.chunks == b.chunks
        assert np.array_equal(ck.params, b.params)
    assert driver in {b.strategy for b in bound.values()}
    text = str(tracearray.compile(fn, device="cpu").explain(X))
    assert f" {driver} " in text and "runs: loops" in text
    assert ("partial-result slots" if driver == "full" else "chunk") in text


def test_explain_reports_the_driver_not_the_plans_strategy():
    """A column reduction is planned as a ``row`` kernel and runs as ``col``: explain() says
    col (it said row before the binding step)."""
    compiled = tracearray.compile(column_sum, device="cpu")
    assert [s.strategy for s in compiled.lower(X).tiles] == ["row"]
    report = compiled.explain(X).kernels[0]
    assert report.strategy == "col"
    assert report.launch.startswith("loops [40, 300]: 1 parallel iteration")


def test_split_range_follows_the_policy():
    one = CpuTiling(threads=1)
    assert split_range(10 ** 6, 1, one) == [(0, 10 ** 6)]
    four = CpuTiling(threads=4)
    chunks = split_range(10 ** 6, 1, four)
    assert len(chunks) == 16 and chunks[0] == (0, 62500) and chunks[-1][1] == 10 ** 6
    small = CpuTiling(threads=4, min_task_work=1 << 20)
    assert split_range(10 ** 6, 1, small) == [(0, 10 ** 6)]
    coarse = CpuTiling(threads=4, tasks_per_thread=1)
    assert len(split_range(10 ** 6, 1, coarse)) == 4


def test_policies_are_frozen_and_overrides_are_checked():
    p = GpuTiling(sms=132, smem_optin=227 << 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.map_block = 128      # type: ignore[misc]
    q = with_overrides(p, {"row_grid_per_sm": "16", "min_task_work": "4096"})
    assert q.row_grid_per_sm == 16 and q.map_block == p.map_block   # the CPU's field: skipped
    assert with_overrides(CpuTiling(2), {"min_task_work": "0x1000"}).min_task_work == 4096
    with pytest.raises(ValueError, match="no tiling policy has a field 'row_grid_per_smm'"):
        with_overrides(p, {"row_grid_per_smm": "16"})
    with pytest.raises(ValueError, match="not a positive integer"):
        with_overrides(p, {"map_block": "0"})
    with pytest.raises(ValueError, match="not a positive integer"):
        with_overrides(p, {"map_block": "many"})


def test_tiling_variable_reaches_the_cpu_executable(monkeypatch):
    monkeypatch.setenv("TRACEARRAY_TILING", "min_task_work=1,tasks_per_thread=64")
    assert policy_for(CpuTiling(2)).tasks_per_thread == 64
    monkeypatch.setattr(tracearray.cpu.pool, "num_threads", lambda: 2)
    exe = _exe(transposed, X)
    assert exe.tiling.min_task_work == 1
    (b,) = exe.bound_kernels().values()
    assert len(b.chunks) > 1
    monkeypatch.setenv("TRACEARRAY_TILING", "min_task_work")
    with pytest.raises(ValueError, match="is not name=value"):
        policy_for(CpuTiling(2))


@pytest.mark.parametrize("fn", [column_sum, transposed, row_norm, full_sum, cumsum])
def test_a_cpu_policy_changes_the_split_not_the_code_or_the_result(fn, monkeypatch):
    """Bit-identical results and the same kernel descriptions (the code's key) under the
    default policy and one that cuts the work into the smallest tasks."""
    want = tracearray.compile(fn, device="cpu")(X)
    default = _exe(fn, X)
    monkeypatch.setenv("TRACEARRAY_TILING", "min_task_work=1,tasks_per_thread=97")
    monkeypatch.setattr(tracearray.cpu.pool, "num_threads", lambda: 3)
    compiled = tracearray.compile(fn, device="cpu")
    got = compiled(X)
    np.testing.assert_array_equal(got, want)
    fine = compiled.lower(X).executable
    assert [ck.description for ck in fine.kernels if ck] == \
        [ck.description for ck in default.kernels if ck]


def test_bind_kernel_alone_needs_no_runtime():
    """bind_kernel on a plan's spec and plain layouts: geometry, parameters, driver and
    launches, with no device and no code (``lower`` omitted)."""
    from tracearray.tile.layout import affine_params
    compiled = tracearray.compile(row_norm, device="cpu")
    spec: TileSpec = compiled.lower(SHORT).tiles[-1]
    kernel = spec.kernel
    rank = len(kernel.space)
    loads = [affine_params((SHORT.shape[1], 1), 0, a.index, rank) for a in kernel.body.accesses]
    stores = [affine_params((SHORT.shape[1], 1), 0, st.index, rank) for st in kernel.stores]
    gpu = bind_kernel(spec, loads, stores, GpuTiling(sms=2, smem_optin=48 << 10), "k")
    assert gpu.code is None and gpu.strategy == "thread_row"    # rows of 20 elements
    assert all(isinstance(ln, Launch) for ln in gpu.launches)
    cpu = bind_kernel(spec, loads, stores, CpuTiling(threads=2), "k")
    assert cpu.strategy == "row" and cpu.chunks == [(0, 64)]


# ------------------------------------------------------------------ the GPU runtime
@pytest.fixture
def gpu_device(emulated_gpu):
    return None


@pytest.mark.parametrize("x, driver", [(X, "warp_row"), (LONG, "block_row"),
                                       (SHORT, "thread_row"), (X[:, ::-12], "thread_row")])
def test_gpu_row_drivers_are_bound_and_reported(gpu_device, x, driver):
    compiled = tracearray.compile(row_norm, device="cuda")
    assert_matches(compiled(x), row_norm(x), "fused")
    exe = compiled.lower(x).executable
    bound = exe.bound_kernels()
    assert [b.strategy for b in bound.values()] == [driver]
    (b,) = bound.values()
    gk = next(k for k in exe.kernels if k.bound_kernel is b)
    assert gk.launches == b.launches and gk.strategy == driver
    report = compiled.explain(x).kernels[0]
    assert report.strategy == driver and "grid " in report.launch and "threads" in report.launch


H100 = "NVIDIA H100 80GB HBM3"     # a device measured better with other map fields


def test_a_device_measured_better_gets_its_fields_and_overrides_still_apply(monkeypatch):
    for name, fields in MEASURED_DEVICE_DEFAULTS.items():
        measured = gpu_tiling(name, 132, 227 << 10)
        assert all(getattr(measured, f) == v for f, v in fields.items()), name
        assert measured != GpuTiling(132, 227 << 10), name
    name, fields = H100, MEASURED_DEVICE_DEFAULTS[H100]
    measured = gpu_tiling(name, 132, 227 << 10)
    other = gpu_tiling("some other GPU", 132, 227 << 10)
    assert other == GpuTiling(132, 227 << 10)        # the class's defaults
    assert measured != other
    monkeypatch.setenv("TRACEARRAY_TILING", "map_block=128")
    assert policy_for(measured).map_block == 128 and \
        policy_for(measured).grid_per_sm == fields["grid_per_sm"]


def test_the_gpu_runtime_binds_with_its_devices_measured_policy(gpu_device, monkeypatch):
    from tracearray.gpu import driver
    name, fields = H100, MEASURED_DEVICE_DEFAULTS[H100]
    x = np.linspace(-2, 2, 5000, dtype=np.float32)
    f = lambda x: np.tanh(x) * 3.0 + x     # noqa: E731
    monkeypatch.setattr(driver._device, "name", name, raising=False)
    compiled = tracearray.compile(f, device="cuda")
    assert_matches(compiled(x), f(x), "fused")
    exe = compiled.lower(x).executable
    assert exe.tiling.map_block == fields["map_block"]
    (b,) = exe.bound_kernels().values()
    assert {launch.block for launch in b.launches} == {fields["map_block"]}


POLICY_PROGRAMS = {
    "map": (lambda x: np.tanh(x) * 3.0 + x, (X,)),
    "rows": (row_norm, (LONG,)),
    "warp_rows": (row_norm, (X,)),
    "thread_rows": (row_norm, (SHORT,)),
    "column": (column_sum, (X,)),
    "full": (lambda x: (x.astype(np.float64).sum(), x.max()), (X,)),
    "cumsum_long": (lambda x: np.cumsum(x, axis=1), (LONG[:2, :1100],)),
    "add_at": (lambda x, i: add_at(x, i), (X[0], RNG.integers(0, 50, 300))),
    "add_at_int": (lambda x, i: add_at(x, i), ((X[0] * 100).astype(np.int64),
                                                RNG.integers(0, 50, 300))),
}


def add_at(x, i):
    out = np.zeros(50, dtype=x.dtype)
    np.add.at(out, i, x)
    return out


STARVED = ("map_block=32,grid_per_sm=1,thread_block=32,row_elements_per_thread=4096,"
           "row_grid_per_sm=1,warp_row_grid_per_sm=1,row_pipeline_max_bytes=1,"
           "full_work_per_thread=4096,full_slots_per_sm=1")


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("name", sorted(POLICY_PROGRAMS))
def test_gpu_results_hold_under_a_starved_policy(gpu_device, name, monkeypatch):
    """Every driver gives the same bits when the policy gives it one multiprocessor's worth
    of tiny blocks (grid-stride loops run many trips, block_row's pipeline is off), but a
    full float sum, whose association follows its slot count: within the sum's bound."""
    fn, args = POLICY_PROGRAMS[name]
    default = _outputs(tracearray.compile(fn, device="cuda")(*args))
    monkeypatch.setenv("TRACEARRAY_TILING", STARVED)
    compiled = tracearray.compile(fn, device="cuda")
    starved = _outputs(compiled(*args))
    want = _outputs(fn(*args))
    for d, s_, w in zip(default, starved, want, strict=True):
        if name == "full" and np.asarray(w).dtype == np.float64:
            x = args[0].astype(np.float64)
            for got in (d, s_):
                assert_matches(got, w, "reduction", scale=np.abs(x).sum(), n=x.size)
        else:
            np.testing.assert_array_equal(s_, d)
    exe = compiled.lower(*args).executable
    assert exe.tiling.grid_per_sm == 1 and exe.tiling.map_block == 32
    assert exe.bound_kernels()
    for b in exe.bound_kernels().values():
        for ln in b.launches:
            assert ln.grid <= exe.tiling.sms     # one block (per pass) a multiprocessor
            assert not (b.strategy == "block_row" and ln.extra == (2,))   # no pipeline


@pytest.mark.parametrize("grid_per_sm, flag", [(1, 2), (1 << 16, 1)],
                         ids=["rows-per-block", "block-per-row"])
def test_block_row_pipelines_only_when_a_block_has_a_next_row(gpu_device, monkeypatch,
                                                              grid_per_sm, flag):
    """block_row's two row buffers (flag 2: the next row copied in during this one) only
    when the grid is smaller than the rows; with a block per row, one buffer (flag 1) and
    half the shared memory. Same bits either way."""
    x = RNG.standard_normal((12, 4096)).astype(np.float32)

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    want = tracearray.compile(softmax, device="cuda")(x)
    monkeypatch.setenv("TRACEARRAY_TILING", f"row_grid_per_sm={grid_per_sm}")
    compiled = tracearray.compile(softmax, device="cuda")
    np.testing.assert_array_equal(compiled(x), want)
    (b,) = compiled.lower(x).executable.bound_kernels().values()
    (ln,) = b.launches
    assert b.strategy == "block_row" and ln.extra == (flag,)
    assert ln.smem == flag * 4096 * 4
    assert (ln.grid < x.shape[0]) == (flag == 2)


def test_block_rows_groups_follow_what_a_row_holds(gpu_device, monkeypatch):
    """block_rows takes 16 rows a block where each row's own values are a few registers
    held for the whole sweep (pairwise distances: a row's 3 coordinates), in blocks of at
    most ``block_rows_held_block`` threads, and 8 rows in blocks sized by the row's length
    where a row streams (a matrix-vector product) or holds more (k-means' 8 coordinates and
    an argmin); the threads change launches only: min and argmin give the same bits under
    other thread counts."""
    from tracearray.tile import gpu as drivers
    monkeypatch.setattr(drivers, "BLOCK_ROWS_MIN", 8)
    # rows of 1100 (past warp_row) at 18 elements a thread: blocks of 64 by the length,
    # held rows' blocks of at most 32 (small blocks: the emulator's barriers are threads')
    monkeypatch.setenv("TRACEARRAY_TILING", "row_elements_per_thread=18,block_rows_held_block=32")
    n = 1100
    p = RNG.standard_normal((17, 3)).astype(np.float32)
    q = RNG.standard_normal((n, 3)).astype(np.float32)
    p8 = RNG.standard_normal((17, 8)).astype(np.float32)
    q8 = RNG.standard_normal((n, 8)).astype(np.float32)
    m = RNG.standard_normal((17, n)).astype(np.float32)

    def pairwise(a, c):
        return ((a[:, None, :] - c[None, :, :]) ** 2).sum(-1).min(1)

    def kmeans(a, c):
        return np.argmin(((a[:, None, :] - c[None, :, :]) ** 2).sum(-1), axis=1)

    def matvec(a, w):
        return (a * w).sum(1)
    cases = ((pairwise, (p, q), 16), (kmeans, (p8, q8), 8), (matvec, (m, q[:, 0]), 8))
    results = {}
    for fn, args, group in cases:
        compiled = tracearray.compile(fn, device="cuda")
        if group == 16 or fn is kmeans:     # (the emulator's barriers are slow: two runs)
            results[fn] = compiled(*args)
        exe = compiled.lower(*args).executable
        (b,) = exe.bound_kernels().values()
        (ln,) = b.launches
        assert b.strategy == "block_rows"
        assert drivers.block_rows_group(b.geometry) == group, fn
        pol = exe.tiling
        assert ln.block == (32 if group == 16 else 64), fn
        assert ln.grid == min(-(-17 // group), pol.row_grid_per_sm * pol.sms), fn
    monkeypatch.setenv("TRACEARRAY_TILING", "row_elements_per_thread=18,block_rows_held_block=64")
    for fn, args, _group in cases[:2]:
        compiled = tracearray.compile(fn, device="cuda")
        np.testing.assert_array_equal(compiled(*args), results[fn])
        (b,) = compiled.lower(*args).executable.bound_kernels().values()
        assert b.launches[0].block == 64


# ------------------------------------------------------------------ row cache parts
def mixed_item_rows(x0):
    """Soak gpu-2026-12-06-g program 203: a warp_row kernel caching an int16 row and a
    bool row (3 bytes per element), found at rows of 64, 71 and 78 (held in registers
    since: the tests use longer rows)."""
    v0 = (lambda t: (t.__setitem__([6], 255), t)[1])(x0.copy())
    v2 = np.expand_dims(v0, -3)
    v3 = np.where(v2 >= 0, x0, v2)
    return np.std(np.nanvar(v3, axis=-1), keepdims=True), v0 * (0.5 - 2j)


def _mixed_item_inputs(widths=(192, 199, 206)):
    """Rows the warp_row kernel sweeps with its row cache (past the 128 elements it holds in
    registers: gpu/codegen.py REGISTER_ROW_SLOTS), 576, 597 and 618 bytes of cache a row."""
    base = np.random.default_rng(3).integers(-300, 300, (16, max(widths))).astype(np.int16)
    return [np.ascontiguousarray(base[:, :n]) for n in widths]


def test_row_cache_parts_start_aligned():
    from tracearray.tile.gpu import ROW_CACHE_ALIGN, row_cache_part_bytes
    assert ROW_CACHE_ALIGN == 16
    assert [row_cache_part_bytes(n, 3) for n in (64, 71, 78, 0)] == [192, 224, 240, 0]
    assert row_cache_part_bytes(5, 8) == 48 and row_cache_part_bytes(4, 4) == 16


def test_warp_row_parts_of_mixed_item_sizes(gpu_device):
    """Each warp's part of the row cache starts 16-byte aligned, and the launch asks for
    the rounded parts (the emulator faults on a misaligned shared-memory access as a GPU
    does: the next test; test_mixed_item_rows_on_the_gpu runs it on a GPU)."""
    compiled = tracearray.compile(mixed_item_rows, device="cuda")
    for x in _mixed_item_inputs():
        got, want = compiled(x), mixed_item_rows(x)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_array_equal(got[1], want[1])
        rows = [b for b in compiled.lower(x).executable.bound_kernels().values()
                if b.strategy == "warp_row"]
        assert len(rows) == 1
        (ln,) = rows[0].launches
        n = x.shape[1]
        assert ln.smem == 8 * (-(-3 * n // 16) * 16), (n, ln.smem)


def test_the_emulator_faults_on_unaligned_row_cache_parts(gpu_device, monkeypatch, tmp_path):
    """Negative control of the emulator's alignment check (tests/gpu_emulator.py): with the
    parts unrounded, as before the fix, rows of 199 fault as rows of 71 did on the H100."""
    from tracearray.gpu import codegen, kernelcache
    from tracearray.gpu.driver import CudaError
    from tracearray.tile import gpu as tile_gpu
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))   # (the unrounded code's)
    monkeypatch.setattr(tile_gpu, "ROW_CACHE_ALIGN", 1)
    monkeypatch.setattr(codegen, "ROW_CACHE_ALIGN", 1)
    kernelcache.clear_memory()
    try:
        x = _mixed_item_inputs()[1]
        with pytest.raises(CudaError, match="CUDA_ERROR_MISALIGNED_ADDRESS"):
            tracearray.compile(mixed_item_rows, device="cuda")(x)
    finally:
        kernelcache.clear_memory()     # no later test may find the unrounded kernel


@pytest.mark.gpu
def test_mixed_item_rows_on_the_gpu():
    """The same on a real GPU, which faults on a misaligned shared-memory load."""
    if not tracearray.gpu.is_available():
        pytest.skip("needs an NVIDIA GPU")
    compiled = tracearray.compile(mixed_item_rows, device="cuda")
    for x in _mixed_item_inputs() + _mixed_item_inputs((64, 71, 78)):   # (and in registers)
        got, want = compiled(x), mixed_item_rows(x)
        np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-12)
        np.testing.assert_array_equal(np.asarray(got[1]), want[1])


# ------------------------------------------------------------------ autotuning (opt-in)
def _fake_times(monkeypatch, fast_grid=None, failing=()):
    """tuning.time_launches replaced (the emulator has no events): a candidate's time is
    1 ms, 0.5 for launches of grid ``fast_grid``; grids in ``failing`` raise CudaError."""
    from tracearray.gpu import tuning
    from tracearray.gpu.driver import CudaError
    calls = []

    def fake(dev, loaded, pointers):
        grids = [g for _fn, g, _b, _s, _v, _a in loaded]
        calls.append(grids)
        if any(g in failing for g in grids):
            raise CudaError("launch failed (test)")
        return 0.5 if fast_grid in grids else 1.0
    monkeypatch.setattr(tuning, "time_launches", fake)
    tuning.clear_memory()
    return calls


def test_autotune_is_off_by_default(gpu_device, monkeypatch):
    monkeypatch.delenv("TRACEARRAY_AUTOTUNE", raising=False)
    calls = _fake_times(monkeypatch)
    tracearray.compile(row_norm, device="cuda")(RNG.standard_normal((64, 200)).astype(np.float32))
    assert calls == []


def test_autotune_keeps_the_fastest_and_remembers_it(gpu_device, monkeypatch, tmp_path,
                                                     capsys):
    """warp_row's candidates vary its blocks per multiprocessor. With the default made 1
    per SM (``TRACEARRAY_TILING``; the emulator has 4 SMs: a grid of 4), the others cover
    the 10 blocks of 8 rows; the fake clock makes a grid of 10 the fastest, so 32 per SM,
    the first such candidate, is kept. The winner runs, gives the default's bits, is
    printed, and a new executable binds it without timing, from memory and then from the
    disk."""
    from tracearray.gpu import tuning
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "print")
    monkeypatch.setenv("TRACEARRAY_TILING", "warp_row_grid_per_sm=1")
    x = RNG.standard_normal((80, 40)).astype(np.float32)   # 10 blocks of 8 rows
    fast = 10
    calls = _fake_times(monkeypatch, fast_grid=fast)
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "0")
    want = tracearray.compile(row_norm, device="cuda")(x)
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "print")
    monkeypatch.setenv("TRACEARRAY_TILING", "warp_row_grid_per_sm=1")
    compiled = tracearray.compile(row_norm, device="cuda")
    np.testing.assert_array_equal(compiled(x), want)
    assert [g[0] for g in calls] == [4, 10, 10, 10]
    (b,) = compiled.lower(x).executable.bound_kernels().values()
    assert b.launches[0].grid == fast and b.strategy == "warp_row"
    err = capsys.readouterr().err
    assert "autotune" in err and "warp_row_grid_per_sm=32: 0.5000 ms  <- kept" in err
    assert any((tmp_path / "tuning").iterdir())
    # a new compiled function (a new executable) finds the winner: no timing
    calls.clear()
    again = tracearray.compile(row_norm, device="cuda")
    again(x)
    assert calls == []
    (b2,) = again.lower(x).executable.bound_kernels().values()
    assert b2.launches[0].grid == fast
    # ... and from the disk, after the process's memory is cleared
    tuning.clear_memory()
    third = tracearray.compile(row_norm, device="cuda")
    third(x)
    assert calls == []
    assert third.lower(x).executable.bound_kernels()[0].launches[0].grid == fast


def test_autotune_scores_failed_candidates_as_infinite(gpu_device, monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "1")
    monkeypatch.setenv("TRACEARRAY_TILING", "warp_row_grid_per_sm=1")
    x = RNG.standard_normal((80, 40)).astype(np.float32)
    # the fastest candidate fails: the default is kept
    calls = _fake_times(monkeypatch, fast_grid=10, failing={10})
    compiled = tracearray.compile(row_norm, device="cuda")
    np.testing.assert_allclose(compiled(x), row_norm(x), rtol=2e-6, atol=1e-7)
    assert len(calls) == 4
    (b,) = compiled.lower(x).executable.bound_kernels().values()
    assert b.launches[0].grid == 4        # the default


def test_autotune_when_every_candidate_fails(gpu_device, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "print")
    monkeypatch.setenv("TRACEARRAY_TILING", "warp_row_grid_per_sm=1")
    x = RNG.standard_normal((80, 40)).astype(np.float32)
    calls = _fake_times(monkeypatch, failing={4, 10})
    compiled = tracearray.compile(row_norm, device="cuda")
    np.testing.assert_allclose(compiled(x), row_norm(x), rtol=2e-6, atol=1e-7)
    assert len(calls) == 4
    assert compiled.lower(x).executable.bound_kernels()[0].launches[0].grid == 4
    assert "every candidate failed" in capsys.readouterr().err
    assert not (tmp_path / "tuning").exists() or not any((tmp_path / "tuning").iterdir())


def test_autotune_skips_what_must_not_run_twice(gpu_device, monkeypatch, tmp_path):
    """Full reductions (partials sized by the policy), scatters and kernels that write an
    argument in place (Plan.in_place) are never timed; maps writing a new array are."""
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "1")
    calls = _fake_times(monkeypatch)

    def axpy(a, x, y):
        y += a * x

    x = RNG.standard_normal(5000).astype(np.float32)
    tracearray.compile(full_sum, device="cuda")(x)
    assert calls == []
    tracearray.compile(add_at, device="cuda")(x[:300], RNG.integers(0, 50, 300))
    assert calls == [[1], [1], [1], [1], [1]]     # the zeros' map alone (50 elements)
    calls.clear()
    y0 = RNG.standard_normal(5000).astype(np.float32)
    dy = tracearray.gpu.Array.from_numpy(y0)
    dx = tracearray.gpu.Array.from_numpy(x)
    compiled = tracearray.compile(axpy, device="cuda")
    assert compiled(np.float32(2.0), dx, dy) is None
    assert compiled.lower(np.float32(2.0), dx, dy).plan.in_place
    np.testing.assert_array_equal(dy.numpy(), y0 + np.float32(2.0) * x)
    assert calls == []


def test_a_damaged_tuning_entry_is_ignored(gpu_device, monkeypatch, tmp_path):
    from tracearray.gpu import tuning
    from tracearray.tile.policy import GpuTiling
    from tracearray.tile.tune import decode_winner, encode_winner
    p = GpuTiling(sms=4, smem_optin=1 << 16)
    good = encode_winner("warp_row", dataclasses.replace(p, warp_row_grid_per_sm=16))
    assert decode_winner("warp_row", good, p).warp_row_grid_per_sm == 16
    for bad in (b"", good[:-3], good.replace(b"16", b"-1"), good.replace(b"16", b"1.5"),
                encode_winner("map", p), b"TATUNE1\n{\"warp_row_grid_per_sm\": 16, \"x\": 1}"):
        assert decode_winner("warp_row", bad, p) is None
    # a damaged entry on disk: the kernel is timed again, the entry replaced
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRACEARRAY_AUTOTUNE", "1")
    monkeypatch.setenv("TRACEARRAY_TILING", "warp_row_grid_per_sm=1")
    x = RNG.standard_normal((80, 40)).astype(np.float32)
    calls = _fake_times(monkeypatch, fast_grid=10)
    tracearray.compile(row_norm, device="cuda")(x)
    assert calls
    (entry,) = [f for f in (tmp_path / "tuning").rglob("*") if f.is_file()]
    entry.write_bytes(entry.read_bytes()[:-5])
    tuning.clear_memory()
    calls.clear()
    from tracearray.diskcache import CacheWarning
    with pytest.warns(CacheWarning, match="refused the disk cache entry"):
        tracearray.compile(row_norm, device="cuda")(x)
    assert calls      # timed again


# ------------------------------------------------------------------ warp_row's row groups
def _normalize_rows(x):
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), 1e-12)


def _row_stats(x):
    return np.argmax(x, axis=1), x - np.mean(x, axis=1, keepdims=True), np.max(x, axis=1)


def _scale_rows_in_place(x):
    x /= np.sum(x, axis=1, keepdims=True)
    return x


@pytest.mark.parametrize("group", [1, 2, 4])
def test_warp_row_groups_of_rows(gpu_device, monkeypatch, tmp_path, group):
    """warp_row lowered with ``group`` rows a warp (``tile.gpu.WARP_ROW_GROUP``): every row
    count (a last group past the end, whose repeated rows store nothing), rows shorter and
    longer than a warp, an arg-reduction beside a full-space output, an argument updated in
    place, and the launch's block following the lowering's fact rather than the constant."""
    from tracearray.gpu import kernelcache
    from tracearray.tile import gpu as drivers
    monkeypatch.setenv("TRACEARRAY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(kernelcache, "_memory", type(kernelcache._memory)())
    monkeypatch.setattr(drivers, "WARP_ROW_GROUP", group)
    rng = np.random.default_rng(group)
    norm = tracearray.compile(_normalize_rows, device="cuda")
    stats = tracearray.compile(_row_stats, device="cuda")
    for rows, n in [(1, 40), (3, 100), (13, 128), (17, 33), (9, 1000), (5, 257)]:
        x = rng.standard_normal((rows, n)).astype(np.float32)
        np.testing.assert_allclose(norm(x), _normalize_rows(x), rtol=2e-6, atol=1e-7)
        for got, want in zip(stats(x), _row_stats(x)):
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    (b,) = [b for b in norm.lower(x).executable.bound_kernels().values()]
    assert b.strategy == "warp_row" and b.launches[0].block == 32 * (8 // group)
    in_place = tracearray.compile(_scale_rows_in_place, device="cuda")
    import tracearray.gpu as tgpu
    # (float64 rows of 700: the block's 8 rows take 44 KB, past the row cache's limit, so
    # the stores' phase reads x from memory again)
    for rows, n, dt in [(1, 64, np.float32), (5, 64, np.float32), (11, 64, np.float32),
                        (5, 700, np.float64), (6, 700, np.float64)]:
        x = (rng.random((rows, n)) + 0.5).astype(dt)
        want = x / x.sum(axis=1, keepdims=True)
        a = tgpu.Array.from_numpy(x)
        in_place(a)
        np.testing.assert_allclose(np.asarray(a), want, rtol=2e-6)
    # a kernel lowered with another group keeps its own launch shape
    monkeypatch.setattr(drivers, "WARP_ROW_GROUP", 1 if group > 1 else 2)
    y = rng.standard_normal((7, 50)).astype(np.float32)     # a new size, the same kernel
    np.testing.assert_allclose(norm(y), _normalize_rows(y), rtol=2e-6, atol=1e-7)
    (b,) = [b for b in norm.lower(y).executable.bound_kernels().values()]
    assert b.launches[0].block == 32 * (8 // group)
