#!/usr/bin/env python3
"""Dask benchmark: the same NumPy program through plain ``dask.array`` and through tracearray
on Dask, on a ``distributed.LocalCluster`` of worker processes.

    python benchmarks/dask_local.py [--rows N] [--cols N] [--row-chunk N] [--workers N]
                                    [--repeat N] [--only a,b] [--json out.json]

Method:
  * The input is generated on the workers and persisted there (it never crosses to the
    client), float32, ``rows x cols`` in row blocks of ``--row-chunk`` (columns whole).
  * "dask.array" is the program's Python function called on the Dask array: Dask's own
    NumPy-protocol implementation, one Dask task per NumPy operation per chunk (blockwise
    fusion merges chains of them into one task, each still a NumPy call with temporaries).
    "tracearray" is ``tracearray.compile(fn)`` called on the same Dask array: one task per
    chunk per stage, each a fused kernel.
  * A run is ``distributed.wait(result.persist())``: the whole graph built, scheduled and
    computed on the workers, results kept there (no transfer of the output to the client,
    which would time the network, not the computation); reductions' small results are
    fetched. "first" is the first run (for tracearray: tracing on the client, compiling in
    every worker, or loading from the disk cache); the table then reports the median of
    ``--repeat`` interleaved runs.
  * Every result is compared with NumPy on the same data (fetched once): a wrong result
    prints FAIL and exits 1.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


def ew_chain(x):
    return np.tanh(x * 0.5) * x + np.exp(-x * x) * 0.25


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def column_moments(x):
    return x.mean(axis=0), x.std(axis=0), x.max(axis=0)


def column_stats(x):
    return x.mean(axis=0), x.std(axis=0), x.max(axis=0), x.argmin(axis=0)


def standardize(x):
    return (x - x.mean()) / x.std()


PROGRAMS = [ew_chain, softmax, layernorm, column_moments, column_stats, standardize]
TOLERANCE = 2e-4


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1 << 16)
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--row-chunk", type=int, default=1 << 13)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", type=str, default=None, help="programs to run, comma-separated")
    ap.add_argument("--json", type=str, default=None)
    args = ap.parse_args()
    programs = [p for p in PROGRAMS if args.only is None or p.__name__ in args.only.split(",")]

    import dask
    import dask.array as da
    import distributed

    import tracearray

    compiled = {p.__name__: tracearray.compile(p, device="cpu") for p in programs}
    with distributed.LocalCluster(n_workers=args.workers, processes=True,
                                  threads_per_worker=1, dashboard_address=None,
                                  silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        rng = da.random.default_rng(0)
        x = rng.standard_normal((args.rows, args.cols), chunks=(args.row_chunk, args.cols),
                                dtype=np.float32).persist()
        distributed.wait(x)
        data = x.compute()
        rows = []
        failed = False
        for program in programs:
            name = program.__name__
            want = program(data)
            runners = {"dask.array": lambda p=program: p(x),
                       "tracearray": lambda n=name: compiled[n](x)}
            times: dict[str, list[float]] = {k: [] for k in runners}
            first: dict[str, float] = {}
            for k, make in runners.items():
                t0 = time.perf_counter()
                got = dask.compute(*_as_tuple(make()))
                first[k] = time.perf_counter() - t0
                for g, w in zip(got, _as_tuple(want)):
                    err = np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))
                    scale = max(1.0, float(np.max(np.abs(w))))
                    if not err <= TOLERANCE * scale:
                        print(f"FAIL {name} via {k}: max error {err:.3g}", flush=True)
                        failed = True
            for r in range(args.repeat):
                order = list(runners) if r % 2 == 0 else list(reversed(runners))
                for k in order:
                    t0 = time.perf_counter()
                    outs = [o.persist() for o in _as_tuple(runners[k]())]
                    distributed.wait(outs)
                    times[k].append(time.perf_counter() - t0)
                    del outs
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            tasks = {k: _task_count(dask, runners[k](), x) for k in runners}
            rows.append({"program": name, "dask_ms": med["dask.array"],
                         "tracearray_ms": med["tracearray"],
                         "speedup": med["dask.array"] / med["tracearray"],
                         "dask_first_s": first["dask.array"],
                         "tracearray_first_s": first["tracearray"],
                         "dask_tasks": tasks["dask.array"],
                         "tracearray_tasks": tasks["tracearray"]})
            print(f"{name}: dask.array {med['dask.array']:.1f} ms, tracearray "
                  f"{med['tracearray']:.1f} ms", flush=True)
    print()
    print(f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"Python {platform.python_version()}, numpy {np.__version__}, dask "
          f"{dask.__version__}, distributed {distributed.__version__}")
    print(f"- LocalCluster: {args.workers} worker processes x 1 thread; input float32 "
          f"{args.rows} x {args.cols} in row chunks of {args.row_chunk} "
          f"({args.rows // args.row_chunk} chunks, {args.rows * args.cols * 4 / 2**20:.0f} MiB)")
    print()
    print("| program | dask.array (ms) | tracearray on Dask (ms) | speedup | tasks (dask / "
          "tracearray) | first run, s (dask / tracearray) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['program']} | {r['dask_ms']:.1f} | {r['tracearray_ms']:.1f} | "
              f"{r['speedup']:.2f}x | {r['dask_tasks']} / {r['tracearray_tasks']} | "
              f"{r['dask_first_s']:.2f} / {r['tracearray_first_s']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 1 if failed else 0


def _task_count(dask, outs, x) -> int:
    """Tasks of the optimised graph (after Dask's blockwise fusion), the input's aside."""
    graph: dict = {}
    for o in dask.optimize(*_as_tuple(outs)):
        graph.update(dict(o.__dask_graph__()))
    return len(set(graph) - set(dict(x.__dask_graph__())))


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


if __name__ == "__main__":
    sys.exit(main())
