"""A pytest plugin that fills the PTX disk cache for the GPU test tier on a machine without a GPU.

    TRACEARRAY_CACHE_DIR=$PWD/.ptxcache PYTHONPATH=.:tests/gpu \\
        python -m pytest -m gpu -q -p precompile_plugin tests

GPU tests then run as far as their first kernel launch: every ``GpuExecutable`` they build
lowers and compiles its kernels to PTX (written to ``TRACEARRAY_CACHE_DIR``), and the launch
skips the test. Carrying that folder to the GPU machine (``run_gpu_tests.sh`` reads
``./.ptxcache``) saves the device the LLVM part of compiling. The PTX cache key includes the
target (sm_90, PTX 8.0 here and on an H200 with a CUDA 13 driver), the LLVM and tracearray
versions and the IR text, so an entry is only ever used for exactly the kernel it was made for.
"""
from __future__ import annotations

import pytest

from tracearray.gpu import driver, ptx, runtime


def _skip_at_launch(self, inputs):  # type: ignore[no-untyped-def]
    pytest.skip("precompile run: PTX cached, no GPU to launch on")


driver.is_available = lambda: True                     # type: ignore[assignment]
driver.current_target = lambda: ptx.DEFAULT_TARGET     # type: ignore[assignment]
runtime.current_target = driver.current_target         # imported by name there
runtime.GpuExecutable.run = _skip_at_launch            # type: ignore[assignment]
