#!/usr/bin/env python3
"""GPU writes and gathers: tracearray against torch.compile and CuPy.

    python benchmarks/gpu_writes.py [--size gpu|cpu|check] [--workloads a,b] [--repeat N]
                                    [--frameworks tracearray,torch.compile,cupy] [--json out.json]
    python benchmarks/gpu_writes.py --dry-run    # no GPU needed: tracearray on the CPU

Workloads (float32 values, int64 indices; n = 64 / 2048 / 16384 for check / cpu / gpu):

  gather           x[idx] * 2 + 1                       x: n*n, idx: n*n/2 random indices
  masked_sum       x[x > 0].sum()
  masked_zero_sum  y = x.copy(); y[y < 0] = 0; y.sum()
  scatter_add      np.add.at(out, idx, v)               out: n*n/16 bins, idx, v: n*n/4;
                                                        out updated in place
  scatter_set      out[idx] = v                         the same arrays; repeated indices:
                                                        the last write (C order) wins
  cumsum           np.cumsum(x)                         x: n*n/16
  jacobi_inplace   u[1:-1, 1:-1] = 0.25 * (4 neighbours)  u: n x n, updated in place
  jacobi_copy      u = u.copy(); the same assignment     u: n x n; a new array returned
  heat_steps       20 steps of u = u.copy(); u[1:-1, 1:-1] = heat update  (a Python loop)

tracearray compiles the NumPy source (``device="cuda"``, tracearray device arrays); CuPy (eager)
runs that same source, except scatter_add, which is ``cupyx.scatter_add``; torch.compile gets
the PyTorch way of writing each: ``index_select``, ``where``, ``masked_fill_``, ``index_add_``,
``cumsum``, and for scatter_set and the stencil the same indexing source (CuPy and PyTorch do
not promise which of repeated writes wins, so their scatter_set may fail the check) (a slice assignment copies the right-hand side,
computed first, into the view: NumPy's semantics).  A program tracearray declines is reported
as "refused: <error>", not as a crash.

Checking, timing and the report are benchmarks/gpu.py's: float64 NumPy reference (the same
source on float64 copies; for in-place workloads the updated argument is compared), CUDA
events on each framework's own stream, medians.  An argument updated in place gets a fresh
device copy before every call, queued before the start event, so the copy is not timed.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `benchmarks` and `tracearray` importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import gpu as G  # noqa: E402
from benchmarks import workloads as W  # noqa: E402

FRAMEWORKS = ("tracearray", "torch.compile", "cupy")
SIDES = {"check": 64, "cpu": 2048, "gpu": 16384}
TOL = 1e-4   # relative 2-norm error against float64


# ======================================================================================
# The NumPy sources
# ======================================================================================

def gather(x, idx):
    return x[idx] * 2 + 1


def masked_sum(x):
    return x[x > 0].sum()


def masked_zero_sum(x):
    y = x.copy()
    y[y < 0] = 0
    return y.sum()


def scatter_add(out, idx, v):
    np.add.at(out, idx, v)


def scatter_set(out, idx, v):
    out[idx] = v


def cumsum(x):
    return np.cumsum(x)


def jacobi_inplace(u):
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def jacobi_copy(u):
    u = u.copy()
    jacobi_inplace(u)
    return u


HEAT_STEPS = 20


def heat_step(u):
    """One explicit heat step written into u's interior (the right side is computed first)."""
    u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] +
                                           u[1:-1, :-2] - 4 * u[1:-1, 1:-1])


def heat_steps(u):
    for _ in range(HEAT_STEPS):
        u = u.copy()
        heat_step(u)
    return u


# ======================================================================================
# The other frameworks' ways of writing them
# ======================================================================================

def torch_versions(torch: Any) -> Dict[str, Callable]:
    def torch_gather(x, idx):
        return torch.index_select(x, 0, idx) * 2 + 1

    def torch_masked_sum(x):
        return torch.where(x > 0, x, 0.0).sum()

    def torch_masked_zero_sum(x):
        y = x.clone()
        y.masked_fill_(y < 0, 0.0)
        return y.sum()

    def torch_scatter_add(out, idx, v):
        out.index_add_(0, idx, v)

    def torch_cumsum(x):
        return torch.cumsum(x, 0)

    def torch_jacobi_copy(u):
        u = u.clone()
        jacobi_inplace(u)
        return u

    def torch_heat_steps(u):
        for _ in range(HEAT_STEPS):
            u = u.clone()
            heat_step(u)
        return u

    return {"gather": torch_gather, "masked_sum": torch_masked_sum,
            "masked_zero_sum": torch_masked_zero_sum, "scatter_add": torch_scatter_add,
            "scatter_set": scatter_set, "cumsum": torch_cumsum,
            "jacobi_inplace": jacobi_inplace, "jacobi_copy": torch_jacobi_copy,
            "heat_steps": torch_heat_steps}


def cupy_versions(cupyx: Any) -> Dict[str, Callable]:
    def cupy_scatter_add(out, idx, v):
        cupyx.scatter_add(out, idx, v)

    return {"gather": gather, "masked_sum": masked_sum, "masked_zero_sum": masked_zero_sum,
            "scatter_add": cupy_scatter_add, "scatter_set": scatter_set, "cumsum": cumsum,
            "jacobi_inplace": jacobi_inplace, "jacobi_copy": jacobi_copy,
            "heat_steps": heat_steps}


def implementation(fw: G.Framework, name: str) -> Callable:
    if fw.name == "torch.compile":
        return torch_versions(fw.torch)[name]
    if fw.name == "cupy":
        return cupy_versions(fw.cupyx)[name]
    return WORKLOADS[name].fn


# ======================================================================================
# Workloads: inputs, minimal bytes, the check
# ======================================================================================

@dataclass(frozen=True)
class WriteWorkload:
    name: str
    fn: Callable
    make_inputs: Callable[[int, np.random.Generator], Dict[str, np.ndarray]]
    bytes: Callable[[Dict[str, np.ndarray]], int]   # read once, written once
    inplace: Tuple[str, ...] = ()                     # arguments the function updates


def _normal(shape, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _gather_inputs(n, rng):
    return {"x": _normal(n * n, rng), "idx": rng.integers(0, n * n, n * n // 2)}


def _vector_input(n, rng):
    return {"x": _normal(n * n, rng)}


def _scatter_inputs(n, rng):
    bins = n * n // 16
    return {"out": np.zeros(bins, np.float32), "idx": rng.integers(0, bins, n * n // 4),
            "v": _normal(n * n // 4, rng)}


def _scan_input(n, rng):
    return {"x": _normal(n * n // 16, rng)}


def _grid_input(n, rng):
    return {"u": _normal((n, n), rng)}


_SPECS = [
    WriteWorkload("gather", gather, _gather_inputs,
                  lambda a: a["idx"].nbytes + 2 * 4 * a["idx"].size),   # indices, x[idx], out
    WriteWorkload("masked_sum", masked_sum, _vector_input, lambda a: a["x"].nbytes),
    WriteWorkload("masked_zero_sum", masked_zero_sum, _vector_input, lambda a: a["x"].nbytes),
    WriteWorkload("scatter_add", scatter_add, _scatter_inputs,
                  lambda a: a["idx"].nbytes + a["v"].nbytes + 2 * a["out"].nbytes,
                  inplace=("out",)),
    WriteWorkload("scatter_set", scatter_set, _scatter_inputs,
                  lambda a: a["idx"].nbytes + a["v"].nbytes + a["out"].nbytes,
                  inplace=("out",)),
    WriteWorkload("cumsum", cumsum, _scan_input, lambda a: 2 * a["x"].nbytes),
    WriteWorkload("jacobi_inplace", jacobi_inplace, _grid_input,
                  lambda a: a["u"].nbytes + 4 * (a["u"].shape[0] - 2) * (a["u"].shape[1] - 2),
                  inplace=("u",)),
    WriteWorkload("jacobi_copy", jacobi_copy, _grid_input,   # read u, write the copy
                  lambda a: 2 * a["u"].nbytes),
    WriteWorkload("heat_steps", heat_steps, _grid_input,     # one read and write a step
                  lambda a: 2 * HEAT_STEPS * a["u"].nbytes),
]
WORKLOADS: Dict[str, WriteWorkload] = {w.name: w for w in _SPECS}


def make_inputs(name: str, size: str, seed: int = 0) -> Dict[str, np.ndarray]:
    """Inputs in argument order, the same for the same (name, size, seed)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return WORKLOADS[name].make_inputs(SIDES[size], rng)


class WriteCheck:
    """The float64 NumPy reference (the result, or the arguments updated in place) and the
    comparison with a framework's values (``G.run_cell``'s ``compare``)."""

    def __init__(self, w: WriteWorkload, inputs: Dict[str, np.ndarray]):
        wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v.copy()
                for k, v in inputs.items()}
        result = w.fn(*wide.values())
        self.ref = tuple(wide[k] for k in w.inplace) if w.inplace else G.as_tuple(result)

    def compare(self, outputs: Sequence[np.ndarray]) -> Tuple[float, List[str]]:
        if len(outputs) != len(self.ref):
            return float("inf"), [f"{len(outputs)} values, NumPy gives {len(self.ref)}"]
        problems, worst = [], 0.0
        for i, (out, ref) in enumerate(zip(outputs, self.ref)):
            worst = max(worst, W.rel_err(out, ref))
            if out.dtype != np.float32:
                problems.append(f"value {i} is {out.dtype}, NumPy gives float32")
        if not worst <= TOL:
            problems.append(f"relative error {worst:.2e} > tol {TOL:.0e}")
        return worst, problems


DESCRIPTIONS: Dict[str, dict] = {}   # per workload run: shapes, bytes (for the JSON)


def bench_write(name: str, frameworks: Dict[str, G.Framework], opts: argparse.Namespace,
                bandwidth: Optional[float]) -> Dict[str, dict]:
    w = WORKLOADS[name]
    inputs = make_inputs(name, opts.size, opts.seed)
    check = WriteCheck(w, inputs)
    floor_ms = w.bytes(inputs) / bandwidth * 1e3 if bandwidth else None
    DESCRIPTIONS[name] = dict(shapes={k: list(v.shape) for k, v in inputs.items()},
                              bytes=w.bytes(inputs), inplace=list(w.inplace))
    names = list(inputs)
    inplace = [names.index(k) for k in w.inplace]
    records = {}
    for fw_name, fw in frameworks.items():
        rec = G.run_cell(fw, implementation(fw, name), list(inputs.values()), check.compare,
                         opts, inplace)
        rec.update(workload=name, checked="all", floor_ms=floor_ms)
        if rec.get("ms") and floor_ms:
            rec["pct_floor"] = 100.0 * floor_ms / rec["ms"]
        records[fw_name] = rec
    return records


def main(argv: Optional[List[str]] = None) -> int:
    opts = G.parse_args(argv, __doc__, tuple(SIDES), list(WORKLOADS), FRAMEWORKS)
    return G.run_suite(opts, "tracearray GPU writes benchmark", bench_write,
                       DESCRIPTIONS.__getitem__)


if __name__ == "__main__":
    raise SystemExit(main())
