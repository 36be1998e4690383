"""Autotuning on the device (opt-in: ``TRACEARRAY_AUTOTUNE``; what is tuned and why results
do not change: ``tile/tune.py``): the winners' caches and the timing of a candidate.

The runtime (``GpuExecutable``) asks ``cached_winner`` when it binds a tunable kernel; on a
miss it times every candidate on the first call's own buffers (``time_launches``: one
untimed run, then the fastest of ``TIMED_RUNS`` between CUDA events on tracearray's stream;
a candidate whose launch fails scores infinity) and ``remember``s the fastest, in memory and in
the disk cache's ``tuning`` folder. An entry holds the tuned fields as JSON integers under a
key of the kernel's PTX digest, its driver, its size bucket, the device's name and
tracearray's version; an entry that is not exactly that is ignored (refused and deleted),
never executed.
"""
from __future__ import annotations

import hashlib
import math
import sys
import threading
from typing import Any, Sequence

from .. import config, forksafe
from ..diskcache import ObjectCache, key_record, record_key, tracearray_version
from ..tile.policy import GpuTiling
from ..tile.tune import decode_winner, encode_winner, size_bucket
from . import ptx as ptxmod

KEY_COMPONENTS = ("code", "driver", "size_bucket", "device", "tracearray")
TIMED_RUNS = 3

_lock = threading.Lock()
forksafe.renew_at_fork(sys.modules[__name__], "_lock")
_memory: dict[str, bytes] = {}


def tuning_key(ptx: str, bound: Any, device_name: str) -> tuple[str, bytes]:
    """(key, record) of a bound kernel's winner."""
    components = {"code": hashlib.sha256(ptx.encode()).hexdigest(),
                  "driver": bound.strategy, "size_bucket": repr(size_bucket(bound)),
                  "device": device_name, "tracearray": tracearray_version()}
    record = key_record(components, KEY_COMPONENTS, "GPU tuning key")
    return record_key(record), record


def _disk() -> ObjectCache | None:
    return ptxmod.subfolder_cache("tuning")


def cached_winner(key: str, record: bytes, strategy: str, policy: GpuTiling
                  ) -> GpuTiling | None:
    """``policy`` with the cached winner's fields, or None (never tuned, or a bad entry)."""
    with _lock:
        payload = _memory.get(key)
    cache = None
    if payload is None:
        cache = _disk()
        payload = cache.load(key, record) if cache is not None else None
    if payload is None:
        return None
    winner = decode_winner(strategy, payload, policy)
    if winner is None:
        if cache is not None:
            cache.refuse(key, "not a tuning entry of this kernel's driver")
        return None
    with _lock:
        _memory[key] = payload
    return winner


def remember(key: str, record: bytes, strategy: str, policy: GpuTiling) -> None:
    payload = encode_winner(strategy, policy)
    with _lock:
        _memory[key] = payload
    cache = _disk()
    if cache is not None:
        cache.store(key, payload, record)


def time_launches(dev: Any, loaded: Sequence[tuple], pointers: Sequence[int]) -> float:
    """Milliseconds of the fastest of TIMED_RUNS runs of a kernel's ``loaded`` launches
    (``GpuExecutable._loaded``) on ``pointers``, after one untimed run."""
    from .events import Event
    n = len(pointers)

    def run() -> None:
        for fn, grid, block, smem, vals, addrs in loaded:
            vals[0:n] = pointers
            dev.launch(fn, grid, block, addrs, smem)
    run()
    best = math.inf
    for _ in range(TIMED_RUNS):
        start, end = Event(), Event()
        start.record()
        run()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_ms(end))
    return best


def report(name: str, strategy: str, results: Sequence[tuple[float, GpuTiling]],
           winner: GpuTiling | None) -> None:
    """``TRACEARRAY_AUTOTUNE=print``: the candidates of one kernel and their times (no
    winner: every candidate failed, the default's launches stay)."""
    from ..tile.tune import TUNED_FIELDS
    fields = list(TUNED_FIELDS[strategy])
    lines = [f"[tracearray] autotune {name} ({strategy}):"]
    for ms, policy in results:
        mark = "  <- kept" if policy is winner else ""
        shown = ", ".join(f"{f}={getattr(policy, f)}" for f in fields)
        lines.append(f"    {shown}: " + (f"{ms:.4f} ms" if math.isfinite(ms) else "failed")
                     + mark)
    if winner is None:
        lines.append("    every candidate failed: the default's launches stay, nothing kept")
    print("\n".join(lines), file=sys.stderr, flush=True)
    if winner is not None:
        config.log(config.COMPILES, "autotune %s: kept %s", name,
                   {f: getattr(winner, f) for f in fields})


def clear_memory() -> None:
    """Forget the winners found in this process (tests)."""
    with _lock:
        _memory.clear()
