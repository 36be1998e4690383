"""The 13 public benchmark workloads, as plain NumPy functions plus what is needed to time them.

Each workload is an ordinary NumPy function of its array arguments only: it is exactly what a
user would hand to ``tracearray.compile``, and the same function evaluated on float64 copies of
the inputs is the accuracy reference.  Every constant is a Python float, so under NEP 50 it is
a "weak" scalar and float32 arrays stay float32 all the way through.

Inputs come from ``make_inputs(name, size, seed)``: float32, uniform over a fixed range per
argument, never exactly zero, and bit-identical for the same (name, size, seed) in any process
that has the same NumPy.  That is what lets a benchmark in another interpreter (the numba
worker in ``baselines.py``) work on the very same data without shipping arrays around.

Sizes: ``check`` is tiny (correctness, seconds of test time); ``cpu`` is 8-34 MB per workload,
sized for a 2-core machine; ``gpu`` (the public suite's GPU shapes) moves up to 5.4 GB per call,
enough to fill an H200 and run far past launch overhead.
"""

from __future__ import annotations

import hashlib
import math
import types
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple

import numpy as np

F32_BYTES = 4
SIZES = ("check", "cpu", "gpu")


# ======================================================================================
# The workloads.  Python-float constants only (NEP 50 weak scalars keep float32 float32).
# ======================================================================================

def ew_chain(a, b, c, d):
    """A short elementwise chain with one transcendental: a*b + c*exp(-d)."""
    return a * b + c * np.exp(-d)


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
    """GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    inner = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
    return 0.5 * x * (1.0 + np.tanh(inner))


def softmax(x):
    """Softmax over the last axis, shifted by the row maximum for stability."""
    shifted = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def logsumexp(x):
    """log(sum(exp(x))) over the last axis, shifted by the row maximum for stability."""
    row_max = np.max(x, axis=-1)
    total = np.sum(np.exp(x - row_max[:, None]), axis=-1)
    return row_max + np.log(total)


LAYERNORM_EPS = 1e-5


def layernorm(x, gamma, beta):
    """LayerNorm over the last axis (biased variance, two-pass) with scale and shift."""
    mean = np.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + LAYERNORM_EPS) * gamma + beta


RMSNORM_EPS = 1e-6


def rmsnorm(x, w):
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * w."""
    mean_sq = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(mean_sq + RMSNORM_EPS) * w


L2_EPS = 1e-12


def l2_normalize(x):
    """Scale every row to unit Euclidean length: x / max(||x||_2, eps)."""
    norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
    return x / np.maximum(norm, L2_EPS)


ADAM_LR, ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_STEP = 1e-3, 0.9, 0.999, 1e-8, 10


def adam_step(p, g, m, v):
    """One bias-corrected Adam update at step 10, functional: returns (p', m', v')."""
    m_new = ADAM_BETA1 * m + (1.0 - ADAM_BETA1) * g
    v_new = ADAM_BETA2 * v + (1.0 - ADAM_BETA2) * (g * g)
    m_hat = m_new / (1.0 - ADAM_BETA1 ** ADAM_STEP)
    v_hat = v_new / (1.0 - ADAM_BETA2 ** ADAM_STEP)
    p_new = p - ADAM_LR * m_hat / (np.sqrt(v_hat) + ADAM_EPS)
    return p_new, m_new, v_new


BS_RATE, BS_VOL = 0.02, 0.3
# Standard normal CDF by the Abramowitz & Stegun 26.2.17 polynomial (|error| < 7.5e-8).
CDF_P = 0.2316419
CDF_B1, CDF_B2, CDF_B3, CDF_B4, CDF_B5 = (
    0.319381530, -0.356563782, 1.781477937, -1.821255978, 1.330274429)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def normal_cdf(d):
    """Phi(d) by the A&S polynomial, evaluated on |d| and reflected for d < 0."""
    k = 1.0 / (1.0 + CDF_P * np.abs(d))
    poly = k * (CDF_B1 + k * (CDF_B2 + k * (CDF_B3 + k * (CDF_B4 + k * CDF_B5))))
    upper = 1.0 - INV_SQRT_2PI * np.exp(-0.5 * (d * d)) * poly
    return np.where(d < 0.0, 1.0 - upper, upper)


def black_scholes(S, K, T):
    """European call and put prices (Black-Scholes, rate 2%, volatility 30%)."""
    vol_sqrt_t = BS_VOL * np.sqrt(T)
    d1 = (np.log(S / K) + (BS_RATE + 0.5 * BS_VOL * BS_VOL) * T) / vol_sqrt_t
    d2 = d1 - vol_sqrt_t
    cdf1 = normal_cdf(d1)
    cdf2 = normal_cdf(d2)
    strike_pv = K * np.exp(-BS_RATE * T)
    call = S * cdf1 - strike_pv * cdf2
    put = strike_pv * (1.0 - cdf2) - S * (1.0 - cdf1)
    return call, put


EARTH_RADIUS_KM = 6371.0


def haversine(lat1, lon1, lat2, lon2):
    """Great-circle distance in km between point pairs given in radians."""
    sin_dlat = np.sin(0.5 * (lat2 - lat1))
    sin_dlon = np.sin(0.5 * (lon2 - lon1))
    h = sin_dlat * sin_dlat + np.cos(lat1) * np.cos(lat2) * (sin_dlon * sin_dlon)
    return (2.0 * EARTH_RADIUS_KM) * np.arcsin(np.sqrt(np.minimum(h, 1.0)))


def moments(x):
    """Mean and population variance of the whole array (two-pass form)."""
    mean = np.mean(x)
    dev = x - mean
    return mean, np.mean(dev * dev)


def pairwise_min(X, Y):
    """For every row of X, the smallest squared Euclidean distance to any row of Y."""
    diff = X[:, None, :] - Y[None, :, :]
    return np.min(np.sum(diff * diff, axis=-1), axis=1)


def linear_relu(x, w, b):
    """A dense layer with ReLU: max(x @ w + b, 0)."""
    return np.maximum(x @ w + b, 0.0)


def argmax_rows(x):
    """The position of each row's maximum (NumPy's first occurrence)."""
    return np.argmax(x, axis=1)


def argmin_rows(x):
    """The position of each row's minimum (NumPy's first occurrence)."""
    return np.argmin(x, axis=1)


# ======================================================================================
# Specifications: shapes, input ranges, cost model, accuracy tolerance.
# ======================================================================================

Dims = Dict[str, int]
ShapeFn = Callable[[Dims], Tuple[int, ...]]


@dataclass(frozen=True)
class Arg:
    """One array argument: its shape (from the size's dims) and the uniform range it is drawn from."""
    name: str
    shape: ShapeFn
    low: float
    high: float


@dataclass(frozen=True)
class Workload:
    """A workload and everything the benchmark needs to run, cost and check it."""
    name: str
    fn: Callable
    kind: str
    args: Tuple[Arg, ...]
    out_shapes: Callable[[Dims], Tuple[Tuple[int, ...], ...]]
    flops_fn: Callable[[Dims], float]  # nominal: every +,-,*,/,max,exp,sqrt,... counts 1
    sizes: Dict[str, Dims]
    tol: float = 1e-4                  # accepted relative 2-norm error against float64

    def dims(self, size: str) -> Dims:
        return dict(self.sizes[size])

    def shapes(self, size: str) -> Dict[str, Tuple[int, ...]]:
        d = self.dims(size)
        return {a.name: tuple(a.shape(d)) for a in self.args}

    def bytes(self, size: str) -> int:
        """Minimal bytes moved: every input read once and every output written once."""
        d = self.dims(size)
        shapes = [a.shape(d) for a in self.args] + list(self.out_shapes(d))
        return F32_BYTES * sum(math.prod(s) for s in shapes)

    def flops(self, size: str) -> float:
        return float(self.flops_fn(self.dims(size)))


def _vec(d):          # one long vector of N elements
    return (d["N"],)


def _mat(d):          # M rows of N elements
    return (d["M"], d["N"])


def _row_vec(d):      # one value per column, broadcast over rows
    return (d["N"],)


def _per_row(d):      # one value per row
    return (d["M"],)


def _elementwise(name, fn, ranges, n_out, flops_per_elem, n_cpu, n_gpu, kind="elementwise"):
    """Spec of an elementwise workload over vectors of N elements."""
    args = tuple(Arg(a, _vec, lo, hi) for a, (lo, hi) in ranges)
    return Workload(name, fn, kind, args,
                    out_shapes=lambda d: (_vec(d),) * n_out,
                    flops_fn=lambda d: flops_per_elem * d["N"],
                    sizes={"check": {"N": 10007}, "cpu": {"N": n_cpu}, "gpu": {"N": n_gpu}})


ROW_CHECK = {"M": 37, "N": 300}

_SPECS = [
    _elementwise("ew_chain", ew_chain, [(c, (-2.0, 2.0)) for c in "abcd"], 1, 5, 1 << 21, 1 << 28),
    _elementwise("gelu_tanh", gelu_tanh, [("x", (-5.0, 5.0))], 1, 9, 1 << 22, 1 << 29),
    Workload("softmax", softmax, "row reduction", (Arg("x", _mat, -6.0, 6.0),),
             out_shapes=lambda d: (_mat(d),),
             flops_fn=lambda d: 5 * d["M"] * d["N"],
             sizes={"check": ROW_CHECK, "cpu": {"M": 2048, "N": 2048},
                    "gpu": {"M": 1 << 17, "N": 4096}}),
    Workload("logsumexp", logsumexp, "row reduction", (Arg("x", _mat, -6.0, 6.0),),
             out_shapes=lambda d: (_per_row(d),),
             flops_fn=lambda d: 4 * d["M"] * d["N"] + 2 * d["M"],
             sizes={"check": ROW_CHECK, "cpu": {"M": 2048, "N": 2048},
                    "gpu": {"M": 1 << 17, "N": 4096}}),
    Workload("layernorm", layernorm, "row reduction",
             (Arg("x", _mat, -3.0, 5.0), Arg("gamma", _row_vec, 0.5, 1.5),
              Arg("beta", _row_vec, -0.5, 0.5)),
             out_shapes=lambda d: (_mat(d),),
             flops_fn=lambda d: 7 * d["M"] * d["N"] + 2 * d["M"],
             sizes={"check": ROW_CHECK, "cpu": {"M": 1024, "N": 4096},
                    "gpu": {"M": 1 << 16, "N": 8192}}),
    Workload("rmsnorm", rmsnorm, "row reduction",
             (Arg("x", _mat, -3.0, 3.0), Arg("w", _row_vec, 0.5, 1.5)),
             out_shapes=lambda d: (_mat(d),),
             flops_fn=lambda d: 4 * d["M"] * d["N"] + 2 * d["M"],
             sizes={"check": ROW_CHECK, "cpu": {"M": 1024, "N": 4096},
                    "gpu": {"M": 1 << 16, "N": 8192}}),
    Workload("l2_normalize", l2_normalize, "row reduction, short rows",
             (Arg("x", _mat, -1.0, 1.0),),
             out_shapes=lambda d: (_mat(d),),
             flops_fn=lambda d: 3 * d["M"] * d["N"] + 2 * d["M"],
             sizes={"check": {"M": 301, "N": 33}, "cpu": {"M": 32768, "N": 128},
                    "gpu": {"M": 1 << 22, "N": 128}}),
    _elementwise("adam_step", adam_step,
                 [("p", (-1.0, 1.0)), ("g", (-1.0, 1.0)), ("m", (-0.1, 0.1)), ("v", (1e-4, 1e-2))],
                 3, 14, 1 << 20, 1 << 27, kind="elementwise, 4 in / 3 out"),
    _elementwise("black_scholes", black_scholes,
                 [("S", (10.0, 200.0)), ("K", (10.0, 200.0)), ("T", (0.1, 3.0))],
                 2, 64, 1 << 21, 1 << 28, kind="elementwise, 3 in / 2 out, 9 transcendentals"),
    _elementwise("haversine", haversine,
                 [("lat1", (-1.5, 1.5)), ("lon1", (-3.1, 3.1)),
                  ("lat2", (-1.5, 1.5)), ("lon2", (-3.1, 3.1))],
                 1, 18, 1 << 21, 1 << 28, kind="elementwise, trig-heavy"),
    Workload("moments", moments, "full reduction", (Arg("x", _vec, 1.0, 5.0),),
             out_shapes=lambda d: ((), ()),
             flops_fn=lambda d: 4 * d["N"],
             sizes={"check": {"N": 100003}, "cpu": {"N": 1 << 23}, "gpu": {"N": 1 << 30}}),
    Workload("pairwise_min", pairwise_min, "broadcast + reduction, compute-bound",
             (Arg("X", lambda d: (d["M"], d["D"]), 0.0, 1.0),
              Arg("Y", lambda d: (d["N"], d["D"]), 0.0, 1.0)),
             out_shapes=lambda d: (_per_row(d),),
             flops_fn=lambda d: d["M"] * d["N"] * (3 * d["D"] + 1),
             sizes={"check": {"M": 67, "N": 129, "D": 3}, "cpu": {"M": 2048, "N": 2048, "D": 3},
                    "gpu": {"M": 32768, "N": 32768, "D": 3}},
             tol=1e-3),
    Workload("linear_relu", linear_relu, "matmul + epilogue, compute-bound",
             (Arg("x", lambda d: (d["M"], d["K"]), -1.0, 1.0),
              Arg("w", lambda d: (d["K"], d["N"]), -0.03, 0.03),
              Arg("b", lambda d: (d["N"],), -0.5, 0.5)),
             out_shapes=lambda d: ((d["M"], d["N"]),),
             flops_fn=lambda d: 2 * d["M"] * d["K"] * d["N"] + 2 * d["M"] * d["N"],
             sizes={"check": {"M": 65, "K": 96, "N": 80}, "cpu": {"M": 1024, "K": 1024, "N": 1024},
                    "gpu": {"M": 8192, "K": 4096, "N": 4096}},
             tol=1e-2),  # same tolerance as the GPU suite, which allows TF32 matmuls
]

WORKLOADS: Dict[str, Workload] = {w.name: w for w in _SPECS}


def _arg_rows(name: str, fn: Callable) -> Workload:
    """An index-carrying row reduction (issue 17's CPU rows, benchmarks/cpu.py only): int64
    results, compared exactly (tol 0) with the float64 reference's, which are the same
    positions (float32 -> float64 is exact)."""
    return Workload(name, fn, "row arg-reduction", (Arg("x", _mat, -1.0, 1.0),),
                    out_shapes=lambda d: (_per_row(d),),
                    flops_fn=lambda d: d["M"] * d["N"],
                    sizes={"check": ROW_CHECK, "cpu": {"M": 4096, "N": 1024},
                           "gpu": {"M": 1 << 16, "N": 4096}},
                    tol=0.0)


# Workloads of the CPU benchmark beyond the 13 public ones (not in the GPU suite).
CPU_EXTRAS: Dict[str, Workload] = {w.name: w for w in (_arg_rows("argmax_rows", argmax_rows),
                                                       _arg_rows("argmin_rows", argmin_rows))}


def names():
    """The 13 public workloads."""
    return list(WORKLOADS)


def cpu_names():
    """The CPU benchmark's workloads: the 13 public ones, then ``CPU_EXTRAS``."""
    return names() + list(CPU_EXTRAS)


def get(name: str) -> Workload:
    try:
        return WORKLOADS.get(name) or CPU_EXTRAS[name]
    except KeyError:
        known = ", ".join(cpu_names())
        raise KeyError(f"unknown workload {name!r}; known: {known}") from None


# ======================================================================================
# Inputs: deterministic, float32, never zero.
# ======================================================================================

def _uniform_f32(shape, low: float, high: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform float32 on [low, high); an exact 0.0 (possible when the range spans 0) is moved
    to high/2 so that no workload ever divides by, or takes the log of, a zero input."""
    x = rng.random(shape, dtype=np.float32)
    x *= np.float32(high - low)
    x += np.float32(low)
    x[x == 0.0] = np.float32(0.5 * high)
    return x


def make_inputs(name: str, size: str = "cpu", seed: int = 0) -> Dict[str, np.ndarray]:
    """Float32 inputs of a workload, keyed by argument name, in call order.

    Argument i is drawn from its own PCG64 stream seeded by (seed, crc32(name), i), so the
    values depend only on (name, size, seed), not on which other workloads ran before."""
    w = get(name)
    dims = w.dims(size)
    key = zlib.crc32(name.encode())
    inputs = {}
    for i, a in enumerate(w.args):
        rng = np.random.default_rng([seed, key, i])
        inputs[a.name] = _uniform_f32(a.shape(dims), a.low, a.high, rng)
    return inputs


def input_digest(inputs: Dict[str, np.ndarray]) -> str:
    """A short hash of the input bytes: two processes compare it to prove they timed the same data."""
    h = hashlib.sha256()
    for k, v in inputs.items():
        h.update(k.encode())
        h.update(str(v.shape).encode())
        h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()[:16]


# ======================================================================================
# Running and checking.
# ======================================================================================

def as_outputs(result) -> Tuple[np.ndarray, ...]:
    """Any framework's result (array, scalar or tuple of them) as a tuple of NumPy arrays."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(np.asarray(r) for r in items)


def run(w: Workload, inputs: Dict[str, np.ndarray], fn: Callable = None):
    """Call fn (the workload's NumPy function by default) on the inputs in argument order."""
    return (fn or w.fn)(*[inputs[a.name] for a in w.args])


def reference(w: Workload, inputs: Dict[str, np.ndarray]) -> Tuple[np.ndarray, ...]:
    """The float64 reference: the same NumPy function on float64 copies of the inputs."""
    wide = {k: v.astype(np.float64) for k, v in inputs.items()}
    return as_outputs(run(w, wide))


def rel_err(out, ref) -> float:
    """||out - ref||_2 / ||ref||_2 in float64; a wrong shape or a non-finite value is inf."""
    o = np.asarray(out, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    if o.shape != r.shape or not np.all(np.isfinite(o)):
        return math.inf
    den = float(np.linalg.norm(r.ravel()))
    num = float(np.linalg.norm((o - r).ravel()))
    return num / den if den > 0 else num


def max_rel_err(result, ref: Tuple[np.ndarray, ...]) -> float:
    """The worst relative error over all outputs; a wrong number of outputs is inf."""
    outs = as_outputs(result)
    if len(outs) != len(ref):
        return math.inf
    return max(rel_err(o, r) for o, r in zip(outs, ref, strict=True))


def with_namespace(fn: Callable, xp: Any) -> Callable:
    """``fn`` with its module's ``np`` bound to ``xp`` (cupy, jax.numpy, ``torch_numpy``), and
    every function of that module rebound the same way, so calls between them (black_scholes
    calls normal_cdf) stay in ``xp``."""
    scope = dict(fn.__globals__)
    scope["np"] = xp
    for name, value in fn.__globals__.items():
        if isinstance(value, types.FunctionType) and value.__module__ == fn.__module__:
            scope[name] = types.FunctionType(value.__code__, scope, value.__name__,
                                             value.__defaults__, value.__closure__)
    return scope[fn.__name__]


def markdown_table(size: str = "cpu") -> str:
    """Workloads, shapes, bytes and flops as a markdown table."""
    lines = ["| workload | kind | shapes (float32) | min bytes | flops | tol |",
             "|---|---|---|---|---|---|"]
    for w in WORKLOADS.values():
        shapes = ", ".join(f"{k}{list(s)}" for k, s in w.shapes(size).items())
        lines.append(f"| {w.name} | {w.kind} | {shapes} | {w.bytes(size) / 1e6:.3g} MB | "
                     f"{w.flops(size) / 1e6:.4g} M | {w.tol:.0e} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    print(markdown_table(sys.argv[1] if len(sys.argv) > 1 else "cpu"))
