"""One NumPy call per external op (``ops.external``), for the every-op meta-tests of
test_trace_ops.py and test_cpu_ops.py; tests/test_sort.py and tests/test_linalg.py test
every form of each."""
from __future__ import annotations

from typing import Callable

import numpy as np

SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
EXTERNAL_CALLS: dict[str, Callable] = {
    "sort": lambda a: np.sort(a, axis=0), "argsort": lambda a: np.argsort(a, kind="stable"),
    "partition": lambda a: np.partition(a, 1), "argpartition": lambda a: np.argpartition(a, 1),
    "order_statistic": lambda a: np.percentile(a, [10, 50], axis=0),
    "unique_count": lambda a: np.unique(np.round(a), axis=0),
    "unique": lambda a: np.unique(np.round(a), axis=1, return_counts=True),
    "unique_complex_count": lambda a: np.unique(np.round(a) + 1j),
    "unique_complex": lambda a: np.unique(np.round(a) - 1j * np.round(a.T), return_counts=True),
    "linalg.inv": np.linalg.inv, "linalg.det": np.linalg.det, "linalg.slogdet": np.linalg.slogdet,
    "linalg.cholesky": np.linalg.cholesky, "linalg.qr": np.linalg.qr,
    "linalg.svd": np.linalg.svd, "linalg.eigh": np.linalg.eigh,
    "linalg.eigvalsh": np.linalg.eigvalsh, "linalg.pinv": np.linalg.pinv,
    "linalg.inv_or_nan": lambda a: np.linalg.cond(a, 1),
    "linalg.solve": lambda a: np.linalg.solve(a, a[:, :2]),
    "linalg.lstsq": lambda a: np.linalg.lstsq(a[:, :2], a[:, 0]),
    "linalg.lstsq_rank": lambda a: np.linalg.lstsq(a[:, :2], a[:, 0]),
    "linalg.eig": np.linalg.eig,                                   # real eigenvalues
    "linalg.eig_real": lambda a: np.linalg.eigvals(a - a.T),          # complex ones
    # complex matrices: each op's complex variant (ops/linalg.py), Hermitian where it must be
    "linalg.inv.complex": lambda a: np.linalg.inv(a + 1j * a.T),
    "linalg.det.complex": lambda a: np.linalg.det(a + 1j * a.T),
    "linalg.slogdet.complex": lambda a: np.linalg.slogdet(a - 1j),
    "linalg.cholesky.complex": lambda a: np.linalg.cholesky(a + 0.1j * (a.T - a + 1)),
    "linalg.qr.complex": lambda a: np.linalg.qr(a * 1j),
    "linalg.svd.complex": lambda a: np.linalg.svd(a + 1j * a.T),
    "linalg.eigh.complex": lambda a: np.linalg.eigh(a + 0.1j * (a.T - a + 1)),
    "linalg.eigvalsh.complex": lambda a: np.linalg.eigvalsh(a - 0.5j * a.T, UPLO="U"),
    "linalg.pinv.complex": lambda a: np.linalg.pinv(a[:, :2] * (1 - 1j)),
    "linalg.inv_or_nan.complex": lambda a: np.linalg.cond(a + 0j, 1),   # (abs: exact)
    "linalg.solve.complex": lambda a: np.linalg.solve(a + 1j * a.T, a[:, :2]),
    "linalg.lstsq.complex": lambda a: np.linalg.lstsq(a[:, :2] * 1j, a[:, 0]),
    "linalg.lstsq_rank.complex": lambda a: np.linalg.lstsq(a[:, :2] - 1j, a[:, 0]),
    "linalg.eig.complex": lambda a: np.linalg.eig(a + 1j * a.T),
    "fft.c2c": lambda a: (np.fft.fft(a, axis=0), np.fft.ifft(a * 1j - 1)),
    "fft.r2c": lambda a: np.fft.rfft(a, 5),
    "fft.c2r": lambda a: (np.fft.irfft(a), np.fft.irfft(a + 2j, axis=0)),
}
