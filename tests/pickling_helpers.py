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


def call_and_count(cf, *args):
    """Run ``cf`` in this (child) process; its result and this process's JIT counters."""
    from tracearray.cpu.jit import get_jit
    out = cf(*args)
    stats = get_jit().stats
    return out, stats.compiles, stats.disk_hits, cf.stats.traces
