"""The GPU backend end to end without a GPU: kernels run under the SIMT emulator.

``gpu_emulator.EmulatedDevice`` stands in for the CUDA driver (host memory poisoned with 0xCD;
each kernel's LLVM IR JIT-compiled for the host, one OS thread per GPU thread, real barriers
and warp shuffles). This checks the GPU strategies' logic (block reductions, two-stage full
reductions, the tiled matmul and its fused epilogue, gathers), the runtime (arguments, launch
shapes, buffers, NumPy and device inputs) and ``Array`` (interfaces, DLPack, the caching
allocator) on every machine. What it cannot check (real memory ordering, PTX JIT, driver
errors, speed) is for ``test_gpu_cuda.py`` on a GPU.
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tracearray
from gpu_emulator import EmulatedDevice
from library_forms import (CHOLESKY_FORMS, FFT_FORMS, LINALG_FORMS, MATMUL_FORMS, QR_FORMS,
                           SORT_FORMS, SPECTRAL_FORMS, _sym, _systems, spectral_implementations,
                           spy_on_device)
from numpy_compare import assert_matches
from tracearray.gpu import Array, as_array, driver
from tracearray.gpu.driver import CudaError

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(autouse=True)
def emulated():
    dev = EmulatedDevice()
    prev = driver.set_device_for_testing(dev)
    yield dev
    driver.set_device_for_testing(prev)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def gpu(fn):
    return tracearray.compile(fn, device="cuda")


def check(fn, *args, family="fused", **kw):
    got = gpu(fn)(*args)
    want = fn(*args)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_matches(g, w, family, **kw)
    else:
        assert_matches(got, want, family, **kw)
    return got


X = rng().standard_normal((20, 70)).astype(np.float32)

PROGRAMS = {
    "elementwise": (lambda x: np.exp(x) * 2 + np.tanh(x), (X,)),
    "transposed": (lambda x: x.T + 1, (X,)),
    "softmax": (lambda x: np.exp(x - x.max(-1, keepdims=True))
                / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), (X,)),
    "layernorm": (lambda x: (x - x.mean(-1, keepdims=True))
                  / np.sqrt(x.var(-1, keepdims=True) + 1e-5), (X,)),
    "logsumexp": (lambda x: np.log(np.exp(x - x.max(-1)[:, None]).sum(-1)) + x.max(-1), (X,)),
    "column_sum": (lambda x: x.sum(0), (X,)),
    "full_sum_var": (lambda x: (x.sum(), x.astype(np.float64).var()), (X,)),
    "short_rows": (lambda x: x.reshape(20, 35, 2).sum(-1), (X,)),
    "cumsum": (lambda x: np.cumsum(x, 1), (X,)),
    "pairwise_min": (lambda p, q: ((p[:, None, :] - q[None, :, :]) ** 2).sum(-1).min(1),
                     (rng(1).standard_normal((50, 3)), rng(2).standard_normal((40, 3)))),
    "gather": (lambda x: x.T.reshape(-1) * 2, (X,)),
    "concat": (lambda x: np.concatenate([x, x * 2], axis=1), (X,)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(name: str) -> None:
    fn, args = PROGRAMS[name]
    check(fn, *args)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [1, 0, None])
def test_arg_reductions_ties_and_nans(op: str, axis) -> None:
    x = rng(3).integers(0, 4, (9, 133)).astype(np.float32)   # many ties
    x[2, 50] = np.nan
    x[2, 7] = np.nan
    x[5, ::3] = -np.inf
    f = getattr(np, op)
    check(lambda a: f(a, axis=axis), x, family="exact")
    check(lambda a: f(a.astype(np.int16), axis=axis), x[:, :60] if axis is None else x,
          family="exact")


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float64"])
def test_reductions_in_every_strategy(dtype: str) -> None:
    x = rng(4).integers(0, 3, (6, 300)).astype(dtype)
    for axis in (1, 0, None):
        check(lambda a: (a.max(axis=axis), a.min(axis=axis), a.any(axis=axis),
                         a.all(axis=axis)), x, family="exact")
        if dtype != "bool":
            check(lambda a: a.sum(axis=axis), x, family="fused")


@pytest.mark.parametrize("shapes", [((5, 7), (7, 4)), ((70, 130), (130, 65)), ((7,), (7, 3)),
                                    ((4, 7), (7,)), ((2, 3, 5, 7), (3, 7, 4)),
                                    ((1, 5, 7), (3, 7, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 5))],
                         ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16", "bool"])
def test_matmul(shapes, dtype: str) -> None:
    # (bool: NumPy's any(a & b); the kernel added its i1 products, a parity: probe of the
    # twelfth session)
    a = rng(5).integers(-3, 4, shapes[0]).astype(dtype)
    b = rng(6).integers(-3, 4, shapes[1]).astype(dtype)
    check(lambda x, y: x @ y, a, b, family="exact")


def test_matmul_transposed_operands_and_fused_epilogue(emulated) -> None:
    a = rng(7).standard_normal((33, 70)).astype(np.float32)
    w = rng(8).standard_normal((50, 70)).astype(np.float32)
    bias = rng(9).standard_normal(50).astype(np.float32)
    fn = lambda x, w, b: np.maximum(x @ w.T + b, 0.0)   # noqa: E731
    got = check(fn, a, w, bias)
    lowered = gpu(fn).lower(a, w, bias)
    assert [k.strategy for k in lowered.executable.kernels] == ["matmul"], "epilogue not fused"
    assert not lowered.executable.produced or all(n.op != "matmul"
                                                  for n in lowered.executable.produced)
    # the product is also an output: stored and used by the epilogue
    both = lambda x, w, b: (x @ w.T, np.maximum(x @ w.T + b, 0.0))   # noqa: E731
    check(both, a, w, bias)
    del got


def test_empty_inputs() -> None:
    z = np.zeros((0, 3), np.float32)
    check(lambda x: (x.sum(), x.sum(0), x * 2, np.cumsum(x, 0)), z, family="exact")


# ------------------------------------------------------------------------------------------
# Device arrays, interfaces, allocator
# ------------------------------------------------------------------------------------------

def test_device_arrays_in_device_arrays_out(emulated) -> None:
    x = X.copy()
    dx = Array.from_numpy(x)
    f = gpu(lambda a: (a * 2, a.sum(1)))
    y, s = f(dx)
    assert isinstance(y, Array) and isinstance(s, Array)
    assert y.shape == (20, 70) and y.dtype == np.float32
    np.testing.assert_array_equal(y.numpy(), x * 2)
    np.testing.assert_allclose(np.asarray(s), x.sum(1), rtol=1e-5)
    # NumPy in: NumPy out
    y2, s2 = f(x)
    assert isinstance(y2, np.ndarray)
    # mixed: device
    g = gpu(lambda a, b: a + b)
    assert isinstance(g(dx, x), Array)


def test_strided_device_input_and_noncontiguous_numpy() -> None:
    x = np.arange(60, dtype=np.float64).reshape(6, 10)
    base = Array.from_numpy(x)
    view = Array(base.ptr + 8, (6, 4), np.float64, (80, 16), owner=base)   # x[:, 1:9:2]
    np.testing.assert_array_equal(view.numpy(), x[:, 1:9:2])
    f = gpu(lambda a: a * 10)
    np.testing.assert_array_equal(f(view).numpy(), x[:, 1:9:2] * 10)
    np.testing.assert_array_equal(f(x[:, 1:9:2]), x[:, 1:9:2] * 10)
    rev = Array(base.ptr + 59 * 8, (60,), np.float64, (-8,), owner=base)
    np.testing.assert_array_equal(rev.numpy(), x.ravel()[::-1])
    np.testing.assert_array_equal(f(rev).numpy(), x.ravel()[::-1] * 10)


def test_cuda_array_interface_and_foreign_arrays(emulated) -> None:
    a = Array.from_numpy(X)
    cai = a.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (20, 70) and cai["typestr"] == "<f4"
    assert cai["data"] == (a.ptr, False) and cai["strides"] is None
    assert cai["stream"] == emulated.stream_handle

    class Foreign:   # what CuPy / Numba / PyTorch expose
        def __init__(self, arr):
            self.arr = arr
            self.__cuda_array_interface__ = dict(arr.__cuda_array_interface__, stream=None)

    foreign = Foreign(a)
    view = as_array(foreign)
    assert view.ptr == a.ptr and view._owner is foreign
    out = gpu(lambda x: x + 1)(foreign)
    assert isinstance(out, Array)
    np.testing.assert_array_equal(out.numpy(), X + 1)


def test_dlpack_export_and_import(emulated) -> None:
    a = Array.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4))
    assert a.__dlpack_device__() == (2, 0)

    class ViaDLPack:   # a producer with DLPack only (like JAX without CAI)
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, stream=None):
            return self.arr.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    v = as_array(ViaDLPack(a))
    assert v.ptr == a.ptr and v.shape == (3, 4) and v.dtype == np.int32
    np.testing.assert_array_equal(v.numpy(), np.arange(12).reshape(3, 4))
    from tracearray.gpu import array as array_mod
    assert len(array_mod._exported) == 1      # held by v, through its DLPack deleter
    cap = a.__dlpack__()   # never consumed: its destructor must release it
    assert len(array_mod._exported) == 2
    del cap
    assert len(array_mod._exported) == 1
    del v
    assert not array_mod._exported


def test_caching_allocator_reuses_memory(emulated) -> None:
    import gc
    f = gpu(lambda x: np.exp(x).sum(0) + 1)
    dx = Array.from_numpy(X)
    f(dx)
    gc.collect()   # trace/pytree.unflatten's recursive closure keeps outputs until a GC pass
    before = emulated.allocator.driver_allocs
    for _ in range(5):
        r = f(dx)
        del r
        gc.collect()
    assert emulated.allocator.driver_allocs == before


def _heat(u):
    for _ in range(40):
        u = u.copy()
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] +
                                               u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def test_a_loop_of_steps_holds_a_few_grids_not_one_per_step(emulated, monkeypatch) -> None:
    """40 unrolled steps store 40 grids; a grid whose last kernel is queued lends its
    memory to a later one (tile/lifetimes.py; the stream orders them), so a call holds a
    few grids, as NumPy's loop does, and gives NumPy's result."""
    u = rng(3).random((64, 96))
    du = Array.from_numpy(u)
    sizes = []
    alloc = emulated.mem_alloc
    monkeypatch.setattr(emulated, "mem_alloc", lambda n: sizes.append(n) or alloc(n))
    got = gpu(_heat)(du)
    grids = [n for n in sizes if n >= u.nbytes]      # (the rest: the update's small tables)
    assert 1 <= len(grids) <= 4, sizes
    assert_matches(got.numpy(), _heat(u), "fused")


def test_buffers_shared_across_a_call_keep_every_value() -> None:
    from test_cpu_memory import _long_lived     # (its values live long, or die early)
    from tracearray.testing import compare_with_numpy
    x, w = rng(4).random((37, 60)), rng(5).random((60, 30))
    cmp = compare_with_numpy(_long_lived, x, w, device="cuda")
    assert cmp.ok, cmp.report()


@pytest.mark.parametrize("name", ["stencil_step", "overlapping", "in_a_loop"])
def test_large_region_writes_run_as_joins_on_the_device(name) -> None:
    from test_assignment import REGION_PROGRAMS
    from tracearray.testing import compare_with_numpy
    cmp = compare_with_numpy(REGION_PROGRAMS[name], rng(7).standard_normal((83, 97)),
                             device="cuda")
    assert cmp.ok, cmp.report()


def test_out_of_memory_retries_then_raises(emulated, monkeypatch) -> None:
    x = Array.from_numpy(X)
    del x            # one cached block
    assert emulated.allocator.cached > 0
    calls = []

    def oom(nbytes):
        calls.append(nbytes)
        raise CudaError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY", None,
                        "CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(emulated, "mem_alloc", oom)
    with pytest.raises(MemoryError, match="CUDA out of memory"):
        Array.empty((1 << 20,), np.float32)
    assert len(calls) == 2 and emulated.allocator.cached == 0


def test_unavailable_gpu_is_a_clear_error_at_call_time(monkeypatch) -> None:
    driver.set_device_for_testing(None)
    monkeypatch.setattr(driver, "_device_error", driver.GpuUnavailableError("no GPU here"))
    f = tracearray.compile(lambda x: x + 1, device="cuda")
    assert ".entry" in f.lower(np.ones(3)).as_text("ptx")
    with pytest.raises(driver.GpuUnavailableError, match="no GPU here"):
        f(np.ones(3))
    assert not driver.is_available()
    auto = tracearray.compile(lambda x: x + 1)
    np.testing.assert_array_equal(auto(np.ones(3)), 2 * np.ones(3))   # "auto": the CPU


def test_workloads_match_float64_reference() -> None:
    from benchmarks import workloads as W
    for name in W.names():
        w = W.get(name)
        inputs = W.make_inputs(name, "check", seed=0)
        args = [inputs[a.name] for a in w.args]
        out = gpu(w.fn)(*args)
        assert W.max_rel_err(out, W.reference(w, inputs)) <= w.tol, name


del ctypes, os


@pytest.mark.parametrize("n", [70, 12000])   # a row that fits the cache, one that does not
def test_block_rows_keep_reread_inputs_in_shared_memory(emulated, n: int) -> None:
    """block_row (gpu/codegen.py ``row_cached_accesses``): inputs read by the first phase
    and again later (softmax's x, layernorm with a per-column weight, a masked sum and argmax)
    are stored to dynamic shared memory in the first phase and read back from it; a row too
    long for ROW_CACHE_MAX_BYTES runs without the cache. Both give NumPy's result."""
    from tracearray.gpu.codegen import ROW_CACHE_MAX_BYTES
    x = rng(5).standard_normal((3, n)).astype(np.float32)
    w = rng(6).standard_normal(n).astype(np.float32)
    flags = np.array([True, False] * (n // 2))
    sizes = []

    def launched(fn, *args):
        before = len(emulated.launches)
        got = check(fn, *args)
        sizes.extend(emulated.launches[before:])
        return got

    launched(lambda a: np.exp(a - a.max(-1, keepdims=True))
             / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True), x)
    launched(lambda a, g: (a - a.mean(-1, keepdims=True))
             / np.sqrt(a.var(-1, keepdims=True) + 1e-5) * g, x, w)
    launched(lambda a, m: (np.where(m, a, 0).sum(-1), np.argmax(np.where(m, a, -a), -1)), x,
             flags)
    check(lambda a: np.argmax(a, -1), x, family="exact")
    fits = n * (4 + 4 + 1) <= ROW_CACHE_MAX_BYTES
    assert [s for s in emulated.smem_sizes if s] if fits else not any(emulated.smem_sizes)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("cached", [True, False], ids=["row-cache", "re-read"])
def test_block_row_l2_eviction_hints(emulated, monkeypatch, cached: bool, dtype: str) -> None:
    """``codegen.ROW_L2_HINTS`` (both bits): block_row's vector loads from global memory and
    its full-space stores carry L2 eviction policies (inline PTX, 4-, 8- and 16-byte
    accesses; the emulator runs them as plain accesses). With the row cache and with the
    rows re-read from global memory (no shared memory), NumPy's results."""
    from tracearray.gpu import codegen, kernelcache
    monkeypatch.setattr(codegen, "ROW_L2_HINTS", 3)
    monkeypatch.setattr(kernelcache, "_memory", type(kernelcache._memory)())
    monkeypatch.setattr(kernelcache, "_disk_cache", lambda: None)   # (unhinted kernels)
    if not cached:
        monkeypatch.setattr(codegen, "ROW_CACHE_MAX_BYTES", 0)
        monkeypatch.setenv("TRACEARRAY_TILING", "row_pipeline_max_bytes=1")
    x = rng(10).standard_normal((6, 1028)).astype(dtype)
    w = rng(11).standard_normal(1028).astype(dtype)
    check(lambda a: np.exp(a - a.max(-1, keepdims=True))
          / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True), x)
    check(lambda a, g: (a - a.mean(-1, keepdims=True))
          / np.sqrt(a.var(-1, keepdims=True) + 1e-3) * g, x, w)
    # the code is the same either way (the launch's flag picks the path)
    irs = "\n".join(k.ir for k in kernelcache._memory.values())
    for form in ("ld.global.L2::cache_hint", "st.global.L2::cache_hint", "L2::evict_last",
                 "L2::evict_first"):
        assert form in irs
    assert any(emulated.smem_sizes) == cached


@pytest.mark.parametrize("dtypes", [("float32",), ("float64",), ("float16",),
                                    ("float64", "float32")],
                         ids=["f32", "f64", "f16", "f64+f32"])
@pytest.mark.parametrize("n", [1028, 1030])   # aligned rows (cp.async) and not (scalar)
def test_block_row_cache_prefetched_by_cp_async(emulated, dtypes, n) -> None:
    """An aligned block_row's cached accesses are copied into the row cache by cp.async
    (4, 8 or 16 bytes per copy: float16, float32/64 and mixed items) before the first phase,
    which then reads them from the cache; rows with an odd length take the scalar loop, which
    fills the cache itself. NumPy's results both ways, over several rows per block."""
    x = rng(8).standard_normal((7, n)).astype(dtypes[0])
    w = rng(9).standard_normal(n).astype(dtypes[-1])

    def fn(a, g):
        c = a - a.mean(-1, keepdims=True)
        return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-3) * g + a * g
    f = gpu(fn)
    (kernel,) = f.lower(x, w).executable.kernels
    assert kernel.strategy == "block_row" and "cp.async" in kernel.ptx
    check(fn, x, w)
    check(fn, x[:, 2:], w[2:])    # rows starting 2 elements in: unaligned for 16 bytes
    assert any(emulated.smem_sizes)


@pytest.mark.parametrize("n, buffers", [(1028, 2), (1030, 2), (9000, 1), (16400, 0)])
def test_block_row_pipelines_its_rows(emulated, monkeypatch, n: int, buffers: int) -> None:
    """block_row's row cache holds two rows when both fit and a block has more than one row
    (the launch's flag 2): the next row's cp.async copies go to the other buffer while this
    row is reduced, and only this row's group is waited for. The emulator makes a copy only
    at its wait, so a read that did not wait reads the other row. Rows of 9000 float32 fit
    one buffer only (flag 1), of 16400 none; odd rows (1030) take the scalar loop with the
    two buffers allocated. Each of the 4 blocks (one per emulated multiprocessor) takes
    several rows, the last one without a next."""
    monkeypatch.setenv("TRACEARRAY_TILING", "row_grid_per_sm=1")
    x = rng(15).standard_normal((11, n)).astype(np.float32)
    x[3, 7] = np.inf
    x[5] = -np.inf      # a row of -inf: NaN from the max's subtraction, as NumPy's

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def norm(a):        # a second row reduction over the cached row
        c = a - a.mean(-1, keepdims=True)
        return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-3)
    for fn in (softmax, norm):
        f = gpu(fn)
        (kernel,) = f.lower(x).executable.kernels
        assert kernel.strategy == "block_row"
        before = len(emulated.launches)
        check(fn, x)
        (smem,) = emulated.smem_sizes[before:]
        # (each buffer rounded to 16 bytes: tile/gpu.py row_cache_part_bytes)
        assert smem == buffers * (-(-n * 4 // 16) * 16), (smem, buffers)
        check(fn, x[1:])            # another row count per block
    if buffers:
        ptx = gpu(softmax).lower(x).executable.kernels[0].ptx
        assert re.search(r"cp\.async\.wait_group\s+1;", ptx)

    def rms(a):         # one reduction: one buffer (pipelining measured slower for it)
        return a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6)
    before = len(emulated.launches)
    check(rms, x)
    (smem,) = emulated.smem_sizes[before:]
    assert smem == (-(-n * 4 // 16) * 16 if buffers else 0), smem


# rows held in registers by 2 slots a lane (up to 64), by 4 (up to 128), and swept (past 128);
# the boundaries on both sides, and a row count that leaves a block's warps idle
@pytest.mark.parametrize("n", [33, 64, 65, 100, 128, 129, 300])
def test_warp_row_rows_in_registers(emulated, n: int) -> None:
    """warp_row keeps a row of at most 32 * slots elements in registers (each lane's positions
    lane, lane + 32, ... loaded once for every phase; positions past the end read the last
    element and add and store nothing): normalisations with two and three reductions, the
    arg-reductions' first-occurrence rule with ties and NaN, exact integer sums, a strided
    view and a gather whose indices come from the row all match NumPy on either side of the
    register variants' limits."""
    r = rng(n)
    rows = 11
    x = r.standard_normal((rows, n)).astype(np.float32)
    x[2, n // 2] = np.nan
    x[3, :] = 1.5                                      # ties everywhere
    x[4, 1] = x[4, n - 1] = 9.0                       # a tie for the maximum
    g, beta = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    ints = r.integers(-2**40, 2**40, (rows, n))
    wide = r.standard_normal((rows, 2 * n))
    idx = r.integers(0, n, (rows, n))

    def l2(a):
        return a / np.maximum(np.sqrt(np.sum(a * a, axis=-1, keepdims=True)), 1e-12)

    def layernorm(a, gamma, b):
        m = a.mean(-1, keepdims=True)
        c = a - m
        return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * gamma + b

    def args(a):
        return np.argmax(a, axis=1), np.argmin(a, axis=1), a.max(axis=1)

    def gathered(a, i):
        return np.take_along_axis(a, i, axis=1).sum(axis=1) + a.sum(axis=1)

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    for fn, fargs, family in ((l2, (x,), "fused"), (layernorm, (x, g, beta), "fused"),
                              (args, (x,), "exact"), (softmax, (wide[:, ::2],), "fused"),
                              (gathered, (x, idx), "fused"),
                              (lambda a: a.sum(axis=1), (ints,), "exact")):
        f = gpu(fn)
        (kernel,) = f.lower(*fargs).executable.kernels
        assert kernel.strategy == "warp_row", (fn, kernel.strategy)
        check(fn, *fargs, family=family)


# a last group of 3 rows; whole groups (of 8 and of 16); more groups than blocks
@pytest.mark.parametrize("rows", [19, 32, 43])
def test_block_rows_share_the_row_invariant_loads(emulated, monkeypatch, rows: int) -> None:
    """block_rows (tile/gpu.py shares_row_loads): a row reduction reading an array that does not
    depend on the row (pairwise_min's Y, a matrix-vector product's vector, an argmin over
    distances) computes a group of rows per block (16 where each row's own values are held
    for the sweep in few registers, else 8: block_rows_group); its results are NumPy's, rows past the
    end of the last group store nothing, and a kernel with a whole-row output (softmax) or a
    row-dependent operand only keeps block_row."""
    from tracearray.tile import gpu as launch
    monkeypatch.setattr(launch, "BLOCK_ROWS_MIN", 8)
    n = 1100     # longer than a warp_row's rows
    p = rng(11).standard_normal((rows, 3)).astype(np.float32)
    q = rng(12).standard_normal((n, 3)).astype(np.float32)
    q[5, 1] = np.nan    # a NaN in every row's minimum
    A = rng(13).standard_normal((rows, n))
    v = rng(14).standard_normal(n)

    def pairwise(a, c):
        return ((a[:, None, :] - c[None, :, :]) ** 2).sum(-1).min(1)

    def argmin_dist(a, c):
        return np.argmin(np.abs(a[:, :1] - c[None, :, 0]), axis=1)

    def argmin_nested(a, c):    # k-means' assignment: the nested sum inside the argmin
        return np.argmin(((a[:, None, :] - c[None, :, :]) ** 2).sum(-1), axis=1)

    def matvec_scaled(m, w):
        return np.sqrt(np.abs((m * w).sum(1))) + m[:, 0]

    for fn, args, family, group in (
            (pairwise, (p, q), "fused", 16), (pairwise, (p, np.nan_to_num(q)), "fused", 16),
            # (an argmin's value and index take more registers: 8 rows)
            (argmin_dist, (p, q), "exact", 8), (argmin_nested, (p, q), "exact", 8),
            (matvec_scaled, (A, v), "fused", 8)):    # (a row of A streams: 8 rows)
        f = gpu(fn)
        (kernel,) = f.lower(*args).executable.kernels
        assert kernel.strategy == "block_rows", fn
        assert launch.block_rows_group(kernel.geometry) == group, fn
        got = check(fn, *args, family=family)
        assert got.shape == (rows,)
    softmax = PROGRAMS["softmax"][0]
    for fn, args in ((softmax, (A,)), (lambda m: (m * m).sum(1), (A,))):
        (kernel,) = gpu(fn).lower(*args).executable.kernels
        assert kernel.strategy == "block_row"


def test_as_array_of_host_data_names_to_device() -> None:
    """``as_array`` views device memory; NumPy data gets a message naming ``to_device``
    (not NumPy's "only supports stream=None" from its DLPack export)."""
    for host in (np.ones(3, np.float32), [1.0, 2.0], 3.0):
        with pytest.raises(TypeError, match="to_device"):
            as_array(host)


def test_warm_calls_on_device_arrays_skip_tracing_and_keying(emulated, monkeypatch) -> None:
    """Issue 12: a warm call on ``tracearray.Array``s takes the call fast path (a flat key of
    dtypes, shapes and strides; no pytree flattening or trace lookup), and each call's
    arrays reach the kernels although the launches' argument buffers are reused."""
    f = gpu(lambda a, b: a * b + np.exp(-a))
    hosts = [rng(k).standard_normal(300).astype(np.float32) for k in range(4)]
    dev = [tracearray.gpu.to_device(h) for h in hosts]
    f(dev[0], dev[1])   # the first call: the general path records the fast entry

    def no_general_path(*a, **k):
        raise AssertionError("the warm call went through _lower")
    monkeypatch.setattr(f, "_lower", no_general_path)
    for i, j in ((2, 3), (0, 1), (3, 0), (1, 1)):
        got = f(dev[i], dev[j])
        assert isinstance(got, Array)
        assert_matches(got.numpy(), hosts[i] * hosts[j] + np.exp(-hosts[i]), "fused")
    monkeypatch.undo()
    # a strided view is another signature: the general path, then correct values
    view = tracearray.gpu.to_device(np.arange(600, dtype=np.float32))
    strided = Array(view.ptr, (300,), np.float32, (8,), owner=view)
    want = np.arange(0, 600, 2, dtype=np.float32)
    assert_matches(f(strided, dev[1]).numpy(), want * hosts[1] + np.exp(-want), "fused")
    # the same values as a NumPy argument: a host result (the fast key keeps them apart)
    got = f(hosts[0], hosts[1])
    assert isinstance(got, np.ndarray)


def test_concurrent_calls_on_device_arrays_each_get_their_own_arguments(emulated) -> None:
    """The argument buffers are the executable's: threads calling one compiled function
    on different arrays must not see each other's pointers."""
    import threading
    f = gpu(lambda a: a * 2 + 1)
    hosts = [np.full(64, k, np.float32) for k in range(8)]
    dev = [tracearray.gpu.to_device(h) for h in hosts]
    f(dev[0])
    results: dict[int, np.ndarray] = {}

    def worker(k: int) -> None:
        for _ in range(5):
            out = f(dev[k])
        results[k] = out.numpy()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(8):
        np.testing.assert_array_equal(results[k], hosts[k] * 2 + 1)


@pytest.mark.parametrize("device_inputs", [False, True])
@pytest.mark.parametrize("name", sorted(MATMUL_FORMS))
def test_matmul_through_cublas_layouts(emulated, monkeypatch, name: str,
                                       device_inputs: bool) -> None:
    """Issue 13/17: float matmuls run in cuBLAS on a GPU. Here a reference of cuBLAS's
    column-major gemm (``gpu_emulator.ReferenceBlas``) receives exactly the arguments the
    library would, so the row-major translation (operands swapped, transposed views as
    CUBLAS_OP_T, offsets, leading dimensions, batch strides) is checked against NumPy; the
    forms cuBLAS cannot take must run tracearray's own kernel."""
    from gpu_emulator import ReferenceBlas
    from tracearray.gpu import blas as blas_mod
    ref = ReferenceBlas()
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ref)
    fn, shapes, dtype, taken = MATMUL_FORMS[name]
    r = rng(3)
    # small integers: every product and sum is exact, so any misplaced element shows
    args = [r.integers(-3, 4, s).astype(dtype) for s in shapes]
    want = fn(*args)
    call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
    got = gpu(fn)(*call)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        g = g.numpy() if isinstance(g, Array) else np.asarray(g)
        assert_matches(g, np.asarray(w), "exact", zero_sign=False)
    assert bool(ref.calls) == taken, ref.calls


def test_cublas_plan_refuses_what_the_library_cannot_take(monkeypatch) -> None:
    """``plan_gemm`` says None (tracearray's own kernel) for non-float dtypes, empty or
    too large sizes, operands with zero or negative strides, and negative batch strides;
    ``blas_for`` gives None for a device that is not CUDA's and under TRACEARRAY_GPU_LIBRARIES=off."""
    from tracearray.gpu import blas as b
    f32 = np.float32
    ok = b.plan_gemm(f32, 4, 5, 6, (6, 1, 0), (5, 1, 0), 1, (0, 0, 0))
    assert ok is not None and (ok.op_a, ok.op_b, ok.m, ok.n, ok.k) == (b.OP_N, b.OP_N, 5, 4, 6)
    t = b.plan_gemm(f32, 4, 5, 6, (1, 4, 0), (1, 6, 0), 1, (0, 0, 0))   # both transposed
    assert t is not None and (t.op_a, t.op_b, t.lda, t.ldb) == (b.OP_T, b.OP_T, 6, 4)
    assert b.plan_gemm(np.int32, 4, 5, 6, (6, 1, 0), (5, 1, 0), 1, (0, 0, 0)) is None
    assert b.plan_gemm(np.float16, 4, 5, 6, (6, 1, 0), (5, 1, 0), 1, (0, 0, 0)) is None
    assert b.plan_gemm(f32, 4, 5, 0, (0, 1, 0), (5, 1, 0), 1, (0, 0, 0)) is None
    assert b.plan_gemm(f32, 1 << 31, 5, 6, (6, 1, 0), (5, 1, 0), 1, (0, 0, 0)) is None
    assert b.plan_gemm(f32, 4, 5, 6, (0, 1, 0), (5, 1, 0), 1, (0, 0, 0)) is None   # broadcast
    assert b.plan_gemm(f32, 4, 5, 6, (-6, 1, 18), (5, 1, 0), 1, (0, 0, 0)) is None
    assert b.plan_gemm(f32, 4, 5, 6, (12, 2, 0), (5, 1, 0), 1, (0, 0, 0)) is None
    assert b.plan_gemm(f32, 4, 5, 6, (6, 1, 0), (5, 1, 0), 3, (-24, 30, 20)) is None
    # TF32 only when compile's option asks, and only for float32 products
    assert not ok.tf32
    assert b.plan_gemm(f32, 4, 5, 6, (6, 1, 0), (5, 1, 0), 1, (0, 0, 0), tf32=True).tf32
    assert not b.plan_gemm(np.float64, 4, 5, 6, (6, 1, 0), (5, 1, 0), 1, (0, 0, 0),
                           tf32=True).tf32

    class CudaLike:
        uses_cuda_libraries = True
        stream_handle = 0
    monkeypatch.setenv("TRACEARRAY_GPU_LIBRARIES", "off")
    assert b.blas_for(CudaLike()) is None
    monkeypatch.setenv("TRACEARRAY_GPU_LIBRARIES", "auto")
    assert b.blas_for(EmulatedDevice()) is None
    monkeypatch.setenv("TRACEARRAY_GPU_LIBRARIES", "sometimes")
    with pytest.raises(ValueError, match="TRACEARRAY_GPU_LIBRARIES"):
        b.blas_for(CudaLike())


@pytest.mark.parametrize("device_inputs", [False, True])
@pytest.mark.parametrize("name", sorted(FFT_FORMS))
def test_fft_through_cufft_layouts(emulated, monkeypatch, name: str, device_inputs: bool) -> None:
    """Issue 13: FFTs run in cuFFT on a GPU. Here a reference of cuFFT's semantics
    (unnormalised transforms over ``cufftPlanMany`` layouts, ``gpu_emulator.ReferenceFFT``)
    and of cuBLAS's scal run what ``gpu/fft.py`` queues: the layouts (strides, batch
    distances, executions per group of rows), NumPy's normalisations, C2R's copy of its
    operand; the forms cuFFT cannot take must run on the host."""
    from gpu_emulator import ReferenceBlas, ReferenceFFT
    from tracearray.gpu import blas as blas_mod
    from tracearray.gpu import fft as fft_mod
    ref_fft, ref_blas = ReferenceFFT(), ReferenceBlas()
    monkeypatch.setattr(fft_mod, "cufft_for", lambda dev: ref_fft)
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ref_blas)
    fn, make, taken = FFT_FORMS[name]
    args = make(rng(4))
    want = fn(*args)
    call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
    got = gpu(fn)(*call)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        g = g.numpy() if isinstance(g, Array) else np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 1e-5 if w.dtype in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * np.abs(w).max(initial=0) * 4)
    assert (ref_fft.executions > 0) == taken, ref_fft.executions
    for a, c in zip(args, call):   # the operands are left as they were (C2R copies first)
        np.testing.assert_array_equal(c.numpy() if isinstance(c, Array) else c, a)


def test_fft_layouts_group_rows_into_one_batch() -> None:
    """``plan_fft``: C-contiguous rows are one execution; an inner axis is strided with the
    largest arithmetic run of the other axes as the batch; zero and negative strides are
    refused."""
    from tracearray.gpu.fft import C2C, plan_fft
    k = C2C[np.dtype(np.float32)]
    rows = plan_fft(k, 16, 1, (6, 16), (16, 1), (6, 16), (16, 1))
    assert (rows.istride, rows.idist, rows.batch, rows.starts) == (1, 16, 6, ((0, 0),))
    mid = plan_fft(k, 10, 1, (3, 10, 400), (4000, 400, 1), (3, 10, 400), (4000, 400, 1))
    assert (mid.istride, mid.idist, mid.batch, len(mid.starts)) == (400, 1, 400, 3)
    wide = plan_fft(k, 10, 1, (400, 10, 3), (30, 3, 1), (400, 10, 3), (30, 3, 1))
    assert (wide.idist, wide.batch, len(wide.starts)) == (30, 400, 3)   # loops the short axis
    assert plan_fft(k, 8, 1, (4, 8), (0, 1), (4, 8), (8, 1)) is None
    assert plan_fft(k, 8, 1, (4, 8), (8, -1), (4, 8), (8, 1)) is None


def test_comparator_allows_cuffts_rounding_on_the_gpu_and_no_more(emulated, monkeypatch) -> None:
    """Divergence gpu-fft-rounding: on the GPU an FFT is within 4 eps log2(n) sqrt(n) ||x||
    of NumPy's per element, so a result a few ulp away passes there (and not on the CPU,
    where FFTs are NumPy's bits), and one 1e-3 of the norm away fails."""
    from gpu_emulator import ReferenceBlas, ReferenceFFT
    from tracearray.gpu import blas as blas_mod
    from tracearray.gpu import fft as fft_mod
    from tracearray.testing import compare_with_numpy
    monkeypatch.setattr(fft_mod, "cufft_for", lambda dev: ReferenceFFT())
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ReferenceBlas())

    def program(z):
        return np.fft.fft(z, norm="ortho")

    z = (rng(5).standard_normal((6, 64)) + 1j).astype(np.complex64)
    cmp = compare_with_numpy(program, z, device="cuda")
    assert cmp.ok, cmp.report()
    assert "gpu-fft-rounding" in cmp.divergences

    assert compare_with_numpy(program, z, device="cuda",
                              compiled=_Perturbed(program, 3e-7, "cuda")).ok
    assert not compare_with_numpy(program, z, device="cpu",
                                  compiled=_Perturbed(program, 3e-7, "cpu")).ok
    assert not compare_with_numpy(program, z, device="cuda",
                                  compiled=_Perturbed(program, 1e-3, "cuda")).ok


class _Altered:
    """A compiled function, lowered as the real one, whose (host) result ``change`` alters:
    what a comparator must accept or reject."""

    def __init__(self, program, device: str, change):
        self.cf = tracearray.compile(program, device=device)
        self._fixed_device, self.change = device, change

    def lower(self, *args):
        return self.cf.lower(*args)

    def __call__(self, *args):
        out = self.cf(*args)
        return self.change(np.array(out.numpy() if isinstance(out, Array) else out))


def _Perturbed(program, by: float, device: str) -> _Altered:
    """The result moved by ``by`` of its largest magnitude."""
    return _Altered(program, device,
                    lambda out: (out + by * np.abs(out).max()).astype(out.dtype))


DIRECT_PROGRAMS = {
    "map": (lambda a, b: a * b + 1, True),
    "full_sum_partials": (lambda a, b: (a * b).sum(), True),
    "rows_and_columns": (lambda a, b: (a - a.max(axis=1, keepdims=True)) / b.sum(axis=0), True),
    "constant_array": (lambda a, b: a * np.array([1.0, -2.0, 3.0, 0.5, 2.0], np.float32) + b,
                       True),
    "input_returned": (lambda a, b: (a, b + 1), True),
    "matmul_epilogue": (lambda a, b: np.maximum(a @ b.T, 0), True),
    "host_sort_then_gather": (lambda a, b: a[:, np.argsort(b[0])], False),   # a host step
}


@pytest.mark.parametrize("name", sorted(DIRECT_PROGRAMS))
def test_direct_warm_path_matches_numpy_on_every_call(emulated, name: str) -> None:
    """Issue 12: warm calls of an executable made only of kernels run through a slot plan
    (``GpuExecutable._run_direct``: pointers by position, no dictionaries); every call's
    arrays must reach the kernels, partial-result buffers and constants included."""
    fn, direct = DIRECT_PROGRAMS[name]
    f = gpu(fn)
    r = rng(7)
    hosts = [r.standard_normal((4, 5)).astype(np.float32) for _ in range(6)]
    devs = [tracearray.gpu.to_device(h) for h in hosts]
    for i, j in ((0, 1), (2, 3), (4, 5), (1, 0)):
        got = f(devs[i], devs[j])
        want = fn(hosts[i], hosts[j])
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert_matches(g.numpy() if isinstance(g, Array) else np.asarray(g),
                           np.asarray(w), "fused")
    ex = f.lower(devs[0], devs[1]).executable
    assert (isinstance(ex._direct, tuple)) == direct, ex._direct


@pytest.mark.parametrize("device_inputs", [False, True])
@pytest.mark.parametrize("name", sorted(LINALG_FORMS))
def test_batched_lu_layouts(emulated, monkeypatch, name: str, device_inputs: bool) -> None:
    """Issue 13: small solves and inverses run in cuBLAS's batched LU on a GPU. A reference
    of cuBLAS's getrf/getrs/getri semantics (column-major matrices behind device pointer
    arrays) checks the translation: the LU of A^T and CUBLAS_OP_T for solve, getri's
    column-major (A^T)^-1 read row-major for inv, operands copied first (getrf overwrites)."""
    from gpu_emulator import ReferenceBlas
    from tracearray.gpu import blas as blas_mod
    ref = ReferenceBlas()
    calls = []
    for m in ("lu_batched", "lu_solve_batched", "lu_inverse_batched"):
        real = getattr(ref, m)
        monkeypatch.setattr(ref, m, lambda *a, _real=real, _m=m: (calls.append(_m), _real(*a))[1])
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ref)
    fn, make, taken = LINALG_FORMS[name]
    args = make(rng(8))
    want = fn(*args)
    call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
    got = gpu(fn)(*call)
    got = got.numpy() if isinstance(got, Array) else got
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-4 if want.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert bool(calls) == taken, calls
    for a, c in zip(args, call):
        np.testing.assert_array_equal(c.numpy() if isinstance(c, Array) else c, a)


@pytest.mark.parametrize("device_inputs", [False, True])
def test_singular_matrix_on_the_device_raises_numpys_error(emulated, monkeypatch,
                                                           device_inputs: bool) -> None:
    """A singular matrix found by the device's LU raises LinAlgError("Singular matrix") at
    the user's line: at the end of a call with NumPy inputs, when the host next waits for
    the device (``.numpy()``) with device arrays."""
    from gpu_emulator import ReferenceBlas
    from tracearray.gpu import blas as blas_mod
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ReferenceBlas())
    a = np.stack([np.eye(3), np.ones((3, 3))])
    b = np.ones((2, 3, 1))
    f = gpu(lambda a, b: np.linalg.solve(a, b))
    if device_inputs:
        out = f(tracearray.gpu.to_device(a), tracearray.gpu.to_device(b))
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix(.|\\n)*test_gpu_emulated"):
            out.numpy()
        out.numpy()   # reported once
    else:
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix(.|\\n)*test_gpu_emulated"):
            f(a, b)
    ok = np.stack([np.eye(3), 2 * np.eye(3)])
    np.testing.assert_allclose(np.asarray(f(ok, b)), np.linalg.solve(ok, b))


def test_determinants_on_the_device(emulated, monkeypatch) -> None:
    """np.linalg.det and slogdet read cuBLAS's batched LU (gpu/linalg.py det_kernel_ir): an
    exactly singular matrix gives NumPy's 0, (0, -inf); row interchanges and negative
    pivots give the sign; the comparator accepts the LU's rounding (gpu-linalg-rounding)
    and rejects a determinant 1e-3 off or a flipped sign."""
    from gpu_emulator import ReferenceBlas
    from tracearray.gpu import blas as blas_mod
    from tracearray.testing import compare_with_numpy
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ReferenceBlas())
    a = np.stack([np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]]),
                  np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -2.0]]),
                  _systems(rng(12), (3, 3))])
    det = gpu(lambda m: np.linalg.det(m))(a)
    sign, logdet = gpu(lambda m: np.linalg.slogdet(m))(a)
    assert det[0] == 0 and sign[0] == 0 and logdet[0] == -np.inf
    assert sign[1] == 1 and det[1] == 2.0    # one interchange, one negative pivot
    np.testing.assert_allclose(det[2], np.linalg.det(a[2]), rtol=1e-12)

    def program(m):
        return np.linalg.det(m), np.linalg.slogdet(m)[0]
    x = _systems(rng(13), (5, 4, 4)) - 2
    cmp = compare_with_numpy(program, x, device="cuda")
    assert cmp.ok, cmp.report()
    assert "gpu-linalg-rounding" in cmp.divergences
    class Changed(_Altered):     # both results, one of them altered
        def __call__(self, *args):
            return self.change(*[np.asarray(o) for o in self.cf(*args)])
    for change in (lambda d, s: (d * (1 + 1e-3), s), lambda d, s: (d, -s)):
        wrong = Changed(program, "cuda", change)
        assert not compare_with_numpy(program, x, device="cuda", compiled=wrong).ok


@pytest.mark.parametrize("name", sorted(CHOLESKY_FORMS))
def test_cholesky_on_the_device(emulated, monkeypatch, name: str) -> None:
    """np.linalg.cholesky of small contiguous stacks: a block per matrix
    (gpu/factorizations.py cholesky_kernel_ir): NumPy's factor within the LU tolerance
    (gpu-linalg-rounding), the other triangle exactly 0, ``upper=True``, only the lower
    triangle read; the others run on the host."""
    from tracearray.gpu import factorizations
    from tracearray.testing import compare_with_numpy
    ran = spy_on_device(monkeypatch, {"linalg.cholesky": factorizations.cholesky})
    fn, make, taken = CHOLESKY_FORMS[name]
    args = make(rng(14))
    cmp = compare_with_numpy(fn, *args, device="cuda")
    assert cmp.ok, cmp.report()
    got = np.asarray(gpu(fn)(*args))
    want = fn(*args)
    np.testing.assert_allclose(got, want, rtol=1e-4 if want.dtype == np.float32 else 1e-10,
                               atol=1e-5)
    assert not np.any(np.triu(got, 1) if "upper" not in name else np.tril(got, -1))
    assert any(r is not NotImplemented for r in ran) == taken, ran


@pytest.mark.parametrize("name", sorted(QR_FORMS))
def test_qr_on_the_device(emulated, monkeypatch, name: str) -> None:
    """np.linalg.qr (modes reduced, complete, r) of small contiguous stacks: a block per
    matrix (gpu/factorizations.py qr_kernel_ir), LAPACK's Householder reflectors, so NumPy's signs:
    Q and R within the tolerance (gpu-linalg-rounding), R's lower part exactly 0, Q's
    columns orthonormal; mode raw and large matrices on the host."""
    from tracearray.gpu import factorizations
    from tracearray.testing import compare_with_numpy
    ran = spy_on_device(monkeypatch, {"linalg.qr": factorizations.qr})
    fn, make, taken = QR_FORMS[name]
    args = make(rng(16))
    cmp = compare_with_numpy(fn, *args, device="cuda")
    assert cmp.ok, cmp.report()
    got, want = gpu(fn)(*args), fn(*args)
    got = tuple(got) if isinstance(want, tuple) else (got,)
    want = tuple(want) if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        g = np.asarray(g)
        np.testing.assert_allclose(g, w, rtol=1e-3 if w.dtype == np.float32 else 1e-9,
                                   atol=1e-4 if w.dtype == np.float32 else 1e-10)
    assert any(r is not NotImplemented for r in ran) == taken, ran
    if taken and len(got) == 2:
        q = np.asarray(got[0]).astype(np.float64)
        gram = np.swapaxes(q, -1, -2) @ q
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(q.shape[-1]), gram.shape),
                                   atol=1e-9)


def _spy_spectral(monkeypatch) -> list:
    """What the Jacobi kernels' entry points return (NotImplemented: the host ran it)."""
    return spy_on_device(monkeypatch, spectral_implementations())


@pytest.mark.parametrize("name", sorted(SPECTRAL_FORMS))
def test_spectral_decompositions_on_the_device(emulated, monkeypatch, name: str) -> None:
    """np.linalg.eigh, eigvalsh and svd of small contiguous stacks by Jacobi rotations, a
    block per matrix (gpu/jacobi.py): every quantity the decomposition fixes whatever basis
    it finds (values, |vectors| of distinct values, the matrix rebuilt, projections) is
    NumPy's within rounding; one triangle read; the others run on the host."""
    from tracearray.testing import compare_with_numpy
    ran = _spy_spectral(monkeypatch)
    fn, make, taken = SPECTRAL_FORMS[name]
    args = make(rng(18))
    cmp = compare_with_numpy(fn, *args, device="cuda")
    assert cmp.ok, cmp.report()
    got, want = gpu(fn)(*args), fn(*args)
    got = tuple(got) if isinstance(want, tuple) else (got,)
    want = tuple(want) if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        f32 = w.dtype == np.float32
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4 if f32 else 1e-9,
                                   atol=1e-4 if f32 else 1e-10)
    assert any(r is not NotImplemented for r in ran) == taken, ran


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_spectral_vectors_satisfy_the_contract(emulated, monkeypatch, dtype) -> None:
    """The comparator's check of the vectors themselves (gpu-spectral-basis): the device's
    eigenvectors and singular vectors pass as they are (orthonormal, A v = w v, U diag(s) V^T
    = A), with a sign flipped too; vectors 1e-3 off, values 1e-3 off, or two eigenvectors
    swapped fail."""
    from tracearray.testing import compare_with_numpy
    ran = _spy_spectral(monkeypatch)
    r = rng(19)
    a = _sym(r, (3, 6, 6), dtype)
    b = r.standard_normal((2, 7, 5)).astype(dtype)
    eigh = lambda x: tuple(np.linalg.eigh(x))   # noqa: E731
    svd = lambda x: tuple(np.linalg.svd(x))     # noqa: E731
    for program, x in ((eigh, a), (svd, b), (svd, b.swapaxes(-1, -2).copy())):
        cmp = compare_with_numpy(program, x, device="cuda")
        assert cmp.ok, cmp.report()
        assert "gpu-spectral-basis" in cmp.divergences

        class Changed(_Altered):
            def __call__(self, *args):
                return self.change([np.array(np.asarray(o)) for o in self.cf(*args)])

        def flip(outs):
            outs[-1][..., 0, :] *= -1 if program is svd else 1
            outs[-1][..., :, 0] *= -1 if program is eigh else 1
            if program is svd:
                outs[0][..., :, 0] *= -1
            return tuple(outs)
        assert compare_with_numpy(program, x, device="cuda", compiled=Changed(
            program, "cuda", flip)).ok

        def nudge(outs):
            outs[-1] = (outs[-1] + 1e-3).astype(outs[-1].dtype)
            return tuple(outs)

        def values(outs):
            i = 0 if program is eigh else 1
            outs[i] = (outs[i] * (1 + 1e-3)).astype(outs[i].dtype)
            return tuple(outs)

        def swap(outs):
            v = outs[-1]
            if program is eigh:
                v[..., :, [0, 1]] = v[..., :, [1, 0]]
            else:
                v[..., [0, 1], :] = v[..., [1, 0], :]
            return tuple(outs)
        for change in (nudge, values, swap):
            assert not compare_with_numpy(program, x, device="cuda", compiled=Changed(
                program, "cuda", change)).ok, change.__name__
    assert ran and all(r is not NotImplemented for r in ran)


def test_least_squares_comparator_bounds(emulated, monkeypatch) -> None:
    """np.linalg.lstsq from the Jacobi SVD (gpu/least_squares.py) passes the comparator's
    bounds; x 1e-6 off, a residual 1e-6 off or a rank one off fail them."""
    from tracearray.testing import compare_with_numpy
    ran = _spy_spectral(monkeypatch)
    r = rng(21)
    a, b = r.standard_normal((30, 4)), r.standard_normal((30, 2))
    program = lambda a, b: tuple(np.linalg.lstsq(a, b))    # noqa: E731
    cmp = compare_with_numpy(program, a, b, device="cuda")
    assert cmp.ok, cmp.report()

    class Changed(_Altered):
        def __call__(self, *args):
            return self.change([np.array(np.asarray(o)) for o in self.cf(*args)])

    def off(i, by):
        def change(outs):
            outs[i] = (outs[i] + by).astype(outs[i].dtype)
            return tuple(outs)
        return change
    for change in (off(0, 1e-6), off(1, 1e-6), off(2, 1)):
        assert not compare_with_numpy(program, a, b, device="cuda",
                                      compiled=Changed(program, "cuda", change)).ok
    assert ran and all(x is not NotImplemented for x in ran)
    # an empty system: the host's LAPACK (the comparator raised on it: bug 70)
    cmp = compare_with_numpy(program, np.zeros((0, 3)), np.zeros((0, 2)), device="cuda")
    assert cmp.ok, cmp.report()


def test_spectral_decompositions_of_non_finite_matrices_are_nan(emulated) -> None:
    """A NaN or an infinity: NaN values, vectors and pseudo-inverses (LAPACK's results are NaN
    in part, or its LinAlgError, or other numbers); the comparator accepts them, NumPy's
    error included (gpu-spectral-basis)."""
    from tracearray.testing import compare_with_numpy
    for bad in (np.array([[1.0, np.nan], [0.0, 1.0]]), np.array([[np.inf, 1.0], [2.0, 3.0]]),
                np.array([[1.0, 2.0, np.nan]])):
        u, s, vt = gpu(lambda a: np.linalg.svd(a))(bad)
        assert all(np.isnan(np.asarray(x)).all() for x in (u, s, vt))
        assert np.isnan(np.asarray(gpu(lambda a: np.linalg.pinv(a))(bad))).all()
    for program in (lambda a: np.linalg.svd(a, compute_uv=False), lambda a: np.linalg.pinv(a)):
        cmp = compare_with_numpy(program, np.array([[1.0, np.nan], [0.0, 1.0]]), device="cuda")
        assert cmp.ok, cmp.report()
    w, v = gpu(lambda a: np.linalg.eigh(a))(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    assert np.isnan(np.asarray(w)).all() and np.isnan(np.asarray(v)).all()


def test_spectral_scales_extreme_magnitudes(emulated) -> None:
    """Matrices near the float64 range's ends: the kernels scale by a power of two first, so
    no sum of squares overflows or underflows (NumPy's values within rounding)."""
    r = rng(20)
    for scale in (1e150, 1e-150):
        x = r.standard_normal((2, 5, 4)) * scale
        np.testing.assert_allclose(np.asarray(gpu(lambda a: np.linalg.svdvals(a))(x)),
                                   np.linalg.svdvals(x), rtol=1e-12)
        s = _sym(r, (2, 5, 5)) * scale
        np.testing.assert_allclose(np.asarray(gpu(lambda a: np.linalg.eigvalsh(a))(s)),
                                   np.linalg.eigvalsh(s), rtol=1e-10, atol=1e-14 * scale)
    # every entry subnormal: the scale is a subnormal power of two (it was 1, and the
    # singular values 0: rank 0, cond inf; probe of the twelfth session)
    x = r.standard_normal((4, 4)) * 1e-310
    np.testing.assert_allclose(np.asarray(gpu(lambda a: np.linalg.svdvals(a))(x)),
                               np.linalg.svdvals(x), rtol=1e-9)
    assert int(np.asarray(gpu(np.linalg.matrix_rank)(x))) == np.linalg.matrix_rank(x) == 4


@pytest.mark.parametrize("scale", [1e200, 1e-310])
def test_the_comparator_checks_spectral_results_at_the_range_ends(emulated, scale) -> None:
    """The comparator's whole-result checks of eigenvectors and singular vectors (and eig's
    values) run on the matrix scaled by a power of two: at 1e200 the residuals' norms
    overflowed and at 1e-310 subnormal rounding exceeded the bound, rejecting correct
    results, even eig's bit-identical ones (probe of the twelfth session). A result moved
    by 1e-6 of its magnitude is still refused."""
    from tracearray.testing import compare_with_numpy
    a = rng(21).standard_normal((4, 4)) * scale
    s = a + a.T
    for fn, x in ((lambda m: np.linalg.eig(m).eigenvalues, a),
                  (lambda m: np.linalg.eig(m).eigenvectors, a),
                  (lambda m: np.linalg.eigh(m).eigenvectors, s),
                  (lambda m: np.linalg.svd(m).U, a)):
        cmp = compare_with_numpy(fn, x, device="cuda")
        assert cmp.ok, cmp.report()
        bad = _Altered(fn, "cuda", lambda out: out * (1 + 1e-6) + 1e-6 * np.abs(out).max())
        assert not compare_with_numpy(fn, x, device="cuda", compiled=bad).ok


@pytest.mark.parametrize("device_inputs", [False, True])
def test_cholesky_of_a_matrix_not_positive_definite_raises(emulated, device_inputs) -> None:
    """NumPy's LinAlgError("Matrix is not positive definite") at the user's line: at the end
    of a call with NumPy inputs, at the next wait with device arrays (an infinity that makes
    a pivot -inf too); a NaN is no error but NaNs, as NumPy's LAPACK gives (emulated fuzz
    emu-2026-12-05-i, programs 2051 and 2132: the kernel raised); the comparator rejects a
    factor 1e-3 off."""
    from tracearray.testing import compare_with_numpy
    f = gpu(lambda a: np.linalg.cholesky(a))
    for nan in (np.diag([1.0, np.nan, 1.0]), np.array([[4.0, np.nan], [np.nan, 4.0]])):
        got = np.asarray(f(nan))
        assert np.isnan(got).any() and got.shape == nan.shape
        cmp = compare_with_numpy(lambda a: np.linalg.cholesky(a), nan, device="cuda")
        assert cmp.ok, cmp.report()
    for bad in (np.stack([np.eye(3), -np.eye(3)]), np.array([[4.0, np.inf], [np.inf, 4.0]])):
        if device_inputs:
            out = f(tracearray.gpu.to_device(bad))
            with pytest.raises(np.linalg.LinAlgError,
                               match="not positive definite(.|\n)*test_gpu_emulated"):
                out.numpy()
        else:
            with pytest.raises(np.linalg.LinAlgError,
                               match="not positive definite(.|\n)*test_gpu_emulated"):
                f(bad)
    good = CHOLESKY_FORMS["cholesky_batched"][1](rng(15))
    off = _Altered(lambda a: np.linalg.cholesky(a), "cuda", lambda out: out * (1 + 1e-3))
    assert not compare_with_numpy(lambda a: np.linalg.cholesky(a), *good, device="cuda",
                                  compiled=off).ok


def test_comparator_allows_lu_rounding_on_the_gpu_and_no_more(emulated, monkeypatch) -> None:
    """Divergence gpu-linalg-rounding: a GPU solve within 8 n eps cond(A) max|x| passes,
    one 1e-2 of max|x| away fails (and on the CPU, where solves are NumPy's LAPACK, even a
    few ulp fail)."""
    from gpu_emulator import ReferenceBlas
    from tracearray.gpu import blas as blas_mod
    from tracearray.testing import compare_with_numpy
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ReferenceBlas())

    def program(a, b):
        return np.linalg.solve(a, b)

    a, b = _systems(rng(9), (6, 5, 5)), rng(10).standard_normal((6, 5, 1))
    cmp = compare_with_numpy(program, a, b, device="cuda")
    assert cmp.ok, cmp.report()
    assert "gpu-linalg-rounding" in cmp.divergences

    assert compare_with_numpy(program, a, b, device="cuda",
                              compiled=_Perturbed(program, 1e-15, "cuda")).ok
    assert not compare_with_numpy(program, a, b, device="cpu",
                                  compiled=_Perturbed(program, 1e-15, "cpu")).ok
    assert not compare_with_numpy(program, a, b, device="cuda",
                                  compiled=_Perturbed(program, 1e-2, "cuda")).ok


def _sort_cases() -> list:
    """Every form with NumPy and device inputs (the radix sort's long rows too: under a
    second each since the emulator's barriers went native)."""
    return [pytest.param(name, device_inputs, id=f"{name}-{device_inputs}")
            for name in sorted(SORT_FORMS) for device_inputs in (False, True)]


@pytest.mark.parametrize("name,device_inputs", _sort_cases())
def test_block_sort_matches_numpy(emulated, name: str, device_inputs: bool) -> None:
    """Issue 13: sort and argsort of rows that fit a block run as a bitonic network in
    shared memory on the GPU (gpu/sort.py), longer rows as the radix sort over all the blocks
    (gpu/radix_sort.py), here under the SIMT emulator (two warps per block, real barriers):
    NumPy's order (NaN last, ties by position: kind="stable" exactly), every axis, strided and
    reversed views, every integer width and bool; float16 runs on the host."""
    fn, make, taken = SORT_FORMS[name]
    args = make(rng(11))
    want = fn(*args)
    call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
    before = len(emulated.launches)
    got = gpu(fn)(*call)
    got = got.numpy() if isinstance(got, Array) else np.asarray(got)
    want = np.asarray(want)   # (a 0-d result: NumPy's scalar, compared as an array here)
    assert got.dtype == want.dtype and got.shape == want.shape
    # values: the zeros' signs are free (a stable order of -0.0 and +0.0 is not quicksort's)
    assert_matches(got, want, "exact", zero_sign=False)
    launched = [n for n, _, _ in emulated.launches[before:]]
    ran = any(n.startswith(("ta_sort_", "ta_median_", "ta_quantile_", "ta_radix_"))
              for n in launched)
    assert ran == taken
    if taken and ("quantile" in name or "percentile" in name):   # not sorted, then the host
        assert any(n.startswith("ta_quantile_") for n in launched)
    if taken and "median" in name:
        assert any(n.startswith("ta_median_") for n in launched)


@pytest.mark.parametrize("dtype", [np.float64, np.int16, np.bool_, np.float32, np.int8,
                                   np.int32, np.int64, np.uint8, np.uint32, np.uint64])
def test_radix_sort_of_many_short_rows_matches_numpy(emulated, dtype) -> None:
    """The radix sort (gpu/radix_sort.py) called directly on rows a block could sort, to
    reach what long rows would need too many elements for here: 300 rows (two passes over
    the row numbers), every sortable dtype with ties, NaN, signed zeros and infinities, along
    the last axis and along axis 0 of a reversed view (gathered, then scattered back), sort
    values and stable argsort positions."""
    from tracearray.gpu import radix_sort
    from tracearray.ops.external import DeviceBuffer
    r = rng(12)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        x = r.integers(-4, 5, (300, 3)).astype(dt)
        flat = x.reshape(-1)
        flat[::7], flat[3::11], flat[5::13], flat[6::17] = np.nan, -0.0, np.inf, -np.inf
    elif dt.kind == "b":
        x = r.integers(0, 2, (300, 3)).astype(bool)
    else:
        info = np.iinfo(dt)
        x = r.integers(info.min, info.max, (300, 3), dtype=dt, endpoint=True)
        x[::3] = x[0, 0]   # ties
    for view, axis in ((x, 1), (x[::-1], 0)):
        dev_x = Array.from_numpy(np.ascontiguousarray(x))
        if view is not x:   # the reversed rows: a negative stride over the same memory
            dev_x = Array(dev_x.ptr + (x.shape[0] - 1) * x.strides[0], x.shape, dt,
                          (-x.strides[0], x.strides[1]), owner=dev_x)
        src = DeviceBuffer(dev_x.ptr, view.shape, tuple(s // dt.itemsize for s in dev_x.strides),
                           dt)
        vals = Array.empty(view.shape, dt)
        idx = Array.empty(view.shape, np.int64)
        assert radix_sort.sort_rows(emulated, src, DeviceBuffer(vals.ptr, view.shape, (), dt),
                                    None, axis) is None
        assert radix_sort.sort_rows(emulated, src, None, DeviceBuffer(
            idx.ptr, view.shape, (), np.dtype(np.int64)), axis) is None
        want = np.sort(view, axis=axis, kind="stable")
        assert np.array_equal(vals.numpy(), want, equal_nan=dt.kind == "f")
        np.testing.assert_array_equal(idx.numpy(), np.argsort(view, axis=axis, kind="stable"))


def test_default_kind_argsort_ties_are_a_divergence_and_the_rest_is_checked(emulated) -> None:
    """Divergence gpu-sort-ties: with NumPy's default kind, the positions of tied values may
    differ (the comparator leaves them unverified on the GPU), the others may not."""
    from tracearray.testing import compare_with_numpy

    def program(x):
        return np.argsort(x, axis=-1)

    x = np.repeat(np.arange(6, dtype=np.float32)[::-1], 3)[None]
    cmp = compare_with_numpy(program, x, device="cuda")
    assert cmp.ok, cmp.report()
    assert "gpu-sort-ties" in cmp.divergences

    # the compiled argsort with its rows reversed: untied positions wrong
    reversed_rows = _Altered(program, "cuda", lambda out: out[:, ::-1].copy())
    assert not compare_with_numpy(program, x, device="cuda", compiled=reversed_rows).ok


@pytest.mark.parametrize("shape, axis, kth", [
    ((5, 37), -1, 3), ((37, 6), 0, (0, -1)), ((300,), 0, (7, 150, 299)), ((3, 0), -1, 0),
    ((2, 4500), 1, 4499)])   # the last: the radix sort
def test_partitions_on_the_gpu_sort_and_keep_the_contract(emulated, shape, axis, kth) -> None:
    """Divergence gpu-partition-order: np.partition and np.argpartition run as the device's
    stable sorts (block sort; rows past 4096 the radix sort), an arrangement NumPy's contract
    allows; the comparator checks the kth elements and the contract (values, ties, NaN, +-0
    and inf among them) and rejects results that break it."""
    from tracearray.testing import compare_with_numpy
    x = np.round(rng(31).standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3::11] = np.nan
    flat[5::13] = np.inf
    flat[6::17] = -np.inf

    def part(a):
        return np.partition(a, kth, axis=axis)

    def argpart(a):
        return np.argpartition(a, kth, axis=axis)
    for program in (part, argpart):
        cmp = compare_with_numpy(program, x, device="cuda")
        assert cmp.ok, cmp.report()
        if x.size:
            assert "gpu-partition-order" in cmp.divergences
    got = gpu(part)(x)      # the device's sort, not NumPy's introselect on the host
    np.testing.assert_array_equal(got, np.sort(x, axis=axis, kind="stable"))
    np.testing.assert_array_equal(gpu(argpart)(x), np.argsort(x, axis=axis, kind="stable"))
    if not x.size:
        return

    def swap_kth(out):          # the kth element traded with one at the other end
        n = x.shape[axis]
        k = (kth if isinstance(kth, int) else kth[0]) % n
        j = n - 1 - k if n - 1 - k != k else 0
        o = np.moveaxis(out, axis, -1).copy()
        o[..., [k, j]] = o[..., [j, k]]
        return np.moveaxis(o, -1, axis)

    def repeat_first(out):      # an argpartition that is not a permutation
        o = np.moveaxis(out, axis, -1).copy()
        o[..., 1] = o[..., 0]
        return np.moveaxis(o, -1, axis)
    for program, change in ((part, swap_kth), (part, lambda out: -out),
                            (argpart, swap_kth), (argpart, repeat_first)):
        altered = _Altered(program, "cuda", change)
        assert not compare_with_numpy(program, x, device="cuda", compiled=altered).ok, \
            (program.__name__, change)


@pytest.mark.parametrize("func", ["quantile", "nanpercentile", "nanmedian"])
def test_device_quantiles_free_only_zero_signs(emulated, func) -> None:
    """Divergence gpu-sort-ties for the order statistics the GPU reads from its stable sort
    (gpu/quantile.py, gpu/sort.py): a zero result may have the other zero's sign (the
    comparator leaves it free), every other value is NumPy's exactly."""
    from tracearray.testing import compare_with_numpy
    call = {"quantile": lambda x: np.quantile(x, [0.25, 0.5, 0.9], axis=-1),
            "nanpercentile": lambda x: np.nanpercentile(x, [25, 50, 90], axis=-1),
            "nanmedian": lambda x: np.nanmedian(x, axis=-1)}[func]

    def program(x):
        return call(x)

    x = np.array([[-0.0, 0.0, 0.0, -0.0, 1.0, 2.0, np.nan if func != "quantile" else 3.0],
                  [0.5, -0.0, 0.0, 4.0, -1.0, 0.0, -0.0]], np.float32)
    cmp = compare_with_numpy(program, x, device="cuda")
    assert cmp.ok, cmp.report()
    assert "gpu-sort-ties" in cmp.divergences

    def one_ulp_off(out):   # one value moved by one ulp (a zero too)
        flat = out.reshape(-1)
        nonzero = np.flatnonzero(flat != 0)
        k = int(nonzero[0]) if len(nonzero) else 0
        flat[k] = np.nextafter(flat[k], np.inf)
        return out

    assert not compare_with_numpy(program, x, device="cuda",
                                  compiled=_Altered(program, "cuda", one_ulp_off)).ok


def test_c2r_transforms_a_dead_intermediate_in_place(emulated, monkeypatch) -> None:
    """cuFFT's C2R overwrites its input: an operand nothing reads later (the filtered
    spectrum of ``irfft(rfft(x) * g)``) is transformed in place, one that is read later
    (returned too) is copied first, and both give NumPy's values."""
    from gpu_emulator import ReferenceBlas, ReferenceFFT
    from tracearray.gpu import blas as blas_mod
    from tracearray.gpu import fft as fft_mod
    monkeypatch.setattr(fft_mod, "cufft_for", lambda dev: ReferenceFFT())
    monkeypatch.setattr(blas_mod, "blas_for", lambda dev: ReferenceBlas())
    copies = []
    real = emulated.dtod
    monkeypatch.setattr(emulated, "dtod", lambda d, s, n: (copies.append(n), real(d, s, n))[1])
    x = rng(12).standard_normal((4, 16)).astype(np.float32)
    g = np.linspace(0, 1, 9).astype(np.float32)
    dead = gpu(lambda x, g: np.fft.irfft(np.fft.rfft(x) * g, 16))
    np.testing.assert_allclose(dead(x, g), np.fft.irfft(np.fft.rfft(x) * g, 16), atol=1e-5)
    assert copies == []
    live = gpu(lambda x, g: (np.fft.irfft(np.fft.rfft(x) * g, 16), np.fft.rfft(x) * g))
    a, b = live(x, g)
    np.testing.assert_allclose(a, np.fft.irfft(np.fft.rfft(x) * g, 16), atol=1e-5)
    np.testing.assert_allclose(b, np.fft.rfft(x) * g, atol=1e-5)
    assert len(copies) == 1


def test_single_launch_warm_path(emulated) -> None:
    """The warm path of an executable of one launch writing one new array
    (``GpuExecutable._single_launch``): planned after the first call, right at every later
    call, a new output array each time (no two calls share one), and the general path for
    what it does not take (NumPy inputs; an executable of two results)."""
    def ew(a, b):
        return a * b + np.exp(-b)
    f = gpu(ew)
    x, y = rng(1).standard_normal(1000).astype(np.float32), rng(2).random(1000, np.float32)
    dx, dy = tracearray.gpu.to_device(x), tracearray.gpu.to_device(y)
    outs = [f(dx, dy) for _ in range(3)]
    np.testing.assert_allclose(outs[0].numpy(), ew(x, y), rtol=1e-5, atol=1e-6)
    for o in outs[1:]:
        np.testing.assert_array_equal(o.numpy(), outs[0].numpy())
    assert len({o.ptr for o in outs}) == 3
    exe = next(iter(f._executables.values()))
    assert exe._single is not None
    np.testing.assert_array_equal(f(x, y), outs[0].numpy())   # NumPy in, NumPy out
    g = gpu(lambda a: (a + 1, a * 2))
    for _ in range(2):
        r1, r2 = g(dx)
    np.testing.assert_allclose(r2.numpy(), x * 2)
    assert next(iter(g._executables.values()))._single is None


@pytest.mark.parametrize("dtype", ["float32", "int16", "float64", "bool"])
def test_unique_runs_on_the_device(emulated, monkeypatch, dtype) -> None:
    """np.unique of the flattened array (gpu/unique.py): the device's stable sort, then the
    marks counted per chunk, scanned by one block, and the values, first positions, inverse
    and counts written from them. NumPy's results (a zero's sign free: gpu-sort-ties) with
    every flag, NaNs one value or each its own (equal_nan), +-0, a 2-d view with a negative
    stride, an empty array; chunks made small so that several chunks and blocks take part.
    Every call runs on the device (none falls back to NumPy's on the host)."""
    from tracearray.gpu import runtime, unique as gu
    from tracearray.ops import EXTERNALS
    from tracearray.testing import compare_with_numpy
    monkeypatch.setattr(gu, "CHUNK", 8)
    runtime.register_device_libraries()
    ran = []
    for op in ("unique", "unique_count"):
        def spy(*args, impl=EXTERNALS[op].device["cuda"], op=op, **kw):
            ran.append((op, impl(*args, **kw)))
            return ran[-1][1]
        monkeypatch.setitem(EXTERNALS[op].device, "cuda", spy)
    r = rng(51)
    x = np.round(r.standard_normal((7, 41)) * 4).astype(dtype) if dtype != "bool" \
        else r.standard_normal((7, 41)) > 0.5
    if x.dtype.kind == "f":
        x.reshape(-1)[::13] = np.nan
        x.reshape(-1)[1::7] = -0.0

    def every_flag(a):
        return np.unique(a, return_index=True, return_inverse=True, return_counts=True)

    def values(a):
        return np.unique(a)

    def nans_apart(a):
        return np.unique(a, return_counts=True, equal_nan=False)

    def of_view(a):
        return np.unique(a[::-2, 3:], return_inverse=True)
    for program in (every_flag, values, nans_apart, of_view):
        cmp = compare_with_numpy(program, x, device="cuda")
        assert cmp.ok, (program.__name__, cmp.report())
    got = gpu(every_flag)(x)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
    empty = gpu(every_flag)(x[:0])
    assert [np.asarray(e).shape for e in empty] == [(0,), (0,), (0, 41), (0,)]
    # device inputs: the number of distinct values is counted on the device too (NumPy
    # inputs have it counted by the CPU, where the data is)
    for program in (every_flag, nans_apart):
        got = gpu(program)(tracearray.gpu.to_device(x))
        for g, w in zip(got, program(x)):
            g = g.numpy()
            assert g.shape == w.shape and np.all((g == w) | ((g != g) & (w != w)))
    assert gpu(values)(tracearray.gpu.to_device(x[:0])).numpy().shape == (0,)
    assert {op for op, _ in ran} == {"unique", "unique_count"}
    assert all(result is None for _, result in ran), ran


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_unique_along_an_axis_runs_on_the_device(emulated, monkeypatch, dtype) -> None:
    """np.unique along an axis (gpu/unique_axis.py): the rows' lexicographic order from one
    stable sort per field, the sorted rows' differences scanned into groups, then the flat
    unique's kernels and a copy of each group's first row. NumPy's results: rows with NaNs
    each their own (equal_nan changes nothing there), +-0 equal (a sign free without
    return_index), every flag, axes 0, 1 and 2, a reversed view, device inputs (the count
    then the device's). Float rows asked for an inverse without return_index run on the
    host (NumPy's quicksort orders rows whose NaNs fall alike either way)."""
    from tracearray.gpu import runtime, unique as gu
    from tracearray.ops import EXTERNALS
    from tracearray.testing import compare_with_numpy
    monkeypatch.setattr(gu, "CHUNK", 8)
    runtime.register_device_libraries()
    ran = []
    for op in ("unique", "unique_count"):
        def spy(*args, impl=EXTERNALS[op].device["cuda"], op=op, **kw):
            ran.append((op, kw.get("axis"), impl(*args, **kw)))
            return ran[-1][2]
        monkeypatch.setitem(EXTERNALS[op].device, "cuda", spy)
    r = rng(52)
    x = r.integers(0, 3, (40, 3, 2)).astype(dtype)
    if x.dtype.kind == "f":
        x[5, 1, 0] = np.nan
        x[7] = x[5]
        x[9, 0, 1] = -0.0
        x[11] = x[9] * -1

    def every_flag(a):
        return np.unique(a, axis=0, return_index=True, return_inverse=True,
                         return_counts=True)

    def columns(a):
        return np.unique(a[::-1].reshape(40, 6).T, axis=1, return_counts=True)

    def last_axis(a):
        return np.unique(a.transpose(1, 2, 0) > 0, axis=2, return_index=True)

    def values(a):
        return np.unique(a, axis=0, equal_nan=False)

    def inverse_only(a):      # float: on the host
        return np.unique(a, axis=0, return_inverse=True)[1]
    for program in (every_flag, columns, last_axis, values, inverse_only):
        ran.clear()
        cmp = compare_with_numpy(program, x, device="cuda")
        assert cmp.ok, (program.__name__, cmp.report())
        on_host = program is inverse_only and x.dtype.kind == "f"
        assert any(res is NotImplemented for _, _, res in ran) == on_host, ran
    got = gpu(every_flag)(x)
    for g, w in zip(got, every_flag(x)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and np.all((g == w) | ((g != g) & (w != w)))
    ran.clear()
    for g, w in zip(gpu(every_flag)(tracearray.gpu.to_device(x)), every_flag(x)):
        g = g.numpy()
        assert g.shape == w.shape and np.all((g == w) | ((g != g) & (w != w)))
    assert {(op, res) for op, _, res in ran} == {("unique", None), ("unique_count", None)}
    # a 1-d operand along axis 0 is NumPy's flattened unique (NaNs one value by equal_nan)
    ran.clear()
    flat = x.reshape(-1)[:30]
    cmp = compare_with_numpy(lambda a: np.unique(a, axis=0, return_counts=True), flat,
                             device="cuda")
    assert cmp.ok, cmp.report()
    assert ran and all(res is None for _, _, res in ran), ran


def test_unique_inverse_of_nans_apart_frees_only_the_nan_slots(emulated) -> None:
    """Emulated fuzz emu-2026-12-05-c, program 860: np.unique_inverse (equal_nan=False: each
    NaN its own value) of data with NaNs: which NaN element gets which NaN slot follows the
    sort's order of the NaNs (the device's stable sort, NumPy's quicksort its own; divergence
    gpu-sort-ties). The comparator accepts the NaN elements' slots as a whole, and rejects a
    number's slot moved or a NaN given a number's slot."""
    from tracearray.testing import compare_with_numpy
    x = np.round(rng(61).standard_normal((4, 64)) * 4).astype(np.float32)
    x.reshape(-1)[::9] = np.nan

    def program(a):
        return np.unique_inverse(a).inverse_indices
    cmp = compare_with_numpy(program, x, device="cuda")
    assert cmp.ok, cmp.report()
    nan_at = np.flatnonzero(np.isnan(x))

    def swap_nans(out):         # two NaN elements trade slots: allowed
        o = out.copy().reshape(-1)
        o[nan_at[[0, 1]]] = o[nan_at[[1, 0]]]
        return o.reshape(out.shape)

    def number_moved(out):      # a number's slot changed: wrong
        o = out.copy().reshape(-1)
        k = int(np.flatnonzero(~np.isnan(x.reshape(-1)))[0])
        o[k] = (o[k] + 1) % o.max()
        return o.reshape(out.shape)

    def nan_to_number(out):     # a NaN given a number's slot: wrong
        o = out.copy().reshape(-1)
        o[nan_at[0]] = 0
        return o.reshape(out.shape)
    assert compare_with_numpy(program, x, device="cuda",
                              compiled=_Altered(program, "cuda", swap_nans)).ok
    for change in (number_moved, nan_to_number):
        assert not compare_with_numpy(program, x, device="cuda",
                                      compiled=_Altered(program, "cuda", change)).ok, change


def test_block_rows_indexed_by_parallel_dims_on_both_sides(emulated) -> None:
    """A reduction over axes (1, 3) with a map after it: rows of 1,147 elements (block_row)
    indexed by two parallel dimensions, the pipelined row prefetch's branch among them (LLVM
    rejected the kernel: soak gpu-2026-12-07-tenth-b, program 1). Values against NumPy."""
    from tracearray.testing import assert_matches_numpy
    x = rng(3).standard_normal((2, 37, 3, 31)).astype(np.float32)
    assert_matches_numpy(lambda x: (x - x.max(axis=(1, 3), keepdims=True)) /
                         x.mean(axis=(1, 3), keepdims=True), x, device="cuda")


def test_block_row_cache_of_one_byte_values_beside_eight_byte_ones(emulated) -> None:
    """int8 rows of 2,000 read by a reduction and again by an int64 output: the row cache's
    2-byte copies are made by the sweep (cp.async has none; probe session 7). Values."""
    from tracearray.testing import assert_matches_numpy
    x = (np.arange(4 * 2000) % 100).astype(np.int8).reshape(4, 2000)
    assert_matches_numpy(lambda a: a + a.sum(axis=1, keepdims=True), x, device="cuda")


# ------------------------------------------------------------------ the emulator's barriers
_SKIP_BARRIER_IR = '''
declare i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
declare void @"llvm.nvvm.barrier.cta.sync.aligned.all"(i32)
declare i32 @"llvm.nvvm.shfl.sync.idx.i32"(i32, i32, i32, i32)
define ptx_kernel void @"meet"(i64 %out, i64 %skip) {
entry:
  %t = call i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
  %odd = and i32 %t, 1
  %s = trunc i64 %skip to i1
  %away = icmp ne i32 %odd, 0
  %leave = and i1 %s, %away
  br i1 %leave, label %done, label %meet
meet:
  call void @"llvm.nvvm.barrier.cta.sync.aligned.all"(i32 0)
  %v = call i32 @"llvm.nvvm.shfl.sync.idx.i32"(i32 -1, i32 %t, i32 31, i32 31)
  %p = inttoptr i64 %out to i32*
  %q = getelementptr i32, i32* %p, i32 %t
  store i32 %v, i32* %q
  br label %done
done:
  ret void
}
'''


@pytest.mark.parametrize("skip", [False, True])
def test_a_barrier_some_threads_skip_breaks_instead_of_hanging(monkeypatch, skip) -> None:
    """The emulator's native barriers (tests/gpu_emulator.py): every thread of a block meets
    at the barrier and a warp's shuffle reads lane 31's value; a barrier the odd threads
    never reach breaks after the block's wait (a second here) and the launch raises, as a
    divergent barrier must fail a test rather than pass or hang it."""
    import ctypes
    import threading
    import time

    import gpu_emulator as emu
    monkeypatch.setattr(emu, "_BARRIER_TIMEOUT_S", 1)
    dev = EmulatedDevice()
    fn = dev.load("", ["meet"], _SKIP_BARRIER_IR)["meet"]
    out = (ctypes.c_int32 * 64)()
    values = (ctypes.c_uint64 * 2)(ctypes.addressof(out), int(skip))
    args = (ctypes.c_uint64 * 2)(ctypes.addressof(values), ctypes.addressof(values) + 8)
    start = time.monotonic()
    if skip:
        with pytest.raises(threading.BrokenBarrierError, match="never reached it"):
            dev.launch(fn, 1, 64, ctypes.addressof(args))
        assert time.monotonic() - start < 10
    else:
        dev.launch(fn, 1, 64, ctypes.addressof(args))
        assert list(out) == [31] * 32 + [63] * 32


def test_constant_results_writeable_and_a_result_returned_twice_is_one_array():
    """(emulator probe, sixteenth session) A result the graph folds to a constant
    (np.arange, an empty np.nonzero) was returned read-only with NumPy inputs, and an array
    returned twice came back as two copies: NumPy's are writeable, and one array."""
    f = tracearray.compile(lambda x: (x + 1, np.arange(5), np.nonzero(x < 0)[0]), device="cuda")
    _, r, empty = f(np.ones(4))
    assert r.flags.writeable and empty.flags.writeable
    r[0] = 7
    np.testing.assert_array_equal(r, [7, 1, 2, 3, 4])
    a, b = tracearray.compile(lambda x: (lambda t: (t, t))(x + 1), device="cuda")(np.ones(5))
    assert a is b


def test_device_inputs_with_weak_results_zero_d_values_and_negative_strides():
    """(emulator probe, sixteenth session) A weak random draw returned with device inputs
    crashed (float() of an Array); 0-d values became shape (1,) on the device; a device
    input of negative stride read by a host step raised 'negative dimensions'."""
    from tracearray import gpu
    f = tracearray.compile(lambda x: (x + 1, np.random.default_rng(0).uniform()), device="cuda")
    _, u = f(gpu.to_device(np.ones(4, np.float32)))
    assert type(u) is float
    assert gpu.to_device(np.array(3.0)).shape == ()
    g = tracearray.compile(lambda x: np.float32(x[0]), device="cuda")
    assert np.shape(g(gpu.to_device(np.arange(5.0)))) == ()
    x = np.arange(16.0)
    dx = gpu.to_device(x)
    rev = gpu.Array(dx.ptr + 15 * 8, (16,), np.float64, (-8,), owner=dx)   # x[::-1]
    r = tracearray.compile(lambda a: np.fft.fft(a), device="cuda")(rev)
    np.testing.assert_allclose(np.asarray(r), np.fft.fft(x[::-1]), atol=1e-9)
    k = tracearray.compile(lambda a: a * 2, device="cuda")
    np.testing.assert_array_equal(np.asarray(k(rev)), x[::-1] * 2)


def test_device_arrays_whose_elements_overlap_are_not_written(emulated) -> None:
    """A device Array of stride 0 or overlapping windows (CuPy's broadcast_to, torch's
    expand, through DLPack) that the function writes into is refused as a NumPy array of
    that layout is (the kernels wrote its shared elements in parallel: wrong values)."""
    from tracearray.errors import InputError
    base = Array.from_numpy(np.arange(6.0))
    for shape, strides in (((4, 5), (0, 8)), ((4, 3), (8, 8))):
        view = Array(base.ptr, shape, np.float64, strides, owner=base)
        for fn in (lambda x: (x.__iadd__(1), x.sum())[1],
                   lambda x: (x.__setitem__(slice(None), x * 2), x.mean())[1]):
            with pytest.raises(InputError, match="share memory"):
                gpu(fn)(view)
    np.testing.assert_array_equal(base.numpy(), np.arange(6.0))


def test_device_arrays_reached_other_than_as_arguments_are_refused_by_line(emulated) -> None:
    """A device Array in a global, a closure or an attribute, used with an operator or a
    NumPy function: a located refusal that says to pass it as an argument (an operator
    gave Python's bare TypeError)."""
    w = Array.from_numpy(np.arange(4.0))
    for fn in (lambda x: x * w, lambda x: w + x, lambda x: np.add(x, w)):
        with pytest.raises(tracearray.UnsupportedOperationError, match="pass it as an argument"):
            gpu(fn)(np.ones(4))
