#!/usr/bin/env python3
"""Monte Carlo with random draws inside the compiled function: tracearray against NumPy on the CPU.

    python benchmarks/monte_carlo.py [--n 10000000] [--repeat 9] [--device cpu] [--json out.json]

Workloads (a ``np.random.Generator`` passed in; NumPy draws from it, the compiled function
draws a fresh key from it per call and generates the numbers in its kernels):
  * pi(rng, n): ``4 * mean(x*x + y*y <= 1)`` of two uniform draws;
  * option(rng, n): a European call under Black-Scholes, ``exp(-rT) * mean(max(S_T - K, 0))``
    with ``S_T = S0 exp((r - s^2/2) T + s sqrt(T) z)``, z standard normal;
  * dice(rng, n): the mean of the sum of two dice (``integers(1, 7)``);
  * noise(rng, x): ``x + rng.normal(0, 0.1, x.shape)``, an array returned (bandwidth bound).

The numbers are not NumPy's (divergence random-bit-stream), so each result is checked against
the exact answer instead (pi, the Black-Scholes formula, 7, the noise's mean and standard
deviation), within 5 standard errors, for both frameworks; a failed check prints FAIL.
Timing: after a warm-up call, the two alternate for --repeat rounds; medians are reported.
``--device cuda`` compiles for the GPU (NumPy in, NumPy out: the noise workload copies its
array both ways, the estimates only a scalar back).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import time

import numpy as np

import tracearray

S0, K, R, SIGMA, T = 100.0, 105.0, 0.03, 0.2, 1.0


def pi(rng, like):
    x = rng.random(like.shape)
    y = rng.random(like.shape)
    return 4.0 * ((x * x + y * y) <= 1.0).mean()


def option(rng, like):
    z = rng.standard_normal(like.shape)
    st = S0 * np.exp((R - 0.5 * SIGMA ** 2) * T + SIGMA * math.sqrt(T) * z)
    return math.exp(-R * T) * np.maximum(st - K, 0.0).mean()


def dice(rng, like):
    return (rng.integers(1, 7, like.shape) + rng.integers(1, 7, like.shape)).mean()


def noise(rng, x):
    return x + rng.normal(0.0, 0.1, x.shape)


def _black_scholes_call() -> float:
    d1 = (math.log(S0 / K) + (R + 0.5 * SIGMA ** 2) * T) / (SIGMA * math.sqrt(T))
    d2 = d1 - SIGMA * math.sqrt(T)
    cdf = lambda v: 0.5 * (1.0 + math.erf(v / math.sqrt(2.0)))   # noqa: E731
    return S0 * cdf(d1) - K * math.exp(-R * T) * cdf(d2)


def _checks(n: int):
    """name -> (function of the result: is it within 5 standard errors of the truth)."""
    bs = _black_scholes_call()
    # the payoff's standard deviation is below S0 (a loose, safe bound for the error)
    return {
        "pi": lambda v: abs(v - math.pi) < 5 * math.sqrt(math.pi * (4 - math.pi) / n),
        "option": lambda v: abs(v - bs) < 5 * S0 / math.sqrt(n),
        "dice": lambda v: abs(v - 7.0) < 5 * math.sqrt(35 / 6 / n),
        "noise": lambda v: abs(float(v.mean()) - 1.0) < 5 * 0.1 / math.sqrt(v.size)
        and abs(float(v.std()) - 0.1) < 0.001,
    }


def workloads(n: int):
    like = np.empty(n)
    return [("pi", pi, like), ("option", option, like), ("dice", dice, like),
            ("noise", noise, np.ones(n))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    checks = _checks(args.n)
    rows, ok_all = [], True
    for name, fn, data in workloads(args.n):
        compiled = tracearray.compile(fn, device=args.device)
        rng_np, rng_ta = np.random.default_rng(1), np.random.default_rng(2)
        t0 = time.perf_counter()
        got = compiled(rng_ta, data)
        got = got.numpy() if hasattr(got, "numpy") else got
        cold = time.perf_counter() - t0
        ok = checks[name](got) and checks[name](fn(rng_np, data))
        ok_all &= ok
        times = {"numpy": [], "tracearray": []}
        for r in range(args.repeat):
            order = [("numpy", fn, rng_np), ("tracearray", compiled, rng_ta)]
            for label, f, rng in (order if r % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                f(rng, data)
                times[label].append(time.perf_counter() - t)
        med = {k: float(np.median(v)) for k, v in times.items()}
        kernels = len(compiled.lower(rng_ta, data).plan.kernels)
        rows.append({"workload": name, "ok": bool(ok), "numpy_ms": med["numpy"] * 1e3,
                     "tracearray_ms": med["tracearray"] * 1e3,
                     "speedup": med["numpy"] / med["tracearray"], "cold_s": cold,
                     "kernels": kernels})
    print(f"{'workload':10} {'NumPy ms':>10} {'tracearray ms':>14} {'speedup':>8} "
          f"{'kernels':>8}  check")
    for r in rows:
        print(f"{r['workload']:10} {r['numpy_ms']:10.2f} {r['tracearray_ms']:14.2f} "
              f"{r['speedup']:8.2f} {r['kernels']:8d}  {'ok' if r['ok'] else 'FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "machine": platform.processor() or platform.machine(),
                       "device": args.device, "n": args.n, "repeat": args.repeat,
                       "rows": rows}, f, indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
