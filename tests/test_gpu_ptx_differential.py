"""Every kernel the CPU differential tests build also builds for the GPU, and its PTX
assembles with ``ptxas -arch=sm_90`` (skipped, saying so, when ptxas is not installed).

Each test of ``test_cpu_ops.py`` / ``test_cpu_fusion.py`` runs again here (same programs,
inputs and checks, against the CPU result), and every call also lowers the program with
``device="cuda"`` and assembles each new kernel's PTX (in a thread pool, overlapping the
tests). Marked ``slow``: it compiles every kernel twice and runs ptxas a few thousand times
(about 8 minutes on a 2-core machine; ``-m "not slow"`` leaves it out).
"""
from __future__ import annotations

import hashlib
import os
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

import gpu_differential as gd
import tracearray
from tracearray.gpu import ptx as P

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
_ASSEMBLED: dict[str, Future] = {}
_PENDING: list[tuple[str, Future]] = []


def assemble_later(ptx: str, what: str) -> None:
    key = hashlib.sha256(ptx.encode()).hexdigest()
    if key not in _ASSEMBLED:
        _ASSEMBLED[key] = _POOL.submit(P.ptxas, ptx, "sm_90")
        _PENDING.append((what, _ASSEMBLED[key]))


class _CpuAndPtx:
    """Runs the CPU compiled function (its result is what the test checks) and also lowers
    the program for the GPU, queueing every kernel's PTX for ptxas."""

    def __init__(self, fn, **options):
        self.cpu = tracearray.compile(fn, device="cpu", **options)
        self.gpu = tracearray.compile(fn, device="cuda", **options)

    def __call__(self, *args, **kwargs):
        result = self.cpu(*args, **kwargs)
        for k in self.gpu.lower(*args, **kwargs).executable.kernels:
            assemble_later(k.ptx, k.name)
        return result

    def __getattr__(self, name):
        return getattr(self.cpu, name)


_MODS = gd.collect(globals(), prefix="ptx_")


@pytest.fixture(autouse=True)
def _cpu_tests_also_build_ptx(monkeypatch):
    if P.ptxas_path() is None:
        pytest.skip("ptxas (CUDA toolkit) is not installed: PTX cannot be assembled here")
    gd.patch_compiled(monkeypatch, _MODS, _CpuAndPtx)
    yield
    pending, _PENDING[:] = list(_PENDING), []
    for what, fut in pending:
        fut.result()   # raises PtxasError naming the kernel's ptxas messages
