"""Reliability of the runtime (issue 11): fork, interrupts, and memory that is returned.

- fork: a child forked while another thread compiles (holding the JIT's lock) or traces
  (holding a function's build lock, with NumPy's conversions patched) compiles and runs, and
  a child of a process that used the GPU gets a clear error instead of a hang;
- interrupts: a KeyboardInterrupt raised in the calling thread while the CPU pool works
  propagates only after every running chunk has ended (``pool._on_wait`` is where the test
  raises it, deterministically, as a Ctrl-C would arrive there);
- memory: the machine code of deleted functions is freed, per-function caches are bounded,
  and a Python float that changes on every call is warned about once.
"""
from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import _thread
import threading
import time
import warnings

import numpy as np
import pytest

import tracearray
from tracearray.cpu import jit as jit_module
from tracearray.cpu import pool
from tracearray.cpu.jit import get_jit

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
CHILD_TIMEOUT_S = 60.0


def _wait_child(pid: int, timeout: float = CHILD_TIMEOUT_S) -> int:
    """The child's exit code; a child still running after ``timeout`` is killed (a hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child hung (killed after {timeout:.0f} s)")


def _fork(child: "callable") -> int:
    """Run ``child()`` in a forked child; its exit code (0: it returned, 1: it raised)."""
    pid = os.fork()
    if pid == 0:   # the child: never return into pytest
        code = 1
        try:
            child()
            code = 0
        except BaseException as e:   # noqa: BLE001 - reported through the exit code
            print(f"child failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    return _wait_child(pid)


# ============================================================================================
# Fork
# ============================================================================================

@fork_only
def test_child_forked_while_another_thread_compiles_can_compile(monkeypatch):
    """The JIT's lock is held by another thread in the middle of a compile when the process
    forks: the fork waits for that compile, and the child compiles (it hung forever)."""
    inside = threading.Event()
    blocker: list[int] = []
    # (the optimiser runs with the JIT's lock held, whichever way the code is then emitted:
    # a position-independent object to link, or MCJIT)
    original = jit_module.CpuJit._parse_and_optimize

    def slow_compile(self, *args, **kwargs):   # runs with the JIT's lock held
        if threading.get_ident() in blocker:
            inside.set()
            time.sleep(0.5)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(jit_module.CpuJit, "_parse_and_optimize", slow_compile)

    def compiling_thread():
        blocker.append(threading.get_ident())
        f = tracearray.compile(lambda x: np.tanh(x) * 3.25 - np.cos(x), device="cpu")
        f(np.ones(7))

    t = threading.Thread(target=compiling_thread)
    t.start()
    assert inside.wait(30), "the compiling thread never reached the JIT"

    def child():
        g = tracearray.compile(lambda x: np.arctan(x) * np.sinh(x) + 0.5, device="cpu")
        x = np.linspace(-1, 1, 1 << 20)   # large: the child's thread pool runs it
        np.testing.assert_allclose(g(x), np.arctan(x) * np.sinh(x) + 0.5, rtol=1e-12)

    code = _fork(child)
    t.join(30)
    assert code == 0


@fork_only
def test_child_forked_while_another_thread_traces_can_call_the_same_function():
    """Another thread is tracing the function (its build lock held, NumPy's conversion
    functions replaced for the trace) at the fork: in the child the function can be traced
    and called, and ``np.asarray`` is NumPy's own again."""
    started, release = threading.Event(), threading.Event()
    asarray = np.asarray

    @tracearray.compile(device="cpu")
    def f(x):
        started.set()
        release.wait(30)   # trace-time Python: blocks the tracing thread
        return np.asarray(x) * 2 + 1

    x = np.arange(5.0)
    t = threading.Thread(target=f, args=(x,))
    t.start()
    assert started.wait(30)
    assert np.asarray is not asarray   # the trace's replacement is installed

    def child():
        release.set()   # the child's copy: its own trace must not block
        assert np.asarray is asarray, "a vanished thread's trace left np.asarray replaced"
        np.testing.assert_array_equal(f(x), x * 2 + 1)

    try:
        code = _fork(child)
    finally:
        release.set()
        t.join(30)
    assert code == 0
    np.testing.assert_array_equal(f(x), x * 2 + 1)


@fork_only
def test_forked_child_of_a_gpu_process_gets_a_clear_error(emulated_gpu):
    """A CUDA context does not survive fork: in the child, the device is unavailable (auto
    functions run on the CPU) and using it raises GpuUnavailableError naming fork."""
    from tracearray.gpu import driver, to_device
    assert driver.is_available()
    driver.get_device()
    warm = tracearray.compile(lambda v: v * 3, device="cuda")
    on_device = to_device(np.arange(4.0))
    warm(on_device)
    warm(on_device)   # the call fast path, which skips tracing and keying

    def child():
        assert not driver.is_available()
        with pytest.raises(driver.GpuUnavailableError, match="fork"):
            driver.get_device()
        with pytest.raises(driver.GpuUnavailableError, match="fork"):
            warm(on_device)   # the fast path checks too
        x = np.arange(4.0)
        with pytest.raises(driver.GpuUnavailableError, match="spawn"):
            tracearray.compile(lambda v: v + 1, device="cuda")(x)
        np.testing.assert_array_equal(tracearray.compile(lambda v: v + 1)(x), x + 1)

    assert _fork(child) == 0
    assert driver.get_device() is not None   # the parent keeps its device


def test_driver_calls_refused_in_another_process():
    """The check behind the previous test, on a real ``Device`` (made without a GPU): a
    driver call from a process other than the one that created the context raises."""
    from tracearray.gpu import driver
    dev = object.__new__(driver.Device)
    dev.pid = os.getpid() + 1   # as if created by the parent
    with pytest.raises(driver.GpuUnavailableError, match="does not survive fork"):
        dev.call("cuInit", 0)


# ============================================================================================
# Interrupts
# ============================================================================================

def _slow_helpers(log: list, helper_started: threading.Event):
    """A chunk function: instant in the calling thread (after a helper has started, so the
    helpers surely hold chunks), slow (0.3 s) in helpers, logging the ends of the latter."""
    caller = threading.get_ident()

    def chunk(begin: int, end: int) -> None:
        if threading.get_ident() == caller:
            helper_started.wait(10)
            return
        helper_started.set()
        log.append(("start", begin))
        time.sleep(0.3)
        log.append(("end", begin))
    return chunk


def test_interrupt_waits_for_running_chunks(monkeypatch):
    monkeypatch.setenv(pool.ENV_THREADS, "2")
    log: list = []
    helper_started = threading.Event()
    seen = []

    def interrupt(job):
        seen.append(job)
        raise KeyboardInterrupt

    monkeypatch.setattr(pool, "_on_wait", interrupt, raising=False)
    with pytest.raises(KeyboardInterrupt):
        pool.parallel_for(_slow_helpers(log, helper_started), [(i, i + 1) for i in range(8)])
    at_raise = list(log)
    assert seen, "the interrupt hook was not reached"
    assert any(kind == "start" for kind, _b in at_raise), "no helper ran a chunk"
    starts = [b for kind, b in at_raise if kind == "start"]
    ends = [b for kind, b in at_raise if kind == "end"]
    assert sorted(starts) == sorted(ends), f"returned while helpers ran: {at_raise}"
    time.sleep(0.4)
    assert log == at_raise, "a chunk started after the interrupt"


def test_real_ctrl_c_while_waiting_waits_for_running_chunks(monkeypatch):
    """The same with a real SIGINT, sent by a helper in the middle of its chunk while the
    calling thread waits (Python raises KeyboardInterrupt in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread")
    monkeypatch.setenv(pool.ENV_THREADS, "2")
    caller, log, started = threading.get_ident(), [], threading.Event()

    def chunk(begin: int, end: int) -> None:
        if threading.get_ident() == caller:
            started.wait(10)
            return
        started.set()
        log.append("start")
        time.sleep(0.2)   # the caller has run its chunks and waits
        signal.pthread_kill(caller, signal.SIGINT)
        time.sleep(0.3)
        log.append("end")

    with pytest.raises(KeyboardInterrupt):
        pool.parallel_for(chunk, [(i, i + 1) for i in range(4)])
    assert log == ["start", "end"]


def test_second_interrupt_while_waiting_still_waits(monkeypatch):
    """Ctrl-C pressed again while the interrupted call waits for its helpers."""
    monkeypatch.setenv(pool.ENV_THREADS, "2")
    log: list = []
    helper_started = threading.Event()

    def interrupt(job):
        real_wait = job.wait
        calls = []

        def wait_interrupted_once():
            calls.append(1)
            if len(calls) == 1:
                raise KeyboardInterrupt("second")
            real_wait()
        job.wait = wait_interrupted_once
        raise KeyboardInterrupt("first")

    monkeypatch.setattr(pool, "_on_wait", interrupt, raising=False)
    with pytest.raises(KeyboardInterrupt, match="first"):
        pool.parallel_for(_slow_helpers(log, helper_started), [(i, i + 1) for i in range(4)])
    starts = [b for kind, b in log if kind == "start"]
    assert starts and sorted(starts) == sorted(b for kind, b in log if kind == "end")


def test_interrupted_compiled_call_leaves_no_running_chunk(monkeypatch):
    """A KeyboardInterrupt in a compiled call's parallel kernel run by Python threads (where
    there are no native helpers): it propagates as itself, after the helpers ended (none
    still writes into the call's buffers, which go back to the output arena), and the next
    call is correct."""
    monkeypatch.setenv(pool.ENV_THREADS, "2")
    monkeypatch.setattr(pool.team, "get", lambda: None)
    f = tracearray.compile(lambda x: np.sqrt(x) * 2 + 1, device="cpu")
    x = np.arange(1 << 21, dtype=np.float64)
    expected = np.sqrt(x) * 2 + 1
    np.testing.assert_array_equal(f(x), expected)
    jobs = []

    def interrupt(job):
        jobs.append(job)
        raise KeyboardInterrupt

    monkeypatch.setattr(pool, "_on_wait", interrupt, raising=False)
    with pytest.raises(KeyboardInterrupt):
        f(x)
    assert jobs and jobs[0].helpers_running == 0 and jobs[0].stopped
    monkeypatch.setattr(pool, "_on_wait", None)
    np.testing.assert_array_equal(f(x), expected)


def test_interrupted_call_on_native_helpers_leaves_no_running_chunk(monkeypatch):
    """Ctrl-C (``interrupt_main``) while native helpers (cpu/team.py) run a compiled call's
    chunks: the KeyboardInterrupt is raised once the call's chunks have all run, no helper
    is still inside a job, and the next call is correct."""
    team = pool.team.get()
    if team is None:
        pytest.skip("no native helpers on this platform")
    monkeypatch.setenv(pool.ENV_THREADS, "2")
    f = tracearray.compile(lambda x: np.sqrt(x) * 2 + 1, device="cpu")
    x = np.arange(1 << 22, dtype=np.float64)
    expected = np.sqrt(x) * 2 + 1
    np.testing.assert_array_equal(f(x), expected)
    interrupted = 0
    for delay in (0.0005, 0.001, 0.002, 0.004):
        timer = threading.Timer(delay, _thread.interrupt_main)
        try:
            timer.start()
            for _ in range(50):
                f(x)
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            timer.join()
        words = team.slots
        for k in range(pool.team.SLOTS):
            slot = k * pool.team.SLOT_WORDS
            # (a helper may still be leaving the job: ACTIVE, but it has no chunk to run)
            assert words[slot + pool.team.BUSY] == 0
            assert words[slot + pool.team.DONE] == words[slot + pool.team.N]
        np.testing.assert_array_equal(f(x), expected)
    assert interrupted == 4


# ============================================================================================
# Memory that is returned
# ============================================================================================

def test_machine_code_is_freed_with_the_functions_that_use_it():
    jit = get_jit()
    gc.collect()
    before = jit.live_engines
    fs = [tracearray.compile(lambda x, k=k: np.exp(x) * np.float64(k) + np.sin(x) ** (k % 3 + 2),
                             device="cpu") for k in range(3)]
    x = np.arange(6.0)
    for f in fs:
        f(x)
    assert jit.live_engines > before
    del fs, f
    gc.collect()
    assert jit.live_engines == before


def test_code_shared_by_a_live_function_is_kept():
    """Deleting one of two functions with the same program frees nothing the other uses,
    and a third one built later reuses the disk cache's object, not a new compile."""
    def body(x):
        return np.log1p(np.abs(x)) * 1.5 - x.max()
    jit = get_jit()
    a, b = tracearray.compile(body, device="cpu"), tracearray.compile(body, device="cpu")
    x = np.linspace(-3, 3, 11)
    a(x)
    b(x)
    gc.collect()   # (other tests' garbage first: its engines are not this test's)
    live = jit.live_engines
    del a
    gc.collect()
    assert jit.live_engines == live
    np.testing.assert_allclose(b(x), body(x))
    del b
    gc.collect()
    compiles = jit.stats.compiles
    c = tracearray.compile(body, device="cpu")
    np.testing.assert_allclose(c(x), body(x))
    if tracearray.config.cache_dir():   # the tests' session cache (conftest.py)
        assert jit.stats.compiles == compiles


def test_modules_llvm_rejects_are_freed_before_their_contexts():
    """Each module has an LLVM context of its own, closed after it: a module that fails
    verification (it parses) is closed first, in compile, asm and optimized_ir alike (a
    context disposed first freed the module under its Python object: a crash at the next
    garbage collection)."""
    jit = get_jit()
    bad = ("define i32 @v(i1 %c) {\nentry:\n  br i1 %c, label %a, label %b\na:\n"
           "  %x = add i32 1, 2\n  br label %b\nb:\n  ret i32 %x\n}\n")
    for _ in range(10):
        for call in (lambda: jit.compile(bad, ["v"]), lambda: jit.asm(bad),
                     lambda: jit.optimized_ir(bad)):
            with pytest.raises(jit_module.JitError, match="rejected"):
                call()
        gc.collect()
    assert "ret i32" in jit.optimized_ir("define i32 @w(i32 %x) {\n  ret i32 %x\n}\n")


RSS_SCRIPT = """
import ctypes, gc, json, numpy as np, tracearray
libc = ctypes.CDLL("libc.so.6")

def kernel_mappings():   # kernels loaded by cpu/loader.py, alive now
    from tracearray.cpu import loader
    return loader.live_objects()

def rss_mb():
    gc.collect()
    libc.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

def make(k):
    def f(x):
        y = x
        for i in range(k):
            y = np.sin(y) * (i + 2)
        return y
    return tracearray.compile(f, device="cpu")

x = np.ones(100)
make(1)(x)
r0, m0 = rss_mb(), kernel_mappings()
fs = [make(k) for k in range(2, 42)]
for f in fs:
    f(x)
r1, m1 = rss_mb(), kernel_mappings()
del fs, f
r2, m2 = rss_mb(), kernel_mappings()
print(json.dumps({"built": r1 - r0, "kept": r2 - r0, "mapped": [m0, m1, m2]}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and glibc")
def test_memory_of_deleted_functions_is_returned(tmp_path):
    """40 kernels compiled (no disk cache: each is optimised and compiled), then deleted:
    their machine code goes back (before: all of it stayed, about 1 MB each). An MCJIT
    engine took about 1 MB per kernel; a kernel loaded by ``cpu/loader.py`` takes a few pages,
    unmapped with the last function that uses it, so what stays is LLVM's heap of the
    compiles (about 8 MB here), not code."""
    import json
    env = {**os.environ, "TRACEARRAY_CACHE_DIR": "", "TRACEARRAY_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", RSS_SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    m0, m1, m2 = got["mapped"]
    assert m1 >= m0 + 40 and m2 == m0, got       # every kernel's code unmapped
    assert got["built"] < 20, got                # (MCJIT: about 38 MB)
    assert got["kept"] <= got["built"], got


def test_per_function_caches_are_bounded():
    f = tracearray.compile(lambda x: x * 2 - 1, device="cpu")
    assert tracearray.CompiledFunction.max_traces == 64
    f.max_traces, f.max_executables = 4, 3
    for n in range(2, 12):
        x = np.arange(float(n * n)).reshape(n, n)
        np.testing.assert_array_equal(f(x), x * 2 - 1)
        np.testing.assert_array_equal(f(x.T), x.T * 2 - 1)   # same trace, other strides
    assert len(f._traces) <= 4 and len(f._executables) <= 3
    assert f.stats.traces == 10
    # The fast path keeps nothing evicted alive.
    live = {id(e) for e in f._executables.values()}
    assert all(id(call.executable) in live for call in f._fast.values())
    x = np.arange(4.0).reshape(2, 2)   # evicted long ago: traced again, right
    np.testing.assert_array_equal(f(x), x * 2 - 1)
    assert f.stats.traces == 11


def test_changing_python_float_warns_once_with_the_fix():
    @tracearray.compile(device="cpu")
    def scale(x, s):
        return x * s + 1

    x = np.ones(4, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(3 * tracearray.api.RETRACE_WARN_AFTER):
            np.testing.assert_array_equal(scale(x, 0.5 + i), x * np.float32(0.5 + i) + 1)
    retrace = [w for w in caught if issubclass(w.category, tracearray.RetraceWarning)]
    assert len(retrace) == 1, [str(w.message) for w in caught]
    message = str(retrace[0].message)
    assert "'s'" in message and "NumPy scalar" in message and "static_argnums" in message
    assert retrace[0].filename == __file__   # points at the user's call
    assert len(scale._traces) <= scale.max_traces


def test_retrace_warning_names_a_keyword_argument_in_a_pytree():
    @tracearray.compile(device="cpu")
    def affine(x, *, params):
        return x * params["w"] + params["b"]

    x = np.ones(3)
    with pytest.warns(tracearray.RetraceWarning, match="'params'"):
        for i in range(tracearray.api.RETRACE_WARN_AFTER):
            affine(x, params={"w": x, "b": float(i)})


def test_no_retrace_warning_for_numpy_scalars_static_arguments_or_repeated_values():
    def body(x, s):
        return x * s

    x = np.ones(3)
    n = 2 * tracearray.api.RETRACE_WARN_AFTER
    with warnings.catch_warnings():
        warnings.simplefilter("error", tracearray.RetraceWarning)
        as_array = tracearray.compile(body, device="cpu")
        for i in range(n):
            as_array(x, np.float64(i))
        assert as_array.stats.traces == 1
        static = tracearray.compile(body, device="cpu", static_argnums=1)
        for i in range(n):
            static(x, float(i))
        assert static.stats.traces == n
        repeated = tracearray.compile(body, device="cpu")
        for i in range(n):
            repeated(x, float(i % 2))
        assert repeated.stats.traces == 2
