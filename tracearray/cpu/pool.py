"""Running JIT kernels over chunks of an array on several threads.

A kernel's chunks go to native helper threads (``team.py``, ``run_kernel``): chunks are
claimed and run without Python or the GIL between them, which matters on virtual machines
(``team.py`` says why). ``ThreadChoice`` decides per kernel whether the pool is worth it.

``parallel_for`` runs Python callables (host calls' pieces, and every kernel where native
helpers cannot be built) on a persistent pool of Python threads: kernels called through
``ctypes.CFUNCTYPE`` objects release the GIL for the duration of the foreign call, so plain
Python threads give real parallelism. That pool is created on first parallel use (daemon
threads, so it never blocks interpreter exit) and recreated after ``fork``. The calling
thread always works on its own job too: a job never waits for a busy worker, which also
makes nested ``parallel_for`` calls safe.
"""

from __future__ import annotations

import ctypes
import os
import queue
import threading
import time
from typing import Any, Callable, Sequence

from .. import config
from . import team

ENV_THREADS = "TRACEARRAY_NUM_THREADS"

# ``set_num_threads(n)``: the thread count chosen at run time, before the environment's.
_threads_set: int | None = None


def num_threads() -> int:
    """Threads to use: ``set_num_threads``'s, else $TRACEARRAY_NUM_THREADS, else the CPUs this
    process may run on."""
    if _threads_set is not None:
        return _threads_set
    n = config.num_threads_setting()
    return n if n is not None else available_cpus()


def num_threads_source() -> str:
    """Where ``num_threads()`` comes from, in words (for the environment report)."""
    if _threads_set is not None:
        return "tracearray.set_num_threads"
    if config.num_threads_setting() is not None:
        return "TRACEARRAY_NUM_THREADS"
    return "the CPUs this process may run on"


def set_num_threads(n: int | None) -> None:
    """Use ``n`` threads for the kernels launched from now on (None: back to the default).

    Executables built earlier keep how they split their work (in chunks, about four per
    thread they were built for; results do not depend on it), and run those chunks on ``n``
    threads."""
    global _threads_set
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"set_num_threads: the thread count must be a positive integer or "
                         f"None, got {n!r}")
    _threads_set = n


def available_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where the OS has one, bounded by
    a cgroup v2 CPU quota (a container allowed 2 CPUs' time of 16 visible ones gets 2; more
    threads than that only wait for each other). Read once per process."""
    if not _cpus:
        try:
            n = max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            n = max(1, os.cpu_count() or 1)
        quota = _cgroup_cpu_quota()
        _cpus.append(max(1, min(n, quota)) if quota is not None else n)
    return _cpus[0]


_cpus: list[int] = []


def _cgroup_cpu_quota() -> int | None:
    """CPUs' worth of time a cgroup v2 ``cpu.max`` allows this process (rounded up), None
    without a quota."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        path = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), None)
        if path is None:
            return None
        with open(os.path.join("/sys/fs/cgroup", path.lstrip("/"), "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        if quota == "max":
            return None
        return max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError, IndexError):
        return None


def chunk_ranges(n: int, min_chunk: int, threads: int) -> list[tuple[int, int]]:
    """Split range(n) into about 4 chunks per thread of at least min_chunk elements.

    More chunks than threads balance uneven progress (another process on the
    core, a slow tail); sizes are rounded up to a multiple of 64 elements so
    chunk boundaries fall on cache lines for all dtypes.  Deterministic for a
    given (n, min_chunk, threads).
    """
    if n <= 0:
        return []
    if threads <= 1:
        return [(0, n)]
    size = max(min_chunk, 1, -(-n // (4 * threads)))
    size = -(-size // 64) * 64
    return [(begin, min(begin + size, n)) for begin in range(0, n, size)]


class _Job:
    """One parallel_for call: chunks handed out one at a time to whoever asks.

    Only helpers (pool workers) are counted as running: the calling thread runs its chunks
    synchronously, so whenever it waits it runs none, even if an exception (a Ctrl-C: Python
    raises KeyboardInterrupt in the main thread between any two bytecodes) cut its own
    bookkeeping short. That is what lets an interrupted call wait for exactly the chunks that
    are still writing into its buffers.
    """

    def __init__(self, fn: Callable[[int, int], object], chunks: Sequence[tuple[int, int]]) -> None:
        self.fn = fn
        self.chunks = chunks
        self.next = 0
        self.helpers_running = 0
        self.stopped = False    # a chunk failed or the caller was interrupted: start no more
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)   # notified when a helper's chunk ends

    def _take(self, helper: bool) -> tuple[int, int] | None:
        with self.lock:
            if self.stopped or self.next >= len(self.chunks):
                return None
            chunk = self.chunks[self.next]
            self.next += 1
            self.helpers_running += helper
            return chunk

    def _fail(self, error: BaseException) -> None:
        with self.lock:
            self.stopped = True
            if self.error is None:
                self.error = error

    def work(self, helper: bool = True) -> None:
        """Run chunks until none are left (or the job stopped)."""
        while (chunk := self._take(helper)) is not None:
            try:
                self.fn(*chunk)
            except BaseException as e:  # re-raised in the calling thread
                self._fail(e)
            finally:
                if helper:
                    with self.lock:
                        self.helpers_running -= 1
                        self.idle.notify_all()

    def finished(self) -> bool:
        """No chunk is left to start and no helper is running one (lock held)."""
        return (self.stopped or self.next >= len(self.chunks)) and self.helpers_running == 0

    def wait(self) -> None:
        """Until ``finished``: may be interrupted."""
        with self.lock:
            while not self.finished():
                self.idle.wait()

    def stop_and_wait(self) -> None:
        """Start no more chunks and wait for the running ones, whatever else is raised
        meanwhile: a second Ctrl-C must not let the call return while helpers still write."""
        with self.lock:
            self.stopped = True
        while True:
            try:
                self.wait()
                return
            except BaseException:   # noqa: BLE001 - the first interrupt is the one raised
                continue


class _Pool:
    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.lock = threading.Lock()

    def ensure_workers(self, count: int) -> None:
        with self.lock:
            while len(self.workers) < count:
                t = threading.Thread(target=self._run, name=f"tracearray-worker-{len(self.workers)}", daemon=True)
                t.start()
                self.workers.append(t)

    def _run(self) -> None:
        while True:
            self.queue.get().work()


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool()
        return _pool


def _reset_after_fork() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()  # the worker threads did not survive the fork
    _cpus.clear()   # (the child may be given other CPUs)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class ThreadChoice:
    """Whether one kernel's chunks run on the pool or all in the calling thread, chosen by
    timing both on the kernel's first calls.

    Why: giving chunks to a pool thread costs waking it and, when the calling thread ends its
    share first, being woken by it: tens of microseconds each on a virtual machine whose idle
    vCPU halts. On the 2-core development VM (AMD EPYC, 2026-12-04) two threads were slower
    than one below about 100 us of work: ew_chain on 2^17 float32 elements 36 us on one
    thread, 69 us on two; layernorm (64, 4096) 56 and 79 us; at 2^19 elements ew_chain was 141
    and 110 us. Where the crossing lies depends on the machine and the kernel, so it is
    measured: calls 1 to ``2 * TRIALS`` alternate between one thread and the pool (call 0,
    cold, is not counted) and the faster by its best time is kept, except that a kernel
    taking ``LONG_S`` or more on one thread keeps the pool whatever its trials said: two
    wake-ups cannot cost it more than a small part, and the trials may be unrepresentative
    (the benchmark harness's first calls each follow a pause, after which this VM runs both
    threads slowly: rmsnorm (1024, 4096) timed 1.14 ms on one thread, 1.25 on two, while in a
    loop of calls two threads take 0.92 ms and one 1.26). Results do not depend on the choice:
    every value is computed as with the pool.

    ``whole``: for a kernel whose chunks are pieces of one range whose elements do not depend
    on where the range is cut (every kernel but a full reduction, whose chunks are its
    partial sums' slots), that range: one thread runs it in one call, as a kernel built for
    one thread does (a call per chunk costs about a microsecond each)."""

    TRIALS = 3
    LONG_S = 300e-6
    __slots__ = ("threads", "pool_threads", "calls", "best", "name", "whole")

    def __init__(self, threads: int, name: str = "",
                 whole: tuple[int, int] | None = None) -> None:
        self.pool_threads = threads
        self.threads: int | None = 1 if threads <= 1 else None   # None: still measuring
        self.calls = 0
        self.best = [float("inf"), float("inf")]    # one thread, the pool
        self.name = name
        self.whole = whole

    def _one_thread(self, fn: Callable[[int, int], object],
                    chunks: Sequence[tuple[int, int]]) -> None:
        if self.whole is not None:
            fn(*self.whole)
        else:
            for begin, end in chunks:
                fn(begin, end)

    def run(self, fn: Callable[[int, int], object], chunks: Sequence[tuple[int, int]],
            native: "tuple[KernelChunks, Any, int] | None" = None) -> None:
        """``parallel_for(fn, chunks, ...)`` on the chosen threads (or timing a choice).
        ``native``: the same work as (the kernel's chunks, its pointer array, its parameters'
        address), which the pool runs through the native chunk loop where there is one."""
        threads = self.threads
        if threads is not None:
            # (the pool at today's thread count: set_num_threads after the build counts)
            if threads == 1 or (now := num_threads()) == 1:
                self._one_thread(fn, chunks)
            elif native is not None and team.get() is not None:
                run_kernel(native[0], native[1], native[2], now)
            else:
                parallel_for(fn, chunks, now)
            return
        k = self.calls
        self.calls = k + 1
        pooled = k % 2
        start = time.perf_counter()
        if pooled:
            now = num_threads()
            if native is not None and team.get() is not None:
                run_kernel(native[0], native[1], native[2], now)
            else:
                parallel_for(fn, chunks, now)
        else:
            self._one_thread(fn, chunks)
        took = time.perf_counter() - start
        if k:
            self.best[pooled] = min(self.best[pooled], took)
        if self.calls > 2 * self.TRIALS:
            one, shared = self.best
            self.threads = 1 if one <= shared and one < self.LONG_S else self.pool_threads
            config.log(config.COMPILES, "%s: %d chunks run on %s (best of %d: %.1f us on one "
                       "thread, %.1f us on %d)", self.name or "a kernel", len(chunks),
                       "one thread" if self.threads == 1 else f"{self.threads} threads",
                       self.TRIALS, 1e6 * one, 1e6 * shared, self.pool_threads)


# Test hook: called in the calling thread when it has run its share and starts waiting for
# the helpers, where a Ctrl-C most often lands (tests raise KeyboardInterrupt from it).
_on_wait: Callable[[_Job], None] | None = None


def parallel_for(fn_ptr_call: Callable[[int, int], object], chunks: Sequence[tuple[int, int]],
                 threads: int | None = None) -> None:
    """Call ``fn_ptr_call(begin, end)`` for every chunk, in parallel.

    ``fn_ptr_call`` is typically a ctypes CFUNCTYPE kernel with its other
    arguments bound (e.g. ``functools.partial``).  Returns when every chunk has
    run; the first exception raised by a chunk is re-raised here (chunks not
    yet started are then skipped). An exception raised in the calling thread
    itself (KeyboardInterrupt) stops the handing out of chunks and propagates
    only after every chunk already running has ended: until then helpers write
    into the call's output and scratch buffers, which the caller may free or the
    output arena hand to the next call as soon as this returns.

    ``threads``: the thread count the chunks were made for (an executable fixes it when it is
    built); None reads ``num_threads()``, an environment lookup a call path need not pay.
    """
    if not chunks:
        return
    if threads is None:
        threads = num_threads()
    if threads <= 1 or len(chunks) == 1:
        for begin, end in chunks:
            fn_ptr_call(begin, end)
        return
    helpers = min(threads, len(chunks)) - 1
    pool = _get_pool()
    pool.ensure_workers(helpers)
    job = _Job(fn_ptr_call, list(chunks))
    for _ in range(helpers):
        pool.queue.put(job)
    try:
        job.work(helper=False)
        if _on_wait is not None:
            _on_wait(job)
        job.wait()
    except BaseException:
        job.stop_and_wait()
        raise
    if job.error is not None:
        raise job.error


class KernelChunks:
    """A kernel's chunks as the native helpers read them (``team.py``): the entry's address
    and a table of (begin, end, slot) triples, made once per kernel."""
    __slots__ = ("entry", "table", "table_address", "count")

    def __init__(self, entry_address: int, triples: Sequence[tuple[int, int, int]]) -> None:
        flat = [v for triple in triples for v in triple]
        self.entry = entry_address
        self.table = (ctypes.c_int64 * max(len(flat), 1))(*flat)
        self.table_address = ctypes.addressof(self.table)
        self.count = len(triples)


def run_kernel(kernel: KernelChunks, bufs: Any, params: int, threads: int) -> None:
    """Every chunk of ``kernel`` (its entry called with the ctypes pointer array ``bufs`` and
    the parameters at ``params``) on ``threads`` threads, the calling one among them, claimed
    and run by native code (``team.py``, which must be available); returns when every chunk
    has run (an interrupt is raised after that: helpers write into the call's buffers)."""
    team.get().run(kernel.entry, ctypes.addressof(bufs), params, kernel.table_address,
                   kernel.count, min(threads, kernel.count) - 1)
