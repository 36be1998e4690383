#!/usr/bin/env python3
"""Autotuning on the GPU (issue 17): each workload's default launch policy against the one
``TRACEARRAY_AUTOTUNE`` keeps, in one process, on the same device arrays.

    python benchmarks/gpu_autotune.py [--workloads a,b] [--size gpu] [--repeat 10] [--json out]

Per workload: a compiled function with autotuning off, timed (the median of ``--repeat``
calls between CUDA events on tracearray's stream, after two warm calls); then one with it on
(``print``: the candidates and their times go to stderr), whose first call tunes, timed the
same way, its result checked equal to the untuned one's bit for bit (a policy never changes
a result). The disk cache is a fresh temporary folder, so every kernel is tuned here. Also
the first call's cost with tuning against without. Prints a table, writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TUNED = ("ew_chain", "gelu_tanh", "softmax", "logsumexp", "layernorm", "rmsnorm",
         "l2_normalize", "adam_step", "black_scholes", "haversine", "pairwise_min")


def timed_ms(f, args, repeat: int) -> float:
    from benchmarks.gpu_launch_ab import event_times
    return statistics.median(event_times(f, args, 2, repeat))


def first_call_ms(f, args) -> float:
    """Host time of a first call, to its results on the device (an event waited for)."""
    from tracearray import gpu
    t = time.perf_counter()
    f(*args)
    done = gpu.Event()
    done.record()
    done.synchronize()
    return 1e3 * (time.perf_counter() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(TUNED))
    ap.add_argument("--size", default="gpu")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    os.environ["TRACEARRAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="ta-tune-")
    import numpy as np
    import tracearray
    from tracearray import gpu
    from benchmarks import workloads as W
    rows = []
    for name in [w for w in a.workloads.split(",") if w]:
        w = W.get(name)
        args = [gpu.Array.from_numpy(x) for x in W.make_inputs(name, a.size, 0).values()]
        os.environ["TRACEARRAY_AUTOTUNE"] = "0"
        plain = tracearray.compile(w.fn, device="cuda")
        first_plain = first_call_ms(plain, args)
        ms_plain = timed_ms(plain, args, a.repeat)
        want = [np.asarray(o.numpy() if hasattr(o, "numpy") else o)
                for o in W.as_outputs(plain(*args))]
        os.environ["TRACEARRAY_AUTOTUNE"] = "print"
        print(f"== {name}", file=sys.stderr, flush=True)
        tuned = tracearray.compile(w.fn, device="cuda")
        first_tuned = first_call_ms(tuned, args)
        os.environ["TRACEARRAY_AUTOTUNE"] = "0"
        got = [np.asarray(o.numpy() if hasattr(o, "numpy") else o)
               for o in W.as_outputs(tuned(*args))]
        same = all(np.array_equal(g, x, equal_nan=True) for g, x in zip(got, want))
        ms_tuned = timed_ms(tuned, args, a.repeat)
        exe = tuned.lower(*args).executable
        launches = [dict(ln.__dict__) for b in exe.bound_kernels().values()
                    for ln in b.launches]
        row = {"workload": name, "default_ms": round(ms_plain, 4),
               "tuned_ms": round(ms_tuned, 4), "same_bits": same,
               "first_call_ms": round(first_plain, 1),
               "first_call_tuning_ms": round(first_tuned, 1), "tuned_launches": launches}
        rows.append(row)
        print(f"  {name:13s} default {ms_plain:8.4f} ms  tuned {ms_tuned:8.4f} ms  "
              f"({ms_plain / ms_tuned:5.3f}x)  same bits {same}  first call {first_plain:7.1f}"
              f" -> {first_tuned:7.1f} ms", flush=True)
    print("\n| workload | default ms | autotuned ms | default / tuned | same bits | first call ms "
          "(tuning) |\n|---|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['default_ms']} | {r['tuned_ms']} | "
              f"{r['default_ms'] / r['tuned_ms']:.3f} | {r['same_bits']} | "
              f"{r['first_call_ms']} ({r['first_call_tuning_ms']}) |")
    if a.json:
        from tracearray.gpu import driver
        device = driver.get_device()
        Path(a.json).write_text(json.dumps({"device": getattr(device, "name", "?"),
                                            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
                                            "size": a.size, "rows": rows}, indent=1))
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
