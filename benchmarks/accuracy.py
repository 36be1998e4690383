#!/usr/bin/env python3
"""Accuracy of float reductions: tracearray against NumPy, both against an exact reference.

    python benchmarks/accuracy.py [--device cpu|cuda] [--sizes 20,27] [--json out.json]

For float32 and float64 inputs of 2^20 and 2^27 elements (``--sizes`` takes other powers of
two), the relative error |got - exact| / |exact| of

  * ``x.sum()``, ``x.mean()`` and ``(x * x).sum()`` of uniform [0, 1) values, and
  * ``x.var()`` of the same values offset by 1000 (the mean's error then matters),

computed by NumPy (on the host) and by ``tracearray.compile(..., device=...)``.

The exact references are correctly rounded float64 values from ``math.fsum``, which sums its
float64 operands exactly: the sum of the values (float32 values are exact in float64); the
sum of squares as the fsum of each square's exact two parts (Dekker's product, so float64
squares lose nothing either); the variance as (S2 - S1^2 / n) / n over the deviations
d = x - m from the correctly rounded mean m (each d is exact by Sterbenz's lemma), with
S1 = fsum(d) and S2 the exact fsum of d^2: that is sum((x - mean)^2) / n exactly, up to the
final roundings. Data are drawn from one seed (``--seed``), so every run times the same
values; 2^27 float64 values take 1 GiB, and the exact sums a few seconds each.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from typing import Callable, Dict, List

import numpy as np

OFFSET = 1000.0          # var's data: uniform [0, 1) + OFFSET
CHUNK = 1 << 22          # fsum in chunks of this many terms (bounded temporaries)
SPLIT = 2.0 ** 27 + 1    # Veltkamp's splitter for float64 (two 26-bit halves)

OPS: Dict[str, Callable] = {
    "sum": lambda x: x.sum(),
    "mean": lambda x: x.mean(),
    "var": lambda x: x.var(),
    "(x*x).sum()": lambda x: (x * x).sum(),
}


def parse_args(argv: List[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--sizes", default="20,27", help="comma-separated log2 of the sizes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", default=None, help="write the results here")
    return ap.parse_args(argv)


# ----------------------------------------------------------------------- exact references
def _chunks(x: np.ndarray):
    for i in range(0, x.size, CHUNK):
        yield x[i:i + CHUNK].astype(np.float64)


def _fsum(x: np.ndarray, terms: Callable[[np.ndarray], List[np.ndarray]]) -> float:
    """The correctly rounded sum of every term that ``terms`` makes of each float64 chunk of
    x: one math.fsum over all of them (it is exact until its one final rounding)."""
    return math.fsum(itertools.chain.from_iterable(
        arr for c in _chunks(x) for arr in terms(c)))


def _square_terms(d: np.ndarray) -> List[np.ndarray]:
    """Arrays whose elements sum exactly to sum(d*d): Dekker's product, p + err = d*d."""
    p = d * d
    a = d * SPLIT
    hi = a - (a - d)
    lo = d - hi
    err = ((hi * hi - p) + 2.0 * hi * lo) + lo * lo
    return [p, err]


def exact(op: str, x: np.ndarray) -> float:
    n = x.size
    if op == "sum":
        return _fsum(x, lambda c: [c])
    if op == "mean":
        return _fsum(x, lambda c: [c]) / n
    if op == "(x*x).sum()":
        return _fsum(x, _square_terms)
    if op == "var":
        m = _fsum(x, lambda c: [c]) / n
        s1 = _fsum(x, lambda c: [c - m])
        s2 = _fsum(x, lambda c: _square_terms(c - m))
        return (s2 - s1 * s1 / n) / n
    raise ValueError(op)


# ----------------------------------------------------------------------- measurement
def data(op: str, log2n: int, dtype: np.dtype, seed: int) -> np.ndarray:
    """Uniform [0, 1) values of ``dtype`` (offset by OFFSET for var), the same for a seed."""
    rng = np.random.default_rng([seed, log2n])
    x = rng.random(1 << log2n, dtype=np.float64 if dtype == np.float64 else np.float32)
    if op == "var":
        x += dtype.type(OFFSET)
    return x


def rel_err(got, ref: float) -> float:
    return abs(float(got) - ref) / abs(ref)


def measure(device: str, sizes: List[int], seed: int) -> List[dict]:
    import tracearray
    compiled = {op: tracearray.compile(fn, device=device) for op, fn in OPS.items()}
    rows = []
    for log2n in sizes:
        for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
            for op, fn in OPS.items():
                t0 = time.perf_counter()
                x = data(op, log2n, dtype, seed)
                ref = exact(op, x)
                ours, theirs = compiled[op](x), fn(x)
                assert np.asarray(ours).dtype == np.asarray(theirs).dtype, (op, dtype)
                row = {"op": op, "dtype": dtype.name, "log2n": log2n, "device": device,
                       "exact": ref, "numpy": rel_err(theirs, ref),
                       "tracearray": rel_err(ours, ref)}
                rows.append(row)
                del x
                print(f"  {dtype.name} {op} 2^{log2n}: numpy {row['numpy']:.2e}, "
                      f"tracearray {row['tracearray']:.2e} ({time.perf_counter() - t0:.1f} s)",
                      file=sys.stderr)
    return rows


def table(rows: List[dict]) -> str:
    """Markdown: one row per (dtype, op, size); each relative error also in units of the
    dtype's eps (below about 0.5 eps, the result's own rounding: nothing to choose)."""
    dev = rows[0]["device"] if rows else "cpu"
    out = [f"| dtype | op | n | NumPy | tracearray ({dev}) |", "|---|---|---:|---:|---:|"]

    def cell(err: float, dtype: str) -> str:
        return f"{err:.2e} ({err / float(np.finfo(dtype).eps):.2f} eps)"

    for r in rows:
        out.append(f"| {r['dtype']} | `{r['op']}` | 2^{r['log2n']} | "
                   f"{cell(r['numpy'], r['dtype'])} | {cell(r['tracearray'], r['dtype'])} |")
    return "\n".join(out)


def main(argv: List[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(args.device, sizes, args.seed)
    print(table(rows))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"numpy": np.__version__, "offset": OFFSET, "seed": args.seed,
                       "rows": rows}, f, indent=1)
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
