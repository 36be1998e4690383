"""Which kernels run on the pool (``cpu/pool.ThreadChoice``): the first calls of a kernel of
several chunks time it on one thread and on the pool and keep the faster; every call gives
NumPy's values whichever runs it, full reductions (whose chunks are partial-sum slots)
included."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tracearray
from tracearray.cpu import pool
from tracearray.cpu.pool import ThreadChoice


def _calls(choice: ThreadChoice, fn, chunks) -> None:
    for _ in range(2 * ThreadChoice.TRIALS + 1):
        choice.run(fn, chunks)


def test_slow_hand_offs_keep_one_thread():
    """A pool whose helpers are slow (each chunk a helper runs sleeps 20 ms) loses to one
    thread, which runs the whole range in one call."""
    seen = []

    def fn(begin, end):
        seen.append((begin, end))
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.02)
    chunks = [(0, 10), (10, 20), (20, 30), (30, 40)]
    choice = ThreadChoice(2, "k", whole=(0, 40))
    _calls(choice, fn, chunks)
    assert choice.threads == 1
    seen.clear()
    choice.run(fn, chunks)
    assert seen == [(0, 40)]


def test_work_that_shares_well_takes_the_pool():
    """Chunks that each take 5 ms (sleeping releases the GIL, as a kernel does) run faster on
    two threads: the pool is kept, and runs every chunk."""
    ran = []

    def fn(begin, end):
        time.sleep(0.005)
        ran.append(begin)
    chunks = [(0, 1), (1, 2), (2, 3), (3, 4)]
    choice = ThreadChoice(2, "k")   # (no whole range: one thread runs chunk by chunk)
    _calls(choice, fn, chunks)
    assert choice.threads == 2
    ran.clear()
    choice.run(fn, chunks)
    assert sorted(ran) == [0, 1, 2, 3]


def test_long_kernels_keep_the_pool_whatever_the_trials_say():
    """One thread takes 4 x 0.2 ms, past ThreadChoice.LONG_S, and the pool is slower still (its
    helper sleeps 20 ms): the pool is kept (two wake-ups are a small part of such a kernel)."""
    def fn(begin, end):
        time.sleep(0.0002 if threading.current_thread() is threading.main_thread() else 0.02)
    choice = ThreadChoice(2, "k")
    _calls(choice, fn, [(0, 1), (1, 2), (2, 3), (3, 4)])
    assert choice.best[0] >= ThreadChoice.LONG_S and choice.best[1] > choice.best[0]
    assert choice.threads == 2


def test_one_thread_builds_choose_nothing():
    choice = ThreadChoice(1, "k", whole=(0, 4))
    assert choice.threads == 1
    got = []
    choice.run(lambda b, e: got.append((b, e)), [(0, 2), (2, 4)])
    assert got == [(0, 4)]


@pytest.mark.parametrize("fn", [
    lambda x: np.exp(x) * 2.0 + x,                   # a map of several chunks
    lambda x: np.sum(x * x),                        # a full reduction: partial-sum slots
    lambda x: x.reshape(64, -1) - np.max(x.reshape(64, -1), axis=1, keepdims=True),  # rows
    lambda x: np.cumsum(x.reshape(-1, 64), axis=1),                                   # scan
    lambda x: np.argmax(x.reshape(-1, 256)[:, ::8], axis=1),                            # strided rows
], ids=["map", "full-reduction", "rows", "scan", "arg-rows"])
def test_every_call_is_numpys_whichever_runs_it(fn):
    """The trial calls alternate between one thread and the pool, and the chosen one runs
    after them: each of these calls gives the same values (bit for bit) as NumPy's, on a
    size that is cut into several chunks."""
    x = np.random.default_rng(0).standard_normal(1 << 18).astype(np.float32)
    compiled = tracearray.compile(fn, device="cpu")
    expected = compiled(x)
    for _ in range(2 * ThreadChoice.TRIALS + 3):
        np.testing.assert_array_equal(compiled(x), expected)
    lowered = compiled.lower(x)
    chunked = [k for k in lowered.executable.kernels if k is not None and len(k.chunks) > 1]
    if pool.num_threads() > 1:
        assert chunked and all(k.choice.threads is not None for k in chunked)
    np.testing.assert_allclose(expected, fn(x), rtol=1e-4, atol=1e-6)


def test_native_helpers_run_every_chunk_once_on_any_thread_count(monkeypatch):
    """cpu/team.py: a kernel's chunks claimed by the calling thread and native helpers, for
    thread counts above, at and below the helpers already started, and many jobs in a row
    (slots reused): every element written exactly once."""
    from tracearray.cpu import team
    if team.get() is None:
        pytest.skip("no native helpers on this platform")
    f = tracearray.compile(lambda x: x * 3 + 1, device="cpu")
    for threads in (2, 4, 3, 1, 2):
        tracearray.set_num_threads(threads)
        try:
            for size in (1 << 18, (1 << 20) + 77):
                x = np.arange(size, dtype=np.int64)
                for _ in range(team.SLOTS + 3):
                    np.testing.assert_array_equal(f(x), x * 3 + 1)
        finally:
            tracearray.set_num_threads(None)


def test_spin_setting_is_checked(monkeypatch):
    from tracearray import config
    monkeypatch.setenv("TRACEARRAY_SPIN_US", "-3")
    with pytest.raises(ValueError, match="TRACEARRAY_SPIN_US"):
        config.spin_microseconds()
    for bad in ("abc", "-1", "inf", "nan"):
        monkeypatch.setenv("TRACEARRAY_SPIN_US", bad)
        with pytest.raises(ValueError, match="TRACEARRAY_SPIN_US"):
            config.spin_microseconds()
    monkeypatch.setenv("TRACEARRAY_SPIN_US", "")
    assert config.spin_microseconds() == 300
    monkeypatch.setenv("TRACEARRAY_SPIN_US", "0")
    assert config.spin_microseconds() == 0


def test_set_num_threads_applies_to_functions_built_before():
    """An executable built for 2 threads runs its chunks on the calling thread alone after
    set_num_threads(1) (no job reaches the native helpers), and on the pool again after."""
    from tracearray.cpu import team
    native = team.get()
    if native is None:
        pytest.skip("no native helpers on this platform")
    tracearray.set_num_threads(2)
    try:
        f = tracearray.compile(lambda x: x * 3 + 1, device="cpu")
        x = np.arange(1 << 20, dtype=np.float64)
        for _ in range(2 * ThreadChoice.TRIALS + 2):   # past the thread choice's trials
            f(x)
        tracearray.set_num_threads(1)
        issued = native.control[3]
        for _ in range(3):
            np.testing.assert_array_equal(f(x), x * 3 + 1)
        assert native.control[3] == issued
    finally:
        tracearray.set_num_threads(None)
