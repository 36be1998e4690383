#!/usr/bin/env python3
"""Dispatch overhead: what a call of a compiled function costs beyond its kernels.

    python benchmarks/overhead.py [--part cpu|gpu|all] [--only a,b] [--json out.json]
                                  [--quick] [--runs N] [--no-warm-calls]

Measured, per workload of ``benchmarks/workloads.py`` (the 13 public ones):

1. **cold first call**: a new process with an empty disk cache (``TRACEARRAY_CACHE_DIR`` a
   fresh folder) imports tracearray, compiles the workload and calls it once (trace, plan,
   LLVM, run); the import is timed apart, and on the GPU so is CUDA's context (created
   before the call: every CUDA framework's first call pays it); byte-code caching is on in
   these processes;
2. **first call in a new process with a warm disk cache**: the same again, in a new process
   on the folder the first one filled (nothing should compile: ``cache_info().compiles`` 0;
   whether ``llvmlite.binding`` was imported is recorded);
3. **recompiles across 20 sizes**: in one process, the workload called at its ``check`` size,
   then at 20 other sizes of its first dimension (no axis becomes or stops being of length 1);
   ``cache_info()`` says how many kernels were built for them (target 0) and how many traces
   (the second size checks the size template made at the first; the others are re-derived
   from it: ``stats.resizes``, ``tracearray/templates.py``); the median and minimum cost of
   such a new-size call are reported too;
4. **warm per-call cost** of ``ew_chain`` and ``softmax`` at 16, 1024 and 10^5 elements:
   NumPy's own call of the expression, tracearray's compiled call (NumPy in, NumPy out), and,
   when importable, ``numba.njit`` and ``jax.jit`` (NumPy in; the result waited for), all in
   one process on the same inputs. On the GPU (``--part gpu``, when a GPU is present): on
   device arrays, tracearray (``tracearray.gpu.to_device`` inputs), ``cupy.fuse`` and
   ``torch.compile`` where importable, host time per call of 200 pipelined calls, then one
   wait.

Method: the machine is shared, so the warm costs are the *minimum* over many short batches
(each framework's batches interleaved with the others'), which filters out the intervals in
which another process had the core; the first calls are the minimum (and median) of
``--runs`` processes each. The ratios within one run are what to compare.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:   # run as a script: make `benchmarks` and `tracearray` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import workloads as W  # noqa: E402

WARM_WORKLOADS = ("ew_chain", "softmax")
WARM_SIZES = (16, 1024, 100_000)
NEW_SIZES = 20


# ----------------------------------------------------------------------------- inputs

def inputs_for(w: W.Workload, dims: Dict[str, int], seed: int = 0) -> List[np.ndarray]:
    """Float32 arguments of ``w`` for ``dims``, uniform over each argument's range."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(a.low, a.high, a.shape(dims)).astype(np.float32) for a in w.args]


def grown_dims(w: W.Workload, k: int) -> Dict[str, int]:
    """The check size with the workload's first dimension ``k`` larger."""
    dims = w.dims("check")
    first = next(iter(dims))
    dims[first] += k
    return dims


def warm_shape(name: str, n: int) -> Dict[str, int]:
    """Dims of about ``n`` elements: ew_chain N = n; softmax rows of up to 256."""
    if name == "softmax":
        cols = min(n, 256)
        return {"M": max(n // cols, 1), "N": cols}
    return {"N": n}


# --------------------------------------------------------------------- child processes

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import tracearray
t1 = time.perf_counter()
sys.path.insert(0, {root!r})
from benchmarks import workloads as W
from benchmarks.overhead import inputs_for
w = W.get({name!r})
args = inputs_for(w, w.dims("check"))
f = tracearray.compile(w.fn, device={device!r})
profiler = None
if {profile!r}:
    import cProfile
    profiler = cProfile.Profile()
context_ms = 0.0
if {device!r} == "cuda":   # CUDA's context, which every CUDA framework's first call pays
    tc = time.perf_counter()
    from tracearray.gpu import driver
    driver.get_device()
    context_ms = 1e3 * (time.perf_counter() - tc)
t2 = time.perf_counter()
if profiler is not None:
    profiler.enable()
out = f(*args)
if {device!r} == "cuda":
    W.as_outputs(out)
t3 = time.perf_counter()
if profiler is not None:
    import io, pstats
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
    print(text.getvalue(), file=sys.stderr)
print(json.dumps({{"import_ms": 1e3 * (t1 - t0), "first_call_ms": 1e3 * (t3 - t2),
                  "context_ms": context_ms, "cache_info": list(f.cache_info()),
                  "llvm_loaded": "llvmlite.binding" in sys.modules}}))
"""


def child_first_call(name: str, cache_dir: str, device: str, profile: bool = False) -> dict:
    code = _CHILD.format(root=str(ROOT), name=name, device=device, profile=profile)
    env = {**os.environ, "TRACEARRAY_CACHE_DIR": cache_dir}
    # byte-code caching on, as an installed package has it (without it every new process
    # compiles tracearray's sources again: about 80 ms more)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{name}: child failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if profile:
        result["profile"] = out.stderr
    return result


def profile_first_call(name: str, device: str) -> str:
    """cProfile's top entries of a first call in a new process with a warm disk cache."""
    with tempfile.TemporaryDirectory(prefix="tracearray-overhead-") as folder:
        child_first_call(name, folder, device)
        r = child_first_call(name, folder, device, profile=True)
    return f"{name}: first call {r['first_call_ms']:.1f} ms (profiled)\n{r['profile']}"


def first_calls(name: str, device: str, runs: int) -> dict:
    """Cold first call (empty disk cache) and first call with a warm disk cache, each in a
    new process, ``runs`` times: the minimum (the run least disturbed by other processes on a
    shared machine) and the median of each."""
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="tracearray-overhead-") as folder:
            cold.append(child_first_call(name, folder, device))
            warm.append(child_first_call(name, folder, device))
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    low = lambda rs, k: min(r[k] for r in rs)  # noqa: E731
    return {"cold_first_call_ms": low(cold, "first_call_ms"),
            "warm_disk_first_call_ms": low(warm, "first_call_ms"),
            "cold_first_call_median_ms": med(cold, "first_call_ms"),
            "warm_disk_first_call_median_ms": med(warm, "first_call_ms"),
            "runs": runs,
            "import_ms": med(cold + warm, "import_ms"),
            "context_ms": med(cold + warm, "context_ms"),
            "cold_cache_info": cold[-1]["cache_info"],
            "warm_disk_cache_info": warm[-1]["cache_info"],
            "warm_disk_llvm_loaded": any(r.get("llvm_loaded", True) for r in warm)}


# ------------------------------------------------------------------------- new sizes

def profile_new_sizes(name: str, device: str) -> str:
    """cProfile's top entries (own time, then cumulative) over the 20 new sizes of
    ``new_sizes``, in this process: where a new size's time goes, driver calls included."""
    import cProfile
    import io
    import pstats
    profiler = cProfile.Profile()
    new_sizes(name, device, profiler)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    return f"{name}: {NEW_SIZES} new sizes (profiled)\n{text.getvalue()}"


def new_sizes(name: str, device: str, profiler: Any = None) -> dict:
    """20 new sizes of a workload in one process (``profiler``: a cProfile profile enabled
    around the calls only)."""
    import tracearray
    w = W.get(name)
    f = tracearray.compile(w.fn, device=device)
    f(*inputs_for(w, w.dims("check")))
    before, resizes = f.cache_info(), f.stats.resizes
    times = []
    for k in range(1, NEW_SIZES + 1):
        args = inputs_for(w, grown_dims(w, k), seed=k)
        if profiler is not None:
            profiler.enable()
        t = time.perf_counter()
        W.as_outputs(f(*args))
        times.append(time.perf_counter() - t)
        if profiler is not None:
            profiler.disable()
    after = f.cache_info()
    return {"sizes": NEW_SIZES, "traces": after.traces - before.traces,
            "resizes": f.stats.resizes - resizes,
            "recompiles": (after.compiles + after.disk_hits)
            - (before.compiles + before.disk_hits),
            "new_size_call_ms": 1e3 * statistics.median(times),
            "new_size_call_min_ms": 1e3 * min(times)}


# ----------------------------------------------------------------------- warm calls

def min_per_call(cells: Dict[str, Callable[[], Any]], batch: int, rounds: int
                 ) -> Dict[str, float]:
    """Microseconds per call of each cell: the minimum over ``rounds`` batches of ``batch``
    calls, the cells' batches interleaved."""
    best = {k: float("inf") for k in cells}
    for fn in cells.values():
        fn()
    for _ in range(rounds):
        for k, fn in cells.items():
            t = time.perf_counter_ns()
            for _ in range(batch):
                fn()
            best[k] = min(best[k], (time.perf_counter_ns() - t) / batch / 1e3)
    return best


def _numba_softmax():
    import numba

    @numba.njit(cache=False)
    def softmax(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            m = x[i, 0]
            for j in range(1, x.shape[1]):
                m = max(m, x[i, j])
            s = np.float32(0.0)
            for j in range(x.shape[1]):
                out[i, j] = np.exp(x[i, j] - m)
                s += out[i, j]
            for j in range(x.shape[1]):
                out[i, j] /= s
        return out
    return softmax


def cpu_cells(name: str, args: List[np.ndarray]) -> Dict[str, Callable[[], Any]]:
    import tracearray
    w = W.get(name)
    compiled = tracearray.compile(w.fn)
    cells: Dict[str, Callable[[], Any]] = {
        "numpy": lambda: w.fn(*args),
        "tracearray": lambda: compiled(*args),
    }
    try:
        import numba
        nb = numba.njit(w.fn) if name == "ew_chain" else _numba_softmax()
        cells["numba"] = lambda: nb(*args)
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp
        jitted = jax.jit(_with_namespace(w.fn, jnp))
        cells["jax.jit"] = lambda: jax.block_until_ready(jitted(*args))
    except ImportError:
        pass
    return cells


def _with_namespace(fn: Callable, namespace: Any) -> Callable:
    """``fn`` with its ``np`` global bound to another array namespace (jax.numpy, cupy)."""
    import types
    return types.FunctionType(fn.__code__, {**fn.__globals__, "np": namespace}, fn.__name__)


def warm_cpu(only: List[str], quick: bool) -> Dict[str, Dict[str, dict]]:
    out: Dict[str, Dict[str, dict]] = {}
    for name in WARM_WORKLOADS:
        if only and name not in only:
            continue
        w = W.get(name)
        out[name] = {}
        for n in WARM_SIZES:
            dims = warm_shape(name, n)
            args = inputs_for(w, dims)
            cells = cpu_cells(name, args)
            small = n <= 10_000
            batch, rounds = (200, 40 if quick else 150) if small else (5, 10 if quick else 40)
            us = min_per_call(cells, batch, rounds)
            out[name][str(n)] = {"shape": [list(a.shape) for a in args], "us": us}
            print(f"  warm {name:9s} {n:>7d}: " + "  ".join(
                f"{k} {v:8.2f} us" for k, v in us.items()), flush=True)
    return out


def warm_gpu(only: List[str], quick: bool) -> Dict[str, Dict[str, dict]]:
    """Host time per call of pipelined calls on device arrays (one wait per batch)."""
    import tracearray
    from tracearray import gpu
    out: Dict[str, Dict[str, dict]] = {}
    for name in WARM_WORKLOADS:
        if only and name not in only:
            continue
        w = W.get(name)
        out[name] = {}
        for n in WARM_SIZES:
            args = inputs_for(w, warm_shape(name, n))
            cells: Dict[str, Callable[[], Any]] = {}
            dev_args = [gpu.to_device(a) for a in args]
            compiled = tracearray.compile(w.fn, device="cuda")
            event = gpu.Event

            def ta_batch(compiled=compiled, dev_args=dev_args):
                compiled(*dev_args)
            cells["tracearray"] = ta_batch
            sync: Dict[str, Callable[[], None]] = {"tracearray": lambda: _event_wait(event)}
            # NumPy in and out (each call copies its inputs in, waits for its results)
            def ta_numpy(compiled=compiled, args=args):
                W.as_outputs(compiled(*args))
            cells["tracearray NumPy in/out"] = ta_numpy
            sync["tracearray NumPy in/out"] = lambda: None
            try:
                import cupy
                cargs = [cupy.asarray(a) for a in args]
                fused = cupy.fuse(_with_namespace(w.fn, cupy)) if name == "ew_chain" else \
                    _with_namespace(w.fn, cupy)
                cells["cupy.fuse" if name == "ew_chain" else "cupy"] = lambda: fused(*cargs)
                sync["cupy.fuse" if name == "ew_chain" else "cupy"] = \
                    lambda: cupy.cuda.get_current_stream().synchronize()
            except ImportError:
                pass
            try:
                import torch
                targs = [torch.from_numpy(a).cuda() for a in args]
                tfn = torch.compile(_TORCH[name])
                cells["torch.compile"] = lambda: tfn(*targs)
                sync["torch.compile"] = torch.cuda.synchronize
            except ImportError:
                pass
            batch, rounds = 200, (10 if quick else 30)
            best = {k: float("inf") for k in cells}
            for k, fn in cells.items():
                for _ in range(3):
                    fn()
                sync[k]()
            for _ in range(rounds):
                for k, fn in cells.items():
                    t = time.perf_counter_ns()
                    for _ in range(batch):
                        fn()
                    host = time.perf_counter_ns() - t
                    sync[k]()
                    best[k] = min(best[k], host / batch / 1e3)
            out[name][str(n)] = {"shape": [list(a.shape) for a in args], "us": best}
            print(f"  gpu warm {name:9s} {n:>7d}: " + "  ".join(
                f"{k} {v:8.2f} us" for k, v in best.items()), flush=True)
    return out


def _event_wait(event_type: Any) -> None:
    ev = event_type()
    ev.record()
    ev.synchronize()


def _torch_ew_chain(a, b, c, d):
    import torch
    return a * b + c * torch.exp(-d)


def _torch_softmax(x):
    import torch
    e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))
    return e / torch.sum(e, dim=-1, keepdim=True)


_TORCH = {"ew_chain": _torch_ew_chain, "softmax": _torch_softmax}


# ------------------------------------------------------------------------- reporting

def markdown(results: dict) -> str:
    lines = []
    for part in ("cpu", "gpu"):
        res = results.get(part)
        if not res:
            continue
        lines += [f"**{part.upper()}: first calls and new sizes** (ms; new process each; "
                  f"minimum (median) over the runs)", "",
                  "| workload | cold first call | first call, warm disk cache | compiles then "
                  "| LLVM loaded then | new size | recompiles / traces / re-derived over 20 sizes |",
                  "|---|---:|---:|---:|---|---:|---:|"]
        for name, r in res["workloads"].items():
            f, s = r["first_calls"], r["new_sizes"]
            cold_med = f.get("cold_first_call_median_ms", f["cold_first_call_ms"])
            warm_med = f.get("warm_disk_first_call_median_ms", f["warm_disk_first_call_ms"])
            new_min = s.get("new_size_call_min_ms", s["new_size_call_ms"])
            loaded = "yes" if f.get("warm_disk_llvm_loaded", True) else "no"
            lines.append(f"| {name} | {f['cold_first_call_ms']:.1f} ({cold_med:.1f}) | "
                         f"{f['warm_disk_first_call_ms']:.1f} ({warm_med:.1f}) | "
                         f"{f['warm_disk_cache_info'][1]} | {loaded} | "
                         f"{new_min:.2f} ({s['new_size_call_ms']:.2f}) | "
                         f"{s['recompiles']} / {s['traces']} / {s.get('resizes', 0)} |")
        imports = [r["first_calls"]["import_ms"] for r in res["workloads"].values()]
        contexts = [r["first_calls"].get("context_ms", 0.0) for r in res["workloads"].values()]
        if imports:
            ctx = f"; CUDA's context: median {statistics.median(contexts):.0f} ms" \
                if part == "gpu" and contexts else ""
            lines += ["", f"(`import tracearray`: median {statistics.median(imports):.0f} ms"
                          f"{ctx}; not included above)"]
        if not res["warm"]:
            lines.append("")
            continue
        lines += ["", f"**{part.upper()}: warm per-call cost** (us, minimum over batches)", "",
                  "| workload | elements | shape | " + " | ".join(_frameworks(res)) + " |",
                  "|---|---:|---|" + "---:|" * len(_frameworks(res))]
        for name, by_size in res["warm"].items():
            for n, r in by_size.items():
                cells = " | ".join(f"{r['us'][k]:.2f}" if k in r["us"] else "-"
                                   for k in _frameworks(res))
                shape = "x".join(map(str, r["shape"][0]))
                lines.append(f"| {name} | {n} | {shape} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def _frameworks(res: dict) -> List[str]:
    seen: List[str] = []
    for by_size in res["warm"].values():
        for r in by_size.values():
            seen += [k for k in r["us"] if k not in seen]
    return seen


def machine() -> dict:
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         "")
    except OSError:
        pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "cpu": model, "cores": os.cpu_count(),
            "load_average": load}


def run_part(part: str, args: argparse.Namespace) -> dict:
    device = "cpu" if part == "cpu" else "cuda"
    names = [n for n in W.names() if not args.only or n in args.only]
    res: dict = {"workloads": {}, "warm": {}}
    for name in names:
        r = {"first_calls": first_calls(name, device, 1 if args.quick else args.runs),
             "new_sizes": new_sizes(name, device)}
        res["workloads"][name] = r
        f, s = r["first_calls"], r["new_sizes"]
        print(f"  {part} {name:13s} cold {f['cold_first_call_ms']:7.1f} ms   warm disk "
              f"{f['warm_disk_first_call_ms']:6.1f} ms   new size "
              f"{s['new_size_call_ms']:6.2f} ms   recompiles {s['recompiles']}/{s['sizes']}",
              flush=True)
    if args.no_warm_calls:
        res["warm"] = {}
    else:
        res["warm"] = warm_cpu(args.only, args.quick) if part == "cpu" else \
            warm_gpu(args.only, args.quick)
    return res


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("cpu", "gpu", "all"), default="cpu")
    p.add_argument("--only", type=lambda s: [x for x in s.split(",") if x], default=[])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--quick", action="store_true", help="fewer processes and rounds")
    p.add_argument("--runs", type=int, default=5,
                   help="new processes per workload for the first calls (minimum and median)")
    p.add_argument("--no-warm-calls", action="store_true",
                   help="first calls and new sizes only (no warm per-call loops)")
    p.add_argument("--profile-first-call", type=lambda s: [x for x in s.split(",") if x],
                   default=[], metavar="NAMES",
                   help="also print a cProfile of these workloads' first calls with a warm "
                        "disk cache (on the --part's device)")
    p.add_argument("--profile-new-sizes", type=lambda s: [x for x in s.split(",") if x],
                   default=[], metavar="NAMES",
                   help="also print a cProfile of these workloads' 20 new sizes")
    args = p.parse_args(argv)
    results: dict = {"machine": machine()}
    parts = ["cpu", "gpu"] if args.part == "all" else [args.part]
    if "gpu" in parts:
        import tracearray.gpu
        if not tracearray.gpu.is_available():
            print("no GPU here: the GPU part is skipped")
            parts.remove("gpu")
    for part in parts:
        results[part] = run_part(part, args)
        for name in args.profile_first_call:
            print(profile_first_call(name, "cpu" if part == "cpu" else "cuda"))
        for name in args.profile_new_sizes:
            print(profile_new_sizes(name, "cpu" if part == "cpu" else "cuda"))
    print()
    print(markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
