"""numpy.polynomial's functions on traced values (NumPy's own code, run while tracing):
its functions make arrays and fill them with their arguments' values (polyvander's
``v = np.empty(...); v[0] = x * 0 + 1``), so arrays that package makes are traced values of
their own, as arrays made in the user's code are (trace/context.py ``_from_user_code``).
Against NumPy on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

from tracearray.testing import assert_matches_numpy

P = np.polynomial
RNG = np.random.default_rng(4)
X = np.linspace(-1, 1, 30)
Y = 1 + 2 * X - 3 * X ** 2 + 0.1 * RNG.standard_normal(30)

CASES = {
    "polyfit": lambda x, y: P.polynomial.polyfit(x, y, 2),
    "polyfit, full": lambda x, y: P.polynomial.polyfit(x, y, 3, full=True)[0],
    "polyvander": lambda x, y: P.polynomial.polyvander(x, 3),
    "chebfit": lambda x, y: P.chebyshev.chebfit(x, y, 3),
    "legvander": lambda x, y: P.legendre.legvander(x, 4),
    "hermfit": lambda x, y: P.hermite.hermfit(x, y, 2),
    "lagval": lambda x, y: P.laguerre.lagval(x, [1.0, 2.0, 3.0]),
    "Polynomial.fit": lambda x, y: P.Polynomial.fit(x, y, 2).coef,
    "Polynomial.fit evaluated": lambda x, y: P.Polynomial.fit(x, y, 2)(x),
    "polyroots": lambda x, y: P.polynomial.polyroots([1.0, -3.0, 2.0]) + x[:2],
    "polyder and polyint": lambda x, y: P.polynomial.polyder(y[:4]) + P.polynomial.polyint(
        y[:2])[:3],
    "float32 data": lambda x, y: P.polynomial.polyfit(x.astype(np.float32),
                                                     y.astype(np.float32), 2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_polynomial_matches_numpy(name):
    assert_matches_numpy(CASES[name], X, Y, device="cpu")


# np.roots and the other np.poly* functions (numpy.lib._polynomial_impl) fill the arrays they
# make too (np.roots' companion matrix: A = diag(ones(N - 2), -1); A[0, :] = -p[1:] / p[0])
ROOTS = [[1.0, -3.0, 2.0], [1.0, 0.0, 1.0], [0.0, 2.0, -8.0, 0.0], [3.0], [2.0, 0.0, 0.0],
         [1.0, -3.0, 2.0, 0.5]]


@pytest.mark.parametrize("p", ROOTS, ids=[str(p) for p in ROOTS])
def test_np_roots_of_traced_coefficients(p):
    """Real and complex roots, leading and trailing zeros (sizes the data decides: staged),
    a constant (no roots)."""
    assert_matches_numpy(lambda c: np.roots(c), np.array(p), device="cpu")


def test_np_poly_functions_of_traced_coefficients():
    v = np.array([1.0, -3.0, 2.0, 0.5])
    for fn in (lambda a: np.poly(a[:3]), lambda a: np.polyval(a, 0.3),
               lambda a: np.polyder(a, 2), lambda a: np.polyint(a, 1, k=[2.0]),
               lambda a: np.polyadd(a, a[:2]), lambda a: np.polydiv(a, a[:2]),
               lambda a: np.polymul(a, a[:2]), lambda a: np.polymul(a * 0, [1, 2]),
               lambda a: np.poly1d(a).deriv()(np.linspace(-1, 1, 5))):
        assert_matches_numpy(fn, v, device="cpu")


POLY_TENSOR_FORMS = {
    # numpy.polynomial broadcasts a 2-d c over x's dimensions only if isinstance(x,
    # np.ndarray): a traced x took the other branch (silently, where x's last dimension
    # equalled the number of polynomials)
    "polyval_2d_c": lambda x, c: np.polynomial.polynomial.polyval(x, c),
    "chebval_2d_x_2d_c": lambda x, c: np.polynomial.chebyshev.chebval(
        np.stack([x, x * 0.5]), c),
    "hermval_2d_c": lambda x, c: np.polynomial.hermite.hermval(x, c),
    "polygrid2d": lambda x, c: np.polynomial.polynomial.polygrid2d(x, x[:2], c),
    "polyvalfromroots_1d": lambda x, c: np.polynomial.polynomial.polyvalfromroots(x, c[:, 0]),
    "polyvalfromroots_2d": lambda x, c: np.polynomial.polynomial.polyvalfromroots(x, c),
    "polyval2d": lambda x, c: np.polynomial.polynomial.polyval2d(x, x[::-1], c),
}


@pytest.mark.parametrize("name", sorted(POLY_TENSOR_FORMS))
def test_polynomial_values_broadcast_their_coefficients_as_numpy(name):
    from tracearray.testing import assert_matches_numpy
    x = np.array([0.5, -1.25, 2.0])
    c = np.arange(9.0).reshape(3, 3) / 4 - 1
    assert_matches_numpy(POLY_TENSOR_FORMS[name], x, c, device="cpu")
