"""The pinned staging ring of small host <-> device copies (``gpu/staging.py``), against a
fake stream whose copies run only when it is synchronised: a region reused before its copy
ran, or read before its data arrived, gives wrong bytes here."""
from __future__ import annotations

import ctypes
import threading

import numpy as np
from tracearray.gpu.staging import ALIGN, HostStaging


class FakeStream:
    """Pinned and device memory as host buffers; copies queued, run in order at ``sync``."""

    def __init__(self, fail_alloc: bool = False) -> None:
        self.keep: list[np.ndarray] = []
        self.queue: list[tuple[int, int, int]] = []
        self.syncs = 0
        self.allocs = 0
        self.fail_alloc = fail_alloc
        self.lock = threading.Lock()

    def buffer(self, n: int) -> int:
        buf = np.full(n, 0xAB, np.uint8)
        self.keep.append(buf)
        return buf.ctypes.data

    def pinned_alloc(self, n: int) -> int:
        if self.fail_alloc:
            raise RuntimeError("cuMemHostAlloc failed: out of memory")
        self.allocs += 1
        return self.buffer(n)

    def copy_async(self, dst: int, src: int, n: int) -> None:
        with self.lock:
            self.queue.append((dst, src, n))

    def sync(self) -> None:
        with self.lock:
            for dst, src, n in self.queue:
                ctypes.memmove(dst, src, n)
            self.queue.clear()
            self.syncs += 1

    def staging(self, capacity: int = 4096, limit: int = 1024) -> HostStaging:
        return HostStaging(self.pinned_alloc, self.copy_async, self.copy_async, self.sync,
                           capacity, limit)


def _read(addr: int, n: int) -> bytes:
    return ctypes.string_at(addr, n)


def test_host_data_may_change_once_a_staged_copy_returns() -> None:
    fake = FakeStream()
    st = fake.staging()
    host = np.arange(200, dtype=np.uint8)
    dsts = [fake.buffer(200) for _ in range(3)]
    expected = []
    for d in dsts:
        assert st.htod(d, host.ctypes.data, 200)
        expected.append(host.tobytes())
        host += 1   # the caller reuses its memory at once
    st.synchronize()
    assert [_read(d, 200) for d in dsts] == expected
    assert fake.allocs == 1


def test_a_full_ring_waits_for_its_copies_before_reusing_regions() -> None:
    fake = FakeStream()
    st = fake.staging(capacity=4 * ALIGN, limit=2 * ALIGN)
    rng = np.random.default_rng(0)
    copies = []
    for _ in range(25):   # many times the ring, no synchronisation by the caller
        n = int(rng.integers(1, 2 * ALIGN + 1))
        data = rng.integers(0, 256, n, dtype=np.uint8)
        d = fake.buffer(n)
        assert st.htod(d, data.ctypes.data, n)
        copies.append((d, data.tobytes()))
    st.synchronize()
    assert all(_read(d, len(b)) == b for d, b in copies)
    assert fake.syncs > 5   # the ring started again several times


def test_device_to_host_sees_the_copies_queued_before_it() -> None:
    fake = FakeStream()
    st = fake.staging()
    data = np.arange(300, dtype=np.uint8)
    dev = fake.buffer(300)
    st.htod(dev, data.ctypes.data, 300)
    out = np.zeros(300, np.uint8)
    assert st.dtoh(out.ctypes.data, dev, 300)
    assert out.tobytes() == data.tobytes()
    # after the wait the ring is empty: the next copy starts at its beginning again
    assert st._used == 0


def test_no_pinned_memory_means_no_staging() -> None:
    fake = FakeStream(fail_alloc=True)
    st = fake.staging()
    data = np.ones(10, np.uint8)
    assert not st.htod(fake.buffer(10), data.ctypes.data, 10)
    assert st.limit == 0   # the caller's pageable path takes every copy from now on


def test_threads_staging_at_once() -> None:
    """Six threads' round trips through one small ring, each checked exactly (their host
    data overwritten as soon as each copy returns)."""
    fake = FakeStream()
    st = fake.staging(capacity=8 * ALIGN, limit=2 * ALIGN)
    results: dict[int, bool] = {}

    def round_trips(seed: int) -> None:
        rng = np.random.default_rng(seed)
        ok = True
        for _ in range(200):
            n = int(rng.integers(1, 2 * ALIGN + 1))
            data = rng.integers(0, 256, n, dtype=np.uint8)
            keep = data.tobytes()
            d = fake.buffer(n)
            st.htod(d, data.ctypes.data, n)
            data[:] = 0
            back = np.empty(n, np.uint8)
            st.dtoh(back.ctypes.data, d, n)
            ok &= back.tobytes() == keep
        results[seed] = ok

    threads = [threading.Thread(target=round_trips, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {s: True for s in range(6)}
