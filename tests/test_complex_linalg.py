"""np.linalg of complex matrices: every LAPACK function and those written over them, on
complex64 and complex128 stacks, with real and complex operands mixed, against NumPy through
the comparator (the same LAPACK call on the CPU: NumPy's results bit for bit); NumPy's errors;
on the GPU (the SIMT emulator here) the host's LAPACK between copies."""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from tracearray.testing import compare_with_numpy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _cplx(r, shape, dtype=np.complex128):
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


def _herm(z):
    return z @ np.conj(np.swapaxes(z, -1, -2)) + 3 * np.eye(z.shape[-1])


CASES = {
    "inv": lambda z: np.linalg.inv(z),
    "solve_vector": lambda z: np.linalg.solve(z[0], z[0, :, 1]),
    "solve_real_rhs": lambda z: np.linalg.solve(z, np.ones(z.shape[:-1] + (2,))),
    "solve_real_matrix": lambda z: np.linalg.solve(z.real + 4 * np.eye(z.shape[-1]), z),
    "solve_constant": lambda z: np.linalg.solve(z[0], np.array([1j, 2.0, -1 + 1j])),
    "det": lambda z: np.linalg.det(z),
    "slogdet": lambda z: tuple(np.linalg.slogdet(z)),
    "cholesky": lambda z: np.linalg.cholesky(_herm(z)),
    "cholesky_upper": lambda z: np.linalg.cholesky(_herm(z), upper=True),
    "qr": lambda z: tuple(np.linalg.qr(z)),
    "qr_complete_wide": lambda z: tuple(np.linalg.qr(z[..., :2, :], mode="complete")),
    "qr_r": lambda z: np.linalg.qr(z, mode="r"),
    "svd": lambda z: tuple(np.linalg.svd(z)),
    "svd_reduced_tall": lambda z: tuple(np.linalg.svd(z[..., :2], full_matrices=False)),
    "svdvals": lambda z: np.linalg.svdvals(z),
    "svd_hermitian": lambda z: np.linalg.svd(_herm(z), hermitian=True, compute_uv=False),
    "eigh": lambda z: tuple(np.linalg.eigh(_herm(z))),
    "eigh_upper": lambda z: tuple(np.linalg.eigh(_herm(z) + np.tril(z, -1), UPLO="U")),
    "eigvalsh": lambda z: np.linalg.eigvalsh(_herm(z)),
    "eig": lambda z: tuple(np.linalg.eig(z)),
    "eigvals": lambda z: np.linalg.eigvals(z),
    "eigvals_real_valued": lambda z: np.linalg.eigvals(_herm(z)),
    "pinv": lambda z: np.linalg.pinv(z[..., :2]),
    "lstsq": lambda z: np.linalg.lstsq(z[0, :, :2], z[0, :, 2])[0],
    "lstsq_all": lambda z: tuple(np.linalg.lstsq(z[0, :, :2], z[0])),
    "matrix_rank": lambda z: np.linalg.matrix_rank(z),
    "cond": lambda z: np.linalg.cond(z),
    "cond_fro": lambda z: np.linalg.cond(z, "fro"),
    "cond_inf": lambda z: np.linalg.cond(z, np.inf),
    "norm": lambda z: np.linalg.norm(z),
    "norm_axis": lambda z: np.linalg.norm(z, axis=-1),
    "norm_fro_keepdims": lambda z: np.linalg.norm(z[0], "fro", keepdims=True),
    "norm_1": lambda z: np.linalg.norm(z[0], 1),
    "norm_2": lambda z: np.linalg.norm(z[0], 2),
    "norm_nuc": lambda z: np.linalg.norm(z, "nuc", axis=(-2, -1)),
    "norm_p3": lambda z: np.linalg.norm(z, 3, axis=1),
    "norm_inf_vector": lambda z: np.linalg.norm(z[0, 0], np.inf),
    "vector_norm": lambda z: np.linalg.vector_norm(z),
    "matrix_norm": lambda z: np.linalg.matrix_norm(z),
    "matrix_power": lambda z: np.linalg.matrix_power(z, 3),
    "matrix_power_0": lambda z: np.linalg.matrix_power(z, 0),
    "matrix_power_negative": lambda z: np.linalg.matrix_power(z, -2),
    "multi_dot": lambda z: np.linalg.multi_dot([z[0], z[1], z[0]]),
    "tensorsolve": lambda z: np.linalg.tensorsolve(z[0], z[1, 0]),
    "tensorinv": lambda z: np.linalg.tensorinv(z[0], ind=1),
    "fused": lambda z: np.abs(np.linalg.inv(z * 2 + 1j) @ z).sum(axis=-1),
}


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_linalg_matches_numpy(name, dtype) -> None:
    z = _cplx(np.random.default_rng(hash(name) % 1000), (2, 3, 3), dtype)
    cmp = compare_with_numpy(CASES[name], z)
    assert cmp.ok, cmp.report()


def test_complex_results_have_numpys_dtypes() -> None:
    z = _cplx(np.random.default_rng(1), (4, 4), np.complex64)
    f = tracearray.compile(lambda a: (np.linalg.inv(a), np.linalg.eigvalsh(_herm(a)),
                                      np.linalg.svd(a)[1], np.linalg.det(a),
                                      np.linalg.eigvals(_herm(a))))
    got = f(z)
    want = (np.linalg.inv(z), np.linalg.eigvalsh(_herm(z)), np.linalg.svd(z)[1],
            np.linalg.det(z), np.linalg.eigvals(_herm(z)))
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == w.dtype
    # a Hermitian matrix's eigvals: real values, but a complex result (NumPy's rule)
    assert np.asarray(got[4]).dtype.kind == "c"


def test_complex_linalg_errors_are_numpys() -> None:
    singular = np.ones((3, 3), np.complex128) * (1 + 1j)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        tracearray.compile(np.linalg.inv)(singular)
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        tracearray.compile(np.linalg.det)(np.ones((2, 3), np.complex64))
    not_pd = -np.eye(3, dtype=np.complex128)
    with pytest.raises(np.linalg.LinAlgError, match="positive definite"):
        tracearray.compile(np.linalg.cholesky)(not_pd)
    with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):
        tracearray.compile(np.linalg.eigvals)(np.full((2, 2), np.nan + 0j))


def test_complex_linalg_on_the_gpu_runs_on_the_host() -> None:
    """device="cuda" (the SIMT emulator): no device implementation takes complex matrices,
    so the host's LAPACK runs between copies, with NumPy's results."""
    from gpu_emulator import EmulatedDevice
    from tracearray.gpu import driver
    prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        z = _cplx(np.random.default_rng(2), (2, 3, 3))
        for name in ("inv", "eig", "svd", "solve_real_rhs", "norm_2", "fused"):
            cmp = compare_with_numpy(CASES[name], z, device="cuda")
            assert cmp.ok, (name, cmp.report())
    finally:
        driver.set_device_for_testing(prev)
