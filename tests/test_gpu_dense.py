"""np.linalg on the GPU past the block kernels' size, through cuSOLVER (gpu/dense.py), run
under the SIMT emulator with ``gpu_emulator.ReferenceSolver`` standing in for the library:
the layouts (row-major matrices as column-major transposes), the transposes into and out of
column-major scratch, the per-matrix calls, the readings of the results (eig's packed
vectors, int64 pivots), NumPy's errors from the info words and NaN for non-finite input are
checked here; cuSOLVER itself on a GPU by tests/test_gpu_cuda.py."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_emulator import EmulatedDevice, ReferenceSolver

import tracearray
from tracearray.gpu import driver

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture
def solver(monkeypatch):
    from tracearray.gpu import solver as solver_mod
    dev = EmulatedDevice()
    prev = driver.set_device_for_testing(dev)
    ref = ReferenceSolver()
    monkeypatch.setattr(solver_mod, "solver_for", lambda device: ref)
    yield ref
    driver.set_device_for_testing(prev)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def gpu(fn):
    return tracearray.compile(fn, device="cuda")


def _spd(r, n, batch=(), dtype=np.float64):
    x = r.standard_normal(batch + (n, n))
    return (x @ np.swapaxes(x, -1, -2) / n + np.eye(n)).astype(dtype)


def _general(r, n, batch=(), dtype=np.float64):
    return (r.standard_normal(batch + (n, n)) / np.sqrt(n) + 2 * np.eye(n)).astype(dtype)


def _close(got, want, f32=False):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4 if f32 else 1e-9,
                               atol=1e-4 if f32 else 1e-9)


def _compared(fn, *args):
    from tracearray.testing import compare_with_numpy
    cmp = compare_with_numpy(fn, *args, device="cuda")
    assert cmp.ok, cmp.report()


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_of_large_matrices(solver, upper, dtype) -> None:
    a = _spd(rng(1), 70, (2,), dtype)
    a[..., 0, 69] += 0.0 if upper else 100.0     # the unread triangle: ignored
    a[..., 69, 0] += 100.0 if upper else 0.0

    def fn(x):
        return np.linalg.cholesky(x, upper=upper) * 2.0
    got, want = gpu(fn)(a), fn(a)
    _close(got, want, dtype == np.float32)
    got = np.asarray(got)
    assert not np.any(np.tril(got, -1) if upper else np.triu(got, 1))
    assert solver.calls.count("potrf") == 2
    _compared(fn, a)


def test_cholesky_of_a_large_matrix_not_positive_definite_raises(solver) -> None:
    a = _spd(rng(2), 70)
    a[40, 40] = -5.0
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        np.asarray(gpu(np.linalg.cholesky)(a))


@pytest.mark.parametrize("form", ["vector", "columns", "small_columns", "batch_vectors"])
def test_solve_of_large_systems(solver, form) -> None:
    r = rng(3)
    n, b_shape, batch = {"vector": (70, (70,), ()), "columns": (70, (2, 70, 3), (2,)),
                         "small_columns": (5, (2, 5, 4), (2,)),
                         "batch_vectors": (66, (3, 66, 1), (3,))}[form]
    a, b = _general(r, n, batch), r.standard_normal(b_shape)

    def fn(x, y):
        return np.linalg.solve(x + 0.0, y) - 1.0
    _close(gpu(fn)(a, b), fn(a, b))
    assert "getrs" in solver.calls
    _compared(fn, a, b)


def test_inv_det_and_slogdet_of_large_matrices(solver) -> None:
    a = _general(rng(4), 70, (2,))
    a[1] *= -1.0     # a negative determinant (70 rows: the sign flips? no: even; swap rows)
    a[1, [0, 1]] = a[1, [1, 0]]
    _close(gpu(np.linalg.inv)(a), np.linalg.inv(a))
    _close(gpu(np.linalg.det)(a), np.linalg.det(a))
    sign, logdet = gpu(np.linalg.slogdet)(a)
    want = np.linalg.slogdet(a)
    np.testing.assert_array_equal(np.asarray(sign), want[0])
    _close(logdet, want[1])
    assert solver.calls.count("getrf") == 6
    singular = a.copy()
    singular[0, :, 5] = singular[0, :, 7]
    np.testing.assert_array_equal(np.asarray(gpu(np.linalg.det)(singular))[0], 0.0)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.asarray(gpu(np.linalg.inv)(singular))


@pytest.mark.parametrize("UPLO", ["L", "U"])
def test_eigh_of_large_matrices(solver, UPLO) -> None:
    a = _spd(rng(5), 72, (2,))
    mess = np.triu(np.ones((72, 72)), 1) if UPLO == "L" else np.tril(np.ones((72, 72)), -1)
    a = a + 50.0 * mess          # the unread triangle: ignored

    def values(x):
        return np.linalg.eigvalsh(x, UPLO=UPLO) * 3.0

    def both(x):
        return np.linalg.eigh(x, UPLO=UPLO)
    _close(gpu(values)(a), values(a))
    w, v = gpu(both)(a)
    w_want, v_want = both(a)
    _close(w, w_want)
    _close(np.abs(np.asarray(v)), np.abs(v_want))   # distinct values: vectors up to sign
    assert solver.calls.count("syevd") == 4
    _compared(both, a)


def test_spectral_decompositions_of_large_non_finite_matrices_are_nan(solver) -> None:
    a = _spd(rng(6), 70, (2,))
    a[1, 3, 3] = np.inf
    w, v = (np.asarray(x) for x in gpu(np.linalg.eigh)(a))
    assert np.isnan(w[1]).all() and np.isnan(v[1]).all()
    _close(w[0], np.linalg.eigh(a[0])[0])
    s = np.asarray(gpu(lambda x: np.linalg.svd(x, compute_uv=False))(a))
    assert np.isnan(s[1]).all() and not np.isnan(s[0]).any()


# (not full_matrices of the 3 x 5000 stack: a 5000 x 5000 basis is too slow for the emulator)
@pytest.mark.parametrize("shape, full", [(s, f) for s in ((70, 90), (90, 70), (2, 80, 80))
                                         for f in (False, True)] + [((3, 5000), False)])
def test_svd_of_large_matrices(solver, shape, full) -> None:
    a = rng(7).standard_normal(shape)

    def fn(x):
        return np.linalg.svd(x, full_matrices=full)
    u, s, vh = (np.asarray(t) for t in gpu(fn)(a))
    uw, sw, vw = fn(a)
    assert u.shape == uw.shape and vh.shape == vw.shape
    _close(s, sw)
    k = min(shape[-2:])
    # the factors rebuild the matrix, and match NumPy's up to each pair's sign
    _close(u[..., :, :k] * s[..., None, :] @ vh[..., :k, :], a)
    _close(np.abs(u[..., :, :k]), np.abs(uw[..., :, :k]))
    _close(np.abs(vh[..., :k, :]), np.abs(vw[..., :k, :]))
    eye = np.eye(u.shape[-1])
    _close(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(eye, u.shape[:-2] + eye.shape))
    _close(gpu(lambda x: np.linalg.svd(x, compute_uv=False))(a), sw)
    assert "gesvd" in solver.calls


@pytest.mark.parametrize("shape", [(90, 70), (70, 90), (2, 66, 66)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_of_large_matrices(solver, shape, mode) -> None:
    a = rng(8).standard_normal(shape)

    def fn(x):
        return np.linalg.qr(x, mode=mode)
    got, want = gpu(fn)(a), fn(a)
    got = tuple(got) if mode != "r" else (got,)
    want = tuple(want) if mode != "r" else (want,)
    for g, w in zip(got, want):
        assert np.asarray(g).shape == w.shape
        _close(g, w)
    assert "geqrf" in solver.calls
    _compared(fn, a)


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_eig_of_large_matrices(solver, kind) -> None:
    r = rng(9)
    a = _spd(r, 70, (2,)) if kind == "real" else _general(r, 70, (2,))
    w, v = gpu(np.linalg.eig)(a)
    w, v = np.asarray(w), np.asarray(v)
    w_want, v_want = np.linalg.eig(a)
    assert w.dtype == w_want.dtype and v.dtype == v_want.dtype
    assert (w.dtype.kind == "c") == (kind == "complex")
    np.testing.assert_allclose(w, w_want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(v, v_want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=1e-8)
    vals = np.asarray(gpu(np.linalg.eigvals)(a))
    np.testing.assert_allclose(vals, np.linalg.eigvals(a), rtol=1e-9, atol=1e-9)
    assert solver.calls.count("geev") == 4     # the kind's probe, then the values (twice)


def test_eig_of_a_large_non_finite_matrix_raises(solver) -> None:
    a = _general(rng(10), 70)
    a[2, 5] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="infs or NaNs"):
        np.asarray(gpu(np.linalg.eigvals)(a))


def test_eig_without_cusolvers_geev_runs_on_the_host(monkeypatch) -> None:
    from tracearray.gpu import solver as solver_mod
    dev = EmulatedDevice()
    prev = driver.set_device_for_testing(dev)
    try:
        ref = ReferenceSolver(missing=("cusolverDnXgeev",))
        monkeypatch.setattr(solver_mod, "solver_for", lambda device: ref)
        a = _general(rng(11), 70)
        np.testing.assert_allclose(np.asarray(gpu(np.linalg.eigvals)(a)),
                                   np.linalg.eigvals(a))
        assert "geev" not in ref.calls
    finally:
        driver.set_device_for_testing(prev)


def test_small_stacks_keep_the_block_kernels(solver) -> None:
    """Matrices the block kernels take never reach cuSOLVER; a large batch of small
    matrices they decline (several right-hand sides) runs on the host."""
    r = rng(12)
    a = _spd(r, 20, (3,))
    np.asarray(gpu(np.linalg.cholesky)(a))
    np.asarray(gpu(np.linalg.eigvalsh)(a))
    big = _general(r, 6, (40,))
    b = r.standard_normal((40, 6, 2))
    _close(gpu(np.linalg.solve)(big, b), np.linalg.solve(big, b))
    assert solver.calls == []


class _Changed:
    """A compiled function lowered as the real one whose results ``change`` alters: what the
    comparator must accept (another valid geev result) or reject."""

    def __init__(self, program, change):
        self.cf = tracearray.compile(program, device="cuda")
        self._fixed_device, self.change = "cuda", change

    def lower(self, *args):
        return self.cf.lower(*args)

    def __call__(self, *args):
        out = self.cf(*args)
        return self.change(*[np.array(np.asarray(o)) for o in out])


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_the_comparator_checks_eig_by_its_contract(solver, kind) -> None:
    """gpu-eig: the values as a set within their condition numbers' bound, the vectors by
    A x = w x; another order or the other sign passes, a value or vector 1e-6 off does not."""
    from tracearray.testing import compare_with_numpy
    r = rng(13)
    a = _spd(r, 68) if kind == "real" else _general(r, 68)

    def program(x):
        w, v = np.linalg.eig(x)
        return w, v
    cmp = compare_with_numpy(program, a, device="cuda")
    assert cmp.ok, cmp.report()
    assert "gpu-eig" in cmp.divergences
    order = np.arange(68)[::-1]
    accept = [lambda w, v: (w[order], v[:, order]), lambda w, v: (w, -v)]
    reject = [lambda w, v: (w + 1e-6 * np.abs(w).max(), v),
              lambda w, v: (w, v + 1e-6 * np.eye(68)),
              lambda w, v: (w, v[:, np.roll(np.arange(68), 1)] * 0 + v[:, :1])]
    for change in accept:
        cmp = compare_with_numpy(program, a, device="cuda", compiled=_Changed(program, change))
        assert cmp.ok, cmp.report()
    for change in reject:
        cmp = compare_with_numpy(program, a, device="cuda", compiled=_Changed(program, change))
        assert not cmp.ok
