"""Regression tests: the shrunk programs of every bug the random-program fuzzer found.

Each test is the (shrunk) reproducer the soak or the fuzz tests wrote, checked with
``assert_matches_numpy`` on the CPU. The docstring says which run found it, what was wrong and
where it was fixed. Keep them small and keep them forever.
"""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import tracearray
from tracearray.testing import assert_matches_numpy, fuzz

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_argmin_read_by_an_earlier_kernel() -> None:
    """soak seed 't2', program 79 (compile_error: TypeError "unknown reduction 'argmin' for
    int64"). The map kernel of the first output also computed ``v2 % v1``; the argmin it reads
    is stored by a *later* kernel, so the planner's walker treated it as unstored and inlined
    it as a nested reduction, which argmin does not have. Fixed in fuse/kexpr.py (Walker:
    a reduction the plan stores is never nested; NotFusable places the reader after it)."""
    def program(x0):
        v0 = x0[..., None]
        v1 = x0[..., :-4:-1, None]
        v2 = np.argmin(x0)
        v3 = v2 % v1
        return v0, v3

    assert_matches_numpy(program, np.array([[0], [0], [0]], dtype=np.int64), device="cpu")
    assert_matches_numpy(program, np.array([[5], [-2], [7]], dtype=np.int64), device="cpu")


def test_stored_sum_read_by_an_earlier_kernel_is_not_recomputed() -> None:
    """The same planner bug with a sum: values were right but the sum was recomputed as a
    nested loop per element (O(n^2)); now it is read from memory like the argmin above."""
    def program(x0):
        v0 = x0[..., None]
        v2 = x0.sum()
        return v0, v2 % x0[::-1, :, None]

    assert_matches_numpy(program, np.arange(7, dtype=np.int64).reshape(7, 1) - 3, device="cpu")


def test_flatten_of_an_empty_transcendental() -> None:
    """First fuzz batch (before the soak): ``np.arccos(np.hypot(x, x)).flatten()`` of an
    int32[9, 1, 0] input raised IndexError in fuse/index.py (_reshape_index ran off the end
    of the 0-sized dims). Fixed concurrently in fuse/index.py (reshape of an empty operand is
    not affine: the operand is stored)."""
    def program(x0):
        v0 = np.hypot(x0, x0)
        v1 = np.arccos(v0)
        return v1.flatten()

    assert_matches_numpy(program, np.zeros((9, 1, 0), dtype=np.int32), device="cpu")
    assert_matches_numpy(program, np.zeros((2, 0, 3), dtype=np.float32), device="cpu")


def test_signbit_of_nan_is_not_compared() -> None:
    """soak seed 't3', program 2264 (mismatch): ``np.signbit(np.log10(-1))`` is True with
    NumPy (its log10 returns -nan) and False compiled (+nan). NaN signs are not promised
    (divergence nan-payload); the comparator now treats signbit/copysign of a NaN as
    unverifiable. A comparator fix, not a compiler bug."""
    def program(x0):
        v1 = np.log10(x0)
        return np.signbit(v1), np.copysign(1.0, v1)

    cmp = assert_matches_numpy(program, np.array([0, 0, 302, -1], dtype=np.int32), device="cpu")
    assert "nan-payload" in cmp.divergences


def test_zero_d_where_and_astype_results() -> None:
    """First fuzz batch (mismatch: "got a bool, NumPy returns an ndarray"): for 0-d inputs
    np.where, astype and views return a 0-d ndarray in NumPy, while a compiled function returns
    every 0-d result as a NumPy scalar (the graph has no scalar/0-d distinction). Declared as
    the divergence zero-d-results-are-scalars (values and dtypes still compared)."""
    def program(x0, x1):
        v0 = np.where(x0 > -1, x1, x1)
        return v0.astype(np.int8).astype(np.bool_), x1 >= v0

    cmp = assert_matches_numpy(program, np.array(3, np.int16), np.array(-0.5, np.float32),
                               device="cpu")
    assert "zero-d-results-are-scalars" in cmp.divergences


def test_remainder_by_a_tiny_inexact_divisor() -> None:
    """soak seed '1', program 6316 (mismatch of both the compiled *and* NumPy's own result):
    ``np.remainder(np.log2(v), v)`` with v = arcsin(2.2e-308) (inexact, ±4 ulp). The quotient
    -1022 / v overflows to -inf at every corner of the inputs' intervals, which hid the jumps of
    the remainder in between, and the comparator's interval excluded NumPy's exact 0.0. A
    comparator fix (bounds.py: a remainder is continuous only for finite, equal quotients)."""
    def program(x0):
        v0 = np.arcsin(x0)
        return np.remainder(np.log2(v0), v0)

    assert_matches_numpy(program, np.array([[[2.2250738585072014e-308]]]), device="cpu")


def test_fmod_quotient_jump_hidden_by_float16_rounding() -> None:
    """soak seed 'cpu-2026-12-02-e', program 1146 (on the H200 host's CPU; mismatch of both
    results): ``np.fmod(int8 127, float16 sinh(-2))``. sinh's result is inexact (a few ulp),
    and over that interval the quotient 127 / y crosses -35, where fmod jumps from ~0 to ~3.6;
    computed in float16 the quotient rounded to -35.0 at both corners, the jump went unseen,
    and the comparator's interval [0.125, 3.617] excluded NumPy's own 0.0566. A comparator fix
    (bounds.py: a remainder's quotient in float64)."""
    def program(x0, x1):
        return np.fmod(x0, np.sinh(np.clip(x1, -8, 8)))

    assert_matches_numpy(program, np.array([[127], [126], [0]], np.int8),
                         np.array([[-2], [-3], [1]], np.int8), device="cpu")


def test_cumprod_of_zero_then_maybe_infinite() -> None:
    """soak seed '1', program 17674 (mismatch of both results): ``cumprod`` over [0, ..., x]
    where x = where(sinh(284) >= inf, ...) is inf or float32's max (sinh is within 4 ulp of
    overflow). The comparator claimed the products after the zero were exactly 0, but 0 * inf
    is NaN (NumPy's and our result). A comparator fix (bounds.py: a zero gives a zero product
    only when no element may be infinite)."""
    def program(x0):
        v0 = np.sinh(x0)
        v1 = np.where(v0 >= np.inf, v0, x0)
        return np.cumprod(v1)

    x = np.array([0, 0, 0, 0, 284, 0, 4, 772], dtype=np.uint16).reshape(8, 1, 1, 1)
    assert_matches_numpy(program, x, device="cpu")


def test_max_min_with_initial_over_an_empty_axis() -> None:
    """soak seed 'cpu-2026-12-01-b', programs 600, 680, 1416, 1990, 2134, 3805, 4368, 4568
    (compile_error in the checker, not the compiler): ``np.max(x, axis=-1, initial=-5)`` of an
    empty row is legal; the kernel starts the row at the reducer's start value and the graph
    combines ``initial`` afterwards, but the NumPy references of max/min (ops/reductions.py)
    and the bounds evaluator (testing/bounds.py ``_max_min``) called np.max without
    ``initial=`` and raised "zero-size array to reduction operation maximum". Fixed in both:
    the start value is passed as NumPy's ``initial``."""
    def program(x0):
        return (np.max(x0, axis=-1, initial=-5), np.min(x0, axis=-1, initial=5),
                np.max(x0, axis=0, where=x0 < 3, initial=-7), np.fmax.reduce(x0, axis=-1))

    for dt in (np.float16, np.float32, np.int16, np.uint64):
        assert_matches_numpy(lambda x: program(x)[:3], np.zeros((2, 0), dtype=dt), device="cpu")
    assert_matches_numpy(lambda x: np.max(x, axis=-1, initial=-5), np.zeros((1, 0), np.bool_),
                         device="cpu")
    assert_matches_numpy(program, np.array([[1.5, np.nan, -2.0]], np.float32), device="cpu")


def test_bool_conj_keeps_its_dtype() -> None:
    """soak seed 'cpu-2026-12-01-b', program 863 (mismatch: got int8[1], NumPy returns
    bool[1]): ``x.conj()`` of a bool array went through the ufunc np.conjugate, which has no
    bool loop; NumPy's ndarray.conj returns a real array itself. Fixed in trace/tracer.py."""
    def program(x0):
        v1 = np.isfinite(x0.astype(np.uint32))
        return v1.conj(), v1.conjugate(), np.argmin(v1, keepdims=True)

    assert_matches_numpy(program, np.array([1.5], np.float32), device="cpu")


def test_nan_functions_of_a_zero_d_array_along_axis_minus_one() -> None:
    """soak seed 'cpu-2026-12-01-b', program 4004 (compile_error: AxisError "var: axis -1 is
    out of bounds for array of dimension 0"): NumPy's nanvar/nanmean/nanstd reduce with
    np.sum, which accepts an int axis 0 or -1 on a 0-d array, while np.var and np.mean refuse
    it. Fixed in trace/composites/reductions.py (``_nan_axis``). The same run showed that a
    scan accepted a tuple axis (NumPy: TypeError); fixed in trace/numpy_api.py ``scan``."""
    for fn in (np.nanvar, np.nanmean, np.nanstd, np.var, np.mean, np.sum):
        for axis in (0, -1, (0,), 1):
            assert_matches_numpy(lambda x: fn(x, axis=axis), np.array(3.35, np.float16),
                                 device="cpu")
    for axis in ((0,), [0], 0):
        assert_matches_numpy(lambda x: np.cumsum(x, axis=axis), np.array(2.5), device="cpu")


def test_mean_with_where_of_a_zero_d_array_along_axis_minus_one() -> None:
    """soak seed 'cpu-2026-12-01-c', program 6611 (compile_error: AxisError): NumPy's mean,
    var and std count the elements of a ``where=`` mask with np.add.reduce, which accepts an
    int axis 0 or -1 on a 0-d array; without where= they refuse it. Fixed in
    trace/numpy_api.py (mean, var)."""
    for x in (np.array(1, np.uint32), np.array(-2.5)):
        for fn in (np.mean, np.var, np.std):
            for axis in (0, -1, 1):
                assert_matches_numpy(lambda a: fn(a, axis=axis, where=a > 0), x, device="cpu")
                assert_matches_numpy(lambda a: fn(a, axis=axis), x, device="cpu")


def test_empty_like_values_are_not_compared() -> None:
    """soak seed 'cpu-2026-12-01-c', programs 9181 and 9821 (mismatch: NaN vs 0): the test
    call of np.empty_like was ``np.empty_like(x) * 0``, which reads NumPy's uninitialised
    memory (a NaN there stays NaN). The registry's call now reads only what NumPy defines
    (integer garbage times 0)."""
    from tracearray.trace.composites import COMPOSITES
    for call in COMPOSITES[np.empty_like].calls:
        assert "dtype=np.int" in call, call
    assert_matches_numpy(lambda a: np.empty_like(a, dtype=np.int16) * 0,
                         np.array([[0.0], [-2.0]], np.float32), device="cpu")


def test_float16_spacing_of_negative_values() -> None:
    """soak seed 'gather-probe-1', program 238 (mismatch: -0.125 vs 0.0625):
    ``np.spacing`` of a negative float16 is positive in NumPy (npy_half_spacing returns a
    magnitude: the gap below |x| in its binade), unlike float32/float64. Fixed in
    trace/composites/ufuncs.py; checked on every float16 bit pattern."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16)
    assert_matches_numpy(np.spacing, x, device="cpu")
    assert_matches_numpy(np.spacing, np.array([[-128]], np.int8), device="cpu")


def test_take_checks_indices_as_numpy_does() -> None:
    """soak seed 'gather-probe-1', program 2526 (compile_error: IndexError where NumPy
    returned an empty array): np.take / np.compress check indices once per leading position,
    so not at all when a leading dimension is empty (unlike x[:, idx], which always checks).
    Fixed in trace/indexing.py ``take``."""
    for idx in ([0, 2], [7], []):
        for shape in ((0, 1), (2, 0), (3, 1), (0, 3)):
            for axis in (0, 1, None):
                a = np.zeros(shape)
                assert_matches_numpy(lambda x: np.take(x, idx, axis=axis), a, device="cpu")
                assert_matches_numpy(lambda x, i: np.take(x, i, axis=axis), a,
                                     np.array(idx, dtype=np.int64), device="cpu")
    assert_matches_numpy(lambda x: np.compress([True, False, True], x, axis=-1),
                         np.zeros((0, 1), np.uint16), device="cpu")


def test_matrix_norms_of_empty_matrices() -> None:
    """soak seed 'cpu-2026-12-01-d', program 139 (compile_error: "zero-size array to
    reduction operation maximum"): NumPy's matrix norms ord=1 and ord=inf take the max with
    initial=0 (an empty matrix has norm 0); ord=-1 and -inf have no initial and raise.
    Fixed in trace/numpy_api.py ``norm``."""
    for shape in ((0, 1), (1, 0), (0, 0), (2, 3)):
        x = np.ones(shape, np.uint64)
        for order in (None, "fro", np.inf, -np.inf, 1, -1):
            assert_matches_numpy(lambda a: np.linalg.matrix_norm(a, ord=order), x, device="cpu")
            assert_matches_numpy(lambda a: np.linalg.norm(a, ord=order, keepdims=True), x,
                                 device="cpu")


def test_drawing_programs_never_runs_numpys_endless_takes() -> None:
    """soak seeds 'gather-probe-2' (program 4078) and 'cpu-2026-12-01-d' (program 2661):
    drawing the program hung in NumPy itself: np.take in mode 'wrap' loops |i| / n times per
    index (forever on an empty axis, ~2**62 times for a huge uint64 index). The generator
    (testing/programs.py ``f_gather``) no longer draws those; the soak's parent regenerates a
    timed-out program in a subprocess with a limit, so it cannot hang either. GPU soak
    'gpu-2026-12-01-e' (program 1745): the index ``x % n - n`` of a uint32 value wrapped to
    ~4e9 in a wrap-mode take; unsigned values no longer get the ``- n`` form there."""
    import subprocess
    import sys
    code = ("from tracearray.testing import fuzz; fuzz.program_for('gather-probe-2', 4078); "
            "fuzz.program_for('cpu-2026-12-01-d', 2661); "
            "fuzz.program_for('gpu-2026-12-01-e', 1745)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True)


def test_half_conversion_libcalls_resolve() -> None:
    """soak seed 'cpu-2026-12-01-d', programs 7456 and 8391 (crash: SIGSEGV): for
    copysign(half, mean(half)) the x86 backend takes the sign from the double quotient and
    rounds it to half with a __truncdfhf2 libcall, which MCJIT could not resolve: the kernel
    jumped to address 0. Fixed in cpu/jit.py (libgcc's half conversions are registered)."""
    import llvmlite.binding as llvm
    from tracearray.cpu import jit
    jit._llvm()
    assert all(llvm.address_of_symbol(s) for s in ("__truncdfhf2", "__extendhfsf2"))

    def program(x1):
        v2 = np.max(np.arctan(x1))
        v4 = np.mean(v2.reshape((1,)), axis=(0,))
        return np.broadcast_to(np.copysign(v2, v4), (3,))

    assert_matches_numpy(program, np.arange(63).astype(np.uint8), device="cpu")
    assert_matches_numpy(lambda a: np.copysign(a, np.mean(a.reshape((1,)))),
                         np.array(-1.5, np.float16), device="cpu")


def test_correlate_does_not_multiply_the_padding() -> None:
    """soak seed 'gather-probe-2', program 2005 (mismatch: NaN where NumPy has inf):
    correlate/convolve in mode 'full' multiplied the zero padding by an inf of the kernel
    (0 * inf = NaN); NumPy sums only the overlapping products. Fixed in
    trace/composites/functions.py ``_correlate_full``."""
    a = np.array([np.inf, 1.0, -np.inf, 2.0, 0.0])
    v = np.array([0.0, np.inf, 1.0])
    for mode in ("full", "same", "valid"):
        assert_matches_numpy(lambda p, q: (np.convolve(p, q, mode), np.correlate(p, q, mode),
                                           np.correlate(q, p, mode)), a, v, device="cpu")


def test_digitize_monotonicity_as_numpy_checks_it() -> None:
    """soak seed 'gather-probe-2', program 1661 (compile_error: "bins must be monotonically
    increasing or decreasing" where NumPy accepted NaN bins): NumPy's check_array_monotonic
    takes the direction from the first element that differs from the first (a NaN does) and
    then only refuses a pair that goes the other way (NaN compares false). Fixed in
    trace/composites/indexing.py ``_monotonicity``."""
    x = np.array([-1.0, 0.0, 1.0, 2.0, np.nan, 5.0])
    for bins in ([np.nan, 1.0], [1.0, np.nan], [2.0, 2.0, 1.0], [2.0, 2.0, 3.0, 1.0],
                 [1.0, 1.0], [np.nan, np.nan], [0.0, 1.0, 1.0, 2.0], [3.0, 1.0, 2.0]):
        for right in (False, True):
            assert_matches_numpy(lambda v: np.digitize(v, bins, right=right), x, device="cpu")
            assert_matches_numpy(lambda v, b: np.digitize(v, b, right=right), x,
                                 np.array(bins), device="cpu")


def test_known_indices_are_checked_after_broadcasting() -> None:
    """soak seed 'gather-probe-2', program 2874 (compile_error: IndexError where NumPy
    returned an empty array): in ``x[None, [], [0]]`` the index arrays broadcast to shape
    (0,), so NumPy checks no index; the tracer checked the [0] before broadcasting. Fixed in
    trace/indexing.py."""
    assert_matches_numpy(lambda x: x[None, [], [0]], np.zeros((1, 0), np.uint16), device="cpu")
    assert_matches_numpy(lambda x: x[[], [5]], np.zeros((2, 3)), device="cpu")
    assert_matches_numpy(lambda x: x[[], [[0]]], np.zeros((2, 0)), device="cpu")
    # an integer is checked when NumPy parses the key, whatever the broadcast shape
    for key in (([], 0), ([], np.int64(0)), ([], np.array(0))):
        with pytest.raises(IndexError, match="out of bounds"):
            np.zeros((2, 0))[key]
        with pytest.raises(IndexError, match="out of bounds"):
            tracearray.compile(lambda x, key=key: x[key], device="cpu")(np.zeros((2, 0)))


def test_an_in_place_update_through_x_ellipsis_of_a_gather_result() -> None:
    """soak seed 'cpu-2026-12-01-f', program 8314 (mismatch): ``t[...]`` of a value that is a
    gather (``v = x[mask].copy()``) was taken for advanced indexing, a copy, so
    ``t[...].__iadd__(1)`` did not write t. Fixed in trace/tracer.py ``__getitem__``: a key
    that leaves the value as it is gives a view."""
    def program(x0):
        v2 = x0[np.array([True], dtype=bool).reshape((1,))]
        return (lambda t: (t[...].__iadd__(True), t)[1])(v2.copy())

    assert_matches_numpy(program, np.array([[[-0.001388021046295762]]], np.float32),
                         device="cpu")


def test_delete_with_many_runs_is_one_gather() -> None:
    """soak seed 'cpu-2026-12-01-f', program 2531 (timeout): np.delete(x, slice(None, None, 2))
    of a 34,318-element axis joined 17,159 one-element slices into one concatenation. Fixed
    in trace/composites/shapes.py ``_join_runs``: more than 8 runs are a gather."""
    x = np.arange(34318.0)
    f = tracearray.compile(lambda v: np.delete(v, slice(None, None, 2), axis=-1), device="cpu")
    np.testing.assert_array_equal(f(x), np.delete(x, slice(None, None, 2)))
    assert len(f.lower(x).plan.kernels) == 1


def test_a_masked_selection_as_an_operand_of_a_composite_ufunc() -> None:
    """soak seed 'complex-2', program 683 (unsupported: "cannot use a value of type Tracer in
    a traced computation"). ``x[mask]`` reached np.logaddexp2's expansion as the masked
    selection itself, which ``composites.as_tracer`` did not convert. Fixed there: a masked
    selection is its selected elements."""
    def program(x0):
        v0 = x0[np.any(x0 > True, axis=(2,))]
        v1 = v0 - np.mean(v0, axis=-2, keepdims=True)
        return np.logaddexp2(v1, v0)

    assert_matches_numpy(program, np.ones((1, 1, 1), np.float32), device="cpu")
    assert_matches_numpy(program, np.linspace(-1, 3, 24, dtype=np.float32).reshape(2, 3, 4),
                         device="cpu")


def test_random_integers_with_a_masked_selection_as_bounds() -> None:
    """soak seed 'cpu-2026-12-01-l', program 1746 (compile_error: "astype: dtype object"): the
    bounds of ``rng.integers`` may be a selection ``x[mask]``; its known-value check converted
    it with np.asarray, which gave a traced value, then asked it for an object array. Fixed
    in trace/random.py (``_traced_or_array``)."""
    def program(x0):
        v0 = x0[np.any(x0 > 7, axis=(1,))]
        return np.random.default_rng(739).integers(v0, v0, endpoint=True, dtype=np.int64)
    assert_matches_numpy(program, np.array([[640]], dtype=np.int64), device="cpu")
    assert_matches_numpy(program, np.array([[1], [9], [8]], dtype=np.int64), device="cpu")


def test_float16_convolution_multiplies_in_float32() -> None:
    """soak seed 'cpu-2026-12-01-l', program 4229 (mismatch: NaN where NumPy gives -inf):
    NumPy's float16 dot multiplies and adds in float32, so 234.875 * 1723 is finite there and
    a window holding it and -inf sums to -inf; the composite multiplied in float16 (+inf)
    and got inf - inf. Fixed in trace/composites/functions.py ``_correlate_full``."""
    x = np.array([-1.0, 0.0006809, 1723.0, 2.0, 234.875, -np.inf, -1.0, 3.0], np.float16)
    for mode in ("full", "same", "valid"):
        assert_matches_numpy(lambda a: np.convolve(a, a[:3], mode), x, device="cpu")
        assert_matches_numpy(lambda a: np.correlate(a, a[:3], mode), x, device="cpu")


def _cancelling_sum_program(x0):
    v1 = np.cumsum(np.sum(x0))
    return v1[v1 > 255]


# soak 'cpu-2026-12-01-p' program 1712's data: float32 values around +-3.4e38 and small ones,
# whose sum is all cancellation (NumPy's pairwise order: 64916.4; ours: below 255)
_CANCELLING = np.array([
    2.0, -6.763071723980829e-05, 13.6215238571167, 2.0, -0.00018906532204709947,
    -1576.951904296875, 0.7016755938529968, -6.054192543029785, 1.0000001192092896,
    0.00038042961386963725, -2.5, -3.0, -5.965781211853027, -716.3965454101562,
    -945.3300170898438, 65504.0, 4.87226676940918, 296.244140625, -1.0,
    -0.00019968544074799865, -2.5, 21.4486083984375, 1275.4647216796875, -0.04794023185968399,
    0.6510837078094482, -3.0, 0.0004445829545147717, 11.033300399780273, 11.41460132598877,
    0.00043035318958573043, -1.2473403215408325, 0.0008278036257252097, 1.0025804042816162,
    -0.1582970768213272, -2.0, -2.0, -3.4028234663852886e+38, -21.364887237548828,
    -0.0010859646135941148, -0.2702042758464813, -2.0, -0.5243128538131714, 0.0,
    -0.001405143178999424, -1.401298464324817e-45, -4.0, -0.427232950925827, 1.0,
    -1.518092155456543, -1.0, -3.0, 7.066684246063232, 258.16204833984375, -1.0,
    -2.42777419090271, -432.2299499511719, 0.5, 268.4869079589844, -1.0277897119522095,
    1.2820215225219727, 0.0013462105998769403, 3.4028234663852886e+38, -4.0,
    -1059.7724609375], np.float32).reshape(16, 4)


def test_length_of_a_mask_over_an_order_dependent_sum_is_unverifiable() -> None:
    """soak 'cpu-2026-12-01-p', program 1712 (and 'cpu-2026-12-01-i', 4508): a mask over a
    float32 sum that cancels completely selects 0 or 1 elements depending on the summation
    order (divergence float-sum-reassociation), and the comparator reported the length as a
    shape mismatch. The comparator now evaluates the function's probes with bounds: a count
    that is not exact makes the length unverifiable (reported, not failed)."""
    from tracearray.testing import compare_with_numpy
    cmp = compare_with_numpy(_cancelling_sum_program, _CANCELLING, device="cpu")
    assert cmp.ok, cmp.report()
    assert np.shape(cmp.result) != np.shape(_cancelling_sum_program(_CANCELLING))
    assert "the length depends on values" in cmp.report()


class _OneShort:
    """A compiled function whose selections lose their last element (a planted bug)."""

    def __init__(self, fn):
        self.cf = tracearray.compile(fn, device="cpu")

    def lower(self, *args):
        return self.cf.lower(*args)

    def __call__(self, *args):
        return self.cf(*args)[:-1]


def test_a_wrong_length_from_exact_values_is_still_a_mismatch() -> None:
    """The relaxation above applies only where the count is uncertain: a selection of exact
    values of the wrong length is a shape mismatch."""
    from tracearray.testing import compare_with_numpy

    def program(x):
        return x[x > 0.5]

    x = np.linspace(0, 1, 40, dtype=np.float32)
    cmp = compare_with_numpy(program, x, device="cpu", compiled=_OneShort(program))
    assert not cmp.ok and "NumPy returns float32[20]" in cmp.report(), cmp.report()
    assert compare_with_numpy(program, x, device="cpu").ok


def test_graph_sizes_not_numpys_on_uncertain_masks_are_unverifiable() -> None:
    """soak 'cpu-2026-12-02-g', program 7265 (compile error in the comparator): a mask over
    a cast of inf and NaN to uint32 (platform dependent: divergence float-to-int-cast)
    selects more elements under NumPy than the compiled count, and evaluating the graph,
    which holds the compiled sizes, on NumPy's values raised IndexError. Now unverifiable."""
    from tracearray.testing import compare_with_numpy

    def program(x0):
        v0 = x0.astype(np.uint32)
        return v0[np.any(v0 > 1, axis=(2,))]

    x = np.array([[[0.0], [-np.inf], [-1.7976931348623157e+308], [np.inf], [np.nan], [5e-324],
                   [-np.inf]], [[-0.0], [1.7976931348623157e+308], [np.inf], [4.0], [0.0],
                                [4.0], [0.0]]])
    with np.errstate(invalid="ignore"):
        cmp = compare_with_numpy(program, x, device="cpu")
    assert cmp.ok, cmp.report()


@pytest.mark.parametrize("device", ["cpu"])
def test_sum_with_initial_and_where_adds_initial_once(device: str) -> None:
    """soak 'cpu-2026-12-02-h', programs 3678 and 7862: ``np.sum(x[x > 1e-3], initial=3)``
    (a masked selection's sum is ``where=``) gave 6 for an empty selection: masked-out
    elements were filled with ``initial`` and ``initial`` was added again. They take the
    ufunc's identity; max/min, which have none, take ``initial`` (idempotent)."""
    x = np.array([0.0, 5.0, -2.0, 7.0])
    for fn in (lambda a: np.sum(a[a > 1e-3], initial=3),
               lambda a: np.sum(a, initial=3, where=a > 1e-3),
               lambda a: np.sum(a, axis=0, initial=1.5, where=a > 100),
               lambda a: np.prod(a, initial=2, where=a > 1e-3),
               lambda a: np.max(a, initial=-1, where=a > 1e-3),
               lambda a: np.min(a, initial=100, where=a > 1e-3),
               lambda a: np.sum(a.astype(np.int32), initial=3, where=a > 0)):
        for v in (x, x[:1]):
            assert_matches_numpy(fn, v, device=device)


@pytest.mark.parametrize("dtype", [np.uint32, np.float32, np.float64])
def test_the_sign_of_clips_zero_is_open_to_later_ops(dtype) -> None:
    """soak 'cpu-2026-12-02-i', program 7530: ``np.signbit(x.clip(-0.0, 0.1))`` of 0: NumPy's
    clip returned +0.0, the traced graph (maximum then minimum) -0.0. The comparator let the
    clip itself return either zero (divergence clip-signed-zero) but not an op that reads the
    zero's sign afterwards; the tie is now in the bound of the maximum/minimum."""
    x = np.array([0, 0, 1], dtype=dtype)
    for fn in (lambda a: np.signbit(a.clip(-0.0, 0.1)),
               lambda a: np.copysign(2.0, np.clip(a, -0.0, 0.5)),
               lambda a: 1.0 / np.clip(a, -0.0, 0.5)):
        with np.errstate(divide="ignore"):
            assert_matches_numpy(fn, x, device="cpu")


def test_a_wrong_zero_sign_outside_a_tie_is_still_a_mismatch() -> None:
    """The tie rule is narrow: where the maximum's operands are not zeros of both signs, a
    compiled result that flips the zero's sign (here: signbit's answer) is a mismatch."""
    import tracearray
    from tracearray.testing import compare_with_numpy

    def program(a):
        return np.signbit(np.maximum(a, -1.0))

    class FlipsTheSign:   # the real compiled function, with its results negated
        def __init__(self):
            self.cf = tracearray.compile(program, device="cpu")

        def lower(self, *args):
            return self.cf.lower(*args)

        def __call__(self, *args):
            return ~self.cf(*args)

    x = np.array([-0.0, 0.0, 3.0])
    assert compare_with_numpy(program, x, device="cpu").ok
    assert not compare_with_numpy(program, x, device="cpu", compiled=FlipsTheSign()).ok
    tie = np.array([0.0])   # maximum(+0.0, -0.0): either zero, so signbit is open
    assert compare_with_numpy(lambda a: np.signbit(np.maximum(a, -0.0)), tie, device="cpu",
                              compiled=None).ok


def test_nanpercentile_dtype_of_an_all_nan_first_slice_is_a_divergence() -> None:
    """soak 'cpu-2026-12-02-k', program 9403: ``np.nanpercentile(v, [10, 75], axis=())`` of
    a float32 NaN: NumPy applies its 1-d function per slice and takes the first slice's
    result dtype (float32 for an all-NaN slice, float64 otherwise); the compiled result is
    float64 (divergence nan-quantile-dtype): NaN positions are compared, nothing else; a
    wrong NaN position is still a mismatch."""
    import tracearray
    from tracearray.testing import compare_with_numpy

    def program(x0):
        v1 = x0 / np.max(x0, axis=0, keepdims=True)
        v2 = np.nanpercentile(v1, [10, 75], axis=(), method='linear')
        v4 = np.nanmedian(v2, axis=(0,), keepdims=True)
        return np.floor_divide(np.cumprod(v4, axis=-1), np.absolute(v4))

    with np.errstate(all="ignore"):
        for x in (np.array([0.0], np.float32), np.array([2.0, 0.0], np.float32)):
            cmp = compare_with_numpy(program, x, device="cpu")
            assert cmp.ok, cmp.report()
        nan_first = np.array([np.nan, 3.0], np.float32)
        f = lambda v: np.nanpercentile(v, [10, 75], axis=())   # noqa: E731

        class NoNaN:   # the compiled function with its NaNs replaced
            def __init__(self):
                self.cf = tracearray.compile(f, device="cpu")

            def lower(self, *args):
                return self.cf.lower(*args)

            def __call__(self, *args):
                return np.nan_to_num(self.cf(*args))

        assert f(nan_first).dtype == np.float32   # NumPy's quirk, still there
        assert compare_with_numpy(f, nan_first, device="cpu").ok
        assert not compare_with_numpy(f, nan_first, device="cpu", compiled=NoNaN()).ok


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS caps on Linux")
def test_drawing_a_step_that_needs_gigabytes_draws_another() -> None:
    """soak 'cpu-2026-12-02-m', program 3487: a drawn step ``v0 @ v0.swapaxes(-1, -2) + 3 *
    np.eye(...)`` of a 53844 x 1 column made NumPy build a 23 GB matrix and the OOM killer
    ended the soak's child. A step is evaluated under an address-space cap: it raises
    MemoryError and another step is drawn; the cap is lifted afterwards."""
    import resource

    from tracearray.testing import fuzz
    from tracearray.testing.programs import _memory_cap
    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(MemoryError):
        with _memory_cap(1 << 28):
            np.ones(1 << 30)   # 8 GB
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    p = fuzz.program_for("cpu-2026-12-02-m", 3487)
    assert "np.eye" not in p.source()
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_cross_check_leaves_the_gpu_sorts_ties_free(emulated_gpu) -> None:
    """GPU tier run 13 (H200, 2026-12-02, git 9fa16d1), ``test_seeded_programs_cuda_and_
    cross_check[ci]`` program 71: an argsort of 64 equal bools (default kind) matched NumPy on
    both devices, but the CPU/GPU cross-check demanded the two agree bit for bit wherever the
    *CPU's* bound was exact, and the GPU's block sort orders ties stably, NumPy's quicksort not
    (divergence gpu-sort-ties). Fixed in testing/fuzz.py: elements must agree where both
    devices' bounds are exact. (The program is built here: the generator's forms change
    which program an index draws.) The GPU's partitions are its stable sorts too
    (gpu-partition-order)."""
    from tracearray.testing import fuzz
    from tracearray.testing.programs import Program, Step
    for expr in ("np.argsort(x0, axis=-1)", "np.argpartition(x0, -55, axis=-1)"):
        p = Program(inputs=(np.zeros(64, bool),), steps=(Step("v0", expr, ("x0",)),),
                    outputs=("v0",))
        assert fuzz.cross_check(p, ("cpu", "cuda")) == [], expr


@pytest.mark.parametrize("seed", ["ci", "gpu-a", "gpu-b"])
def test_cross_check_compares_complex_results_as_pairs(seed, emulated_gpu) -> None:
    """GPU tier run 14 (H200, 2026-12-02, git 6cef433): the cross-check of four seeds raised
    ``operands could not be broadcast together with shapes (11,) (11,2)``: a complex result
    is compared as (real, imag) pairs, and the exactness mask kept the complex shape. Both
    devices matched NumPy; the testing tool failed (testing/fuzz.py: the mask per pair).
    Each seed's first program with a complex value (the generator's forms change which
    program an index draws)."""
    from tracearray.testing import fuzz
    p = next(p for p in (fuzz.program_for(seed, i) for i in range(200)) if "1j" in p.source())
    assert fuzz.cross_check(p, ("cpu", "cuda")) == []


def test_pinv_of_an_empty_float16_matrix_is_empty() -> None:
    """Soak cpu-2026-12-02-r, program 1094 (compile_error: "array type float16 is unsupported
    in linalg"): NumPy's pinv returns an empty result of the operand's dtype before checking
    the dtype or squareness; ours checked the dtype first. Fixed in
    trace/composites/lapack.py."""
    def program(x0):
        return np.linalg.pinv(x0[1::3])
    assert_matches_numpy(program, np.array([[np.inf]], dtype=np.float16), device="cpu")
    assert_matches_numpy(lambda a: np.linalg.pinv(a, hermitian=True),
                         np.zeros((2, 0, 3), np.float16), device="cpu")
    with pytest.raises(TypeError, match="float16"):
        tracearray.compile(np.linalg.pinv, device="cpu")(np.ones((2, 2), np.float16))


def test_complex_prod_over_no_axes_multiplies_in_the_identity() -> None:
    """Bug 58 (CPU soak cpu-2026-12-02-u, program 1243): ``np.prod`` of a 0-d complex value
    (and ``axis=()``) returned the value itself; NumPy's reduction multiplies in the identity
    even over no axes, so nan - inf j becomes nan + nan j and -0 - 0j becomes 0 - 0j."""
    from tracearray.testing import assert_matches_numpy

    def program(x0):
        v0 = x0 >> x0
        v2 = np.log2(v0)
        return np.prod(v0 + v2 * 1j)

    assert_matches_numpy(program, np.array(3, dtype=np.uint64), device="cpu")
    w = np.array([complex(np.nan, -np.inf), complex(-0.0, -0.0), complex(np.inf, 0.0)])
    with np.errstate(invalid="ignore"):
        assert_matches_numpy(lambda a: np.prod(a, axis=()), w, device="cpu")


def test_complex_sin_past_exps_overflow_threshold_rounds_as_glibc() -> None:
    """Bug 59 (CPU soak cpu-2026-12-02-v, program 813): complex64 ``np.sin(22.5 - 90j)``,
    whose real part is near float32's largest value: the graph split exp(|y|) at the
    threshold 127 ln 2 as a fraction, whose float32 rounding moved the result by tens of ulp
    from NumPy's (glibc's csinhf splits at the integer 88)."""
    from tracearray.testing import assert_matches_numpy
    z = (np.arange(40, 48, dtype=np.float32) * np.complex64(0.5 - 2j)).reshape(2, 4)
    z[0, 1] = np.complex64(22.5 - 90j)
    with np.errstate(over="ignore", invalid="ignore"):
        for fn in (np.sin, np.cos, np.sinh, np.cosh, np.exp):
            assert_matches_numpy(fn, z, device="cpu")
            assert_matches_numpy(fn, z.astype(np.complex128) * 8, device="cpu")


def test_a_step_that_crashes_numpy_is_not_drawn() -> None:
    """Soak cpu-2026-12-04-c, program 2419: the generator drew np.bincount of an int64 array
    holding the largest int64, which makes NumPy 2.4's own bincount segfault (its length
    max + 1 wraps), so drawing the program killed the soak's child. The generator's NumPy
    refuses that call as a step NumPy rejects (in a child process here: a regression would
    crash it, not pytest)."""
    import subprocess
    code = ("from tracearray.testing import fuzz; "
            "p = fuzz.program_for('cpu-2026-12-04-c', 2419); print('drawn', len(p.steps))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "drawn" in proc.stdout, proc.stderr[-2000:]


def test_bincount_of_the_largest_int64_is_too_big_not_an_index_error() -> None:
    """np.bincount's length max + 1 wrapped for the largest intp (a scatter into an empty
    result then raised an IndexError); it is an array too big, as for any length past what
    memory can hold (NumPy 2.4's own bincount segfaults on it)."""
    f = tracearray.compile(lambda x: np.bincount(x))
    for top in (np.iinfo(np.int64).max, 1 << 62):
        with pytest.raises(ValueError, match="array is too big"):
            f(np.array([top, 5], np.int64))
    np.testing.assert_array_equal(f(np.array([3, 1, 3])), np.bincount(np.array([3, 1, 3])))


class _NaNsAt:
    """A compiled function whose result is NaN where ``mask`` says (a comparator control)."""

    def __init__(self, program, mask):
        self.cf, self.mask, self._fixed_device = tracearray.compile(program, device="cpu"), \
            mask, "cpu"

    def lower(self, *args):
        return self.cf.lower(*args)

    def __call__(self, *args):
        out = np.array(self.cf(*args))
        out[self.mask] = np.nan
        return out


def test_hypot_of_numpys_signaling_float16_nans_is_unverifiable() -> None:
    """Soak cpu-2026-12-05-d, program 1632: np.hypot(np.sort(x, kind="heapsort"), inf) of
    float16 with a NaN gave inf, NumPy NaN. NumPy 2.4's float16 quicksort and heapsort return
    every NaN as the signaling NaN 0x7c01; NumPy's float16 hypot keeps the signal into
    glibc's hypotf, which returns NaN for it (inf for a quiet NaN); the kernel's hardware
    float16 -> float32 conversion quiets it. The comparator now leaves a signal-sensitive
    libm function's elements of signaling NaNs unverifiable (divergence nan-payload); a quiet
    NaN's hypot with an infinity is still compared exactly."""
    from tracearray.testing import compare_with_numpy
    from tracearray.testing.bounds import _signaling_nan
    bits = np.array([0x7E00, 0x7C01, 0xFC01, 0x7C00, 0x3C00], np.uint16).view(np.float16)
    assert _signaling_nan(bits).tolist() == [False, True, True, False, False]
    f32 = np.array([0x7FC00000, 0x7F800001], np.uint32).view(np.float32)
    assert _signaling_nan(f32).tolist() == [False, True]
    # a 0-d value keeps its shape (np.ascontiguousarray made it 1-d, and every 0-d
    # elementwise result of a float input failed to broadcast: CI, 2026-12-04)
    assert _signaling_nan(np.asarray(bits[1])).shape == ()
    assert_matches_numpy(lambda a: np.hypot(np.sum(a), 2.0), bits, device="cpu")

    def program(x0):
        return np.hypot(np.sort(x0, axis=None, kind="heapsort"), np.inf)
    x = np.array([[1.0, np.nan], [-np.inf, 2.0]], np.float16)
    assert_matches_numpy(program, x, device="cpu")
    # a quiet NaN: hypot(NaN, inf) = inf is required (a NaN there is a mismatch)
    quiet = lambda x0: np.hypot(np.sort(x0, axis=None, kind="stable"), np.inf)  # noqa: E731
    assert compare_with_numpy(quiet, x, device="cpu").ok
    assert not compare_with_numpy(quiet, x, device="cpu",
                                  compiled=_NaNsAt(quiet, np.s_[-1:])).ok


def test_correlate_builds_no_quadratic_constant() -> None:
    """Soak cpu-2026-12-04-s2, program 785 (a timeout): np.convolve of two 48,362-element
    vectors made a concrete (n + m - 1, m) table of positions at trace time (35 GiB of int64)
    for its overlap mask. The positions now come from two traced aranges broadcast in the
    kernel: no constant of the graph holds more than 2 (n + m) elements. The program generator
    keeps correlations within MAX_PRODUCTS pairs (the comparator evaluates the (n + m - 1, m)
    products node by node)."""
    from tracearray.testing.programs import _GUARDED_NUMPY, _GuardedNumPy
    rng = np.random.default_rng(5)
    a = rng.standard_normal(3001)
    v = rng.standard_normal(1200)
    for fn in (lambda a, v: np.convolve(a, v, "same"), lambda a, v: np.correlate(v, a, "full")):
        compiled = tracearray.compile(fn, device="cpu")
        np.testing.assert_allclose(compiled(a, v), fn(a, v), rtol=1e-9, atol=1e-9)
        graph = compiled.lower(a, v).graph
        biggest = max((math.prod(n.shape) for n in graph.nodes() if n.op == "constant"),
                      default=0)
        assert biggest <= 2 * (a.size + v.size), biggest   # (was (n + m - 1) * m)
    assert_matches_numpy(lambda a, v: np.convolve(a, v, "same"), a[:300], v[:40], device="cpu")
    with pytest.raises(MemoryError):
        _GUARDED_NUMPY.convolve(np.ones(1 << 12), np.ones(1 << 11))
    assert _GUARDED_NUMPY.correlate(np.ones(4), np.ones(2)).shape == (3,)
    assert _GuardedNumPy.MAX_PRODUCTS == 1 << 22


@pytest.mark.parametrize("fn", [np.correlate, np.convolve], ids=["correlate", "convolve"])
def test_correlation_bands_meet_at_every_length(fn) -> None:
    """The correlation runs in three bands (the m - 1 outputs at each end, which read padded
    zeros and mask their products, and the middle ones, which do not): every mode, a shorter
    and a longer second operand, each with an infinity that a padded zero must not turn into
    a NaN."""
    rng = np.random.default_rng(11)
    for n in (3, 8):
        for m in (1, 2, 5, 8):
            a, v = rng.standard_normal(n), rng.standard_normal(m)
            a[1] = np.inf
            v[-1] = -np.inf if m > 1 else v[-1]
            for mode in ("full", "same", "valid"):
                assert_matches_numpy(lambda a, v: fn(a, v, mode), a, v, device="cpu")


def _vander_of_one_indexed(x):
    v = np.vander(np.ones((1,), dtype=np.uint8))   # NumPy's np.ones((1, 1)): no traced input
    return v[x % 1 - 1], np.vander(x.astype(np.int64), 0)[x % 1 - 1]


def test_a_composite_result_made_from_numbers_alone_is_traced() -> None:
    """Soak cpu-2026-12-05-final-r, program 1562: np.vander of a one-element array is made
    from numbers alone (a ones column), and the composite returned it as a NumPy array, which
    NumPy then indexed with a traced index (ConcretizationError). Composite results go through
    the same conversion as NumPy's own code's: such an array is a traced constant."""
    assert_matches_numpy(_vander_of_one_indexed, np.array([-6, 3], np.int8), device="cpu")


def _unique_of_cosh(x):
    return np.unique(np.cosh(np.clip(x, -8, 8)), return_index=True)[1]


def test_unique_count_that_numpys_values_do_not_give_is_a_size_the_data_decides() -> None:
    """Soak cpu-2026-12-05-s2, program 1159: the compiled float32 cosh (glibc's vector cosh
    for four lanes) gave cosh(-8) one ulp below cosh(8), so np.unique found 4 values where
    NumPy's finds 3; evaluating the graph on NumPy's values, the unique op's host call raised
    AssertionError, which the comparator did not expect (a compile error). It raises
    ValueError now, as a mask with another count does, and the comparator finds the count
    undetermined by NumPy's values within the tolerances: only dtype and rank are compared."""
    x = np.array([0.0, 0.0, -3.4028234663852886e+38, -0.6896607875823975, np.inf], np.float32)
    assert_matches_numpy(_unique_of_cosh, x, device="cpu")


def test_unpackbits_of_an_empty_axis_pads_with_zeros() -> None:
    """Soak cpu-2026-12-05-s3, program 1838: np.unpackbits of an empty selection with
    count=11 is 11 zeros (NumPy's documented padding); NumPy 2.4 leaves that padding unwritten
    and returns uninitialised memory, which the comparator reported as a tracer bug. That is
    divergence unpackbits-empty-padding now, and random programs do not draw np.unpackbits
    of an empty operand (NumPy's result is undefined there)."""
    from tracearray.trace.composites import COMPOSITES
    f = tracearray.compile(lambda x: np.unpackbits(x[x < 0], axis=0, count=11,
                                                   bitorder="little"), device="cpu")
    got = f(np.array([[[120]]], np.uint8))
    assert got.dtype == np.uint8 and got.shape == (11,) and not got.any()
    c = COMPOSITES[np.unpackbits]
    assert c.nonempty and "unpackbits-empty-padding" in c.divergences
    p = fuzz.program_for("cpu-2026-12-05-s3", 1838)
    assert fuzz.run_program(p, "cpu").status == "match"


def _eigvals_of_fmax_tan(x0):
    v3 = np.fmax(np.expand_dims(x0, -1), np.tan(x0))
    return np.linalg.eigvals(v3 @ v3.swapaxes(-1, -2))


def test_eig_whose_kind_numpys_values_do_not_give_is_a_kind_the_data_decides() -> None:
    """Soak cpu-2026-12-05-night, program 171: np.linalg.eigvals of a symmetric product whose
    eigenvalues are real in exact arithmetic; the compiled float64 tan differs from NumPy's by
    an ulp, and one side's rounding gave complex pairs where the other's gave real values.
    Evaluating the graph on NumPy's values, the eig op's host call raised AssertionError (a
    compile error in the comparator); it raises ValueError now, as np.unique's and lstsq's
    do, and the comparator treats the kind as one the data decides (as bug 67's count)."""
    x = np.array([1, 0, 1, 65534, 4, 0, 0, 0, 65534, 0, 1, 65534, 65535, 1, 65534] +
                 [0] * 18, dtype=np.uint16)
    assert_matches_numpy(_eigvals_of_fmax_tan, x, device="cpu")


def test_drawn_steps_never_call_iterative_lapack_on_non_finite_values() -> None:
    """test_continued_walks_plan_as_whole_walks hung the default suite (2026-12-06): drawing
    plan-walks program 113 evaluated np.linalg.svd of a float32 15 x 5 matrix holding an inf,
    and OpenBLAS's sgesdd never returned. The generator's NumPy refuses the iterative LAPACK
    routines on non-finite values (the step is drawn again) and leaves the rest alone."""
    import subprocess
    from tracearray.testing.programs import _GUARDED_NUMPY as gnp
    bad = np.eye(4, dtype=np.float32)
    bad[1, 2] = np.inf
    for call in (lambda: gnp.linalg.svd(bad), lambda: gnp.linalg.eigvals(bad),
                 lambda: gnp.linalg.norm(bad, 2), lambda: gnp.linalg.pinv(bad)):
        with pytest.raises(ValueError, match="non-finite"):
            call()
    assert np.isinf(gnp.linalg.norm(bad))                 # Frobenius: no LAPACK
    assert gnp.linalg.inv(np.eye(3)).shape == (3, 3)
    assert np.allclose(gnp.linalg.svd(np.eye(3))[1], 1.0)
    code = ("from tracearray.testing.fuzz import program_for; "
            "program_for('plan-walks', 113); print('drawn')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "drawn", out.stderr[-2000:]


def test_dot_products_that_overflow_only_unfused_are_unverifiable() -> None:
    """Soak cpu-2026-12-06-fifth-reread, program 346 (bug 75): np.linalg.vecdot of a row
    holding inf * 65504 and -1.8e308 * 65504 is inf in NumPy (its dot loop fuses product and
    accumulation: the second product never rounds to -inf), where the traced graph's
    products, rounded one by one, sum to NaN. The comparator took the graph's NaN as the
    only right value and reported a tracer bug; such a sum depends on fusion and order."""
    x = np.array([[3.0, np.inf, -1.7976931348623157e308, 1.0], [1.0, 2.0, 3.0, 4.0]])
    y = np.full((2, 4), 65504.0)
    with np.errstate(all="ignore"):
        assert_matches_numpy(lambda a, b: np.linalg.vecdot(a, b), x, y, device="cpu")
        # a row whose products are all finite is still checked: the second element
        assert_matches_numpy(lambda a, b: np.linalg.vecdot(a, b) + a[:, 0], x, y,
                             device="cpu")


def test_float16_nanmean_sums_in_float16_as_numpy() -> None:
    """Soak cpu-2026-12-06-eighth-final, program 2331: np.nanmean of float16 was np.mean
    with a mask (its sum in float32), 1 ulp from NumPy's, whose nanmean sums in float16 and
    divides by the count in float64."""
    import warnings

    from tracearray.testing import assert_matches_numpy
    x = np.array([[-5.09765625, -0.06182861328125, 0.54052734375], [np.nan, 1.0, 2.0],
                  [np.nan, np.nan, np.nan]], dtype=np.float16)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_matches_numpy(lambda a: (np.nanmean(a, axis=-1), np.nanmean(a[:2]),
                                        np.nanmean(a, axis=0, keepdims=True)), x, device="cpu")


@pytest.mark.parametrize("shape, mask_shape", [((1, 2), (0, 2)), ((4, 3), (4, 0)),
                                               ((4, 3), (0, 0)), ((0, 3), (0, 2)),
                                               ((4, 3), (2, 3))])
def test_empty_boolean_index_dimensions_are_not_checked(shape, mask_shape):
    """soak seed 'cpu-2026-12-06-ninth', program 2142 (compile error): NumPy checks only a
    boolean index's dimensions of nonzero length against the array's (x[np.zeros((0, 2),
    bool)] of a (1, 2) array is empty); tracearray raised NumPy's IndexError for them all.
    A mismatch in a dimension of nonzero length is still NumPy's IndexError."""
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    mask = np.zeros(mask_shape, bool)
    assert_matches_numpy(lambda a: a[mask] * 2, x, device="cpu")


def test_a_complex_product_overflowing_to_inf_or_nan_is_unverifiable() -> None:
    """soak seed 'cpu-2026-12-07-tenth', program 1255 (mismatch: "the traced graph disagrees
    with NumPy"): np.prod of 33 complex values of magnitude 6e9 overflows in any order; the
    fused complex multiplication's step kept an infinity (inf+nanj) where NumPy's unfused
    one made inf - inf = NaN. The comparator's fma bound marked a difference in kind only
    between finite and non-finite; infinite against NaN is one too (testing/bounds.py)."""
    def program(x0):
        v1 = ~x0
        return np.prod(v1 + v1 * 1j)

    assert_matches_numpy(program, np.zeros(33, np.uint32), device="cpu")


def test_a_complex_product_through_subnormal_values_is_unverifiable() -> None:
    """soak seed 'cpu-2026-12-07-tenth-final', program 2317 (mismatch: "the traced graph
    disagrees with NumPy"): np.prod of complex values whose partial products are subnormal
    (a factor of -5e-324): NumPy folds them one by one, the graph in its own order, and a
    subnormal product has lost most of its digits, so the two orders give values far more
    than an eps apart. Such complex multiplications are unverifiable (testing/bounds.py)."""
    arg0 = np.array([[-5e-324 + 0j, -2 + 5.6035673641778645e-05j],
                     [-0.00022213808781809308 + 1j, -4 - 3j],
                     [1.2693537531579182 + 0.4539659127700448j,
                      483.49484685414603 + 0.0008904687720586372j]], dtype=np.complex128)
    assert_matches_numpy(lambda x: np.prod(x), arg0, device="cpu")


def test_a_complex_product_with_an_infinite_part_is_unverifiable() -> None:
    """soak seed 'cpu-2026-12-07-tenth-reread', program 180: np.prod of complex64 values,
    one with an infinite imaginary part. NumPy's one-by-one order gives nan-infj, the
    graph's order nan+nanj: inf * 0 and inf - inf make NaN in one order and not in another,
    so complex multiplications with a non-finite part are unverifiable."""
    arg0 = np.array([[2 + 0.1625869870185852j], [4 + 0.05049416422843933j],
                     [0.0029034328181296587 + 4j], [complex(111.79691314697266, np.inf)],
                     [49.90857696533203 + 0.05515424907207489j]], dtype=np.complex64)
    assert_matches_numpy(lambda x: np.prod(x), arg0, device="cpu")


def test_matrix_power_3_multiplies_as_numpy_does() -> None:
    """soak seed 'cpu-2026-12-07-twelfth-final', program 1597 (mismatch: "the traced graph
    disagrees with NumPy"): np.linalg.matrix_power(m, 3) of float16 matrices whose square
    overflows. NumPy's short-cut is (m @ m) @ m; the composite's binary decomposition made
    m @ (m @ m), whose rounding and overflow differ (-inf in NumPy, -2706 here)."""
    x0 = np.zeros((8, 8, 1), np.float16)
    x0[4, :, 0] = [2.2539, -16.0625, 9.8438, 0.00099, -0.9346, 6.1e-05, 1.4053, 7.0508]
    x0[6, :, 0] = [0.00124, 1.0, -1399.0, -5.5, -4.0, -0.2996, 1.0, 0.0]
    with np.errstate(all="ignore"):
        assert_matches_numpy(lambda x: np.linalg.matrix_power(x @ x.swapaxes(-1, -2), 3),
                             x0, device="cpu")
        m = np.random.default_rng(3).standard_normal((5, 5)).astype(np.float32)
        got = tracearray.compile(lambda a: np.linalg.matrix_power(a, 3), device="cpu")(m)
        np.testing.assert_array_equal(got, np.linalg.matrix_power(m, 3))
