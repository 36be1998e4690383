"""Primitives and composites together: what tracearray supports, by the names users write.

``entries()`` lists every NumPy ufunc, every NumPy function the tracer can dispatch, every
ndarray method and property, the Python operators and the indexing forms, each with how it is
implemented (a primitive of ``tracearray.ops``, a composite of ``trace.composites``, NumPy's
own implementation run on tracers, or a tracer method), ``"tried"`` for a NumPy function
without an entry whose Python implementation the tracer runs when it is called (untested: it
works when that code uses only what traces), or ``None`` when it is refused.
``render_markdown()`` is ``docs/supported.md`` (a test checks that the page is current).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ops import OPS, UFUNC_OPS, Kind, reducer_of_ufunc, scan_of_ufunc
from .composites import COMPOSITES, Composite
from .dispatch import REDUCE_COMPOSITES, refusal
from .tracer import Tracer


@dataclass(frozen=True)
class Entry:
    name: str                    # as users write it: np.add, np.diff, ndarray.sum, x + y
    kind: str                    # ufunc | function | method | property | operator | indexing
    how: str | None              # primitive | composite | numpy | tracer | tried | None (refused)
    dtypes: str = ""             # the dtypes it is tested on ("" where it does not apply)
    notes: str = ""

    @property
    def supported(self) -> bool:
        return self.how not in (None, "tried")


def _dtype_text(dtypes: Any) -> str:
    kinds = {np.dtype(d).kind for d in dtypes}
    names = []
    if "b" in kinds:
        names.append("bool")
    if "i" in kinds and "u" in kinds:
        names.append("int")
    elif "i" in kinds:
        names.append("signed int")
    elif "u" in kinds:
        names.append("unsigned int")
    if "f" in kinds:
        names.append("float")
    return ", ".join(names)


def _ufunc_entries() -> list[Entry]:
    out = []
    seen: set[int] = set()
    # NumPy's own public names (``np.__all__``): a package imported beside it may add its own
    # (numexpr sets ``np.expm1x``), and the table is NumPy's
    public = sorted(set(np.__all__))
    for attr in public:
        uf = getattr(np, attr)
        if not isinstance(uf, np.ufunc) or id(uf) in seen:
            continue
        seen.add(id(uf))
        name = f"np.{uf.__name__}"
        aliases = sorted(a for a in public if getattr(np, a) is uf and a != uf.__name__)
        note = f"alias: {', '.join('np.' + a for a in aliases)}" if aliases else ""
        methods = [m for m, ok in (("reduce", reducer_of_ufunc(uf)),
                                   ("reduceat", reducer_of_ufunc(uf)),
                                   ("accumulate", scan_of_ufunc(uf) or uf in (
                                       np.logical_or, np.logical_and, np.fmax, np.fmin)))
                   if ok]
        if uf in UFUNC_OPS or uf is np.matmul:
            spec = OPS[UFUNC_OPS[uf]] if uf in UFUNC_OPS else OPS["matmul"]
            extra = [note] if note else []
            if methods:
                extra.append(f"also .{', .'.join(methods)}")
            if not spec.accuracy.exact:
                extra.append(f"{spec.accuracy.family} accuracy")
            out.append(Entry(name, "ufunc", "primitive", _dtype_text(spec.domain.dtypes),
                             "; ".join(extra)))
        elif uf in COMPOSITES:
            c = COMPOSITES[uf]
            also = "also .reduce (not float16; divergence logaddexp-reduce)" \
                if uf in REDUCE_COMPOSITES else ""
            out.append(Entry(name, "ufunc", "composite", _dtype_text(c.dtypes),
                             "; ".join(x for x in (note, c.notes, also) if x)))
        else:
            out.append(Entry(name, "ufunc", None, "", note or _why_not(uf)))
    return out


_WHY_NOT = {
    "isnat": "datetime only",
}


def _why_not(obj: Any) -> str:
    return _WHY_NOT.get(getattr(obj, "__name__", ""), "")


def _array_functions() -> list[tuple[str, Any]]:
    """NumPy's functions that dispatch through ``__array_function__`` (the ones a tracer
    argument reaches), by public name, in the main namespace and np.linalg / np.fft."""
    out = []
    seen: set[int] = set()
    for prefix, mod in (("np", np), ("np.linalg", np.linalg), ("np.fft", np.fft)):
        for attr in sorted(dir(mod)):
            if attr.startswith("_"):
                continue
            fn = getattr(mod, attr)
            if isinstance(fn, np.ufunc) or not callable(fn) or id(fn) in seen:
                continue
            if getattr(fn, "_implementation", None) is None:
                continue
            seen.add(id(fn))
            out.append((f"{prefix}.{attr}", fn))
    return out


def _function_entries() -> list[Entry]:
    out = []
    for name, fn in _array_functions():
        c: Composite | None = COMPOSITES.get(fn)
        if c is not None:
            how = "numpy" if c.uses_numpy_implementation else "composite"
            out.append(Entry(c.name if c.name.count(".") > 1 else name, "function", how,
                             _dtype_text(c.dtypes), c.notes))
        else:
            reason = refusal(fn)
            out.append(Entry(name, "function", "tried" if reason is None else None, "",
                             reason or ""))
    out.append(Entry("np.vectorize", "function", "tracer", "bool, int, float",
                     "the function traced once on an element (trace/vectorize.py) and applied "
                     "to the whole arrays when its steps are element by element (ufuncs, "
                     "np.where, casts); NumPy's result dtype, values computed on Python "
                     "floats and ints as NumPy's loop does; with signature=, NumPy's loop on "
                     "traced core slices (1,024 calls at most); a branch on an element's "
                     "value (if, Python's max beside a number, int(s > 0)) is traced both "
                     "ways and joined by a select (6 in one call at most; the output dtype "
                     "the first elements' way gives, found when the function runs); "
                     "math.* of an element raises ConcretizationError (use np.sin)"))
    known = {e.name for e in out}
    for obj, c in COMPOSITES.items():   # composites of functions outside those namespaces
        if not isinstance(obj, np.ufunc) and c.name not in known:
            out.append(Entry(c.name, "function", "numpy" if c.uses_numpy_implementation
                             else "composite", _dtype_text(c.dtypes), c.notes))
    return out


_NOT_ON_TRACERS = {"tofile", "dump", "dumps", "tobytes", "tostring", "setflags", "resize",
                   "getfield", "setfield", "byteswap", "newbyteorder", "ctypes", "data",
                   "base", "device", "to_device"}


def _method_entries() -> list[Entry]:
    out = []
    for attr in sorted(dir(np.ndarray)):
        if attr.startswith("_"):
            continue
        is_property = not callable(getattr(np.ndarray, attr))
        kind = "property" if is_property else "method"
        defined = any(attr in vars(k) for k in type.mro(Tracer) if k is not object)
        how = "tracer" if defined else None
        note = ""
        if attr in ("item", "tolist", "__array__"):
            how, note = None, "needs the concrete value (ConcretizationError)"
        if attr == "ptp":
            how, note = None, "removed from ndarray in NumPy 2 (np.ptp works)"
        if attr == "view":
            note = ("the same bytes as another dtype: of the same item size (float32 as "
                    "int32, bool as uint8) or another on the last axis (float32 as uint8, "
                    "float pairs as complex, complex arguments and FFT results as floats), "
                    "writable like NumPy's; bytes as bool, a complex result of arithmetic "
                    "as another dtype and ndarray subclasses are refused")
        out.append(Entry(f"ndarray.{attr}", kind, how, "", note))
    return out


_OPERATORS = [
    ("x + y", np.add), ("x - y", np.subtract), ("x * y", np.multiply), ("x / y", np.true_divide),
    ("x // y", np.floor_divide), ("x % y", np.remainder), ("x ** y", np.power),
    ("divmod(x, y)", np.divmod), ("x @ y", np.matmul), ("-x", np.negative), ("+x", np.positive),
    ("abs(x)", np.absolute), ("~x", np.invert), ("x & y", np.bitwise_and),
    ("x | y", np.bitwise_or), ("x ^ y", np.bitwise_xor), ("x << y", np.left_shift),
    ("x >> y", np.right_shift), ("x < y", np.less), ("x <= y", np.less_equal),
    ("x > y", np.greater), ("x >= y", np.greater_equal), ("x == y", np.equal),
    ("x != y", np.not_equal),
]


def _operator_entries() -> list[Entry]:
    out = [Entry(text, "operator", "primitive" if uf in UFUNC_OPS or uf is np.matmul
                 else "composite", "", f"np.{uf.__name__}") for text, uf in _OPERATORS]
    out.append(Entry("x += y (and every augmented assignment)", "operator", "tracer", "",
                     "writes x's memory as NumPy does: every view and name of it sees the "
                     "update; an argument's is written back to the caller's array"))
    out.append(Entry("len(x), iteration over x", "operator", "tracer"))
    out.append(Entry("np.ndenumerate(x), np.fromiter(values, dtype)", "operator", "tracer", "",
                     "unrolled as iteration over x is: each element a traced 0-d value; "
                     "np.nditer of a traced array is refused by name"))
    out.append(Entry("if x, while x, bool(x), and/or/not of a one-element value; int(x), "
                     "float(x), complex(x), x.item(), np.float32(x) (NumPy's scalar types) "
                     "of one", "operator", "tracer", "",
                     "staged: at each call a probe computes the value (to the bit), and the "
                     "function is traced once per value seen, compiling nothing new (each "
                     "call runs its probes and waits for them; at most 64 values a call, so "
                     "a while loop of more iterations is refused); inside np.vectorize's "
                     "function a branch is traced both ways (see np.vectorize), float() "
                     "raises ConcretizationError"))
    out.append(Entry("Python's max(a, b, ...) / min(...) of traced NumPy scalars of one dtype "
                     "(or a list or generator of them)", "operator", "tracer", "",
                     "traced selects in Python's fold (if item > best: the first of ties, "
                     "NaN only where it comes first), no data-dependent value; other argument "
                     "kinds (a Python number beside a traced one, mixed dtypes, a traced "
                     "array) compare as bool(x) does"))
    out.append(Entry("x.tolist(), print(x), str(x), f'{x}' of an array", "operator", None,
                     "", "needs the concrete values (ConcretizationError); str() / format() "
                     "of a 0-d value is staged as float() is"))
    return out


_INDEXING = [
    ("x[i], x[i, j] (integers)", "tracer", ""),
    ("x[a:b:s, None, ...] (basic slicing)", "tracer", "any step, negative steps"),
    ("x[idx], x[i, :, j], x[[0, 2]] (integer arrays and lists)", "primitive",
     "gather: every NumPy form, fused into the consumer; out-of-range indices raise "
     "IndexError"),
    ("x[known_mask] (a boolean array known when tracing)", "primitive",
     "gather at its nonzero() positions"),
    ("x.flat[idx]", "tracer", ""),
    ("x[mask].sum(), np.abs(x[m] - y[m]).max(), x[rows].mean(axis=0), x[:, m].sum(1) "
     "(a traced boolean mask, reduced)", "tracer",
     "the reduction with where=mask, one kernel, no compaction"),
    ("x[mask] as an array (a traced boolean mask)", "tracer",
     "a data-dependent size: a probe kernel counts the selected elements, then the function "
     "is traced with that size (each distinct size once, cached)"),
    ("x[...] = v, x[i, :] = v, x[1:-1] += v (assignment, basic keys)", "tracer",
     "a select into the region, fused with what follows; through views (x.T[0] = v) too"),
    ("x[[0, 2]] = v, x[known_mask] = v (assignment, keys known when tracing)", "tracer",
     "NumPy's order for repeated indices"),
    ("x[mask] = v (assignment, a traced boolean mask)", "tracer",
     "a select; an array of values is placed by a prefix count of the mask; x[m] = y[m], "
     "x[m] += v, x[m] = f(x[m]) element by element"),
    ("x[idx] = v, x[i, :, j] = v, x[idx] += v (assignment, traced integer index arrays)",
     "primitive", "scatter: sequential along the index dimensions, parallel along the others; "
     "a repeated position keeps the last value, as in NumPy; out-of-range indices raise "
     "IndexError"),
    ("np.add.at(x, idx, v) and every unary and binary ufunc's .at", "primitive",
     "scatter: repeated positions accumulate in NumPy's order (float sums bit for bit), "
     "deterministic on both targets; values converted as np.asarray, the result cast back "
     "unsafely, as NumPy does"),
    ("x.flat[idx] = v, x.fill(v), x.put(...)", "tracer", ""),
    ("ufunc(..., out=o), reductions and scans with out=o; np.clip, np.round, np.fix, "
     "np.trace, np.concatenate and np.stack with out=o", "tracer",
     "o an argument, a global array or an array the function made; NumPy's casting rule "
     "and shape checks for each"),
]


def entries() -> list[Entry]:
    return (_ufunc_entries() + _function_entries() + _method_entries() + _operator_entries()
            + [Entry(t, "indexing", how, "", note) for t, how, note in _INDEXING])


_HOW = {"primitive": "yes (primitive)", "composite": "yes (composite)",
        "numpy": "yes (NumPy's implementation)", "tracer": "yes",
        "tried": "tried (NumPy's implementation, untested)", None: "no"}


def render_markdown() -> str:
    """docs/supported.md."""
    es = entries()
    n_yes = sum(e.supported for e in es)
    lines = [
        "# Supported NumPy operations",
        "",
        "Generated from the op registry (`tracearray/ops`: primitives; "
        "`tracearray/trace/composites`: NumPy functions built from them) by "
        "`tracearray.trace.registry.render_markdown()`; a test checks that this page is "
        "current. The CPU and GPU columns say where an entry runs: both targets share one "
        "code generator, so every supported entry runs on both, and is tested against NumPy "
        "by `tests/test_registry.py` (composites and ufuncs) or the per-op suites, on the CPU "
        "and (PTX, and on a GPU machine the GPU) for CUDA. Two limits are the GPU's own: an "
        "in-place update of a device-array argument (`x += y`, `x[...] = v`) whose elements "
        "overlap in memory (a zero stride) is refused, and copying a non-contiguous view of "
        "more than 8 dimensions (a reshape, or writing back an update) is refused (make it "
        "contiguous first).",
        "",
        "*yes (primitive)*: a graph operation with its own code; *yes (composite)*: built from "
        "primitives by tracearray; *yes (NumPy's implementation)*: NumPy's own Python code, "
        "run on traced values (with argument conversion passing them through) and tested; "
        "*tried (NumPy's implementation, untested)*: a NumPy function without an entry whose "
        "Python code runs on traced values when you call it: it compiles when that code uses "
        "only what traces, else `UnsupportedOperationError` names the function, what its code "
        "needed and your line; *no*: raises `UnsupportedOperationError` naming the call and "
        "your line.",
        "",
        f"**{n_yes} of {len(es)} names supported.**",
        "",
    ]
    titles = {"ufunc": "Universal functions", "function": "Functions",
              "method": "ndarray methods", "property": "ndarray properties",
              "operator": "Operators", "indexing": "Indexing"}
    for kind, title in titles.items():
        rows = [e for e in es if e.kind == kind]
        yes = sum(e.supported for e in rows)
        lines += [f"## {title} ({yes} of {len(rows)})", "",
                  "| name | supported | dtypes | CPU | GPU | notes |",
                  "|---|---|---|---|---|---|"]
        for e in rows:
            note = e.notes.replace("|", "\\|")
            where = {None: "no", "tried": "tried"}.get(e.how, "yes")
            lines.append(f"| `{e.name}` | {_HOW[e.how]} | {e.dtypes} | {where} | {where} "
                         f"| {note} |")
        lines.append("")
    lines += _random_section()
    return "\n".join(lines)


def _random_section() -> list[str]:
    """The random draws of ``trace/random.py`` (not registry entries: generator methods and
    the legacy ``np.random`` functions)."""
    from . import random as traced_random
    legacy = sorted(n for n in traced_random.LEGACY if n != "default_rng")
    return [
        "## Random draws", "",
        "Generated in the kernels (`tracearray/trace/random.py`): NumPy's distributions, "
        "parameters and dtypes, not NumPy's numbers (divergence `random-bit-stream`). Any "
        "other `np.random` function or generator method raises `UnsupportedOperationError`.",
        "", "| name | supported | notes |", "|---|---|---|",
        "| `np.random.default_rng(seed)` | yes | the same numbers at every call for a seed "
        "(an integer seed may be traced); no seed: fresh entropy per call |",
        "| a `np.random.Generator` argument | yes | a key drawn from it at every call (it "
        "advances) |",
        *(f"| `Generator.{n}` | yes | |" for n in traced_random.SUPPORTED_METHODS
          if n != "binomial"),
        "| `Generator.choice(..., replace=False)` | yes | an argsort of random keys "
        "(with `p=`: of Efraimidis-Spirakis keys) |",
        f"| `Generator.binomial`, `np.random.binomial` | n known while tracing, at most "
        f"{traced_random.BINOMIAL_TRIALS_MAX} trials | a sum of Bernoulli draws "
        f"(`binomial(1, keep)`: a dropout mask) |",
        f"| `np.random.{{{', '.join(legacy)}}}` | yes | NumPy's global state: "
        f"`np.random.seed` reproduces |", ""]


def composite_calls() -> list[tuple[Composite, str]]:
    """(composite, call) for every test call of every composite (tests/test_registry.py)."""
    return [(c, call) for c in COMPOSITES.values() for call in c.calls]


def primitive_calls() -> list[tuple[str, str]]:
    """(primitive, call) for the ufunc primitives, called by their NumPy name."""
    out = []
    for name, spec in sorted(OPS.items()):
        if spec.kind is Kind.ELEMENTWISE and spec.ufunc is not None:
            args = ", ".join(f"{{{i}}}" for i in range(spec.arity))
            out.append((name, f"np.{spec.ufunc.__name__}({args})"))
    return out


__all__ = ["Entry", "entries", "render_markdown", "composite_calls", "primitive_calls"]
