"""GPU execution tests (``-m gpu``): skipped unless cuda-bindings, a driver and a GPU are here.

- the CPU differential suite (``test_cpu_ops.py``), every test re-run with ``device="cuda"``:
  the same programs, inputs and tolerance table (``numpy_compare``);
- the 13 benchmark workloads against their float64 references;
- interop without copies: CuPy and PyTorch arrays in, ``tracearray.Array`` out, taken back by
  CuPy / PyTorch (``__cuda_array_interface__`` and DLPack) at the same address;
- asynchrony (device arrays in: no synchronisation until host data is asked for), the caching
  allocator (no cuMemAlloc per call), out-of-memory as MemoryError, deterministic full
  reductions, readable driver errors;
- arrays of more than 2^31 elements (64-bit indexing) on both sides of 2^31.
"""
from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gpu_differential as gd
import tracearray
from tracearray.gpu import Array, driver

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HAVE_GPU = driver.is_available()
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and "
                                                      "cuda-bindings (pip install "
                                                      "'tracearray[cuda]')"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def gpu(fn, **kw):
    return tracearray.compile(fn, device="cuda", **kw)


@pytest.fixture
def dev():
    return driver.get_device()


def test_device_description(dev) -> None:
    print(f"\n{dev!r}: {dev.sm_count} SMs, driver {dev.driver_version}, target {dev.target}")
    assert dev.cc >= (7, 0)


def test_workloads_match_float64_reference() -> None:
    from benchmarks import workloads as W
    for name in W.names():
        w = W.get(name)
        inputs = W.make_inputs(name, "check", seed=0)
        args = [inputs[a.name] for a in w.args]
        f = gpu(w.fn)
        for _ in range(2):
            out = f(*args)
            err = W.max_rel_err(out, W.reference(w, inputs))
            assert err <= w.tol, f"{name}: {err} > {w.tol}"


# ------------------------------------------------------------------------------------------
# Interop
# ------------------------------------------------------------------------------------------

def test_cupy_in_and_out_without_copies(dev) -> None:
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal((300, 257), dtype=cp.float32)
    f = gpu(lambda a: (np.exp(a - a.max(-1, keepdims=True)), a.sum(0)))
    e, s = f(x)
    assert isinstance(e, Array) and isinstance(s, Array)
    ce = cp.asarray(e)                                  # CuPy takes it: same memory
    assert ce.data.ptr == e.ptr
    want = cp.exp(x - x.max(-1, keepdims=True))
    assert float(cp.abs(ce - want).max()) < 1e-5
    np.testing.assert_allclose(cp.asnumpy(cp.asarray(s)), cp.asnumpy(x).sum(0), rtol=1e-4,
                               atol=1e-4)
    assert tracearray.gpu.as_array(x).ptr == x.data.ptr  # ... and we take CuPy's: same memory
    cd = cp.from_dlpack(e)
    assert cd.data.ptr == e.ptr
    xt = x.T                                             # a strided CuPy view
    np.testing.assert_allclose(gpu(lambda a: a * 2)(xt).numpy(), cp.asnumpy(xt) * 2)


def test_torch_in_and_out_without_copies(dev) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    t = torch.randn(128, 1000, device="cuda")
    f = gpu(lambda a, b: np.maximum(a @ b + 1.0, 0.0))
    w = torch.randn(1000, 64, device="cuda")
    y = f(t, w)
    assert isinstance(y, Array)
    ty = torch.as_tensor(y, device="cuda")              # __cuda_array_interface__
    assert ty.data_ptr() == y.ptr
    td = torch.from_dlpack(y)                           # DLPack
    assert td.data_ptr() == y.ptr
    want = torch.relu(t @ w + 1.0)
    assert float((ty - want).abs().max()) < 1e-3 * float(want.abs().max())
    assert tracearray.gpu.as_array(t).ptr == t.data_ptr()
    tt = t.t()                                          # strided torch view
    np.testing.assert_allclose(gpu(lambda a: a + 1)(tt).numpy(), tt.cpu().numpy() + 1)
    h = torch.arange(10, device="cuda", dtype=torch.float64)
    np.testing.assert_array_equal(gpu(lambda a: a * 3)(h).numpy(), np.arange(10) * 3.0)


def test_jax_in(dev) -> None:
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # leave memory to us
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("jax has no GPU")
    import jax.numpy as jnp
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), gpus[0])
    out = gpu(lambda a: a * 2 + 1)(x)
    np.testing.assert_array_equal(out.numpy(), np.arange(1000, dtype=np.float32) * 2 + 1)


# ------------------------------------------------------------------------------------------
# Runtime behaviour
# ------------------------------------------------------------------------------------------

def test_device_inputs_do_not_synchronise(dev, monkeypatch) -> None:
    x = Array.from_numpy(np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32))
    f = gpu(lambda a: np.tanh(a) @ a + a.sum(0))
    f(x).numpy()   # compile and load first
    calls = []
    real = dev.synchronize
    monkeypatch.setattr(dev, "synchronize", lambda: (calls.append(1), real())[1])
    y = f(x)
    assert calls == [] and isinstance(y, Array)
    host = y.numpy()
    assert calls and host.shape == (1000, 1000)


def test_caching_allocator_no_driver_allocation_per_call(dev) -> None:
    x = Array.from_numpy(np.ones((512, 512), np.float32))
    f = gpu(lambda a: (a * 2, a.sum(1), a.sum()))
    f(x)
    gc.collect()
    before = dev.allocator.driver_allocs
    for _ in range(20):
        r = f(x)
        del r
        gc.collect()
    assert dev.allocator.driver_allocs == before


def test_host_copies_round_trip_with_the_source_reused_at_once(dev) -> None:
    """Copies of many sizes queued before one wait, each source overwritten as soon as its
    copy returned (the driver stages pageable memory before returning); and NumPy arguments
    of a compiled function, whose results come back the same way."""
    mid = 1 << 15   # elements: 128 KiB of float32
    rng = np.random.default_rng(7)
    sizes = [1, 3, 1000, mid, mid + 1, 12 * mid] + [mid] * 80
    sent, arrays = [], []
    for n in sizes:
        host = rng.standard_normal(n).astype(np.float32)
        sent.append(host.copy())
        arrays.append(Array.from_numpy(host))
        host[:] = np.nan
    for want, arr in zip(sent, arrays):
        np.testing.assert_array_equal(arr.numpy(), want)
    f = gpu(lambda a, b: a * b + 1.0)
    for n in (5, 4097, mid + 3):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(f(a, b), a * b + np.float32(1.0))


def test_out_of_memory_is_a_memory_error(dev) -> None:
    with pytest.raises(MemoryError, match="CUDA out of memory"):
        Array.empty((1 << 48,), np.uint8)   # 256 TiB


def test_driver_errors_are_readable(dev) -> None:
    with pytest.raises(driver.CudaError, match="cuMemFree failed: CUDA_ERROR_"):
        dev.mem_free(12345)


def test_full_reduction_is_deterministic(dev) -> None:
    x = Array.from_numpy(np.random.default_rng(1).standard_normal(10_000_019).astype(np.float32))
    f = gpu(lambda a: (a.sum(), (a * a).mean()))
    first = [o.numpy() for o in f(x)]
    for _ in range(5):
        again = [o.numpy() for o in f(x)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again))
    ref = np.asarray(x).astype(np.float64)
    assert abs(float(first[0]) - ref.sum()) <= 1e-6 * np.abs(ref).sum()


def test_more_than_2_31_elements(dev) -> None:
    """64-bit indexing: elementwise, full and arg reductions, a row reduction with a row of
    more than 2^31 elements, on both sides of 2^31 (8 GiB in, 2 + 8 GiB out)."""
    cp = pytest.importorskip("cupy")
    n = (1 << 31) + 4099
    x = cp.zeros(n, dtype=cp.uint8)
    marks = {0: 1, (1 << 31) - 1: 2, 1 << 31: 3, (1 << 31) + 77: 9, n - 1: 4}
    for i, v in marks.items():
        x[i] = v
    f = gpu(lambda a: (a * 2 + 1, a.astype(np.int64).sum(), a.argmax(), a.reshape(1, -1).max(1)))
    y, s, am, rm = f(x)
    cy = cp.asarray(y)
    for i, v in marks.items():
        assert int(cy[i]) == 2 * v + 1, i
    assert int(cy[12345]) == 1 and int(cy[n - 2]) == 1
    assert int(s.numpy()) == sum(marks.values())
    assert int(am.numpy()) == (1 << 31) + 77
    assert int(rm.numpy()[0]) == 9
    del y, cy, x
    gc.collect()
    xf = cp.ones(n, dtype=cp.float32)
    xf[n - 1] = 5.0
    yf = cp.asarray(gpu(lambda a: a * 3.0 - 1.0)(xf))
    assert float(yf[0]) == 2.0 and float(yf[(1 << 31) + 1]) == 2.0 and float(yf[n - 1]) == 14.0


def test_bandwidth_report(dev) -> None:
    """Not a pass/fail speed test: prints achieved bandwidth of three kernels."""
    rng = np.random.default_rng(0)
    cases = {
        "ew a*b+c*exp(-d) 2^26": (lambda a, b, c, d: a * b + c * np.exp(-d),
                                  [rng.standard_normal(1 << 26, np.float32) for _ in range(4)], 5),
        "softmax 2^15x4096": (lambda x: np.exp(x - x.max(-1, keepdims=True))
                              / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
                              [rng.standard_normal((1 << 15, 4096), np.float32)], 2),
        "sum 2^28": (lambda x: x.sum(), [rng.standard_normal(1 << 28, np.float32)], 1),
    }
    for name, (fn, host, nio) in cases.items():
        args = [Array.from_numpy(h) for h in host]
        f = gpu(fn)
        f(*args)
        dev.synchronize()
        t0 = time.perf_counter()
        reps = 10
        for _ in range(reps):
            out = f(*args)
        dev.synchronize()
        dt = (time.perf_counter() - t0) / reps
        nbytes = host[0].nbytes * nio
        line = f"{name}: {dt * 1e3:.3f} ms, {nbytes / dt / 1e12:.2f} TB/s"
        print("\n" + line)
        report = os.environ.get("TRACEARRAY_TEST_REPORT")
        if report:
            with open(report, "a") as fh:
                fh.write(line + "\n")
        del out


def test_events_time_work_on_tracearrays_stream(dev) -> None:
    """tracearray.gpu.Event brackets a compiled call queued on tracearray's stream: its device
    time is no faster than the memory allows (events on another stream would see ~0) and no
    longer than a host clock around the call and the wait."""
    n = 1 << 26
    x = Array.from_numpy(np.ones(n, np.float32))
    f = gpu(lambda a: np.sqrt(a) * 2.0 + 1.0)
    f(x)
    dev.synchronize()
    start, end = tracearray.gpu.Event(), tracearray.gpu.Event()
    t0 = time.perf_counter()
    start.record()
    y = f(x)
    end.record()
    end.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3
    ms = start.elapsed_ms(end)
    fastest_ms = 2 * 4 * n / 6e12 * 1e3   # read + write at 6 TB/s, above any GPU's memory
    assert fastest_ms <= ms <= wall_ms
    assert float(y.numpy()[0]) == 3.0


# ------------------------------------------------------------------------------------------
# The CPU differential suite, on the GPU (collected last: the checks above run first)
# ------------------------------------------------------------------------------------------

_MODS = gd.collect(globals(), prefix="cuda_")


@pytest.fixture(autouse=True)
def _cpu_tests_on_the_gpu(request, monkeypatch):
    if request.node.name.startswith("test_cuda_") and _MODS:
        gd.patch_compiled(monkeypatch, _MODS, gpu)
    yield


def test_external_ops_between_kernels() -> None:
    """Library calls between the kernels around them, for NumPy and device inputs: sorts of
    rows that fit a block on the device (gpu/sort.py), order statistics, a raw QR
    and a solve with two right-hand sides on the host (operands copied from the device on the
    stream, results copied back), all with NumPy's exact results here."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (64, 300)).astype(np.float32)
    x[::7, ::5] = np.nan
    a = rng.standard_normal((8, 16, 16))
    spd = a @ a.swapaxes(-1, -2) + 16 * np.eye(16)

    def f(x, spd):
        s = np.sort(x * 2 + 1, axis=-1)
        h, tau = np.linalg.qr(spd * 2, mode="raw")
        return (s[:, ::-1] - 1, np.argsort(x, axis=0, kind="stable"),
                np.nanmedian(x, axis=1) + 1, np.linalg.solve(spd, spd[..., :2]) * 3, h, tau)

    want = f(x, spd)
    for args in ((x, spd), (Array.from_numpy(x), Array.from_numpy(spd))):
        got = gpu(f)(*args)
        for g, w_ in zip(got, want):
            g = g.numpy() if isinstance(g, Array) else g
            assert g.dtype == w_.dtype and g.shape == w_.shape
            np.testing.assert_array_equal(g, w_)
    with pytest.raises(np.linalg.LinAlgError, match="test_gpu_cuda.py"):
        gpu(lambda m: np.linalg.inv(m))(np.ones((4, 4)))


def test_float_matmuls_run_in_cublas(monkeypatch) -> None:
    """Float32/float64 products run in cuBLAS on the GPU (gpu/blas.py) in every layout it
    translates, and match NumPy exactly on small integers; the others run tracearray's own
    kernel and match too."""
    from library_forms import MATMUL_FORMS
    from tracearray.gpu import blas as blas_mod
    blas = blas_mod.blas_for(driver.get_device())
    assert blas is not None, "cuBLAS was not found on this GPU machine"
    calls = []
    real = blas_mod.Blas.gemm
    monkeypatch.setattr(blas_mod.Blas, "gemm",
                        lambda self, *a: (calls.append(a[0]), real(self, *a))[1])
    rng = np.random.default_rng(3)
    for name, (fn, shapes, dtype, taken) in sorted(MATMUL_FORMS.items()):
        for device_inputs in (False, True):
            calls.clear()
            args = [rng.integers(-3, 4, s).astype(dtype) for s in shapes]
            want = fn(*args)
            call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
            got = gpu(fn)(*call)
            got = got if isinstance(got, tuple) else (got,)
            want = want if isinstance(want, tuple) else (want,)
            for g, w in zip(got, want):
                g = g.numpy() if isinstance(g, Array) else np.asarray(g)
                np.testing.assert_array_equal(g, np.asarray(w), err_msg=name)
            assert bool(calls) == taken, (name, calls)


def test_tf32_matmul_precision_is_opt_in(monkeypatch) -> None:
    """compile(matmul_precision="tf32") lets cuBLAS's float32 products use TF32 tensor cores:
    within TF32's error of the float64 product but measurably off float32's; the default
    stays float32-accurate; float64 products are unaffected by the option."""
    from tracearray.gpu import blas as blas_mod
    calls = []
    real = blas_mod.Blas.gemm
    monkeypatch.setattr(blas_mod.Blas, "gemm",
                        lambda self, *a: (calls.append(a[0]), real(self, *a))[1])
    rng = np.random.default_rng(11)
    a = rng.standard_normal((512, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 256)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)

    def err(got):
        got = got.numpy() if isinstance(got, Array) else np.asarray(got)
        return np.linalg.norm(got - exact) / np.linalg.norm(exact)

    fn = lambda x, y: np.maximum(x @ y, 0.0) + 1.0   # noqa: E731 - with an epilogue
    exact = np.maximum(exact, 0.0) + 1.0
    default = err(gpu(fn)(a, b))
    assert [g.tf32 for g in calls] == [False]
    calls.clear()
    tf32 = err(gpu(fn, matmul_precision="tf32")(a, b))
    assert [g.tf32 for g in calls] == [True]
    assert default < 1e-6, default
    assert 1e-5 < tf32 < 5e-3, tf32   # TF32 keeps 10 mantissa bits: ~5e-4 per product
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    got = gpu(lambda x, y: x @ y, matmul_precision="tf32")(a64, b64)
    np.testing.assert_allclose(np.asarray(got), a64 @ b64, rtol=1e-12, atol=1e-11)


def test_ffts_run_in_cufft(monkeypatch) -> None:
    """FFTs run in cuFFT on the GPU (gpu/fft.py) in every layout it translates, within the
    gpu-fft-rounding tolerance of NumPy's (spectra with non-zero imaginary parts at the zero
    and Nyquist frequencies included: C2R clears them as pocketfft ignores them); the
    forms cuFFT does not take run on the host."""
    from library_forms import FFT_FORMS
    from tracearray.gpu import fft as fft_mod
    assert fft_mod.cufft_for(driver.get_device()) is not None, "cuFFT was not found"
    runs = []
    real = fft_mod.CuFFT.execute
    monkeypatch.setattr(fft_mod.CuFFT, "execute",
                        lambda self, *a: (runs.append(a[0]), real(self, *a))[1])
    for name, (fn, make, taken) in sorted(FFT_FORMS.items()):
        for device_inputs in (False, True):
            runs.clear()
            args = make(np.random.default_rng(4))
            want = fn(*args)
            call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
            got = gpu(fn)(*call)
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                g = g.numpy() if isinstance(g, Array) else np.asarray(g)
                assert g.dtype == w.dtype and g.shape == w.shape, name
                tol = 2e-6 if w.dtype in (np.float32, np.complex64) else 1e-14
                n = max(np.shape(args[0])[-1], 2)
                np.testing.assert_allclose(g, w, rtol=0, atol=tol * np.log2(n) * np.abs(w).max(initial=0)
                                           * 4, err_msg=name)
            assert bool(runs) == taken, (name, runs)
            for a, c in zip(args, call):
                np.testing.assert_array_equal(c.numpy() if isinstance(c, Array) else c, a)


def test_small_solves_and_inverses_run_in_cublas(monkeypatch) -> None:
    """linalg.solve (one right-hand side per system) and inv of small matrices run in
    cuBLAS's batched LU on the GPU (gpu/linalg.py), close to NumPy's LAPACK; a singular
    matrix raises NumPy's LinAlgError (at the end of a call with NumPy inputs, at the next
    wait with device arrays); the other forms run on the host."""
    from library_forms import LINALG_FORMS
    from tracearray.gpu import blas as blas_mod
    calls = []
    for m in ("lu_batched", "lu_solve_batched", "lu_inverse_batched"):
        real = getattr(blas_mod.Blas, m)
        monkeypatch.setattr(blas_mod.Blas, m,
                            lambda self, *a, _real=real, _m=m: (calls.append(_m), _real(self, *a))[1])
    for name, (fn, make, taken) in sorted(LINALG_FORMS.items()):
        for device_inputs in (False, True):
            calls.clear()
            args = make(np.random.default_rng(8))
            want = fn(*args)
            call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
            got = gpu(fn)(*call)
            got = got.numpy() if isinstance(got, Array) else got
            assert got.dtype == want.dtype and got.shape == want.shape, name
            tol = 1e-4 if want.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
            assert bool(calls) == taken, (name, calls)
    a = np.stack([np.eye(3), np.ones((3, 3))])
    f = gpu(lambda a, b: np.linalg.solve(a, b))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        f(a, np.ones((2, 3, 1)))
    out = f(Array.from_numpy(a), Array.from_numpy(np.ones((2, 3, 1))))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        out.numpy()


def test_long_rows_sort_over_all_blocks_on_the_gpu() -> None:
    """Rows longer than a block sorts run as the radix sort over all the blocks
    (gpu/radix_sort.py): one long row of 2^24 + 3 values (NaN, signed zeros and infinities
    among them), many long rows (two passes over the row numbers), an integer axis 0 and the
    median of long rows, against NumPy; argsort with kind="stable" exactly."""
    r = np.random.default_rng(5)
    x = r.standard_normal((1 << 24) + 3).astype(np.float32)
    x[::1001] = np.nan
    x[5::997] = -0.0
    x[7::991] = np.inf
    x[9::983] = -np.inf
    got = np.asarray(gpu(np.sort)(x))
    assert np.array_equal(got, np.sort(x), equal_nan=True)
    np.testing.assert_array_equal(gpu(lambda v: np.argsort(v, kind="stable"))(x),
                                  np.argsort(x, kind="stable"))
    rows = r.integers(-50, 50, (300, 5001)).astype(np.float64)
    np.testing.assert_array_equal(gpu(lambda v: np.sort(v, axis=-1))(rows), np.sort(rows, -1))
    ints = r.integers(-2**31, 2**31 - 1, (5000, 7), dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(gpu(lambda v: np.argsort(v, axis=0, kind="stable"))(ints),
                                  np.argsort(ints, axis=0, kind="stable"))
    long_rows = r.standard_normal((3, 1_000_001)).astype(np.float32)
    np.testing.assert_array_equal(gpu(lambda v: np.median(v, axis=-1))(long_rows),
                                  np.median(long_rows, axis=-1))


def test_rows_sort_in_a_block_on_the_gpu() -> None:
    """sort and argsort of rows that fit a block run as the bitonic kernel (gpu/sort.py) on
    the GPU: NumPy's values (NaN last; the zeros' signs free), kind="stable" positions
    exactly, every axis, views, integer widths and bool; longer rows on the host."""
    from library_forms import SORT_FORMS
    for name, (fn, make, taken) in sorted(SORT_FORMS.items()):
        for device_inputs in (False, True):
            args = make(np.random.default_rng(11))
            want = fn(*args)
            call = [tracearray.gpu.to_device(a) for a in args] if device_inputs else args
            got = gpu(fn)(*call)
            got = got.numpy() if isinstance(got, Array) else np.asarray(got)
            assert got.dtype == want.dtype and got.shape == want.shape, name
            both = np.isnan(got) & np.isnan(want) if want.dtype.kind == "f" else False
            assert np.all((got == want) | both), name
    x = np.random.default_rng(1).standard_normal((4096, 1000)).astype(np.float32)
    np.testing.assert_array_equal(gpu(lambda v: np.sort(v, axis=-1))(x), np.sort(x, axis=-1))
    np.testing.assert_array_equal(gpu(lambda v: np.argsort(v, axis=0, kind="stable"))(x[:, :64]),
                                  np.argsort(x[:, :64], axis=0, kind="stable"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_partitions_on_the_gpu(dtype) -> None:
    """np.partition and np.argpartition as the device's stable sorts (divergence
    gpu-partition-order): block-sorted rows, a long row (radix sort), axis 0, several kth,
    device inputs; the comparator checks NumPy's kth values and the contract, and the
    results are the stable sort's (the device ran them, not NumPy's introselect)."""
    from tracearray.testing import compare_with_numpy
    rng = np.random.default_rng(41)
    short = np.round(rng.standard_normal((300, 257)) * 20).astype(dtype)
    long = np.round(rng.standard_normal((2, 100_003)) * 20).astype(dtype)
    if short.dtype.kind == "f":
        short[::5, ::9] = np.nan
        short[1::3, ::7] = -0.0
    for x, axis, kth in ((short, -1, 17), (short, 0, (0, 150, -1)), (long, -1, (5, 70_000))):
        for op in (np.partition, np.argpartition):
            def program(a, op=op):
                return op(a, kth, axis=axis)
            cmp = compare_with_numpy(program, x, device="cuda")
            assert cmp.ok, cmp.report()
            got = gpu(program)(tracearray.gpu.to_device(x)).numpy()
            want = (np.sort if op is np.partition else np.argsort)(x, axis=axis, kind="stable")
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "bool"])
def test_unique_on_the_gpu(dtype) -> None:
    """np.unique of the flattened array on the device (gpu/unique.py), every flag, NaNs one
    value or each their own, short arrays (the block sort) and long ones (the radix sort,
    many chunks and blocks), NumPy and device inputs (the count is then the device's):
    NumPy's results, a zero's sign free without return_index (gpu-sort-ties)."""
    rng = np.random.default_rng(43)
    for shape in ((37, 29), (3_000_017,)):
        x = np.round(rng.standard_normal(shape) * 50).astype(dtype) if dtype != "bool" \
            else rng.standard_normal(shape) > 0
        if x.dtype.kind == "f":
            x.reshape(-1)[::101] = np.nan
            x.reshape(-1)[3::17] = -0.0

        def every_flag(a):
            return np.unique(a, return_index=True, return_inverse=True, return_counts=True)

        def nans_apart(a):
            return np.unique(a[::-1], return_counts=True, equal_nan=False)
        for program in (every_flag, nans_apart):
            _unique_matches_numpy(program, x)


def _unique_matches_numpy(program, x) -> None:
    """``program`` (np.unique forms) passes the comparator and, on device inputs, gives
    NumPy's results exactly (NaN where NumPy has NaN)."""
    from tracearray.testing import compare_with_numpy
    cmp = compare_with_numpy(program, x, device="cuda")
    assert cmp.ok, cmp.report()
    got = gpu(program)(tracearray.gpu.to_device(x))
    for g, w in zip(got, program(x)):
        g = g.numpy()
        assert g.shape == w.shape and np.all((g == w) | ((g != g) & (w != w)))


def test_unique_along_an_axis_on_the_gpu() -> None:
    """np.unique along an axis on the device (gpu/unique_axis.py): short stacks (the block
    sort) and 300,007 rows (the radix sort), NaN rows, +-0, every flag, NumPy and device
    inputs: NumPy's results (a zero's sign free without return_index)."""
    rng = np.random.default_rng(44)
    for shape in ((37, 3), (300_007, 2)):
        x = rng.integers(-2, 3, shape).astype(np.float64)
        x[::1001, 0] = np.nan
        x[3::17, 1] = -0.0

        def every_flag(a):
            return np.unique(a, axis=0, return_index=True, return_inverse=True,
                             return_counts=True)

        def columns(a):
            return np.unique(a.T, axis=1, return_counts=True)
        for program in (every_flag, columns):
            _unique_matches_numpy(program, x)


def test_qr_on_the_gpu(monkeypatch) -> None:
    """np.linalg.qr (reduced, complete, r) of small contiguous stacks as a block per matrix
    (gpu/factorizations.py): NumPy's Q and R (LAPACK's reflectors, so its signs) within the
    tolerance; mode raw and large matrices on the host."""
    from library_forms import QR_FORMS, spy_on_device
    from tracearray.gpu import factorizations
    from tracearray.testing import compare_with_numpy
    ran = spy_on_device(monkeypatch, {"linalg.qr": factorizations.qr})
    for name, (fn, make, taken) in sorted(QR_FORMS.items()):
        ran.clear()
        args = make(np.random.default_rng(16))
        cmp = compare_with_numpy(fn, *args, device="cuda")
        assert cmp.ok, (name, cmp.report())
        assert any(r is not NotImplemented for r in ran) == taken, (name, ran)


def test_spectral_decompositions_on_the_gpu(monkeypatch) -> None:
    """np.linalg.eigh, eigvalsh and svd of small contiguous stacks by Jacobi rotations
    (gpu/jacobi.py): the quantities every valid basis gives (values, |vectors| of distinct
    values, the matrix rebuilt, projections) are NumPy's within the comparator's tolerance
    and the test's; the raw vectors pass the comparator's contract (gpu-spectral-basis);
    a NaN matrix gives NaNs; the other forms run on the host."""
    from library_forms import SPECTRAL_FORMS, _sym, spectral_implementations, spy_on_device
    from tracearray.testing import compare_with_numpy
    ran = spy_on_device(monkeypatch, spectral_implementations())
    for name, (fn, make, taken) in sorted(SPECTRAL_FORMS.items()):
        ran.clear()
        args = make(np.random.default_rng(18))
        cmp = compare_with_numpy(fn, *args, device="cuda")
        assert cmp.ok, (name, cmp.report())
        got, want = gpu(fn)(*args), fn(*args)
        got = tuple(got) if isinstance(want, tuple) else (got,)
        want = tuple(want) if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            f32 = w.dtype == np.float32
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4 if f32 else 1e-9,
                                       atol=1e-4 if f32 else 1e-10, err_msg=name)
        assert any(r is not NotImplemented for r in ran) == taken, (name, ran)
    r = np.random.default_rng(19)
    for program, x in ((lambda a: tuple(np.linalg.eigh(a)), _sym(r, (64, 32, 32))),
                       (lambda a: tuple(np.linalg.svd(a)), r.standard_normal((16, 40, 64))),
                       (lambda a: tuple(np.linalg.svd(a, full_matrices=False)),
                        r.standard_normal((16, 64, 40)).astype(np.float32))):
        cmp = compare_with_numpy(program, x, device="cuda")
        assert cmp.ok, cmp.report()
    assert np.isnan(np.asarray(gpu(lambda a: np.linalg.svd(a, compute_uv=False))(
        np.array([[1.0, np.nan], [0.0, 1.0]])))).all()


def test_cholesky_on_the_gpu(monkeypatch) -> None:
    """np.linalg.cholesky of small contiguous stacks as a block per matrix
    (gpu/factorizations.py): NumPy's factor within the LU tolerance, the zero triangle
    exact, upper=True, only the lower triangle read; a matrix that is not positive definite
    raises NumPy's LinAlgError; the other forms run on the host."""
    from library_forms import CHOLESKY_FORMS, spy_on_device
    from tracearray.gpu import factorizations
    from tracearray.testing import compare_with_numpy
    ran = spy_on_device(monkeypatch, {"linalg.cholesky": factorizations.cholesky})
    for name, (fn, make, taken) in sorted(CHOLESKY_FORMS.items()):
        ran.clear()
        args = make(np.random.default_rng(14))
        cmp = compare_with_numpy(fn, *args, device="cuda")
        assert cmp.ok, (name, cmp.report())
        assert any(r is not NotImplemented for r in ran) == taken, (name, ran)
    f = gpu(lambda a: np.linalg.cholesky(a))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        f(np.stack([np.eye(3), -np.eye(3)]))


def test_block_rows_on_the_gpu() -> None:
    """block_rows (8 rows per block sharing the loads of a row-invariant array) on a real
    device: pairwise minimum distances and an argmin of distances over 4099 rows (a last group
    of 3) of 3000 columns, with a NaN in one column, against NumPy."""
    from numpy_compare import assert_matches
    rng = np.random.default_rng(21)
    p = rng.standard_normal((4099, 3)).astype(np.float32)
    q = rng.standard_normal((3000, 3)).astype(np.float32)

    def pairwise(a, c):
        return ((a[:, None, :] - c[None, :, :]) ** 2).sum(-1).min(1)

    def argmin_dist(a, c):      # the squares written out: no nested sum
        d = sum((a[:, None, i] - c[None, :, i]) ** 2 for i in range(3))
        return np.argmin(d, axis=1)
    for fn, family in ((pairwise, "fused"), (argmin_dist, "exact")):
        f = gpu(fn)
        (kernel,) = f.lower(p, q).executable.kernels
        assert kernel.strategy == "block_rows"
        assert_matches(f(p, q), fn(p, q), family)
    q[1234, 2] = np.nan
    assert np.isnan(gpu(pairwise)(p, q)).all()


def test_large_linalg_through_cusolver_on_the_gpu(monkeypatch, dev) -> None:
    """np.linalg past the block kernels' size through cuSOLVER (gpu/dense.py): cholesky,
    solve (several right-hand sides), inv, det, slogdet, eigh, svd (wide, tall, square),
    qr (every mode), eig and eigvals (real and complex results) match NumPy within the
    comparator's bounds (gpu-linalg-rounding, gpu-spectral-basis, gpu-eig) and the
    sign-free quantities here; each ran on the device; NumPy's errors for a matrix that is
    not positive definite, a singular one and one with NaN."""
    from library_forms import spy_on_device
    from tracearray.gpu import dense, solver as solver_mod
    from tracearray.testing import compare_with_numpy
    if solver_mod.solver_for(dev) is None:
        pytest.skip("cuSOLVER is not installed (nvidia-cusolver)")
    ran = spy_on_device(monkeypatch, dense.DENSE)
    r = np.random.default_rng(31)
    n = 96
    x = r.standard_normal((2, n, n))
    spd = x @ np.swapaxes(x, -1, -2) / n + np.eye(n)
    general = x / np.sqrt(n) + 2 * np.eye(n)
    rhs = r.standard_normal((2, n, 5))
    cases = [
        (lambda a: np.linalg.cholesky(a), (spd,)),
        (lambda a: np.linalg.cholesky(a.astype(np.float32), upper=True), (spd,)),
        (lambda a, b: np.linalg.solve(a, b), (general, rhs)),
        (lambda a: np.linalg.inv(a), (general,)),
        (lambda a: (np.linalg.det(a), np.linalg.slogdet(a)[1]), (general,)),
        (lambda a: np.linalg.eigvalsh(a), (spd,)),
        (lambda a: tuple(np.linalg.eigh(a, UPLO="U")), (spd,)),
        (lambda a: tuple(np.linalg.svd(a)), (r.standard_normal((3, 80, 120)),)),
        (lambda a: tuple(np.linalg.svd(a, full_matrices=False)),
         (r.standard_normal((2, 150, 70)).astype(np.float32),)),
        (lambda a: np.linalg.svd(a, compute_uv=False), (r.standard_normal((6000, 8)),)),
        (lambda a: tuple(np.linalg.qr(a)), (r.standard_normal((130, 90)),)),
        (lambda a: tuple(np.linalg.qr(a, mode="complete")), (r.standard_normal((90, 70)),)),
        (lambda a: np.linalg.qr(a, mode="r"), (r.standard_normal((70, 130)),)),
        (lambda a: tuple(np.linalg.eig(a)), (general,)),
        (lambda a: tuple(np.linalg.eig(a)), (spd,)),
        (lambda a: np.linalg.eigvals(a.astype(np.float32)), (general,)),
    ]
    failures = []
    for i, (fn, args) in enumerate(cases):
        ran.clear()
        cmp = compare_with_numpy(fn, *args, device="cuda")
        if not cmp.ok:
            failures.append((i, cmp.report()))
        if not any(v is not NotImplemented for v in ran):
            failures.append((i, f"cuSOLVER did not run: {ran}"))
    assert not failures, failures
    # sign-free checks of the factors themselves
    u, s, vh = (np.asarray(t) for t in gpu(lambda a: np.linalg.svd(a, full_matrices=False))(x))
    np.testing.assert_allclose(u * s[..., None, :] @ vh, x, atol=1e-9)
    w, v = (np.asarray(t) for t in gpu(np.linalg.eig)(general))
    np.testing.assert_allclose(general @ v, v * w[..., None, :], atol=1e-9)
    np.testing.assert_allclose(np.sort_complex(w.ravel()),
                               np.sort_complex(np.linalg.eigvals(general).ravel()), atol=1e-9)
    bad = spd.copy()
    bad[0, 50, 50] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.asarray(gpu(np.linalg.cholesky)(bad))
    singular = general.copy()
    singular[1, :, 3] = singular[1, :, 4]
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.asarray(gpu(np.linalg.inv)(singular))
    assert np.asarray(gpu(np.linalg.det)(singular))[1] == 0.0
    nan = general.copy()
    nan[0, 1, 2] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):
        np.asarray(gpu(np.linalg.eigvals)(nan))
    w, v = (np.asarray(t) for t in gpu(np.linalg.eigh)(np.where(np.isnan(nan), np.nan, spd)))
    assert np.isnan(w[0]).all() and np.isfinite(w[1]).all()
