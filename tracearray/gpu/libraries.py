"""Finding NVIDIA's libraries (cuBLAS, cuFFT) for the GPU backend's library calls.

A library is looked for with ``cuda.pathfinder`` (NVIDIA's wheels, conda, the CUDA toolkit:
what cuda-python itself uses), then by the system's loader under its usual names and in the
CUDA toolkit's folders (``CUDA_HOME``, ``CUDA_PATH``, ``/usr/local/cuda``). None is loaded
until a call needs it; a missing one is not an error: the kernel or host path runs instead.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Sequence

from .. import config


def load_library(libname: str, sonames: Sequence[str]) -> Any:
    """``ctypes.CDLL`` of NVIDIA's ``libname`` ("cublas", "cufft"), or None."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return ctypes.CDLL(load_nvidia_dynamic_lib(libname).abs_path)
    except Exception:   # noqa: BLE001 -- no pathfinder, or it did not find it: the loader
        pass
    roots = [root for _var, root in config.cuda_toolkit_roots()] + ["/usr/local/cuda"]
    for name in sonames:
        for path in [name] + [os.path.join(r, sub, name) for r in roots
                              for sub in ("lib64", "targets/x86_64-linux/lib", "bin")]:
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


def usable_on(device: Any) -> bool:
    """Whether library calls may run on ``device``'s stream: a CUDA device (not the test
    emulator) and ``TRACEARRAY_GPU_LIBRARIES`` not ``off``."""
    return config.gpu_libraries_enabled() and getattr(device, "uses_cuda_libraries", False)


class PendingInfo:
    """What a device implementation returns when its result's validity is known only on the
    device (a singular matrix found by an LU): per-matrix int32 ``info`` words in the memory
    ``block`` (non-zero: ``error`` is NumPy's exception), read when the host next waits for
    the device (``gpu/runtime.py``'s pending errors)."""

    def __init__(self, block: Any, count: int, error: Exception):
        self.block, self.count, self.error = block, count, error
