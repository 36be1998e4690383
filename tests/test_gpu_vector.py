"""Vector loads and stores in GPU sweeps (gpu/vector.py) and warp-per-row reductions.

Every kernel that can move whole 16-byte vectors has a vector path and the scalar path it
falls back to when an access is misaligned or a row length is not a multiple of the lanes;
both must give NumPy's result. Under the SIMT emulator (host memory, the kernels' own IR)
and, with ``-m gpu``, on the GPU, each case below runs aligned (base arrays: the vector path
with its scalar tail) and through views that start one element in or have odd rows (the
scalar path), at sizes around the lane count. The PTX checks that the vector instructions
are there at all.
"""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from gpu_emulator import EmulatedDevice
from numpy_compare import assert_matches
from tracearray.gpu import driver
from tracearray.tile.gpu import THREAD_ROW_MAX, WARP_ROW_MAX, gpu_strategy

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


_NO_GPU = "needs an NVIDIA GPU, its driver and cuda-bindings (pip install 'tracearray[cuda]')"


@pytest.fixture(autouse=True, params=[
    "emulated",
    pytest.param("cuda", marks=[pytest.mark.gpu,
                                pytest.mark.skipif(not driver.is_available(), reason=_NO_GPU)])])
def device(request):
    """Every test under the SIMT emulator, and (``-m gpu``) on the GPU."""
    if request.param == "cuda":
        yield None
        return
    dev = EmulatedDevice()
    prev = driver.set_device_for_testing(dev)
    yield dev
    driver.set_device_for_testing(prev)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def check(fn, *args, family="fused"):
    got = tracearray.compile(fn, device="cuda")(*args)
    want = fn(*args)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            assert_matches(g, w, family)
    else:
        assert_matches(got, want, family)


def ptx(fn, *args) -> str:
    return tracearray.compile(fn, device="cuda").lower(*args).as_text("ptx")


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.8 * (x + 0.044715 * x * x * x)))


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 8, 1023, 1029])
@pytest.mark.parametrize("offset", [0, 1, 2])
def test_maps_vector_and_scalar_paths(n: int, offset: int) -> None:
    base = rng(n).standard_normal(n + offset).astype(np.float32)
    x = base[offset:]          # offset 1, 2: 4- and 8-byte aligned, not 16: the scalar path
    y = (rng(n + 1).standard_normal(n + offset).astype(np.float32))[offset:]
    check(gelu, x)
    check(lambda a, b: (a * b + 1.0, a - b, np.maximum(a, b)), x, y)   # three vector stores
    check(lambda a, b: a + b, x, np.float32(2.5))                        # a broadcast scalar


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8", "int64", "bool", "uint16"])
def test_maps_of_every_width(dtype: str) -> None:
    x = (rng(1).standard_normal(1031) * 50).astype(dtype)
    y = (rng(2).standard_normal(1031) * 50).astype(dtype)
    if dtype == "bool":
        check(lambda a, b: a ^ b, x, y, family="exact")
        check(lambda a, b: (a & b, ~a), x[1:], y[1:], family="exact")
    else:
        check(lambda a, b: a * b + a, x, y)
        check(lambda a, b: a - b, x[1:], y[1:])
    check(lambda a: a.astype(np.float32) * 2, x)       # mixed widths: lanes of the widest


@pytest.mark.parametrize("cols", [8, 9, 12])
def test_two_dimensional_maps_and_broadcast_rows(cols: int) -> None:
    x = rng(3).standard_normal((37, cols)).astype(np.float32)
    w = rng(4).standard_normal(cols).astype(np.float32)
    check(lambda a, b: a * b + 1.0, x, w)         # a row broadcast down the matrix
    check(lambda a: a[:, 1:] * 2, x)              # a view of odd rows: the scalar path
    check(lambda a: a[::2] - 1, x)                # every other row: strides a multiple


@pytest.mark.parametrize("shape", [(7, 33), (5, 64), (9, 130), (4, 1024), (3, 1028), (2, 4100)])
def test_row_reductions_vector_and_scalar_paths(shape) -> None:
    x = rng(5).standard_normal(shape).astype(np.float32)
    g = rng(6).standard_normal(shape[1]).astype(np.float32)

    def layernorm(a, w):
        m = a.mean(-1, keepdims=True)
        c = a - m
        return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * w

    def l2(a):
        return a / np.maximum(np.sqrt((a * a).sum(-1, keepdims=True)), 1e-12)

    for args in ((x, g), (x[:, 1:], g[1:])):     # aligned rows; rows starting one element in
        check(layernorm, *args)
        check(l2, args[0])
        check(lambda a: (np.argmax(a, -1), a.max(-1), a.min(-1)), args[0])
        check(lambda a: np.exp(a - a.max(-1, keepdims=True))
              / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True), args[0])


def test_row_reductions_of_integers_and_bools() -> None:
    x = rng(7).integers(-100, 100, (9, 260)).astype(np.int16)
    check(lambda a: (a.sum(-1), a.max(-1), (a > 0).any(-1), (a > -100).all(-1)), x,
          family="exact")
    d = rng(8).standard_normal((6, 200))
    check(lambda a: a - a.mean(-1, keepdims=True), d)     # float64: two lanes


@pytest.mark.parametrize("n", [1, 5, 4096, 100003])
def test_full_reductions_vector_and_scalar_paths(n: int) -> None:
    x = rng(9).uniform(1, 5, n + 1).astype(np.float32)
    for a in (x[:n], x[1:]):
        check(lambda v: (v.mean(), ((v - v.mean()) ** 2).mean(), v.max(), np.argmin(v)), a)


def test_vector_instructions_in_the_ptx() -> None:
    x = np.ones(1000, np.float32)
    text = ptx(gelu, x)
    assert "ld.global.v4" in text and "st.global.v4" in text
    assert "ld.global.v2.f64" in ptx(lambda a: a * 2, np.ones(10)) or \
        "ld.global.v2.b64" in ptx(lambda a: a * 2, np.ones(10))
    def l2(a):
        return a / np.sqrt((a * a).sum(-1, keepdims=True))
    short = ptx(l2, np.ones((8, 128), np.float32))       # warp_row: shuffles, no barrier
    assert "shfl.sync" in short and "bar.sync" not in short
    long = ptx(l2, np.ones((8, 4096), np.float32))       # block_row: vectors and barriers
    assert "ld.global.v4" in long and "bar.sync" in long


def test_row_strategies_by_row_length() -> None:
    """Rows of up to THREAD_ROW_MAX elements run a thread per row, up to WARP_ROW_MAX a warp
    per row (shuffles only), longer ones a block per row."""

    class Geo:   # the only fields gpu_strategy reads for rows
        strategy = "row"
        kernel = None
    assert gpu_strategy(Geo(), THREAD_ROW_MAX, 10) == "thread_row"
    assert gpu_strategy(Geo(), THREAD_ROW_MAX + 1, 10) == "warp_row"
    assert gpu_strategy(Geo(), WARP_ROW_MAX, 10) == "warp_row"
    assert gpu_strategy(Geo(), WARP_ROW_MAX + 1, 10) == "block_row"
