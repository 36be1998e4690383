"""cuSOLVER for the GPU's dense matrices past the block kernels' size (``gpu/dense.py``): a
handle on tracearray's stream and the few routines NumPy's linalg needs, through cuSOLVER's
64-bit generic API (``cusolverDnX*``: one entry point for float32 and float64, the dtype an
argument).

Why a library: a blocked Cholesky, LU, symmetric eigensolver, SVD or nonsymmetric QR
algorithm that uses an H200 well is months of work; cuSOLVER is that work, shipped with the
CUDA toolkit and as NVIDIA's ``nvidia-cusolver`` wheel, found like cuBLAS
(``libraries.load_library``: ``cuda.pathfinder``, then the system's loader). It is bound with
ctypes, as cuBLAS and cuFFT are (``blas.py``, ``fft.py``): one small C API, no extra Python
dependency.

Every routine works in place on column-major matrices in device memory, on the stream; each
call first asks for its workspace sizes (``*_bufferSize``) -- device workspace from
tracearray's allocator, host workspace a buffer the handle keeps -- and writes its ``info``
word to device memory, which ``PendingInfo`` reads when the host next waits. A routine the
loaded library lacks (``cusolverDnXgeev`` is CUDA 12.6's) raises ``AttributeError`` before
anything is queued, and the caller runs NumPy's LAPACK on the host instead.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from .. import forksafe
from .libraries import ProcessLibrary

SONAMES = ("libcusolver.so.12", "libcusolver.so.11", "libcusolver.so", "cusolver64_12.dll",
           "cusolver64_11.dll")
# cudaDataType (real ones: complex matrices run on the host)
R_32F, R_64F = 0, 1
LOWER, UPPER = 0, 1           # cublasFillMode_t
OP_N, OP_T = 0, 1             # cublasOperation_t
NOVECTOR, VECTOR = 0, 1       # cusolverEigMode_t

_P, _I32, _I64, _SIZE = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t


class SolverError(RuntimeError):
    """A cuSOLVER call failed (its status, not a matrix's ``info``)."""


def real_type(dtype: Any) -> int:
    return R_32F if np.dtype(dtype) == np.float32 else R_64F


class Solver:
    """A cuSOLVER dense handle on the device's stream (one per process, made on first use).
    Every method queues one routine on one matrix; ``dev`` gives the workspace's allocator."""

    def __init__(self, lib: Any, stream_handle: int):
        self.lib = lib
        self._lock = threading.Lock()   # a handle is not for concurrent use
        forksafe.renew_at_fork(self, "_lock")
        self._fns: dict[str, Any] = {}
        handle, params = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self._fn("cusolverDnCreate", [_P])(ctypes.byref(handle)), "cusolverDnCreate")
        self.handle = handle
        self._check(self._fn("cusolverDnSetStream", [_P, _P])(handle, _P(stream_handle)),
                    "cusolverDnSetStream")
        self._check(self._fn("cusolverDnCreateParams", [_P])(ctypes.byref(params)),
                    "cusolverDnCreateParams")
        self.params = params
        self._host = ctypes.create_string_buffer(1)   # host workspace, grown as needed

    def _fn(self, name: str, argtypes: list) -> Any:
        fn = self._fns.get(name)
        if fn is None:
            fn = getattr(self.lib, name)      # AttributeError: an older cuSOLVER
            fn.restype = ctypes.c_int
            fn.argtypes = argtypes
            self._fns[name] = fn
        return fn

    def has(self, name: str) -> bool:
        """Whether the loaded cuSOLVER has routine ``name`` (``cusolverDnXgeev``)."""
        return hasattr(self.lib, name)

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise SolverError(f"{what} failed with cuSOLVER status {status}")

    def _generic(self, dev: Any, stem: str, types: list, args: list, compute: int,
                 info: int, run_only: tuple = ()) -> None:
        """``cusolverDnX<stem>``: its workspace query with ``args`` (their ctypes ``types``),
        then the routine with ``args`` (``run_only``: (index, type, value) arguments only
        the routine takes, as getrf's pivots), the workspaces and ``info``."""
        name = f"cusolverDnX{stem}"
        query = self._fn(name + "_bufferSize",
                         [_P, _P] + types + [_I32, ctypes.POINTER(_SIZE), ctypes.POINTER(_SIZE)])
        run_types, run_args = list(types), list(args)
        for index, ty, value in run_only:
            run_types.insert(index, ty)
            run_args.insert(index, value)
        run = self._fn(name, [_P, _P] + run_types + [_I32, _P, _SIZE, _P, _SIZE, _P])
        with self._lock:
            on_device, on_host = _SIZE(0), _SIZE(0)
            self._check(query(self.handle, self.params, *args, compute,
                              ctypes.byref(on_device), ctypes.byref(on_host)),
                        name + "_bufferSize")
            work = dev.allocator.allocate(max(on_device.value, 1))
            if on_host.value > len(self._host):
                self._host = ctypes.create_string_buffer(on_host.value)
            self._check(run(self.handle, self.params, *run_args, compute, work.ptr,
                            on_device.value, ctypes.addressof(self._host), on_host.value,
                            info), name)
            # (the workspace goes back to the allocator now: later users queue behind it)

    # ---- the routines (column-major matrices at device pointers)
    def potrf(self, dev: Any, dtype: Any, uplo: int, n: int, a: int, lda: int,
              info: int) -> None:
        """Cholesky factor of the ``uplo`` triangle, in place (the other one untouched)."""
        t = real_type(dtype)
        self._generic(dev, "potrf", [_I32, _I64, _I32, _P, _I64], [uplo, n, t, a, lda], t,
                      info)

    def getrf(self, dev: Any, dtype: Any, n: int, a: int, lda: int, pivots: int,
              info: int) -> None:
        """LU with partial pivoting in place; int64 1-based ``pivots``."""
        t = real_type(dtype)
        self._generic(dev, "getrf", [_I64, _I64, _I32, _P, _I64], [n, n, t, a, lda], t, info,
                      run_only=((5, _P, pivots),))

    def getrs(self, dtype: Any, trans: int, n: int, nrhs: int, a: int, lda: int, pivots: int,
              b: int, ldb: int, info: int) -> None:
        """op(A) X = B in place of B with ``getrf``'s factors (no workspace)."""
        t = real_type(dtype)
        fn = self._fn("cusolverDnXgetrs", [_P, _P, _I32, _I64, _I64, _I32, _P, _I64, _P, _I32,
                                           _P, _I64, _P])
        with self._lock:
            self._check(fn(self.handle, self.params, trans, n, nrhs, t, a, lda, pivots, t, b,
                           ldb, info), "cusolverDnXgetrs")

    def syevd(self, dev: Any, dtype: Any, vectors: bool, uplo: int, n: int, a: int, lda: int,
              w: int, info: int) -> None:
        """Eigenvalues (ascending) into ``w`` and, with ``vectors``, eigenvectors in place
        of A's columns."""
        t = real_type(dtype)
        self._generic(dev, "syevd", [_I32, _I32, _I64, _I32, _P, _I64, _I32, _P],
                      [VECTOR if vectors else NOVECTOR, uplo, n, t, a, lda, t, w], t, info)

    def gesvd(self, dev: Any, dtype: Any, jobu: str, jobvt: str, m: int, n: int, a: int,
              lda: int, s: int, u: int, ldu: int, vt: int, ldvt: int, info: int) -> None:
        """SVD of an m x n matrix with m >= n (cuSOLVER's rule), A destroyed; ``jobu`` and
        ``jobvt`` as LAPACK's ('A', 'S', 'N')."""
        t = real_type(dtype)
        self._generic(dev, "gesvd", [ctypes.c_byte, ctypes.c_byte, _I64, _I64, _I32, _P, _I64,
                                     _I32, _P, _I32, _P, _I64, _I32, _P, _I64],
                      [ord(jobu), ord(jobvt), m, n, t, a, lda, t, s, t, u, ldu, t, vt, ldvt],
                      t, info)

    def geev(self, dev: Any, dtype: Any, vectors: bool, n: int, a: int, lda: int, w: int,
             vr: int, ldvr: int, info: int) -> None:
        """Eigenvalues of a real nonsymmetric matrix into ``w`` (2n reals: the real parts,
        then the imaginary ones, LAPACK's wr and wi) and, with ``vectors``, the right
        eigenvectors into ``vr`` in LAPACK's real packing (a complex pair's vector as two
        columns, real and imaginary parts); A destroyed."""
        t = real_type(dtype)
        self._generic(dev, "geev", [_I32, _I32, _I64, _I32, _P, _I64, _I32, _P, _I32, _P, _I64,
                                    _I32, _P, _I64],
                      [NOVECTOR, VECTOR if vectors else NOVECTOR, n, t, a, lda, t, w, t, None,
                       1, t, vr if vectors else None, max(ldvr, 1)], t, info)

    def geqrf(self, dev: Any, dtype: Any, m: int, n: int, a: int, lda: int, tau: int,
              info: int) -> None:
        """Householder QR in place: R on and above the diagonal, the reflectors below."""
        t = real_type(dtype)
        self._generic(dev, "geqrf", [_I64, _I64, _I32, _P, _I64, _I32, _P],
                      [m, n, t, a, lda, t, tau], t, info)

    def orgqr(self, dev: Any, dtype: Any, m: int, n: int, k: int, a: int, lda: int, tau: int,
              info: int) -> None:
        """The first n columns of Q from ``geqrf``'s k reflectors, in place (32-bit API: no
        generic one exists)."""
        single = np.dtype(dtype) == np.float32
        stem = "cusolverDnSorgqr" if single else "cusolverDnDorgqr"
        query = self._fn(stem + "_bufferSize", [_P, _I32, _I32, _I32, _P, _I32, _P,
                                                ctypes.POINTER(_I32)])
        run = self._fn(stem, [_P, _I32, _I32, _I32, _P, _I32, _P, _P, _I32, _P])
        with self._lock:
            lwork = _I32(0)
            self._check(query(self.handle, m, n, k, a, lda, tau, ctypes.byref(lwork)),
                        stem + "_bufferSize")
            work = dev.allocator.allocate(max(lwork.value, 1) * np.dtype(dtype).itemsize)
            self._check(run(self.handle, m, n, k, a, lda, tau, work.ptr, lwork.value, info),
                        stem)


_SOLVER = ProcessLibrary("cusolver", SONAMES, lambda lib, stream: Solver(lib, stream),
                         (SolverError, AttributeError))


def solver_for(device: Any) -> Solver | None:
    """The process's cuSOLVER handle on ``device``'s stream, or None: no library, turned off
    (``TRACEARRAY_GPU_LIBRARIES=off``), or a device that is not a CUDA one (the emulator)."""
    return _SOLVER.get(device)
