"""The call path and the observable caches: ``cache_info()``, size-generic reuse, the warm
fast path's checks, and ``TRACEARRAY_EXPLAIN_CACHE_MISSES``.

No timed assertions here (``benchmarks/overhead.py`` measures the microseconds); what is
asserted is what the counters say happened: traces, kernels compiled, disk hits and misses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tracearray
from tracearray.api import CacheInfo
from tracearray.cpu import memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks import workloads  # noqa: E402


def ew_chain(a, b, c, d):
    return a * b + c * np.exp(-d)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- cache_info

def test_cache_info_is_a_named_tuple_of_the_four_counters() -> None:
    f = tracearray.compile(ew_chain, device="cpu")
    assert f.cache_info() == CacheInfo(0, 0, 0, 0)
    assert CacheInfo._fields == ("traces", "compiles", "disk_hits", "disk_misses")
    x = f32(64)
    f(x, x, x, x)
    info = f.cache_info()
    assert info.traces == 1
    # this process may hold the kernel already (another test compiled the same program):
    # then it came from memory and counts in none of the three
    assert info.compiles + info.disk_hits <= 1
    f(x, x, x, x)
    assert f.cache_info() == info          # a warm call neither traces nor builds


@pytest.mark.parametrize("name", ["ew_chain", "softmax", "layernorm", "logsumexp"])
def test_twenty_new_sizes_compile_nothing_new(name: str) -> None:
    fn = getattr(workloads, name)
    f = tracearray.compile(fn, device="cpu")

    def args(n: int) -> list[np.ndarray]:
        inputs = list(workloads.make_inputs(name, "check", seed=n).values())
        # n more rows of the matrices (their parameter vectors keep the row length), or n
        # more elements of vectors (no axis becomes or stops being of length 1)
        rank = max(a.ndim for a in inputs)
        return [np.concatenate([a] + [a[:1]] * n) if a.ndim == rank else a for a in inputs]

    f(*args(0))
    first = f.cache_info()
    for n in range(1, 21):
        got = f(*args(n))
        want = fn(*args(n))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    info = f.cache_info()
    # the second size is traced (it checks the size template of the first); the other 19
    # are re-derived from the template (templates.py) ...
    assert info.traces == first.traces + 1
    assert f.stats.resizes == 19
    assert (info.compiles, info.disk_hits, info.disk_misses) == \
        (first.compiles, first.disk_hits, first.disk_misses)   # ... and nothing compiles


def test_new_dtype_compiles_a_new_kernel() -> None:
    f = tracearray.compile(lambda x: x * 3.0 - 1.0, device="cpu")
    f(np.arange(10, dtype=np.float32))
    before = f.cache_info()
    f(np.arange(10, dtype=np.int16))           # a dtype never compiled in this process
    after = f.cache_info()
    assert after.traces == before.traces + 1
    assert after.compiles + after.disk_hits == before.compiles + before.disk_hits + 1


_CHILD = """
import json, sys, numpy as np, tracearray
def f(x, y):
    return np.sqrt(np.abs(x)) * y - 0.25 * x
def g(x):
    return (x * x).sum(axis=-1)
x = np.linspace(-2, 2, 96, dtype=np.float32).reshape(8, 12)
cf, cg = tracearray.compile(f, device="cpu"), tracearray.compile(g, device="cpu")
cf(x, x); cg(x)
print(json.dumps([list(cf.cache_info()), list(cg.cache_info())]))
"""


def test_disk_hits_and_misses_across_processes(tmp_path) -> None:
    env = {**os.environ, "TRACEARRAY_CACHE_DIR": str(tmp_path), "PYTHONPATH": ROOT}

    def child() -> list[list[int]]:
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, check=True, timeout=300).stdout
        return json.loads(out.strip().splitlines()[-1])

    cold = child()
    for traces, compiles, hits, misses in cold:
        assert traces == 1 and compiles >= 1 and hits == 0 and misses == compiles
    warm = child()
    for (traces, compiles, hits, misses), before in zip(warm, cold):
        assert traces == 1 and compiles == 0 and misses == 0 and hits == before[1]


# ------------------------------------------------------------------------ the fast path

def test_data_address_is_numpys_for_every_kind_of_array(tmp_path) -> None:
    base = np.arange(120, dtype=np.float64).reshape(10, 12)
    mm = np.memmap(tmp_path / "m.bin", dtype=np.int32, mode="w+", shape=(7,))
    arrays = [base, base[3:], base[:, 5:], base[::-3, ::-2], base.T, base[0, 0:0],
              np.empty(0, np.float32), mm, mm[2:], np.array(3.0, np.float32),
              np.frombuffer(bytes(16), dtype=np.uint8)[4:], base.view(np.recarray)]
    for a in arrays:
        assert memory.data_address(a) == a.ctypes.data


def test_warm_calls_reuse_nothing_they_must_not() -> None:
    """Repeated calls of the same signature hit the fast path (no trace, no build), and each
    returns a fresh array that a later call does not overwrite."""
    f = tracearray.compile(ew_chain, device="cpu")
    x, y = f32(1000, seed=1), f32(1000, seed=2)
    first = f(x, y, x, y)
    info = f.cache_info()
    kept = first.copy()
    for k in range(5):
        out = f(y, x, y, x)
        assert out is not first and not np.shares_memory(out, first)
        np.testing.assert_allclose(out, ew_chain(y, x, y, x), rtol=1e-6)
    np.testing.assert_array_equal(first, kept)
    assert f.cache_info() == info


def test_fast_path_keeps_the_layout_and_alignment_checks() -> None:
    f = tracearray.compile(lambda x, y: x - 2.0 * y, device="cpu")
    x, y = f32(16, 16, seed=3), f32(16, 16, seed=4)
    for _ in range(2):
        np.testing.assert_allclose(f(x, y), x - 2.0 * y, rtol=1e-6)
    # the same shape and dtype, other strides: another executable, right values
    np.testing.assert_allclose(f(x.T, y), x.T - 2.0 * y, rtol=1e-6)
    np.testing.assert_allclose(f(x, y.T), x - 2.0 * y.T, rtol=1e-6)
    # misaligned data (and a byte-swapped array) is copied by the general path
    raw = np.zeros(16 * 16 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(16, 16)
    raw[...] = x
    assert not raw.flags.aligned
    swapped = y.astype(">f4")
    for _ in range(2):
        np.testing.assert_allclose(f(raw, swapped), x - 2.0 * y, rtol=1e-6)
    assert f.cache_info().traces == 1   # converted to aligned, native arrays: the same trace


def test_one_kernel_executables_run_a_specialised_call(caplog) -> None:
    """An executable of one single-chunk map kernel whose one output is its only buffer runs
    ``Executable._one_kernel_run``: the same results, on the warm path and from threads that
    contend for its pointer array, and per-kernel times (DEBUG step 2) still reported."""
    import logging
    import threading
    from tracearray import config
    f = tracearray.compile(ew_chain, device="cpu")
    args = [f32(1000, seed=i) for i in range(4)]
    want = f(*args)   # (the general path's result; the specialised one must be the same)
    np.testing.assert_allclose(want, ew_chain(*args), rtol=1e-5, atol=1e-6)
    exe = f.lower(*args).executable
    assert exe.fast_run != exe.run   # the specialised call
    for _ in range(3):
        np.testing.assert_array_equal(f(*args), want)
    got, errors = [], []

    def worker(seed: int) -> None:
        try:
            mine = [f32(1000, seed=seed + i) for i in range(4)]
            first = f(*mine)
            for _ in range(200):
                out = f(*mine)
            got.append(np.array_equal(out, first) and np.allclose(out, ew_chain(*mine), atol=1e-6))
        except Exception as e:   # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(10 * k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == [True] * 4
    caplog.set_level(config.logging_level(config.TIMES), logger="tracearray")
    try:
        np.testing.assert_array_equal(f(*args), want)
        assert any(r.levelno == config.logging_level(config.TIMES) and " ms" in r.getMessage()
                   for r in caplog.records if r.name == "tracearray")
    finally:
        config.logger.setLevel(logging.NOTSET)
    # a row kernel qualifies too; two outputs, or a full reduction, take the general run
    exe = tracearray.compile(softmax, device="cpu").lower(f32(4, 8)).executable
    assert exe.fast_run != exe.run
    for other in (lambda x: (x + 1, x * 2), lambda x: x.sum()):
        exe = tracearray.compile(other, device="cpu").lower(f32(4, 8)).executable
        assert exe.fast_run == exe.run


def test_fast_path_keeps_the_in_place_checks() -> None:
    @tracearray.compile(device="cpu")
    def axpy(y, a, x):
        y += a * x

    y, x = np.ones(8), np.arange(8.0)
    for k in range(1, 4):
        axpy(y, np.float64(2.0), x)
        np.testing.assert_array_equal(y, 1 + 2 * k * x)
    info = axpy.cache_info()
    with pytest.raises(tracearray.InputError, match="share memory"):
        axpy(y, np.float64(2.0), y)            # aliasing: refused on the warm path too
    ro = np.ones(8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        axpy(ro, np.float64(2.0), x)
    assert axpy.cache_info() == info


def test_fast_path_sees_a_rebound_global() -> None:
    global SCALE
    SCALE = 2.0
    f = tracearray.compile(lambda x: x * SCALE, device="cpu")
    x = np.arange(4.0)
    np.testing.assert_array_equal(f(x), 2 * x)
    np.testing.assert_array_equal(f(x), 2 * x)
    SCALE = 5.0
    np.testing.assert_array_equal(f(x), 5 * x)
    assert f.cache_info().traces == 2


SCALE = 2.0


def test_zero_dimensional_results_are_numpy_scalars_on_the_fast_path() -> None:
    f = tracearray.compile(lambda x: (x * x).sum(), device="cpu")
    x = np.arange(5.0)
    results = [f(x) for _ in range(3)]
    assert all(type(r) is np.float64 and r == 30.0 for r in results)
    assert f.cache_info().traces == 1


# ---------------------------------------------------------------- explaining cache misses

def test_cache_misses_are_explained(monkeypatch, capsys) -> None:
    monkeypatch.setenv("TRACEARRAY_EXPLAIN_CACHE_MISSES", "1")
    f = tracearray.compile(lambda x, s: x * s, device="cpu")
    x = f32(4, 8)
    f(x, 2.0)
    f(x, 2.0)                                   # a hit: nothing printed for it
    f(f32(5, 8), 2.0)
    f(f32(5, 1), 2.0)
    f(f32(5, 1).astype(np.float64), 2.0)
    f(x, 2.0)                                   # hits again
    f(f32(8, 4).T, 2.0)                         # the cached trace, other strides
    f(x, 3.0)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "cache miss" in ln or "first call" in ln]
    assert "first call" in lines[0]
    assert "a new size, shape (4, 8) -> (5, 8)" in err and "nothing new should compile" in err
    assert "which axes have length 1 (broadcast) changed: shape (5, 8) -> (5, 1)" in err
    assert "dtype float32 -> float64" in err
    assert "layout (strides in bytes)" in err
    assert "argument 's'" in err
    assert len(lines) == 6


def test_cache_misses_are_silent_by_default(monkeypatch, capsys) -> None:
    monkeypatch.delenv("TRACEARRAY_EXPLAIN_CACHE_MISSES", raising=False)
    monkeypatch.delenv("TRACEARRAY_DEBUG", raising=False)
    f = tracearray.compile(lambda x: x + 1, device="cpu")
    f(np.ones(3))
    f(np.ones(4))
    assert "cache miss" not in capsys.readouterr().err
    assert f.cache_info().traces == 2


def test_threads_calling_one_executable_at_once() -> None:
    """A warm call fills its kernels' pointer array in place while no other thread uses it
    (and makes a fresh one when another does): threads calling the same executable at once,
    small (one chunk) and large (the pool's chunks), all get their own right results."""
    import threading
    f = tracearray.compile(ew_chain, device="cpu")
    sizes = (37, 300_001)
    data = {n: [f32(n, seed=s) for s in range(4)] for n in sizes}
    # each thread's arguments, and the result one thread alone gets (bit for bit)
    calls = {(n, k): data[n][k:] + data[n][:k] for n in sizes for k in range(4)}
    want = {key: f(*args) for key, args in calls.items()}
    info = f.cache_info()
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(30):
                key = (sizes[(i + k) % 2], k)
                np.testing.assert_array_equal(f(*calls[key]), want[key])
        except BaseException as e:   # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert f.cache_info() == info


@pytest.mark.parametrize("name", ["pairwise_min", "l2_normalize"])
def test_overhead_benchmark_counts_no_recompiles_over_twenty_sizes(name: str) -> None:
    """``benchmarks/overhead.py``'s recompile count (target 0) on two more workloads: a
    nested reduction with a built-in extent, and a normalisation over rows."""
    from benchmarks import overhead
    got = overhead.new_sizes(name, "cpu")
    assert (got["sizes"], got["traces"], got["resizes"], got["recompiles"]) == (20, 1, 19, 0)
