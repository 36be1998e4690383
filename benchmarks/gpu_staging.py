"""Host <-> device copies of NumPy arrays: pageable memory (what tracearray does) against
staging through a pinned buffer (issue 12 asks whether NumPy inputs should be staged).

For each size (float32): host time per copy of a NumPy array to the device, enqueued only and
to completion, from pageable memory (``cuMemcpyHtoDAsync`` of the array itself: the driver
stages it) and through a pinned buffer (``np.copyto`` into ``cuMemHostAlloc`` memory, then the
asynchronous copy from there); and back (device -> a new NumPy array, to completion).
Minimum and median of ``--repeat`` copies; a table and JSON.

What it showed (H100 host, 2026-12-06, docs/benchmarks.md): a staged copy is 1-3 us faster
per small copy, but whole NumPy-in/out calls staged through a pinned ring of our own (tried,
``benchmarks/overhead.py`` in the same run) were 1-8 us slower at 16-1,024 elements and level
at 10^5, so tracearray copies from pageable memory.

    python benchmarks/gpu_staging.py --json out.json
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = (16, 1024, 100_000, 1_000_000, 16_000_000)


def _times(fn, repeat: int) -> tuple[float, float]:
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e6 * min(ts), 1e6 * statistics.median(ts)


def measure(repeat: int) -> list[dict]:
    from tracearray.gpu.driver import get_device
    dev = get_device()
    cu = dev.cu
    rows = []
    for n in SIZES:
        x = np.random.default_rng(0).random(n, dtype=np.float32)
        nbytes = x.nbytes
        dst = dev.allocator.allocate(nbytes)
        host = int(dev.call("cuMemHostAlloc", nbytes, 0))
        pinned = np.ctypeslib.as_array((ctypes.c_float * n).from_address(host))
        stream, dptr = dev.stream, cu.CUdeviceptr(dst.ptr)

        def pageable_enqueue():
            dev.call("cuMemcpyHtoDAsync", dptr, x.ctypes.data, nbytes, stream)

        def pinned_enqueue():
            np.copyto(pinned, x)
            dev.call("cuMemcpyHtoDAsync", dptr, host, nbytes, stream)

        def synced(f):
            def g():
                f()
                dev.synchronize()
            return g

        def back_pageable():
            out = np.empty_like(x)
            dev.call("cuMemcpyDtoHAsync", out.ctypes.data, dptr, nbytes, stream)
            dev.synchronize()

        def back_pinned():
            dev.call("cuMemcpyDtoHAsync", host, dptr, nbytes, stream)
            dev.synchronize()
            out = np.empty_like(x)
            np.copyto(out, pinned)

        row = {"elements": n, "bytes": nbytes}
        for name, fn in (("htod_pageable_enqueue", pageable_enqueue),
                         ("htod_pinned_enqueue", pinned_enqueue),
                         ("htod_pageable", synced(pageable_enqueue)),
                         ("htod_pinned", synced(pinned_enqueue)),
                         ("dtoh_pageable", back_pageable), ("dtoh_pinned", back_pinned)):
            dev.synchronize()
            lo, med = _times(fn, repeat)
            dev.synchronize()
            row[name] = {"min_us": lo, "median_us": med}
        dev.call("cuMemFreeHost", host)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--json")
    args = p.parse_args(argv)
    rows = measure(args.repeat)
    keys = ("htod_pageable_enqueue", "htod_pinned_enqueue", "htod_pageable", "htod_pinned",
            "dtoh_pageable", "dtoh_pinned")
    print("| elements | " + " | ".join(keys) + " |")
    print("|---:|" + "---:|" * len(keys))
    for r in rows:
        print(f"| {r['elements']} | " + " | ".join(
            f"{r[k]['min_us']:.1f} ({r[k]['median_us']:.1f})" for k in keys) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
