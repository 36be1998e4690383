"""Recycled memory for large CPU results (tracearray/cpu/memory.py).

A block is reused only when no array viewing it is alive: results the caller keeps, and views
of them, never change under a later call."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tracearray
from tracearray.cpu import memory
from tracearray.testing import compare_with_numpy

N = (1 << 20) // 4 + 17          # just over MIN_BYTES of float32: recycled


@pytest.fixture(autouse=True)
def _fresh_arena():
    memory.release()
    yield
    memory.release()


def _double():
    return tracearray.compile(lambda x: x * 2, device="cpu")


def test_dropped_result_memory_is_reused():
    f = _double()
    x = np.arange(N, dtype=np.float32)
    a = f(x)
    addr = a.ctypes.data
    assert a.ctypes.data % 64 == 0
    del a
    b = f(x)
    assert b.ctypes.data == addr
    np.testing.assert_array_equal(b, x * 2)


def test_live_results_and_views_are_never_overwritten():
    f = _double()
    x = np.arange(N, dtype=np.float32)
    a = f(x)
    view = f(x + 1)[::-3]          # only a view of the second result survives
    expected_view = ((x + 1) * 2)[::-3]
    results = [f(x + k) for k in range(2, 6)]
    np.testing.assert_array_equal(a, x * 2)
    np.testing.assert_array_equal(view, expected_view)
    for k, r in zip(range(2, 6), results):
        np.testing.assert_array_equal(r, (x + k) * 2)
    blocks = {id(a.base), id(view.base)} | {id(r.base) for r in results}
    assert len(blocks) == 6, "a live result shares its block with another"


def test_small_results_are_plain_arrays():
    r = _double()(np.arange(100, dtype=np.float32))
    assert r.base is None and r.flags.owndata


def test_arena_bound_and_off_switch(monkeypatch):
    f = _double()
    x = np.arange(N, dtype=np.float32)
    monkeypatch.setenv("TRACEARRAY_OUTPUT_ARENA_MB", "0")
    r = f(x)
    assert r.base is None and memory.bytes_held() == 0
    monkeypatch.setenv("TRACEARRAY_OUTPUT_ARENA_MB", "3")    # room for two blocks
    kept = [f(x + k) for k in range(4)]
    assert memory.bytes_held() <= 3 * 1024 * 1024
    assert sum(k.base is not None for k in kept) == 2
    for k, r in enumerate(kept):
        np.testing.assert_array_equal(r, (x + k) * 2)
    del kept, r
    assert memory.release() > 0 and memory.bytes_held() == 0
    monkeypatch.setenv("TRACEARRAY_OUTPUT_ARENA_MB", "-1")
    with pytest.raises(ValueError, match="TRACEARRAY_OUTPUT_ARENA_MB"):
        f(x)


def test_idle_blocks_of_other_sizes_make_room(monkeypatch):
    monkeypatch.setenv("TRACEARRAY_OUTPUT_ARENA_MB", "6")
    f = _double()
    for n in (N, 2 * N, 3 * N, N + 4096):      # each result dropped before the next call
        r = f(np.ones(n, dtype=np.float32))
        assert r.base is not None, f"size {n} was not recycled"
        assert memory.bytes_held() <= 6 * 1024 * 1024
        np.testing.assert_array_equal(r, 2)
        del r


def test_concurrent_calls_get_distinct_memory():
    f = _double()
    errors = []

    def work(k):
        try:
            x = np.full(N, k, dtype=np.float32)
            for _ in range(20):
                r = f(x)
                if not (r == 2 * k).all():
                    errors.append(k)
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ------------------------------------------------- intermediates of one call share memory

def _heat(u, steps=40):
    for _ in range(steps):
        u = u.copy()
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] +
                                               u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def test_a_loop_of_steps_holds_a_few_grids_not_one_per_step():
    """An unrolled time loop stores every step's grid; a grid whose last reader has run
    lends its memory to a later step (tile/lifetimes.py), so 40 steps of a 2 MiB grid need
    a few grids, as NumPy's loop does, and give NumPy's result."""
    u = np.random.default_rng(0).random((512, 512))
    f = tracearray.compile(_heat, device="cpu")
    before = memory.bytes_held()
    got = f(u)
    np.testing.assert_allclose(got, _heat(u), rtol=1e-12)
    grids = (memory.bytes_held() - before) / u.nbytes
    assert 1 <= grids <= 4, grids
    again = f(u + 1)          # the first result is alive: its memory is not lent out
    np.testing.assert_array_equal(got, _heat(u))
    np.testing.assert_allclose(again, _heat(u + 1), rtol=1e-12)


def _long_lived(x, w):
    """Values read long after they are made (``a``, at the end), others that die early,
    beside a matrix product, scans, a concatenation and several results: what a shared
    buffer must never overwrite early."""
    a = np.cumsum(x, axis=0)
    b = np.cumsum(a[::-1], axis=0)
    c = np.exp(a / 64) @ w
    d = np.cumsum(b * 2, axis=1)
    e = np.concatenate([c, np.sin(c)], axis=1)
    f = np.cumsum(d + e, axis=0)
    g = np.cumsum(f[:, ::-1] - 1, axis=1)
    return g + a, c


@pytest.mark.parametrize("n", [1, 37, 600])
def test_buffers_shared_across_a_call_keep_every_value(n):
    rng = np.random.default_rng(n)
    x, w = rng.random((n, 60)), rng.random((60, 30))
    cmp = compare_with_numpy(_long_lived, x, w, device="cpu")
    assert cmp.ok, cmp.report()


def test_share_memory_never_overlaps_lifetimes():
    from tracearray.tile.lifetimes import lifetimes, share_memory
    rng = np.random.default_rng(5)
    for _trial in range(200):
        n_buf, n_steps = int(rng.integers(1, 12)), int(rng.integers(1, 10))
        steps = [list(rng.choice(n_buf, size=int(rng.integers(0, 4)))) for _ in range(n_steps)]
        sizes = {b: int(rng.choice([8, 16])) for b in range(n_buf)}
        span = lifetimes(steps, sizes)
        owner = share_memory(sizes, span)
        assert set(owner) == set(sizes)
        for a in span:
            assert sizes[owner[a]] == sizes[a] and owner[owner[a]] == owner[a]
            for b in span:
                if a < b and owner[a] == owner[b]:   # one memory: lifetimes disjoint
                    assert span[a][1] < span[b][0] or span[b][1] < span[a][0]
