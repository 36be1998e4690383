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
