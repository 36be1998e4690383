#!/usr/bin/env python3
"""Writes and gathers: tracearray against NumPy on the CPU.

    python benchmarks/writes.py [--n 2048] [--repeat 15] [--json out.json]

Workloads (float64):
  * jacobi_inplace(u): ``u[1:-1, 1:-1] = 0.25 * (4 neighbours)``, the argument updated in
    place (the compiled function writes the caller's array after the call);
  * stencil_new(u): the same into ``np.zeros_like(u)``, returned;
  * masked_zero_sum(x): ``y = x.copy(); y[y < 0] = 0; return y.sum()``;
  * gather(x, idx): ``x[idx] * 2 + 1`` with idx a random permutation's first half;
  * axpy_inplace(a, x, y): ``y += a * x`` on an argument (written in place, no temporary);
  * scatter_add(idx, v): ``np.add.at(zeros(m), idx, v)`` (n*n/4 values into n*n/64 bins);
  * bincount(idx): ``np.bincount(idx, minlength=...)`` (its length a data-dependent size);
  * compact(x): ``x[x > 0] * 2 + 1`` (a traced mask as an array: probe, scan, scatter).

Each is checked against NumPy first (a wrong result prints FAIL and counts as no speedup).
Timing: after a warm-up call, the two frameworks alternate for --repeat rounds (one call each,
fresh copies of in-place arguments made outside the timed region); medians are reported.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import numpy as np

import tracearray


def jacobi_inplace(u):
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def stencil_new(u):
    out = np.zeros_like(u)
    out[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return out


def masked_zero_sum(x):
    y = x.copy()
    y[y < 0] = 0
    return y.sum()


def gather(x, idx):
    return x[idx] * 2 + 1


def axpy_inplace(a, x, y):
    y += a * x


def scatter_add(idx, v):
    out = np.zeros(idx.size // 16)
    np.add.at(out, idx, v)
    return out


def bincount(idx):
    return np.bincount(idx, minlength=idx.size // 16)


def compact(x):
    return x[x > 0] * 2 + 1


def workloads(n: int, rng: np.random.Generator):
    u = rng.standard_normal((n, n))
    x = rng.standard_normal(n * n)
    y = rng.standard_normal(n * n)
    idx = rng.permutation(n * n)[: n * n // 2]
    bins = rng.integers(0, n * n // 64, n * n // 4)
    vals = rng.standard_normal(n * n // 4)
    return [("jacobi_inplace", jacobi_inplace, (u,), True),
            ("stencil_new", stencil_new, (u,), False),
            ("axpy_inplace", axpy_inplace, (np.float64(2.0), x, y), True),
            ("masked_zero_sum", masked_zero_sum, (x,), False),
            ("gather", gather, (x, idx), False),
            ("scatter_add", scatter_add, (bins, vals), False),
            ("bincount", bincount, (bins,), False),
            ("compact", compact, (x,), False)]


def _time(fn, args, inplace: bool) -> float:
    call_args = tuple(a.copy() for a in args) if inplace else args
    t = time.perf_counter()
    fn(*call_args)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows, ok_all = [], True
    for name, fn, inputs, inplace in workloads(args.n, rng):
        compiled = tracearray.compile(fn, device="cpu")
        ref_in = tuple(a.copy() for a in inputs)
        got_in = tuple(a.copy() for a in inputs)
        want = fn(*ref_in)
        t0 = time.perf_counter()
        got = compiled(*got_in)
        cold = time.perf_counter() - t0
        ok = all(np.allclose(g, w) for g, w in zip(got_in, ref_in))
        if want is not None:
            ok = ok and np.allclose(got, want, rtol=1e-9)
        ok_all &= ok
        times = {"numpy": [], "tracearray": []}
        for r in range(args.repeat):
            order = [("numpy", fn), ("tracearray", compiled)]
            for label, f in (order if r % 2 == 0 else order[::-1]):
                times[label].append(_time(f, inputs, inplace))
        med = {k: float(np.median(v)) for k, v in times.items()}
        kernels = len(compiled.lower(*inputs).plan.kernels)
        rows.append({"workload": name, "ok": ok, "numpy_ms": med["numpy"] * 1e3,
                     "tracearray_ms": med["tracearray"] * 1e3,
                     "speedup": med["numpy"] / med["tracearray"], "cold_s": cold,
                     "kernels": kernels})
    print(f"{'workload':18} {'NumPy ms':>10} {'tracearray ms':>14} {'speedup':>8} "
          f"{'kernels':>8}  check")
    for r in rows:
        print(f"{r['workload']:18} {r['numpy_ms']:10.2f} {r['tracearray_ms']:14.2f} "
              f"{r['speedup']:8.2f} {r['kernels']:8d}  {'ok' if r['ok'] else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "machine": platform.processor() or platform.machine(),
                       "n": args.n, "repeat": args.repeat, "rows": rows}, f, indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
