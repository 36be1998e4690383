"""Comparing a compiled function with NumPy: the tolerance table, the comparator, the report.

``assert_matches_numpy(fn, *args)`` runs ``fn`` with NumPy and compiled, and checks that the
results have the same structure, type (ndarray or NumPy scalar), shape and dtype, NaN at the
same positions and values that NumPy's semantics allow:

- the traced graph is evaluated with NumPy node by node together with error bounds
  (``bounds.propagate``): ops NumPy computes exactly must match bit for bit (signed zeros
  included); inexact ops get the bound of their family in ``TOLERANCES`` below; later ops
  propagate those bounds (so ``exp(x) - exp(y)`` near cancellation, or a comparison of two
  nearly equal sums, is judged by what NumPy computes near the inputs, not by a fixed rtol);
- NumPy's own result must satisfy the same bounds (the tracer agrees with NumPy);
- the divergences of ``divergences.py`` are honoured as listed there, and every report names
  the ones that were applied.

THE TOLERANCE TABLE (one per dtype and op family; eps is the dtype's machine epsilon):

========================  ==================================  =======  =======  =======
family                    ops                                 float16  float32  float64
========================  ==================================  =======  =======  =======
exact                     + - * / sqrt, comparisons, min/max,   0 ulp    0 ulp    0 ulp
                          rounding, casts, bit ops, movement,
                          where, clip, integer/bool everything
transcendental            exp, log, sin, power, hypot, ...      1 ulp    4 ulp    4 ulp
                          (ops whose ``OpSpec.accuracy`` says so)
sum (sum, mean, var,      |got - Σx| <= s·d(n)·eps·Σ|x| + 1 ulp s = 2    s = 2    s = 2
std, cumsum)              (cumsum: d = k at the k-th output)
prod (prod, cumprod)      |got - Πx| <= s·n·eps·|Πx| + 1 ulp    s = 2    s = 2    s = 2
matmul                    |got - AB| <= s·K·eps·(|A||B|)+1 ulp  s = 2    s = 2    s = 2
========================  ==================================  =======  =======  =======

Why these numbers: float16 ops are computed in float32 and rounded once by NumPy and by us, so
transcendentals differ only across a float16 rounding boundary (1 ulp); float32/float64 come
from glibc/libdevice vs NumPy's SIMD code, measured within 3 ulp. A sum whose terms each go
through at most d roundings is within d·eps·Σ|x| of the exact sum (first order); tracearray's
sums are blocked and pairwise (codegen/summation.py), so d(n) = ``tile.sum_rounding_depth(n)``:
n - 1 up to 1024 terms, then 1024 + log2(n/512) + 8 at most (NumPy's pairwise sums stay
below that; its in-order sums along a strided axis of more than about 10^4 terms of
one-signed, systematically rounding data may not, and are then reported as NumPy's
disagreement); likewise for products while no partial product over- or underflows (otherwise the
result is order dependent and not compared), and for the K-term dot products of matmul.
float16 reductions use float16's eps (NumPy rounds to float16 after every step of a strided
axis; we accumulate in float32). NaN payloads are never compared.

``rtol``/``atol`` given to the assertion *widen* the automatic bounds (an element also passes
when ``|got - want| <= atol + rtol·|want|``); they never make them stricter. When a
``reference`` function that cannot be traced is given, floats are compared with
``FALLBACK_RTOL_ATOL`` of their dtype instead.
"""
from __future__ import annotations

import warnings
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..trace import is_array_leaf, pytree, trace_function
from ..interleaved import pair_view
from ..ops import OPS
from ..trace.graph import Graph, Node
from . import bounds as _bounds
from .divergences import BY_ID

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = (F16, F32, F64)


@dataclass(frozen=True)
class ToleranceTable:
    """Per op family and dtype: ``ulps`` for elementwise families, ``slack`` (the factor s
    of the summation bound) for reduction families."""
    ulps_by_family: dict[str, dict[np.dtype, int]]
    slack_by_family: dict[str, dict[np.dtype, float]]

    def ulps(self, family: str, dtype: Any) -> int:
        return self.ulps_by_family[family][np.dtype(dtype)]

    def slack(self, family: str, dtype: Any) -> float:
        return self.slack_by_family[family][np.dtype(dtype)]


TOLERANCES = ToleranceTable(
    ulps_by_family={
        "exact": {F16: 0, F32: 0, F64: 0},
        "transcendental": {F16: 1, F32: 4, F64: 4},
    },
    slack_by_family={
        "sum": {F16: 2.0, F32: 2.0, F64: 2.0},
        "prod": {F16: 2.0, F32: 2.0, F64: 2.0},
        "matmul": {F16: 2.0, F32: 2.0, F64: 2.0},
    },
)

# Divergence ids behind each family of the table (the report cites them).
FAMILY_DIVERGENCES = {
    "transcendental": ("transcendental-ulps",),
    "sum": ("float-sum-reassociation", "float16-accumulation"),
    "prod": ("float-prod-reassociation", "float16-accumulation"),
    "matmul": ("matmul-blocking",),
}

# Only for a reference function that cannot be traced (no bounds): (rtol, atol) per dtype.
FALLBACK_RTOL_ATOL = {F16: (2e-3, 1e-3), F32: (1e-5, 1e-6), F64: (1e-12, 1e-13)}

MAX_REPORTED = 5   # mismatching elements listed per output


class MismatchError(AssertionError):
    """A compiled result differs from NumPy's; ``.comparison`` holds the details."""

    def __init__(self, comparison: "Comparison"):
        super().__init__(comparison.report())
        self.comparison = comparison


@dataclass
class LeafResult:
    path: str
    problems: list[str] = field(default_factory=list)
    unverifiable: int = 0
    size: int = 0
    notes: list[str] = field(default_factory=list)   # reported, not failures
    drawn: bool = False   # depends on tracearray's random draws (``_drawn_results``)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Comparison:
    """The outcome of one comparison; ``report()`` is the readable text."""
    name: str
    signature: str
    leaves: list[LeafResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)      # not tied to one output
    divergences: set[str] = field(default_factory=set)    # ids whose relaxation applied
    device: str = "auto"
    result: Any = None                                     # the compiled result
    bounds: list | None = None                             # per result leaf (bounds.Bound)
    numpy_error: BaseException | None = None               # what NumPy raised, if it did

    @property
    def ok(self) -> bool:
        return not self.problems and all(leaf.ok for leaf in self.leaves)

    def report(self) -> str:
        head = (f"{self.name}({self.signature}) compiled for device={self.device!r} "
                f"{'matches' if self.ok else 'does not match'} NumPy")
        lines = [head]
        lines += [f"  {p}" for p in self.problems]
        for leaf in self.leaves:
            for p in leaf.problems:
                lines.append(f"  {leaf.path}: {p}" if not p.startswith("  ") else p)
            for note in leaf.notes:
                lines.append(f"  {leaf.path}: unverifiable: {note}")
        unver = sum(leaf.unverifiable for leaf in self.leaves)
        if unver:
            total = sum(leaf.size for leaf in self.leaves)
            lines.append(f"  ({unver} of {total} result elements were unverifiable: their "
                         f"value is order- or platform-dependent)")
        if self.divergences:
            lines.append("  divergences applied: " + ", ".join(sorted(self.divergences)) +
                         " (docs/divergences.md)")
        return "\n".join(lines)


# ============================================================================================
# Running
# ============================================================================================

def _numpy_call(fn: Callable, args: Sequence[Any]) -> Any:
    copies = _private_copies(args)   # (arrays inside dicts and lists too: an SGD step's)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*copies)


def _private_copies(args: Sequence[Any]) -> list[Any]:
    """``args`` with every NumPy array (in any pytree) replaced by a copy of the same
    layout: a view keeps its strides and offset into a copy of its base, and views of one
    base share one copy, so the compiled call sees the strides and aliasing it was given.
    A ``np.random.Generator`` is copied too (in its state): the caller's does not advance."""
    bases: dict[int, np.ndarray] = {}

    def copy(a: Any) -> Any:
        if isinstance(a, np.random.Generator):
            return deepcopy(a)
        if not isinstance(a, np.ndarray) or type(a) is not np.ndarray:
            return a
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if base.base is not None or not base.flags.c_contiguous or a.size == 0:
            return np.array(a, order="K", copy=True)   # memory not an ndarray's own
        if id(base) not in bases:
            bases[id(base)] = base.copy()
        twin = bases[id(base)]
        offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        out = np.ndarray(a.shape, a.dtype, twin, offset, a.strides)
        out.flags.writeable = a.flags.writeable
        return out

    leaves, rebuild = pytree.flatten(list(args), is_array_leaf)
    return list(pytree.unflatten(rebuild, [copy(leaf) for leaf in leaves]))


def describe_args(args: Sequence[Any]) -> str:
    from .strategies import layout_of
    parts = []
    for a in args:
        if isinstance(a, np.ndarray):
            lay = layout_of(a)
            lay_s = "" if lay is None or lay.is_c() else f" ({lay.describe()})"
            parts.append(f"{a.dtype}{list(a.shape)}{lay_s}")
        elif isinstance(a, np.generic):
            parts.append(f"np.{a.dtype}({a!r})")
        else:
            parts.append(repr(a) if len(repr(a)) < 40 else type(a).__name__)
    return ", ".join(parts)


def _error_class(exc: BaseException) -> type[BaseException]:
    for cls in (OverflowError, np.exceptions.AxisError, IndexError, ValueError, TypeError,
                ZeroDivisionError):
        if isinstance(exc, cls):
            return cls
    return type(exc)


def _graph_has_int_power(graph: Graph) -> bool:
    return any(n.op == "power" and n.dtype.kind in "iu" for n in graph.nodes())


def compare_with_numpy(fn: Callable, *args: Any, rtol: float | None = None,
                       atol: float | None = None, device: str | None = None,
                       reference: Callable | None = None, compiled: Any = None,
                       draws_reach_numpy: bool = False) -> Comparison:
    """Compare ``tracearray.compile(fn)(*args)`` with NumPy's ``fn(*args)`` (or
    ``reference(*args)``). Compile errors of ``fn`` propagate; value differences are returned
    in the ``Comparison`` (see ``assert_matches_numpy``). A result that depends on random
    draws made inside ``fn`` is checked against the traced graph's draws, not NumPy's
    numbers (divergence random-bit-stream), unless ``draws_reach_numpy``: the draws reach
    the results only through values that do not depend on the bit stream (the fuzzer's
    programs), so NumPy's values are the specification there too."""
    import tracearray
    dev = device or "auto"
    cf = compiled if compiled is not None else tracearray.compile(fn, device=dev)
    name = getattr(fn, "__name__", "fn")
    cmp = Comparison(name, describe_args(args), device=dev)
    ref_fn = reference if reference is not None else fn
    try:
        want = _numpy_call(ref_fn, args)
    except Exception as exc:   # noqa: BLE001 -- NumPy's error is the specification
        cmp.numpy_error = exc
        _compare_errors(cf, args, exc, cmp)
        return cmp
    lowered = cf.lower(*args)
    # the compiled call writes into copies: a function that updates an argument must leave
    # the caller's arrays, and the values the graph's bounds are evaluated on, as given
    got = cf(*_private_copies(args))
    graph = lowered.graph
    leaves_in, _ = pytree.flatten(list(args), is_array_leaf)
    # complex arguments are graph inputs as their interleaved real pairs
    # (a Generator is the 0-d uint64 key the call draws from it: the compiled call drew it
    # from a copy of the generator, so another copy gives the graph the same key)
    inputs = [np.array(deepcopy(v).bit_generator.random_raw(), np.uint64)
              if isinstance(v, np.random.Generator) else pair_view(np.asarray(v))
              for v in leaves_in]
    bound_graph: Graph | None = graph
    reads_globals = cf
    if reference is not None:
        try:
            bound_graph = trace_function(reference, args, {}, frozenset(), frozenset()).graph
            reads_globals = tracearray.compile(reference, device=dev)
        except Exception:   # noqa: BLE001 -- an untraceable reference: fallback tolerances
            bound_graph = None
    if bound_graph is not None and bound_graph.globals:
        # the global arrays the function reads are its graph's last inputs
        inputs += reads_globals.global_inputs(bound_graph)
    out_bounds: list[_bounds.Bound] | None = None
    unbounded = False
    if bound_graph is not None:
        try:
            # on the GPU, FFTs are cuFFT's and small solves cuBLAS's (gpu-fft-rounding,
            # gpu-linalg-rounding)
            target = _target(cf)
            library = _bounds.LIBRARY_OPS_CUDA if target == "cuda" else frozenset()
            out_bounds, used = _bounds.propagate(bound_graph, inputs, TOLERANCES, library)
            cmp.divergences |= used
        except (IndexError, ValueError):
            # the graph holds the compiled function's data-dependent sizes; where NumPy's
            # values give other counts (soak cpu-2026-12-02-g, program 7265: a mask over a
            # cast of inf and NaN to uint32) it cannot be evaluated on them
            if reference is not None or not _data_sizes_uncertain(fn, args, inputs):
                raise
            unbounded = True
    cmp.result, cmp.bounds = got, out_bounds
    _compare_trees(got, want, out_bounds, bound_graph, rtol, atol, cmp,
                   lambda: unbounded or _data_sizes_uncertain(fn, args, inputs), unbounded,
                   draws_reach_numpy)
    return cmp


def _data_sizes_uncertain(fn: Callable, args: Sequence[Any], inputs: list[np.ndarray]
                          ) -> bool:
    """Whether a size the data decides (``x[mask]``, ``np.nonzero``, ``np.unique``) is not
    determined by NumPy's values within the tolerances: each probe of the compiled function
    (the graph up to the size, traced as the compiled function traces it) is evaluated with
    bounds on NumPy's inputs, and a count that is not exact (a mask over an order-dependent
    float sum, a cast of NaN) makes the result's length, and so its shape, unverifiable."""
    sizes: tuple[int, ...] = ()
    try:
        for _ in range(64):
            trace = trace_function(fn, tuple(args), {}, frozenset(), frozenset(), sizes)
            if trace.probe is None:
                return False
            (count,), _used = _bounds.propagate(trace.graph, inputs, TOLERANCES)
            if count.top.any() or not count.exact.all():
                return True
            sizes += (int(np.asarray(count.value)),)
    except Exception:   # noqa: BLE001 -- an untraceable probe: no relaxation
        return False
    return False


def _target(cf: Any) -> str:
    """The device a compiled function runs on ("cpu" or "cuda")."""
    return getattr(cf, "_fixed_device", None) or \
        (cf._resolve_device() if hasattr(cf, "_resolve_device") else "cpu")


def _compare_errors(cf: Any, args: Sequence[Any], exc: BaseException, cmp: Comparison) -> None:
    """NumPy raised: the compiled call must raise the same kind of error, except where a
    divergence says it returns a value."""
    try:
        lowered = cf.lower(*args)
        cf(*args)
    except Exception as mine:   # noqa: BLE001
        if not isinstance(mine, _error_class(exc)):
            cmp.problems.append(f"NumPy raised {type(exc).__name__}: {exc}; the compiled "
                                f"function raised {type(mine).__name__}: {mine}")
        return
    if (isinstance(exc, ValueError) and "negative integer powers" in str(exc)
            and _graph_has_int_power(lowered.graph)):
        cmp.divergences.add("int-power-negative-exponent")
        return
    if (isinstance(exc, np.linalg.LinAlgError) and "did not converge" in str(exc)
            and _target(cf) == "cuda"
            and any(n.op in _bounds.SPECTRAL_OPS | _bounds.LSTSQ_OPS |
                    {"linalg.pinv", "linalg.lstsq_rank"}
                    for n in lowered.graph.nodes())):
        # LAPACK's SVD of a non-finite matrix: its error, NaNs or numbers as its code paths
        # fall; the GPU's Jacobi rotations give NaNs (gpu-spectral-basis)
        cmp.divergences.add("gpu-spectral-basis")
        return
    cmp.problems.append(f"NumPy raised {type(exc).__name__}: {exc}; the compiled function "
                        f"returned a value")


def _compare_trees(got: Any, want: Any, out_bounds: list[_bounds.Bound] | None,
                   graph: Graph | None, rtol: float | None, atol: float | None,
                   cmp: Comparison, sizes_uncertain: Callable[[], bool] = lambda: False,
                   unbounded: bool = False, draws_reach_numpy: bool = False) -> None:
    def leaf(x: Any) -> bool:
        return isinstance(x, (np.ndarray, np.generic))
    want = _python_scalars_as_numpy(want, got, cmp)
    g_leaves, g_tree = pytree.flatten(got, leaf)
    w_leaves, w_tree = pytree.flatten(want, leaf)
    if _tree_shape(g_tree) != _tree_shape(w_tree):
        cmp.problems.append(f"result structure {_tree_str(g_tree)} != NumPy's {_tree_str(w_tree)}")
        return
    consts = _tree_consts(g_tree), _tree_consts(w_tree)
    if not _consts_equal(*consts):
        cmp.problems.append(f"non-array results {consts[0]} != NumPy's {consts[1]}")
    paths = _leaf_paths(w_tree)
    drawn = _drawn_results(graph) if out_bounds is not None and graph is not None and \
        not draws_reach_numpy else []
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        res = LeafResult(paths[i], size=int(np.size(w)))
        cmp.leaves.append(res)
        b = out_bounds[i] if out_bounds is not None else None
        if i < len(drawn) and drawn[i]:
            res.drawn = True
        if unbounded:   # uncertain sizes and no bounds: only the dtype and rank are checked
            g_arr, w_arr = np.asarray(g), np.asarray(w)
            if g_arr.dtype != w_arr.dtype or g_arr.ndim != w_arr.ndim:
                res.problems.append(f"got {g_arr.dtype}{list(g_arr.shape)}, NumPy returns "
                                    f"{w_arr.dtype}{list(w_arr.shape)}")
                continue
            res.unverifiable = res.size = max(g_arr.size, w_arr.size)
            res.notes.append("a size the data decides depends on values that are order- or "
                             "platform-dependent, and NumPy's values give another: no bound")
            continue
        if _nan_quantile_dtype(g, w, graph):
            # divergence nan-quantile-dtype: NumPy's dtype was its first slice's
            cmp.divergences.add("nan-quantile-dtype")
            g_arr, w_arr = np.asarray(g), np.asarray(w)
            if (np.isnan(g_arr) != np.isnan(w_arr)).any():
                res.problems.append(f"NaN positions differ (got {g_arr.dtype}, NumPy "
                                    f"{w_arr.dtype}: divergence nan-quantile-dtype)")
            res.unverifiable = int((~np.isnan(w_arr)).sum())
            res.notes.append(f"got {g_arr.dtype}, NumPy returns {w_arr.dtype}: NumPy's "
                             f"nan-quantile result took an all-NaN first slice's dtype; only "
                             f"NaN positions are compared")
            continue
        _compare_leaf(g, w, b, rtol, atol, res, cmp, sizes_uncertain)


def _drawn_results(graph: Graph) -> list[bool]:
    """Which of the graph's results depend on a draw of tracearray's generator (an op that
    cites divergence random-bit-stream): NumPy's own numbers come from another stream, so
    such a result is checked against the traced graph's draws (its shape and dtype against
    NumPy's), not against NumPy's values."""
    drawn: set[Node] = set()
    for node in graph.nodes():
        if "random-bit-stream" in OPS[node.op].divergences or \
                any(a in drawn for a in node.args):
            drawn.add(node)
    return [r in drawn for r in graph.results]


_NAN_ORDER_STATISTICS = ("nanmedian", "nanquantile", "nanpercentile")


def _nan_quantile_dtype(got: Any, want: Any, graph: Graph | None) -> bool:
    """Whether a float result is wider than NumPy's because of NumPy's data-dependent dtype
    of nanmedian/nanquantile/nanpercentile along axes it applies its 1-d function to one
    slice at a time (``np.apply_along_axis``, whose result takes the first slice's dtype:
    the input's for an all-NaN slice, float64 otherwise; divergence nan-quantile-dtype)."""
    g, w = np.asarray(got), np.asarray(want)
    if graph is None or g.shape != w.shape or g.dtype.kind != "f" or w.dtype.kind != "f" \
            or g.dtype.itemsize <= w.dtype.itemsize:
        return False
    return any(n.op == "order_statistic" and n.attr("func") in _NAN_ORDER_STATISTICS
               for n in graph.nodes())


_PY_KINDS = {bool: "b", int: "iu", float: "f"}


def _python_scalars_as_numpy(want: Any, got: Any, cmp: Comparison) -> Any:
    """Where NumPy returns a Python bool/int/float (np.allclose, np.array_equal) and the
    compiled function the NumPy scalar of that kind (divergence python-scalar-results), the
    Python value as that NumPy scalar, so that values are compared."""
    kinds = _PY_KINDS.get(type(want))
    if kinds is not None and isinstance(got, np.generic) and got.dtype.kind in kinds:
        cmp.divergences.add("python-scalar-results")
        return got.dtype.type(want)
    if isinstance(want, (tuple, list)) and isinstance(got, (tuple, list)) and \
            len(want) == len(got):
        items = [_python_scalars_as_numpy(w, g, cmp) for w, g in zip(want, got)]
        return type(want)(*items) if hasattr(want, "_fields") else type(want)(items)
    return want


def _compare_leaf(got: Any, want: Any, b: _bounds.Bound | None, rtol: float | None,
                  atol: float | None, res: LeafResult, cmp: Comparison,
                  sizes_uncertain: Callable[[], bool] = lambda: False) -> None:
    if (isinstance(want, np.ndarray) and want.ndim == 0 and isinstance(got, np.generic)
            and got.dtype == want.dtype):
        cmp.divergences.add("zero-d-results-are-scalars")
    elif isinstance(want, np.ndarray) != isinstance(got, np.ndarray):
        kind = lambda x: "an ndarray" if isinstance(x, np.ndarray) else \
            f"a {type(x).__name__}"   # noqa: E731
        res.problems.append(f"got {kind(got)}, NumPy returns {kind(want)}")
        return
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype == w.dtype and g.ndim == w.ndim and g.shape != w.shape and sizes_uncertain():
        # a length the data decides, from values NumPy's own tolerances leave open
        res.unverifiable, res.size = max(g.size, w.size), max(g.size, w.size)
        res.notes.append(f"got {g.dtype}{list(g.shape)}, NumPy returns {w.dtype}"
                         f"{list(w.shape)}: the length depends on values that are order- or "
                         f"platform-dependent (a mask or count of inexact values)")
        return
    if g.shape != w.shape or g.dtype != w.dtype:
        res.problems.append(f"got {g.dtype}{list(g.shape)}, NumPy returns {w.dtype}{list(w.shape)}")
        return
    if w.dtype.kind == "c":
        _compare_complex_leaf(g, w, b, rtol, atol, res, cmp)
        return
    if b is not None and (b.value.shape != w.shape or b.value.dtype != w.dtype):
        res.problems.append(f"the traced graph gives {b.value.dtype}{list(b.value.shape)}, "
                            f"NumPy returns {w.dtype}{list(w.shape)} (a tracer bug)")
        return
    if b is None:
        b = _fallback_bound(w, rtol, atol)
    bad_got = _outside(g, b)
    # NumPy's own result against the bound of the traced graph: the same rule (np.clip's
    # choice of zero, divergence clip-signed-zero, is in the bound of its maximum/minimum).
    bad_want = _outside(w, b)
    if rtol is not None or atol is not None:
        user = _close(g, w, rtol or 0.0, atol or 0.0)
        bad_got &= ~user
        bad_want &= ~user
    if b.verify is not None:   # a whole-result check of what is unverifiable element-wise
        bad_got = bad_got | np.broadcast_to(b.verify(g), bad_got.shape)
    res.unverifiable = int(b.top.sum())
    bad_want = _unless_drawn(bad_want, res, cmp)
    if bad_got.any():
        res.problems.append(_describe(g, w, b, bad_got, "compiled result"))
    if bad_want.any():
        res.problems.append(_describe(b.value, w, b, bad_want,
                                      "NumPy's own result (the traced graph disagrees with "
                                      "NumPy: a tracer bug)", got="the traced graph gives"))


def _unless_drawn(bad_want: np.ndarray, res: LeafResult, cmp: Comparison) -> np.ndarray:
    """NumPy's own values are not the compiled draws' (``_drawn_results``): none of a drawn
    result's differences from them is a tracer bug."""
    if not res.drawn:
        return bad_want
    cmp.divergences.add("random-bit-stream")
    res.notes.append("drawn from tracearray's random generator: checked against the traced "
                     "graph's draws, not NumPy's numbers (divergence random-bit-stream)")
    return np.zeros_like(bad_want)


# An element of a complex result passes within this many eps of |z| of NumPy's value
# (divergence complex-rounding): NumPy's complex loops round differently per machine.
COMPLEX_NORMWISE_EPS = 8


def _compare_complex_leaf(g: np.ndarray, w: np.ndarray, b: _bounds.Bound | None,
                          rtol: float | None, atol: float | None, res: LeafResult,
                          cmp: Comparison) -> None:
    """A complex result: its interleaved real pairs against the traced graph's bound of
    them, each element also passing normwise (``COMPLEX_NORMWISE_EPS``)."""
    gp, wp = _pairs(g), _pairs(w)
    if b is not None and (b.value.shape != wp.shape or b.value.dtype != wp.dtype):
        res.problems.append(f"the traced graph gives {b.value.dtype}{list(b.value.shape)}, "
                            f"NumPy returns {w.dtype}{list(w.shape)} (a tracer bug)")
        return
    if b is None:
        b = _fallback_bound(wp, rtol, atol)
    eps = np.finfo(wp.dtype).eps
    graph_value = np.empty(w.shape, np.complex128)
    graph_value.real, graph_value.imag = b.value[..., 0], b.value[..., 1]

    def normwise(x: np.ndarray, ref: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            x, ref = x.astype(np.complex128), ref.astype(np.complex128)
            ok = np.abs(x - ref) <= COMPLEX_NORMWISE_EPS * eps * np.abs(ref)
            if rtol is not None or atol is not None:
                ok |= np.abs(x - ref) <= (atol or 0.0) + (rtol or 0.0) * np.abs(ref)
            return ok & np.isfinite(x) & np.isfinite(ref)

    bad_got = _outside(gp, b).any(axis=-1) & ~normwise(g, w)
    if b.verify is not None:   # a whole-result check (of the pairs) where elements cannot be
        bad_got = bad_got | np.broadcast_to(b.verify(gp), gp.shape).any(axis=-1)
    bad_want = _outside(wp, b).any(axis=-1) & ~normwise(w, graph_value)
    if (_outside(gp, b).any(axis=-1) | _outside(wp, b).any(axis=-1)).any():
        cmp.divergences.add("complex-rounding")
    res.unverifiable = int(b.top.any(axis=-1).sum())
    bad_want = _unless_drawn(bad_want, res, cmp)
    if bad_got.any():
        res.problems.append(_describe_complex(g, w, bad_got, "compiled result"))
    if bad_want.any():
        res.problems.append(_describe_complex(graph_value, w, bad_want,
                                              "NumPy's own result (the traced graph disagrees "
                                              "with NumPy: a tracer bug)"))


def _pairs(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return np.stack([x.real, x.imag], axis=-1)


def _describe_complex(x: np.ndarray, w: np.ndarray, bad: np.ndarray, what: str) -> str:
    lines = [f"{w.dtype}{list(w.shape)}: {int(bad.sum())} of {bad.size} elements of the "
             f"{what} differ; first mismatches:"]
    for idx in np.argwhere(np.atleast_1d(bad))[:MAX_REPORTED]:
        t = tuple(int(i) for i in idx)[:np.ndim(w)]
        lines.append(f"    at {t}: got {np.asarray(x)[t]!r}, NumPy {np.asarray(w)[t]!r}")
    return "\n".join(lines)


def _outside(x: np.ndarray, b: _bounds.Bound) -> np.ndarray:
    """Elements of ``x`` that the bound does not allow."""
    v = b.value
    if v.dtype.kind != "f":
        return b.exact & (x != v)
    xn, vn = np.isnan(x), np.isnan(v)
    same = (xn & vn) | ((x == v) & (np.signbit(x) == np.signbit(v)))
    bad = b.exact & ~same
    inexact = ~b.exact & ~b.top
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
        bad |= inexact & ~((x64 >= b.lo) & (x64 <= b.hi))
    return bad


def _close(g: np.ndarray, w: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    if w.dtype.kind != "f":
        return np.asarray(g == w)
    with np.errstate(all="ignore"):
        return np.isclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                          equal_nan=True) | ((g == w) & ~np.isnan(w))


def _fallback_bound(w: np.ndarray, rtol: float | None, atol: float | None) -> _bounds.Bound:
    b = _bounds.exact_bound(w)
    if w.dtype.kind == "f":
        r, a = FALLBACK_RTOL_ATOL[w.dtype]
        r, a = (rtol if rtol is not None else r), (atol if atol is not None else a)
        w64 = w.astype(np.float64)
        tol = a + r * np.abs(w64)
        finite = np.isfinite(w64)
        b.exact = ~finite
        b.lo = np.where(finite, w64 - tol, w64)
        b.hi = np.where(finite, w64 + tol, w64)
        b.why = f"rtol={r:g}, atol={a:g} (untraceable reference)"
    return b


def _fmt(x: np.generic) -> str:
    if isinstance(x, np.floating):
        bits = np.asarray(x).view(f"u{x.dtype.itemsize}")
        return f"{str(x)} ({x.dtype} 0x{int(bits):0{2 * x.dtype.itemsize}x})"
    return repr(x.item()) if hasattr(x, "item") else repr(x)


def _describe(x: np.ndarray, w: np.ndarray, b: _bounds.Bound, bad: np.ndarray, what: str,
              got: str = "got") -> str:
    lines = [f"{type_str_of(x)}: {int(bad.sum())} of {bad.size} elements of the {what} "
             f"differ; first mismatches:"]
    for idx in np.argwhere(np.atleast_1d(bad))[:MAX_REPORTED]:
        t = tuple(int(i) for i in idx)[:x.ndim]
        xv, wv = x[t], w[t]
        if b.exact[t] or b.lo is None:
            allowed = "exactly NumPy's value" + (" (sign of zero included)"
                                                 if w.dtype.kind == "f" else "")
        else:
            lo, hi = (str(w.dtype.type(v)) for v in (b.lo[t], b.hi[t]))
            allowed = f"[{lo}, {hi}] ({b.why})"
        lines.append(f"    at {t}: {got} {_fmt(xv)}, NumPy {_fmt(wv)}; allowed {allowed}")
    return "\n".join(lines)


def type_str_of(x: np.ndarray) -> str:
    return f"{x.dtype}{list(x.shape)}"


# --- result trees ----------------------------------------------------------------------------

def _tree_shape(t: Any) -> Any:
    if t[0] == "leaf":
        return ("leaf",)
    if t[0] == "const":
        return ("const",)
    if t[0] in ("dict", "namedtuple"):   # (kind, keys or type, children)
        return (t[0], t[1], tuple(_tree_shape(c) for c in t[2]))
    if t[0] == "dataclass":              # (kind, type, names, children)
        return (t[0], t[1], t[2], tuple(_tree_shape(c) for c in t[3]))
    return (t[0], tuple(_tree_shape(c) for c in t[1]))


def _tree_consts(t: Any) -> list[Any]:
    if t[0] == "leaf":
        return []
    if t[0] == "const":
        return [t[1]]
    children = t[3] if t[0] == "dataclass" else t[2] if t[0] in ("dict", "namedtuple") \
        else t[1]
    return [c for ch in children for c in _tree_consts(ch)]


def _consts_equal(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b))


def _tree_str(t: Any) -> str:
    return {"leaf": "array", "const": "value"}.get(t[0], t[0])


def _leaf_paths(t: Any, prefix: str = "result") -> list[str]:
    if t[0] == "leaf":
        return [prefix]
    if t[0] == "const":
        return []
    if t[0] == "dict":
        return [p for k, c in zip(t[1], t[2]) for p in _leaf_paths(c, f"{prefix}[{k!r}]")]
    if t[0] == "namedtuple":
        return [p for name, c in zip(t[1]._fields, t[2])
                for p in _leaf_paths(c, f"{prefix}.{name}")]
    if t[0] == "dataclass":
        return [p for name, c in zip(t[2], t[3]) for p in _leaf_paths(c, f"{prefix}.{name}")]
    return [p for i, c in enumerate(t[1]) for p in _leaf_paths(c, f"{prefix}[{i}]")]


# ============================================================================================
# The assertion
# ============================================================================================

def assert_matches_numpy(fn: Callable, *args: Any, rtol: float | None = None,
                         atol: float | None = None, device: str | None = None,
                         reference: Callable | None = None) -> Comparison:
    """Compile ``fn``, run it and NumPy's ``fn`` (or ``reference``) on ``args`` and raise
    ``MismatchError`` with a readable report unless the results agree: same structure, type,
    shape, dtype, NaN positions and values within the tolerance table (see the module
    docstring). Compile errors (e.g. ``UnsupportedOperationError``) propagate. If NumPy
    raises, the compiled function must raise the same kind of error. A result that depends
    on random draws made inside ``fn`` is checked against the traced graph's draws (NumPy's
    shape and dtype, tracearray's numbers: divergence random-bit-stream).

    :param fn: a NumPy function (not compiled: this compiles it).
    :param args: its arguments, as for a call.
    :param rtol: widens the automatic bounds: an element also passes when
        ``|got - want| <= atol + rtol * |want|``; it never makes them stricter.
    :param atol: see ``rtol``.
    :param device: ``"cpu"``, ``"cuda"`` or None (tracearray's default, ``"auto"``).
    :param reference: the function whose NumPy result is expected, when it is not ``fn``
        itself (an optimised ``fn`` checked against a plain one).
    :returns: the ``Comparison``; its ``divergences`` name the deliberate divergences that
        applied, and ``report()`` is the text.
    """
    cmp = compare_with_numpy(fn, *args, rtol=rtol, atol=atol, device=device,
                             reference=reference)
    if not cmp.ok:
        raise MismatchError(cmp)
    return cmp


def families_table_markdown() -> str:
    """The tolerance table as markdown (docs/testing.md)."""
    t = TOLERANCES
    rows = [
        ("exact", "`+ - * /`, sqrt, comparisons, maximum/minimum, rounding, casts, bit ops, "
                  "where, clip, movement, every integer and bool op",
         [f"{t.ulps('exact', d)} ulp" for d in FLOATS], "—"),
        ("transcendental", "exp, log, sin, power, hypot, arctan2, ... "
                           "(the ops whose registry accuracy is transcendental)",
         [f"{t.ulps('transcendental', d)} ulp" for d in FLOATS], "`transcendental-ulps`"),
        ("sum", "sum, mean, var, std: \\|got − Σx\\| ≤ s·d(n)·eps·Σ\\|x\\| + 1 ulp, "
                "d(n) = min(n − 1, min(n, 1024) + bit_length(⌈2n/1024⌉) + 7) "
                "(blocks summed pairwise); cumsum: d = k at the k-th output",
         [f"s = {t.slack('sum', d):g}" for d in FLOATS],
         "`float-sum-reassociation`, `float16-accumulation`"),
        ("prod", "prod, cumprod: \\|got − Πx\\| ≤ s·n·eps·\\|Πx\\| + 1 ulp (no over/underflow)",
         [f"s = {t.slack('prod', d):g}" for d in FLOATS], "`float-prod-reassociation`"),
        ("matmul", "matmul, dot: \\|got − AB\\| ≤ s·K·eps·(\\|A\\|·\\|B\\|) + 1 ulp",
         [f"s = {t.slack('matmul', d):g}" for d in FLOATS], "`matmul-blocking`"),
    ]
    out = ["| family | ops and bound | float16 | float32 | float64 | divergence |",
           "|---|---|---|---|---|---|"]
    for fam, ops, cells, div in rows:
        out.append(f"| {fam} | {ops} | " + " | ".join(cells) + f" | {div} |")
    assert all(d in BY_ID for ids in FAMILY_DIVERGENCES.values() for d in ids)
    return "\n".join(out)


__all__ = ["TOLERANCES", "ToleranceTable", "FALLBACK_RTOL_ATOL", "Comparison", "LeafResult",
           "MismatchError", "assert_matches_numpy", "compare_with_numpy",
           "families_table_markdown"]
