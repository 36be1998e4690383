"""New input sizes re-derived from a size template instead of traced (``trace/resize.py``,
``fuse/replan.py``, ``tracearray/templates.py``; issue 12).

The claim under test: when a traced graph is ``resizable``, re-deriving it for other sizes of
its size class gives exactly the graph a trace at those sizes gives (the same interned
nodes), and the replayed plan is the plan the planner makes for it. It is checked over every
entry of the op registry and over random programs, each at two sizes of one class; then end to
end (results bitwise equal to a fresh trace's, and NumPy's), for what must not be re-derived
(sizes read as numbers, data-dependent sizes, globals assigned), and for the compiled
function's own check of a template (negative controls: a size count left unrecorded is caught,
and without the check it would give wrong results).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import tracearray
from tracearray.fuse import plan_graph
from tracearray.fuse import replan as RP
from tracearray.testing import assert_matches_numpy
from tracearray.testing.fuzz import grown_inputs
from tracearray.testing.programs import ProgramSpace, compile_source, generate
from tracearray.testing.strategies import RandomSource, draw_array
from tracearray.trace import numpy_api, registry, resize, trace_function
from tracearray import templates

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
PROGRAMS = 150 if os.environ.get("CI") else 400


def _check_derivation(fn, args_a: list, args_b: list) -> bool:
    """Trace ``fn`` at both argument sets; when the first trace is resizable, its graph
    re-derived for the second sizes must be the second trace's, and its plan replayed the
    second plan. Whether it was resizable."""
    try:
        with np.errstate(all="ignore"):
            ta = trace_function(fn, tuple(args_a), {}, frozenset(), frozenset())
    except Exception:   # noqa: BLE001 -- the case is invalid at these sizes (NumPy's error)
        return False
    global_shapes = [n.attr("shape") for n in ta.graph.inputs[len(args_a):]]
    cls_a, larger_a = resize.size_class([a.shape for a in args_a] + global_shapes)
    cls_b, larger_b = resize.size_class([b.shape for b in args_b] + global_shapes)
    assert cls_a == cls_b
    if resize.resizable(ta.graph, ta.size_dependence, larger_a) is not None:
        return False
    # resizable: NumPy's program must hold at the other sizes too, and trace to the same
    with np.errstate(all="ignore"):
        tb = trace_function(fn, tuple(args_b), {}, frozenset(), frozenset())
    to = resize.sigma(larger_a, larger_b)
    new: dict = {}
    derived = resize.resize_graph(ta.graph, to, new)
    assert len(derived.outputs) == len(tb.graph.outputs)
    assert all(x is y for x, y in zip(derived.outputs, tb.graph.outputs))
    assert all(x is y for x, y in zip(derived.inputs, tb.graph.inputs))
    skel = RP.skeleton(plan_graph(ta.graph))
    if skel is not None:
        replayed = RP.replan(skel, derived, to, new)
        assert replayed is not None and RP.same_plan(replayed, plan_graph(tb.graph))
    return True


# --------------------------------------------------------------------- the whole registry

def _registry_cases() -> list:
    out = [(c.name, call, c.arrays, c) for c, call in registry.composite_calls()]
    from tracearray.ops import OPS
    out += [(f"np.{OPS[p].ufunc.__name__}", call, OPS[p].arity, None)
            for p, call in registry.primitive_calls()]
    return out


CASES = _registry_cases()
RESIZABLE: set[str] = set()


def _case_inputs(case, seed: int) -> list[np.ndarray]:
    name, _call, arrays, c = case
    src = RandomSource(f"resize|{name}|{seed}")
    if c is None:
        from tracearray.ops import OPS
        spec = OPS[next(p for p, s in OPS.items() if s.ufunc is not None and
                        f"np.{s.ufunc.__name__}" == name)]
        dtypes = spec.domain.operand_dtypes(src.choice(spec.domain.dtypes), spec.arity)
        values, lo, hi, same = spec.domain.values, 1, 2, False
    else:
        dtypes = (src.choice(c.dtypes),) * arrays
        values, lo, hi, same = c.values, max(c.min_dims, 1), min(c.max_dims, 3), c.same_shape
    rank = src.integer(lo, max(lo, hi))
    base = tuple(src.choice((17, 19, 23, 5, 1)) for _ in range(rank))
    shapes = [base] * arrays
    if not same and arrays > 1 and rank > 1 and src.boolean(0.5):
        shapes[-1] = base[1:]          # broadcast a lower-rank operand
    return [draw_array(src, d, s, values, "C") for d, s in zip(dtypes, shapes)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}::{c[1]}")
def test_registry_entry_resizes_as_it_traces(case) -> None:
    src = f"def entry({', '.join(f'x{i}' for i in range(case[2]))}):\n" \
          f"    return {case[1].format(*[f'x{i}' for i in range(case[2])])}\n"
    fn = compile_source(src, "entry")
    for seed in range(2):
        args = _case_inputs(case, seed)
        if _check_derivation(fn, args, grown_inputs(args, 1)):
            RESIZABLE.add(case[0])


def test_the_common_entries_are_resizable() -> None:
    """The registry test is not vacuous: elementwise ufuncs and reductions are re-derived
    (mean, var: their size counts are recorded)."""
    names = ("np.add", "np.exp", "np.mean", "np.var", "np.std", "np.sum", "np.maximum",
             "np.matmul")
    fns = {
        "np.add": lambda x, y: np.add(x, y), "np.exp": lambda x, y: np.exp(x),
        "np.mean": lambda x, y: np.mean(x, axis=0), "np.var": lambda x, y: x.var(axis=-1),
        "np.std": lambda x, y: np.std(x, ddof=1), "np.sum": lambda x, y: x.sum(),
        "np.maximum": lambda x, y: np.maximum(x, y.T.T), "np.matmul": lambda x, y: x @ y.T}
    x = np.random.default_rng(0).standard_normal((19, 23)).astype(np.float32)
    for name in names:
        assert _check_derivation(fns[name], [x, x], grown_inputs([x, x], 1)), name


# ----------------------------------------------------------------------- random programs

def test_random_programs_resize_as_they_trace() -> None:
    # sides mostly past EXACT_DIMS, so that the derivation maps dimensions
    space = ProgramSpace(max_size=4096, max_steps=8, sides=(1, 2, 3, 17, 19, 23, 31, 33))
    resizable = 0
    for seed in range(PROGRAMS):
        p = generate(RandomSource(f"resize-program-{seed}"), space)
        args = [np.ascontiguousarray(a) for a in p.inputs]
        mapped = any(n > resize.EXACT_DIMS for a in args for n in a.shape)
        resizable += _check_derivation(p.fn, args, grown_inputs(args, 1)) and mapped
    # a good part of the drawn programs read no size and use only generic operations
    assert resizable >= PROGRAMS // 10, resizable


# ------------------------------------------------------------------------- end to end

def _layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_new_sizes_give_a_fresh_traces_results_bit_for_bit() -> None:
    f = tracearray.compile(_layernorm, device="cpu")
    w, b = _f32(40, seed=1), _f32(40, seed=2)
    for rows in (20, 33, 50, 64, 17, 200):
        x = _f32(rows, 40, seed=rows)
        got = f(x, w, b)
        fresh = tracearray.compile(_layernorm, device="cpu")(x, w, b)
        np.testing.assert_array_equal(got, fresh)
        assert_matches_numpy(_layernorm, x, w, b, device="cpu")
    assert f.cache_info().traces == 2 and f.stats.resizes == 4
    # a smaller row count (<= 16) is another size class: traced
    f(_f32(3, 40), w, b)
    assert f.cache_info().traces == 3 and f.stats.resizes == 4


def _spread(x):
    d = x - x.mean()
    return (d * d).mean(), np.std(x, ddof=1)


def test_a_rewritten_graph_is_re_derived_with_its_rewrites() -> None:
    """The one-pass variance (``fuse/rewrite.py``) of a full reduction: the derived plan's
    graph is the template's rewritten graph re-derived, bit for bit a fresh trace's."""
    f = tracearray.compile(_spread, device="cpu")
    for n in (1000, 1001, 1500, 4099, 20):
        x = _f32(n, seed=n) + 3
        got = f(x)
        fresh = tracearray.compile(_spread, device="cpu")(x)
        for a, b in zip(got, fresh):
            np.testing.assert_array_equal(a, b)
        assert_matches_numpy(_spread, x, device="cpu")
    assert f.cache_info().traces == 2 and f.stats.resizes == 3
    plan = f.lower(_f32(1002)).plan
    assert plan.rewrites and plan.graph is not f.lower(_f32(1002)).graph


def test_equal_dimensions_stay_equal_or_trace_again() -> None:
    """The class keeps which larger dimensions are equal: (n, n) then (n, m) is a new class
    (and a broadcasting error where NumPy raises one)."""
    f = tracearray.compile(lambda x, y: x + y, device="cpu")
    for n in (20, 30, 40):
        f(_f32(n, n), _f32(n, n))
    assert f.stats.resizes == 1
    got = f(_f32(20, 30), _f32(20, 30))
    np.testing.assert_array_equal(got, _f32(20, 30) * 2)
    assert f.cache_info().traces == 3
    with pytest.raises(ValueError):
        f(_f32(20, 30), _f32(30, 20))


def _reads_shape(x):
    return x * x.shape[0]


def _reads_len(x):
    return x + len(x)


def _iterates(x):
    return sum(row for row in x)


def _np_shape(x):
    return x.sum() / np.shape(x)[0]


@pytest.mark.parametrize("fn", [_reads_shape, _reads_len, _iterates, _np_shape])
def test_functions_that_read_sizes_trace_every_size(fn) -> None:
    f = tracearray.compile(fn, device="cpu")
    for n in (20, 30, 40, 50):
        x = _f32(n, 3, seed=n)
        np.testing.assert_allclose(f(x), fn(x), rtol=1e-5)
    assert f.cache_info().traces == 4 and f.stats.resizes == 0


def _data_size(x):
    return x[x > 0] * 2


def _masked_sum(x):
    return x[x > 0].sum()


def test_data_dependent_sizes_trace_every_size() -> None:
    f = tracearray.compile(_data_size, device="cpu")
    for n in (20, 30, 40):
        x = _f32(n, seed=n)
        np.testing.assert_array_equal(f(x), _data_size(x))
    assert f.stats.resizes == 0
    # a selection that is only summed has no size of its own (a masked sum): re-derived
    g = tracearray.compile(_masked_sum, device="cpu")
    for n in (20, 30, 40):
        x = _f32(n, seed=n)
        np.testing.assert_allclose(g(x), _masked_sum(x), rtol=1e-5)
    assert g.stats.resizes == 1


COUNTER = 0


def _assigns_a_global(x):
    global COUNTER
    COUNTER += 1
    return x * 2.0


def test_a_function_assigning_a_global_traces_every_size() -> None:
    f = tracearray.compile(_assigns_a_global, device="cpu")
    before = COUNTER
    for n in (20, 30, 40):
        f(_f32(n))
    assert f.stats.resizes == 0 and COUNTER == before + 3   # (once per trace, as before)


SCALE = np.arange(24, dtype=np.float32)


def _reads_a_global_array(x):
    return x * SCALE


def test_global_arrays_are_part_of_the_size_class() -> None:
    """A global array of 24 elements beside an argument of 24: the class counts the global's
    dimension, so an argument of another size is another class (NumPy's error), never the
    global re-derived to the argument's size."""
    f = tracearray.compile(_reads_a_global_array, device="cpu")
    for rows in (20, 30, 40):
        x = _f32(rows, 24, seed=rows)
        np.testing.assert_array_equal(f(x), x * SCALE)
    assert f.stats.resizes == 1
    with pytest.raises(ValueError):
        f(_f32(20, 25))


def test_a_changed_global_stops_the_template() -> None:
    f = tracearray.compile(_reads_a_global_array, device="cpu")
    global SCALE
    saved = SCALE
    try:
        for rows in (20, 30):
            f(_f32(rows, 24))
        SCALE = np.full(24, 2.0, np.float32)   # another object of the same shape: read anew
        x = _f32(40, 24)
        np.testing.assert_array_equal(f(x), x * SCALE)
    finally:
        SCALE = saved


# ----------------------------------------------------------------- the template's check

def _mean_rows(x):
    return x.mean(axis=0)


def test_a_size_count_left_unrecorded_is_caught_by_the_check(monkeypatch) -> None:
    """Negative control of the design's one trust point: a composite that built a size into
    the graph without recording it (here: mean's count as a plain number). The second size's
    check finds the derived graph differs; the function then traces every size, correctly."""
    real = numpy_api._divide_by_count
    monkeypatch.setattr(numpy_api, "_divide_by_count",
                        lambda total, count, dims, less=0: real(total, count, None, less))
    f = tracearray.compile(_mean_rows, device="cpu")
    for rows in (20, 30, 40, 50):
        x = _f32(rows, 5, seed=rows)
        np.testing.assert_allclose(f(x), _mean_rows(x), rtol=1e-5)
    assert f.stats.resizes == 0 and f.cache_info().traces == 4


def test_without_the_check_the_same_slip_gives_wrong_results(monkeypatch) -> None:
    """... and the check is what stands between that slip and a wrong mean: with it
    disabled, the third size divides by the first size's count."""
    real = numpy_api._divide_by_count
    monkeypatch.setattr(numpy_api, "_divide_by_count",
                        lambda total, count, dims, less=0: real(total, count, None, less))
    monkeypatch.setattr(templates, "_same_graph", lambda a, b: True)
    monkeypatch.setattr(RP, "same_plan", lambda a, b: True)
    f = tracearray.compile(_mean_rows, device="cpu")
    for rows in (20, 30):
        f(_f32(rows, 5))
    x = _f32(40, 5)
    assert f.stats.resizes == 0
    got = f(x)
    assert f.stats.resizes == 1
    assert not np.allclose(got, _mean_rows(x))


def test_same_plan_compares_expressions() -> None:
    """``same_plan`` (the check of a replayed plan) tells apart plans that differ only in a
    kernel's expression."""
    x = _f32(20, 30)
    pa = plan_graph(trace_function(lambda x: np.exp(x) + 1.0, (x,), {}, frozenset(),
                                   frozenset()).graph)
    pb = plan_graph(trace_function(lambda x: np.exp(x) + 1.0, (x,), {}, frozenset(),
                                   frozenset()).graph)
    assert RP.same_plan(pa, pb)
    pc = plan_graph(trace_function(lambda x: np.exp(x) + 1.0, (x,), {}, frozenset(),
                                   frozenset()).graph)
    pc.kernels[0].root_exprs = list(reversed(pc.kernels[0].root_exprs)) + \
        [pc.kernels[0].root_exprs[0]]
    assert not RP.same_plan(pa, pc)


def test_description_memo_serves_only_checked_texts() -> None:
    from tracearray.tile.describe import DescriptionMemo
    memo = DescriptionMemo()
    assert memo.known("k") is None
    memo.note("k", "text")
    assert memo.known("k") is None          # one full description is not yet trusted
    memo.note("k", "te" + "xt")
    assert memo.known("k") == "text"
    memo.note("k", "other")                 # a mismatch stops the memo for good
    assert memo.known("k") is None and memo.broken


def test_random_programs_run_right_at_derived_sizes() -> None:
    """End to end on random programs: called at three sizes of one class (the first makes
    the template, the second checks it, the third is derived), each result matches NumPy."""
    from tracearray.testing.compare import MismatchError, compare_with_numpy
    space = ProgramSpace(max_size=2048, max_steps=6, sides=(1, 2, 3, 17, 19, 23, 31))
    derived = 0
    for seed in range(PROGRAMS * 2):
        p = generate(RandomSource(f"resize-run-{seed}"), space)
        args = [np.ascontiguousarray(a) for a in p.inputs]
        if not any(n > resize.EXACT_DIMS for a in args for n in a.shape):
            continue
        try:
            ok = _check_derivation(p.fn, args, grown_inputs(args, 1))
        except Exception:   # noqa: BLE001 -- (test_random_programs_resize_as_they_trace)
            continue
        if not ok:
            continue
        f = tracearray.compile(p.fn, device="cpu")
        sizes = [args, grown_inputs(args, 1),
                 grown_inputs(args, 2)]
        for inputs in sizes:
            cmp = compare_with_numpy(p.fn, *inputs, device="cpu", compiled=f)
            if not cmp.ok:
                raise MismatchError(cmp)
        derived += f.stats.resizes
        if derived >= 25:
            break
    assert derived >= 25, derived


OFFSET = 1.0


def _adds_a_global_number(x):
    return x + OFFSET


def test_a_changed_global_number_is_not_derived(monkeypatch) -> None:
    """A global number is a constant of the trace (its guard): once it changes, no size is
    derived from a template made with the old value; the new trace makes a new template."""
    f = tracearray.compile(_adds_a_global_number, device="cpu")
    for n in (20, 30, 40):
        x = _f32(n)
        np.testing.assert_array_equal(f(x), x + np.float32(1.0))
    assert f.stats.resizes == 1
    monkeypatch.setitem(globals(), "OFFSET", 2.0)
    for n in (50, 60, 70, 80):
        x = _f32(n)
        np.testing.assert_array_equal(f(x), x + np.float32(2.0))
    # 50 traced (the old template's guard fails: replaced), 60 traced (checks it), 70 and 80
    # derived from the new one
    assert f.stats.resizes == 3 and f.cache_info().traces == 4
