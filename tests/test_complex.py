"""Complex numbers (trace/complex.py): differential tests against NumPy on the CPU.

Values sit on the branch cuts and at the special points of C99 Annex G: signed zeros in
either part, infinities, NaN, tiny and huge magnitudes; complex64 and complex128; mixed
with real and integer operands and weak Python scalars; non-contiguous and negative-stride
complex arguments; sizes 0 and 1. The formulas of ``complex_math.py`` are also checked
element by element on NumPy arrays (they are NumPy code), on a grid of every pair of special
values.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import tracearray
from tracearray.testing import assert_matches_numpy
from tracearray.trace import complex_math as cm

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 1e-300, -1e-300, 1e300, np.inf, -np.inf,
           np.nan, 3.7, -0.3, 1e-10, 800.0, 20.0]
CDTYPES = [np.complex64, np.complex128]


def special_grid(cdt: type) -> np.ndarray:
    part = np.float32 if cdt is np.complex64 else np.float64
    with np.errstate(over="ignore"):
        v = np.array(SPECIAL, dtype=part)
    re, im = np.meshgrid(v, v)
    z = np.empty(re.size, cdt)
    z.real, z.imag = re.ravel(), im.ravel()
    return z


def random_complex(cdt: type, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = np.empty(n, cdt)
    z.real, z.imag = rng.standard_normal(n) * 3, rng.standard_normal(n) * 3
    return z


def check(fn, *args):
    assert_matches_numpy(fn, *args, device="cpu")


# ============================================================================================
# The formulas, on NumPy arrays, against NumPy's complex loops (every special pair)
# ============================================================================================

def _close(got: np.ndarray, want: np.ndarray, ulps: int = 4) -> np.ndarray:
    eps = np.finfo(want.real.dtype).eps
    with np.errstate(all="ignore"):
        same = np.ones(want.shape, bool)
        for g, w in ((got.real, want.real), (got.imag, want.imag)):
            same &= (np.isnan(g) & np.isnan(w)) | ((g == w) & (np.signbit(g) == np.signbit(w)))
        near = np.abs(got.astype(np.complex128) - want) <= ulps * eps * np.abs(want)
        near &= np.isfinite(want) & np.isfinite(got) & (want != 0)
    return same | near


FORMULAS = ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "expm1",
            "log1p", "log2", "log10", "exp2", "reciprocal", "sign", "arcsin", "arccos",
            "arctan", "arcsinh", "arccosh", "arctanh"]


@pytest.mark.parametrize("name", FORMULAS)
@pytest.mark.parametrize("cdt", CDTYPES)
def test_formula_matches_numpy_on_special_values(name, cdt):
    z = np.concatenate([special_grid(cdt), random_complex(cdt, 500)])
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
        re, im = getattr(cm, name)((z.real.copy(), z.imag.copy()))
    got = np.empty_like(want)
    got.real, got.imag = re, im
    bad = ~_close(got, want)
    assert not bad.any(), list(zip(z[bad][:5], got[bad][:5], want[bad][:5]))


@pytest.mark.parametrize("cdt", CDTYPES)
def test_division_is_smiths_algorithm_bit_for_bit(cdt):
    a = special_grid(cdt)
    b = a[::-1].copy()
    with np.errstate(all="ignore"):
        want = a / b
        re, im = cm.div((a.real, a.imag), (b.real, b.imag))
    np.testing.assert_array_equal(re, want.real)
    np.testing.assert_array_equal(im, want.imag)
    assert (np.signbit(re) == np.signbit(want.real))[~np.isnan(re)].all()


# ============================================================================================
# Compiled, against NumPy
# ============================================================================================

@pytest.mark.parametrize("cdt", [np.complex64, np.complex128])
def test_sqrt_of_tiny_imaginary_values(cdt):
    """soak cpu-2026-12-02-f, program 8173: ``z ** 0.5`` (NumPy's sqrt) of 5e-324j gave 0:
    sqrt(0.5 |y|) underflowed; glibc takes 0.5 sqrt(2 |y|) below 2 * tiny. Bit for bit."""
    tiny = np.finfo(cdt).tiny
    ys = np.array([np.finfo(cdt).smallest_subnormal, 3 * np.finfo(cdt).smallest_subnormal,
                   tiny / 3, tiny, 2 * tiny, 4 * tiny, 1.0], np.finfo(cdt).dtype)
    z = np.concatenate([1j * ys, -1j * ys]).astype(cdt)
    for fn in (np.sqrt, lambda v: v ** 0.5):
        got = tracearray.compile(fn, device="cpu")(z)
        assert np.array_equal(got.view(np.finfo(cdt).dtype), fn(z).view(np.finfo(cdt).dtype))


def test_arcsinh_of_nan_plus_infinite_imaginary_takes_the_nans_sign():
    """soak cpu-2026-12-02-i, programs 4551 and 5450: asinh(NaN + i inf) is +-inf + i NaN
    (Annex G leaves the sign open); glibc copies the NaN's sign, and x86's default NaN (inf
    * 0) is negative: NumPy gave -inf, we gave +inf."""
    with np.errstate(invalid="ignore"):
        default_nan = (np.array([0.0]) * np.inf)[0]
    z = np.array([complex(default_nan, np.inf), complex(-default_nan, np.inf),
                  complex(default_nan, -np.inf), complex(np.nan, np.inf)])
    for fn in (np.arcsinh, np.arcsin, np.arccos, np.arccosh, np.arctanh):
        got = tracearray.compile(fn, device="cpu")(z)
        assert [str(v) for v in got] == [str(v) for v in fn(z)], fn.__name__


def test_power_with_infinite_exponents_recovers_cs_infinities():
    """soak cpu-2026-12-02-g, program 6515: ``(-21) ** (inf + inf j)`` gave NaN + NaN j where
    NumPy (glibc's cpow, cexp(w clog z) with C's complex product, which recovers infinities:
    Annex G) gives 0. Both parts compared, NaN equal to NaN."""
    inf, nan = np.inf, np.nan
    z = np.array([-21 + 0j, 2 + 0j, 0.5 + 0.5j, -3 - 1j, 1e300 + 1e300j, inf + 0j, -inf + 1j,
                  nan + 0j, 1j, 1e-300 + 0j])
    w = np.array([inf + inf * 1j, -inf + inf * 1j, inf + 0j, 0.5 + inf * 1j, nan + inf * 1j,
                  2.5 + 0.5j, 1e308 + 1e308j, 3 + 0j, -inf + 0j, inf - inf * 1j])
    zz, ww = np.meshgrid(z, w)
    got = tracearray.compile(lambda a, b: a ** b, device="cpu")(zz, ww)
    with np.errstate(all="ignore"):
        want = zz ** ww

    def same(x, y):
        return (x == y) | (np.isnan(x) & np.isnan(y)) | np.isclose(x, y, rtol=1e-12, atol=0)
    assert (same(got.real, want.real) & same(got.imag, want.imag)).all()


@pytest.mark.parametrize("cdt", CDTYPES)
def test_arithmetic_at_special_values(cdt):
    z = special_grid(cdt)
    w = z[::-1].copy()
    check(lambda z, w: (z + w, z - w, z * w, z / w, -z, np.conj(z), z * z), z, w)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh",
                                  "tanh", "expm1", "log1p", "log10", "square", "reciprocal",
                                  "sign", "absolute", "angle", "isnan", "isinf", "isfinite",
                                  "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
                                  "arctanh"])
@pytest.mark.parametrize("cdt", CDTYPES)
def test_unary_functions_on_branch_cuts(name, cdt):
    z = special_grid(cdt)
    f = getattr(np, name)
    check(lambda z: f(z), z)


@pytest.mark.parametrize("cdt", CDTYPES)
def test_comparisons_and_extrema_lexicographic_with_nan(cdt):
    z = special_grid(cdt)
    w = np.roll(z, 7)
    check(lambda z, w: (z == w, z != w, z < w, z <= w, z > w, z >= w, np.maximum(z, w),
                        np.minimum(z, w), np.fmax(z, w), np.fmin(z, w)), z, w)


def test_promotion_with_real_integer_and_python_scalars():
    z64 = random_complex(np.complex64, 7)
    x64 = np.linspace(-2, 2, 7)
    i32 = np.arange(7, dtype=np.int32)
    f32 = np.linspace(0, 1, 7, dtype=np.float32)

    def f(z, x, i, f):
        # complex64 + float64 -> complex128; Python complex scalars are weak
        return z + x, z * i, z * 2.5, z + 1j, f * 1j, i * 1j, 2 ** z, z ** 2, z ** -1.5
    check(f, z64, x64, i32, f32)


@pytest.mark.parametrize("cdt", CDTYPES)
def test_power_integer_and_complex_exponents(cdt):
    z = special_grid(cdt)
    check(lambda z: (z ** 0, z ** 1, z ** 2, z ** 3, z ** -2, z ** 0.5, z ** (1 + 1j)), z)


def test_reductions_sum_prod_mean_var_cumsum_cumprod():
    z = random_complex(np.complex128, 24, seed=3).reshape(4, 6)
    check(lambda z: (z.sum(), z.sum(axis=0), np.prod(z, axis=1), z.mean(axis=1), z.mean(),
                     np.var(z), np.std(z, axis=0, ddof=1), np.cumsum(z, axis=1),
                     np.cumprod(z, axis=0), np.prod(z)), z)


def test_matmul_dot_vdot():
    a = random_complex(np.complex128, 12, seed=1).reshape(3, 4)
    b = random_complex(np.complex128, 8, seed=2).reshape(4, 2)
    r = np.linspace(-1, 1, 8).reshape(4, 2)
    check(lambda a, b, r: (a @ b, a @ r, np.dot(a, b), np.vdot(a[0], b[:, 0]), a.T @ a), a, b, r)


def test_parts_attributes_and_predicates():
    z = special_grid(np.complex128)
    check(lambda z: (z.real, z.imag, np.real(z), np.imag(z), np.iscomplex(z), np.isreal(z),
                     np.iscomplexobj(z), np.angle(z, deg=True)), z)


def test_creation_and_euler():
    t = np.linspace(-4, 4, 9)
    check(lambda t: (np.exp(1j * t), 1j * t, t + np.zeros(9, complex), np.zeros(3, complex),
                     np.ones_like(t, dtype=np.complex64)), t)


@pytest.mark.parametrize("layout", ["strided", "negative", "transposed"])
def test_non_contiguous_complex_arguments(layout):
    base = random_complex(np.complex128, 48, seed=4).reshape(6, 8)
    z = {"strided": base[::2, 1::3], "negative": base[::-1, ::-2], "transposed": base.T}[layout]
    check(lambda z: (z * (1 - 2j), np.exp(z), z.sum(axis=0)), z)


@pytest.mark.parametrize("n", [0, 1])
def test_sizes_zero_and_one(n):
    z = random_complex(np.complex64, n)
    check(lambda z: (z * 2j, np.sqrt(z), z.sum(), np.cumsum(z)), z)


def test_indexing_gather_and_setitem_write_the_callers_array():
    def f(z, idx):
        z[1:3] = 5j
        z.imag[0] = 7
        z[idx] *= 2
        return z[::-1], z[idx]
    z = random_complex(np.complex128, 6, seed=5)
    a, b = z.copy(), z.copy()
    got = tracearray.compile(f, device="cpu")(a, np.array([4, 5]))
    want = f(b, np.array([4, 5]))
    np.testing.assert_array_equal(a, b)     # the argument was written as NumPy writes it
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_results_are_complex_arrays_and_scalars():
    z = random_complex(np.complex64, 5)
    r, s = tracearray.compile(lambda z: (z * 2, z.sum()), device="cpu")(z)
    assert r.dtype == np.complex64 and isinstance(r, np.ndarray)
    assert isinstance(s, np.complex64)


def test_complex_to_real_casts_warn_as_numpy():
    z = random_complex(np.complex128, 4)
    f = tracearray.compile(lambda z: z.astype(np.float32), device="cpu")
    with pytest.warns(np.exceptions.ComplexWarning):
        got = f(z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(got, z.astype(np.float32))
    check(lambda z: (z.astype(bool), z.astype(np.complex64)), z)


def test_python_complex_into_a_real_array_raises_numpys_type_error():
    """``x[i] = 1j`` (a Python complex, alone or in a list) into a float or integer array:
    NumPy's TypeError from float() / int() (the real part was stored); NumPy's complex
    scalars and arrays cast with a ComplexWarning, and a bool target takes truthiness."""
    def setting(value, dtype):
        def f(x):
            y = x.astype(dtype)
            y[:2] = value
            return y
        return f
    x = np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for value in (1j, [1j, 2.0], (1.0, 1 + 0j), np.complex128(2 + 1j), np.array([1j, 2j])):
            for dtype in (np.float64, np.float32, np.int64, np.bool_):
                check(setting(value, dtype), x)


def test_ufuncs_without_complex_loops_raise_numpys_type_error():
    z = random_complex(np.complex128, 3)
    with pytest.raises(TypeError):
        tracearray.compile(lambda z: np.floor(z), device="cpu")(z)
    with pytest.raises(TypeError):
        tracearray.compile(lambda z: z // 2, device="cpu")(z)


# ============================================================================================
# GPU (run by the lead on the H200): the same binding, NumPy and device arrays
# ============================================================================================

def _have_gpu() -> bool:
    from tracearray.gpu import driver
    return driver.is_available()


gpu = pytest.mark.skipif(not _have_gpu(), reason="needs an NVIDIA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("cdt", CDTYPES)
def test_gpu_matches_numpy_on_branch_cuts(cdt):
    z = special_grid(cdt)
    w = np.roll(z, 5)
    assert_matches_numpy(lambda z, w: (z * w, z / w, np.exp(z), np.log(z), np.sqrt(z),
                                       np.arcsin(z), np.arctanh(z), abs(z), z.sum()),
                         z, w, device="cuda")


@pytest.mark.gpu
@gpu
def test_gpu_device_arrays_in_and_out_and_strided_inputs():
    from tracearray.gpu import Array
    z = random_complex(np.complex128, 40, seed=7).reshape(5, 8)
    f = tracearray.compile(lambda z: z * (1 + 2j) + np.conj(z), device="cuda")
    d = Array.from_numpy(z)
    out = f(d)
    assert isinstance(out, Array) and out.dtype == np.complex128
    np.testing.assert_array_equal(out.numpy(), z * (1 + 2j) + np.conj(z))
    np.testing.assert_array_equal(f(z[::-1, ::2]), z[::-1, ::2] * (1 + 2j) + np.conj(z[::-1, ::2]))


@pytest.mark.gpu
@gpu
def test_gpu_in_place_update_of_a_complex_device_array():
    from tracearray.gpu import Array

    def f(z):
        z *= 1j
        return z.real.sum()
    z = random_complex(np.complex64, 16, seed=8)
    d = Array.from_numpy(z)
    tracearray.compile(f, device="cuda")(d)
    np.testing.assert_array_equal(d.numpy(), z * np.complex64(1j))


# ============================================================================================
# The random programs draw complex values (the soak's generator)
# ============================================================================================

def _is_complex_program(p) -> bool:
    return any(x.dtype.kind == "c" for x in p.inputs) or "1j" in p.source()


def test_programs_draw_complex_inputs_and_steps_and_match_numpy():
    from tracearray.testing import fuzz
    complex_programs = [p for p in (fuzz.program_for("complex-ci", i) for i in range(80))
                        if _is_complex_program(p)]
    assert len(complex_programs) >= 10
    assert any(x.dtype.kind == "c" for p in complex_programs for x in p.inputs)
    failures = []
    for p in complex_programs[:25]:
        out = fuzz.run_program(p, "cpu")
        if out.status != "match":
            failures.append(f"{p.source()}\n{out.status}: {out.detail}")
    assert not failures, "\n\n".join(failures[:2])


def test_movement_and_selection_functions_act_on_both_parts():
    z = random_complex(np.complex128, 24, seed=9).reshape(4, 6)
    x = np.linspace(-1, 1, 24).reshape(4, 6)

    def f(z, x):
        return (np.concatenate([z, x]), np.stack([z, x], axis=1), np.where(x > 0, z, x),
                np.where(z.real > 0, z, 1j), np.take(z, [0, 3, 2], axis=1), z.T.reshape(3, 8),
                np.flip(z, 0), np.roll(z, 2), np.diff(z), np.trace(z), np.triu(z),
                z[z.real > 0].sum(), z[[0, 2], 1:], z[..., None, ::2])
    check(f, z, x)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_convolve_correlate_round_and_methods_of_complex_arrays(device, request):
    """np.convolve and np.correlate of complex (and mixed) operands, every mode and a
    longer second operand (NumPy's swap), np.round / ndarray.round of the parts, and the
    methods argsort, sort (in place), trace and compress: NumPy's values (they were refused:
    NumPy's own code converted the arrays)."""
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    dev = "cpu" if device == "cpu" else "cuda"
    z = random_complex(np.complex128, 9, seed=13)
    x = np.linspace(-1, 1, 4)

    def f(z, x):
        return (np.convolve(z, z[:3]), np.convolve(x, z, "same"), np.convolve(z[:3], x, "valid"),
                np.correlate(z, z[:3]), np.correlate(x, z, "full"), np.correlate(z[:4], z, "same"),
                np.round(z * 10, 1), (z * 100).round(-1), np.around(z.astype(np.complex64), 2))
    assert_matches_numpy(f, z, x, device=dev)
    zz = np.round(random_complex(np.complex128, 12, seed=14).reshape(3, 4), 1)

    def g(z):
        s = z.copy()
        s.sort(axis=0)
        return z.argsort(), z.argsort(axis=0, kind="stable"), s, z.trace(1), \
            z.compress([True, False, True], axis=0)
    assert_matches_numpy(g, zz, device=dev)


def test_mixed_real_complex_writes_and_casts():
    def f(x, z):
        y = x.astype(np.complex64)   # real -> complex: a zero imaginary part
        y[0] = z[0]                  # complex128 into complex64 (unsafe, as setitem)
        y += 1j
        return y, np.asarray(x, dtype=complex) * z
    x = np.linspace(0, 1, 5)
    z = random_complex(np.complex128, 5, seed=10)
    check(f, x, z)
    with pytest.raises(TypeError):   # NumPy's same_kind rule: x += complex is an error
        tracearray.compile(lambda x, z: x.__iadd__(z), device="cpu")(x.copy(), z)


GLOBAL_Z = random_complex(np.complex128, 4, seed=12)


def test_complex_global_arrays_are_read_at_every_call():
    f = tracearray.compile(lambda x: GLOBAL_Z * x, device="cpu")
    x = np.linspace(1, 2, 4)
    np.testing.assert_array_equal(f(x), GLOBAL_Z * x)
    f(x)                                # (the call fast path)
    GLOBAL_Z[:] = GLOBAL_Z * 1j         # changed in place: the next call sees the new values
    np.testing.assert_array_equal(f(x), GLOBAL_Z * x)
    np.testing.assert_array_equal(f(x), GLOBAL_Z * x)


def _escape_time(c, n=12):
    z = np.zeros_like(c)
    it = np.zeros(c.shape, int)
    for _ in range(n):
        m = np.abs(z) <= 2
        z[m] = z[m] ** 2 + c[m]
        it[m] += 1
    return it, z


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_complex_masked_updates_in_a_loop_need_no_data_dependent_sizes(device, request):
    # z[m] = z[m] ** 2 + c[m]: selections of one mask, computed on the whole arrays and
    # written back by the mask; each compacted z[m] was a probe and a trace per iteration
    # (20 iterations passed the 64-stage bound)
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    c = np.linspace(-2, 1, 13)[None, :] + 1j * np.linspace(-1.5, 1.5, 7)[:, None]
    f = tracearray.compile(_escape_time, device="cpu" if device == "cpu" else "cuda")
    got, want = f(c), _escape_time(c)
    np.testing.assert_array_equal(np.asarray(got[0]), want[0])
    np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=1e-12, equal_nan=True)
    assert f.cache_info().traces == 1
    for g in (lambda z: z[z.real > 0].sum(), lambda z: z[z.imag > 0].mean(),
              lambda z: np.abs(z[z.imag > 0]), lambda z: z[z.real > 0] * 2j + 1,
              lambda z: (z[z.real > 0].conj(), {"r": z[z.real > 0].real})):
        got_g, want_g = tracearray.compile(g, device="cpu")(c), g(c)
        for a, b in zip(np.atleast_1d(got_g) if not isinstance(want_g, tuple) else
                        (got_g[0], got_g[1]["r"]),
                        np.atleast_1d(want_g) if not isinstance(want_g, tuple) else
                        (want_g[0], want_g[1]["r"])):
            np.testing.assert_allclose(a, b, rtol=1e-12)
            assert np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize("dt", [np.complex128, np.complex64])
def test_log_near_the_unit_circle_is_accurate_in_its_real_part(dt):
    # |z| near 1: log|z| is small and |z|^2 - 1 cancels; computed as (u - 1)(u + 1) + v^2 it
    # was up to 600 ulps of the real part off NumPy's (soak cpu-2026-12-01-p, program 347)
    rng = np.random.default_rng(1)
    z = (rng.uniform(0.5, 2, 5000) * np.exp(1j * rng.uniform(-np.pi, np.pi, 5000))).astype(dt)
    z[:2] = [-0.6834756630445487 * (1 + 1j), 1 + 1e-9j]
    for fn in (np.log, np.log10, np.log2):
        got, want = tracearray.compile(fn, device="cpu")(z), fn(z)
        ulps = np.abs(got.real - want.real) / np.spacing(np.abs(want.real))
        assert ulps.max() <= 8, (fn.__name__, ulps.max())
        # (the imaginary part is atan2's: glibc's vector atan2 (libmvec) everywhere, also
        # outside vectorised loops, so that an element's result does not depend on its
        # position (bug 73): within 4 ulp of NumPy's (the transcendental family), not equal)
        np.testing.assert_array_max_ulp(got.imag, want.imag, maxulp=4)


def RNG_PERM(n):
    return np.random.default_rng(11).permutation(n)


@pytest.mark.parametrize("cdt", CDTYPES)
def test_sort_argsort_and_sort_complex_in_numpys_order(cdt):
    """NumPy's complex order: real part, then imaginary part, numbers with a NaN part last in
    the groups R + Rj, R + nanj, nan + Rj, nan + nanj (each by its other part). The special
    grid without -0.0 has no two equal numbers (+0.0 and -0.0 compare equal: NumPy's default
    kind orders such ties its own way, divergence complex-sort-ties); with it, the stable
    kinds, which are NumPy's order exactly."""
    z = special_grid(cdt)
    part = np.float32 if cdt is np.complex64 else np.float64
    with np.errstate(over="ignore"):   # (1e300 is inf in float32, 1e-300 zero: ties)
        v = np.unique(np.array([x for x in SPECIAL if not (x == 0 and np.signbit(x))], part))
    re, im = np.meshgrid(v, v)
    distinct = np.empty(re.size, cdt)
    distinct.real, distinct.imag = re.ravel(), im.ravel()   # (one nan + nanj: NaNs tie)
    check(lambda z: (np.sort(z), np.argsort(z), np.sort_complex(z), np.sort(z, axis=None)),
          distinct)
    m = distinct[RNG_PERM(distinct.size)].reshape(v.size, -1)
    check(lambda m: (np.sort(m, axis=0), np.argsort(m, axis=1), np.sort(m[:, ::-3], axis=-1),
                     np.argsort(m, axis=None), np.sort(m.T, axis=None)), m)
    check(lambda z: (np.sort(z, kind="stable"), np.argsort(z, kind="stable"),
                     np.argsort(z.reshape(17, 17), axis=0, stable=True)), z)


def test_sorting_complex_with_ties_is_numpys_stable_sort():
    z = (np.random.default_rng(3).integers(-2, 3, (9, 40)) +
         1j * np.random.default_rng(4).integers(-2, 3, (9, 40))).astype(np.complex64)
    check(lambda z: (np.sort(z, axis=1), np.argsort(z, axis=0, kind="stable"),
                     np.argsort(z, stable=True)), z)


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int64, np.float32, np.float64, np.bool_])
def test_sort_complex_of_real_arrays_casts_as_numpy(dt):
    x = (np.random.default_rng(5).standard_normal((4, 9)) * 50).astype(dt)
    check(lambda x: np.sort_complex(x), x)


def test_sort_of_complex_refuses_what_numpy_refuses():
    z = random_complex(np.complex128, 6)
    for f in (lambda z: np.sort(z, kind="bogus"), lambda z: np.sort(z, axis=3)):
        with pytest.raises((ValueError, np.exceptions.AxisError)):
            f(z)
        with pytest.raises((ValueError, np.exceptions.AxisError)):
            tracearray.compile(f)(z)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_argmax_argmin_in_numpys_order(device, request):
    """NumPy's complex argmax / argmin: the first item with a NaN part, else the first of
    the lexicographic extremum (ties in the real part decided by the imaginary, -0.0 equal
    to 0.0, infinities), whole and along each axis, keepdims, methods; an empty sequence
    raises NumPy's ValueError."""
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    dev = "cuda" if device == "emulated" else "cpu"
    rng = np.random.default_rng(21)
    z = np.round(rng.standard_normal((4, 6))) + 1j * np.round(rng.standard_normal((4, 6)))
    zn = z.copy()
    zn[1, 3], zn[2, 0], zn[3, 5] = complex(np.nan, 1), complex(1, np.nan), complex(np.inf, -1)
    edge = np.array([complex(-np.inf, -np.inf), complex(-np.inf, -np.inf),
                     complex(-np.inf, 2), -0.0 + 0j, 0.0 - 0j])
    for v in (z, zn, z.astype(np.complex64), edge):
        assert_matches_numpy(lambda a: (np.argmax(a), np.argmin(a), a.argmax(), a.argmin()),
                             v, device=dev)
    for v in (z, zn):
        assert_matches_numpy(lambda a: (np.argmax(a, axis=0), np.argmin(a, axis=-1),
                                        np.argmax(a, 1, keepdims=True)), v, device=dev)
    with pytest.raises(ValueError, match="empty sequence"):
        tracearray.compile(lambda a: np.argmax(a[:0]), device=dev)(z)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_unique_of_complex_values(device, request):
    """np.unique of complex values is NumPy's own (on the host): every flag, NaN parts with
    and without equal_nan, complex64, a 2-d array (flattened), an empty one, and the
    unique_* functions; along an axis it is refused by name."""
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    dev = "cuda" if device == "emulated" else "cpu"
    rng = np.random.default_rng(22)
    z = np.round(rng.standard_normal(24)) + 1j * np.round(rng.standard_normal(24))
    zn = z.copy()
    zn[3], zn[7], zn[9] = complex(np.nan, 1), complex(1, np.nan), complex(np.nan, np.nan)
    for v in (zn, z.astype(np.complex64).reshape(4, 6)):
        assert_matches_numpy(lambda a: (np.unique(a), np.unique(a, True, True, True),
                                        np.unique(a, equal_nan=False, return_counts=True)),
                             v, device=dev)
    assert_matches_numpy(lambda a: (np.unique(a[:0]), np.unique_counts(a),
                                    np.unique(np.round(a.real * 1.5) + 1j)), z, device=dev)
    from tracearray.errors import UnsupportedOperationError
    with pytest.raises(UnsupportedOperationError, match="axis"):
        tracearray.compile(lambda a: np.unique(a, axis=0), device=dev)(z.reshape(4, 6))


# Found by probes of real-world programs (ninth session): NumPy converts a Python scalar
# operand of np.append / np.diff(prepend=) / np.dot / np.array([...]) to a strong array
# (complex64 with 2 is complex128 there), np.select's own code writes with np.copyto,
# and np.sum's start value is a scalar.
COMPLEX_SCALAR_FORMS = {
    "append": lambda x: np.append(x, 2),
    "dot": lambda x: np.dot(x, 2),
    "outer": lambda x: np.outer(x, 2.0),
    "diff_prepend": lambda x: np.diff(x, prepend=0),
    "array_of_list": lambda x: np.array([x[0], 2.0]),
    "select_scalar_choice": lambda x: np.select([x.real > 0, x.real <= 0], [0, x]),
    "select_default": lambda x: np.select([x.real > 0, x.imag < 0], [x, 1j], default=x * 2),
    "select_list_choice": lambda x: np.select([x.real > 0], [[1, 2, 3, 4]], default=x),
    "select_broadcast": lambda x: np.select([x.real[None, :] > np.ones((2, 1))], [x], 0),
    "broadcast_arrays": lambda x: np.broadcast_arrays(x[:, None], 0, x)[1],
    "piecewise_constant_and_function": lambda x: np.piecewise(
        x, [x.real < 0, x.real >= 0], [0, lambda v: v * 2]),
    "piecewise_default_and_cumsum": lambda x: np.piecewise(
        x, [x.real < 0, x.imag < 0], [1j, lambda v: np.cumsum(v), 7]),
    "piecewise_one_condition": lambda x: np.piecewise(x, x.imag > 0, [lambda v: v ** 2]),
    "rint": lambda x: np.rint(x * 1.5),
    "sum_initial": lambda x: np.sum(x, initial=2),
    "sum_initial_complex_rows": lambda x: np.sum(x.reshape(2, 2), axis=0, initial=1 + 2j),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_SCALAR_FORMS))
@pytest.mark.parametrize("cdt", [np.complex64, np.complex128])
def test_python_scalars_beside_complex_arrays(name, cdt):
    x = np.array([-1.5, 0.5j, 2.25, 3 - 1j], cdt)
    check(COMPLEX_SCALAR_FORMS[name], x)


@pytest.mark.parametrize("name", ["average_weights", "average_returned", "sum_as_complex",
                                  "prod_as_complex", "cov", "corrcoef"])
def test_complex_weighted_statistics(name):
    """np.average(z, weights=w) of complex values (NumPy sums the real weights as complex:
    wgt.sum(dtype=complex128)), np.cov and np.corrcoef (NumPy's code returns an ndarray of
    complex sums): they crashed in the trace (probe sessions 3 and 4)."""
    z = (np.arange(6.0) + 1j * np.arange(6.0)[::-1]).reshape(2, 3)
    w = np.array([1.0, 2.0, 3.0])
    fns = {"average_weights": (lambda z, w: np.average(z, axis=1, weights=w), (z, w)),
           "average_returned": (lambda z, w: np.average(z, axis=1, weights=w, returned=True),
                                (z, w)),
           "sum_as_complex": (lambda z, w: w.sum(dtype=np.complex64) + z, (z, w)),
           "prod_as_complex": (lambda z, w: np.prod(w, dtype=np.complex128, keepdims=True),
                               (z, w)),
           "cov": (lambda z, w: np.cov(z), (z, w)),
           "corrcoef": (lambda z, w: np.corrcoef(z), (z, w))}
    fn, args = fns[name]
    assert_matches_numpy(fn, *args, device="cpu")


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanmax", "nanargmin",
                                  "nanvar", "nanstd", "nancumsum"])
def test_complex_nan_statistics(name):
    """NumPy's nan-functions of complex values (they crashed in np.copyto, or on the
    np._NoValue NumPy's own code passes for arguments not given; probe session 5)."""
    import warnings
    x = np.array([[1 + 1j, complex(np.nan, 0), 2 - 1j], [complex(0, np.nan), 1, 1j]])
    f = getattr(np, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_matches_numpy(lambda a: (f(a), f(a, axis=1)), x, device="cpu")
        assert_matches_numpy(lambda a: f(a, axis=0), x.astype(np.complex64), device="cpu")


def test_copyto_with_complex_values():
    def f(x, z):
        y = np.zeros(3, np.complex128)
        np.copyto(y, z, where=x > 0)
        r = x.copy()
        np.copyto(r, z, casting="unsafe")
        return y, r
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_numpy(f, np.array([1.0, -1.0, 2.0]), np.array([1j, 2 + 1j, 3 - 2j]),
                             device="cpu")


def test_complex_arguments_never_recurse():
    """np.clip of a real array with a complex bound ran NumPy's np.clip, which calls the
    array's clip method, which calls np.clip (a RecursionError); np.any with a complex out=
    likewise (probe session 5). They are traced or refused now."""
    b = np.array([True, False, True])

    def any_out(b):
        o = np.zeros(3, np.complex128)
        np.any(b.reshape(3, 1), axis=1, out=o)
        return o
    assert_matches_numpy(any_out, b, device="cpu")
    assert_matches_numpy(lambda b: np.cumsum(b, dtype=np.complex64), b, device="cpu")
    with pytest.raises(tracearray.errors.UnsupportedOperationError):
        tracearray.compile(lambda r: np.clip(r, 1j, None), device="cpu")(np.ones(2))


def test_block_of_complex_blocks():
    """np.block with complex blocks joined the interleaved pairs: a (2, 2, 2) result for
    NumPy's (2, 4), silently (probe session 5)."""
    x = np.ones((2, 2))
    z = x * 1j
    for f in (lambda x, z: np.block([x, z]), lambda x, z: np.block([[x, z], [x, x]]),
              lambda x, z: np.block([[z], [z]])):
        assert_matches_numpy(f, x, z, device="cpu")


def test_put_place_and_putmask_write_complex_arrays():
    """np.put, np.place, np.putmask and ndarray.put into a complex array (an argument,
    written back, or one the function makes, seen through its other names): each part
    takes the values' part. They reached NumPy's C code with the stand-in (a raw
    TypeError or AttributeError; probe of the twelfth session)."""
    m = np.array([True, False, False, True])
    z = np.array([1 + 1j, 2, 3, 4j])

    def place(z):
        np.place(z, m, [9j])
        return z

    def putmask(z):
        np.putmask(z, m, np.array([5 + 1j, 6, 7, 8j]))
        return z

    def put(z):
        np.put(z, [1, -1], [2j, 3.0])
        return z

    def method(z):
        z.put([0], 7 - 1j, mode="clip")
        return z

    def made(x):
        y = x + 0j
        np.put(y, [1], 1j)
        w = y
        np.place(y, x > 2, [5.0])
        return w

    for fn in (place, putmask, put, method):
        assert_matches_numpy(fn, z.copy(), device="cpu")
        arg = z.copy()
        tracearray.compile(fn, device="cpu")(arg)
        np.testing.assert_array_equal(arg, fn(z.copy()), err_msg=fn.__name__)
    assert_matches_numpy(made, np.arange(4.0), device="cpu")


@pytest.mark.parametrize("cdt", [np.complex64, np.complex128])
def test_log_of_subnormal_and_huge_moduli(cdt):
    """np.log's real part where both parts are subnormal (the modulus of the parts scaled
    up, as the C library's clog: a subnormal hypot had lost digits, 0.35 off at
    5e-324(1 + i); probe of the twelfth session) and near the largest finite value (the
    halves' modulus: no overflow)."""
    info = np.finfo(np.dtype(cdt).char.lower() if cdt is np.complex64 else np.float64)
    t, big = float(info.smallest_subnormal), float(info.max)
    z = np.array([t + 1j * t, 2 * t + 1j * t, 3 * t + 4j * t, 1e3 * t - 1j * t,
                  big + 1j * big, -big / 3 + 1j * big / 2, 3 + 4j], cdt)
    got = tracearray.compile(np.log, device="cpu")(z)
    want = np.log(z)
    np.testing.assert_allclose(got.real, want.real, rtol=4 * float(info.eps))
    np.testing.assert_allclose(got.imag, want.imag, rtol=4 * float(info.eps))


@pytest.mark.parametrize("fn", [
    lambda a, b: np.einsum("ij,jk->ik", a, b),
    lambda a, b: np.einsum("ij,jk,k->i", a, b, b[0].real),
    lambda a, b: np.einsum("ij->j", a),
    lambda a, b: np.einsum("ij,jk", a.real, b),
    lambda a, b: np.einsum("ii", a[:, :3]),
    lambda a, b: np.einsum("ij,jk->ik", a.astype(np.complex64), b.real.astype(np.float32)),
])
def test_einsum_of_complex_operands(fn):
    """einsum is linear in each operand: the sum of the real einsums of the parts."""
    rng = np.random.default_rng(0)
    a = rng.random((3, 4)) + 1j * rng.random((3, 4))
    b = rng.random((4, 5)) + 1j * rng.random((4, 5))
    want, got = fn(a, b), tracearray.compile(fn)(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if want.dtype == np.complex64 else 1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("fn", [np.nanvar, np.nanstd, np.nanmean, np.var, np.std])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float32, np.float16,
                                   np.int64, bool])
def test_dtype_of_variance_and_nan_functions(fn, dtype):
    """``dtype=`` of np.nanvar / np.nanstd / np.nanmean over real, integer and complex values
    gives NumPy's result dtype and values (a complex dtype: complex results, NaN imaginary
    parts where np.var divides by no degree of freedom); an integer dtype of inexact values
    raises NumPy's TypeError (a probe found truncated results and float64 in its place)."""
    arrays = (np.array([[1.0, 2.0, np.nan], [4.0, 5.0, 7.0]]), np.array([[1, 2], [3, 5]]),
              np.array([[1 + 2j, 3 - 1j, np.nan], [0.5j, 2 + 0j, 1 + 1j]]),
              np.array([[1, 2, np.nan]], np.float32))
    for a in arrays:
        if fn in (np.var, np.std) and (a.dtype.kind == "c" and np.dtype(dtype).kind != "c"):
            continue   # (a real dtype of complex values: refused, see supported.md)
        for kw in ({}, {"ddof": 1}, {"keepdims": True}, {"ddof": 3}):
            if fn is np.nanmean and "ddof" in kw:
                continue

            def f(a, kw=kw):
                return fn(a, axis=1, dtype=dtype, **kw)
            try:
                want = f(a)
            except TypeError as e:
                with pytest.raises(TypeError, match=re.escape(str(e))):
                    tracearray.compile(f, device="cpu")(a)
                continue
            got = tracearray.compile(f, device="cpu")(a)
            assert got.dtype == want.dtype and got.shape == want.shape, (a.dtype, kw)
            np.testing.assert_allclose(got, want, rtol=2e-3, equal_nan=True)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_pad_of_a_real_array_with_complex_values_keeps_its_dtype():
    x = np.arange(3, dtype=np.uint8)
    for f in (lambda x: np.pad(x, 1, constant_values=1 + 2j),
              lambda x: np.pad(x.astype(np.float32), (1, 2), mode="linear_ramp",
                               end_values=(2 - 1j, 3 + 0j))):
        got, want = tracearray.compile(f, device="cpu")(x), f(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_var_of_complex_values_refuses_ddof_and_correction_together():
    z = np.array([1 + 2j, 3 - 1j, 0.5j])
    for fn in (np.var, np.std, np.nanvar):
        with pytest.raises(ValueError, match="ddof and correction"):
            tracearray.compile(lambda z: fn(z, ddof=1, correction=1), device="cpu")(z)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtypes", [(np.float32, np.float64), (np.float16, np.float32),
                                    (np.float32, np.complex128)])
def test_nanvar_of_narrow_values_in_a_wider_dtype(dtypes):
    """NumPy's nanvar keeps the deviations in the values' dtype (out=arr) and sums their
    squares in dtype=: a probe found them kept in the wider dtype (float32-level errors)."""
    src, dt = dtypes
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(src)
    x[0, 1] = np.nan
    for fn in (np.nanvar, np.nanstd):
        for kw in ({}, {"axis": 1, "ddof": 1}, {"axis": 0, "keepdims": True}):
            def f(x, fn=fn, kw=kw):
                return fn(x, dtype=dt, **kw)
            got, want = tracearray.compile(f, device="cpu")(x), f(x)
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(got, want, rtol=1e-12 if src is np.float32 else 2e-7)
