"""np.lib.stride_tricks.as_strided of traced arrays (``trace/memory_views.py``: a view whose
elements a gather reads from the base's memory), ``x.strides`` while tracing, and NumPy
functions bound by name in the module of the traced function, which its helpers call
(``from numpy.lib.stride_tricks import as_strided``, ``from numpy import asarray``).
Against NumPy, on the CPU and the emulated GPU."""
from __future__ import annotations

import numpy as np
import pytest
from numpy import asarray  # a user's bindings, read by helpers
from numpy.lib.stride_tricks import as_strided
from numpy.random import rand as imported_rand

import tracearray
from tracearray.errors import UnsupportedOperationError
from tracearray.testing import assert_matches_numpy

RNG = np.random.default_rng(12)


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    if request.param == "cuda":
        request.getfixturevalue("emulated_gpu")
    return request.param


def rolling(a, w=4):
    """The classic rolling window: a helper of the module, calling the imported name."""
    return as_strided(a, shape=(a.shape[0] - w + 1, w), strides=(a.strides[0], a.strides[0]))


def im2col(m, k=3):
    h, w = m.shape
    s0, s1 = m.strides
    return as_strided(m, shape=(h - k + 1, w - k + 1, k, k), strides=(s0, s1, s0, s1))


def test_windows_and_patches(device) -> None:
    """Rolling windows of an argument and of a slice (then sliced again), image patches of a
    float32 matrix reduced by einsum, broadcast (stride 0) and reversed (negative stride)
    views, the default shape and strides (the view itself), and an empty view."""
    x = RNG.standard_normal(21)
    m = RNG.standard_normal((6, 9)).astype(np.float32)
    assert_matches_numpy(lambda a: rolling(a).mean(axis=1), x, device=device)
    assert_matches_numpy(lambda a: rolling(a[2:])[::3, 1:], x, device=device)
    assert_matches_numpy(lambda a: np.einsum("ijkl,kl->ij", im2col(a),
                                             np.arange(9.0, dtype=np.float32).reshape(3, 3)),
                         m, device=device)
    for f in (lambda a: as_strided(a, (4, 5), (0, 8)),
              lambda a: as_strided(a[5:], (3, 2), (0, 0)),
              lambda a: as_strided(a[10:], (5,), (-16,)),
              lambda a: as_strided(a.reshape(3, 7).T),
              lambda a: as_strided(a, (0, 3), (8, 8))):
        assert_matches_numpy(f, x, device=device)


def test_the_view_follows_its_memory() -> None:
    """A write to the array after the view was taken is seen through it (a view, not a
    copy); flags as NumPy's for such a view."""
    def after_write(a):
        v = rolling(a)
        a[3] = 100.0
        return v.sum(axis=1), v.flags.owndata, v.flags.c_contiguous
    assert_matches_numpy(after_write, RNG.standard_normal(9))


def test_refusals_and_numpy_errors() -> None:
    """A view reaching outside the memory (NumPy reads whatever lies there), strides that
    are not whole items, and writes through the view are refused by name; a read-only view
    and mismatched lengths raise NumPy's ValueErrors."""
    x = RNG.standard_normal(10)

    def write_through(a):
        rolling(a)[0, 0] = 1.0
        return a

    def read_only(a):
        as_strided(a, (3,), (8,), writeable=False)[0] = 1.0
        return a
    for f, what in [(lambda a: as_strided(a, (30,), (8,)), "outside the array's memory"),
                    (lambda a: as_strided(a, (3,), (4,)), "whole float64 items"),
                    (write_through, "writing through")]:
        with pytest.raises(UnsupportedOperationError, match=what):
            tracearray.compile(f)(x)
    for f, what in [(read_only, "read-only"),
                    (lambda a: as_strided(a, (3, 2), (8,)), "mismatch in length")]:
        with pytest.raises(ValueError, match=what):
            f(x.copy())
        with pytest.raises(ValueError, match=what):
            tracearray.compile(f)(x.copy())


def test_strides_while_tracing() -> None:
    """NumPy's strides for views of C-contiguous memory: transposes, steps, a reshape,
    item-size views, complex arguments and their views, and complex results. (A new axis of
    length 1 is left out: `a[:, None]` has stride 0 there, np.expand_dims another; the trace
    records both as the same view.)"""
    m = RNG.standard_normal((4, 6)).astype(np.float32)
    z = (RNG.standard_normal((3, 4)) + 1j).astype(np.complex64)
    assert_matches_numpy(lambda a: (a.strides, a.T.strides, a[::2, 1::3].strides,
                                    a.reshape(2, 12).strides, a.ravel().strides,
                                    a.view(np.uint8).strides, a[1:, ::-1].strides), m)
    assert_matches_numpy(lambda c: (c.strides, c.T.strides, c[1:, ::2].strides,
                                    (c * 2).strides, c.real.strides), z)


def helper_asarray(a):
    return asarray(a) * 2


def helper_rand(a):
    return a + imported_rand(*a.shape)


def test_helpers_read_the_modules_bindings() -> None:
    """A helper function of the traced function's module calls NumPy functions bound by
    name in the module: np.asarray passed the tracer (it asked for its value), and a legacy
    random function is the traced draw (it was NumPy's, drawn once while tracing: a
    constant)."""
    x = np.arange(6.0)
    np.testing.assert_array_equal(tracearray.compile(lambda a: helper_asarray(a).sum())(x),
                                  30.0)
    f = tracearray.compile(helper_rand)
    first, second = f(np.zeros(4)), f(np.zeros(4))
    assert np.all((first >= 0) & (first < 1)) and not np.array_equal(first, second)
    assert asarray is np.asarray and as_strided is np.lib.stride_tricks.as_strided  # restored


def test_helpers_in_the_users_other_modules() -> None:
    """The same for a helper module of the user's that the traced function's module imports
    (tests/bound_numpy_helpers.py): its bindings are replaced while the trace runs, and
    restored after."""
    import bound_numpy_helpers as helpers
    x = np.arange(7.0)
    assert_matches_numpy(lambda a: (helpers.smooth(a), helpers.windows(a).sum(axis=1)), x)
    f = tracearray.compile(lambda a: helpers.noisy(a) * 2)
    assert not np.array_equal(f(np.zeros(4)), f(np.zeros(4)))
    assert helpers.asarray is np.asarray and helpers.rand is np.random.mtrand.rand


def test_explicit_strides_of_an_argument_that_is_not_c_contiguous_are_refused() -> None:
    """Explicit strides read the argument's raw memory, which the trace takes as a
    C-contiguous array's: a C-contiguous argument (a slice of one included) gives NumPy's
    values; a strided one, where NumPy reads memory between its elements, is refused at
    the call by name (it silently read the logical elements instead); strides=None follows
    the argument's own layout whatever it is."""
    def windows(x):
        return as_strided(x, shape=(3, 2), strides=(x.itemsize, x.itemsize)).copy()

    x = np.arange(10.0)
    f = tracearray.compile(windows)
    for arg in (x[:6], x[2:8], x[:6].copy()):
        np.testing.assert_array_equal(f(arg), windows(arg))
    with pytest.raises(UnsupportedOperationError, match="'x' is not C-contiguous.*as_strided"):
        f(x[::2])
    same = tracearray.compile(lambda x: as_strided(x, shape=(2,)).copy())
    np.testing.assert_array_equal(same(x[::2]), x[::2][:2])
