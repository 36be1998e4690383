#!/usr/bin/env python3
"""CPU benchmark: tracearray against NumPy, numexpr, numba and jax.jit on the public workloads.

    python benchmarks/cpu.py [--size cpu|check] [--repeat N] [--only a,b] [--json out.json]
                             [--numba-python PATH] [--jax-python PATH] [--threads N]

Workloads: the 13 public ones and ``W.CPU_EXTRAS`` (argmax / argmin along the rows of a
(4096, 1024) float32 matrix, issue 17).  For each, in one process and on the same inputs:
NumPy (the workload's own source), numexpr (where expressible), numba prange loops (when numba is importable here, or in the
interpreter given by --numba-python / $TRACEARRAY_NUMBA_PYTHON), ``jax.jit`` of the source with
``np`` as ``jax.numpy`` on JAX's CPU backend (likewise: importable here, or --jax-python /
$TRACEARRAY_JAX_PYTHON), and ``tracearray.compile(fn)``.

Method, and why:
  * Every result is checked against a float64 NumPy reference (relative 2-norm error, a
    per-workload tolerance) and its dtypes against NumPy's; a miss prints FAIL loudly, and a
    fast wrong answer never counts as a speedup.
  * tracearray's first call (trace + compile + run) is timed on its own as "cold"; the other
    frameworks' first calls (numba's JIT, numexpr's parse) are recorded in the JSON.
  * After warm-up, the frameworks take turns, the order rotated every round, for --repeat
    rounds; each turn comes after a pause (--settle, 0.15 s) that lets the previous framework's
    spinning threads (numba's OpenMP, OpenBLAS) go idle; a turn is --burst calls (6), only the
    last timed, so that the timed call is past the slow calls that follow any pause on this
    VM (interleaved_times); each reports the median.  The 2-core machine is shared and
    noisy: interleaving spreads the noise over all frameworks, so the ratios in one run are what to
    compare, not absolute times across runs.
  * OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, set on some machines for old OpenBLAS builds, slow
    NumPy's current OpenBLAS (forcing the core type made the 1024^3 matmul 1.4-10x slower
    here).  When present they are removed for this process only (by re-executing it), unless
    --keep-openblas-env; the OpenBLAS kernel actually used is recorded.

Verdicts printed at the end (the targets of the CPU issues): geomean speedup over NumPy >= 3x,
no workload slower than NumPy, no workload slower than 1.2x the numba loops, and (issue 17) no
workload slower than any CPU peer: NumPy, numexpr, numba or jax.jit.
Exit status 1 if any result is wrong or any framework raised (or, with --strict, if a verdict
fails).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` and `tracearray` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import baselines as B  # noqa: E402
from benchmarks import workloads as W  # noqa: E402

FRAMEWORKS = ("numpy", "numexpr", "numba", "jax.jit", "tracearray")
PEERS = FRAMEWORKS[:-1]
TARGET_GEOMEAN_VS_NUMPY = 3.0
TARGET_MIN_VS_NUMPY = 1.0
TARGET_MAX_SLOWDOWN_VS_NUMBA = 1.2
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
REMOVED_MARK = "TRACEARRAY_BENCH_REMOVED_OPENBLAS_ENV"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "NUMEXPR_MAX_THREADS", "NUMBA_NUM_THREADS", "TRACEARRAY_NUM_THREADS")


# ======================================================================================
# Command line and process environment
# ======================================================================================

def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="cpu", choices=W.SIZES)
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds per workload (median)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds after the first call")
    ap.add_argument("--settle", type=float, default=0.15,
                    help="seconds of sleep before each framework's visit, so that the previous "
                         "framework's spinning threads are idle (see interleaved_times)")
    ap.add_argument("--burst", type=int, default=6,
                    help="calls per visit, the last one timed (2: the second call after the "
                         "pause, this harness's method until 2026-12-06; see interleaved_times)")
    ap.add_argument("--only", default=None, help="comma-separated workload names")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", default=None, help="write the results here")
    ap.add_argument("--numba-python", default=None,
                    help=f"interpreter with numba for the numba baselines (default: "
                         f"${B.NUMBA_PYTHON_ENV}, else numba in this process if importable)")
    ap.add_argument("--no-numba", action="store_true", help="skip the numba baselines")
    ap.add_argument("--jax-python", default=None,
                    help=f"interpreter with jax and jaxlib for the jax.jit baselines (default: "
                         f"${B.JAX_PYTHON_ENV}, else jax in this process if importable)")
    ap.add_argument("--no-jax", action="store_true", help="skip the jax.jit baselines")
    ap.add_argument("--threads", type=int, default=None,
                    help="thread count for OpenMP/OpenBLAS/numexpr/numba/tracearray "
                         "(default: each library's own, all cores here)")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="do not remove OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for the benchmark")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target verdict fails")
    args = ap.parse_args(argv)
    args.names = args.only.split(",") if args.only else W.cpu_names()
    for name in args.names:
        W.get(name)  # fail early on a typo
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.burst < 1:
        ap.error("--burst must be >= 1")
    return args


def benchmark_env(args: argparse.Namespace) -> Optional[Dict[str, str]]:
    """The environment this benchmark must run under, or None if the current one is it.

    Both settings are read by native libraries when they load, so they can only be changed
    by starting the process again (see reexec_if_needed)."""
    env = dict(os.environ)
    if not args.keep_openblas_env:
        removed = {k: env.pop(k) for k in OPENBLAS_VARS if k in env}
        if removed:
            env[REMOVED_MARK] = json.dumps(removed)
    if args.threads:
        for var in THREAD_VARS:
            env[var] = str(args.threads)
    return None if env == dict(os.environ) else env


def reexec_if_needed(args: argparse.Namespace, argv: List[str]) -> None:
    env = benchmark_env(args)
    if env is not None:
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], env)


# ======================================================================================
# Machine description
# ======================================================================================

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def openblas_info() -> dict:
    """Which OpenBLAS NumPy loaded, the kernel (core) it picked and its thread count."""
    np.ones(2) @ np.ones(2)  # make sure BLAS is loaded
    info: dict = {}
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln})
    except OSError:
        paths = []
    for path in paths:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""), ("openblas_", "")):
            fn = getattr(lib, f"{prefix}get_corename{suffix}", None)
            if fn is None:
                continue
            fn.restype = ctypes.c_char_p
            info.update(library=os.path.basename(path), core=fn().decode())
            cfg = getattr(lib, f"{prefix}get_config{suffix}", None)
            if cfg is not None:
                cfg.restype = ctypes.c_char_p
                info["config"] = cfg().decode()
            threads = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if threads is not None:
                info["threads"] = int(threads())
            break
    for var in OPENBLAS_VARS:
        info[var] = os.environ.get(var)
    if REMOVED_MARK in os.environ:
        info["removed_for_this_benchmark"] = json.loads(os.environ[REMOVED_MARK])
    return info


def git_revision() -> Optional[str]:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def load_average() -> Optional[List[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def busy_fraction(seconds: float = 0.5) -> Optional[float]:
    """Share of all cores busy with other work right now (sampled from /proc/stat while this
    process sleeps), or None where /proc/stat is missing."""
    def sample():
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        return sum(ticks), idle
    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return round(1.0 - (idle1 - idle0) / max(1, total1 - total0), 3)


def machine_info(args: argparse.Namespace, numba_desc: dict, jax_desc: dict) -> dict:
    info = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        load_average_at_start=load_average(), busy_fraction_at_start=busy_fraction(),
        cpu_model=cpu_model(), cpu_count=os.cpu_count(),
        usable_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        platform=platform.platform(), python=platform.python_version(),
        numpy=np.__version__, git=git_revision(),
        threads=dict(requested=args.threads, openblas=None, numexpr=None,
                     numba=numba_desc.get("numba_threads")),
        numba=numba_desc, jax=jax_desc,
    )
    for mod in ("llvmlite", "numexpr", "tracearray"):
        try:
            info[mod] = getattr(__import__(mod), "__version__", "unknown")
        except Exception as e:
            info[mod] = f"unavailable: {type(e).__name__}: {e}"
    try:
        from tracearray.cpu import pool
        info["threads"]["tracearray"] = pool.num_threads()
    except Exception:
        info["threads"]["tracearray"] = None
    if B.numexpr_available():
        import numexpr
        info["threads"]["numexpr"] = numexpr.get_num_threads()
    info["openblas"] = openblas_info()
    info["threads"]["openblas"] = info["openblas"].get("threads")
    return info


# ======================================================================================
# Cells: one framework on one workload
# ======================================================================================

class LocalCell:
    """A framework's implementation called in this process.

    ``make`` builds the callable (for tracearray: ``tracearray.compile``); its cost is part of
    the cold start.  start() makes the first call and a second one, and checks both: a
    compiler may take a different path on the first call (e.g. evaluate while tracing)."""

    def __init__(self, make: Callable[[], Callable], args: list, ref: tuple):
        self.make, self.args, self.ref = make, args, ref
        self.fn: Optional[Callable] = None

    def start(self) -> dict:
        t0 = time.perf_counter()
        self.fn = self.make()
        t1 = time.perf_counter()
        first = self.fn(*self.args)
        t2 = time.perf_counter()
        second = self.fn(*self.args)
        err = max(W.max_rel_err(first, self.ref), W.max_rel_err(second, self.ref))
        dtypes = sorted({str(o.dtype) for o in W.as_outputs(second)})
        return dict(build_s=t1 - t0, first_call_s=t2 - t1, cold_s=t2 - t0, rel_err=err, dtypes=dtypes)

    def time_once(self) -> float:
        args, fn = self.args, self.fn
        t0 = time.perf_counter()
        fn(*args)
        return time.perf_counter() - t0


class RemoteCell:
    """One workload of a baseline (numba, jax.jit) run by its worker in another interpreter."""

    def __init__(self, remote: "B.RemoteWorker", name: str, size: str, seed: int, digest: str):
        self.remote, self.name, self.size, self.seed, self.digest = remote, name, size, seed, digest

    def start(self) -> dict:
        t0 = time.perf_counter()
        r = self.remote.load(self.name, self.size, self.seed)
        if r["digest"] != self.digest:
            raise RuntimeError(f"the {self.remote.kind} worker generated different inputs ({r['digest']} != "
                               f"{self.digest}): its NumPy differs from this one")
        return dict(first_call_s=r["first_call_s"], cold_s=r["first_call_s"],
                    setup_s=time.perf_counter() - t0, rel_err=r["rel_err"], dtypes=r["dtypes"])

    def time_once(self) -> float:
        return self.remote.time_once()


def compile_with_tracearray(fn: Callable) -> Callable:
    import tracearray
    return tracearray.compile(fn)


class BaselineSource:
    """Where one worker-capable baseline (numba, jax.jit) comes from: this process, a worker
    interpreter, or nowhere."""

    def __init__(self, kind: str, python: Optional[str], off: bool, env_var: str):
        remote_class = {"numba": B.RemoteNumba, "jax": B.RemoteJax}[kind]
        importable = {"numba": B.numba_available, "jax": B.jax_available}[kind]
        self.kind = kind
        self.remote: Optional[B.RemoteWorker] = None
        self.local = False
        self.desc: dict = {}
        python = python or os.environ.get(env_var)
        if off:
            self.desc = dict(mode="off", reason=f"--no-{kind}")
        elif python:
            try:
                self.remote = remote_class(python)
                self.desc = dict(self.remote.info, mode="subprocess", interpreter=python)
            except Exception as e:
                self.desc = dict(mode="unavailable", interpreter=python, reason=f"{type(e).__name__}: {e}")
        elif importable():
            self.local = True
            self.desc = dict(B.WORKER_KINDS[kind]["versions"](), mode="in-process",
                             interpreter=sys.executable)
        else:
            self.desc = dict(mode="unavailable", reason=(
                f"{kind} is not importable here; pass --{kind}-python PATH or set {env_var}"))

    @property
    def available(self) -> bool:
        return self.local or self.remote is not None

    def cell(self, w: W.Workload, args: list, ref: tuple, size: str, seed: int, digest: str):
        if self.remote is not None:
            return RemoteCell(self.remote, w.name, size, seed, digest)
        kind = B.WORKER_KINDS[self.kind]
        return LocalCell(lambda: kind["kernels"]()[w.name], kind["prepare"](args), ref)

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()


def baseline_sources(args: argparse.Namespace) -> Dict[str, BaselineSource]:
    """The baselines that may run in another interpreter, by framework name."""
    return {"numba": BaselineSource("numba", args.numba_python, args.no_numba, B.NUMBA_PYTHON_ENV),
            "jax.jit": BaselineSource("jax", args.jax_python, args.no_jax, B.JAX_PYTHON_ENV)}


def make_cells(w: W.Workload, inputs: dict, ref: tuple, size: str, seed: int,
               sources: Dict[str, BaselineSource]) -> Dict[str, object]:
    """The cells to run for one workload, in FRAMEWORKS order (missing baselines left out)."""
    args = [inputs[a.name] for a in w.args]
    cells: Dict[str, object] = {"numpy": LocalCell(lambda: w.fn, args, ref)}
    if w.name in B.NUMEXPR and B.numexpr_available():
        cells["numexpr"] = LocalCell(lambda: B.NUMEXPR[w.name], args, ref)
    for fw, source in sources.items():
        if source.available:
            cells[fw] = source.cell(w, args, ref, size, seed, W.input_digest(inputs))
    cells["tracearray"] = LocalCell(lambda: compile_with_tracearray(w.fn), args, ref)
    return cells


# ======================================================================================
# Timing one workload
# ======================================================================================

def start_cells(w: W.Workload, cells: Dict[str, object], numpy_dtypes: List[str]) -> Dict[str, dict]:
    """First calls and accuracy checks; a cell that raises is reported and not timed."""
    records = {}
    for fw, cell in cells.items():
        rec = dict(workload=w.name, framework=fw, tol=w.tol)
        if fw == "numexpr" and w.name in B.NUMEXPR_HYBRID:
            rec["note"] = B.NUMEXPR_HYBRID[w.name]
        try:
            rec.update(cell.start())
            if fw == "jax.jit" and rec["dtypes"] == ["int32"] and numpy_dtypes == ["int64"]:
                # JAX without x64 (float32 work) has no int64: its indices are int32
                rec["dtypes"], rec["note"] = numpy_dtypes, "int32 indices (JAX's, x64 off)"
            problems = []
            if not rec["rel_err"] <= w.tol:
                problems.append(f"relative error {rec['rel_err']:.2e} > tol {w.tol:.0e}")
            if rec["dtypes"] != numpy_dtypes:
                problems.append(f"output dtypes {rec['dtypes']}, NumPy gives {numpy_dtypes}")
            rec["ok"] = not problems
            if problems:
                rec["failure"] = "; ".join(problems)
        except Exception as e:
            rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:500],
                       traceback=traceback.format_exc(limit=-4))
        records[fw] = rec
    return records


def interleaved_times(cells: Dict[str, object], order: List[str], repeat: int,
                      warmup: int, settle: float = 0.0, burst: int = 2) -> Dict[str, List[float]]:
    """Seconds per call: each round visits every framework once, the order rotated per round.

    A visit is ``burst`` consecutive calls, only the last one timed.  Timing the very first
    call after another framework ran would charge the switch to it (its worker threads
    asleep, its arrays out of cache), which penalises multithreaded runtimes most;
    interleaving the visits still spreads the machine's slow drifts and bursts over all
    frameworks alike.

    ``settle`` seconds of sleep before each visit: thread pools keep spinning after a call
    (numba's OpenMP workers, OpenBLAS's threads: milliseconds to a tenth of a second), and on
    a 2-core machine those spinning threads take a core from whichever framework runs next.
    A user running one framework never meets another one's spinning threads; the pause lets
    them go idle so that no framework is timed against another's leftovers.

    Why ``burst`` is 6 by default (2, the second call after the pause, until 2026-12-06): on
    the development VM (a Firecracker guest whose ``kdamond`` reclaims idle memory) every
    process runs slower for a few calls after any pause, a busy-wait included: NumPy's three
    ``out=`` ufuncs over 4 x 8 MB took 3.4, 2.8, 2.1, 2.1 ms for the first calls after 0.15 s
    and 2.1 in a tight loop; tracearray's ew_chain 3.2, 3.0, 2.0, 1.6, 1.5, 1.5. The second
    call timed that recovery, whose depth differs between frameworks, not the frameworks'
    steady state that a loop of calls sees; the sixth call after the pause is past it."""
    def visit(fw: str) -> float:
        if settle > 0:
            time.sleep(settle)
        for _ in range(burst - 1):
            cells[fw].time_once()
        return cells[fw].time_once()

    for _ in range(warmup):
        for fw in order:
            visit(fw)
    samples: Dict[str, List[float]] = {fw: [] for fw in order}
    for r in range(repeat if order else 0):
        k = r % len(order)
        for fw in order[k:] + order[:k]:
            samples[fw].append(visit(fw))
    return samples


def bench_workload(w: W.Workload, args: argparse.Namespace,
                   sources: Dict[str, BaselineSource]) -> Dict[str, dict]:
    inputs = W.make_inputs(w.name, args.size, args.seed)
    ref = W.reference(w, inputs)
    numpy_dtypes = sorted({str(o.dtype) for o in W.as_outputs(W.run(w, inputs))})
    cells = make_cells(w, inputs, ref, args.size, args.seed, sources)
    records = start_cells(w, cells, numpy_dtypes)
    timeable = [fw for fw in cells if "error" not in records[fw]]
    samples = interleaved_times(cells, timeable, args.repeat, args.warmup, args.settle,
                                args.burst)
    for fw, ts in samples.items():
        ms = [t * 1e3 for t in ts]
        records[fw].update(ms=statistics.median(ms), min_ms=min(ms), max_ms=max(ms), reps=len(ms),
                           GBps=w.bytes(args.size) / statistics.median(ms) / 1e6)
    return records


# ======================================================================================
# Summary: table, geomeans, verdicts
# ======================================================================================

def geomean(xs: List[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def good_ms(rec: Optional[dict]) -> Optional[float]:
    """The median time of a correct result, else None (a wrong answer is never a speedup)."""
    return rec["ms"] if rec and rec.get("ok") and "ms" in rec else None


def speedups(results: Dict[str, Dict[str, dict]], fw: str, base: str) -> Dict[str, float]:
    """base time / fw time per workload where both are correct."""
    out = {}
    for name, recs in results.items():
        a, b = good_ms(recs.get(fw)), good_ms(recs.get(base))
        if a and b:
            out[name] = b / a
    return out


def fmt_ms(rec: Optional[dict]) -> str:
    if rec is None:
        return "—"
    if "error" in rec:
        return "error"
    ms = rec["ms"]
    s = f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"
    return s if rec["ok"] else s + " FAIL"


def best_peer(recs: Dict[str, dict]) -> Optional[str]:
    """The fastest peer with a correct result on one workload, or None."""
    timed = [(good_ms(recs.get(fw)), fw) for fw in PEERS if good_ms(recs.get(fw))]
    return min(timed)[1] if timed else None


def speedups_vs_best_peer(results: Dict[str, Dict[str, dict]]) -> Dict[str, tuple]:
    """workload -> (best peer's time / tracearray's time, that peer), where both are correct."""
    out = {}
    for name, recs in results.items():
        peer, ta = best_peer(recs), good_ms(recs.get("tracearray"))
        if peer and ta:
            out[name] = (good_ms(recs[peer]) / ta, peer)
    return out


def markdown_table(results: Dict[str, Dict[str, dict]], size: str) -> str:
    vs = {fw: speedups(results, "tracearray", fw) for fw in ("numpy", "numba", "jax.jit")}
    vs_best = speedups_vs_best_peer(results)
    lines = [f"ms per call (median), `{size}` size; speedup = other's time / tracearray's time",
             "",
             "| workload | numpy | numexpr | numba | jax.jit | tracearray | tracearray cold (s) "
             "| speedup vs numpy | vs numba | vs jax.jit | vs best peer |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, recs in results.items():
        ta = recs.get("tracearray") or {}
        cold = f"{ta['cold_s']:.2f}" if "cold_s" in ta else "—"
        sp = " | ".join(fmt_x(vs[fw].get(name, math.nan)) for fw in vs)
        best = f"{fmt_x(vs_best[name][0])} ({vs_best[name][1]})" if name in vs_best else "—"
        cols = " | ".join(fmt_ms(recs.get(fw)) for fw in FRAMEWORKS)
        lines.append(f"| {name} | {cols} | {cold} | {sp} | {best} |")
    gm = {fw: geomean(list(speedups(results, fw, "numpy").values())) for fw in FRAMEWORKS[1:]}
    gm_cells = " | ".join(fmt_x(gm[fw]) for fw in FRAMEWORKS[1:])
    gm_vs = " | ".join(fmt_x(geomean(list(vs[fw].values()))) for fw in vs)
    gm_best = fmt_x(geomean([r for r, _ in vs_best.values()]))
    lines.append(f"| **geomean speedup vs numpy** | 1× | {gm_cells} | | {gm_vs} | {gm_best} |")
    return "\n".join(lines)


def fmt_x(ratio: float) -> str:
    return "—" if math.isnan(ratio) else f"{ratio:.2f}×"


def verdicts(results: Dict[str, Dict[str, dict]], numba_available: bool) -> List[dict]:
    """The three targets of the CPU issue, each with PASS/FAIL and the workloads that miss."""
    names = list(results)
    vs_np = speedups(results, "tracearray", "numpy")
    vs_nb = speedups(results, "tracearray", "numba")
    broken = [n for n in names if n not in vs_np]   # tracearray wrong, raised, or not run
    total = len(W.cpu_names())
    scope = "" if len(names) == total else f" (on {len(names)} of {total} workloads)"
    out = []
    not_run = [f"no correct tracearray result for {', '.join(broken)}"] if broken else []

    gm = geomean(list(vs_np.values()))
    parts = [f"geomean {gm:.2f}× over {len(vs_np)} workloads"] if vs_np else []
    out.append(dict(target=f"geomean speedup vs NumPy >= {TARGET_GEOMEAN_VS_NUMPY:g}×{scope}",
                    passed=not broken and gm >= TARGET_GEOMEAN_VS_NUMPY,
                    value=None if math.isnan(gm) else gm, detail="; ".join(parts + not_run)))

    slow = [f"{n} {s:.2f}×" for n, s in vs_np.items() if s < TARGET_MIN_VS_NUMPY]
    parts = ["slower: " + ", ".join(slow) if slow else f"none of {len(vs_np)} slower"] if vs_np else []
    out.append(dict(target=f"no workload slower than NumPy{scope}", passed=not broken and not slow,
                    value=min(vs_np.values()) if vs_np else None,
                    detail="; ".join(parts + not_run)))

    target = f"every workload within {TARGET_MAX_SLOWDOWN_VS_NUMBA:g}× of the numba loops{scope}"
    if not numba_available:
        out.append(dict(target=target, passed=None, value=None,
                        detail="NOT MEASURED: numba unavailable (see --numba-python)"))
    else:
        floor = 1.0 / TARGET_MAX_SLOWDOWN_VS_NUMBA
        slow = [f"{n} {1 / s:.2f}× numba's time" for n, s in vs_nb.items() if s < floor]
        missing = [n for n in names if n not in vs_nb]
        parts = ["too slow: " + ", ".join(slow) if slow else f"all {len(vs_nb)} within"] if vs_nb else []
        if missing:
            parts.append(f"no correct tracearray and numba pair for {', '.join(missing)}")
        out.append(dict(target=target, passed=not slow and not missing, detail="; ".join(parts),
                        value=min(vs_nb.values()) if vs_nb else None))

    vs_best = speedups_vs_best_peer(results)
    peers = [fw for fw in PEERS if any(fw in recs for recs in results.values())]
    slow = [f"{n} {s:.2f}× ({peer})" for n, (s, peer) in vs_best.items() if s < 1.0]
    parts = ["behind: " + ", ".join(slow) if slow else f"ahead on all {len(vs_best)}"] if vs_best else []
    out.append(dict(target=f"no workload slower than any CPU peer measured "
                           f"({', '.join(peers)}){scope}",
                    passed=not broken and not slow and bool(vs_best),
                    value=min((s for s, _ in vs_best.values()), default=None),
                    detail="; ".join(parts + not_run)))
    return out


def failures(results: Dict[str, Dict[str, dict]]) -> List[str]:
    lines = []
    for name, recs in results.items():
        for fw, rec in recs.items():
            if "error" in rec:
                lines.append(f"{fw} / {name}: raised {rec['error']}")
            elif not rec["ok"]:
                lines.append(f"{fw} / {name}: {rec['failure']}")
    return lines


# ======================================================================================
# Main
# ======================================================================================

def progress_line(name: str, recs: Dict[str, dict]) -> str:
    parts = []
    for fw in FRAMEWORKS:
        if fw in recs:
            rec = recs[fw]
            parts.append(f"{fw} {'error' if 'error' in rec else fmt_ms(rec) + ' ms'}")
    return f"{name:14s} " + " | ".join(parts)


def warn_if_busy(info: dict) -> None:
    """Say so when other work is running: it slows multithreaded code (numba, tracearray) far
    more than single-threaded NumPy, since a parallel loop waits for its slowest thread."""
    busy = info.get("busy_fraction_at_start")
    if busy is not None and busy > 0.2:
        print(f"!!! machine busy: {busy:.0%} of the cores were in use by other work when the "
              f"benchmark started; multithreaded frameworks' ratios to NumPy will be pessimistic",
              flush=True)


def run_suite(args: argparse.Namespace,
              sources: Dict[str, BaselineSource]) -> Dict[str, Dict[str, dict]]:
    results = {}
    for name in args.names:
        recs = bench_workload(W.get(name), args, sources)
        results[name] = recs
        print(progress_line(name, recs), flush=True)
        for fw, rec in recs.items():
            if not rec["ok"]:
                why = rec.get("error") or rec.get("failure")
                print(f"    !!! FAIL {fw} / {name}: {why}", flush=True)
    return results


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    reexec_if_needed(args, argv)

    sources = baseline_sources(args)
    numba, jax = sources["numba"], sources["jax.jit"]
    try:
        info = machine_info(args, numba.desc, jax.desc)
        print(f"# {info['cpu_model']}, {info['usable_cores']} cores; threads {info['threads']}; "
              f"numpy {info['numpy']}, llvmlite {info['llvmlite']}, numexpr {info['numexpr']}, "
              f"numba: {numba.desc.get('mode')} {numba.desc.get('numba', numba.desc.get('reason', ''))}; "
              f"jax: {jax.desc.get('mode')} {jax.desc.get('jax', jax.desc.get('reason', ''))}; "
              f"OpenBLAS core {info['openblas'].get('core')}", flush=True)
        warn_if_busy(info)
        for fw, source in sources.items():
            if source.desc.get("interpreter") and not source.available:
                print(f"!!! {fw} baselines unavailable: {source.desc['reason']}", flush=True)
        results = run_suite(args, sources)
    finally:
        for source in sources.values():
            source.close()

    info["load_average_at_end"] = load_average()
    table = markdown_table(results, args.size)
    checks = verdicts(results, numba.available)
    fails = failures(results)
    print()
    print(table)
    print()
    for v in checks:
        mark = {True: "PASS", False: "FAIL", None: "----"}[v["passed"]]
        print(f"[{mark}] {v['target']}: {v['detail']}")
    if fails:
        print()
        print(f"!!! {len(fails)} FAILED RESULT(S) !!!")
        for line in fails:
            print(f"!!! FAIL {line}")

    if args.json_out:
        doc = dict(suite="tracearray CPU benchmark", size=args.size, repeat=args.repeat,
                   settle_s=args.settle, burst=args.burst, warmup=args.warmup, seed=args.seed,
                   machine=info,
                   workloads={n: dict(shapes=W.get(n).shapes(args.size), bytes=W.get(n).bytes(args.size),
                                      flops=W.get(n).flops(args.size), tol=W.get(n).tol)
                              for n in results},
                   results=[rec for recs in results.values() for rec in recs.values()],
                   verdicts=checks, failures=fails, markdown=table)
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json_out, "w") as f:
            json.dump(doc, f, indent=1, default=str)
        print(f"\nwrote {args.json_out}")

    if fails or (args.strict and not all(v["passed"] for v in checks)):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
