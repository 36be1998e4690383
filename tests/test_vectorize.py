"""``np.vectorize`` of traced arrays (``trace/vectorize.py``) against NumPy: the function
traced on one element, its element graph applied to the whole arrays; NumPy's result dtype
(its first call's, on NumPy scalars) and values (computed on Python floats and ints, then
cast); refusals named for what cannot be traced that way."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tracearray
from tracearray.errors import ConcretizationError, UnsupportedOperationError
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(3)
A = RNG.standard_normal((4, 5))
V = RNG.standard_normal(5)
F32 = (A * 3).astype(np.float32)
INTS = RNG.integers(-9, 9, (4, 5))
VF = np.vectorize(lambda t: np.sqrt(np.abs(t)) + 1)   # made outside the compiled function


def _relu(t):
    return np.where(t > 0, t, 0.1 * t)


CASES = {
    "lambda": (lambda a: np.vectorize(lambda t: t * 2 + 1)(a), (A,)),
    "two arrays, broadcast": (lambda a, b: np.vectorize(lambda x, y: np.hypot(x, y) - x)(a, b),
                              (A, V)),
    "vectorize object made outside": (lambda a: VF(a), (A,)),
    "float32 (values in float64, cast back)": (
        lambda a: np.vectorize(lambda t: t * t * 0.1 - t / 3)(a), (F32,)),
    "float32 through np.exp (float64 result)": (
        lambda a: np.vectorize(lambda t: np.exp(t) / (1 + t * t))(a), (F32,)),
    "integers": (lambda a: np.vectorize(lambda t: t * t - 3 * t)(a), (INTS,)),
    "integers to floats": (lambda a: np.vectorize(lambda t: t / 4)(a), (INTS,)),
    "otypes": (lambda a: np.vectorize(lambda t: t * 2.5, otypes=[np.int32])(a), (A,)),
    "a Python scalar argument": (lambda a: np.vectorize(lambda t, s: t * s)(a, 3.0), (F32,)),
    "two results": (lambda a: np.vectorize(lambda t: (t + 1, t > 0))(a), (A,)),
    "a constant result": (lambda a: np.vectorize(lambda t: 7.0)(a), (A,)),
    "np.where inside": (lambda a: np.vectorize(_relu)(a), (A,)),
    "excluded keyword": (lambda a: np.vectorize(lambda t, p: t ** p, excluded=["p"])(a, p=2),
                         (A,)),
    "booleans out": (lambda a: np.vectorize(lambda t: t > 0)(a), (A,)),
    "a list argument": (lambda a: np.vectorize(lambda x, y: x - y)(a, [1.0, 2.0, 3.0, 4.0, 5.0]),
                        (A,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vectorize_matches_numpy(name: str) -> None:
    fn, args = CASES[name]
    assert_matches_numpy(fn, *args, device="cpu")


def test_vectorize_dtype_and_bits_are_numpys() -> None:
    """float32 in: NumPy's loop computes on Python floats and casts the result to float32
    (its first call's dtype), so the bits are those of the float64 formula, rounded once."""
    fn = CASES["float32 (values in float64, cast back)"][0]
    want, got = fn(F32), tracearray.compile(fn)(F32)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_vectorize_without_traced_arrays_is_numpys_own() -> None:
    """Inside a compiled function, a vectorized call on concrete values is NumPy's."""
    def f(a):
        table = np.vectorize(lambda t: math.floor(t) * 2)(np.arange(3.5, 6.0))
        return a + table.sum()
    np.testing.assert_array_equal(tracearray.compile(f)(V), f(V))   # V + 24


@pytest.mark.parametrize("fn, error, match", [
    (lambda a: np.vectorize(lambda t: t if t > 0 else -t if t > -1 else 2 * t if t > -2 else
                            3 * t if t > -3 else t + 1 if t > -4 else t + 2 if t > -5 else
                            t + 3 if t > -6 else 0)(a), UnsupportedOperationError,
     "more than 6 branches"),
    (lambda a: np.vectorize(lambda t: math.sin(t))(a), ConcretizationError, "math.sin"),
    (lambda a: np.vectorize(lambda t: t * a)(a), UnsupportedOperationError, "whole array"),
    (lambda a: np.vectorize(lambda t: np.sum(t))(a), UnsupportedOperationError, "sum"),
    (lambda a: np.vectorize(lambda r: r.sum(), signature="()->()")(np.resize(a, 2000)),
     UnsupportedOperationError, "over 2000 loop indices"),
    (lambda a: np.vectorize(lambda t: t + 1)(a[:0]), ValueError, "size 0 inputs"),
    (lambda a: np.vectorize(lambda t: [t, t])(a), UnsupportedOperationError, "sequence"),
    (lambda a: np.vectorize(lambda t: t + np.random.rand())(a), UnsupportedOperationError,
     "random"),
], ids=["seven branches on a value", "math.sin", "closes over an array", "a reduction", "a signature's long loop",
        "size 0 without otypes", "returns a list", "a random draw per element"])
def test_vectorize_refusals_name_the_cause(fn, error, match) -> None:
    with pytest.raises(error, match=match):
        tracearray.compile(fn)(A)


def test_vectorize_with_a_signature_is_numpys_loop_on_tracers() -> None:
    """With a signature the function sees each loop index's core slices as traced arrays (it
    may reduce, index and make matrices); results stacked as NumPy's loop stacks them, with
    broadcasting of the loop dimensions, several outputs, otypes and NumPy's errors."""
    m = np.arange(24.0).reshape(2, 3, 4) - 7.5
    for fn in (lambda a: np.vectorize(lambda r: r.sum() * 2, signature="(n)->()")(a),
               lambda a: np.vectorize(lambda r, s: (np.outer(r, s), r.max()),
                                      signature="(n),(k)->(n,k),()")(a, a[0, :, :2]),
               lambda a: np.vectorize(lambda r: np.sort(r)[::-1], signature="(n)->(n)",
                                      otypes=[np.float32])(a),
               lambda a: np.vectorize(lambda x: x @ x.T, signature="(m,n)->(m,m)")(a),
               lambda a: np.vectorize(lambda r: r.sum(), signature="(n)->()")(a[..., :0]),
               lambda a: np.vectorize(lambda r, s: r + s, signature="(n),(n)->(n)")(
                   a, a[:, :2])):
        assert_matches_numpy(fn, m, device="cpu")


def test_vectorize_of_size_0_with_otypes() -> None:
    fn = lambda a: np.vectorize(lambda t: t + 1, otypes=[np.float32])(a[:0])  # noqa: E731
    assert_matches_numpy(fn, A, device="cpu")


def test_vectorize_emulated_gpu(emulated_gpu) -> None:
    fn = CASES["two arrays, broadcast"][0]
    assert_matches_numpy(fn, A, V, device="cuda")


def test_frompyfunc_is_refused_by_name() -> None:
    """np.frompyfunc's object ufunc (it said "np.<lambda> (vectorized) is not supported"):
    refused naming np.frompyfunc and the traced ways."""
    f = tracearray.compile(lambda a: np.frompyfunc(lambda t: t + 1, 1, 1)(a))
    with pytest.raises(UnsupportedOperationError, match="np.frompyfunc.*np.vectorize"):
        f(np.ones(3))


@pytest.mark.parametrize("fn", [
    lambda a: np.vectorize(lambda s: s if s > 0 else 0)(a),
    lambda a: np.vectorize(lambda s, k: max(s - k, 0))(a, 0.5),
    lambda a: np.vectorize(lambda s: int(s > 0))(a),
    lambda a: np.vectorize(lambda s: -s if s < 0 else (s * 2 if s > 1 else s))(a),
    lambda a: np.vectorize(lambda s: float(s > 0) * 2 + (s > 1))(a),
    lambda a: np.vectorize(lambda s, t: (s, t) if s > t else (t, s))(a, a[::-1]),
], ids=["if-else of two dtypes", "max with a number", "int of a bool", "nested", "float of a bool",
        "a tuple each way"])
def test_vectorize_branches_on_an_element_run_both_ways(fn) -> None:
    """A branch on an element's value (``s if s > 0 else 0``, Python's max beside a number,
    int(s > 0)) is traced both ways and joined by a select; where the ways give results of
    different dtypes, the output's is the one the first elements take (NumPy learns it from
    its first call), found when the function runs."""
    f = tracearray.compile(fn, device="cpu")
    for x in (np.array([1.5, -2.0, 0.3, 3.0]), np.array([-1.5, 2.0, 0.3, 3.0])):
        want, got = fn(x), f(x)
        for w, g in zip(want if isinstance(want, tuple) else (want,),
                        got if isinstance(got, tuple) else (got,)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)


def test_vectorize_errors_down_a_branch_raise_where_an_element_goes_there() -> None:
    """(changes probe, sixteenth session) A raise / assert down a branch no element takes
    failed every call: it is NumPy's error only where an element goes that way (a run-time
    check), and every way raising is NumPy's first call's error."""
    def chk(s):
        if s < -100:
            raise ValueError("too small")
        return s * 2

    f = tracearray.compile(lambda a: np.vectorize(chk)(a), device="cpu")
    np.testing.assert_array_equal(f(np.array([1.0, 2.0, 3.0])), [2.0, 4.0, 6.0])
    with pytest.raises(ValueError, match="too small"):
        f(np.array([1.0, -200.0, 3.0]))
    g = tracearray.compile(lambda a: np.vectorize(lambda s: 1 / 0 if s > 0 else 1 / 0)(a),
                           device="cpu")
    with pytest.raises(ZeroDivisionError):
        g(np.array([1.0]))
