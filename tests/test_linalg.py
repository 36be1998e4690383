"""numpy.linalg against NumPy: solve, inv, det, slogdet, cholesky, qr, svd, eigh, eigvalsh,
lstsq, pinv, matrix_power (negative powers), matrix_rank and the singular-value norms.

The host function of each external op is the numpy.linalg function itself, so on the CPU the
results are NumPy's bit for bit (the same LAPACK call on the same numbers): compared exactly,
with their dtypes (integer inputs promoted as NumPy does, float32 kept), shapes (batched over
leading axes, NumPy 2's rules for solve's b) and result types (SlogdetResult, QRResult, ...).
Singular matrices raise NumPy's LinAlgError at the user's line when the compiled function runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray.errors import UnsupportedOperationError

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 4))
SPD = A @ A.swapaxes(-1, -2) + 4 * np.eye(4)      # symmetric positive definite, batched
B = RNG.standard_normal((3, 4, 2))
WIDE = RNG.standard_normal((2, 3, 5))


def cpu(fn):
    return tracearray.compile(fn, device="cpu")


def same(got, want, what=""):
    if isinstance(want, tuple):
        assert type(got) is type(want), (what, type(got), type(want))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, what)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
    np.testing.assert_array_equal(g, w, err_msg=what)


def check(fn, *args, what=""):
    want = fn(*args)
    got = cpu(fn)(*args)
    same(got, want, what)
    return got


CASES = {
    "solve": lambda a, b: np.linalg.solve(a * 2, b) + 1,
    "solve, 1-d b": lambda a, b: np.linalg.solve(a, b[0, :, 0]),
    "solve, broadcast batch": lambda a, b: np.linalg.solve(a[None], b[:1]),
    "inv": lambda a, b: np.linalg.inv(a),
    "det": lambda a, b: np.linalg.det(a),
    "slogdet": lambda a, b: np.linalg.slogdet(-a),
    "cholesky": lambda a, b: np.linalg.cholesky(a),
    "cholesky upper": lambda a, b: np.linalg.cholesky(a, upper=True),
    "qr": lambda a, b: np.linalg.qr(b),
    "qr r": lambda a, b: np.linalg.qr(b.swapaxes(-1, -2), mode="r"),
    "qr complete": lambda a, b: np.linalg.qr(b, mode="complete"),
    "qr raw": lambda a, b: np.linalg.qr(b[0], mode="raw"),
    "svd": lambda a, b: np.linalg.svd(b),
    "svd reduced": lambda a, b: np.linalg.svd(b, full_matrices=False),
    "svd values": lambda a, b: np.linalg.svd(b, compute_uv=False),
    "svd hermitian": lambda a, b: np.linalg.svd(a, hermitian=True),
    "eigh": lambda a, b: np.linalg.eigh(a),
    "eigvalsh": lambda a, b: np.linalg.eigvalsh(a, UPLO="U"),
    "pinv": lambda a, b: np.linalg.pinv(b),
    "pinv rtol": lambda a, b: np.linalg.pinv(b, rtol=0.5),
    "matrix_rank": lambda a, b: np.linalg.matrix_rank(b),
    "matrix_rank 1-d": lambda a, b: np.linalg.matrix_rank(b[0, :, 0]),
    "matrix_power -2": lambda a, b: np.linalg.matrix_power(a, -2),
    "lstsq": lambda a, b: np.linalg.lstsq(b[0], a[0, :, 0]),
    "lstsq matrix b": lambda a, b: np.linalg.lstsq(b[0], a[0], rcond=None),
    "lstsq wide": lambda a, b: np.linalg.lstsq(b[0].T, a[0, :2, :3]),
    "lstsq rank deficient": lambda a, b: np.linalg.lstsq(np.ones((4, 2)), a[0]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_against_numpy(name):
    check(CASES[name], SPD, B, what=name)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_], ids=str)
def test_dtypes_promote_as_numpy(dtype):
    a = (SPD * 3).astype(dtype) if dtype != np.bool_ else SPD > 0
    a = a + np.eye(4, dtype=a.dtype)
    check(lambda a: np.linalg.det(a), a, what="det")
    check(lambda a: np.linalg.eigvalsh(a), a, what="eigvalsh")
    check(lambda a: np.linalg.svd(a, compute_uv=False), a, what="svd")
    with pytest.raises(TypeError, match="float16 is unsupported"):
        cpu(lambda a: np.linalg.inv(a))(a.astype(np.float16))


def test_non_contiguous_and_fused_neighbours():
    a = np.asfortranarray(SPD[0])

    def f(a, b):
        x = np.linalg.solve(a.T * 2.0 + 1.0, b[0, :, ::-1])
        return np.abs(x) * 3.0 - 1.0

    check(f, a, B)
    kinds = [k.strategy for k in cpu(f).explain(a, B).kernels]
    assert kinds == ["map", "external", "map"], kinds
    assert "LAPACK" in str(cpu(f).explain(a, B))


def test_empty_and_single_matrices():
    check(lambda a: np.linalg.inv(a), np.zeros((0, 3, 3)))
    check(lambda a: np.linalg.det(a), np.zeros((2, 0, 0)))
    check(lambda a: np.linalg.pinv(a), np.zeros((0, 2), np.int64))
    check(lambda a: np.linalg.eigh(a), np.full((1, 1), 2.0))


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_matrix_norms_of_singular_values(ord):
    # (the other orders were there before: sums and maxima of absolute values)
    x = B.swapaxes(0, 1)
    check(lambda x: np.linalg.norm(x, ord, axis=(0, 2)), x, what=str(ord))
    check(lambda x: np.linalg.norm(x[0], ord, keepdims=True), x, what=str(ord))
    check(lambda x: np.linalg.norm(x.astype(np.int8), ord, axis=(2, 1)), x, what=str(ord))


def test_singular_matrices_raise_linalgerror_at_the_users_line():
    singular = np.ones((2, 3, 3))
    f = cpu(lambda a: np.linalg.inv(a) + 1)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix") as info:
        f(singular)
    assert "test_linalg.py" in str(info.value)
    with pytest.raises(np.linalg.LinAlgError, match="test_linalg.py"):
        cpu(lambda a, b: np.linalg.solve(a, b))(singular, B[:2, :3])
    with pytest.raises(np.linalg.LinAlgError, match="test_linalg.py"):
        cpu(lambda a: np.linalg.cholesky(-a))(SPD)
    # the same compiled function still works on good data afterwards
    same(f(SPD), np.linalg.inv(SPD) + 1)


def test_shape_errors_at_trace_time():
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        cpu(lambda a: np.linalg.inv(a))(B)
    with pytest.raises(np.linalg.LinAlgError, match="at least two-dimensional"):
        cpu(lambda a: np.linalg.det(a))(B[0, 0])
    with pytest.raises(ValueError, match="mismatch"):
        cpu(lambda a, b: np.linalg.solve(a, b))(SPD, B[:, :3])


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"])
def test_cond_every_norm_singular_and_nan_matrices(p):
    # NumPy's cond makes a NaN condition number inf unless the matrix has a NaN, and inverts
    # a singular matrix to NaNs instead of raising (its inv runs under errstate ignore)
    singular = SPD[0].copy()
    singular[1] = 2 * singular[0]
    with_nan = np.eye(4)
    with_nan[0, 0] = np.nan                 # (the SVD of a NaN matrix raises, as in NumPy)
    stack = np.stack([SPD[0], singular, np.zeros((4, 4)),
                      SPD[1] if p in (None, 2, -2, "nuc") else with_nan])
    for a in (stack, stack.astype(np.float32), np.arange(9).reshape(3, 3), SPD[0, :2]):
        if p not in (None, 2, -2) and a.shape[-1] != a.shape[-2]:
            with pytest.raises(np.linalg.LinAlgError, match="square"):
                cpu(lambda x: np.linalg.cond(x, p))(a)
            continue
        try:
            with np.errstate(all="ignore"):
                want = np.linalg.cond(a, p)
        except np.linalg.LinAlgError:       # 'nuc': the SVD of a singular matrix's NaNs
            with pytest.raises(np.linalg.LinAlgError, match="SVD"):
                cpu(lambda x: np.linalg.cond(x, p))(a)
            continue
        got = cpu(lambda x: np.linalg.cond(x, p))(a)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, want, rtol=1e-4 if a.dtype == np.float32 else 1e-10)
    with pytest.raises(np.linalg.LinAlgError, match="empty"):
        cpu(lambda x: np.linalg.cond(x, p))(np.zeros((2, 0, 3)))


def test_tensorsolve_as_numpy():
    a, b = RNG.standard_normal((6, 2, 3)), RNG.standard_normal(6)
    for fn, args in ((np.linalg.tensorsolve, (a, b)),
                     (lambda a, b: np.linalg.tensorsolve(a, b, axes=(0,)),
                      (a, RNG.standard_normal((2, 3)))),
                     (np.linalg.tensorsolve, (RNG.standard_normal((2, 3, 2, 3)),
                                              RNG.standard_normal((2, 3))))):
        np.testing.assert_allclose(cpu(fn)(*args), fn(*args), rtol=1e-10)
    with pytest.raises(np.linalg.LinAlgError, match="prod"):
        cpu(np.linalg.tensorsolve)(np.ones((6, 2, 2)), np.ones(6))


def test_lstsq_residuals_follow_the_rank_of_the_data():
    f = cpu(lambda a, b: np.linalg.lstsq(a, b))
    full = RNG.standard_normal((6, 3))
    deficient = full.copy()
    deficient[:, 2] = deficient[:, 1]
    b = RNG.standard_normal(6)
    for a in (full, deficient, full):
        same(f(a, b), np.linalg.lstsq(a, b))


def test_linalg_round_trips_through_the_gpu_host_path():
    from gpu_emulator import EmulatedDevice
    from tracearray.gpu import driver

    prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        def f(a, b):   # (ops with no device implementation: the host computes them)
            h, tau = np.linalg.qr(a * 2, mode="raw")
            return np.linalg.solve(a, b) * 2, h + 1, np.abs(np.linalg.eigvals(a)), tau

        same(tracearray.compile(f, device="cuda")(SPD, B), f(SPD, B))
        with pytest.raises(np.linalg.LinAlgError, match="test_linalg.py"):
            tracearray.compile(lambda a: np.linalg.inv(a), device="cuda")(np.ones((3, 3)))
    finally:
        driver.set_device_for_testing(prev)


def test_the_comparator_compares_namedtuple_results():
    # tracearray.testing's comparator walks result trees: NumPy's SlogdetResult, EighResult
    # and UniqueAllResult are namedtuples (it raised TypeError on them)
    from tracearray.testing import assert_matches_numpy

    cmp = assert_matches_numpy(lambda a: np.linalg.slogdet(a), SPD, device="cpu")
    assert [leaf.path for leaf in cmp.leaves] == ["result.sign", "result.logabsdet"]
    assert_matches_numpy(lambda a: np.unique_all(np.round(a)), SPD, device="cpu")


def test_a_device_implementation_replaces_the_host_round_trip(monkeypatch):
    """An op whose registration has a "cuda" implementation runs it on the device, with the
    operands' device views and the results' buffers (here under the SIMT emulator, where
    device memory is host memory, by a stand-in implementation)."""
    import ctypes

    from gpu_emulator import EmulatedDevice
    from tracearray.gpu import driver
    from tracearray.ops import EXTERNALS

    calls = []

    def device_det(dev, operands, results, **attrs):
        (a,), (out,) = operands, results
        calls.append((a.shape, a.strides, out.shape))
        span = 1 + sum((k - 1) * st for k, st in zip(a.shape, a.strides))   # elements
        buf = (ctypes.c_double * span).from_address(a.ptr)
        view = np.lib.stride_tricks.as_strided(np.frombuffer(buf, np.float64), a.shape,
                                               [s * 8 for s in a.strides])
        res = np.linalg.det(view)
        ctypes.memmove(out.ptr, res.ctypes.data, res.nbytes)

    monkeypatch.setitem(EXTERNALS["linalg.det"].device, "cuda", device_det)
    prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        f = tracearray.compile(lambda a: np.linalg.det(a.transpose(0, 2, 1) * 2) + 1,
                               device="cuda")
        same(f(SPD), np.linalg.det(SPD.transpose(0, 2, 1) * 2) + 1)
        assert calls and calls[0][0] == (3, 4, 4) and calls[0][2] == (3,)
    finally:
        driver.set_device_for_testing(prev)


def test_eig_and_eigvals_have_numpys_data_dependent_dtype() -> None:
    """np.linalg.eig/eigvals: real results when every eigenvalue of the batch is real, else
    complex (probed when the function runs; each answer is one trace), bit for bit NumPy's;
    a batch with one complex spectrum is complex throughout."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((4, 4))
    s = a @ a.T + np.eye(4)
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])
    f = tracearray.compile(lambda x: np.linalg.eig(x), device="cpu")
    g = tracearray.compile(lambda x: np.linalg.eigvals(x * 2.0), device="cpu")
    for x in (a, s, np.stack([s, a]), rot, np.eye(2), a.astype(np.float32)):
        want, got = np.linalg.eig(x), f(x)
        assert type(got).__name__ == "EigResult"
        for w, v in zip(want, got):
            assert w.dtype == v.dtype
            np.testing.assert_array_equal(w, v)
        want_vals = np.linalg.eigvals(x * 2.0)
        got_vals = g(x)
        assert got_vals.dtype == want_vals.dtype
        np.testing.assert_array_equal(got_vals, want_vals)
    h = tracearray.compile(lambda x: np.linalg.eigvals(x), device="cpu")
    h(a), h(s)
    seen = h.cache_info()
    h(a), h(s), h(a * 3)                        # each answer's trace is cached
    assert h.cache_info().traces == seen.traces and h.cache_info().compiles == seen.compiles
    with pytest.raises(np.linalg.LinAlgError):
        f(np.ones((2, 3)))


def test_lstsq_rank_is_known_when_tracing_so_polyfit_compiles():
    # np.polyfit branches on lstsq's rank (its RankWarning): the rank is probed first
    x = np.linspace(-1, 2, 7)
    y = np.sin(x)
    for fn in (lambda a, b: np.polyfit(a, b, 2), lambda a, b: np.polyfit(a, b, 3, full=True),
               lambda a, b: np.polyfit(a, b, 1, w=np.abs(b) + 1, cov=True)):
        for got, want in zip(np.atleast_1d(cpu(fn)(x, y)) if not isinstance(fn(x, y), tuple)
                             else cpu(fn)(x, y), np.atleast_1d(fn(x, y))
                             if not isinstance(fn(x, y), tuple) else fn(x, y)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    f = cpu(lambda a, b: np.linalg.lstsq(a, b)[2] + 0)
    assert f(np.ones((6, 3)), np.ones(6)) == 1 and f(np.eye(3), np.ones(3)) == 3
    wide = RNG.standard_normal((3, 5))
    got, want = cpu(np.linalg.lstsq)(wide, np.ones(3)), np.linalg.lstsq(wide, np.ones(3))
    assert type(got[2]) is type(want[2]) and got[2] == want[2]
    with pytest.warns(np.exceptions.RankWarning):
        cpu(lambda a, b: np.polyfit(a, b, 2))(np.ones(4), np.arange(4.0))


def test_einsum_dtype_casts_each_operand_under_the_casting_rule():
    """np.einsum(..., dtype=) casts every operand under ``casting`` ('safe' by default):
    float64 operands to float32 is NumPy's TypeError there, allowed with 'same_kind'."""
    from tracearray.testing import assert_matches_numpy
    a, b = np.ones((3, 4)), np.ones((4, 5), np.float32)
    for kw in (dict(dtype=np.float32), dict(dtype=np.float32, casting="same_kind"),
               dict(dtype=np.int64, casting="unsafe"), dict(dtype=np.float64)):
        assert_matches_numpy(lambda a, b, kw=kw: np.einsum("ij,jk->ik", a, b, **kw), a, b,
                             device="cpu")
