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
