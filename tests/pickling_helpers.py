"""Module-level compiled functions for tests that send them to other processes
(``test_pickling.py``, ``test_dask.py``): a pickle refers to them by module and name."""
from __future__ import annotations

import numpy as np

import tracearray


@tracearray.compile
def scaled_exp(x, y):
    return np.exp(x) * y + 1.0


@tracearray.compile(device="cpu", static_argnums=(1,))
def power_sum(x, n):
    return (x ** n).sum(axis=-1)


def plain_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# compiled under another name than its function's: sent as the function and the options
softmax_cpu = tracearray.compile(plain_softmax, device="cpu")


def plain_matmul(a, b):
    return a @ b


matmul_tf32 = tracearray.compile(plain_matmul, device="cpu", matmul_precision="tf32")


def call_and_count(cf, *args):
    """Run ``cf`` in this (child) process; its result and this process's JIT counters."""
    from tracearray.cpu.jit import get_jit
    out = cf(*args)
    stats = get_jit().stats
    return out, stats.compiles, stats.disk_hits, cf.stats.traces


# ---- programs run on Dask arrays (test_dask.py) ---------------------------------------------

@tracearray.compile
def dask_elementwise(x, y):
    return np.exp(x) * y + np.float32(1.0)


@tracearray.compile
def dask_layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


@tracearray.compile
def dask_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@tracearray.compile
def dask_reductions(x):
    return {"sum": x.sum(), "sum0": x.sum(axis=0), "sum1": x.sum(axis=1),
            "prod0": (x * 0.5 + 1.0).prod(axis=0),
            "mean": x.mean(), "mean0": x.mean(axis=0),
            "var": x.var(), "var0": x.var(axis=0), "std": x.std(), "std1": x.std(axis=1),
            "min": x.min(), "max0": x.max(axis=0), "min1": x.min(axis=1),
            "argmax0": x.argmax(axis=0), "argmin1": x.argmin(axis=1), "argmax": x.argmax(),
            "argmin": np.argmin(x),
            "any0": (x > 2.5).any(axis=0), "all": (x > -10).all(), "any": (x > 100).any()}


@tracearray.compile
def dask_mixed(x, y):
    z = (x - x.mean()) / x.std()          # a full reduction broadcast back: two stages
    t = np.tanh(z) * y                    # elementwise on the stage's result
    return z, t.sum(axis=0), t.max(), np.sqrt((t ** 2).mean(axis=1))
