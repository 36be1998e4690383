"""Native helper threads for the CPU kernels' chunks (``pool.run_kernel``).

Why: on a virtual machine a thread that blocks in the kernel (a futex: a Python lock, a
queue, the GIL) lets its vCPU halt, and the scheduler wakes a blocked thread on the waker's
CPU. On the 2-core development VM (2026-12-07) a pool thread woken through Python's queue and
the GIL ran *instead of* the calling thread, not beside it: in most calls of a burst one of
the two threads ran all 8 chunks of adam_step (1 Mi float32) while the other appeared 1.0-1.4
ms later, so two threads ran it in 1.1-1.2 ms, as fast as one, where a tight loop of calls
ran 0.70 and numba's OpenMP pool, whose threads spin before they sleep, 0.59. So helpers
here never touch Python or the GIL:

- A helper thread runs ``ta_worker`` and never returns: it spins (``pause``) watching the
  pool's job counter, runs the chunks of each job it sees, and after ``spins`` idle pauses
  sleeps on a futex until the next job is posted. A job wakes as many sleepers as it wants
  helpers; a helper that arrives when enough have joined sleeps at once, and so do helpers
  beyond the CPUs after each job (their spinning would take the cores others work on).
- ``ta_run`` writes a job into one of ``SLOTS`` slots and posts it (waking sleepers), then
  runs the calling thread's share and waits for chunks taken by helpers, spinning, with a
  ``sched_yield`` between rounds (a helper descheduled on a busy machine may need this
  core); one native call, so a Ctrl-C is raised after the job, never between its steps. Chunks are claimed by an atomic counter (``ta_team_run``) and each chunk
  calls the kernel's entry on (begin, end, slot) from the kernel's table.

A slot (``SLOT_WORDS`` int64): gen (the job's number; 0 while written), active (helpers
looking at it), next (the next chunk to claim), done (chunks finished), entry, bufs, params,
table, n, joined (helpers that took part), max_helpers, busy (set by the publisher that
claims the slot, cleared when its lead has seen every chunk finish). A helper counts itself
active before it compares gen with the number it saw posted, and the publisher clears gen
before it waits for active to reach 0 and writes the slot, so no helper reads a slot being
written. The control block: the last job posted, the sleepers' count, the futex word and the
last job number issued (publishers on several threads need no lock).

Linux only (futex, sched_yield through libc's ``syscall``), x86-64 and AArch64; the module is
LLVM IR kept in the kernel cache like a kernel (``codecache``: memory, disk, compile).
``get()`` is None elsewhere, when it cannot be built, or when ``TRACEARRAY_SPIN_US`` is 0:
the pool then runs chunks through Python closures (``pool.parallel_for``).
"""
from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time
from typing import Any

from .. import config, forksafe

_ARCH = platform.machine().lower()
_X86 = _ARCH in ("x86_64", "amd64")
_ARM = _ARCH in ("aarch64", "arm64")
# (Linux system call numbers: futex, sched_yield)
_SYSCALLS = {True: (202, 24), False: (98, 124)}[_X86] if (_X86 or _ARM) else None
_PAUSE = "call void @llvm.x86.sse2.pause()" if _X86 else "call void @llvm.aarch64.hint(i32 1)"
_PAUSE_DECL = "declare void @llvm.x86.sse2.pause()" if _X86 else \
    "declare void @llvm.aarch64.hint(i32)"

SLOTS = 16          # jobs in flight at once (a power of two)
SLOT_WORDS = 16     # int64 words per slot (128 bytes: slots do not share cache lines)
GEN, ACTIVE, NEXT, DONE, ENTRY, BUFS, PARAMS, TABLE, N, JOINED, MAX_HELPERS, BUSY = range(12)
CONTROL_WORDS = 8   # the last job posted, sleepers, the futex word (low half of word 2),
                    # the last job number issued
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129

NAMES = ["ta_team_run", "ta_worker", "ta_run", "ta_pauses"]


def _ir() -> str:
    futex, yield_ = _SYSCALLS
    return f"""
{_PAUSE_DECL}

define i64 @ta_team_run(ptr %entry, ptr %bufs, ptr %params, ptr %table, i64 %n, ptr %state) {{
start:
  %done = getelementptr i64, ptr %state, i64 1
  br label %claim
claim:
  %ran = phi i64 [ 0, %start ], [ %ran1, %run ]
  %i = atomicrmw add ptr %state, i64 1 seq_cst
  %more = icmp slt i64 %i, %n
  br i1 %more, label %run, label %out
run:
  %t0 = mul i64 %i, 3
  %pb = getelementptr i64, ptr %table, i64 %t0
  %b = load i64, ptr %pb
  %t1 = add i64 %t0, 1
  %pe = getelementptr i64, ptr %table, i64 %t1
  %e = load i64, ptr %pe
  %t2 = add i64 %t0, 2
  %ps = getelementptr i64, ptr %table, i64 %t2
  %s = load i64, ptr %ps
  call void %entry(ptr %bufs, ptr %params, i64 %b, i64 %e, i64 %s)
  %old = atomicrmw add ptr %done, i64 1 seq_cst
  %ran1 = add i64 %ran, 1
  br label %claim
out:
  ret i64 %ran
}}

; this thread's share of the chunks of the job in %slot (``ta_team_run`` on its fields)
define internal void @run_slot(ptr %slot) {{
  %entry = call i64 @field(ptr %slot, i64 {ENTRY})
  %bufs = call i64 @field(ptr %slot, i64 {BUFS})
  %params = call i64 @field(ptr %slot, i64 {PARAMS})
  %table = call i64 @field(ptr %slot, i64 {TABLE})
  %n = call i64 @field(ptr %slot, i64 {N})
  %pn = getelementptr i64, ptr %slot, i64 {NEXT}
  %fe = inttoptr i64 %entry to ptr
  %fb = inttoptr i64 %bufs to ptr
  %fp = inttoptr i64 %params to ptr
  %ft = inttoptr i64 %table to ptr
  %c = call i64 @ta_team_run(ptr %fe, ptr %fb, ptr %fp, ptr %ft, i64 %n, ptr %pn)
  ret void
}}

define internal ptr @slot_of(ptr %slots, i64 %gen) {{
  %k = and i64 %gen, {SLOTS - 1}
  %w = mul i64 %k, {SLOT_WORDS}
  %p = getelementptr i64, ptr %slots, i64 %w
  ret ptr %p
}}

define internal i64 @field(ptr %slot, i64 %i) {{
  %p = getelementptr i64, ptr %slot, i64 %i
  %v = load atomic i64, ptr %p seq_cst, align 8
  ret i64 %v
}}

define internal void @set(ptr %slot, i64 %i, i64 %v) {{
  %p = getelementptr i64, ptr %slot, i64 %i
  store atomic i64 %v, ptr %p seq_cst, align 8
  ret void
}}

; a helper: never returns
define void @ta_worker(ptr %ctl, ptr %slots, i64 %spins, ptr %syscall) {{
start:
  %sleepers = getelementptr i64, ptr %ctl, i64 1
  %word = getelementptr i64, ptr %ctl, i64 2
  %seen0 = load atomic i64, ptr %ctl seq_cst, align 8
  br label %idle
idle:
  %seen = phi i64 [ %seen0, %start ], [ %posted, %ran ]
  %kstart = phi i64 [ 0, %start ], [ %kleft, %ran ]
  br label %poll
poll:
  %k = phi i64 [ %kstart, %idle ], [ %k1, %spin ], [ 0, %woke ]
  %posted = load atomic i64, ptr %ctl seq_cst, align 8
  %new = icmp ne i64 %posted, %seen
  br i1 %new, label %join, label %spin
spin:
  {_PAUSE}
  %k1 = add i64 %k, 1
  %tired = icmp sge i64 %k1, %spins
  br i1 %tired, label %sleep, label %poll
sleep:
  %s0 = atomicrmw add ptr %sleepers, i64 1 seq_cst
  %w = load atomic i32, ptr %word seq_cst, align 8
  %again = load atomic i64, ptr %ctl seq_cst, align 8
  %still = icmp eq i64 %again, %seen
  br i1 %still, label %wait, label %woke
wait:
  %r = call i64 (i64, ...) %syscall(i64 {futex}, ptr %word, i32 {FUTEX_WAIT_PRIVATE}, i32 %w, ptr null, ptr null, i32 0)
  br label %woke
woke:
  %s1 = atomicrmw sub ptr %sleepers, i64 1 seq_cst
  br label %poll
join:
  %slot = call ptr @slot_of(ptr %slots, i64 %posted)
  %pa = getelementptr i64, ptr %slot, i64 {ACTIVE}
  %a0 = atomicrmw add ptr %pa, i64 1 seq_cst
  %gen = call i64 @field(ptr %slot, i64 {GEN})
  %same = icmp eq i64 %gen, %posted
  br i1 %same, label %count, label %leave
count:
  %pj = getelementptr i64, ptr %slot, i64 {JOINED}
  %j = atomicrmw add ptr %pj, i64 1 seq_cst
  %most = call i64 @field(ptr %slot, i64 {MAX_HELPERS})
  %wanted = icmp slt i64 %j, %most
  br i1 %wanted, label %work, label %leave
work:
  call void @run_slot(ptr %slot)
  br label %leave
leave:   ; a helper the job did not want (enough joined) sleeps instead of spinning on
  %worked = phi i1 [ false, %join ], [ false, %count ], [ true, %work ]
  %a1 = atomicrmw sub ptr %pa, i64 1 seq_cst
  %kleft = select i1 %worked, i64 0, i64 %spins
  br label %ran
ran:
  br label %idle
}}

; post a job (any thread): a job number from the control block's counter, its slot claimed
; (BUSY 0 -> 1), closed to helpers (GEN 0) until no helper looks at it, written, numbered,
; and announced (the control block's last job number; sleepers woken); returns the slot
define internal ptr @publish(ptr %ctl, ptr %slots, i64 %entry, i64 %bufs, i64 %params,
                             i64 %table, i64 %n, i64 %helpers, ptr %syscall) {{
start:
  %issued = getelementptr i64, ptr %ctl, i64 3
  %prev = atomicrmw add ptr %issued, i64 1 seq_cst
  %gen = add i64 %prev, 1
  %slot = call ptr @slot_of(ptr %slots, i64 %gen)
  %pbusy = getelementptr i64, ptr %slot, i64 {BUSY}
  br label %claim
claim:  ; the job this slot held {SLOTS} jobs ago has been seen finished by its lead
  %c = cmpxchg ptr %pbusy, i64 0, i64 1 seq_cst seq_cst
  %got = extractvalue {{ i64, i1 }} %c, 1
  br i1 %got, label %close, label %wait_free
wait_free:   ; (rare: another thread's job; yield, its lead may need this core)
  %y0 = call i64 (i64, ...) %syscall(i64 {yield_})
  br label %claim
close:
  call void @set(ptr %slot, i64 {GEN}, i64 0)
  br label %quiet
quiet:  ; no helper is still looking at the old job
  %act = call i64 @field(ptr %slot, i64 {ACTIVE})
  %looking = icmp ne i64 %act, 0
  br i1 %looking, label %wait_quiet, label %write
wait_quiet:  ; (rare: a helper between reading the job number and leaving the old job)
  %y1 = call i64 (i64, ...) %syscall(i64 {yield_})
  br label %quiet
write:
  call void @set(ptr %slot, i64 {NEXT}, i64 0)
  call void @set(ptr %slot, i64 {DONE}, i64 0)
  call void @set(ptr %slot, i64 {JOINED}, i64 0)
  call void @set(ptr %slot, i64 {ENTRY}, i64 %entry)
  call void @set(ptr %slot, i64 {BUFS}, i64 %bufs)
  call void @set(ptr %slot, i64 {PARAMS}, i64 %params)
  call void @set(ptr %slot, i64 {TABLE}, i64 %table)
  call void @set(ptr %slot, i64 {N}, i64 %n)
  call void @set(ptr %slot, i64 {MAX_HELPERS}, i64 %helpers)
  call void @set(ptr %slot, i64 {GEN}, i64 %gen)
  store atomic i64 %gen, ptr %ctl seq_cst, align 8
  %sleepers = getelementptr i64, ptr %ctl, i64 1
  %s = load atomic i64, ptr %sleepers seq_cst, align 8
  %sleeping = icmp sgt i64 %s, 0
  %wanted = icmp sgt i64 %helpers, 0
  %any = and i1 %sleeping, %wanted
  br i1 %any, label %wake, label %out
wake:   ; as many sleepers as the job wants (the others sleep on)
  %word = getelementptr i64, ptr %ctl, i64 2
  %w = atomicrmw add ptr %word, i32 1 seq_cst
  %count = trunc i64 %helpers to i32
  %r = call i64 (i64, ...) %syscall(i64 {futex}, ptr %word, i32 {FUTEX_WAKE_PRIVATE}, i32 %count, ptr null, ptr null, i32 0)
  br label %out
out:
  ret ptr %slot
}}

; a kernel's chunks on the calling thread and up to %helpers helpers, published and led in
; one call: returns when every chunk has run (no interrupt can fall between the two)
define void @ta_run(ptr %ctl, ptr %slots, i64 %entry, i64 %bufs, i64 %params, i64 %table,
                    i64 %n, i64 %helpers, i64 %spins, ptr %syscall) {{
start:
  %slot = call ptr @publish(ptr %ctl, ptr %slots, i64 %entry, i64 %bufs, i64 %params,
                            i64 %table, i64 %n, i64 %helpers, ptr %syscall)
  call void @lead(ptr %slot, i64 %spins, ptr %syscall)
  ret void
}}

define void @ta_pauses(i64 %n) {{
start:
  br label %loop
loop:
  %k = phi i64 [ 0, %start ], [ %k1, %loop ]
  {_PAUSE}
  %k1 = add i64 %k, 1
  %more = icmp slt i64 %k1, %n
  br i1 %more, label %loop, label %out
out:
  ret void
}}

; the posting thread's share of the job in %slot, then the wait for the helpers' chunks
define internal void @lead(ptr %slot, i64 %spins, ptr %syscall) {{
start:
  call void @run_slot(ptr %slot)
  %n = call i64 @field(ptr %slot, i64 {N})
  br label %check
check:
  %k = phi i64 [ 0, %start ], [ %k1, %spin ], [ 0, %yield ]
  %d = call i64 @field(ptr %slot, i64 {DONE})
  %finished = icmp sge i64 %d, %n
  br i1 %finished, label %out, label %spin
spin:
  {_PAUSE}
  %k1 = add i64 %k, 1
  %tired = icmp sge i64 %k1, %spins
  br i1 %tired, label %yield, label %check
yield:
  %r = call i64 (i64, ...) %syscall(i64 {yield_})
  br label %check
out:
  call void @set(ptr %slot, i64 {BUSY}, i64 0)
  ret void
}}
"""


_P, _I = ctypes.c_void_p, ctypes.c_int64
_WORKER_T = ctypes.CFUNCTYPE(None, _P, _P, _I, _P)
_RUN_T = ctypes.CFUNCTYPE(None, _P, _P, _I, _I, _I, _I, _I, _I, _I, _P)


class Team:
    """The native helpers of one process: a control block, ``SLOTS`` job slots, the
    functions (ctypes: called without the GIL) and the helper threads started so far."""

    def __init__(self, code: Any, syscall: int, spin_us: float) -> None:
        self.code = code            # keeps the machine code mapped
        addresses = code.addresses
        self._worker = _WORKER_T(addresses["ta_worker"])
        self._run = _RUN_T(addresses["ta_run"])
        self.syscall = syscall
        self.control = (ctypes.c_int64 * CONTROL_WORDS)()
        self.slots = (ctypes.c_int64 * (SLOTS * SLOT_WORDS))()
        self.control_address = ctypes.addressof(self.control)
        self.slots_address = ctypes.addressof(self.slots)
        self.post_lock = threading.Lock()   # (starting helper threads)
        self.helpers: list[threading.Thread] = []
        self.spins = max(int(spin_us * _pauses_per_us()), 1)

    def ensure_helpers(self, count: int) -> None:
        if len(self.helpers) >= count:
            return
        from .pool import available_cpus
        with self.post_lock:
            while len(self.helpers) < count:
                # helpers beyond the CPUs (set_num_threads(16) on 2 cores) sleep at once
                # after a job: their spinning would take the cores the others work on
                spins = self.spins if len(self.helpers) < available_cpus() - 1 else 1
                t = threading.Thread(target=self._worker, name=f"tracearray-helper-"
                                     f"{len(self.helpers)}", daemon=True,
                                     args=(self.control_address, self.slots_address,
                                           spins, self.syscall))
                t.start()
                self.helpers.append(t)

    def run(self, entry: int, bufs: int, params: int, table: int, n: int,
            helpers: int) -> None:
        """The job's chunks on this thread and up to ``helpers`` helpers; returns when every
        chunk has run (the caller keeps ``bufs``, ``params`` and ``table`` alive until then).
        One native call: an interrupt (Ctrl-C) is raised after it, never between publishing
        the job and running it."""
        self.ensure_helpers(helpers)
        self._run(self.control_address, self.slots_address, entry, bufs, params, table, n,
                  helpers, self.spins, self.syscall)


def _pauses_per_us() -> float:
    """Pauses per microsecond on this machine (a pause is 10-150 cycles by processor)."""
    return _calibration[0]


_calibration: list[float] = []
_team: Team | None = None
_failed = False
_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_lock")


def _reset_after_fork() -> None:
    global _team
    _team = None   # its helper threads did not survive the fork; a child makes its own


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def get() -> Team | None:
    """The process's native helpers, loaded (or built) on first use; None where they cannot
    be (the pool then runs chunks through Python) or ``TRACEARRAY_SPIN_US`` is 0."""
    global _team, _failed
    if _team is not None or _failed:
        return _team
    spin_us = config.spin_microseconds()   # (a bad value raises, as any setting's does)
    with _lock:
        if _team is None and not _failed:
            try:
                _team = _make(spin_us)
            except Exception as e:   # noqa: BLE001 - the Python pool still runs every job
                _failed = True
                config.log(config.COMPILES, "cpu pool: native helpers unavailable (%s); chunks "
                           "run through Python threads", e)
    return _team


def _make(spin_us: float) -> Team:
    if spin_us <= 0:
        raise RuntimeError("TRACEARRAY_SPIN_US=0")
    if _SYSCALLS is None or not sys.platform.startswith("linux"):
        raise RuntimeError(f"futex helpers are built for Linux on x86-64 and AArch64, not "
                           f"{sys.platform} on {_ARCH}")
    from . import codecache
    ir = _ir()
    code = codecache.load_kernel("tracearray cpu team v5\n" + ir, NAMES, lambda: ir).code
    libc = ctypes.CDLL(None)
    syscall = ctypes.cast(libc.syscall, ctypes.c_void_p).value
    if not _calibration:
        _calibration.append(_time_pauses(code))
    team = Team(code, syscall, min(spin_us, 1e6))   # (a second at most)
    # Never freed: helper threads run its code and spin on its arrays until the process
    # ends, also while the interpreter finalises (freeing them then let a helper write into
    # freed memory: the heap corrupted at exit, seen with long spins).
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(team))
    return team


def _time_pauses(code: Any) -> float:
    """Pauses per microsecond: the best of three timings of 4,000 pauses."""
    pauses = ctypes.CFUNCTYPE(None, _I)(code.addresses["ta_pauses"])
    n, best = 4000, float("inf")
    for _ in range(3):
        start = time.perf_counter()
        pauses(n)
        best = min(best, time.perf_counter() - start)
    return max(n / max(best * 1e6, 1e-3), 1.0)
