"""Baselines that tracearray is measured against: numexpr expressions, numba loops and jax.jit.

numexpr
    One ``numexpr.evaluate`` per fused elementwise stage.  Python-float constants are passed as
    float32 scalars, otherwise numexpr would promote the whole expression to float64.
    Elementwise workloads are single expressions.  Row reductions are hybrids, because numexpr
    allows only one reduction, as the outermost operation, per expression:
      softmax, logsumexp   NumPy row max (numexpr's max reduction is >10x slower than NumPy's)
                           + numexpr exp/sum(axis=1) + numexpr epilogue
      layernorm, rmsnorm,  numexpr sum(axis=1) for the row statistics + numexpr epilogue
      l2_normalize
      moments              numexpr sum() of the whole array, accumulated in float64 (a float64
                           constant in the expression): numexpr's float32 sum of 8M values is off
                           by ~1e-2 and would fail the accuracy check
      pairwise_min         numexpr sum(axis=2) over the broadcast + NumPy row min
    linear_relu has no numexpr form (no matmul).

numba
    Hand-written ``@njit(parallel=True, fastmath=False)`` loops, ``prange`` over elements or
    rows, float32 data and float32 constants, float64 accumulators in reductions (so they are
    accurate, and also latency-bound: without fastmath LLVM may not reorder the adds).
    linear_relu is a hand-written loop too (4-row blocks, vectorised over columns), not a BLAS
    call: it is several times slower than NumPy's OpenBLAS matmul.

jax.jit
    The workload's own NumPy source with ``np`` bound to ``jax.numpy`` (``W.with_namespace``),
    under ``jax.jit``, on the CPU backend, float32 (x64 off), its inputs put on the device
    once; a call waits for its result (``jax.block_until_ready``).

numba and JAX are not dependencies of tracearray.  Each is used in-process when importable;
otherwise (or when asked) in another interpreter, ``python baselines.py --numba-worker`` or
``--jax-worker``, driven by ``RemoteNumba`` / ``RemoteJax``: the worker rebuilds the inputs
from (workload, size, seed) with the same deterministic generator, proves it by returning
their digest, and answers one JSON line per request on stdout, so the parent can interleave
its calls with the other frameworks'.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, Optional

import numpy as np

if __package__ in (None, ""):  # run as a script (the numba worker): make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import workloads as W  # noqa: E402

f32 = np.float32

# ======================================================================================
# numexpr
# ======================================================================================

NUMEXPR_HYBRID = {
    "softmax": "NumPy row max + numexpr exp/sum/divide",
    "logsumexp": "NumPy row max + numexpr sum(exp)/log",
    "layernorm": "numexpr row sums + numexpr epilogue",
    "rmsnorm": "numexpr row sum + numexpr epilogue",
    "l2_normalize": "numexpr row sum + numexpr epilogue",
    "moments": "numexpr full sums, float64 accumulation",
    "pairwise_min": "numexpr sum(axis=2) + NumPy row min",
}


def numexpr_available() -> bool:
    try:
        import numexpr  # noqa: F401
        return True
    except ImportError:
        return False


def _ne(expr: str, **names):
    """numexpr.evaluate with Python floats turned into float32 scalars (no float64 promotion)."""
    import numexpr
    local = {k: (f32(v) if type(v) is float else v) for k, v in names.items()}  # not np.float64
    return numexpr.evaluate(expr, local_dict=local)


def ne_ew_chain(a, b, c, d):
    return _ne("a*b + c*exp(-d)", a=a, b=b, c=c, d=d)


def ne_gelu_tanh(x):
    return _ne("h*x*(one + tanh(k*(x + c*(x*x*x))))",
               x=x, h=0.5, one=1.0, k=W.SQRT_2_OVER_PI, c=0.044715)


def ne_softmax(x):
    m = np.max(x, axis=1, keepdims=True)
    e = _ne("exp(x - m)", x=x, m=m)
    s = _ne("sum(e, axis=1)", e=e)[:, None]
    return _ne("e / s", e=e, s=s)


def ne_logsumexp(x):
    m = np.max(x, axis=1)
    s = _ne("sum(exp(x - m), axis=1)", x=x, m=m[:, None])
    return _ne("m + log(s)", m=m, s=s)


def ne_layernorm(x, gamma, beta):
    inv_n = 1.0 / x.shape[1]
    mean = (_ne("sum(x, axis=1)", x=x) * f32(inv_n))[:, None]
    xc = _ne("x - mean", x=x, mean=mean)
    var = (_ne("sum(xc*xc, axis=1)", xc=xc) * f32(inv_n))[:, None]
    return _ne("xc / sqrt(var + eps) * g + b", xc=xc, var=var, eps=W.LAYERNORM_EPS, g=gamma, b=beta)


def ne_rmsnorm(x, w):
    ms = (_ne("sum(x*x, axis=1)", x=x) * f32(1.0 / x.shape[1]))[:, None]
    return _ne("x / sqrt(ms + eps) * w", x=x, ms=ms, eps=W.RMSNORM_EPS, w=w)


def ne_l2_normalize(x):
    sum_sq = _ne("sum(x*x, axis=1)", x=x)
    norm = _ne("sqrt(s)", s=sum_sq)[:, None]  # a separate call: the reduction must be outermost
    return _ne("x / where(n > eps, n, eps)", x=x, n=norm, eps=W.L2_EPS)


def ne_adam_step(p, g, m, v):
    b1, b2 = W.ADAM_BETA1, W.ADAM_BETA2
    m1 = _ne("b1*m + c1*g", m=m, g=g, b1=b1, c1=1.0 - b1)
    v1 = _ne("b2*v + c2*(g*g)", v=v, g=g, b2=b2, c2=1.0 - b2)
    p1 = _ne("p - lr*(m1/bc1) / (sqrt(v1/bc2) + eps)", p=p, m1=m1, v1=v1, lr=W.ADAM_LR,
             bc1=1.0 - b1 ** W.ADAM_STEP, bc2=1.0 - b2 ** W.ADAM_STEP, eps=W.ADAM_EPS)
    return p1, m1, v1


def _ne_normal_cdf(d):
    upper = _ne("one - r*exp(-h*(d*d)) * (k*(b1 + k*(b2 + k*(b3 + k*(b4 + k*b5)))))",
                d=d, k=_ne("one / (one + p*abs(d))", d=d, one=1.0, p=W.CDF_P),
                one=1.0, r=W.INV_SQRT_2PI, h=0.5, b1=W.CDF_B1, b2=W.CDF_B2, b3=W.CDF_B3,
                b4=W.CDF_B4, b5=W.CDF_B5)
    return _ne("where(d < 0, one - u, u)", d=d, u=upper, one=1.0)


def ne_black_scholes(S, K, T):
    vst = _ne("vol*sqrt(T)", T=T, vol=W.BS_VOL)
    d1 = _ne("(log(S/K) + c*T) / vst", S=S, K=K, T=T, vst=vst, c=W.BS_RATE + 0.5 * W.BS_VOL ** 2)
    d2 = _ne("d1 - vst", d1=d1, vst=vst)
    n1, n2 = _ne_normal_cdf(d1), _ne_normal_cdf(d2)
    kpv = _ne("K*exp(-r*T)", K=K, T=T, r=W.BS_RATE)
    call = _ne("S*n1 - kpv*n2", S=S, n1=n1, n2=n2, kpv=kpv)
    put = _ne("kpv*(one - n2) - S*(one - n1)", S=S, n1=n1, n2=n2, kpv=kpv, one=1.0)
    return call, put


def ne_haversine(lat1, lon1, lat2, lon2):
    h = _ne("sin(half*(lat2 - lat1))**2 + cos(lat1)*cos(lat2)*sin(half*(lon2 - lon1))**2",
            lat1=lat1, lon1=lon1, lat2=lat2, lon2=lon2, half=0.5)
    return _ne("r2*arcsin(sqrt(where(h < one, h, one)))", h=h, one=1.0, r2=2.0 * W.EARTH_RADIUS_KM)


def ne_moments(x):
    one64 = np.float64(1.0)  # a float64 operand makes numexpr accumulate in float64
    mean = float(_ne("sum(x*one)", x=x, one=one64)) / x.size
    var = float(_ne("sum((x - m)**2)", x=x, m=np.float64(mean))) / x.size
    return f32(mean), f32(var)


def ne_pairwise_min(X, Y):
    d2 = _ne("sum((a - b)**2, axis=2)", a=X[:, None, :], b=Y[None, :, :])
    return np.min(d2, axis=1)


NUMEXPR: Dict[str, Callable] = {
    "ew_chain": ne_ew_chain, "gelu_tanh": ne_gelu_tanh, "softmax": ne_softmax,
    "logsumexp": ne_logsumexp, "layernorm": ne_layernorm, "rmsnorm": ne_rmsnorm,
    "l2_normalize": ne_l2_normalize, "adam_step": ne_adam_step,
    "black_scholes": ne_black_scholes, "haversine": ne_haversine, "moments": ne_moments,
    "pairwise_min": ne_pairwise_min,
}


# ======================================================================================
# numba loops (in-process)
# ======================================================================================

def numba_available() -> bool:
    try:
        import numba  # noqa: F401
        return True
    except Exception:  # ImportError, or numba refusing the installed llvmlite/NumPy
        return False


_NUMBA_KERNELS: Optional[Dict[str, Callable]] = None


def numba_kernels() -> Dict[str, Callable]:
    """The numba baselines, each with the workload's own signature (arrays in, arrays out).

    Built once, on first use, so that importing this module never needs numba; each kernel
    is compiled lazily on its first call (which the benchmark times as numba's cold start)."""
    global _NUMBA_KERNELS
    if _NUMBA_KERNELS is None:
        _NUMBA_KERNELS = _build_numba_kernels()
    return _NUMBA_KERNELS


def _build_numba_kernels() -> Dict[str, Callable]:
    from numba import njit, prange

    jit = njit(parallel=True, fastmath=False)
    ZERO, HALF, ONE = f32(0.0), f32(0.5), f32(1.0)
    GELU_K, GELU_C = f32(W.SQRT_2_OVER_PI), f32(0.044715)
    LN_EPS, RMS_EPS, L2_EPS = f32(W.LAYERNORM_EPS), f32(W.RMSNORM_EPS), f32(W.L2_EPS)
    B1, B2 = f32(W.ADAM_BETA1), f32(W.ADAM_BETA2)
    C1, C2 = f32(1.0 - W.ADAM_BETA1), f32(1.0 - W.ADAM_BETA2)
    INV_BC1 = f32(1.0 / (1.0 - W.ADAM_BETA1 ** W.ADAM_STEP))
    INV_BC2 = f32(1.0 / (1.0 - W.ADAM_BETA2 ** W.ADAM_STEP))
    LR, ADAM_EPS = f32(W.ADAM_LR), f32(W.ADAM_EPS)
    RATE, VOL = f32(W.BS_RATE), f32(W.BS_VOL)
    DRIFT = f32(W.BS_RATE + 0.5 * W.BS_VOL * W.BS_VOL)
    CP, R2PI = f32(W.CDF_P), f32(W.INV_SQRT_2PI)
    P1, P2, P3, P4, P5 = (f32(c) for c in (W.CDF_B1, W.CDF_B2, W.CDF_B3, W.CDF_B4, W.CDF_B5))
    TWO_R = f32(2.0 * W.EARTH_RADIUS_KM)
    INF = f32(np.inf)
    ROWS = 4  # linear_relu: rows of x that share one pass over w

    @jit
    def ew_chain_k(a, b, c, d, out):
        for i in prange(a.size):
            out[i] = a[i] * b[i] + c[i] * np.exp(-d[i])

    @jit
    def gelu_k(x, out):
        for i in prange(x.size):
            v = x[i]
            out[i] = HALF * v * (ONE + np.tanh(GELU_K * (v + GELU_C * (v * v * v))))

    @jit
    def softmax_k(x, out):
        for i in prange(x.shape[0]):
            row, dst = x[i], out[i]
            m = row.max()
            total = 0.0
            for j in range(row.size):
                e = np.exp(row[j] - m)
                dst[j] = e
                total += e
            scale = ONE / f32(total)
            for j in range(row.size):
                dst[j] *= scale

    @jit
    def logsumexp_k(x, out):
        for i in prange(x.shape[0]):
            row = x[i]
            m = row.max()
            total = 0.0
            for j in range(row.size):
                total += np.exp(row[j] - m)
            out[i] = m + f32(np.log(total))

    @jit
    def layernorm_k(x, gamma, beta, out):
        n = x.shape[1]
        for i in prange(x.shape[0]):
            row, dst = x[i], out[i]
            s = 0.0
            for j in range(n):
                s += row[j]
            mean = f32(s / n)
            q = 0.0
            for j in range(n):
                c = row[j] - mean
                q += c * c
            rstd = f32(1.0 / np.sqrt(q / n + LN_EPS))
            for j in range(n):
                dst[j] = (row[j] - mean) * rstd * gamma[j] + beta[j]

    @jit
    def rmsnorm_k(x, w, out):
        n = x.shape[1]
        for i in prange(x.shape[0]):
            row, dst = x[i], out[i]
            q = 0.0
            for j in range(n):
                q += row[j] * row[j]
            r = f32(1.0 / np.sqrt(q / n + RMS_EPS))
            for j in range(n):
                dst[j] = row[j] * r * w[j]

    @jit
    def l2_normalize_k(x, out):
        for i in prange(x.shape[0]):
            row, dst = x[i], out[i]
            q = 0.0
            for j in range(row.size):
                q += row[j] * row[j]
            r = f32(1.0 / max(np.sqrt(q), L2_EPS))
            for j in range(row.size):
                dst[j] = row[j] * r

    @jit
    def adam_k(p, g, m, v, p1, m1, v1):
        for i in prange(p.size):
            gi = g[i]
            mi = B1 * m[i] + C1 * gi
            vi = B2 * v[i] + C2 * (gi * gi)
            m1[i] = mi
            v1[i] = vi
            p1[i] = p[i] - LR * (mi * INV_BC1) / (np.sqrt(vi * INV_BC2) + ADAM_EPS)

    @njit(inline="always")
    def normal_cdf(d):
        k = ONE / (ONE + CP * abs(d))
        upper = ONE - R2PI * np.exp(-HALF * (d * d)) * (k * (P1 + k * (P2 + k * (P3 + k * (P4 + k * P5)))))
        return ONE - upper if d < ZERO else upper

    @jit
    def black_scholes_k(S, K, T, call, put):
        for i in prange(S.size):
            vst = VOL * np.sqrt(T[i])
            d1 = (np.log(S[i] / K[i]) + DRIFT * T[i]) / vst
            n1 = normal_cdf(d1)
            n2 = normal_cdf(d1 - vst)
            kpv = K[i] * np.exp(-RATE * T[i])
            call[i] = S[i] * n1 - kpv * n2
            put[i] = kpv * (ONE - n2) - S[i] * (ONE - n1)

    @jit
    def haversine_k(lat1, lon1, lat2, lon2, out):
        for i in prange(lat1.size):
            sa = np.sin(HALF * (lat2[i] - lat1[i]))
            so = np.sin(HALF * (lon2[i] - lon1[i]))
            h = min(sa * sa + np.cos(lat1[i]) * np.cos(lat2[i]) * (so * so), ONE)
            out[i] = TWO_R * np.arcsin(np.sqrt(h))

    @jit
    def moments_k(x):
        s = 0.0
        for i in prange(x.size):
            s += x[i]
        mean = s / x.size
        q = 0.0
        for i in prange(x.size):
            d = x[i] - mean
            q += d * d
        return f32(mean), f32(q / x.size)

    @jit
    def pairwise_min_k(X, Y, out):
        for i in prange(X.shape[0]):
            best = INF
            for j in range(Y.shape[0]):
                acc = ZERO
                for k in range(X.shape[1]):
                    t = X[i, k] - Y[j, k]
                    acc += t * t
                best = min(best, acc)
            out[i] = best

    @jit
    def linear_relu_k(x, w, b, out):
        M, K = x.shape
        for blk in prange((M + ROWS - 1) // ROWS):
            lo, hi = blk * ROWS, min(blk * ROWS + ROWS, M)
            for i in range(lo, hi):
                out[i, :] = b
            for k in range(K):          # one pass over w serves ROWS output rows
                wk = w[k]
                for i in range(lo, hi):
                    a = x[i, k]
                    dst = out[i]
                    for j in range(wk.size):
                        dst[j] += a * wk[j]
            for i in range(lo, hi):
                dst = out[i]
                for j in range(dst.size):
                    if dst[j] < ZERO:
                        dst[j] = ZERO

    @jit
    def argmax_rows_k(x, out):
        for i in prange(x.shape[0]):
            out[i] = np.argmax(x[i])

    @jit
    def argmin_rows_k(x, out):
        for i in prange(x.shape[0]):
            out[i] = np.argmin(x[i])

    def arg_rows(kernel):
        """Wrap a kernel that writes one int64 position per row of its argument."""
        def run(x):
            out = np.empty(x.shape[0], np.int64)
            kernel(x, out)
            return out
        return run

    def like(kernel):
        """Wrap a kernel that writes one output shaped like its first argument."""
        def run(*args):
            out = np.empty_like(args[0])
            kernel(*args, out)
            return out
        return run

    def per_row(kernel):
        """Wrap a kernel that writes one value per row of its first argument."""
        def run(*args):
            out = np.empty(args[0].shape[0], np.float32)
            kernel(*args, out)
            return out
        return run

    def adam(p, g, m, v):
        p1, m1, v1 = np.empty_like(p), np.empty_like(m), np.empty_like(v)
        adam_k(p, g, m, v, p1, m1, v1)
        return p1, m1, v1

    def black_scholes(S, K, T):
        call, put = np.empty_like(S), np.empty_like(S)
        black_scholes_k(S, K, T, call, put)
        return call, put

    def moments(x):
        mean, var = moments_k(x)  # numba boxes float32 scalars as Python floats
        return f32(mean), f32(var)

    def linear_relu(x, w, b):
        out = np.empty((x.shape[0], w.shape[1]), np.float32)
        linear_relu_k(x, w, b, out)
        return out

    return {
        "ew_chain": like(ew_chain_k), "gelu_tanh": like(gelu_k), "softmax": like(softmax_k),
        "logsumexp": per_row(logsumexp_k), "layernorm": like(layernorm_k),
        "rmsnorm": like(rmsnorm_k), "l2_normalize": like(l2_normalize_k), "adam_step": adam,
        "black_scholes": black_scholes, "haversine": like(haversine_k), "moments": moments,
        "pairwise_min": per_row(pairwise_min_k), "linear_relu": linear_relu,
        "argmax_rows": arg_rows(argmax_rows_k), "argmin_rows": arg_rows(argmin_rows_k),
    }


# ======================================================================================
# jax.jit (in-process)
# ======================================================================================

def jax_available() -> bool:
    try:
        import jax  # noqa: F401
        return True
    except Exception:
        return False


_JAX_KERNELS: Optional[Dict[str, Callable]] = None


def jax_kernels() -> Dict[str, Callable]:
    """``jax.jit`` of every workload's NumPy source, each call waiting for its result.

    The CPU backend is selected before anything runs (a machine with a GPU jaxlib would
    otherwise take the GPU); each function is traced and compiled on its first call."""
    global _JAX_KERNELS
    if _JAX_KERNELS is None:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")

        def jitted(fn: Callable) -> Callable:
            compiled = jax.jit(W.with_namespace(fn, jnp))
            return lambda *args: jax.block_until_ready(compiled(*args))
        _JAX_KERNELS = {name: jitted(W.get(name).fn) for name in W.cpu_names()}
    return _JAX_KERNELS


def jax_device_arrays(arrays: list) -> list:
    """The inputs on JAX's CPU device, copied once (as a user's data already lives there)."""
    import jax
    return [jax.device_put(a) for a in arrays]


def jax_versions() -> dict:
    import jax
    import jaxlib
    return dict(jax=jax.__version__, jaxlib=jaxlib.__version__, numpy=np.__version__,
                python=sys.version.split()[0], backend=jax.default_backend(),
                devices=[str(d) for d in jax.devices()])


# ======================================================================================
# numba and JAX in another interpreter
# ======================================================================================

NUMBA_PYTHON_ENV = "TRACEARRAY_NUMBA_PYTHON"
JAX_PYTHON_ENV = "TRACEARRAY_JAX_PYTHON"


def numba_versions() -> dict:
    """Versions and thread count of the numba in this process (raises if numba is missing)."""
    import llvmlite
    import numba
    return dict(numba=numba.__version__, llvmlite=llvmlite.__version__, numpy=np.__version__,
                python=sys.version.split()[0], numba_threads=numba.get_num_threads(),
                threading_layer=str(numba.config.THREADING_LAYER))


# What a worker serves, by its command-line flag: its kernels, how its inputs are prepared,
# and its versions.
WORKER_KINDS: Dict[str, dict] = {
    "numba": dict(kernels=numba_kernels, prepare=list, versions=numba_versions),
    "jax": dict(kernels=jax_kernels, prepare=jax_device_arrays, versions=jax_versions),
}


class RemoteWorker:
    """One kind of baseline run by ``python baselines.py --<kind>-worker`` in another interpreter.

    Why: numba pins the llvmlite it works with, and tracearray needs its own; JAX brings its
    own NumPy requirements; a separate venv keeps both out of the project's environment.  The
    worker regenerates the inputs from (workload, size, seed) and answers one JSON line per
    request, so the caller can time one call at a time, interleaved with its in-process
    frameworks.  Timings are taken in the worker around the kernel call alone; the pipe round
    trip is not counted."""

    kind = ""

    def __init__(self, python: str):
        self.python = python
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), f"--{self.kind}-worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        try:
            self.info = self._ask(op="info")
        except BaseException:  # e.g. no numba there: do not leave the worker running
            self.close()
            raise

    def _ask(self, **request) -> dict:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.kind} worker ({self.python}) exited with {self.proc.returncode}")
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.kind} worker ({self.python}) died (exit {self.proc.wait()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.kind} worker: {reply['error']}")
        return reply

    def load(self, name: str, size: str, seed: int) -> dict:
        """Build the inputs, compile and check the kernel: {digest, first_call_s, rel_err, dtypes}."""
        return self._ask(op="load", workload=name, size=size, seed=seed)

    def time_once(self) -> float:
        """Seconds for one warm call of the loaded workload."""
        return self._ask(op="time")["s"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RemoteNumba(RemoteWorker):
    """The numba loops in another interpreter (one with numba installed)."""
    kind = "numba"


class RemoteJax(RemoteWorker):
    """jax.jit of the workloads in another interpreter (one with jax and jaxlib installed)."""
    kind = "jax"


def _worker_load(state: dict, kind: dict, workload: str, size: str, seed: int) -> dict:
    """Worker side of 'load': inputs, first (compiling) call, accuracy of a cold and a warm call."""
    state.pop("call", None)  # a failed load must not leave the previous workload timeable
    w = W.get(workload)
    inputs = W.make_inputs(workload, size, seed)
    kernel = kind["kernels"]()[workload]
    args = kind["prepare"]([inputs[a.name] for a in w.args])
    t0 = time.perf_counter()
    cold = kernel(*args)
    first = time.perf_counter() - t0
    ref = W.reference(w, inputs)
    err = max(W.max_rel_err(cold, ref), W.max_rel_err(kernel(*args), ref))
    state["call"] = lambda: kernel(*args)
    dtypes = sorted({str(o.dtype) for o in W.as_outputs(cold)})
    return dict(digest=W.input_digest(inputs), first_call_s=first, rel_err=err, dtypes=dtypes)


def _worker_time(state: dict) -> dict:
    call = state["call"]
    t0 = time.perf_counter()
    call()
    return dict(s=time.perf_counter() - t0)


def worker_main(kind_name: str) -> int:
    """Serve a RemoteWorker: one JSON request per stdin line, one JSON reply per stdout line."""
    kind = WORKER_KINDS[kind_name]
    reply_to = sys.stdout
    sys.stdout = sys.stderr  # stray prints (numba warnings, debug) must not corrupt the protocol
    state: dict = {}
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        if op == "quit":
            break
        try:
            if op == "info":
                reply = kind["versions"]()
            elif op == "load":
                reply = _worker_load(state, kind, **request)
            elif op == "time":
                reply = _worker_time(state)
            else:
                reply = dict(error=f"unknown op {op!r}")
        except Exception as e:  # reported to the parent, which marks the cell as failed
            traceback.print_exc()
            reply = dict(error=f"{type(e).__name__}: {e}"[:500])
        reply_to.write(json.dumps(reply) + "\n")
        reply_to.flush()
    return 0


if __name__ == "__main__":
    flags = {f"--{k}-worker": k for k in WORKER_KINDS}
    if len(sys.argv) == 2 and sys.argv[1] in flags:
        raise SystemExit(worker_main(flags[sys.argv[1]]))
    raise SystemExit(f"usage: {sys.argv[0]} {' | '.join(flags)}   (driven by benchmarks/cpu.py)")
