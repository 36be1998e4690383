"""Writing into arrays with NumPy's semantics (``trace/buffers.py``), against NumPy.

- ``WRITE_PROGRAMS``: assignment with basic keys (any step, negative steps, integers, None,
  ``...``), through views (transposes, reshapes, slices of slices), with keys known at trace
  time (lists, integer and boolean arrays, repeated indices), through traced boolean masks
  (a scalar, a row, an array of values placed by a prefix count), in-place operators and
  their aliasing (names, views, list elements), arrays the function made (np.zeros, np.empty,
  np.arange, ...), element-by-element Python loops, np.copyto / putmask / place / put /
  fill_diagonal, ndarray.fill, x.flat[...] = v and ufunc / reduction ``out=``; on the CPU,
  assembled by ptxas, under the GPU emulator and (``-m gpu``) on the GPU;
- in-place updates of arguments (C, Fortran, strided and negative-stride views) are written
  back into the caller's arrays; overlapping arguments are refused;
- ``test_random_writes``: Hypothesis draws keys and values and compares with NumPy;
- fusion: a write is a select inside the kernel that reads the result.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

import tracearray
from gpu_differential import assemble_kernels
from tracearray.errors import UnsupportedOperationError
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.testing import assert_matches_numpy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
HAVE_GPU = driver.is_available()

RNG = np.random.default_rng(1)
X = RNG.standard_normal((4, 5, 6))
V = RNG.standard_normal((5, 6))


def _loop(x, v):
    out = np.zeros(x.shape[1])
    for i in range(x.shape[1]):
        out[i] = x[0, i].sum() * 2 + i
    return out


def _stencil(x, v):
    u = x[0].copy()
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u


def _aliases(x, v):
    y = x.copy()
    names = [y, y[1], y.T, y.reshape(-1)]
    y += 1
    y[:, 0] *= -1
    names[1][...] = 5
    return tuple(n.copy() for n in names) + (y,)


def _made(x, v):
    a = np.zeros((3, 6))
    a[0] = v[0]
    b = np.empty_like(v)
    b[...] = v * 2
    c = np.arange(6.0)
    c[::2] = v[1, ::2]
    d = np.full((2, 6), 7, dtype=np.int32)
    d[1] = v[2]             # cast to int32 (NumPy's unsafe assignment cast)
    e = np.eye(4)
    e[1:3, 1:3] = -1
    return a, b, c, d, e


def _functions(x, v):
    a = v.copy()
    np.copyto(a, x[0], where=x[0] > 0)
    b = v.copy()
    np.putmask(b, v > 0, [1.0, 2.0, 3.0])
    c = v.copy()
    np.place(c, v < 0, [9.0, 8.0])
    d = v.copy()
    np.put(d, [0, 7, -1, 7], [4.0, 5.0])
    e = np.zeros((5, 5))
    np.fill_diagonal(e, v[0, 0])
    f = v.copy()
    f.fill(2.5)
    g = v.copy()
    g.flat[[1, 3, 29]] = -7
    return a, b, c, d, e, f, g


def _out(x, v):
    o = np.zeros((5, 6))
    np.add(x[0], v, out=o)
    p = np.zeros(6)
    np.sum(x[1], axis=0, out=p)
    q = np.zeros((5, 6), np.int64)
    np.floor_divide(v * 10, 3, out=q, casting="unsafe")
    r = v.copy()
    np.multiply(r, 2, out=r, where=r > 0)
    s = np.ones(5)
    v.max(axis=1, out=s)
    return o, p, q, r, s


def _function_out(x, v):
    """``out=`` of the functions that are ufunc calls, sums or joins in NumPy."""
    a = np.zeros((2, 5, 6))
    np.clip(v, -0.5, 0.5, out=a)              # broadcast into out, as a ufunc's output
    b = np.zeros((5, 6), np.float32)
    v.clip(-1, None, out=b)                    # same_kind: float64 -> float32
    c = np.zeros((5, 6))
    np.round(v, 2, out=c)
    d = np.zeros((5, 6), np.int64)
    np.round((v * 1000).astype(np.int64), -2, out=np.zeros((5, 6)))
    np.fix(v * 10, out=c[::-1])                # into a view: writes c
    e = np.zeros((), np.int64)
    np.trace(x[0] * 10, out=e)                 # a sum's out: cast unsafely
    f = np.zeros((10, 6), np.float32)
    np.concatenate([v, v[::-1]], out=f)        # each array cast into out's dtype
    g = np.zeros((5, 2, 6))
    np.stack([v, -v], axis=1, out=g)
    np.add(np.concatenate([v, v], axis=1, out=np.empty((5, 12)))[:, :6], 0, out=d,
           casting="unsafe")
    return a, b, c, d, e, f, g


# name -> fn(x, v): each returns the arrays it wrote (NumPy inputs are not written)
WRITE_PROGRAMS: dict[str, Callable[..., Any]] = {
    "y[1:-1] = v": lambda x, v: _set(x, (slice(1, -1),), v[0]),
    "y[::-2, 1] = v": lambda x, v: _set(x, (slice(None, None, -2), 1), v[0]),
    "y[0, :, 3] = scalar": lambda x, v: _set(x, (0, slice(None), 3), 2.0),
    "y[..., 0] = v": lambda x, v: _set(x, (Ellipsis, 0), v[:, :4].T[0]),
    "y[None, 1] = v": lambda x, v: _set(x, (None, 1), v[None]),
    "y[2:1] = v (empty region)": lambda x, v: _set(x, (slice(2, 1),), 3.0),
    "y[...] = v (broadcast)": lambda x, v: _set(x, (Ellipsis,), v[0]),
    "y[i, :] += v": lambda x, v: _iset(x, (1, slice(None)), v),
    "y[[0, 2, 0]] = v (repeated)": lambda x, v: _set(x, ([0, 2, 0],), v),
    "y[[0, 3], :, [1, 5]] = v": lambda x, v: _set(x, ([0, 3], slice(None), [1, 5]), v[:2, :2]),
    "y[known mask] = v": lambda x, v: _set(x, (np.array([True, False, True, False]),), v),
    "y[mask] = 0": lambda x, v: _mset(x, x > 0, 0.0),
    "y[mask] = v (rows)": lambda x, v: _mset(x, x[:, 0, 0] > 0, v),
    "y[mask] = values": lambda x, v: (
        _mset(x[0, 0], (x[0, 0] * 0 + np.arange(6)) % 2 == 0, v[0, :3]),
        _mset(x[0, 0], x[0, 0] > 10.0, np.zeros(0))),
    "y[:, mask] = v": lambda x, v: _colmask(x, v),
    "y[:, mask] = a value per row": lambda x, v: _colmask_values(x, v),
    "y[m] = z[m], y[m] += 1, y[rows] *= 2": lambda x, v: _selected_values(x, v),
    "y.T[1] = v (through a view)": lambda x, v: _tset(x, v),
    "y.reshape(...)[k] = v": lambda x, v: _rset(x, v),
    "y[1:][::2][0] = v (slices of slices)": lambda x, v: _sset(x, v),
    "y += v, aliases": _aliases,
    "arrays the function made": _made,
    "element-by-element loop": _loop,
    "stencil": _stencil,
    "copyto, putmask, place, put, fill_diagonal, fill, flat": _functions,
    "out=": _out,
    "out= of clip, round, fix, trace, concatenate, stack": _function_out,
    "int16 y[0] = int64 values (wrapping cast)": lambda x, v: _set(
        (x * 3).astype(np.int16), (0,), (v * 100000).astype(np.int64)),
}


def _set(x, key, value):
    y = x.copy()
    y[key] = value
    return y


def _iset(x, key, value):
    y = x.copy()
    y[key] += value
    return y


def _mset(x, mask, value):
    y = x.copy()
    y[mask] = value
    return y


def _colmask(x, v):
    y = x[0].copy()
    m = y[0] > 0
    y[:, m] = -1.0
    z = x[0].copy()
    z[..., m] = 2 * z[..., m] if False else 3.0
    return y, z


def _colmask_values(x, v):
    # the value broadcast to x[:, mask]'s shape (rows, count): a value per row, also where
    # the count equals the number of rows (it was read as a value per selected column)
    y = x[0, :, :5].copy()
    every = (y[0] * 0 + np.arange(5)) >= 0      # traced, 5 selected: as many as rows
    y[:, every] = v[:, :1]
    z = x[0].copy()
    z[:, z[0] > 0] = v[:, :1] * 2
    w = x.copy()
    w[:, w[0, :, 0] > -10] = np.arange(4.0)[:, None, None]
    return y, z, w


def _selected_values(x, v):
    a = x[0].copy()
    m = a > 0
    a[m] = v[m]
    b = x[0].copy()
    b[b < 0] += 10
    c = x.copy()
    rows = c[:, 0, 0] > 0
    c[rows] *= 2
    d = x[1].copy()
    d[d > 0] = np.sqrt(d[d > 0])
    e = x.copy()
    cols = e[0, :, 0] > 0
    e[:, cols] = e[:, cols] * 2
    e[:, cols] += 1
    return a, b, c, d, e


def _tset(x, v):
    y = x[0].copy()
    y.T[1] = v[0, :5]
    return y


def _rset(x, v):
    y = x[0].copy()
    y.reshape(3, 10)[1] = v[0, 0]
    y.ravel()[::7] = -v[0, 1]
    return y


def _sset(x, v):
    y = x.copy()
    y[1:][::2][0] = v
    return y


def _args() -> tuple:
    return X, V


@pytest.mark.parametrize("name", sorted(WRITE_PROGRAMS))
def test_writes_cpu(name: str) -> None:
    assert_matches_numpy(WRITE_PROGRAMS[name], *_args(), device="cpu")
    assert_matches_numpy(WRITE_PROGRAMS[name], np.asfortranarray(X), V[::-1].copy()[::-1],
                         device="cpu")


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", ["stencil", "y[mask] = v (rows)", "y[[0, 2, 0]] = v (repeated)",
                                  "element-by-element loop", "out="])
def test_writes_ptx(name: str) -> None:
    assemble_kernels(tracearray.compile(WRITE_PROGRAMS[name], device="cuda").lower(*_args()))


@pytest.mark.parametrize("name", ["stencil", "y[mask] = v (rows)", "y[:, mask] = v",
                                  "y[:, mask] = a value per row",
                                  "y += v, aliases", "y[m] = z[m], y[m] += 1, y[rows] *= 2"])
def test_writes_emulated_gpu(name: str, emulated_gpu) -> None:
    assert_matches_numpy(WRITE_PROGRAMS[name], *_args(), device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("name", sorted(WRITE_PROGRAMS))
def test_writes_cuda(name: str) -> None:
    assert_matches_numpy(WRITE_PROGRAMS[name], *_args(), device="cuda")


# ------------------------------------------------------------------------------------------
# Updating arguments in place
# ------------------------------------------------------------------------------------------

def _k_axpy(a, x, y):
    y += a * x


def _k_jacobi(u):
    u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def _k_rows(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i].max()


def _k_mask(x):
    x[x < 0] = 0
    x.T[0] = -1
    return x.sum()


def _k_out(x, o):
    np.exp(x, out=o)
    o *= 2


KERNELS = [(_k_axpy, lambda: (2.0, RNG.standard_normal((7, 5)), RNG.standard_normal((7, 5)))),
           (_k_jacobi, lambda: (RNG.standard_normal((6, 7)),)),
           (_k_rows, lambda: (RNG.standard_normal((5, 3)), np.zeros(5))),
           (_k_mask, lambda: (RNG.standard_normal((4, 6)),)),
           (_k_out, lambda: (RNG.standard_normal((3, 4)), np.zeros((3, 4))))]


def _layouts(a):
    """The same values as a C, a Fortran, a strided and a negative-stride array."""
    if not isinstance(a, np.ndarray) or a.ndim == 0:
        return [a] * 4
    big = np.zeros(tuple(2 * n for n in a.shape))
    strided = big[tuple(slice(None, None, 2) for _ in a.shape)]
    strided[...] = a
    rev = np.array(a[::-1])[::-1]
    return [a.copy(), np.asfortranarray(a), strided, rev]


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("fn,make", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_arguments_updated_in_place(fn, make, device, request) -> None:
    if device == "emulated":
        request.getfixturevalue("emulated_gpu")
    compiled = tracearray.compile(fn, device="cuda" if device == "emulated" else "cpu")
    args = make()
    for layout in range(4 if device == "cpu" else 1):
        ref = [_layouts(a)[layout] for a in args]
        got = [_layouts(a)[layout] for a in args]
        want = fn(*ref)
        result = compiled(*got)
        for g, w in zip(got, ref):
            np.testing.assert_allclose(g, w, rtol=1e-12)
        if want is not None:
            np.testing.assert_allclose(result, want, rtol=1e-12)


def _device_layout(a):
    """``a`` as a device array view of ``_layouts``' form (C, Fortran, strided, reversed): the
    memory of the NumPy layout's root array uploaded, then viewed with the same strides."""
    if not isinstance(a, np.ndarray) or a.ndim == 0:
        return a
    root = a
    while root.base is not None:
        root = root.base
    flat = tracearray.Array.from_numpy(np.frombuffer(root.tobytes(order="A"), np.uint8))
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return tracearray.Array(flat.ptr + offset, a.shape, a.dtype, a.strides, owner=flat)


@pytest.mark.parametrize("fn,make", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_device_arguments_updated_in_place_in_every_layout(fn, make, emulated_gpu) -> None:
    _check_device_layouts(fn, make)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("fn,make", KERNELS, ids=[k[0].__name__ for k in KERNELS])
def test_device_arguments_updated_in_place_in_every_layout_cuda(fn, make) -> None:
    _check_device_layouts(fn, make)


def _check_device_layouts(fn, make) -> None:
    """Device array arguments of every layout hold what NumPy leaves in them: updates the
    planner computes in place store through the view's strides; the others (a stencil, a
    loop of row writes) are computed into a temporary that a scatter kernel writes back
    through the strides (``gpu/copy.py``). The memory around a strided view is untouched."""
    compiled = tracearray.compile(fn, device="cuda")
    args = make()
    for layout in range(4):
        ref = [_layouts(a)[layout] for a in args]
        dev = [_device_layout(a) for a in ref]
        roots = [d._owner for d in dev if isinstance(d, tracearray.Array)]
        before = [r.numpy().copy() for r in roots]
        want = fn(*ref)
        result = compiled(*dev)
        for d, w in zip(dev, ref):
            if isinstance(d, tracearray.Array):
                np.testing.assert_allclose(d.numpy(), w, rtol=1e-12, err_msg=f"layout {layout}")
        if want is not None:
            got = result.numpy() if hasattr(result, "numpy") else result
            np.testing.assert_allclose(got, want, rtol=1e-12)
        for r, b, d, w in zip(roots, before, [d for d in dev if isinstance(d, tracearray.Array)],
                              [w for w in ref if isinstance(w, np.ndarray) and w.ndim]):
            # bytes outside the view are what they were (the view's own are checked above)
            mem = r.numpy()
            inside = np.zeros(mem.shape, bool)
            root = w
            while root.base is not None:
                root = root.base
            marks = np.zeros(root.nbytes, np.uint8)
            view = np.lib.stride_tricks.as_strided(
                marks[w.__array_interface__["data"][0] - root.__array_interface__["data"][0]:],
                w.shape + (w.itemsize,), w.strides + (1,))
            view[...] = 1
            inside |= marks.astype(bool)
            np.testing.assert_array_equal(mem[~inside], b[~inside])


def test_a_write_back_into_overlapping_device_elements_is_refused(emulated_gpu) -> None:
    """A zero-stride device view (every row the same memory) cannot hold what NumPy's
    sequential writes would leave: refused before the call as a NumPy argument of that
    layout is (InputError, the layout named), memory untouched."""
    from tracearray.errors import InputError
    jacobi = tracearray.compile(_k_jacobi, device="cuda")
    row = tracearray.Array.from_numpy(RNG.standard_normal(7))
    same = tracearray.Array(row.ptr, (6, 7), row.dtype, (0, 8), owner=row)
    before = row.numpy()
    with pytest.raises(InputError, match="elements share memory"):
        jacobi(same)
    np.testing.assert_array_equal(row.numpy(), before)


def test_global_array_updated_in_place() -> None:
    global STATE
    STATE = np.zeros(4)

    def step(x):
        STATE[...] = STATE * 0.5 + x
        return STATE.sum()

    f = tracearray.compile(step, device="cpu")
    ref = np.zeros(4)
    for k in range(3):
        x = np.full(4, float(k))
        ref = ref * 0.5 + x
        assert f(x) == pytest.approx(ref.sum())
    np.testing.assert_allclose(STATE, ref)


STATE = np.zeros(4)


# ------------------------------------------------------------------------------------------
# Errors and fusion
# ------------------------------------------------------------------------------------------

def test_write_errors_are_numpys() -> None:
    def too_long(x):
        y = x.copy()
        y[0] = x[:2]
    with pytest.raises(ValueError, match="could not broadcast"):
        tracearray.compile(too_long, device="cpu")(X)

    def overflow(x):
        y = x.astype(np.int8)
        y[0] = 300
    with pytest.raises(OverflowError):
        tracearray.compile(overflow, device="cpu")(X)

    def readonly(x):
        y = np.broadcast_to(x[0], (3, 5, 6))
        y[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        tracearray.compile(readonly, device="cpu")(X)

    def wrong_count(x):
        y = x.copy()
        y[y > 0] = np.arange(3.0)
    with pytest.raises(ValueError, match="cannot assign 3 input values"):
        tracearray.compile(wrong_count, device="cpu")(X)

    def reshaped_argument(x):
        x.reshape(-1)[0] = 1
    with pytest.raises(UnsupportedOperationError, match="memory layout"):
        tracearray.compile(reshaped_argument, device="cpu")(X.copy())


def test_long_loops_compile_and_huge_ones_stop_clearly(monkeypatch) -> None:
    def loop(x):
        out = np.zeros(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = x[i] * 2 + i
        return out
    x = RNG.standard_normal(600)
    np.testing.assert_allclose(tracearray.compile(loop, device="cpu")(x), loop(x))
    from tracearray.trace import context
    monkeypatch.setattr(context, "MAX_TRACE_OPS", 500)
    with pytest.raises(UnsupportedOperationError, match="grew past 500 operations"):
        tracearray.compile(loop, device="cpu")(x)


def test_elimination_loop_reading_earlier_steps_compiles() -> None:
    """An element-by-element elimination whose every step reads results of earlier steps
    through dot products (which need them stored): the planner once tried each update in
    earlier kernels by recomputing the stored chain behind it, a walk back to the start of
    the loop that passed Python's recursion limit at 10 x 10."""
    def eliminate(a):
        for i in range(1, a.shape[0]):
            for j in range(i):
                a[i, j] -= a[i, :j] @ a[j, :j]
                a[i, j] /= a[j, j]
        return a
    a = RNG.random((10, 10)) + 10 * np.eye(10)
    got = tracearray.compile(eliminate, device="cpu")(a.copy())
    np.testing.assert_allclose(got, eliminate(a.copy()), rtol=1e-12)


def _kernels(fn, *args) -> int:
    return len(tracearray.compile(fn, device="cpu").lower(*args).plan.kernels)


def test_writes_fuse_into_their_readers() -> None:
    assert _kernels(lambda x: _set(x, (slice(1, -1),), x[0] * 2) + 1, X) == 1
    assert _kernels(_stencil, *_args()) == 1
    assert _kernels(lambda x: _mset(x, x > 0, 0.0).sum(), X) == 1


# ------------------------------------------------------------------------------------------
# Random keys and values
# ------------------------------------------------------------------------------------------

def _item(draw, n):
    kind = draw(st.sampled_from(["slice", "int", "full"] if n else ["slice", "full"]))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind == "full":
        return slice(None)
    start = draw(st.none() | st.integers(-n - 1, n + 1))
    stop = draw(st.none() | st.integers(-n - 1, n + 1))
    step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2]))
    return slice(start, stop, step)


@st.composite
def _writes(draw):
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        key = tuple(_item(draw, n) for n in shape[:draw(st.integers(1, len(shape)))])
        op = draw(st.sampled_from(["=", "+=", "mask"]))
        steps.append((key, op, draw(st.floats(-3, 3, allow_nan=False))))
    view = draw(st.sampled_from(["none", "T", "slice"]))
    return shape, steps, view


@settings(max_examples=examples(60), deadline=None)
@given(_writes())
def test_random_writes(case) -> None:
    shape, steps, view = case
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) - 3

    def fn(a):
        y = a.copy()
        t = y.T if view == "T" else y[::-1] if view == "slice" else y
        for key, op, c in steps:
            if op == "mask":
                t[t > c] = c * 2
            elif op == "+=":
                t[key] += c
            else:
                t[key] = c
        return y

    try:
        want = fn(x)
    except (IndexError, ValueError) as e:
        with pytest.raises(type(e)):
            tracearray.compile(fn, device="cpu")(x)
        return
    np.testing.assert_array_equal(tracearray.compile(fn, device="cpu")(x), want)


def _device_array_update(device_ok: bool) -> None:
    def fn(u, v):
        u[1:] += v[:-1]
        v *= 2
        return u.sum()

    u0, v0 = RNG.standard_normal(9), RNG.standard_normal(9)
    ru, rv = u0.copy(), v0.copy()
    want = fn(ru, rv)
    du, dv = tracearray.Array.from_numpy(u0), tracearray.Array.from_numpy(v0)
    got = tracearray.compile(fn, device="cuda")(du, dv)
    np.testing.assert_allclose(du.numpy(), ru, rtol=1e-12)
    np.testing.assert_allclose(dv.numpy(), rv, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(got.numpy() if hasattr(got, "numpy") else got), want,
                               rtol=1e-12)


def test_device_array_arguments_updated_on_the_device_emulated(emulated_gpu) -> None:
    _device_array_update(True)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
def test_device_array_arguments_updated_on_the_device() -> None:
    _device_array_update(True)


def test_full_of_a_traced_value() -> None:
    assert_matches_numpy(lambda x: (np.full((4, 6), x[0, 0]), np.full(5, x.sum()),
                                    np.full((2, 2), x[1, 1, 1], dtype=np.int32)), X,
                         device="cpu")


def test_in_place_updates_write_the_argument_without_a_temporary() -> None:
    """``y += a * x`` and ``x[x < 0] = 0`` read the argument only at the element they write:
    their kernel writes the caller's memory itself (``Plan.in_place``, shown by explain());
    a stencil reads neighbours, so NumPy's temporary stays (the right-hand side first)."""
    axpy = tracearray.compile(_k_axpy, device="cpu")
    x, y = RNG.standard_normal((7, 5)), RNG.standard_normal((7, 5))
    plan = axpy.lower(2.0, x, y).plan
    assert list(plan.in_place.values()) == [plan.graph.inputs[plan.graph.input_names.index("y")]]
    assert "writes the argument 'y' in place" in str(axpy.explain(2.0, x, y))
    for yy in (y.copy(), np.asfortranarray(y), RNG.standard_normal((14, 10))[::2, ::-2]):
        want = yy + 2.0 * x
        out = axpy(2.0, x, yy)
        assert out is None
        np.testing.assert_array_equal(yy, want)
    jacobi = tracearray.compile(_k_jacobi, device="cpu")
    u = RNG.standard_normal((6, 7))
    assert not jacobi.lower(u).plan.in_place
    assert "in place" not in str(jacobi.explain(u))
    got, want = u.copy(), u.copy()
    jacobi(got)
    _k_jacobi(want)
    np.testing.assert_array_equal(got, want)
    mask = tracearray.compile(_k_mask, device="cpu")
    assert mask.lower(u).plan.in_place


def _strided_view(base: "tracearray.Array", step: int) -> "tracearray.Array":
    """A view of every ``step``-th column of a 2-D device array, reversed (the kind of view
    a CuPy or PyTorch slice hands in): negative and non-unit strides over the same memory."""
    rows, cols = base.shape
    item = base.dtype.itemsize
    n = -(-cols // step)
    last = base.ptr + (n - 1) * step * item
    return tracearray.Array(last, (rows, n), base.dtype, (base.strides[0], -step * item),
                            owner=base)


def test_gpu_in_place_updates_write_the_device_array_itself(emulated_gpu) -> None:
    """On the GPU too, ``y += a * x`` on a device array runs one kernel that writes y's own
    memory (``GpuExecutable.in_place``): no temporary, no device copy; through the strides of
    a reversed, strided view as well (which a copy back could not write); with NumPy data the
    device copy is updated and copied back. A stencil keeps its temporary and copy."""
    from tracearray.gpu import driver
    dev = driver.get_device()
    x, y = RNG.standard_normal((7, 10)), RNG.standard_normal((7, 10))
    axpy = tracearray.compile(_k_axpy, device="cuda")
    dx, dy = tracearray.Array.from_numpy(x), tracearray.Array.from_numpy(y)
    exe = axpy.lower(2.0, dx, dy).executable
    assert list(exe.in_place) and not any(n in exe.in_place for n in exe.produced)
    copies = []
    real_dtod = dev.dtod
    dev.dtod = lambda d, s, n: (copies.append(n), real_dtod(d, s, n))[1]
    try:
        for _ in range(2):   # the general path, then the warm (direct) path
            want = dy.numpy() + 2.0 * x
            launches = len(dev.launches)
            assert axpy(2.0, dx, dy) is None
            np.testing.assert_array_equal(dy.numpy(), want)
            assert len(dev.launches) - launches == 1 and not copies
        base = tracearray.Array.from_numpy(RNG.standard_normal((7, 20)))
        view = _strided_view(base, 2)
        before = base.numpy()
        want = view.numpy() + 2.0 * x
        axpy(2.0, dx, view)
        np.testing.assert_array_equal(view.numpy(), want)
        after = base.numpy()
        np.testing.assert_array_equal(after[:, 1::2], before[:, 1::2])   # the other columns
        assert not copies
    finally:
        dev.dtod = real_dtod
    host = y.copy()
    axpy(2.0, x, host)
    np.testing.assert_array_equal(host, y + 2.0 * x)
    u = RNG.standard_normal((6, 7))
    jacobi = tracearray.compile(_k_jacobi, device="cuda")
    du = tracearray.Array.from_numpy(u)
    assert not jacobi.lower(du).executable.in_place
    jacobi(du)
    _k_jacobi(u)
    np.testing.assert_array_equal(du.numpy(), u)
    mask = tracearray.compile(_k_mask, device="cuda")
    v = RNG.standard_normal((5, 6))
    dv = tracearray.Array.from_numpy(v)
    got = mask(dv)
    want = _k_mask(v)
    np.testing.assert_array_equal(dv.numpy(), v)
    np.testing.assert_allclose(float(got.numpy() if hasattr(got, "numpy") else got), want,
                               rtol=1e-12)


def test_in_place_update_keeps_reads_of_the_old_values_right() -> None:
    """A product of the argument's old values (an external matmul of its view) and an
    in-place update of it in one function: the product sees the old values."""
    def f(x, w):
        p = x.T @ w
        x += 1
        return p
    c = tracearray.compile(f, device="cpu")
    x, w = RNG.standard_normal((5, 4)), RNG.standard_normal((5, 3))
    got_x, want_x = x.copy(), x.copy()
    np.testing.assert_allclose(c(got_x, w), f(want_x, w), rtol=1e-12)
    np.testing.assert_array_equal(got_x, want_x)


@pytest.mark.parametrize("view", ["b", "b.T", "b[:, ::2]", "b.T[::-1]"])
def test_fortran_order_reshapes_and_ravels_are_views_where_numpys_are(view) -> None:
    # order='F' (C order on the reversed axes): a write through it reaches b exactly when
    # NumPy's F-order reshape or ravel of that view is a view
    def f(a):
        b = a.copy()
        v = eval(view)
        v.ravel(order="F")[3] = -1
        w = v.reshape(-1, 2, order="F")
        w[1, 1] = -2
        return b, w, v.flatten(order="F"), np.reshape(v, (2, -1), order="F")

    a = np.arange(24.0).reshape(4, 6)
    for got, want in zip(tracearray.compile(f, device="cpu")(a), f(a)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(tracearray.UnsupportedOperationError, match="'A' and 'K'"):
        tracearray.compile(lambda x: x.ravel(order="K"), device="cpu")(a)


def test_a_stencil_updated_in_a_loop_is_stored_before_its_inline_form_explodes() -> None:
    # each step reads the last at three positions, which a kernel cannot share: inline, six
    # steps were 3^6 loads per element in one kernel (14 s to compile), 20 steps never ended
    # (fuse/kexpr.py MAX_RECOMPUTED_AT stores such a value)
    def heat(u, steps):
        u = u.copy()
        for _ in range(steps):
            u[1:-1] = u[1:-1] + 0.2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u

    x = np.random.default_rng(0).random(50)
    f = tracearray.compile(heat, device="cpu", static_argnums=(1,))
    np.testing.assert_allclose(f(x, 20), heat(x, 20), rtol=1e-12)
    kernels = f.explain(x, 6).kernels
    assert len(kernels) > 1


@pytest.mark.parametrize("fn", [
    lambda v: np.clip(v, 0, 1, out=np.zeros((5, 6), np.int64)),
    lambda v: np.round(v, out=np.zeros((5, 6), np.int64)),
    lambda v: np.round((v * 100).astype(np.int64), -1, out=np.zeros((5, 6), np.int32)),
    lambda v: np.fix(v, out=np.zeros((5, 6), np.int64)),
    lambda v: np.concatenate([v, v], out=np.zeros((10, 6), np.int64)),
    lambda v: np.concatenate([v, v], out=np.zeros((11, 6))),
    lambda v: np.concatenate([v, v], out=np.zeros((10, 6)), dtype=np.float64),
    lambda v: np.stack([v, v], out=np.zeros((2, 5, 7))),
], ids=["clip same_kind", "round same_kind", "round ints into ints", "fix same_kind",
        "concatenate same_kind", "concatenate shape", "concatenate out and dtype",
        "stack shape"])
def test_function_out_errors_are_numpys(fn) -> None:
    """The out= refusals NumPy makes (casting, shapes, out with dtype), as its error types."""
    with pytest.raises(Exception) as expected:
        fn(V.copy())
    kind = TypeError if isinstance(expected.value, TypeError) else type(expected.value)
    assert kind in (TypeError, ValueError)
    with pytest.raises(kind):
        tracearray.compile(fn)(V.copy())


def test_function_out_into_an_argument_writes_it_back() -> None:
    def f(x, o):
        np.clip(x, -0.5, 0.5, out=o)
        np.concatenate([x[:2], x[3:]], out=x[1:])
        return o.sum()
    a, b = V.copy(), np.zeros((5, 6))
    c, d = V.copy(), np.zeros((5, 6))
    want = f(a, b)
    got = tracearray.compile(f)(c, d)
    np.testing.assert_allclose(got, want)
    np.testing.assert_array_equal(c, a)
    np.testing.assert_array_equal(d, b)


# ------------------------------------------------ large regions: written as joins

def _region_programs() -> dict[str, Callable]:
    """Writes of regions of at least buffers.JOIN_MIN_ELEMENTS into memory the function
    made: joined slabs (the new values computed over the region alone), not selects."""
    def stencil_step(u):
        u = u.copy()
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] +
                                               u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
        return u

    def overlapping(u):
        out = np.zeros_like(u)
        out[3:, :] = u[:-3, :] * 2           # whole rows (one axis cut)
        out[:-5, 10:] += u[5:, :-10]          # overlaps the first write
        out[..., :7] = -1.0                   # a scalar, then read back below
        return out, out[::2].sum(axis=0)

    def three_d(w):
        v = w.copy()
        v[1:, 2:-3, :] = np.sqrt(np.abs(w[:-1, 5:, :])) + v[1:, 2:-3, :]
        v[:, :, 4:9] = v[:, :, :5] * 0.5      # reads the first write's result
        return v

    def through_views(u):
        t = np.ones(u.shape[::-1])
        t.T[2:, 1:] = u[:-2, :-1]             # a region of a transposed view
        r = t.reshape(-1, 2)
        return t, r[10:].sum()

    def in_a_loop(u):
        for k in range(3):
            u = u.copy()
            u[k:, : u.shape[1] - k] = u[: u.shape[0] - k, k:] + k
        return u

    return {f.__name__: f for f in (stencil_step, overlapping, three_d, through_views,
                                    in_a_loop)}


REGION_PROGRAMS = _region_programs()


@pytest.mark.parametrize("name", sorted(REGION_PROGRAMS))
def test_large_region_writes_match_numpy(name):
    rng = np.random.default_rng(7)
    fn = REGION_PROGRAMS[name]
    arg = rng.standard_normal((9, 40, 23)) if name == "three_d" else \
        rng.standard_normal((83, 97))
    assert_matches_numpy(fn, arg, device="cpu")
    assert_matches_numpy(fn, arg[::-1, ::2] if arg.ndim == 2 else arg[:, ::-1], device="cpu")


def test_a_large_region_is_computed_over_the_region_alone():
    """The stencil's kernel runs over the region (81 x 95), not over the whole grid with a
    select and gathered reads; the rows around it are copies of their own."""
    u = np.random.default_rng(1).standard_normal((83, 97))
    report = tracearray.compile(REGION_PROGRAMS["stencil_step"], device="cpu").explain(u)
    spaces = [tuple(k.space) for k in report.kernels]
    assert (81, 97) in spaces and (83, 97) not in spaces, spaces


def test_a_gpu_trace_writes_a_large_region_with_one_select(emulated_gpu):
    """On a GPU the select kernel is faster than the join's launch per slab (H100,
    benchmarks/gpu_writes.py), so the GPU's trace of the stencil has no join: one kernel."""
    u = np.random.default_rng(1).standard_normal((83, 97))
    fn = REGION_PROGRAMS["stencil_step"]
    gpu = tracearray.compile(fn, device="cuda")
    assert len(gpu.lower(u).plan.kernels) == 1
    assert len(tracearray.compile(fn, device="cpu").lower(u).plan.kernels) > 1
    np.testing.assert_allclose(np.asarray(gpu(u)), fn(u), rtol=1e-12)


def test_writes_into_an_argument_stay_one_kernel_in_place():
    def update(a, b):
        a[:, 2:] = b[:, :-2] * 2
    a, b = np.ones((100, 100)), np.arange(1e4).reshape(100, 100)
    compiled = tracearray.compile(update, device="cpu")
    assert len(compiled.explain(a, b).kernels) == 1
    want = a.copy()
    update(want, b)
    compiled(a, b)
    np.testing.assert_array_equal(a, want)


def _flat_programs() -> dict[str, Callable]:
    def fill_short(x):
        y = x.copy()
        np.fill_diagonal(y, np.array([1.0, 2.0]))
        return y

    def fill_long_wrapped(x):
        y = x.copy()
        np.fill_diagonal(y, np.arange(10.0), wrap=True)
        return y

    def flat_strided_short(x):
        y = x.copy()
        y.flat[::2] = np.array([1.0, 2.0])
        return y

    def flat_positions(x):
        y = x.copy()
        y.flat[[0, 1, 2, 5]] = x[0, :2] * 3
        return y

    def flat_attribute(x):
        y = x.copy()
        y.flat = np.arange(4.0).reshape(2, 2)
        return y

    return {f.__name__: f for f in (fill_short, fill_long_wrapped, flat_strided_short,
                                    flat_positions, flat_attribute)}


FLAT_PROGRAMS = _flat_programs()


@pytest.mark.parametrize("name", sorted(FLAT_PROGRAMS))
@pytest.mark.parametrize("shape", [(4, 4), (7, 3), (3, 7)])
def test_flat_writes_repeat_short_values(name, shape):
    """x.flat[k] = v (and np.fill_diagonal, which NumPy writes that way, and x.flat = v)
    takes v's values flattened and repeated over the places, extra ones ignored; they were
    broadcast, a ValueError for any other length."""
    x = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    assert_matches_numpy(FLAT_PROGRAMS[name], x, device="cpu")


def test_a_tuple_of_traced_values_is_assigned_as_numpy_converts_it():
    # hist[d] = S, I in a simulation loop; np.add.at with a tuple of values (probe session 4)
    def record(a, b, x):
        hist = np.zeros((2, 2))
        hist[0] = a, b
        h = np.zeros(3)
        np.add.at(h, [0, 2], (x[0], x[1]))
        return hist, h

    args = (np.float64(1.5), np.float64(2.5), np.array([1.0, 2.0]))
    got = tracearray.compile(record, device="cpu")(*args)
    for g, w in zip(got, record(*args)):
        np.testing.assert_array_equal(g, w)


def test_in_place_ops_on_a_boolean_selection_follow_same_kind_casting():
    # a[m] += 2.5 on an int array is NumPy's UFuncTypeError (a copy updated in place), not a
    # truncated write into the argument (probe session 5)
    def add_float(a, m):
        a[m] += 2.5
        return a

    a = np.arange(6, dtype=np.int8)
    m = np.array([True, False] * 3)
    with pytest.raises(TypeError, match="same_kind"):
        tracearray.compile(add_float, device="cpu")(a, m)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.int8))

    def ops(a, m):
        a[m] += 2
        a[m] *= 3
        a[a > 5] -= 1
        a[~m] //= 2
        return a
    assert_matches_numpy(ops, np.arange(6, dtype=np.int8), m, device="cpu")


def _same_as_numpy(fn, *args):
    """The compiled fn's result and written arguments, or its exception type, are NumPy's."""
    import copy
    a1, a2 = copy.deepcopy(args), copy.deepcopy(args)
    try:
        want, werr = fn(*a1), None
    except Exception as e:   # noqa: BLE001
        want, werr = None, type(e)
    if werr is not None:
        with pytest.raises(werr):
            tracearray.compile(fn, device="cpu")(*a2)
        return
    got = tracearray.compile(fn, device="cpu")(*a2)
    np.testing.assert_array_equal(got, want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    for x, y in zip(a1, a2):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("fn,out", [
    (lambda x, o: np.sum(x, axis=0, out=o), np.zeros((3, 4))),
    (lambda x, o: np.sum(x, out=o), np.zeros(3)),
    (lambda x, o: np.add.reduce(x, axis=None, keepdims=True, out=o), np.zeros((3, 1))),
    (lambda x, o: np.cumsum(x, axis=0, out=o), np.zeros((4, 3))),
    (lambda x, o: np.argmax(x, axis=0, out=o), np.zeros((3, 4), np.int64)),
    (lambda x, o: np.std(x, axis=0, out=o), np.zeros((3, 4))),
    (lambda x, o: np.mean(x, axis=0, out=o), np.zeros(4)),
    (lambda x, o: np.cumsum(x, out=o), np.zeros(12)),
    (lambda x, o: np.maximum.reduce(x, axis=1, out=o), np.zeros(3)),
    (lambda x, o: np.maximum.reduce(x.astype(np.float32), axis=1, out=o), np.zeros(3)),
    (lambda x, o: np.logical_or.reduce(x > 3, axis=1, out=o), np.zeros(3, bool)),
    (lambda x, o: np.bitwise_or.reduce(x.astype(np.int64), axis=1, out=o), np.zeros(3, np.int64)),
    (lambda x, o: np.maximum.accumulate(x[0], axis=None, out=o), np.zeros(4)),
], ids=["sum-ndim", "sum-all", "reduce-keepdims", "cumsum-shape", "argmax-ndim", "std-ndim",
        "mean", "cumsum-flat", "maximum-reduce", "maximum-reduce-cast", "logical-or-reduce",
        "bitwise-or-reduce", "accumulate-axis-none"])
def test_reduction_out_of_another_shape_raises_and_reduce_out_of_any_ufunc(fn, out):
    """(index probe, sixteenth session) A reduction's or scan's out= of another shape was
    filled by broadcasting where NumPy raises (the caller's array was written);
    maximum / logical_or / bitwise_or .reduce(out=) were refused as 'max(dtype=...)'."""
    _same_as_numpy(fn, np.arange(12.0).reshape(3, 4), out)


@pytest.mark.parametrize("i,v", [([0, 4, 5], [1.0, 2.0]), ([], [1.0, 2.0]),
                                 ([[1, 2], [3, 0]], [9.0, 8.0, 7.0]), ([0, 1, 2, 3, 4], [5.0])])
def test_flat_assignment_at_an_index_array_repeats_the_values(i, v):
    def f(x, i, v):
        x.flat[i] = v
        return x
    _same_as_numpy(f, np.zeros((2, 3)), np.array(i, dtype=np.int64), np.array(v))


@pytest.mark.parametrize("fn,x,i", [
    (lambda x, i: np.insert(x, i, 7.0), np.arange(5.0), [3, 1, 3, -1, 5]),
    (lambda x, i: np.insert(x, i, [7.0, 8.0]), np.arange(5.0), [4, 0]),
    (lambda x, i: np.insert(x, i, [9, 10, 11]), np.arange(5.0), np.int64(-2)),
    (lambda x, i: np.insert(x, i, 0.5, axis=1), np.arange(12.0).reshape(3, 4), [0, 4, 2]),
    (lambda x, i: np.insert(x, i, [[1], [2], [3]], axis=1), np.arange(12.0).reshape(3, 4),
     np.int64(1)),
    (lambda x, i: np.insert(x, i, 7.0), np.arange(5.0), [6]),
    (lambda x, i: np.insert(x, i, 7.0), np.zeros(0), [0, 0]),
    (lambda x, i: np.insert(x, i, 7.0), np.arange(5.0), np.array([], np.int64)),
    (lambda x, i: np.insert(x, i, 5), np.arange(6).reshape(2, 3), [1, 5]),
])
def test_insert_at_positions_the_data_decides(fn, x, i):
    """(index probe, sixteenth session) np.insert at an index-array argument was refused
    ('the result size would depend on the data'): its size is known, its order NumPy's."""
    _same_as_numpy(fn, x, np.asarray(i, dtype=np.int64))


def test_delete_at_an_index_array_out_of_an_empty_axis_raises():
    _same_as_numpy(lambda x, i: np.delete(x, i), np.zeros(0), np.array([3]))
    _same_as_numpy(lambda x, i: np.delete(x, i), np.arange(3.0), np.array([2, -3]))


@pytest.mark.parametrize("fn,x,i", [
    (lambda x, i: np.insert(x, i, [7, 8, 9]), np.arange(5), [1]),
    (lambda x, i: np.insert(x, i, [[1, 2, 3]], axis=1), np.arange(6).reshape(3, 2), [1]),
    (lambda x, i: np.insert(x, i, [1, 2], axis=0), np.arange(6).reshape(3, 2), [2]),
    (lambda x, i: np.insert(x, i, 5, axis=0), np.arange(6).reshape(3, 2), [[2]]),
])
def test_insert_at_one_position_of_a_list(fn, x, i):
    """NumPy inserts all the values at a one-element position list (a size-1 position is
    its scalar case, without moving the values' first axis)."""
    _same_as_numpy(fn, x, np.asarray(i, dtype=np.int64))
    _same_as_numpy(lambda x: fn(x, i), x)


@pytest.mark.parametrize("name", ["ptp", "nanmean", "nanmax", "nanmin", "nanstd", "nanvar",
                                  "median", "nanmedian", "nancumsum", "nancumprod",
                                  "percentile", "nanquantile"])
def test_out_of_numpys_own_reductions(name):
    """(changes probe, sixteenth session) out= of np.ptp, the nan* functions, median and the
    quantiles was refused: computed, then stored as NumPy stores it (shape checked)."""
    fn = getattr(np, name)
    x = np.arange(12.0).reshape(3, 4)
    x[1, 1] = np.nan
    q = (0.5,) if name in ("percentile", "nanquantile") else ()
    outs = [np.zeros((3, 4)), np.zeros(4)] if "cum" in name else \
        [np.zeros(4), np.zeros(3), np.zeros(4, np.float32)]
    for o in outs:
        with np.errstate(all="ignore"):
            _same_as_numpy(lambda x, o: fn(x, *q, axis=0, out=o), x, o)


def test_nan_reductions_into_an_integer_out_raise_as_numpy():
    x = np.arange(12.0).reshape(3, 4)
    for fn in (np.nanmean, np.nanstd, np.nanvar):
        _same_as_numpy(lambda x, o, fn=fn: fn(x, axis=0, out=o), x, np.zeros(4, np.int64))
    _same_as_numpy(lambda x, o: np.nanquantile(x, 0.5, axis=0, out=o), x, np.zeros(4, np.int64))


def test_place_and_putmask_cast_array_values_safely_and_flat_masks_cycle():
    """np.place / np.putmask take array values only where NumPy's safe cast allows (complex
    into real, int64 into complex64 raise: the imaginary parts were dropped and the values
    rounded); x.flat[mask] = v cycles v over the mask's places, as NumPy does (it was
    refused)."""
    def putmask(x, m, v):
        np.putmask(x, m, v)
        return x

    def place(x, m, v):
        np.place(x, m, v)
        return x

    m = np.array([True, False, True])
    for fn, args in ((putmask, (np.zeros(3), m, np.array([1 + 2j, 3 + 4j]))),
                     (place, (np.zeros(3, np.complex64), m, np.array([2**40 + 1, 3])))):
        with pytest.raises(TypeError, match="rule 'safe'"):
            fn(*[a.copy() for a in args])
        with pytest.raises(TypeError, match="rule 'safe'"):
            tracearray.compile(fn)(*[a.copy() for a in args])
    for fn, args in ((putmask, (np.zeros(3, complex), m, np.array([1.0, 2.0]))),
                     (place, (np.zeros(3, complex), m, np.array([1 + 1j, 2j])))):
        np.testing.assert_array_equal(tracearray.compile(fn)(*[a.copy() for a in args]),
                                      fn(*[a.copy() for a in args]))

    def flat_data(x):
        x.flat[x.ravel() > 0] = np.array([1.0, 2.0])
        return x

    def flat_constant(x):
        x.flat[np.array([True, False] * 6)] = np.array([7.0, 8.0, 9.0])
        return x

    def flat_argument(x, mask):
        x.flat[mask] = [5.0]
        return x

    for fn, args in ((flat_data, (np.arange(12.0).reshape(3, 4) - 5,)),
                     (flat_constant, (np.arange(12.0).reshape(3, 4),)),
                     (flat_argument, (np.arange(6.0).reshape(2, 3),
                                      np.array([True, False, True, False, False, True])))):
        np.testing.assert_array_equal(tracearray.compile(fn)(*[a.copy() for a in args]),
                                      fn(*[a.copy() for a in args]))


def test_place_values_and_flat_masks_follow_numpys_casts():
    """np.putmask / np.place refuse a 0-d complex array (an array, cast safely) and a Python
    complex into a real target, and take NumPy scalars; x.flat[mask] = v casts v unsafely
    (floats into an int array) and does nothing for no values, as NumPy's flat
    assignment."""
    def putmask(x, m, v):
        np.putmask(x, m, v)
        return x

    m = np.array([True, False, True])
    for v in (np.array(7 + 2j, np.complex64), 7.5 + 2j):
        with pytest.raises(TypeError):
            putmask(np.zeros(3), m, v)
        with pytest.raises(TypeError):
            tracearray.compile(putmask)(np.zeros(3), m, v)
    for v in (np.complex64(7 + 2j), np.float32(2.5)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_array_equal(tracearray.compile(putmask)(np.zeros(3), m, v),
                                          putmask(np.zeros(3), m, v))

    def flat(x):
        x.flat[x.ravel() > 2] = np.array([1.7, 2.2])
        return x

    def flat_none(x):
        x.flat[x.ravel() > 2] = np.array([])
        return x

    for fn in (flat, flat_none):
        np.testing.assert_array_equal(tracearray.compile(fn)(np.arange(6)), fn(np.arange(6)))
