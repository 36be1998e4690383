"""NumPy's errors for arguments it refuses, and the writes it allows, raised by compiled
functions too (a probe of NumPy semantics, 2026-12-07)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import tracearray

X = np.arange(6.0).reshape(2, 3)


def same_error(fn, *args, error=TypeError):
    with pytest.raises(error):
        fn(*[np.array(a) for a in args])
    with pytest.raises(error):
        tracearray.compile(fn)(*[np.array(a) for a in args])


@pytest.mark.parametrize("fn", [lambda x: np.sum(x, axis=1.0), lambda x: np.sum(x, axis=True),
                                lambda x: np.mean(x, axis=(1.0,)),
                                lambda x: np.concatenate([x, x], axis=1.0),
                                lambda x: np.round(x, 1.5), lambda x: x.round(np.float64(2))])
def test_float_and_bool_axes_and_decimals(fn):
    same_error(fn, X)


@pytest.mark.parametrize("where", [np.array([1, 0, 1]), np.array([1.0, 0.0, 1.0])])
def test_where_arrays_must_be_boolean(where):
    def ufunc(x):
        out = np.zeros(3)
        np.add(x, 1, out=out, where=where)
        return out
    same_error(ufunc, np.arange(3.0))
    same_error(lambda x: np.sum(x, where=where), np.arange(3.0))
    same_error(lambda x: x.sum(where=where), np.arange(3.0))


def test_where_lists_and_scalars_are_truth_values():
    for where in ([1, 0, 1], [True, False, True], 1, np.int64(1)):
        def f(x, where=where):
            out = np.zeros(3)
            np.add(x, 1, out=out, where=where)
            return out, np.sum(x, where=where)
        want, got = f(np.arange(3.0)), tracearray.compile(f)(np.arange(3.0))
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1]


def test_setting_real_and_imag_of_a_real_array():
    def set_real(x):
        x.real = 0.0
        return x
    x = np.arange(3.0)
    tracearray.compile(set_real)(x)
    np.testing.assert_array_equal(x, np.zeros(3))

    def set_imag(x):
        x.imag = 1.0
    same_error(set_imag, np.arange(3.0))


def test_copy_module_of_traced_arrays():
    def f(x):
        a, b = copy.copy(x), copy.deepcopy(x)
        x += 1
        return a, b
    got = tracearray.compile(f)(np.arange(3.0))
    for g in got:
        np.testing.assert_array_equal(g, np.arange(3.0))


def test_gradient_of_booleans():
    same_error(np.gradient, np.array([True, False, True]))


def test_histogram_of_infinite_data():
    same_error(lambda x: np.histogram(x), np.array([1.0, np.inf]), error=ValueError)


def test_complex_values_name_what_they_lack():
    from tracearray.errors import UnsupportedAttributeError
    z = np.array([1 + 2j, 3 - 1j])
    with pytest.raises(UnsupportedAttributeError, match="ndarray.argpartition"):
        tracearray.compile(lambda z: z.argpartition(1))(z)

    def floor_in_place(z):
        z //= 2
    same_error(floor_in_place, z)


@pytest.mark.parametrize("idx", [np.array([0, 3]), np.arange(4)])
def test_take_checks_indices_into_values_that_ignore_them(idx):
    # a 0-d value the function made, or a broadcast scalar: its value does not depend on
    # the position read, and each index is still checked, as NumPy checks it
    same_error(lambda x, i: np.take(x * 1.0, i), np.array(3.0), idx, error=IndexError)
    same_error(lambda x, i: np.take(np.broadcast_to(x.sum(), (3,)), i), np.arange(3.0),
               idx + 3, error=IndexError)
    ok = idx % 1
    np.testing.assert_array_equal(tracearray.compile(lambda x, i: np.take(x * 1.0, i))(
        np.array(3.0), ok), np.take(np.array(3.0), ok))


def test_real_ufunc_results_into_a_complex_out():
    def f(x, out):
        np.add(x, 1.5, out=out)
        return out
    x, out = np.arange(3.0), np.zeros(3, np.complex128)
    want = f(x, out.copy())
    got_out = out.copy()
    got = tracearray.compile(f)(x, got_out)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_out, want)


def test_real_power_in_place_by_a_complex():
    def f(x):
        x **= 1j
    same_error(f, np.arange(3.0))


def test_copy_modes_of_np_array():
    # (SciPy's functions pass np._CopyMode.IF_NEEDED)
    for mode in (np._CopyMode.IF_NEEDED, np._CopyMode.ALWAYS, None, True, False):
        f = (lambda x, mode=mode: np.array(x, copy=mode) + 1)
        np.testing.assert_array_equal(tracearray.compile(f)(np.arange(3.0)), np.arange(3.0) + 1)
    same_error(lambda x: np.array(x, dtype=np.float32, copy=False), np.arange(3.0),
               error=ValueError)


@pytest.mark.parametrize("v, error", [(np.int64(300), OverflowError),
                                      (np.float64(np.nan), ValueError),
                                      (np.float64(np.inf), OverflowError),
                                      (np.float32(1000.0), OverflowError)])
def test_numpy_scalars_assigned_into_narrower_integers(v, error):
    def f(x, v):
        x[1:3] = v
        return x
    with pytest.raises(error):
        f(np.zeros(3, np.int8), v)
    x = np.zeros(3, np.int8)
    with pytest.raises(error):
        tracearray.compile(f)(x, v)


def test_numpy_scalars_that_fit_are_assigned():
    def f(x, y):
        x[0] = y.sum()
        x[1] = np.float64(-2.7)
        return x
    want = f(np.zeros(3, np.int8), np.array([1, 2], np.int64))
    got = tracearray.compile(f)(np.zeros(3, np.int8), np.array([1, 2], np.int64))
    np.testing.assert_array_equal(got, want)
    same_error(lambda x, y: f(x, y), np.zeros(3, np.int8), np.array([100, 100], np.int64),
               error=OverflowError)


@pytest.mark.parametrize("fn", [lambda a, v: np.putmask(a, a == 0, v),
                                lambda a, v: np.place(a, a == 0, v)])
def test_putmask_and_place_take_arrays_by_the_safe_rule(fn):
    same_error(fn, np.zeros(3, np.int32), np.array([1, 2]))
    same_error(fn, np.zeros(3, np.int64), np.array([1.5, 2.5]))


def test_ranges_are_index_sequences():
    x = np.arange(20.0).reshape(4, 5)
    for fn in (lambda x: x[range(3)], lambda x: x[:, range(1, 5, 2)],
               lambda x: np.take(x, range(2), axis=1), lambda x: x.flat[range(3)]):
        np.testing.assert_array_equal(tracearray.compile(fn)(x), fn(x))

    def assign(x):
        x[range(0, 4, 2)] = 1.0
        return x
    np.testing.assert_array_equal(tracearray.compile(assign)(x.copy()), assign(x.copy()))


Z = np.array([0, 1 + 1j, 2, 0, -1j])


@pytest.mark.parametrize("fn", [lambda z, a: np.where(z, 1, 2),
                                lambda z, a: np.where(z, a, -a),
                                lambda z, a: np.where(z, True, False),
                                lambda z, a: np.compress(z, a),
                                lambda z, a: np.extract(z, a)])
def test_complex_conditions_are_their_nonzero_elements(fn):
    a = np.arange(5, dtype=np.float32)
    want, got = fn(Z, a), tracearray.compile(fn)(Z, a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn", [lambda a, z: np.putmask(a, z, 0),
                                lambda a, z: np.place(a, z, [7])])
def test_complex_masks_of_writes(fn):
    a = np.arange(5, dtype=np.float32)
    want = a.copy()
    fn(want, Z)
    tracearray.compile(fn)(a, Z)
    np.testing.assert_array_equal(a, want)


def test_copyto_where_must_be_boolean_for_complex_masks_too():
    same_error(lambda a, z: np.copyto(a, 0, where=z), np.arange(5.0), Z)


@pytest.mark.parametrize("fn", [lambda z: np.linalg.norm(z, "fro"),
                                lambda z: np.linalg.norm(z.reshape(1, 5), "fro", axis=1),
                                lambda z: np.linalg.norm(z.reshape(1, 5, 1), 2),
                                lambda z: np.linalg.norm(z.reshape(1, 5, 1), axis=(0, 1, 2),
                                                         ord=1)])
def test_complex_norms_check_their_orders(fn):
    same_error(fn, Z, error=ValueError)


def test_reduction_outputs_take_numpys_dtypes():
    x = np.array([[1.5, 2.5], [3.25, -4.0]])
    for dt in (np.float64, np.float32, np.uint64):
        same_error(lambda a, o: np.argmax(a, axis=0, out=o), x, np.zeros(2, dt))
        same_error(lambda a, o: a.argmin(axis=1, out=o), x, np.zeros(2, dt))
    for dt in (np.int16, np.bool_):   # (NumPy takes these)
        o1, o2 = np.zeros(2, dt), np.zeros(2, dt)
        np.argmax(x, axis=0, out=o1)
        tracearray.compile(lambda a, o: np.argmax(a, axis=0, out=o))(x, o2)
        np.testing.assert_array_equal(o2, o1)
    for dt in (np.int32, np.bool_):
        same_error(lambda a, o: np.std(a, axis=1, out=o), x, np.zeros(2, dt))


def test_searchsorted_sorter_must_match():
    a = np.array([3.0, 1.0, 2.0])
    for sorter in (np.array([2, 0]), np.array([2, 0, 1, 1])):
        same_error(lambda a, v, s: np.searchsorted(a, v, sorter=s), a, np.array([1.0, 2.5]),
                   sorter, error=ValueError)


@pytest.mark.parametrize("fn, shape", [(lambda a, o: np.cumsum(a, out=o), (4,)),
                                       (lambda a, o: np.nancumsum(a, out=o), (4,)),
                                       (lambda a, o: np.around(a, out=o), (2, 2))])
def test_real_results_into_a_complex_out(fn, shape):
    x = np.array([[1.5, 2.5], [3.25, -4.0]])
    want, got_out = np.zeros(shape, complex), np.zeros(shape, complex)
    fn(x, want)
    got = tracearray.compile(fn)(x, got_out)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_out, want)


@pytest.mark.parametrize("fn", [lambda x: x.cumsum(dtype=np.complex64),
                                lambda x: x.cumprod(dtype=np.complex64),
                                lambda x: x.mean(dtype=np.complex64),
                                lambda x: x.std(dtype=np.complex64),
                                lambda x: np.var(x, dtype=np.complex128),
                                lambda x: np.var(x + 1j, dtype=np.complex64),
                                lambda x: np.std(x + 1j)])
def test_complex_dtype_arguments_of_statistics(fn):
    r = np.array([1.5, 100.25, -3.7])
    want, got = fn(r), tracearray.compile(fn)(r)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("fn", [lambda z: np.sum(z, dtype=np.int8), lambda z: z.sum(dtype=np.uint32),
                                lambda z: np.sum(z, dtype=bool), lambda z: np.prod(z, dtype=np.int8),
                                lambda z: np.cumprod(z, dtype=np.int16),
                                lambda z: z.cumsum(dtype=np.float32),
                                lambda z: np.outer(z, z).trace(dtype=np.float32)])
def test_real_dtype_arguments_of_complex_reductions(fn):
    import warnings
    z = np.array([1 + 2j, 2 - 1j, 3 + 0j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want, got = fn(z), tracearray.compile(fn)(z)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_arg_sorts_of_0d_values():
    for fn in (lambda x: np.argsort(x * 1.0), lambda x: x.argsort(),
               lambda x: np.argpartition(x, 0), lambda x: np.argsort(x) + 1):
        got, want = tracearray.compile(fn)(np.array(3.0)), fn(np.array(3.0))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_comparisons_with_none_and_strings_are_elementwise():
    x = np.arange(3.0)
    for fn in (lambda x: x == None, lambda x: x != None, lambda x: x == "a"):  # noqa: E711
        got, want = tracearray.compile(fn)(x), fn(x)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn, x, out", [
    (lambda a, o: np.multiply.reduce(a, out=o), np.full(10, 100, np.int8), np.zeros((), np.float64)),
    (lambda a, o: np.add.reduce(a, out=o), np.full(1000, 0.1, np.float32), np.zeros((), np.float64)),
    (lambda a, o: np.add.accumulate(a, out=o), np.full(1000, 0.1, np.float32), np.zeros(1000, np.float64)),
    (lambda a, o: np.mean(a, out=o), np.full(1000, 0.1, np.float32), np.zeros((), np.float64)),
    (lambda a, o: np.multiply.reduce(a, out=o), np.array([251, 3], np.uint8), np.zeros((), np.uint8)),
    (lambda a, o: np.round(a, -1, out=o), np.array([127, -128], np.int8), np.zeros(2, np.float32)),
    (lambda a, o: np.round(a, 2, out=o), np.array([0.1, 3.14159], np.float16), np.zeros(2)),
])
def test_reductions_and_rounding_run_in_outs_dtype(fn, x, out):
    # (NumPy's loop takes out='s dtype: they were computed in the input's and cast)
    want_out, got_out = out.copy(), out.copy()
    fn(x, want_out)
    tracearray.compile(fn)(x, got_out)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-12)


@pytest.mark.parametrize("fn, shape, dt", [(lambda a, o: np.prod(a, out=o), (), float),
                                           (lambda a, o: np.sum(a, out=o), (), float),
                                           (lambda a, o: np.mean(a, out=o), (), float),
                                           (lambda a, o: np.cumprod(a, out=o), (3,), float),
                                           (lambda a, o: np.cumsum(a, out=o), (3,), np.int64)])
def test_complex_results_into_a_real_out(fn, shape, dt):
    # (NumPy's loop stays complex, the result's real parts go into out: the parts were
    # reduced each into out, the imaginary ones last)
    import warnings
    c = np.array([-3 + 1j, 11 + 2j, 30 + 1j])
    want, got = np.zeros(shape, dt), np.zeros(shape, dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        fn(c, want)
        tracearray.compile(fn)(c, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not hasattr(np, "cumulative_sum"), reason="NumPy 2.1's functions")
@pytest.mark.parametrize("fn", [
    lambda x: np.cumulative_sum(x),
    lambda x: np.cumulative_sum(x, include_initial=True),
    lambda x: np.cumulative_prod(x, axis=0),
])
def test_cumulative_functions_scan_a_0d_array_as_one_element(fn):
    x = np.array(3.0)
    got = tracearray.compile(fn)(x)
    want = fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _same_outcome(fn, *args):
    """The compiled function gives NumPy's value and dtype, or raises NumPy's error class."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        except Exception as e:   # noqa: BLE001
            with pytest.raises(type(e)):
                tracearray.compile(fn)(*args)
            return
        got = tracearray.compile(fn)(*args)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


C2 = np.array([[1 + 1j, 2], [0, 4]], np.complex64)
R2 = np.array([[1.0, 2], [3, 4]])


@pytest.mark.parametrize("fn, x", [
    (lambda a: np.matmul(a, a, dtype=np.complex128), C2),
    (lambda a: np.matmul(a, a, dtype=np.float64, casting="unsafe"), C2),
    (lambda a: np.matmul(a, a, dtype=np.float64), C2),
    (lambda a: np.matmul(a, a, dtype=np.complex64), R2),
    (lambda a: np.matmul(a[0], a, dtype=np.complex128), R2),
    (lambda a: np.matmul(a, a, dtype=np.complex64, casting="safe"), R2),
    (lambda a: np.add(a, a, dtype=np.complex64, casting="safe"), R2),
    (lambda a: np.add(a, 1, dtype=np.complex128, casting="no"), R2),
    (lambda a: np.add(a, 2, dtype=np.complex64, casting="equiv"), C2),
    (lambda a: np.add(a, a, dtype=bool, casting="unsafe"), C2),
    (lambda a: np.sqrt(a, dtype=np.float32, casting="unsafe"), C2),
    (lambda a: np.concatenate([a, a], dtype=np.complex64, casting="safe"), R2),
    (lambda a: np.vstack([a, a], dtype=np.complex64, casting="equiv"), C2.astype(complex)),
    (lambda a: np.full(3, a[0, 0]), C2),
    (lambda a: np.full((2, 3), a[1, 1], dtype=np.float32), C2),
    (lambda a: np.full_like(a, a[0, 0]), C2),
])
def test_complex_dtypes_and_casting_rules(fn, x):
    """dtype= of a complex product is its loop (both operands cast to it); casting rules are
    checked for complex targets as for real ones; a traced complex fill value is broadcast."""
    _same_outcome(fn, x)


def test_a_python_int_under_equiv_casting_raises_numpys_error():
    """(NumPy 2.4's resolve_dtypes crashes the interpreter on this: the rule is checked by a
    call on stand-ins instead)"""
    _same_outcome(lambda a: np.add(a, 1, casting="equiv"), np.ones(3))
    _same_outcome(lambda a: np.maximum(a, 0, casting="equiv"), np.ones(3))
    _same_outcome(lambda a: np.add(a, 1, casting="equiv"), np.ones(3, np.int64))


def test_output_casting_errors_are_numpys_class():
    def f(c):
        c += 1.5
        return c

    def g(a, o):
        np.positive(a, out=o, casting="safe")
        return o

    with pytest.raises(np._core._exceptions._UFuncOutputCastingError):
        tracearray.compile(f)(np.ones(2, np.int8))
    with pytest.raises(np._core._exceptions._UFuncOutputCastingError):
        tracearray.compile(g)(np.ones(2, complex), np.zeros(2, np.complex64))
    _same_outcome(g, np.ones(2, complex), np.zeros(2, np.complex128))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint16])
@pytest.mark.parametrize("value", [np.int64(300), np.int64(-1), np.float64(np.nan),
                                   np.float32(70000.5)])
@pytest.mark.parametrize("kind", ["int", "slice", "ellipsis", "mask", "fancy", "iadd"])
def test_numpy_scalar_into_an_integer_array_by_index_kind(dtype, value, kind):
    """NumPy range-checks a NumPy scalar stored into a signed integer array at a basic index
    (OverflowError, ValueError for NaN) and casts it unsafely into an unsigned one or at an
    advanced index (a mask, a list)."""
    if np.isnan(value) and dtype in (np.uint8, np.uint16):
        return   # (NaN into an unsigned integer: documented float-to-int-cast divergence)

    def fn(c, v):
        c = c.copy()
        if kind == "int":
            c[0] = v
        elif kind == "slice":
            c[0:2] = v
        elif kind == "ellipsis":
            c[...] = v
        elif kind == "mask":
            c[c > 0] = v
        elif kind == "fancy":
            c[[0, 2]] = v
        else:
            c[0] += v
        return c
    if kind in ("mask", "fancy") and np.isnan(value):
        return   # (NaN into an integer: the same documented divergence)
    _same_outcome(fn, np.array([1, 0, 2], dtype), value)


@pytest.mark.parametrize("axis", [(0,), (0, 1), None, 1])
def test_accumulate_axes(axis):
    _same_outcome(lambda x: np.add.accumulate(x, axis=axis), np.ones((2, 3)))


def test_defaults_rebound_between_calls_are_seen():
    def d(a, s=1, *, t=2):
        return a + s * t
    cd = tracearray.compile(d)
    x = np.array([1, 2], np.int8)
    for defaults, kwdefaults in [((1,), {"t": 2}), ((1.5,), {"t": 2}), ((1.5,), {"t": 10})]:
        d.__defaults__, d.__kwdefaults__ = defaults, kwdefaults
        got, want = cd(x), d(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


X34 = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("fn", [
    lambda a: np.pad(a, {1: (1, 2)}),                       # (NumPy 2.4's dict form)
    lambda a: np.pad(a, {0: 1, -1: (0, 2)}, mode="edge"),
    lambda a: np.take_along_axis(a, np.zeros((2, 2), int), axis=0),   # IndexError
    lambda a: a.item(100),                                  # IndexError before the value
    lambda a: np.einsum("i...->i", a),                      # ValueError: no '...' out
    lambda a: np.einsum("i...->i...", a),
    lambda a: a.reshape(3, 2, 2).dot(np.ones((2, 5))),      # x.dot of 3 dimensions
])
def test_argument_forms_and_their_errors(fn):
    _same_outcome(fn, X34)


@pytest.mark.parametrize("fn, x", [
    (lambda b: b ** 2, np.True_),                     # a NumPy scalar's ** is np.power: int64
    (lambda x: x.all() ** 2, np.array([True, True])),
    (lambda x: x ** 2, np.array([True, False])),      # an array's: np.square, int8
    (lambda x: x < 2**63, np.array([True, False])),   # OverflowError for booleans
    (lambda x: x < 2**63, np.array([1, 2])),          # exact for integers
    (lambda x: x == -2**64, np.array([1, 2], np.uint8)),
])
def test_scalar_power_and_big_python_ints(fn, x):
    _same_outcome(fn, x)


def test_interleaved_views_that_share_no_element_may_be_written():
    """b[::2] and b[1::2] overlap in bounds but share no element (a red-black sweep):
    NumPy's exact answer, not the bounds, decides; overlapping views are still refused."""
    from tracearray.errors import InputError

    def sweep(a, b):
        a[1:-1] = 0.5 * (b[:-2] + b[2:])
        b[:] = b * 2

    c = tracearray.compile(sweep)
    base, want = np.arange(20.0), np.arange(20.0)
    c(base[::2], base[1::2])
    sweep(want[::2], want[1::2])
    np.testing.assert_array_equal(base, want)
    with pytest.raises(InputError, match="share memory"):
        c(base[:10], base[5:15])


PARAMS_W = {"w": np.ones(3)}


class _Holder:
    def __init__(self):
        self.w = np.ones(3)

    def step(self, x):
        x += 2.0
        return self.w.sum()   # (NumPy's own operation: read while tracing)


def test_written_arguments_that_alias_reached_or_overlapping_memory_are_refused():
    """A written argument sharing memory with an array the trace read by NumPy's own
    operations (a global dict's item, an attribute), or overlapping itself (as_strided),
    is refused: NumPy's result follows the write, the trace's would not."""
    from numpy.lib.stride_tricks import as_strided

    from tracearray.errors import InputError

    def f(x):
        x[:] = 4.0
        return PARAMS_W["w"] * 1.0

    with pytest.raises(InputError, match="share memory"):
        tracearray.compile(f)(PARAMS_W["w"])
    np.testing.assert_array_equal(tracearray.compile(f)(np.zeros(3)), np.ones(3))
    h = _Holder()
    with pytest.raises(InputError, match="share memory"):
        tracearray.compile(h.step)(h.w)

    def g(x):
        x += 1

    base = np.arange(8)
    with pytest.raises(InputError, match="elements share memory"):
        tracearray.compile(g)(as_strided(base, (4, 3), (8, 8)))
    assert base.tolist() == list(range(8))


@pytest.mark.parametrize("value", [0, 300, -1, 1.5, True, 2 + 0j])
@pytest.mark.parametrize("masked", [False, True])
def test_copyto_takes_python_numbers_as_weak_scalars(value, masked):
    def h(x):
        if masked:
            np.copyto(x, value, where=x > 1)
        else:
            np.copyto(x, value)
        return x
    _same_outcome(h, np.array([1, 2, 3], np.uint8))


@pytest.mark.parametrize("subscripts, shapes", [
    ("ii->i", [(1, 5)]), ("ii", [(1, 3)]), ("ij,jj->i", [(2, 3), (3, 1)]), ("ii->i", [(3, 3)])])
def test_einsum_repeated_labels_must_match(subscripts, shapes):
    arrays = [np.arange(float(np.prod(s))).reshape(s) for s in shapes]
    _same_outcome(lambda *a: np.einsum(subscripts, *a), *arrays)


def test_buffer_protocol_arguments_are_arrays():
    """memoryview, bytearray and array.array arguments are arrays, as np.asarray makes them
    (a probe found a raw ValueError and a message about static arguments)."""
    import array
    f = tracearray.compile(lambda x: np.asarray(x) * 2, device="cpu")
    for value in (memoryview(np.arange(3.0)), array.array("d", [1.0, 2.0]),
                  bytearray(b"ab")):
        np.testing.assert_array_equal(f(value), np.asarray(value) * 2)


def test_an_argument_holding_an_unhashable_constant_is_named():
    import types
    with pytest.raises(tracearray.InputError, match="argument 'ns' holds .* SimpleNamespace"):
        tracearray.compile(lambda x, ns: x * ns.k, device="cpu")(
            np.ones(2), types.SimpleNamespace(k=2.0))


def test_numpys_argument_errors_for_copy_and_reshape():
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match="order must be one of"):
        tracearray.compile(lambda x: np.copy(x, order="Z"), device="cpu")(x)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        tracearray.compile(lambda x: x.reshape((2.0, 3)), device="cpu")(x)
    with pytest.raises(ValueError, match="Unable to avoid creating a copy"):
        tracearray.compile(lambda x: (x + 1).T.reshape(6, copy=False), device="cpu")(x)
    with pytest.raises(tracearray.UnsupportedOperationError, match="copy=False"):
        tracearray.compile(lambda x: x.T.reshape(6, copy=False), device="cpu")(x)


class _Lazy:
    def __init__(self, n):
        self.n = n

    def __array__(self, dtype=None, copy=None):
        return np.arange(self.n, dtype=np.float64)   # (NumPy calls of its own)


def test_an_argument_whose_array_method_calls_numpy():
    """An argument's ``__array__`` runs as the user's own NumPy code, not traced (a probe
    found np.arange inside it handed a traced value: 'object __array__ method not producing
    an array')."""
    f = tracearray.compile(lambda a: np.asarray(a) * 2, device="cpu")
    for n in (3, 4):
        np.testing.assert_array_equal(f(_Lazy(n)), np.arange(n) * 2.0)


def test_item_of_many_elements_and_del_raise_numpys_errors():
    def item(x):
        return x.item()

    def delete(x):
        del x[0]
        return x

    for f, match in ((item, "size 1 to a Python scalar"), (delete, "cannot delete")):
        with pytest.raises(ValueError, match=match):
            f(np.arange(6.0))
        with pytest.raises(ValueError, match=match):
            tracearray.compile(f, device="cpu")(np.arange(6.0))
