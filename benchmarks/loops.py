#!/usr/bin/env python3
"""Time-stepping loops (Python loops the trace unrolls): tracearray against NumPy on the CPU.

    python benchmarks/loops.py [--steps-scale 1.0] [--repeat 5] [--json out.json]

Workloads, each a plain NumPy function with a ``for`` loop over steps:
  * heat: 200 explicit steps of the 2-d heat equation on a 256 x 256 grid, written the way
    NumPy code writes it (``u = u.copy(); u[1:-1, 1:-1] = ...`` of four shifted slices);
  * wave: 100 steps of a periodic 2-d wave equation (``np.roll`` Laplacian), 256 x 256;
  * nbody: 50 steps of 300 bodies in 3-d (pairwise differences, a softened inverse cube,
    velocity and position updates);
  * sgd: 100 steps of least-squares gradient descent on a 2000 x 20 design matrix;
  * ema: an exponential moving average written element by element over 500 values;
  * step_sums: a 4-element sum per step over 256 steps (``out[t] = rets[t].sum()``);
  * orbit: 2000 leapfrog steps of a 2-d orbit with a norm per step;
  * seidel: a Gauss-Seidel sweep of a 30 x 30 grid, row updates then element updates.

What a user sees: the first call in a process with an empty kernel cache (trace, plan,
compile, run), the compiles it needed (``cache_info``: identical steps share code), and warm
calls against NumPy's (medians of ``--repeat``, after a warm-up). Results are checked against
NumPy (allclose) before timing.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time

import numpy as np

SCALE = 1.0


def heat(u):
    for _ in range(int(200 * SCALE)):
        u = u.copy()
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] +
                                               u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def wave(u, v):
    for _ in range(int(100 * SCALE)):
        lap = np.roll(u, 1, 0) + np.roll(u, -1, 0) + np.roll(u, 1, 1) + np.roll(u, -1, 1) - 4 * u
        v = v + 0.1 * lap
        u = u + 0.1 * v
    return u


def nbody(p, v):
    for _ in range(int(50 * SCALE)):
        d = p[:, None, :] - p[None, :, :]
        r = np.sqrt((d ** 2).sum(-1) + 0.01)
        a = -(d / r[..., None] ** 3).sum(1)
        v = v + 0.01 * a
        p = p + 0.01 * v
    return p


def sgd(X, y):
    w = np.zeros(X.shape[1])
    for _ in range(int(100 * SCALE)):
        w = w - 0.01 * X.T @ (X @ w - y) / len(y)
    return w


def ema(x):
    out = np.empty_like(x)
    out[0] = x[0]
    for i in range(1, len(x)):
        out[i] = 0.3 * x[i] + 0.7 * out[i - 1]
    return out


def step_sums(rets):
    out = np.ones(len(rets))
    for t in range(len(rets)):          # a small reduction per step
        out[t] = rets[t].sum()
    return out


def orbit(r, v):
    traj = np.empty((int(2000 * SCALE), 2))
    for i in range(len(traj)):          # a leapfrog step with a norm per step
        a = -r / np.linalg.norm(r) ** 3
        v = v + a * 1e-3
        r = r + v * 1e-3
        traj[i] = r
    return traj


def seidel(a):
    a = a.copy()
    n = a.shape[0]
    for i in range(1, n - 1):           # a Gauss-Seidel sweep: rows, then elements in turn
        a[i, 1:-1] += a[i - 1, :-2] + a[i - 1, 2:] + a[i + 1, :-2] + a[i + 1, 2:]
        for j in range(1, n - 1):
            a[i, j] += a[i, j - 1]
            a[i, j] /= 9.0
    return a


def inputs(rng: np.random.Generator) -> dict:
    u = rng.random((256, 256))
    return {"heat": (heat, (u,)), "wave": (wave, (u, np.zeros_like(u))),
            "nbody": (nbody, (rng.random((300, 3)), np.zeros((300, 3)))),
            "sgd": (sgd, (rng.random((2000, 20)), rng.random(2000))),
            "ema": (ema, (rng.random(500),)),
            "step_sums": (step_sums, (rng.random((max(int(256 * SCALE), 2), 4)),)),
            "orbit": (orbit, (np.array([1.0, 0.0]), np.array([0.0, 1.0]))),
            "seidel": (seidel, (rng.random((max(int(30 * SCALE), 3),) * 2),))}


def _median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


def main(argv: list[str] | None = None) -> int:
    global SCALE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps-scale", type=float, default=1.0,
                    help="multiply every loop's step count (smoke runs: 0.05)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", dest="json_out")
    a = ap.parse_args(argv)
    SCALE = a.steps_scale
    # an empty kernel cache: the first call compiles what it needs
    os.environ["TRACEARRAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracearray-loops-")
    import tracearray
    rows, failed = [], False
    print("| workload | first call s | compiles | tracearray ms | NumPy ms | NumPy / tracearray |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (fn, args) in inputs(np.random.default_rng(0)).items():
        f = tracearray.compile(fn, device="cpu")
        t = time.perf_counter()
        got = f(*args)
        first = time.perf_counter() - t
        ok = bool(np.allclose(got, fn(*args), rtol=1e-9, atol=1e-12))
        failed |= not ok
        ta = _median_ms(lambda: f(*args), a.repeat)
        ref = _median_ms(lambda: fn(*args), a.repeat)
        info = f.cache_info()
        rows.append({"workload": name, "first_call_s": round(first, 3),
                     "compiles": info.compiles, "tracearray_ms": round(ta, 3),
                     "numpy_ms": round(ref, 3), "ok": ok})
        print(f"| {name}{'' if ok else ' (FAIL)'} | {first:.2f} | {info.compiles} | {ta:.2f} | "
              f"{ref:.2f} | {ref / ta:.2f} |", flush=True)
    if a.json_out:
        with open(a.json_out, "w") as fh:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "machine": platform.node(), "cpus": os.cpu_count(),
                       "numpy": np.__version__, "steps_scale": SCALE, "rows": rows}, fh,
                      indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
