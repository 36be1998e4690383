"""argmax / argmin on the CPU: tracearray against NumPy (rows and an outer axis).

    python benchmarks/arg_reductions.py [--repeat 30] [--json out.json]

Every result is checked against NumPy's (exactly) before timing; times are the minimum of
``--repeat`` calls, in ms. The shapes are those issue 17 measured ((4096, 1024), (65536, 64))
and a column reduction ((8192, 256) along axis 0).
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

import tracearray

CASES = [("argmax rows", (4096, 1024), lambda a: np.argmax(a, axis=1)),
         ("argmin rows", (4096, 1024), lambda a: np.argmin(a, axis=1)),
         ("argmax short rows", (65536, 64), lambda a: np.argmax(a, axis=1)),
         ("argmin axis 0", (8192, 256), lambda a: np.argmin(a, axis=0))]


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'case':<20} {'shape':<14} {'numpy ms':>9} {'tracearray ms':>14} {'speedup':>8}")
    for name, shape, fn in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        f = tracearray.compile(fn, device="cpu")
        np.testing.assert_array_equal(f(x), fn(x))
        t_np, t_ta = best(lambda: fn(x), args.repeat), best(lambda: f(x), args.repeat)
        rows.append({"case": name, "shape": list(shape), "numpy_ms": t_np, "tracearray_ms": t_ta})
        print(f"{name:<20} {str(shape):<14} {t_np:9.3f} {t_ta:14.3f} {t_np / t_ta:7.2f}x")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"machine": platform.processor() or platform.machine(),
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
