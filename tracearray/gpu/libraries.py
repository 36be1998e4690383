"""Finding NVIDIA's libraries (cuBLAS, cuFFT) for the GPU backend's library calls.

A library is looked for with ``cuda.pathfinder`` (NVIDIA's wheels, conda, the CUDA toolkit:
what cuda-python itself uses), then by the system's loader under its usual names and in the
CUDA toolkit's folders (``CUDA_HOME``, ``CUDA_PATH``, ``/usr/local/cuda``). None is loaded
until a call needs it; a missing one is not an error: the kernel or host path runs instead.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import os
import threading
from typing import Any, Callable, Sequence

from .. import forksafe

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


def either(first: Callable | None, second: Callable) -> Callable:
    """A device implementation that tries ``first`` and, when it declines the call
    (``NotImplemented``), ``second`` (the block kernels, then cuSOLVER); ``second`` alone when
    there is no ``first``."""
    if first is None:
        return second

    def implementation(dev: Any, operands: list, results: list, **attrs: Any) -> Any:
        done = first(dev, operands, results, **attrs)
        return second(dev, operands, results, **attrs) if done is NotImplemented else done
    implementation.__name__ = f"{getattr(first, '__name__', 'first')}_or_" \
                              f"{getattr(second, '__name__', 'second')}"
    implementation.parts = (first, second)
    return implementation


class PendingInfo:
    """What a device implementation returns when its result's validity is known only on the
    device (a singular matrix found by an LU): per-matrix int32 ``info`` words in the memory
    ``block`` (non-zero: ``error`` is NumPy's exception), read when the host next waits for
    the device (``gpu/runtime.py``'s pending errors)."""

    def __init__(self, block: Any, count: int, error: Exception):
        self.block, self.count, self.error = block, count, error


class ProcessLibrary:
    """One NVIDIA library per process, bound to the device's stream on first use:
    ``get(device)`` is ``make(CDLL, stream_handle)`` made once, or None when the library is
    missing, turned off, the device is not CUDA's, or ``make`` raises one of ``errors``."""

    def __init__(self, libname: str, sonames: Sequence[str], make: Callable[[Any, int], Any],
                 errors: tuple = (RuntimeError, AttributeError)):
        self.libname, self.sonames, self.make, self.errors = libname, sonames, make, errors
        self.value: Any = None
        self.tried = False
        self._lock = threading.Lock()
        forksafe.renew_at_fork(self, "_lock")

    def get(self, device: Any) -> Any:
        if not usable_on(device):
            return None
        with self._lock:
            if not self.tried:
                self.tried = True
                lib = load_library(self.libname, self.sonames)
                if lib is not None:
                    try:
                        self.value = self.make(lib, device.stream_handle)
                    except self.errors as e:
                        config.log(config.COMPILES, "%s not used: %s", self.libname, e)
            return self.value


def row_groups(dims: Sequence[tuple[int, int, int]]
               ) -> tuple[int, int, int, list[tuple[int, int]]] | None:
    """A library call's batch over ``dims`` (size, input stride, output stride; the axes
    besides the one it works along, in C order): the longest run of consecutive axes that
    walk both arrays as one arithmetic progression is the batch, (its count, input and output
    distance, the start offsets of one call per position of the other axes); None when there
    are no such axes (one call, no batch)."""
    dims = [d for d in dims if d[0] != 1]
    runs: list[list[int]] = []
    for i, (size, s_in, s_out) in enumerate(dims):
        if runs and dims[runs[-1][-1]][1] == s_in * size and dims[runs[-1][-1]][2] == s_out * size:
            runs[-1].append(i)
        else:
            runs.append([i])
    if not runs:
        return None
    best = max(runs, key=lambda r: math.prod(dims[i][0] for i in r))
    rest = [dims[i] for i in range(len(dims)) if i not in best]
    starts = [(sum(i * d[1] for i, d in zip(pos, rest)), sum(i * d[2] for i, d in zip(pos, rest)))
              for pos in itertools.product(*[range(d[0]) for d in rest])]
    return (math.prod(dims[i][0] for i in best), dims[best[-1]][1], dims[best[-1]][2], starts)
