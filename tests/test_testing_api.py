"""The public API of ``tracearray.testing``: strategies, the comparator, ``check`` and its
reproducers, the tolerance table and the single list of divergences (and their docs page).

The central test: a deliberately wrong function (a softmax "optimised" by dropping the max
subtraction, checked against the stable reference) is caught, shrunk to a small example and
printed as a reproducer script that fails the same way when run. An injected compiler bug
(results perturbed by one ulp) is caught too.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from tiers import examples

import tracearray
import tracearray.testing as tt
from tracearray.testing import bounds, compare, divergences, repro
from tracearray.testing.strategies import RandomSource, draw_array

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_fast(x):
    # "Optimised": no max subtraction. Wrong once exp overflows (x > ~88 in float32).
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


# ============================================================================================
# Strategies
# ============================================================================================

def test_public_names() -> None:
    for name in tt.__all__:
        assert hasattr(tt, name), name


@given(tt.arrays(np.float32, (3, 5), layout="negative"))
@settings(max_examples=examples(10))
def test_arrays_dtype_shape_layout(a: np.ndarray) -> None:
    assert a.dtype == np.float32 and a.shape == (3, 5)
    assert any(s < 0 for s in a.strides)


@pytest.mark.parametrize("kind", tt.LAYOUT_KINDS)
def test_every_layout_kind(kind: str) -> None:
    src = RandomSource(kind)
    a = draw_array(src, np.int16, (4, 3, 5), "any", kind)
    lay = tt.layout_of(a)
    assert lay is not None
    assert lay.is_c() == (kind == "C") or (kind == "broadcast" and not lay.broadcast)
    if kind == "broadcast" and lay.broadcast:
        assert 0 in a.strides


@given(tt.arrays())
@settings(max_examples=examples(40))
def test_layout_and_literal_roundtrip(a: np.ndarray) -> None:
    """value_literal rebuilds the same values (NaN, -0.0, inf exactly), dtype, shape and
    strides; strided() rebuilds every layout the strategy draws."""
    lay = tt.layout_of(a)
    assert lay is not None
    b = tt.strided(np.array(a), lay.perm, lay.flip, lay.step, lay.broadcast)
    assert_bitwise_equal(a, b)
    ns = {"np": np, "strided": tt.strided, "nan": math.nan, "inf": math.inf,
          "base64": __import__("base64")}
    c = eval(repro.value_literal(a), ns)   # noqa: S307 -- the literal under test
    assert_bitwise_equal(a, c)
    if a.size > 1 and all(n > 1 for n in a.shape):
        assert c.strides == a.strides


def assert_bitwise_equal(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "c":   # the real and imaginary parts (a NaN part compares as NaN)
        assert_bitwise_equal(np.ascontiguousarray(a).view(a.real.dtype),
                             np.ascontiguousarray(b).view(b.real.dtype))
    elif a.dtype.kind == "f":
        assert np.array_equal(np.isnan(a), np.isnan(b))
        ok = ~np.isnan(a)
        assert np.array_equal(a[ok], b[ok]) and np.array_equal(np.signbit(a[ok]), np.signbit(b[ok]))
    else:
        assert np.array_equal(a, b)


def test_values_reach_special_values() -> None:
    src = RandomSource("specials")
    f = np.concatenate([draw_array(src, np.float32, (64,), "any") for _ in range(20)])
    assert np.isnan(f).any() and (f == np.inf).any() and (f == -np.inf).any()
    assert ((f == 0) & np.signbit(f)).any() and (f == np.finfo(np.float32).max).any()
    assert ((f != 0) & (np.abs(f) < np.finfo(np.float32).tiny)).any()   # subnormals
    i = np.concatenate([draw_array(src, np.int8, (64,), "any") for _ in range(20)])
    assert (i == -128).any() and (i == 127).any()
    # the Hypothesis strategies reach them too
    find(tt.elements(np.float32), lambda v: v != v)
    find(tt.elements(np.float16), lambda v: v == -np.inf)
    find(tt.arrays(np.uint8, (4,)), lambda a: (a == 255).any())
    assert (tt.special_values(np.uint8) == 255).any()


def test_shapes_hit_edge_sizes() -> None:
    find(tt.shapes(), lambda s: 0 in s, settings=settings(max_examples=300))
    find(tt.shapes(min_dims=1), lambda s: any(n in (15, 17, 31, 33, 63, 65) for n in s),
         settings=settings(max_examples=300))


@given(tt.broadcastable_shapes(3))
@settings(max_examples=examples(30))
def test_broadcastable_shapes(shapes: tuple) -> None:
    np.broadcast_shapes(*shapes)


@given(tt.array_groups(2, np.float64, values="finite"))
@settings(max_examples=examples(10))
def test_array_groups_broadcast(group: tuple) -> None:
    np.broadcast_shapes(*(g.shape for g in group))
    assert all(np.isfinite(g).all() for g in group)


# ============================================================================================
# The comparator
# ============================================================================================

def test_correct_functions_match() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 33)).astype(np.float32)
    w, b = rng.standard_normal(33).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    cmp = tt.assert_matches_numpy(layernorm, x, w, b, device="cpu")
    assert cmp.ok and "float-sum-reassociation" in cmp.divergences
    x[1, 3] = np.nan
    tt.assert_matches_numpy(softmax, x, device="cpu")
    tt.assert_matches_numpy(softmax, x.astype(np.float16), device="cpu")
    i = np.array([127, -128, 5, 0], np.int8)
    tt.assert_matches_numpy(lambda a: (a * 3, {"s": a.sum(), "m": a // 2}), i, device="cpu")


def test_numpy_errors_must_be_mirrored() -> None:
    cmp = tt.compare_with_numpy(lambda a: a.reshape(7), np.zeros(6), device="cpu")
    assert cmp.ok   # both raise ValueError


def test_divergence_int_power_negative_exponent() -> None:
    a, e = np.array([1, 2, -1, 3]), np.array([2, -1, -3, 0])
    cmp = tt.assert_matches_numpy(lambda a, e: a ** e, a, e, device="cpu")
    assert cmp.divergences == {"int-power-negative-exponent"}


def test_divergence_max_of_signed_zeros() -> None:
    cmp = tt.assert_matches_numpy(np.max, np.array([-0.0, 0.0, -0.0]), device="cpu")
    assert "max-min-signed-zero" in cmp.divergences
    assert "max-min-signed-zero" in cmp.report()


def _perturb_results(monkeypatch: pytest.MonkeyPatch, ulps: int, when=lambda inputs: True) -> None:
    """Inject a compiler bug: every float result of the CPU runtime moved by ``ulps``."""
    import tracearray.cpu.runtime as rt
    run = rt.Executable.run

    def bad_run(self, inputs):   # type: ignore[no-untyped-def]
        outs = run(self, inputs)
        if not when(inputs):
            return outs
        return [np.asarray(bounds.step_ulps(o, o.dtype, ulps)).astype(o.dtype).reshape(o.shape)
                if o.dtype.kind == "f" else o for o in outs]
    monkeypatch.setattr(rt.Executable, "run", bad_run)
    # (and no specialised warm call, which would run the kernels without ``run``)
    monkeypatch.setattr(rt.Executable, "_one_kernel_run", lambda self: None)


def test_injected_one_ulp_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    _perturb_results(monkeypatch, 1)
    with pytest.raises(tt.MismatchError) as info:
        tt.assert_matches_numpy(lambda a: a + 1.5, x, device="cpu")
    text = str(info.value)
    assert "12 of 12 elements of the compiled result differ" in text
    assert re.search(r"at \(0, 0\): got -0\.49999997 \(float32 0x\w+\), NumPy -0\.5", text), text
    # exp is within the transcendental tolerance (4 ulp for float32): 1 ulp passes
    tt.assert_matches_numpy(np.exp, x, device="cpu")


def test_transcendental_tolerance_is_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(-2, 2, 12, dtype=np.float32)
    k = compare.TOLERANCES.ulps("transcendental", np.float32)
    _perturb_results(monkeypatch, k + 1)
    with pytest.raises(tt.MismatchError, match="transcendental"):
        tt.assert_matches_numpy(np.exp, x, device="cpu")


def test_rtol_atol_widen() -> None:
    x = np.linspace(0, 1, 9)
    with pytest.raises(tt.MismatchError):
        tt.assert_matches_numpy(lambda a: a + 1e-6, x, reference=lambda a: a, device="cpu")
    tt.assert_matches_numpy(lambda a: a + 1e-6, x, reference=lambda a: a, atol=1e-5,
                            device="cpu")


def test_dtype_and_shape_mismatch_reported() -> None:
    cmp = tt.compare_with_numpy(lambda a: a.astype(np.float32), np.arange(3.0),
                                reference=lambda a: a, device="cpu")
    assert not cmp.ok and "got float32[3], NumPy returns float64[3]" in cmp.report()


# ============================================================================================
# check(): the deliberately wrong function, shrinking, the reproducer
# ============================================================================================

def test_wrong_function_is_caught_shrunk_and_reproduced(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(tt.CheckFailure) as info:
        tt.check(softmax_fast, tt.arrays(np.float32, (2, 3), values="finite"),
                 reference=softmax, max_examples=300, derandomize=True, device="cpu")
    failure = info.value
    printed = capsys.readouterr().out
    assert "Reproducer:" in printed and failure.reproducer in printed
    assert "softmax_fast(float32[2, 3]) compiled for device='cpu' does not match NumPy" in printed
    (x,) = failure.args_found
    assert np.nanmax(x) > 80   # exp overflows: the cause, found and kept by shrinking
    script = failure.reproducer
    assert "def softmax_fast(x):" in script and "def softmax(x):" in script
    assert "reference=softmax" in script
    with pytest.raises(tt.MismatchError):   # the reproducer fails the same way on its own
        exec(compile(script, "<reproducer>", "exec"), {"__name__": "__reproducer__"})   # noqa: S102


def test_check_passes_on_a_correct_function() -> None:
    tt.check(layernorm, tt.arrays(np.float32, (4, 16), values="finite"),
             tt.arrays(np.float32, (16,), values="small"), tt.arrays(np.float32, (16,)),
             max_examples=15, derandomize=True, device="cpu")


def test_check_shrinks_an_injected_compiler_bug(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    # The "bug" only shows on inputs with more than 4 elements: shrinking keeps exactly 5.
    _perturb_results(monkeypatch, 1, when=lambda inputs: inputs[0].size > 4)
    with pytest.raises(tt.CheckFailure) as info:
        tt.check(lambda a: a * 2.0, tt.arrays(np.float64, tt.shapes(max_dims=2)),
                 max_examples=100, derandomize=True, device="cpu")
    (x,) = info.value.args_found
    assert x.size == 5
    assert "assert_matches_numpy(fn, arg0, device='cpu')" in capsys.readouterr().out


@tt.matches_numpy(tt.arrays(np.float64, tt.shapes(max_dims=2)), max_examples=10,
                  derandomize=True, device="cpu")
def test_decorated_user_function(x):
    return np.tanh(x) * 2 - np.abs(x).sum()


def test_decorator_keeps_the_function() -> None:
    assert test_decorated_user_function.fn(np.zeros(2)).shape == (2,)


# ============================================================================================
# Random programs
# ============================================================================================

@given(tt.programs(max_steps=5))
@settings(max_examples=examples(15))
def test_program_source_is_the_program(p: tt.Program) -> None:
    src = p.source()
    assert src.startswith("def program(")
    ns = {"np": np, "nan": math.nan, "inf": math.inf}
    exec(compile(src, "<p>", "exec"), ns)   # noqa: S102 -- the program under test
    a, b = p.numpy_result(), _call(ns["program"], p.inputs)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert_bitwise_equal(np.asarray(x), np.asarray(y))


def _call(fn, inputs):   # type: ignore[no-untyped-def]
    with np.errstate(all="ignore"):
        return fn(*[x.copy() for x in inputs])


def test_program_reproducer_runs() -> None:
    from tracearray.testing import fuzz
    p = fuzz.program_for("api", 3)
    script = fuzz.program_reproducer(p, "cpu", "test")
    exec(compile(script, "<reproducer>", "exec"), {"__name__": "__reproducer__"})   # noqa: S102


# ============================================================================================
# The divergence list and its docs page
# ============================================================================================

def test_every_divergence_an_op_cites_is_listed() -> None:
    """Ops name the divergences that concern them (OpSpec.divergences), composites too; every
    id is in the one list, and every entry's ops exist (registry ops or NumPy names)."""
    from tracearray.ops import OPS
    from tracearray.trace.composites import COMPOSITES
    cited = {d for s in OPS.values() for d in s.divergences}
    cited |= {d for c in COMPOSITES.values() for d in c.divergences}
    assert cited and cited <= set(divergences.BY_ID), cited - set(divergences.BY_ID)
    for d in divergences.DIVERGENCES:
        assert d.ops, d.id


def test_docs_divergences_page_is_rendered_from_the_list() -> None:
    page = (ROOT / "docs" / "divergences.md").read_text()
    for d in divergences.DIVERGENCES:
        assert f"`{d.id}`" in page, f"docs/divergences.md lacks {d.id}"
    assert page == divergences.render_markdown(), \
        "docs/divergences.md is stale: regenerate it with divergences.render_markdown()"


def test_comparator_cites_only_listed_divergences() -> None:
    src = (ROOT / "tracearray" / "testing").glob("*.py")
    cited = {m for f in src for m in re.findall(r'used\.add\("([a-z0-9-]+)"\)|'
                                                r'divergences\.add\("([a-z0-9-]+)"\)',
                                                f.read_text()) for m in m if m}
    assert cited and cited <= set(divergences.BY_ID), cited - set(divergences.BY_ID)


def test_docs_testing_page_has_the_tolerance_table() -> None:
    page = (ROOT / "docs" / "testing.md").read_text()
    assert compare.families_table_markdown() in page


def test_the_evaluator_computes_integer_powers_of_unselected_elements() -> None:
    # soak cpu-2026-12-01-n, program 597: x[x > 255] selects nothing, and the comparator's
    # graph evaluator raised NumPy's negative-power error on elements no result reads
    def program(x):
        v = x[x > 255]
        return np.power(v, v)

    tracearray.testing.assert_matches_numpy(program, np.array([[[[-2]]]], dtype=np.int16), device="cpu")
    tracearray.testing.assert_matches_numpy(lambda x: np.power(x, x).sum(where=x > 0),
                         np.array([-3, -1, 0, 2, 3], dtype=np.int32), device="cpu")


_GLOBAL_INDEX = np.array([0, 4, 1, 1, 3, 0, 4, 4, 2])
_GLOBAL_WEIGHTS = np.linspace(0.0, 1.0, 9)


def test_assert_matches_numpy_of_a_function_reading_global_arrays() -> None:
    """A function reading module-level NumPy arrays (the graph's last inputs) is compared
    like any other: the comparator evaluated its graph without them and failed with an
    internal AssertionError ("inputs are bound by the evaluator"). Also with a reference
    function of its own globals, and a global RandomState draw (a zero key, unverifiable)."""
    from tracearray.testing import assert_matches_numpy
    x = np.arange(9.0)
    assert_matches_numpy(lambda a: np.bincount(_GLOBAL_INDEX, weights=a, minlength=6), x)
    assert_matches_numpy(lambda a: a * _GLOBAL_WEIGHTS, x,
                         reference=lambda a: a * _GLOBAL_WEIGHTS[::-1][::-1])
    cmp = tracearray.testing.compare_with_numpy(lambda a: a + np.random.rand(9) * 0.0, x)
    assert cmp.ok, cmp
    with pytest.raises(AssertionError, match="does not match"):
        assert_matches_numpy(lambda a: a * _GLOBAL_WEIGHTS, x,
                             reference=lambda a: a * _GLOBAL_WEIGHTS + 1)


def test_results_drawn_inside_the_function_are_checked_against_the_traced_draws() -> None:
    """A result of random draws made inside the function (divergence random-bit-stream): its
    shape and dtype are NumPy's, its numbers the traced graph's, so it matches without being
    called a tracer bug; a compiled result that is not the graph's draws still fails; and the
    fuzzer, whose draws reach results through stream-independent values, still compares
    them with NumPy's."""
    x = np.ones((4, 3))

    def noisy(a):
        return a + np.random.default_rng(0).standard_normal(a.shape), a.sum()
    cmp = tt.compare_with_numpy(noisy, x, device="cpu")
    assert cmp.ok, cmp.report()
    assert "random-bit-stream" in cmp.divergences
    assert cmp.leaves[0].drawn and not cmp.leaves[1].drawn
    strict = tt.compare_with_numpy(noisy, x, device="cpu", draws_reach_numpy=True)
    assert not strict.ok and "tracer bug" in strict.report()
    compiled = tracearray.compile(noisy, device="cpu")

    class OffByOne:     # the compiled draws, moved: no longer the traced graph's
        lower = staticmethod(compiled.lower)

        def __call__(self, a):
            drawn, total = compiled(a)
            return drawn + 1.0, total
    bad = tt.compare_with_numpy(noisy, x, device="cpu", compiled=OffByOne())
    assert not bad.ok and "compiled result" in bad.report(), bad.report()


def test_a_function_that_updates_its_arguments_compares_on_copies():
    """The compiled call writes into copies of the arguments of the same layout: the
    caller's arrays stay as given, the graph's bounds are evaluated on the values the call
    started from (they were read after the call's writes: a false "tracer bug"), and views
    of one base still alias each other in the copies."""
    def bump(a):
        a += 1
        return a * 2

    x = np.zeros(5)
    cmp = tt.compare_with_numpy(bump, x, device="cpu")
    assert cmp.ok, cmp.report()
    np.testing.assert_array_equal(x, np.zeros(5))

    def shift(a, b):          # b is a view of a's memory: the write moves what b reads
        a[1:] = a[:-1] + 1
        return b + 0

    base = np.arange(12.0)
    view = base[::-3]
    with pytest.raises(tracearray.errors.InputError, match="share memory"):   # still aliased
        tt.compare_with_numpy(shift, base[2:], view, device="cpu")
    np.testing.assert_array_equal(base, np.arange(12.0))
    copies = compare._private_copies([base[2:], view, {"k": base[1::2].T}])
    assert copies[1].strides == view.strides
    assert np.shares_memory(copies[0], copies[1]) and not np.shares_memory(copies[0], base)
    np.testing.assert_array_equal(copies[2]["k"], base[1::2])


def test_compare_copies_arrays_inside_containers_and_generators():
    # NumPy's reference run of an SGD step over a dict of parameters must not update the
    # arrays the compiled run gets (a false "tracer bug"); a Generator argument is the key
    # the call draws from a copy of it (the caller's does not advance)
    def sgd(p, g, lr):
        for k in p:
            p[k] -= lr * g[k]
        return sum((v ** 2).sum() for v in p.values())

    params = {"W": np.ones((3, 2)), "b": np.zeros(2)}
    grads = {"W": np.full((3, 2), 0.5), "b": np.ones(2)}
    assert tt.compare_with_numpy(sgd, params, grads, 0.1, device="cpu").ok
    np.testing.assert_array_equal(params["W"], np.ones((3, 2)))

    def noisy(x, rng):
        return x + rng.standard_normal(x.shape)

    rng = np.random.default_rng(0)
    assert tt.compare_with_numpy(noisy, np.arange(3.0), rng, device="cpu").ok
    assert rng.random() == np.random.default_rng(0).random()
