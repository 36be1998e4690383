"""Caches of the CPU backend, observed through ``f.stats`` and the JIT's compile counter.

ARCHITECTURE.md decision 3: kernels are keyed by structure, never by sizes. A second call with
the same signature neither re-traces nor builds an executable; a call with new sizes re-traces
(cheap) and builds a new executable but compiles no new kernel; new strides may compile a new
variant; a static argument is part of the trace key, and a scalar constant is a kernel
argument (a new value compiles nothing).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pytest

import tracearray
from numpy_compare import assert_matches, assert_tree_matches
from tracearray.cpu.jit import get_jit
from tracearray.errors import InputError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@contextmanager
def compiles(expected: int | None = None, at_most: int | None = None) -> Iterator[list[int]]:
    """Count the modules the JIT compiles inside the block (kernels: the pool's native
    helpers, a module built at the first call that runs a kernel on them, are built first)."""
    from tracearray.cpu import team
    team.get()
    jit = get_jit()
    before = jit.modules_compiled
    count = [0]
    yield count
    count[0] = jit.modules_compiled - before
    if expected is not None:
        assert count[0] == expected, f"compiled {count[0]} new kernel module(s), expected {expected}"
    if at_most is not None:
        assert count[0] <= at_most, f"compiled {count[0]} new kernel module(s), at most {at_most}"


def stats(f: Any) -> tuple[int, int, int]:
    return f.stats.traces, f.stats.executables, f.stats.calls


def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def mixed(x, y):
    """A map, a full reduction, a column reduction, a scan and a shifted slice."""
    return (np.tanh(x) * y + 1, (x * y).sum(), x.max(axis=0), np.cumsum(y, axis=-1),
            x[:, 2:] - x[:, :-2], x.argmax(axis=-1))


def _ref(fn, *args):
    with np.errstate(all="ignore"):
        return fn(*args)


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("fn, make_args", [
    (softmax, lambda m, n: (_f32(m, n),)),
    (layernorm, lambda m, n: (_f32(m, n), _f32(n, seed=1), _f32(n, seed=2))),
    (mixed, lambda m, n: (_f32(m, n), _f32(m, n, seed=3))),
], ids=["softmax", "layernorm", "mixed"])
def test_same_signature_neither_retraces_nor_rebuilds(fn, make_args) -> None:
    f = tracearray.compile(fn)
    args = make_args(9, 17)
    f(*args)
    assert stats(f) == (1, 1, 1)
    with compiles(expected=0):
        for seed in range(3):   # same shapes, dtypes and strides, other data
            other = tuple(a + np.float32(seed) for a in args)
            got = f(*other)
            assert_tree_matches(got, _ref(fn, *other), "fused")
    assert stats(f) == (1, 1, 4)


@pytest.mark.parametrize("fn, make_args", [
    (softmax, lambda m, n: (_f32(m, n),)),
    (layernorm, lambda m, n: (_f32(m, n), _f32(n, seed=1), _f32(n, seed=2))),
    (mixed, lambda m, n: (_f32(m, n), _f32(m, n, seed=3))),
], ids=["softmax", "layernorm", "mixed"])
def test_new_sizes_retrace_but_compile_no_kernel(fn, make_args) -> None:
    """Sizes are kernel arguments. (Sizes stay away from 1: a dimension of size 1 changes
    broadcasting, so the plan.)"""
    f = tracearray.compile(fn)
    f(*make_args(9, 17))
    sizes = [(10, 17), (9, 33), (127, 1025), (2000, 9), (13, 4099)]
    with compiles(expected=0):
        for i, (m, n) in enumerate(sizes):
            args = make_args(m, n)
            assert_tree_matches(f(*args), _ref(fn, *args), "fused")
            assert stats(f) == (2 + i, 2 + i, 2 + i)


def test_new_sizes_of_elementwise_programs_of_any_rank() -> None:
    """A contiguous N-d elementwise kernel is one flat loop whatever its shape (size-1 dims
    are dropped, contiguous dims merged): (40, 30), (2, 1, 3, 4) and (1000,) share one kernel.
    A single element (every dim of size 1, or 0-d) is a loop-less kernel of its own."""
    f = tracearray.compile(lambda x, y: np.exp(x) * y - 1)
    f(_f32(7, 5), _f32(7, 5))
    with compiles(expected=0):
        for shape in ((40, 30), (2, 1, 3, 4), (1000,), (3, 3, 3)):
            x, y = _f32(*shape), _f32(*shape, seed=1)
            assert_matches(f(x, y), np.exp(x) * y - 1, "fused")
    with compiles(at_most=1):
        for shape in ((1,), (1, 1), (), (1, 1, 1)):
            x, y = _f32(*shape), _f32(*shape, seed=1)
            assert_matches(f(x, y), np.exp(x) * y - 1, "fused")


def test_transposed_input_may_compile_a_variant_once() -> None:
    """New strides build a new executable and may compile a new variant (a transposed tile),
    but a third layout with the same structure reuses it."""
    f = tracearray.compile(lambda x, y: x + y * 2)
    a, b = _f32(64, 48), _f32(64, 48, seed=1)
    f(a, b)
    with compiles(at_most=1):
        at = np.ascontiguousarray(a.T).T   # Fortran-ordered x: read transposed
        assert_matches(f(at, b), a + b * 2)
    assert stats(f)[:2] == (1, 2)
    with compiles(expected=0):
        a2 = np.ascontiguousarray(_f32(100, 70).T).T
        b2 = _f32(100, 70, seed=4)
        assert_matches(f(a2, b2), a2 + b2 * 2)
        assert_matches(f(at, b), a + b * 2)     # the cached executable again
    assert stats(f) == (2, 3, 4)


def test_small_transposed_inputs_share_one_kernel() -> None:
    """Only strides 0 and 1 (and the built-in extents of tiny nested reductions) are built
    into the code: a transposed input with few rows, whose stride along the vector loop is its
    row count, compiles one kernel for every row count."""
    f = tracearray.compile(lambda x: x.T * 2)
    with compiles(at_most=2):   # the general transposed kernel (and at most one map variant)
        for rows in range(2, 12):
            x = _f32(rows, 50)
            assert_matches(f(x), x.T * 2)
    with compiles(expected=0):   # all of them are cached now
        for rows in range(2, 12):
            x = _f32(rows, 77)
            assert_matches(f(x), x.T * 2)


def test_static_arguments() -> None:
    """A static argument is part of the trace key; its value as a scalar constant is a kernel
    argument, so a new value re-traces but compiles nothing (unless it changes the program's
    structure or dtypes)."""
    def scale_shift(x, a, b):
        return x * a + b

    f = tracearray.compile(scale_shift, static_argnums=(1, 2))
    x = _f32(33, 7)
    f(x, 2.0, 1.0)
    assert stats(f) == (1, 1, 1)
    f(x, 2.0, 1.0)
    assert stats(f) == (1, 1, 2)
    with compiles(expected=0):
        for a, b in ((3.0, -1.0), (0.5, float("nan")), (-0.0, float("inf"))):
            assert_matches(f(x, a, b), x * a + b)
    assert stats(f) == (4, 4, 5)
    with compiles(at_most=2):   # a Python int is weak too: same float32 loop, same kernel
        assert_matches(f(x, 3, 2), x * 3 + 2)
    f(x, 3.0, -1.0)   # seen before: a NaN key hits too
    f(x, 0.5, float("nan"))
    assert f.stats.traces == 5

    @tracearray.compile(static_argnames=("axis",))
    def total(x, axis):
        return x.sum(axis=axis)

    with compiles(at_most=2):
        for axis in (0, 1, 0, 1):
            assert_matches(total(x, axis=axis), x.sum(axis=axis), "reduction",
                           scale=np.abs(x.astype(np.float64)).sum(axis=axis), n=x.shape[axis])
    assert total.stats.traces == 2


def test_lower_and_explain_do_not_run_or_recompile() -> None:
    f = tracearray.compile(softmax)
    x = _f32(5, 9)
    f(x)
    with compiles(expected=0):
        f.lower(x)
        f.explain(x)
    assert stats(f) == (1, 1, 1)


def test_kernels_are_shared_between_functions_with_the_same_program() -> None:
    """Kernels are cached by their IR text, process-wide: a second function with the same
    body and name compiles nothing while the first one lives (machine code no function
    uses any more is freed: see test_reliability_runtime.py)."""
    def body(x):
        return np.sqrt(np.abs(x)) + x.mean(axis=0)

    f = tracearray.compile(body)
    f(_f32(6, 7))
    g = tracearray.compile(body)
    with compiles(expected=0):
        x = _f32(60, 70)
        assert_matches(g(x), np.sqrt(np.abs(x)) + x.mean(axis=0), "fused")


def test_pytree_and_keyword_arguments() -> None:
    @tracearray.compile
    def f(params, x, *, scale):
        return params["w"] * x + params["b"] * scale

    p = {"w": _f32(4, 5), "b": _f32(5, seed=1)}
    x, s = _f32(4, 5, seed=2), np.float32(3)
    f(p, x, scale=s)
    with compiles(expected=0):
        f(p, x, scale=s)
        p2 = {"w": _f32(40, 5), "b": _f32(5, seed=1)}
        assert_matches(f(p2, _f32(40, 5), scale=s), p2["w"] * _f32(40, 5) + p2["b"] * s)
    assert f.stats.traces == 2


def test_regression_scalar_arguments_of_equal_value_but_other_type_or_sign() -> None:
    """api: the trace key held Python scalars by value, and ``1 == 1.0 == True``, ``0.0 ==
    -0.0``: after ``f(x_int8, 1)``, ``f(x_int8, 1.0)`` reused the int8 trace (NumPy: float64),
    and ``f(x, 0.0)`` after ``f(x, -0.0)`` returned -0.0s. Non-static scalars (pytree
    constants) and static arguments alike."""
    x8 = np.arange(3, dtype=np.int8)
    add = tracearray.compile(lambda x, a: x + a)
    for a in (1, 1.0, True, 1, 1.0):
        assert_matches(add(x8, a), x8 + a)
    assert add.stats.traces == 3
    first = tracearray.compile(lambda x, t: x * t[0])
    for t in ((2,), (2.0,), [2.0]):
        assert_matches(first(x8, t), x8 * t[0])
    scale = tracearray.compile(lambda x, a: x * a, static_argnums=1)
    ones = np.ones(4, np.float32)
    for a in (-0.0, 0.0, -0.0, np.float32(-0.0), np.float32(0.0)):
        assert_matches(scale(ones, a), ones * a)
    assert scale.stats.traces == 4


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_calls_keep_no_reference_to_inputs_or_outputs(device: str) -> None:
    """Results die with the caller's last reference, without the cyclic GC.

    Regression: with device="auto" on a machine without a GPU, every call re-raised one stored
    GpuUnavailableError, chaining the caller's frames (and the arrays in them) onto its
    traceback; outputs piled up until a GC pass, the heap grew by one output per call and each
    call paid fresh page faults (l2_normalize: 12 ms instead of 1 ms)."""
    import gc
    import weakref

    f = tracearray.compile(lambda x: x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True)),
                           device=device)
    x = np.linspace(0.5, 1.5, 4 * 33, dtype=np.float32).reshape(4, 33)
    f(x)
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            arg = x.copy()
            out = f(arg)
            refs = [weakref.ref(out), weakref.ref(arg)]
            del out, arg
            assert [r() for r in refs] == [None, None], "a call kept its input or output alive"
    finally:
        gc.enable()


def test_repeat_calls_with_other_array_kinds_of_the_same_signature(tmp_path: Any) -> None:
    """The plain-array call path (keyed by shape, dtype, strides) must not serve calls whose
    arrays need the general path: misaligned data, ndarray subclasses (np.memmap is taken,
    the others refused)."""
    f = tracearray.compile(lambda x: x * 2 + 1, device="cpu")
    x = np.arange(257, dtype=np.float64)
    assert_matches(f(x), x * 2 + 1)
    raw = np.zeros(257 * 8 + 1, dtype=np.uint8)
    misaligned = raw[1:].view(np.float64)
    misaligned[:] = x[::-1]
    assert not misaligned.flags.aligned
    assert_matches(f(misaligned), x[::-1] * 2 + 1)
    assert_matches(f(x), x * 2 + 1)
    m = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=x.shape)
    m[:] = x - 1
    assert_matches(f(m), (x - 1) * 2 + 1)
    with pytest.raises(InputError, match="MaskedArray"):
        f(np.ma.masked_array(x, mask=x > 100))
    with compiles(expected=0):
        for _ in range(3):
            assert_matches(f(x + 1), (x + 1) * 2 + 1)
    assert f.stats.calls == 7
