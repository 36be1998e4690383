#!/usr/bin/env python3
"""GPU benchmark: tracearray against torch.compile, jax.jit and CuPy on the 13 public workloads.

    python benchmarks/gpu.py [--size gpu|cpu|check] [--workloads a,b] [--repeat N]
                             [--frameworks tracearray,torch.compile,...] [--json out.json]
    python benchmarks/gpu.py --dry-run    # no GPU needed: tracearray on the CPU, check size

In one process and on the same float32 inputs (benchmarks/workloads.py, the ``gpu`` size by
default): ``tracearray.compile(fn, device="cuda")`` on tracearray device arrays, and, when they
import, ``torch.compile``, ``jax.jit``, CuPy eager and ``cupy.fuse`` of the same source, its
``np`` rebound to the framework's namespace (``with_namespace``; for PyTorch a small table of
the NumPy names the workloads use, ``torch_numpy``).  A framework that does not import is
reported as unavailable, one that raises on a workload as "fails", with the reason in the JSON.

Method:
  * The roofline: a 1 GiB device-to-device copy timed like everything else; a workload's
    floor is its minimal bytes (every input read once, every output written once) divided
    by that bandwidth.  "% of floor" is floor / time.
  * Every result is checked against the float64 NumPy reference before it is timed (relative
    2-norm error within the workload's tolerance, float32 outputs); at large sizes on sampled
    rows (matrices: 2048 rows, vectors: 2^20 elements, see ``SAMPLED_ARGS``), the whole of a
    full reduction.  A mismatch prints FAIL and never counts as a time.
  * The first call (compile and run) is timed on the host as the cold start.  Then one
    more call, checked too (a compiler may take another path once warm), and --warmup more.
  * Then --repeat timed calls (fewer when one call is slow: at most --budget seconds per
    cell), each bracketed by CUDA events recorded on the framework's own stream: PyTorch's
    current stream, CuPy's current stream, tracearray's stream (``tracearray.gpu.Event``).
    JAX does not expose its stream: it is timed on the host clock around the call and
    ``block_until_ready`` (the JSON says which timer each framework used).  Medians are
    reported.  Each framework gives its cached device memory back after each cell.
  * A cell reads "fails" when the framework raised (reason below the table and in the JSON),
    "refused: <error>" when tracearray declined the program (an unsupported operation), "—"
    when the framework is unavailable, "skipped" for the cells of ``--skip`` (by default
    ``SKIP_CELLS``: compiles that take minutes).

Exit status 1 when a result is wrong, or tracearray raised on a workload or could not run.
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
import traceback
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

# JAX takes 75% of the GPU's memory when it starts unless told not to; the other frameworks
# in this process need it.  Set before anything imports jax.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` and `tracearray` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import workloads as W  # noqa: E402
from benchmarks.cpu import git_revision  # noqa: E402
from benchmarks.workloads import with_namespace  # noqa: E402

FRAMEWORKS = ("tracearray", "torch.compile", "jax.jit", "cupy", "cupy.fuse")
# Cells not run by default: XLA compiled pairwise_min's (32768, 32768, 3) broadcast for more
# than 5 minutes on the H200 (2026-12-03, jax 0.11.2: "Very slow compile" of
# input_reduce_fusion), which ran the whole suite past its time; cupy.fuse ran it in 5.7 s.
SKIP_CELLS = ("jax.jit:pairwise_min", "cupy.fuse:pairwise_min")
SAMPLED_ROWS = 2048            # rows of a matrix argument checked at large sizes
SAMPLED_ELEMENTS = 1 << 20     # elements of a vector argument checked at large sizes
COPY_BYTES = {"gpu": 1 << 30}  # the copy that measures bandwidth; other sizes: 64 MiB
SMALL_COPY_BYTES = 64 << 20


# ======================================================================================
# The same NumPy source under each framework
# ======================================================================================

def torch_numpy(torch: Any) -> types.ModuleType:
    """The NumPy functions the workloads call, on torch tensors (a module, which torch.compile
    traces through like torch itself)."""
    def reduction(op: Callable) -> Callable:
        def reduce(x, axis=None, keepdims=False):
            if axis is None:
                out = op(x)
                return out.reshape((1,) * x.ndim) if keepdims else out
            return op(x, dim=axis, keepdim=keepdims)
        return reduce

    def maximum(a, b):
        return torch.clamp(a, min=b) if isinstance(b, (int, float)) else torch.maximum(a, b)

    def minimum(a, b):
        return torch.clamp(a, max=b) if isinstance(b, (int, float)) else torch.minimum(a, b)

    ns = types.ModuleType("torch_numpy", "NumPy names on torch tensors (benchmarks/gpu.py)")
    ns.__dict__.update(
        exp=torch.exp, log=torch.log, sqrt=torch.sqrt, tanh=torch.tanh, sin=torch.sin,
        cos=torch.cos, arcsin=torch.asin, abs=torch.abs, where=torch.where,
        maximum=maximum, minimum=minimum, max=reduction(torch.amax), min=reduction(torch.amin),
        sum=reduction(torch.sum), mean=reduction(torch.mean))
    return ns


# ======================================================================================
# Frameworks: arrays on the device, compiling, waiting, timing events
# ======================================================================================

class Unavailable(Exception):
    """A framework that cannot run here (not importable, no GPU)."""


class Framework:
    """How one framework holds arrays on the device, compiles a function and is timed.

    ``event()`` returns an object with ``record() / synchronize() / elapsed_ms(end)`` on the
    framework's own stream; without one to record on (``events`` False) calls are timed on
    the host clock, after waiting for the framework (see ``time_calls``)."""

    name = ""
    namespace: Any = None       # what ``np`` means in the workloads' source (None: NumPy)
    timer = "CUDA events on the framework's own stream"
    events = True
    matmul_precision = "float32"   # --matmul-precision (set_matmul_precision)

    def set_matmul_precision(self, precision: str) -> None:
        """How float32 matrix products may round: "float32" (NumPy's) or "tf32" (TF32
        tensor cores allowed), in the framework's own terms."""
        self.matmul_precision = precision

    def device(self, host: np.ndarray) -> Any:
        raise NotImplementedError

    def host(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def compile(self, fn: Callable) -> Callable:
        raise NotImplementedError

    def copy(self, value: Any) -> Any:
        return value.copy()

    def wait(self, value: Any) -> None:
        """Block until ``value`` (a result) and all queued work is done."""

    def event(self) -> Any:
        raise NotImplementedError

    def refused(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the framework declining the program (not a crash)."""
        return False

    def release(self) -> None:
        """Give cached device memory back (between workloads, for the next framework)."""

    def describe(self) -> dict:
        return {"version": self.version, "timer": self.timer,
                "matmul_precision": self.matmul_precision}


class Tracearray(Framework):
    """``tracearray.compile(fn, device="cuda")`` on ``tracearray.gpu.Array`` inputs."""

    name = "tracearray"
    timer = "CUDA events on tracearray's stream (tracearray.gpu.Event)"

    def __init__(self) -> None:
        import tracearray
        import tracearray.gpu
        from tracearray.errors import ConcretizationError, UnsupportedOperationError
        from tracearray.gpu import driver
        try:
            self.dev = driver.get_device()
        except Exception as e:   # noqa: BLE001 - the reason is the report
            raise Unavailable(f"{type(e).__name__}: {e}") from None
        self.ta, self.gpu = tracearray, tracearray.gpu
        self.refusals = (ConcretizationError, UnsupportedOperationError)
        self.version = tracearray.__version__

    def device(self, host):
        return self.gpu.Array.from_numpy(host)

    def compile(self, fn):
        return self.ta.compile(fn, device="cuda", matmul_precision=self.matmul_precision)

    def wait(self, value):
        self.dev.synchronize()

    def event(self):
        return self.gpu.Event()

    def refused(self, exc):
        return isinstance(exc, self.refusals)

    def release(self):
        # the caching allocator keeps freed blocks (it waits for the stream before freeing);
        # the other frameworks need the memory
        self.dev.allocator.empty_cache()

    def describe(self):
        return dict(super().describe(), device=self.dev.name, sm_count=self.dev.sm_count,
                    compute_capability=list(self.dev.cc), driver_version=self.dev.driver_version)


class TracearrayCPU(Tracearray):
    """The dry run: ``tracearray.compile(fn, device="cpu")`` on NumPy arrays, host clock."""

    name = "tracearray"
    timer = "host clock (dry run on the CPU)"
    events = False

    def __init__(self) -> None:
        import tracearray
        from tracearray.errors import ConcretizationError, UnsupportedOperationError
        self.ta = tracearray
        self.refusals = (ConcretizationError, UnsupportedOperationError)
        self.version = tracearray.__version__

    def device(self, host):
        return host

    def compile(self, fn):
        return self.ta.compile(fn, device="cpu", matmul_precision=self.matmul_precision)

    def wait(self, value):
        pass

    def release(self):
        pass

    def describe(self):
        return dict(Framework.describe(self), device=f"CPU ({platform.machine()})")


class TorchEvent:
    def __init__(self, torch: Any):
        self.ev = torch.cuda.Event(enable_timing=True)

    def record(self) -> None:
        self.ev.record()   # on torch.cuda.current_stream(), where its kernels go

    def synchronize(self) -> None:
        self.ev.synchronize()

    def elapsed_ms(self, end: "TorchEvent") -> float:
        return self.ev.elapsed_time(end.ev)


class TorchCompile(Framework):
    """``torch.compile`` (default mode) of the source on CUDA tensors."""

    name = "torch.compile"
    timer = "CUDA events on torch.cuda.current_stream()"

    def __init__(self) -> None:
        try:
            import torch
        except Exception as e:   # noqa: BLE001
            raise Unavailable(f"{type(e).__name__}: {e}") from None
        if not torch.cuda.is_available():
            raise Unavailable("torch.cuda.is_available() is False")
        self.torch = torch
        self.namespace = torch_numpy(torch)
        self.version = torch.__version__

    def device(self, host):
        return self.torch.from_numpy(np.ascontiguousarray(host)).cuda()

    def host(self, value):
        return value.detach().cpu().numpy() if isinstance(value, self.torch.Tensor) \
            else np.asarray(value)

    def set_matmul_precision(self, precision):
        super().set_matmul_precision(precision)
        self.torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"

    def compile(self, fn):
        return self.torch.compile(fn)

    def copy(self, value):
        return value.clone()

    def wait(self, value):
        self.torch.cuda.synchronize()

    def event(self):
        return TorchEvent(self.torch)

    def release(self):
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    def describe(self):
        return dict(super().describe(), device=self.torch.cuda.get_device_name())


class JaxJit(Framework):
    """``jax.jit`` of the source with ``np`` as ``jax.numpy`` (float32: x64 off)."""

    name = "jax.jit"
    timer = "host clock around the call and jax.block_until_ready (JAX's stream is not exposed)"
    events = False

    def __init__(self) -> None:
        try:
            import jax
            import jax.numpy as jnp
        except Exception as e:   # noqa: BLE001
            raise Unavailable(f"{type(e).__name__}: {e}") from None
        if jax.default_backend() != "gpu":
            raise Unavailable(f"jax's default backend is {jax.default_backend()!r}, not 'gpu'")
        self.jax, self.namespace = jax, jnp
        self.version = jax.__version__

    def device(self, host):
        return self.jax.device_put(host)

    def set_matmul_precision(self, precision):
        # JAX's default on this GPU is TF32 for float32 products: "float32" asks for
        # float32-accurate ones, as the other frameworks give by default
        super().set_matmul_precision(precision)
        self.jax.config.update("jax_default_matmul_precision",
                               "tensorfloat32" if precision == "tf32" else "float32")

    def compile(self, fn):
        return self.jax.jit(fn)

    def copy(self, value):
        raise NotImplementedError("JAX arrays are immutable: no in-place workloads")

    def wait(self, value):
        self.jax.block_until_ready(value)


class CupyEvent:
    def __init__(self, cupy: Any):
        self.cupy = cupy
        self.ev = cupy.cuda.Event()

    def record(self) -> None:
        self.ev.record(self.cupy.cuda.get_current_stream())

    def synchronize(self) -> None:
        self.ev.synchronize()

    def elapsed_ms(self, end: "CupyEvent") -> float:
        return self.cupy.cuda.get_elapsed_time(self.ev, end.ev)


class Cupy(Framework):
    """CuPy eager: the source with ``np`` as ``cupy``, one kernel per operation."""

    name = "cupy"
    timer = "CUDA events on cupy.cuda.get_current_stream()"

    def __init__(self) -> None:
        try:
            import cupy
            import cupyx
        except Exception as e:   # noqa: BLE001
            raise Unavailable(f"{type(e).__name__}: {e}") from None
        self.cupy, self.cupyx, self.namespace = cupy, cupyx, cupy
        self.version = cupy.__version__

    def set_matmul_precision(self, precision):
        # CuPy reads CUPY_TF32 (load_frameworks sets it before CuPy is imported)
        super().set_matmul_precision(
            "tf32" if os.environ.get("CUPY_TF32", "0") not in ("", "0") else "float32")

    def device(self, host):
        return self.cupy.asarray(host)

    def host(self, value):
        return self.cupy.asnumpy(value)

    def compile(self, fn):
        return fn

    def wait(self, value):
        self.cupy.cuda.get_current_stream().synchronize()

    def event(self):
        return CupyEvent(self.cupy)

    def release(self):
        self.cupy.cuda.get_current_stream().synchronize()
        self.cupy.get_default_memory_pool().free_all_blocks()


class CupyFuse(Cupy):
    """``cupy.fuse`` of the same source (elementwise code and simple reductions only)."""

    name = "cupy.fuse"

    def compile(self, fn):
        return self.cupy.fuse(fn)


FRAMEWORK_CLASSES = {"tracearray": Tracearray, "torch.compile": TorchCompile,
                     "jax.jit": JaxJit, "cupy": Cupy, "cupy.fuse": CupyFuse}


def load_frameworks(names: Sequence[str], dry_run: bool, matmul_precision: str = "float32"
                    ) -> tuple[Dict[str, Framework], dict]:
    """The frameworks that run here, and for every requested one its description or why not.
    A dry run has only tracearray, on the CPU. ``matmul_precision``: "float32" (every
    framework's float32 products float32-accurate) or "tf32" (TF32 tensor cores allowed)."""
    loaded: Dict[str, Framework] = {}
    info: dict = {}
    if matmul_precision == "tf32":
        os.environ["CUPY_TF32"] = "1"   # (read by CuPy, imported below)
    for name in names:
        if dry_run and name != "tracearray":
            info[name] = {"available": False, "reason": "dry run: tracearray on the CPU only"}
            continue
        cls = TracearrayCPU if dry_run else FRAMEWORK_CLASSES[name]
        try:
            fw = cls()
            fw.set_matmul_precision(matmul_precision)
        except Unavailable as e:
            info[name] = {"available": False, "reason": str(e)}
            continue
        except Exception as e:   # noqa: BLE001 - a framework that breaks on import
            info[name] = {"available": False, "reason": f"{type(e).__name__}: {e}"}
            continue
        loaded[name] = fw
        info[name] = dict(available=True, **fw.describe())
    return loaded, info


# ======================================================================================
# Timing
# ======================================================================================

def time_calls(fw: Framework, fn: Callable, make_args: Callable[[], list],
               repeat: int) -> List[float]:
    """Milliseconds of ``repeat`` calls, each between two events on the framework's stream.

    ``make_args`` gives each call its arguments (fresh copies of in-place arguments, queued
    before the start event, so their copy is not timed).  The calls are queued back to back
    and waited for once at the end: the events measure device time, not the host's.  A
    framework without events is timed on the host, from its arguments being ready to its
    result being ready, call by call."""
    if not fw.events:
        times = []
        for _ in range(repeat):
            args = make_args()
            fw.wait(args)
            t0 = time.perf_counter()
            out = fn(*args)
            fw.wait(out)
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    pairs = []
    for _ in range(repeat):
        args = make_args()
        start, end = fw.event(), fw.event()
        start.record()
        fn(*args)
        end.record()
        pairs.append((start, end))
    pairs[-1][1].synchronize()
    return [start.elapsed_ms(end) for start, end in pairs]


def copy_bandwidth(frameworks: Dict[str, Framework], size: str, repeat: int) -> dict:
    """Device copy bandwidth (bytes read + written per second) of a large buffer, timed with
    the first available framework's events; the floor of every workload divides by it."""
    nbytes = COPY_BYTES.get(size, SMALL_COPY_BYTES)
    for name in ("tracearray", "torch.compile", "cupy"):
        fw = frameworks.get(name)
        if fw is None:
            continue
        src = fw.device(np.ones(nbytes // 4, np.float32))
        time_calls(fw, fw.copy, lambda: [src], 2)   # warm-up
        ms = statistics.median(time_calls(fw, fw.copy, lambda: [src], max(repeat, 5)))
        del src
        fw.release()
        return {"bytes_per_s": 2 * nbytes / (ms / 1e3), "copy_bytes": nbytes, "ms": ms,
                "measured_with": f"{name}: {fw.timer}"}
    return {"bytes_per_s": None, "reason": "no framework to measure it with"}


# ======================================================================================
# Checking against the float64 reference
# ======================================================================================

# Arguments indexed by the sampled rows (axis 0) at large sizes; the others are used whole.
# Every output is sampled along its axis 0 the same way; () checks the whole (a full reduction).
SAMPLED_ARGS = {
    "ew_chain": ("a", "b", "c", "d"), "gelu_tanh": ("x",), "softmax": ("x",),
    "logsumexp": ("x",), "layernorm": ("x",), "rmsnorm": ("x",), "l2_normalize": ("x",),
    "adam_step": ("p", "g", "m", "v"), "black_scholes": ("S", "K", "T"),
    "haversine": ("lat1", "lon1", "lat2", "lon2"), "moments": (), "pairwise_min": ("X",),
    "linear_relu": ("x",),
}


class Check:
    """The float64 NumPy reference of a workload's outputs, and the comparison with them.

    At large sizes only sampled rows are computed and compared (all rows when there are
    fewer than the sample): rows are independent in every workload but a full reduction."""

    def __init__(self, w: W.Workload, inputs: Dict[str, np.ndarray],
                 max_rows: int = SAMPLED_ROWS, max_elements: int = SAMPLED_ELEMENTS):
        self.w = w
        sampled = SAMPLED_ARGS[w.name]
        self.rows: Optional[np.ndarray] = None
        self.n = 0   # rows in all (when sampled)
        if sampled:
            first = inputs[sampled[0]]
            self.n = n = first.shape[0]
            k = max_rows if first.ndim > 1 else max_elements
            if n > k:
                rng = np.random.default_rng(12345)
                self.rows = np.unique(np.concatenate([[0, n - 1], rng.integers(0, n, k - 2)]))
        if self.rows is None:
            part = inputs
        else:
            part = {a: (v[self.rows] if a in sampled else v) for a, v in inputs.items()}
        self.ref = W.reference(w, part)
        self.dtypes = [o.dtype for o in W.as_outputs(W.run(w, part))]
        self.checked = "all" if self.rows is None else f"{len(self.rows)} of {n} rows"

    def compare(self, outputs: Sequence[np.ndarray]) -> tuple[float, List[str]]:
        """(worst relative error, problems) of a framework's outputs, on the host."""
        if len(outputs) != len(self.ref):
            return float("inf"), [f"{len(outputs)} outputs, NumPy gives {len(self.ref)}"]
        problems, worst = [], 0.0
        for i, (out, ref, dtype) in enumerate(zip(outputs, self.ref, self.dtypes)):
            if self.rows is not None and out.ndim:
                if out.shape[0] != self.n:
                    problems.append(f"output {i} has shape {out.shape}")
                    worst = float("inf")
                    continue
                out = out[self.rows]
            err = W.rel_err(out, ref)
            worst = max(worst, err)
            if out.dtype != dtype:
                problems.append(f"output {i} is {out.dtype}, NumPy gives {dtype}")
        if not worst <= self.w.tol:
            problems.append(f"relative error {worst:.2e} > tol {self.w.tol:.0e}")
        return worst, problems


def as_tuple(result: Any) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


# ======================================================================================
# One framework on one workload
# ======================================================================================

def run_cell(fw: Framework, impl: Callable, host_args: Sequence[np.ndarray],
             compare: Callable[[Sequence[np.ndarray]], tuple], opts: argparse.Namespace,
             inplace: Sequence[int] = ()) -> dict:
    """Compile, check and time ``impl`` under ``fw``: the record of one table cell.

    ``inplace``: positions of arguments the function updates in place; those (not the return
    value) are what is checked, and every call gets fresh device copies of them.  Anything
    the framework raises is the cell's result ("refused" when it declines the program)."""
    rec: dict = {"framework": fw.name}
    try:
        _measure(fw, impl, host_args, compare, opts, inplace, rec)
    except Exception as e:   # noqa: BLE001 - a framework's failure is a result, not a crash
        message = str(e).strip()
        first_line = message.splitlines()[0] if message else ""
        rec.update(status="refused" if fw.refused(e) else "fails",
                   reason=f"{type(e).__name__}: {first_line}"[:300],
                   error=f"{type(e).__name__}: {message}"[:2000],
                   traceback=traceback.format_exc(limit=-6))
    fw.release()   # after _measure's frame, and with it the cell's device arrays, is gone
    return rec


def _measure(fw: Framework, impl: Callable, host_args: Sequence[np.ndarray],
             compare: Callable[[Sequence[np.ndarray]], tuple], opts: argparse.Namespace,
             inplace: Sequence[int], rec: dict) -> None:
    dev_args = [fw.device(a) for a in host_args]

    def make_args() -> list:
        return [fw.copy(a) if i in inplace else a for i, a in enumerate(dev_args)]

    def checked_call() -> float:
        """One call, checked against the reference; its seconds (call and wait only)."""
        args = make_args()
        fw.wait(args)
        t0 = time.perf_counter()
        out = fn(*args)
        fw.wait(out)
        seconds = time.perf_counter() - t0
        observed = [args[i] for i in inplace] if inplace else as_tuple(out)
        err, problems = compare([fw.host(o) for o in observed])
        rec["rel_err"] = max(rec.get("rel_err", 0.0), err)
        rec.setdefault("problems", []).extend(p for p in problems if p not in rec["problems"])
        return seconds

    t0 = time.perf_counter()
    fn = fw.compile(impl)
    compile_s = time.perf_counter() - t0
    rec["first_call_s"] = compile_s + checked_call()   # the cold start: compile and run
    warm_s = checked_call()                            # a warm call takes its own path too
    if rec["problems"]:
        rec.update(status="FAIL", reason="; ".join(rec["problems"]))
        return
    del rec["problems"]
    if warm_s * opts.warmup <= opts.budget:
        for _ in range(opts.warmup):
            fn(*make_args())
    reps = max(1, min(opts.repeat, int(opts.budget / max(warm_s, 1e-6))))
    times = time_calls(fw, fn, make_args, reps)
    rec.update(status="ok", ms=statistics.median(times), min_ms=min(times), max_ms=max(times),
               reps=reps)


def bench_workload(name: str, frameworks: Dict[str, Framework], opts: argparse.Namespace,
                   bandwidth: Optional[float]) -> Dict[str, dict]:
    w = W.get(name)
    inputs = W.make_inputs(name, opts.size, opts.seed)
    check = Check(w, inputs)
    floor_ms = w.bytes(opts.size) / bandwidth * 1e3 if bandwidth else None
    host_args = [inputs[a.name] for a in w.args]
    records = {}
    for fw_name, fw in frameworks.items():
        if f"{fw_name}:{name}" in opts.skip_cells:
            records[fw_name] = dict(framework=fw_name, workload=name, status="skipped",
                                    reason=f"--skip {fw_name}:{name}")
            continue
        impl = w.fn if fw.namespace is None else with_namespace(w.fn, fw.namespace)
        rec = run_cell(fw, impl, host_args, check.compare, opts)
        rec.update(workload=name, checked=check.checked, floor_ms=floor_ms)
        if rec.get("ms") and floor_ms:
            rec["pct_floor"] = 100.0 * floor_ms / rec["ms"]
        records[fw_name] = rec
        # each cell as it ends: a run killed by its time limit (a framework's compile that
        # takes minutes) still shows the cells before it
        print(f"#   {name} {fw_name}: {fmt_cell(rec)}", flush=True)
    return records


# ======================================================================================
# Report
# ======================================================================================

def fmt_ms(ms: float) -> str:
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def fmt_bandwidth(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e12:.2f} TB/s" if bytes_per_s >= 1e12 else \
        f"{bytes_per_s / 1e9:.3g} GB/s"


def fmt_cell(rec: Optional[dict]) -> str:
    if rec is None:
        return "—"
    status = rec["status"]
    if status == "ok":
        pct = f" ({rec['pct_floor']:.0f}%)" if rec.get("pct_floor") else ""
        return fmt_ms(rec["ms"]) + pct
    if status == "refused":
        return f"refused: {rec['reason']}"
    return status     # FAIL, fails: the reason is printed below the table and in the JSON


def ratio_to_best_other(recs: Dict[str, dict]) -> str:
    """tracearray's time / the fastest correct other framework's (below 1: tracearray wins)."""
    mine = recs.get("tracearray")
    others = {fw: r["ms"] for fw, r in recs.items() if fw != "tracearray" and r["status"] == "ok"}
    if not mine or mine["status"] != "ok" or not others:
        return "—"
    best = min(others, key=others.get)
    return f"{mine['ms'] / others[best]:.2f}× ({best})"


def markdown_table(results: Dict[str, Dict[str, dict]], columns: Sequence[str],
                   header: str) -> str:
    lines = [header, "",
             "| workload | floor ms | " + " | ".join(columns) + " | tracearray / best other |",
             "|---|---:|" + "---:|" * len(columns) + "---|"]
    for name, recs in results.items():
        floor = next((r["floor_ms"] for r in recs.values() if r.get("floor_ms")), None)
        cells = " | ".join(fmt_cell(recs.get(fw)) for fw in columns)
        lines.append(f"| {name} | {fmt_ms(floor) if floor else '—'} | {cells} | "
                     f"{ratio_to_best_other(recs)} |")
    return "\n".join(lines)


def problems_of(results: Dict[str, Dict[str, dict]]) -> List[str]:
    """One line per result that is wrong or raised, worst first (mismatches)."""
    lines = []
    for status in ("FAIL", "fails", "refused"):
        for name, recs in results.items():
            for fw, rec in recs.items():
                if rec["status"] == status:
                    lines.append(f"{status} {fw} / {name}: {rec['reason']}")
    return lines


def failed(results: Dict[str, Dict[str, dict]]) -> bool:
    """A wrong result anywhere, or tracearray raising (a refusal is reported, not failed)."""
    return any(r["status"] == "FAIL" or (fw == "tracearray" and r["status"] == "fails")
               for recs in results.values() for fw, r in recs.items())


def progress_line(name: str, recs: Dict[str, dict]) -> str:
    return f"{name:16s} " + " | ".join(f"{fw} {fmt_cell(r)}" for fw, r in recs.items())


def environment(frameworks_info: dict, opts: argparse.Namespace) -> dict:
    device = next((i["device"] for i in frameworks_info.values() if i.get("device")),
                  "unknown device")
    return dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                device=device, dry_run=opts.dry_run, host=platform.node(), git=git_revision(),
                python=platform.python_version(), numpy=np.__version__,
                frameworks=frameworks_info)


def write_json(path: Optional[str], doc: dict) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, default=str)


# ======================================================================================
# Main
# ======================================================================================

def parse_args(argv: Optional[List[str]], doc: str, sizes: Sequence[str],
               names: Sequence[str], frameworks: Sequence[str] = FRAMEWORKS) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default=None, choices=sizes,
                    help="input size (default: gpu; check with --dry-run)")
    ap.add_argument("--workloads", default=None, help="comma-separated, from " + ", ".join(names))
    ap.add_argument("--frameworks", default=",".join(frameworks),
                    help="comma-separated, from " + ", ".join(frameworks))
    ap.add_argument("--repeat", type=int, default=20, help="timed calls per cell (median)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed calls after the checked ones")
    ap.add_argument("--budget", type=float, default=4.0,
                    help="seconds of timed calls per cell at most (fewer repeats when slow)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", default=",".join(SKIP_CELLS),
                    help="comma-separated framework:workload cells not run (default: "
                         "%(default)s; '' runs every cell)")
    ap.add_argument("--matmul-precision", choices=("float32", "tf32"), default="float32",
                    help="float32 products: float32-accurate in every framework (default; "
                         "JAX is told so, its default is TF32) or TF32 tensor cores allowed "
                         "in every framework (tracearray: compile(matmul_precision='tf32'))")
    ap.add_argument("--json", dest="json_out", default=None, help="write the results here")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: check (and time) tracearray on the CPU against NumPy")
    opts = ap.parse_args(argv)
    opts.size = opts.size or ("check" if opts.dry_run else "gpu")
    opts.names = opts.workloads.split(",") if opts.workloads else list(names)
    unknown = [n for n in opts.names if n not in names]
    if unknown:
        ap.error(f"unknown workloads {unknown}; known: {', '.join(names)}")
    opts.skip_cells = set(c for c in opts.skip.split(",") if c)
    opts.framework_names = opts.frameworks.split(",")
    unknown = [f for f in opts.framework_names if f not in frameworks]
    if unknown:
        ap.error(f"unknown frameworks {unknown}; known: {', '.join(frameworks)}")
    if opts.repeat < 1:
        ap.error("--repeat must be >= 1")
    return opts


Bench = Callable[[str, Dict[str, Framework], argparse.Namespace, Optional[float]],
                 Dict[str, dict]]


def run_suite(opts: argparse.Namespace, suite: str, bench: Bench,
              describe: Callable[[str], dict]) -> int:
    """Load the frameworks, measure the bandwidth, run ``bench`` on every workload, print the
    table and write the JSON (after every workload, so that a killed run keeps its results).
    Returns the exit status."""
    frameworks, info = load_frameworks(opts.framework_names, opts.dry_run,
                                       opts.matmul_precision)
    env = environment(info, opts)
    for name, i in info.items():
        state = f"{i['version']}, {i['timer']}" if i["available"] else f"unavailable: {i['reason']}"
        print(f"# {name}: {state}", flush=True)
    bandwidth = copy_bandwidth(frameworks, opts.size, opts.repeat)
    bw = bandwidth["bytes_per_s"]
    if bw:
        print(f"# {env['device']}; copy bandwidth {fmt_bandwidth(bw)} "
              f"({bandwidth['measured_with']})", flush=True)
    else:
        print(f"# no bandwidth: {bandwidth['reason']}", flush=True)
    header = (f"ms per call (median), `{opts.size}` size, {env['device']}, {env['date']}; "
              f"(% of floor) = floor / time, floor = minimal bytes / "
              f"{fmt_bandwidth(bw) if bw else '?'} copy bandwidth; "
              f"tracearray / best other below 1 = tracearray faster")
    results: Dict[str, Dict[str, dict]] = {}
    doc = dict(suite=suite, size=opts.size, repeat=opts.repeat, warmup=opts.warmup,
               budget_s=opts.budget, seed=opts.seed, matmul_precision=opts.matmul_precision,
               bandwidth=bandwidth, **env)
    for name in opts.names:
        results[name] = bench(name, frameworks, opts, bw)
        print(progress_line(name, results[name]), flush=True)
        doc.update(workloads={n: describe(n) for n in results},
                   results=[r for recs in results.values() for r in recs.values()])
        write_json(opts.json_out, doc)
    table = markdown_table(results, opts.framework_names, header)
    problems = problems_of(results)
    print()
    print(table)
    for line in problems:
        print(("!!! " if line.startswith("FAIL") else "    ") + line)
    doc.update(markdown=table, problems=problems)
    write_json(opts.json_out, doc)
    if opts.json_out:
        print(f"\nwrote {opts.json_out}")
    if "tracearray" in opts.framework_names and "tracearray" not in frameworks:
        print(f"!!! tracearray did not run: {info['tracearray']['reason']}")
        return 1
    return 1 if failed(results) else 0


def main(argv: Optional[List[str]] = None) -> int:
    opts = parse_args(argv, __doc__, W.SIZES, W.names())

    def describe(name: str) -> dict:
        return dict(shapes=W.get(name).shapes(opts.size), bytes=W.get(name).bytes(opts.size))

    return run_suite(opts, "tracearray GPU benchmark", bench_workload, describe)


if __name__ == "__main__":
    raise SystemExit(main())
