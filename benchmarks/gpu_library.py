#!/usr/bin/env python3
"""GPU library calls (issue 13): FFT pipelines, a matrix product, a batched solve, sorts.

    python benchmarks/gpu_library.py [--size gpu|cpu|check] [--workloads a,b] [--repeat N]
                                     [--frameworks tracearray,torch.compile,jax.jit,cupy]
                                     [--json out.json]
    python benchmarks/gpu_library.py --dry-run    # no GPU needed: tracearray on the CPU

Workloads (float32; M x N = 4096 x 8192 at the gpu size, 512 x 1024 cpu, 16 x 64 check):

  power_spectrum  np.abs(np.fft.rfft(x * window)) ** 2       cuFFT R2C on the GPU
  fft_filter      np.fft.irfft(np.fft.rfft(x) * g, N)        R2C then C2R
  complex_fft     np.abs(np.fft.ifft(np.fft.fft(x + 1j * y) * 2))   C2C both ways
  matmul          a @ b, M x M by M x M (M = 4096)           cuBLAS SGEMM
  batched_solve   np.linalg.solve(A, b), 16 x 16 systems, M of them
  sort_rows       np.sort(x, axis=-1), M x M                 a block's bitonic sort per row
  median_rows     np.median(x, axis=-1), M x M
  quantile_rows   np.quantile(x, 0.9, axis=-1), M x M        the sort, then NumPy's lerp
  sort_long       np.sort(x) of M * M values (one row)       the radix sort over all blocks
  argsort_long    np.argsort(x, kind="stable"), the same
  batched_cholesky  np.linalg.cholesky(A), M symmetric positive definite 16 x 16 matrices
  batched_qr      np.linalg.qr(A), M 32 x 16 matrices (Q and R)
  batched_eigvalsh  np.linalg.eigvalsh(A), M symmetric 16 x 16 matrices (the values: every
                  framework's answer; vectors' signs are each library's own)
  batched_svdvals np.linalg.svd(A, compute_uv=False), M 32 x 16 matrices
  top8_rows       np.sort(np.partition(x, -8, axis=-1)[:, -8:], axis=-1), M x M: each row's
                  8 largest (the partition, then a sort of the 8: every framework's answer)
  unique_long     np.unique(x, return_counts=True) of M * M rounded values (~8,000 distinct)
  large_solve     np.linalg.solve(A, B), M / 1024 systems of 512 x 512 with 64 right-hand
                  sides (cuSOLVER on the GPU: past the block kernels' 64)
  large_eigvalsh  np.linalg.eigvalsh(A), M / 512 symmetric 256 x 256 matrices
  large_svdvals   np.linalg.svd(A, compute_uv=False), M / 1024 matrices of 512 x 256
  large_eigvals   np.sort(np.abs(np.linalg.eigvals(A)), axis=-1), M / 1024 nonsymmetric
                  256 x 256 matrices (the moduli, sorted: every framework's answer)

tracearray compiles the NumPy source (``device="cuda"``, device arrays); jax.jit and CuPy run
the same source with ``np`` bound to ``jax.numpy`` / ``cupy``; torch.compile gets the PyTorch
way of writing each (``torch.fft``, ``torch.linalg.solve``, ``torch.sort``). Checking, timing and the report are
benchmarks/gpu.py's: float64 NumPy reference, relative 2-norm error below 1e-4, CUDA events
on each framework's own stream (JAX: host clock and block_until_ready), medians.
"""
from __future__ import annotations

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

FRAMEWORKS = ("tracearray", "torch.compile", "jax.jit", "cupy")
SIZES = {"check": (16, 64), "cpu": (512, 1024), "gpu": (4096, 8192)}
TOL = 1e-4   # relative 2-norm error against float64


# ======================================================================================
# The NumPy sources
# ======================================================================================

def power_spectrum(x, window):
    return np.abs(np.fft.rfft(x * window)) ** 2


def fft_filter(x, g):
    return np.fft.irfft(np.fft.rfft(x) * g, x.shape[-1])


def complex_fft(x, y):
    return np.abs(np.fft.ifft(np.fft.fft(x + 1j * y) * 2))


def matmul(a, b):
    return a @ b


def batched_solve(a, b):
    return np.linalg.solve(a, b)


def sort_rows(x):
    return np.sort(x, axis=-1)


def median_rows(x):
    return np.median(x, axis=-1)


def quantile_rows(x):
    return np.quantile(x, 0.9, axis=-1)


def sort_long(x):
    return np.sort(x)


def argsort_long(x):
    return np.argsort(x, kind="stable")


def batched_cholesky(a):
    return np.linalg.cholesky(a)


def batched_qr(a):
    return tuple(np.linalg.qr(a))


def batched_eigvalsh(a):
    return np.linalg.eigvalsh(a)


def batched_svdvals(a):
    return np.linalg.svd(a, compute_uv=False)


def top8_rows(x):
    return np.sort(np.partition(x, -8, axis=-1)[:, -8:], axis=-1)


def unique_long(x):
    return np.unique(x, return_counts=True)


def large_solve(a, b):
    return np.linalg.solve(a, b)


def large_eigvalsh(a):
    return np.linalg.eigvalsh(a)


def large_svdvals(a):
    return np.linalg.svd(a, compute_uv=False)


def large_eigvals(a):
    return np.sort(np.abs(np.linalg.eigvals(a)), axis=-1)


def torch_versions(torch: Any) -> Dict[str, Callable]:
    def t_power(x, window):
        return torch.abs(torch.fft.rfft(x * window)) ** 2

    def t_filter(x, g):
        return torch.fft.irfft(torch.fft.rfft(x) * g, x.shape[-1])

    def t_complex(x, y):
        return torch.abs(torch.fft.ifft(torch.fft.fft(torch.complex(x, y)) * 2))

    def t_solve(a, b):
        return torch.linalg.solve(a, b)

    def t_sort(x):
        return torch.sort(x, -1).values

    def t_median(x):   # NumPy's median of an even row: the mean of the two middle values
        s = torch.sort(x, -1).values
        n = x.shape[-1]
        return (s[..., (n - 1) // 2] + s[..., n // 2]) / 2

    def t_quantile(x):   # NumPy's linear method: (n - 1) q, interpolated as its _lerp
        s = torch.sort(x, -1).values
        pos = (x.shape[-1] - 1) * 0.9
        lo = int(pos)
        a, b, t = s[..., lo], s[..., min(lo + 1, x.shape[-1] - 1)], pos - lo
        return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t

    def t_sort_long(x):
        return torch.sort(x).values

    def t_argsort_long(x):
        return torch.argsort(x, stable=True)

    def t_cholesky(a):
        return torch.linalg.cholesky(a)

    def t_qr(a):
        return tuple(torch.linalg.qr(a))

    def t_eigvalsh(a):
        return torch.linalg.eigvalsh(a)

    def t_svdvals(a):
        return torch.linalg.svdvals(a)

    def t_top8(x):
        return torch.sort(torch.topk(x, 8, dim=-1).values, dim=-1).values

    def t_unique(x):
        return torch.unique(x, sorted=True, return_counts=True)

    def t_large_eigvals(a):
        return torch.sort(torch.abs(torch.linalg.eigvals(a)), -1).values

    return {"power_spectrum": t_power, "fft_filter": t_filter, "complex_fft": t_complex,
            "matmul": matmul, "batched_solve": t_solve, "sort_rows": t_sort,
            "median_rows": t_median, "quantile_rows": t_quantile, "sort_long": t_sort_long,
            "argsort_long": t_argsort_long, "batched_cholesky": t_cholesky,
            "batched_qr": t_qr, "batched_eigvalsh": t_eigvalsh,
            "batched_svdvals": t_svdvals, "top8_rows": t_top8, "unique_long": t_unique,
            "large_solve": t_solve, "large_eigvalsh": t_eigvalsh, "large_svdvals": t_svdvals,
            "large_eigvals": t_large_eigvals}


def implementation(fw: G.Framework, name: str) -> Callable:
    if fw.name == "torch.compile":
        return torch_versions(fw.torch)[name]
    fn = WORKLOADS[name].fn
    return fn if fw.namespace is None else G.with_namespace(fn, fw.namespace)


# ======================================================================================
# Workloads: inputs, minimal bytes, the check
# ======================================================================================

@dataclass(frozen=True)
class LibraryWorkload:
    name: str
    fn: Callable
    make_inputs: Callable[[Tuple[int, int], np.random.Generator], Dict[str, np.ndarray]]
    out_bytes: Callable[[Dict[str, np.ndarray]], int]


def _rows(size, rng, *extra):
    m, n = size
    out = {"x": rng.standard_normal((m, n), dtype=np.float32)}
    for name, length in extra:
        out[name] = rng.uniform(0.0, 1.0, length(n)).astype(np.float32)
    return out


def _pair(size, rng):
    m, n = size
    return {"x": rng.standard_normal((m // 2, n), dtype=np.float32),
            "y": rng.standard_normal((m // 2, n), dtype=np.float32)}


def _square(size, rng):
    m = size[0]
    return {"a": rng.standard_normal((m, m), dtype=np.float32),
            "b": rng.standard_normal((m, m), dtype=np.float32)}


def _systems(size, rng):
    m = size[0]
    a = rng.standard_normal((m, 16, 16), dtype=np.float32) + 16 * np.eye(16, dtype=np.float32)
    return {"a": a, "b": rng.standard_normal((m, 16, 1), dtype=np.float32)}


def _square_rows(size, rng):
    m = size[0]
    return {"x": rng.standard_normal((m, m), dtype=np.float32)}


def _long_row(size, rng):
    m = size[0]
    return {"x": rng.standard_normal(m * m, dtype=np.float32)}


def _spd_stack(size, rng):
    m = size[0]
    x = rng.standard_normal((m, 16, 16), dtype=np.float32)
    return {"a": x @ np.swapaxes(x, -1, -2) + 16 * np.eye(16, dtype=np.float32)}


def _sym_stack(size, rng):
    m = size[0]
    x = rng.standard_normal((m, 16, 16), dtype=np.float32)
    return {"a": x + np.swapaxes(x, -1, -2)}


def _tall_stack(size, rng):
    m = size[0]
    return {"a": rng.standard_normal((m, 32, 16), dtype=np.float32) +
            3 * np.eye(32, 16, dtype=np.float32)}


def _rounded_long(size, rng):
    m = size[0]
    return {"x": np.round(rng.standard_normal(m * m, dtype=np.float32) * 1000)}


def _large(count_per, rows, cols, kind):
    """M // count_per matrices of rows x cols (at least one): general, symmetric or
    well-conditioned square ones."""
    def make(size, rng):
        m = max(1, size[0] // count_per)
        x = rng.standard_normal((m, rows, cols), dtype=np.float32)
        if kind == "sym":
            return {"a": x + np.swapaxes(x, -1, -2)}
        if kind == "systems":
            return {"a": x / np.float32(np.sqrt(rows)) + 2 * np.eye(rows, dtype=np.float32),
                    "b": rng.standard_normal((m, rows, 64), dtype=np.float32)}
        return {"a": x}
    return make


_SPECS = [
    LibraryWorkload("power_spectrum", power_spectrum,
                    lambda s, r: _rows(s, r, ("window", lambda n: n)),
                    lambda a: 4 * a["x"].shape[0] * (a["x"].shape[1] // 2 + 1)),
    LibraryWorkload("fft_filter", fft_filter,
                    lambda s, r: _rows(s, r, ("g", lambda n: n // 2 + 1)),
                    lambda a: a["x"].nbytes),
    LibraryWorkload("complex_fft", complex_fft, _pair, lambda a: a["x"].nbytes),
    LibraryWorkload("matmul", matmul, _square, lambda a: a["a"].nbytes),
    LibraryWorkload("batched_solve", batched_solve, _systems, lambda a: a["b"].nbytes),
    LibraryWorkload("sort_rows", sort_rows, _square_rows, lambda a: a["x"].nbytes),
    LibraryWorkload("median_rows", median_rows, _square_rows,
                    lambda a: 4 * a["x"].shape[0]),
    LibraryWorkload("quantile_rows", quantile_rows, _square_rows,
                    lambda a: 4 * a["x"].shape[0]),
    LibraryWorkload("sort_long", sort_long, _long_row, lambda a: a["x"].nbytes),
    LibraryWorkload("argsort_long", argsort_long, _long_row, lambda a: 2 * a["x"].nbytes),
    LibraryWorkload("batched_cholesky", batched_cholesky, _spd_stack, lambda a: a["a"].nbytes),
    LibraryWorkload("batched_qr", batched_qr, _tall_stack,
                    lambda a: a["a"].nbytes + a["a"].shape[0] * 16 * 16 * 4),
    LibraryWorkload("batched_eigvalsh", batched_eigvalsh, _sym_stack,
                    lambda a: a["a"].shape[0] * 16 * 4),
    LibraryWorkload("batched_svdvals", batched_svdvals, _tall_stack,
                    lambda a: a["a"].shape[0] * 16 * 4),
    LibraryWorkload("top8_rows", top8_rows, _square_rows, lambda a: 32 * a["x"].shape[0]),
    LibraryWorkload("unique_long", unique_long, _rounded_long, lambda a: 0),
    LibraryWorkload("large_solve", large_solve, _large(1024, 512, 512, "systems"),
                    lambda a: a["b"].nbytes),
    LibraryWorkload("large_eigvalsh", large_eigvalsh, _large(512, 256, 256, "sym"),
                    lambda a: a["a"].shape[0] * 256 * 4),
    LibraryWorkload("large_svdvals", large_svdvals, _large(1024, 512, 256, "general"),
                    lambda a: a["a"].shape[0] * 256 * 4),
    LibraryWorkload("large_eigvals", large_eigvals, _large(1024, 256, 256, "general"),
                    lambda a: a["a"].shape[0] * 256 * 4),
]
WORKLOADS: Dict[str, LibraryWorkload] = {w.name: w for w in _SPECS}


def make_inputs(name: str, size: str, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    return WORKLOADS[name].make_inputs(SIZES[size], rng)


class LibraryCheck:
    """The float64 NumPy reference and the comparison with a framework's values."""

    def __init__(self, w: LibraryWorkload, inputs: Dict[str, np.ndarray]):
        self.ref = G.as_tuple(w.fn(*[v.astype(np.float64) for v in inputs.values()]))

    def compare(self, outputs: Sequence[np.ndarray]) -> Tuple[float, List[str]]:
        if len(outputs) != len(self.ref):
            return float("inf"), [f"{len(outputs)} values, NumPy gives {len(self.ref)}"]
        problems, worst = [], 0.0
        for i, (out, ref) in enumerate(zip(outputs, self.ref)):
            out = np.asarray(out)
            if out.shape != ref.shape:
                return float("inf"), [f"value {i} has shape {out.shape}, NumPy {ref.shape}"]
            if ref.dtype.kind in "iu":   # positions (argsort): exactly NumPy's
                if out.dtype.kind not in "iu" or not np.array_equal(out, ref):
                    problems.append(f"value {i}: positions differ from NumPy's")
                continue
            worst = max(worst, W.rel_err(out, ref))
            if out.dtype != np.float32:
                problems.append(f"value {i} is {out.dtype}, NumPy gives float32")
        if not worst <= TOL:
            problems.append(f"relative error {worst:.2e} > tol {TOL:.0e}")
        return worst, problems


DESCRIPTIONS: Dict[str, dict] = {}


def bench_library(name: str, frameworks: Dict[str, G.Framework], opts: Any,
                  bandwidth: Optional[float]) -> Dict[str, dict]:
    w = WORKLOADS[name]
    inputs = make_inputs(name, opts.size, opts.seed)
    check = LibraryCheck(w, inputs)
    nbytes = sum(v.nbytes for v in inputs.values()) + w.out_bytes(inputs)
    floor_ms = nbytes / bandwidth * 1e3 if bandwidth else None
    DESCRIPTIONS[name] = dict(shapes={k: list(v.shape) for k, v in inputs.items()},
                              bytes=nbytes)
    records = {}
    for fw_name, fw in frameworks.items():
        rec = G.run_cell(fw, implementation(fw, name), list(inputs.values()), check.compare,
                         opts)
        rec.update(workload=name, checked="all", floor_ms=floor_ms)
        if rec.get("ms") and floor_ms:
            rec["pct_floor"] = 100.0 * floor_ms / rec["ms"]
        records[fw_name] = rec
    return records


def main(argv: Optional[List[str]] = None) -> int:
    opts = G.parse_args(argv, __doc__, tuple(SIZES), list(WORKLOADS), FRAMEWORKS)
    return G.run_suite(opts, "tracearray GPU library-call benchmark", bench_library,
                       DESCRIPTIONS.__getitem__)


if __name__ == "__main__":
    raise SystemExit(main())
