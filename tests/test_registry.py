"""Every entry of the op registry -- primitives and composites alike -- against NumPy.

The cases come from the registry itself (``tracearray.trace.registry``): each composite's test
calls (NumPy source with ``{0}``, ``{1}`` for its arrays) and each ufunc primitive called by its
NumPy name. Inputs are drawn from the entry's dtypes, value class and ranks, with the awkward
sides of ``tracearray.testing`` (0, 1, odd sizes past vector and tile widths), NaN, infinities,
signed zeros and integer extremes, in random memory layouts; each case is compared with
``assert_matches_numpy`` (exact where NumPy is exact, the tolerance table elsewhere, NumPy's
errors mirrored).

- ``test_entry_cpu``: every case, compiled for the CPU (``EXAMPLES`` draws each);
- ``test_entry_ptx``: every case lowered for the GPU, every kernel assembled by ptxas (sm_90);
- ``test_entry_cuda`` (``-m gpu``): every case on the GPU;
- ``test_supported_page_is_current``: ``docs/supported.md`` is rendered from the registry;
- ``test_adding_a_composite_touches_one_file``: one registration is everything a NumPy
  function needs (dispatch, the table, these tests, the random programs).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

import tracearray
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.ops import OPS
from tracearray.testing import assert_matches_numpy
from tracearray.testing.programs import compile_source
from tracearray.testing.strategies import RandomSource, draw_array, draw_broadcastable, draw_shape
from tracearray.trace import registry
from tracearray.trace.composites import COMPOSITES, Composite, composite

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = 3 if os.environ.get("CI") else 8
SIDES = (0, 1, 2, 3, 4, 5, 7, 9, 16, 17)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
HAVE_GPU = driver.is_available()


def _cases() -> list[tuple[str, str, int, Composite | None]]:
    out = [(c.name, call, c.arrays, c) for c, call in registry.composite_calls()]
    out += [(f"np.{OPS[p].ufunc.__name__}", call, OPS[p].arity, None)
            for p, call in registry.primitive_calls()]
    return out


CASES = _cases()


def _id(case) -> str:
    return f"{case[0]}::{case[1]}"


def program(call: str, arrays: int):
    names = [f"x{i}" for i in range(arrays)]
    src = f"def entry({', '.join(names)}):\n    return {call.format(*names)}\n"
    return compile_source(src, "entry")


def draw_inputs(seed: str, case) -> list[np.ndarray]:
    name, _call, arrays, c = case
    src = RandomSource(seed)
    if c is None:   # a ufunc primitive: its domain
        spec = OPS[next(p for p, s in OPS.items() if s.ufunc is not None and
                        f"np.{s.ufunc.__name__}" == name)]
        dt = src.choice(spec.domain.dtypes)
        dtypes = spec.domain.operand_dtypes(dt, spec.arity)
        values, lo, hi, same = spec.domain.values, 0, 3, False
    else:
        dt = src.choice(c.dtypes)
        dtypes = (dt,) * arrays
        values, lo, hi, same = c.values, c.min_dims, c.max_dims, c.same_shape
    base = draw_shape(src, lo, hi, SIDES, max_size=400)
    shapes = [base] * arrays if same else draw_broadcastable(src, arrays, base)
    if c is not None and not same:   # keep the entry's rank bounds for every array
        shapes = [s if len(s) >= lo else base for s in shapes]
    layout = "C" if src.boolean(0.6) else None
    return [draw_array(src, d, s, values, layout) for d, s in zip(dtypes, shapes)]


def _seed(case, k: int) -> str:
    return f"{case[0]}|{case[1]}|{k}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_entry_cpu(case) -> None:
    fn = program(case[1], case[2])
    for k in range(EXAMPLES):
        assert_matches_numpy(fn, *draw_inputs(_seed(case, k), case), device="cpu")


_ASSEMBLED: set[str] = set()


@pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_entry_ptx(case) -> None:
    """The entry's kernels for the GPU, assembled by ptxas (for the first draw NumPy
    accepts)."""
    fn = program(case[1], case[2])
    for k in range(EXAMPLES):
        args = draw_inputs(_seed(case, k), case)
        try:
            with np.errstate(all="ignore"):
                fn(*[a.copy() for a in args])
        except Exception:   # noqa: BLE001 -- NumPy rejects this draw: try the next
            continue
        lowered = tracearray.compile(fn, device="cuda").lower(*args)
        for kern in lowered.executable.kernels:
            key = hashlib.sha256(kern.ptx.encode()).hexdigest()
            if key not in _ASSEMBLED:
                P.ptxas(kern.ptx, "sm_90")
                _ASSEMBLED.add(key)
        return


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_entry_cuda(case) -> None:
    fn = program(case[1], case[2])
    for k in range(max(2, EXAMPLES // 2)):
        assert_matches_numpy(fn, *draw_inputs(_seed(case, k), case), device="cuda")


def test_every_composite_has_calls_and_a_name() -> None:
    for obj, c in COMPOSITES.items():
        assert c.calls, c.name
        assert c.name.startswith("np."), c.name
        for call in c.calls:
            assert "{0}" in call, (c.name, call)


def test_supported_page_is_current() -> None:
    page = (ROOT / "docs" / "supported.md").read_text()
    assert page == registry.render_markdown(), (
        "docs/supported.md is stale: regenerate it with\n  python -c \"from tracearray.trace "
        "import registry; print(registry.render_markdown(), end='')\" > docs/supported.md")


def test_the_table_says_what_a_call_does() -> None:
    """The table's state of an entry is what calling it does: a function it lists as *no* is
    refused, one it lists as *tried* runs NumPy's implementation (np.fill_diagonal compiles
    that way), and a traced mask's selection as an array compiles (a data-dependent size)."""
    by_name = {e.name: e for e in registry.entries()}
    assert by_name["np.shares_memory"].how is None
    assert by_name["np.fill_diagonal"].how == "tried"
    assert by_name["x[mask] as an array (a traced boolean mask)"].supported

    def shares_memory(x):
        return np.shares_memory(x > 0, x)

    with pytest.raises(tracearray.UnsupportedOperationError, match="np.shares_memory"):
        tracearray.compile(shares_memory, device="cpu")(np.eye(3))

    def zero_diagonal(x):
        y = x.copy()
        np.fill_diagonal(y, 0.0)
        return y

    a = np.arange(9.0).reshape(3, 3)
    assert_matches_numpy(zero_diagonal, a, device="cpu")
    assert_matches_numpy(lambda x: x[x > 3.0], a, device="cpu")


def test_adding_a_composite_touches_one_file() -> None:
    """A NumPy-style function (dispatched through __array_function__, as NumPy's are) gets
    everything from one registration in one module: the tracer dispatches to it, the
    supported-operations table lists it, the generated tests run its calls, and the random
    programs can draw it."""
    from numpy._core.overrides import array_function_dispatch

    @array_function_dispatch(lambda x, scale=None: (x,), module="numpy")
    def softclip(x, scale=1.0):          # a NumPy function tracearray has never heard of
        return np.tanh(np.asarray(x) / scale) * scale

    @composite(softclip, calls=["np.softclip({0}, 2.0)"], dtypes=(np.float32, np.float64),
               name="np.softclip")
    def _softclip(x, scale=1.0):
        return np.tanh(x / scale) * scale

    np.softclip = softclip
    try:
        entry = COMPOSITES[softclip]
        assert any(e.name == "np.softclip" and e.supported for e in registry.entries())
        case = (entry.name, entry.calls[0], entry.arrays, entry)
        test_entry_cpu(case)                       # the generated test, as for any entry
        x = np.linspace(-3, 3, 11, dtype=np.float32)
        f = tracearray.compile(lambda v: softclip(v, 2.0), device="cpu")
        assert np.allclose(f(x), softclip(x, 2.0), rtol=1e-6)
        import importlib
        programs_mod = importlib.import_module("tracearray.testing.programs")
        assert entry in programs_mod.composite_choices()
    finally:
        del COMPOSITES[softclip]
        del np.softclip
