"""Random NumPy programs drawn from the op table, with matching inputs.

A ``Program`` is straight-line NumPy source -- ``def program(x0, x1): v0 = ...; return v3`` --
plus its input arrays. The source is the program: it is what runs (compiled by Python under a
``<tracearray-program-N>`` file name registered with ``linecache``, so tracebacks and
tracearray's errors show the line) and what a reproducer prints.

Programs are DAGs of steps drawn by family (``FAMILIES``): elementwise ufuncs of the op table
(``OPS``, unary and binary, as calls or operators, with weak Python scalars), where, clip,
casts, reductions (sum/prod/max/min/any/all/mean/var/std, with axes, keepdims, dtype=, ddof),
argmax/argmin, cumsum/cumprod, views (transpose/swapaxes/moveaxis, basic indexing with any
step, None and Ellipsis, reshape/ravel, broadcast_to, expand_dims/squeeze, flip), matmul/dot,
concatenate/stack, gathers (integer-array indexing with lists, traced indices and known
boolean masks, np.take in its modes, take_along_axis), writes (assignment with basic keys,
lists, masks and traced index arrays; in-place operators), scatters (``ufunc.at``), traced
boolean masks used as arrays (data-dependent sizes; 0-d masks too), the sort family (sort, argsort,
partitions, medians, percentiles, quantiles: external ops), random draws (``f_random``:
values that do not depend on the bit stream), and every NumPy-level function of the
registry (``composite``: one of the test calls of a ``tracearray.trace.composites`` entry). Every step is evaluated with NumPy while drawing (on the drawn inputs),
and a step NumPy rejects is drawn again, so every program is valid NumPy.

``generate(source, ...)`` draws from any ``strategies.Source``; ``programs(...)`` is the
Hypothesis strategy (shrinkable), ``RandomSource(seed)`` what the soak uses.
"""
from __future__ import annotations

import contextlib
import itertools
import linecache
import math
import re
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from ..ops import ALL_DTYPES, OPS, Kind
from .strategies import (SIDES, HypothesisSource, Layout, Source, draw_array, draw_broadcastable,
                         apply_layout, draw_layout, draw_shape)

UNARY = tuple(sorted(n for n, s in OPS.items()
                     if s.kind is Kind.ELEMENTWISE and s.ufunc is not None and s.arity == 1))
BINARY = tuple(sorted(n for n, s in OPS.items()
                      if s.kind is Kind.ELEMENTWISE and s.ufunc is not None and s.arity == 2))
UNARY_OPERATORS = {"negative": "-{}", "positive": "+{}", "absolute": "abs({})", "invert": "~{}"}
BINARY_OPERATORS = {
    "add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "floor_divide": "//",
    "remainder": "%", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
    "left_shift": "<<", "right_shift": ">>", "less": "<", "less_equal": "<=", "greater": ">",
    "greater_equal": ">=", "equal": "==", "not_equal": "!="}
REDUCTIONS = ("sum", "prod", "max", "min", "any", "all", "mean", "var", "std")
DTYPE_NAMES = {dt: (f"np.{dt.name}" if dt.name != "bool" else "np.bool_") for dt in ALL_DTYPES}

# Maximum elements of any value of a program (keeps NumPy and the bounds evaluator cheap).
MAX_VALUE_SIZE = 1 << 18
# Bytes a step's NumPy evaluation may allocate while a program is drawn (see _memory_cap)
STEP_MEMORY = 2 << 30
_counter = itertools.count()


class _GuardedNumPy:
    """NumPy for evaluating drawn steps, with the calls that crash NumPy's own process, or
    that the comparator cannot check in reasonable time and memory, refused as a step NumPy
    rejects (the step is drawn again): NumPy 2.4's np.bincount of a value whose + 1 wraps (the
    largest int64) segfaults (soak cpu-2026-12-04-c, program 2419); any length past 2^40
    would not fit in memory anyway."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    # np.correlate and np.convolve multiply every pair of the two vectors: their traced
    # graphs hold an (n + m - 1, m) value that the comparator evaluates node by node (two
    # 48,362-element vectors: 4.7e9 elements; soak cpu-2026-12-04-s2, program 785, timed
    # out). A program keeps them within MAX_PRODUCTS pairs, as every value within
    # MAX_VALUE_SIZE elements.
    MAX_PRODUCTS = 1 << 22

    @classmethod
    def _pairs(cls, a: Any, v: Any) -> None:
        if np.size(a) * np.size(v) > cls.MAX_PRODUCTS:
            raise MemoryError("a correlation of more pairs than the comparator evaluates")

    @classmethod
    def correlate(cls, a: Any, v: Any, *args: Any, **kwargs: Any) -> Any:
        cls._pairs(a, v)
        return np.correlate(a, v, *args, **kwargs)

    @classmethod
    def convolve(cls, a: Any, v: Any, *args: Any, **kwargs: Any) -> Any:
        cls._pairs(a, v)
        return np.convolve(a, v, *args, **kwargs)

    @staticmethod
    def bincount(x: Any, *args: Any, **kwargs: Any) -> Any:
        a = np.asarray(x)
        if a.size and a.dtype.kind in "iu" and a.max() >= 1 << 40:
            raise MemoryError("np.bincount of a value past 2^40: not evaluated")
        return np.bincount(x, *args, **kwargs)

    @property
    def linalg(self) -> Any:
        return _GUARDED_LINALG


class _GuardedLinalg:
    """np.linalg for drawn steps, with the iterative LAPACK routines (singular values and
    nonsymmetric or symmetric eigenproblems, and what calls them) refused on non-finite
    input: OpenBLAS's sgesdd never returns on a float32 15 x 5 matrix holding an inf (NumPy
    2.4's np.linalg.svd hung the program generator: plan-walks program 113), so a step
    that would call one is drawn again. Everything else is NumPy's."""

    ITERATIVE = frozenset({"svd", "svdvals", "pinv", "matrix_rank", "cond", "lstsq", "eig",
                           "eigvals", "eigh", "eigvalsh"})

    def __getattr__(self, name: str) -> Any:
        fn = getattr(np.linalg, name)
        if name not in self.ITERATIVE and name != "norm":
            return fn

        def guarded(*args: Any, **kwargs: Any) -> Any:
            ord_ = kwargs.get("ord", args[1] if len(args) > 1 else None)
            if name != "norm" or ord_ in (2, -2, "nuc"):
                for a in args[:1]:
                    v = np.asarray(a)
                    if v.dtype.kind in "fc" and not np.all(np.isfinite(v)):
                        raise ValueError(f"np.linalg.{name} of non-finite values: not "
                                         f"evaluated (LAPACK may never return)")
            return fn(*args, **kwargs)
        return guarded


_GUARDED_LINALG = _GuardedLinalg()
_GUARDED_NUMPY = _GuardedNumPy()


@contextlib.contextmanager
def _memory_cap(extra: int = STEP_MEMORY):
    """Evaluate a drawn step with at most ``extra`` more bytes of address space (Linux): a
    step whose intermediates NumPy cannot hold (``x @ x.T`` of a 53844 x 1 column builds a
    23 GB matrix: soak cpu-2026-12-02-m, program 3487, killed by the OOM killer) raises
    MemoryError and is drawn again, like a step NumPy rejects. MAX_VALUE_SIZE checks only the
    result, after NumPy has made it. Elsewhere (no RLIMIT_AS or /proc) nothing is capped."""
    try:
        import resource
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = used + extra
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft != resource.RLIM_INFINITY and soft <= cap:
            raise OSError("already capped")
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ============================================================================================
# The program
# ============================================================================================

@dataclass(frozen=True)
class Step:
    target: str
    expr: str
    uses: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Program:
    """Straight-line NumPy source and the inputs it was drawn with."""
    inputs: tuple[np.ndarray, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    name: str = "program"
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def input_names(self) -> list[str]:
        return [f"x{i}" for i in range(len(self.inputs))]

    def source(self) -> str:
        lines = [f"def {self.name}({', '.join(self.input_names)}):"]
        lines += [f"    {s.target} = {s.expr}" for s in self.steps]
        ret = ", ".join(self.outputs) if len(self.outputs) != 1 else self.outputs[0]
        lines.append(f"    return {ret}")
        return "\n".join(lines) + "\n"

    @property
    def fn(self) -> Callable[..., Any]:
        """The program as a Python function (compiled from ``source()``)."""
        fn = self._cache.get("fn")
        if fn is None:
            fn = self._cache["fn"] = compile_source(self.source(), self.name)
        return fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def signature(self) -> str:
        return ", ".join(f"{n}: {a.dtype}{list(a.shape)}" for n, a in
                         zip(self.input_names, self.inputs))

    def __repr__(self) -> str:
        return f"Program({self.signature()})\n{self.source()}"

    def numpy_result(self) -> Any:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.fn(*[a.copy() for a in self.inputs])

    def replace(self, **kw: Any) -> "Program":
        return replace(self, _cache={}, **kw)


def compile_source(source: str, name: str) -> Callable[..., Any]:
    """Define the function in ``source`` (NumPy as ``np``) under a ``linecache`` file name, so
    tracebacks and tracearray's error locations show its lines."""
    filename = f"<tracearray-program-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"np": np, "nan": math.nan, "inf": math.inf}
    exec(compile(source, filename, "exec"), namespace)   # noqa: S102 -- the program's source
    fn = namespace[name]
    fn.__tracearray_source__ = source
    return fn


# ============================================================================================
# Drawing
# ============================================================================================

class _Builder:
    """The values of a program being drawn: names, NumPy values, the steps so far."""

    def __init__(self, src: Source, inputs: Sequence[np.ndarray]):
        self.src = src
        self.names = [f"x{i}" for i in range(len(inputs))]
        self.values: dict[str, Any] = dict(zip(self.names, inputs))
        self.steps: list[Step] = []
        # values that are constants in the trace (NumPy arrays made by creation functions,
        # and what is computed from them alone)
        self.constants: set[str] = set()

    def pick(self, pred: Callable[[Any], bool] = lambda v: True,
             complex_ok: bool = False) -> str | None:
        # complex values only where a family asks for them (f_complex): the others draw the
        # real ops of the op table
        cands = [n for n in self.names if pred(self.values[n]) and
                 (complex_ok or np.asarray(self.values[n]).dtype.kind != "c")]
        if not cands:
            return None
        if self.src.boolean(0.75):   # favour recent values: deeper chains
            return cands[-1 - (self.src.integer(0, min(2, len(cands) - 1))
                               if self.src.boolean(0.3) else 0)]
        return self.src.choice(cands)

    def v(self, name: str) -> Any:
        return self.values[name]

    def add(self, expr: str) -> bool:
        target = f"v{len(self.steps)}"
        env = dict(self.values)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings(), _memory_cap():
                warnings.simplefilter("ignore")
                out = eval(expr, {"np": _GUARDED_NUMPY, "nan": math.nan,  # noqa: S307
                                  "inf": math.inf}, env)
        except Exception:   # noqa: BLE001 -- NumPy rejects it (or needs too much memory)
            return False
        if not isinstance(out, (np.ndarray, np.generic)) or (
                out.dtype not in ALL_DTYPES and out.dtype not in COMPLEX_DTYPES):
            return False
        if out.size > MAX_VALUE_SIZE:
            return False
        uses = tuple(n for n in self.names if re.search(rf"\b{n}\b", expr))
        if _CREATION.match(expr) or (uses and all(u in self.constants for u in uses)):
            self.constants.add(target)
        self.steps.append(Step(target, expr, uses))
        self.names.append(target)
        self.values[target] = out
        return True


_CREATION = re.compile(r"np\.(zeros|ones|empty|full|eye|identity|arange|linspace|logspace|"
                       r"tri|geomspace)\(")


def _fits(*shapes: Sequence[int]) -> bool:
    try:
        return math.prod(np.broadcast_shapes(*[tuple(s) for s in shapes])) <= MAX_VALUE_SIZE
    except ValueError:
        return False


def _literal(src: Source, dtype: np.dtype) -> str:
    """A weak Python scalar suited to an operand of ``dtype`` (sometimes of another kind)."""
    kind = dtype.kind
    if src.boolean(0.2):
        kind = src.choice("bif")
    if kind == "b":
        return src.choice(("True", "False"))
    if kind in "iu":
        return str(src.choice((0, 1, 2, 3, -1, -2, 5, 7, 127, 255, -128, 1000)))
    return src.choice(("0.5", "2.0", "-1.5", "0.0", "-0.0", "1e-3", "3.0", "1e30", "nan",
                       "inf", "-inf", "0.1"))


def _operand(b: _Builder, first: str, allow_scalar: bool = True) -> str:
    """A second operand for ``first``: a broadcast-compatible value or a Python scalar."""
    src = b.src
    if allow_scalar and src.boolean(0.35):
        return _literal(src, b.v(first).dtype)
    shape = np.shape(b.v(first))
    other = b.pick(lambda v: _fits(shape, np.shape(v)))
    return other or first


def _axis(src: Source, ndim: int, allow_none: bool = True, allow_tuple: bool = True) -> Any:
    choices = ["none"] if allow_none else []
    if ndim:
        choices += ["int", "int"] + (["tuple"] if allow_tuple else [])
    if not choices:
        return None
    kind = src.choice(choices)
    if kind == "none":
        return None
    if kind == "int":
        a = src.integer(0, ndim - 1)
        return a - ndim if src.boolean(0.3) else a
    axes = [a for a in range(ndim) if src.boolean()]
    return tuple(axes)


def _fmt_axis(axis: Any) -> str:
    return repr(axis)


# --- families ----------------------------------------------------------------------------------

def f_unary(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    name = src.choice(UNARY)
    try:
        getattr(np, name).resolve_dtypes((b.v(x).dtype, None))
    except (TypeError, np.exceptions.DTypePromotionError):
        return None
    if name in UNARY_OPERATORS and src.boolean(0.4):
        return UNARY_OPERATORS[name].format(x)
    if name == "rint" and src.boolean(0.3):
        return f"np.round({x})"
    # Half the time, bring the operand into the op's domain (OpSpec.domain.values), so that
    # results are mostly numbers, not NaN: NaN propagation is tested, but an all-NaN result
    # checks little else.
    values = OPS[name].domain.values
    if values != "any" and b.v(x).dtype.kind != "b" and src.boolean(0.5):
        x = {"positive": f"(np.abs({x}) + 1)", "ge1": f"(np.abs({x}) + 1)",
             "unit": f"np.clip({x}, -1, 1)", "small": f"np.clip({x}, -8, 8)"}[values]
    return f"np.{name}({x})"


def f_binary(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    name = src.choice(BINARY)
    y = _operand(b, x)
    if src.boolean(0.25):
        x, y = y, x
    if name in BINARY_OPERATORS and src.boolean(0.5):
        op = BINARY_OPERATORS[name]
        return f"{_paren(x)} {op} {_paren(y)}"
    return f"np.{name}({x}, {y})"


def _paren(s: str) -> str:
    return f"({s})" if s.startswith("-") or " " in s else s


def f_power_operator(b: _Builder) -> str | None:
    # ndarray.__pow__ fast paths (x ** 2 is square, float x ** 0.5 is sqrt, x ** -1 is
    # reciprocal); only on arrays of >= 1 dimension (a NumPy scalar uses C pow instead:
    # divergence scalar-power).
    x = b.pick(lambda v: np.ndim(v) >= 1)
    if x is None:
        return None
    e = b.src.choice(("2", "0.5", "-1", "3", "2.0", "-0.5", "1"))
    return f"{x} ** {_paren(e)}"


def f_where(b: _Builder) -> str | None:
    src = b.src
    c = b.pick(lambda v: v.dtype == np.dtype(bool))
    if c is None or src.boolean(0.4):
        base = b.pick()
        c = f"{base} {src.choice(('>', '<', '>=', '!='))} {_literal(src, b.v(base).dtype)}"
        shape = np.shape(b.v(base))
    else:
        shape = np.shape(b.v(c))
    x = b.pick(lambda v: _fits(shape, np.shape(v)))
    if x is None:
        return None
    y = _operand(b, x)
    if src.boolean(0.5):
        x, y = y, x
    return f"np.where({c}, {x}, {y})"


def f_clip(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    dt = b.v(x).dtype
    if dt.kind == "b":
        return None
    lo, hi = (("-1", "3") if dt.kind in "iu" else ("-0.5", "2.5"))
    if src.boolean(0.3):
        lo, hi = _literal(src, dt), _literal(src, dt)
    if src.boolean(0.2):
        lo = _operand(b, x, allow_scalar=False)
    if src.boolean(0.2):
        lo = "None"
    elif src.boolean(0.2):
        hi = "None"
    return f"{x}.clip({lo}, {hi})" if src.boolean(0.3) else f"np.clip({x}, {lo}, {hi})"


def f_astype(b: _Builder) -> str | None:
    x = b.pick()
    dt = b.src.choice(ALL_DTYPES)
    return f"{x}.astype({DTYPE_NAMES[dt]})"


# Integer ops that wrap at their dtype's edges (-MIN == MIN, abs(MIN) == MIN, MAX + MAX == -2),
# sometimes applied to a reduction's operand: a code generator that assumes signed overflow
# cannot happen goes wrong exactly there, and reduction drivers (warp shuffles and shared
# memory of narrow integers on the GPU) must carry the wrapped value exactly.
WRAPPING = ("-{x}", "abs({x})", "np.where({x} < 0, -{x}, {x})", "{x} * {x}", "{x} + {x}",
            "np.maximum({x}, -{x})", "~{x}")


def _wrapped(b: _Builder, x: str) -> str:
    """``x``, or (for an integer operand, a third of the time) a wrapping op of it."""
    if b.v(x).dtype.kind in "iu" and b.src.boolean(0.35):
        return "(" + b.src.choice(WRAPPING).format(x=x) + ")"
    return x


def f_reduce(b: _Builder) -> str | None:
    src = b.src
    name = b.pick()
    dt = b.v(name).dtype
    nd = np.ndim(b.v(name))
    kind = src.choice(REDUCTIONS)
    x = _wrapped(b, name)
    args = [x]
    axis = _axis(src, nd)
    if axis is not None:
        args.append(f"axis={_fmt_axis(axis)}")
    if src.boolean(0.25):
        args.append("keepdims=True")
    if kind in ("sum", "prod", "mean") and src.boolean(0.1):
        args.append(f"dtype={src.choice(('np.float64', 'np.int64', 'np.float32', 'np.int32'))}")
    elif kind in ("sum", "prod") and dt.kind in "iu" and src.boolean(0.3):
        # In the operand's own (narrow) dtype, where the sum wraps; NumPy's default widens
        # to int64.
        args.append(f"dtype={DTYPE_NAMES[dt]}")
    if kind in ("var", "std") and src.boolean(0.2):
        args.append("ddof=1")
    if src.boolean(0.3):
        return f"{x}.{kind}({', '.join(args[1:])})"
    return f"np.{kind}({', '.join(args)})"


def f_argreduce(b: _Builder) -> str | None:
    src = b.src
    x = b.pick(lambda v: np.size(v) > 0)
    if x is None:
        return None
    kind = src.choice(("argmax", "argmin"))
    axis = _axis(src, np.ndim(b.v(x)), allow_tuple=False)
    args = [_wrapped(b, x)]
    if axis is not None:
        args.append(f"axis={axis}")
    if src.boolean(0.2):
        args.append("keepdims=True")
    return f"np.{kind}({', '.join(args)})"


def f_scan(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    kind = src.choice(("cumsum", "cumprod"))
    axis = _axis(src, np.ndim(b.v(x)), allow_tuple=False)
    args = [_wrapped(b, x)] + ([f"axis={axis}"] if axis is not None else [])
    if src.boolean(0.1):
        args.append(f"dtype={src.choice(('np.float64', 'np.int64'))}")
    return f"np.{kind}({', '.join(args)})"


_SORT_KINDS = ("None", '"quicksort"', '"mergesort"', '"heapsort"', '"stable"')
_QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "median_unbiased",
                     "inverted_cdf", "weibull", "hazen")


def f_sort(b: _Builder) -> str | None:
    """The sort family (external ops): sort, argsort, partition and argpartition along an
    axis (or the flattened array), medians, percentiles and quantiles (nan* too), and
    np.unique of the flattened array (its values or one flag's result)."""
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1)
    if x is None:
        return None
    xv = b.v(x)
    nd = np.ndim(xv)
    kind = src.choice(("sort", "argsort", "partition", "argpartition", "median", "quantile",
                       "percentile", "unique"))
    if kind == "unique":    # a size the data decides; its values, or what a flag returns
        flags, pick = src.choice((("", ""), (", return_counts=True", "[1]"),
                                  (", return_index=True", "[1]"),
                                  (", return_inverse=True", "[1]"), (", equal_nan=False", ""),
                                  (", return_counts=True, equal_nan=False", "[0]")))
        return f"np.unique({_wrapped(b, x)}{flags}){pick}"
    if kind in ("sort", "argsort"):
        axis = _axis(src, nd, allow_tuple=False)
        k = src.choice(_SORT_KINDS)
        return f"np.{kind}({_wrapped(b, x)}, axis={axis}, kind={k})"
    if kind in ("partition", "argpartition"):
        axis = _axis(src, nd, allow_tuple=False)
        n = np.size(xv) if axis is None else np.shape(xv)[axis]
        if n == 0:
            return None
        kth = src.integer(-n, n - 1)
        return f"np.{kind}({_wrapped(b, x)}, {kth}, axis={axis})"
    if np.size(xv) == 0 or np.asarray(xv).dtype == np.dtype(bool):
        return None
    axis = _axis(src, nd)
    if axis is not None and any(np.shape(xv)[a] == 0
                                for a in (axis if isinstance(axis, tuple) else (axis,))):
        return None
    nan = "nan" if src.boolean(0.3) else ""
    keep = ", keepdims=True" if src.boolean(0.2) else ""
    ax = "" if axis is None else f", axis={_fmt_axis(axis)}"
    if kind == "median":
        return f"np.{nan}median({_wrapped(b, x)}{ax}{keep})"
    scale = 100 if kind == "percentile" else 1
    q = src.choice((f"{0.5 * scale}", f"[{0.1 * scale:g}, {0.75 * scale:g}]", f"{scale}"))
    method = src.choice(_QUANTILE_METHODS)
    return f"np.{nan}{kind}({_wrapped(b, x)}, {q}{ax}{keep}, method={method!r})"


def f_transpose(b: _Builder) -> str | None:
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 2)
    if x is None:
        return None
    nd = np.ndim(b.v(x))
    form = src.choice(("T", "perm", "swap", "move"))
    if form == "T":
        return f"{x}.T"
    if form == "perm":
        perm = sorted(range(nd), key=lambda d: src.integer(0, 99))
        return f"np.transpose({x}, {tuple(perm)})"
    i, j = src.integer(-nd, nd - 1), src.integer(-nd, nd - 1)
    return f"np.swapaxes({x}, {i}, {j})" if form == "swap" else f"np.moveaxis({x}, {i}, {j})"


def _index_key(src: Source, shape: Sequence[int]) -> str:
    parts: list[str] = []
    n_real = src.integer(0, len(shape))
    for d in range(n_real):
        size = shape[d]
        if size > 0 and src.boolean(0.25):
            parts.append(str(src.integer(-size, size - 1)))
            continue
        start = src.choice(("", "", str(src.integer(-size - 1, size + 1))))
        stop = src.choice(("", "", str(src.integer(-size - 1, size + 1))))
        step = src.choice(("", "", "-1", "2", "-2", "3"))
        parts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
    if src.boolean(0.25):
        parts.insert(src.integer(0, len(parts)), "None")
    if n_real < len(shape) and src.boolean(0.3):
        parts.insert(src.integer(0, len(parts)), "...")
    return ", ".join(parts) if parts else "..."


def f_index(b: _Builder) -> str | None:
    x = b.pick(lambda v: np.ndim(v) >= 1)
    if x is None:
        return None
    return f"{x}[{_index_key(b.src, np.shape(b.v(x)))}]"


def _index_array(b: _Builder, n: int, raw: bool = True) -> str:
    """An index array for an axis of ``n`` elements: a list, a traced integer value of the
    program made an index (``% n``, sometimes negative), or rarely one out of range (not with
    ``raw=False``: NumPy's take in mode 'wrap' loops |i| / n times, so a huge index hangs)."""
    src = b.src
    y = b.pick(lambda v: np.asarray(v).dtype.kind in "iu" and np.ndim(v) <= 2)
    if y is not None and n > 0 and src.boolean(0.6):
        # (``% n - n`` of an unsigned value wraps around to a huge index: not with raw=False)
        negative = raw or np.asarray(b.v(y)).dtype.kind == "i"
        forms = (f"{y} % {n}",) + ((f"{y} % {n} - {n}",) if negative else ()) + \
            (f"{y} % {n}",) + ((f"{y}",) if raw else ())
        form = src.choice(forms)
        return f"({form})"
    k = src.integer(0, 4)
    lo, hi = (-n, n - 1) if n else (0, 0)
    bad = 1 if src.boolean(0.05) else 0
    return str([src.integer(lo - bad, hi + bad) for _ in range(k)])


def f_gather(b: _Builder) -> str | None:
    """Integer-array indexing in NumPy's forms, np.take and take_along_axis."""
    src = b.src
    # (a NumPy array made in the function is a constant of the trace, and NumPy's own
    # indexing of it cannot take a traced index: np.take can)
    names = [n for n in b.names if n not in b.constants and np.ndim(b.v(n)) >= 1]
    if not names:
        return None
    x = b.pick(lambda v: any(v is b.v(n) for n in names))
    if x is None or x in b.constants:
        return None
    shape = np.shape(b.v(x))
    d = src.integer(0, len(shape) - 1)
    form = src.integer(0, 5)
    if form == 0:                      # x[..., idx, ...] (and a second, separated index)
        parts = [":"] * len(shape)
        parts[d] = _index_array(b, shape[d])
        if len(shape) > 1 and src.boolean(0.4):
            e = src.choice([k for k in range(len(shape)) if k != d])
            parts[e] = _index_array(b, shape[e]) if src.boolean(0.7) else \
                str(src.integer(-shape[e], max(shape[e] - 1, 0)))
        if src.boolean(0.2):
            parts.insert(src.integer(0, len(parts)), "None")
        return f"{x}[{', '.join(parts)}]"
    if form == 1:                      # a known boolean mask over the leading dims
        k = src.integer(1, len(shape))
        mask = [src.boolean(0.5) for _ in range(int(np.prod(shape[:k])))]
        return f"{x}[np.array({mask}, dtype=bool).reshape({tuple(shape[:k])})]"
    if form == 2:
        axis = src.choice((None, d, d - len(shape)))
        n = int(np.prod(shape)) if axis is None else shape[d]
        # (NumPy's take loops forever in mode 'wrap' on an empty axis: never drawn)
        mode = src.choice(("raise", "wrap", "clip")) if n else "raise"
        return f"np.take({x}, {_index_array(b, n, mode != 'wrap')}, axis={axis}, mode={mode!r})"
    if form == 3 and shape[d] > 0:
        op = src.choice(("argmax", "argmin"))
        return f"np.take_along_axis({x}, np.{op}({x}, axis={d}, keepdims=True), axis={d})"
    return f"{x}[{_index_array(b, shape[0])}]"


def f_reshape(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    shape = np.shape(b.v(x))
    size = math.prod(shape)
    form = src.choice(("reshape", "reshape", "ravel", "flatten"))
    if form == "ravel":
        return f"np.ravel({x})"
    if form == "flatten":
        return f"{x}.flatten()" if np.ndim(b.v(x)) else None
    if size == 0:
        return f"{x}.reshape({(0,) + (src.choice((1, 2)),)})"
    factors: list[int] = []
    rest = size
    while rest > 1 and len(factors) < 4:
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        d = src.choice(divisors[:6] + [rest])
        factors.append(d)
        rest //= d
    if rest > 1:
        factors.append(rest)
    if src.boolean(0.3):
        factors.insert(src.integer(0, len(factors)), 1)
    if factors and src.boolean(0.3):
        factors[src.integer(0, len(factors) - 1)] = -1
    return f"{x}.reshape({tuple(factors)!r})"


def f_broadcast(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    shape = list(np.shape(b.v(x)))
    new = [src.choice((1, 2, 3)) if s == 1 else s for s in shape]
    lead = [src.choice((1, 2, 3, 4)) for _ in range(src.integer(0, 2))]
    target = tuple(lead + new)
    if not _fits(target):
        return None
    return f"np.broadcast_to({x}, {target!r})"


def f_dims(b: _Builder) -> str | None:
    src = b.src
    x = b.pick()
    shape = np.shape(b.v(x))
    ones = [d for d, s in enumerate(shape) if s == 1]
    if ones and src.boolean(0.5):
        return f"np.squeeze({x}, {src.choice(ones)})" if src.boolean(0.6) else f"np.squeeze({x})"
    return f"np.expand_dims({x}, {src.integer(-len(shape) - 1, len(shape))})"


def f_flip(b: _Builder) -> str | None:
    x = b.pick(lambda v: np.ndim(v) >= 1)
    if x is None:
        return None
    axis = _axis(b.src, np.ndim(b.v(x)))
    return f"np.flip({x})" if axis is None else f"np.flip({x}, {_fmt_axis(axis)})"


def f_matmul(b: _Builder) -> str | None:
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1 and v.dtype != np.dtype(bool))
    if x is None:
        return None
    xs = np.shape(b.v(x))
    k = xs[-1]
    y = b.pick(lambda v: np.ndim(v) >= 1 and v.dtype != np.dtype(bool) and
               (np.shape(v)[-2] if np.ndim(v) >= 2 else np.shape(v)[0]) == k)
    if y is None or src.boolean(0.3):
        y = f"{x}.T" if len(xs) <= 2 else f"np.swapaxes({x}, -1, -2)"
        ys = xs[::-1] if len(xs) <= 2 else xs[:-2] + (xs[-1], xs[-2])
    else:
        ys = np.shape(b.v(y))
    out = xs[:-1] + ys[-1:] if len(ys) >= 2 else xs[:-1]
    if math.prod(out) * max(k, 1) > MAX_VALUE_SIZE * 4:
        return None
    if len(xs) <= 2 and len(ys) <= 2 and src.boolean(0.3):
        return f"np.dot({x}, {y})"
    return f"{x} @ {y}" if src.boolean(0.5) else f"np.matmul({x}, {y})"


def f_concat(b: _Builder) -> str | None:
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1)
    if x is None:
        return None
    xs = np.shape(b.v(x))
    axis = src.integer(0, len(xs) - 1)
    if src.boolean(0.3):
        y = b.pick(lambda v: np.shape(v) == xs) or x
        return f"np.stack([{x}, {y}], axis={src.integer(-len(xs) - 1, len(xs))})"
    y = b.pick(lambda v: np.ndim(v) == len(xs) and all(
        s == t for d, (s, t) in enumerate(zip(np.shape(v), xs)) if d != axis)) or x
    if 2 * math.prod(xs) > MAX_VALUE_SIZE:
        return None
    return f"np.concatenate([{x}, {y}], axis={axis if src.boolean() else axis - len(xs)})"


def f_normalize(b: _Builder) -> str | None:
    # A reduction broadcast back over its rows (softmax, layernorm, normalisation): the
    # planner fuses these into one kernel (row epilogues, full-space phases).
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1 and v.dtype != np.dtype(bool))
    if x is None:
        return None
    nd = np.ndim(b.v(x))
    axis = _axis(src, nd, allow_none=src.boolean(0.3))
    red = src.choice(("sum", "max", "min", "mean"))
    op = src.choice(("-", "/", "*", "+"))
    inner = f"np.{red}({x}, axis={_fmt_axis(axis)}, keepdims=True)"
    if src.boolean(0.3):
        return f"np.exp({x} - {inner})"
    return f"{x} {op} {inner}"


def f_pairwise(b: _Builder) -> str | None:
    # Small nested reductions (pairwise distances): min_j sum_d (a_id - b_jd)^2, and the
    # position of the nearest (k-means' assignment: an arg-reduction over the nested sum).
    src = b.src
    a = b.pick(lambda v: np.ndim(v) == 2 and v.dtype.kind in "fiu")
    if a is None:
        return None
    d = np.shape(b.v(a))[1]
    c = b.pick(lambda v: np.ndim(v) == 2 and np.shape(v)[1] == d and v.dtype.kind in "fiu") or a
    n = np.shape(b.v(a))[0] * np.shape(b.v(c))[0] * d
    if n > MAX_VALUE_SIZE:
        return None
    red = src.choice(("min", "max", "sum"))
    if red != "sum" and n % 2 == 0:
        # the position of the nearest instead, chosen from the shapes rather than by a new
        # draw, so that every seed's programs stay the ones regression tests name
        red = "arg" + red
    return f"np.{red}(np.sum(np.square({a}[:, None, :] - {c}[None, :, :]), axis=-1), axis=1)"


def composite_choices() -> list[Any]:
    """The registry's composites whose test calls a program can use (every one)."""
    from ..trace.composites import COMPOSITES
    return [c for c in COMPOSITES.values() if c.calls]


def f_composite(b: _Builder) -> str | None:
    """A NumPy-level function of the registry (``tracearray.trace.composites``), by one of its
    test calls, on values of the program that fit its dtypes and ranks."""
    src = b.src
    choices = composite_choices()
    if not choices:
        return None
    c = src.choice(choices)
    fits = (lambda v: isinstance(v, np.ndarray) and v.dtype in c.dtypes and
            c.min_dims <= v.ndim <= c.max_dims and (v.size > 0 or not c.nonempty))
    first = b.pick(fits)
    if first is None:
        return None
    names = [first]
    for _ in range(c.arrays - 1):
        shape = np.shape(b.v(first))
        other = b.pick(lambda v: fits(v) and (np.shape(v) == shape if c.same_shape
                                              else _fits(shape, np.shape(v))))
        names.append(other or first)
    return src.choice(c.calls).format(*names)


def _broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


def f_assign(b: _Builder) -> str | None:
    """Writes, as expressions: ``(lambda t: (t.__setitem__(KEY, VALUE), t)[1])(x.copy())``
    with a basic key, a list, a boolean mask of t or of its rows after the first axis
    (``t[:, t[0] > c]``; sometimes through a view, ``t.T``), into
    a copy or an array made with np.zeros / np.full; or an in-place operator through a view
    (``t[KEY].__iadd__(VALUE)``), which NumPy writes into t."""
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1)
    if x is None:
        return None
    xv = np.asarray(b.v(x))
    shape, dt = xv.shape, xv.dtype
    base = f"{x}.copy()"
    if src.boolean(0.25):
        fill = _literal(src, dt) if dt.kind != "b" else "True"
        base = (f"np.zeros({tuple(shape)}, dtype=np.{dt.name})" if src.boolean() else
                f"np.full({tuple(shape)}, {fill}, dtype=np.{dt.name})")
    view = "t.T" if len(shape) > 1 and src.boolean(0.2) else "t"
    vshape = shape[::-1] if view == "t.T" else shape
    form = src.integer(0, 6)
    if form <= 2:
        key = f"np.s_[{_index_key(src, vshape)}]"
    elif form == 3:
        key = f"{view} > {_literal(src, dt)}" if dt.kind != "b" else f"~{view}"
    elif form == 6 and len(vshape) >= 2:   # a mask after a leading axis: t[:, mask]
        row = f"{view}[0]"
        key = f"np.s_[:, {row} > {_literal(src, dt)}]" if dt.kind != "b" else \
            f"np.s_[:, ~{row}]"
    elif form == 4 and vshape[0] > 0:
        if src.boolean(0.5):      # a traced index array: a scatter (the last write wins)
            key = _index_array(b, vshape[0], raw=False)
        else:
            key = str([src.integer(-vshape[0], vshape[0] - 1)
                       for _ in range(src.integer(0, 3))])
    else:
        key = "..."
    region = _region(b, shape, dt, view, key)
    if region is None:
        return None
    if src.boolean(0.35):
        value = _literal(src, dt)
    else:
        value = b.pick(lambda v: _broadcasts_to(np.shape(v), region)) or _literal(src, dt)
    if form <= 2 and src.boolean(0.3) and "," not in key.replace("np.s_[", "") or form == 5:
        op = src.choice(("__iadd__", "__imul__", "__isub__"))
        return f"(lambda t: ({view}[{key}].{op}({value}), t)[1])({base})"
    return f"(lambda t: ({view}.__setitem__({key}, {value}), t)[1])({base})"


def _region(b: _Builder, shape: Sequence[int], dt: np.dtype, view: str, key: str
            ) -> tuple[int, ...] | None:
    """The shape of ``view[key]`` of a ``t`` of ``shape`` (the key may read the program's
    values), or None when NumPy rejects the key."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = dict(b.values, np=np, t=np.zeros(shape, dt))
            return np.shape(eval(f"({view})[{key}]", env))  # noqa: S307
    except Exception:   # noqa: BLE001 -- not a valid key: draw another step
        return None


def f_scatter(b: _Builder) -> str | None:
    """``ufunc.at`` into a copy or a made array, at a traced or known index array along the
    first axis (sometimes with a slice or a second index after it), repeated positions
    accumulating in NumPy's order."""
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1 and np.size(v) > 0)
    if x is None:
        return None
    xv = np.asarray(b.v(x))
    shape, dt = xv.shape, xv.dtype
    base = f"{x}.copy()" if src.boolean(0.7) else f"np.zeros({tuple(shape)}, dtype=np.{dt.name})"
    key = _index_array(b, shape[0], raw=False)
    if len(shape) > 1 and src.boolean(0.4):
        key = f"({key}, {src.choice(['slice(None)', _index_array(b, shape[1], raw=False)])})"
    op = src.choice(("add", "add", "subtract", "multiply", "maximum", "minimum"))
    region = _region(b, shape, dt, "t", key)
    if region is None or dt.kind == "b" and op in ("subtract",):
        return None
    value = b.pick(lambda v: _broadcasts_to(np.shape(v), region)) if src.boolean(0.6) else None
    value = value or _literal(src, dt)
    return f"(lambda t: (np.{op}.at(t, {key}, {value}), t)[1])({base})"


def f_select(b: _Builder) -> str | None:
    """``x[mask]`` with a traced boolean mask, used as an array (its length is the data's):
    the mask made from x or from a value of the same leading shape."""
    src = b.src
    x = b.pick(lambda v: np.ndim(v) >= 1 and np.asarray(v).dtype.kind != "b")
    if x is None:
        return None
    xv = np.asarray(b.v(x))
    if src.boolean(0.15):   # a 0-d traced mask: a new axis of one row (True) or none
        return f"{x}[np.sum({x} > {_literal(src, xv.dtype)}) > {src.integer(0, 3)}]"
    k = src.integer(1, xv.ndim)
    lead = xv.shape[:k]
    other = b.pick(lambda v: np.shape(v) == lead and np.asarray(v).dtype.kind != "b")
    m = other if other is not None and src.boolean(0.5) else None
    if m is None:
        if k != xv.ndim:
            return f"{x}[np.any({x} > {_literal(src, xv.dtype)}, axis={tuple(range(k, xv.ndim))})]"
        return f"{x}[{x} > {_literal(src, xv.dtype)}]"
    return f"{x}[{m} {src.choice(['>', '<', '!='])} {_literal(src, np.asarray(b.v(m)).dtype)}]"


def f_random(b: _Builder) -> str | None:
    """A draw of ``np.random.default_rng(seed)`` made into a value that does not depend on the
    bit stream -- the compiled draws are not NumPy's numbers (divergence random-bit-stream), so
    only such values can be compared -- while the draw's shape, dtype and range properties
    flow into the program: uniforms are below 1 (``floor`` is 0), an integer of a one-value
    range (known or traced bounds) is that value, a choice with a one-hot ``p`` is that
    element, normals and exponentials are finite and exponentials not negative. (Draws from a
    Generator argument or NumPy's global state are tests/test_random.py's: the comparator
    evaluates a program's graph on its array arguments alone.)"""
    src = b.src
    x = b.pick()
    xv = np.asarray(b.v(x))
    rng = f"np.random.default_rng({src.integer(0, 999)})"
    size = repr(tuple(xv.shape))
    kind = src.choice(("floor", "below", "integers", "traced_integers", "choice", "finite"))
    if kind == "floor":
        dtype = src.choice(("", ", dtype=np.float32"))
        return f"{x} + np.floor({rng}.random({size}{dtype}))"
    if kind == "below":
        return f"{x} * ({rng}.random({size}) < 1.0)"
    if kind == "integers":
        dt = src.choice(("int8", "uint8", "int16", "int32", "int64", "uint32", "uint64"))
        info = np.iinfo(dt)
        k = src.choice((int(info.min), 0, 1, int(info.max)))
        high = f"{k}, endpoint=True" if src.boolean() or k == info.max else f"{k + 1}"
        return f"{x} + {rng}.integers({k}, {high}, size={size}, dtype=np.{dt})"
    if kind == "traced_integers":
        if xv.dtype.kind != "i":
            return None
        return f"{rng}.integers({x}, {x}, endpoint=True, dtype=np.{xv.dtype})"
    if kind == "choice":
        if xv.ndim != 1 or xv.size == 0:
            return None
        j = src.integer(0, xv.size - 1)
        p = ", ".join("1.0" if i == j else "0.0" for i in range(xv.size))
        return f"{rng}.choice({x}, size={src.integer(0, 9)}, p=[{p}])"
    dist = src.choice((f"{rng}.standard_normal({size})", f"{rng}.normal(size={size})",
                       f"{rng}.exponential(2.0, {size})", f"({rng}.exponential(size={size}) >= 0)",
                       f"{rng}.standard_exponential({size}, dtype=np.float32)"))
    return f"{x} * np.isfinite({dist})"


COMPLEX_DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))

# What f_complex applies to complex values ({0}, {1}: complex operands; {r}: a real one).
_COMPLEX_UNARY = ("np.exp({0})", "np.log({0})", "np.sqrt({0})", "abs({0})", "np.angle({0})",
                  "{0}.real", "{0}.imag", "np.conj({0})", "-{0}", "np.square({0})",
                  "np.reciprocal({0})", "np.sin({0})", "np.cos({0})", "np.tanh({0})",
                  "np.sinh({0})", "np.tan({0})", "np.cosh({0})", "np.sign({0})",
                  "np.isnan({0})", "np.isfinite({0})", "{0}.sum()", "{0}.mean()",
                  "np.cumsum({0})", "{0}[::-1]", "{0}.T", "{0} ** 2", "{0} ** 0.5",
                  "np.expm1({0})", "np.log1p({0})", "np.log10({0})", "np.var({0})",
                  "np.prod({0})", "np.arcsin({0})", "np.arccos({0})", "np.arctan({0})",
                  "np.arcsinh({0})", "np.arccosh({0})", "np.arctanh({0})")
_COMPLEX_BINARY = ("{0} + {1}", "{0} - {1}", "{0} * {1}", "{0} / {1}", "{0} == {1}",
                   "{0} != {1}", "{0} < {1}", "np.maximum({0}, {1})", "np.fmin({0}, {1})",
                   "np.where({0}.real > 0, {0}, {1})", "{0} ** {1}")


def f_complex(b: _Builder) -> str | None:
    """Complex values: made from real ones (x + 1j*y, np.exp(1j*t)), then complex arithmetic,
    elementary functions, reductions and parts (trace/complex.py)."""
    src = b.src
    c = b.pick(lambda v: np.asarray(v).dtype.kind == "c", complex_ok=True)
    if c is None or src.boolean(0.25):
        x = b.pick(lambda v: np.asarray(v).dtype.kind in "fiu")
        if x is None:
            return None
        y = b.pick(lambda v: np.asarray(v).dtype.kind in "fiu" and
                   _fits(np.shape(v), np.shape(b.v(x))))
        if y is None or src.boolean(0.3):
            return f"np.exp(1j * {x})" if src.boolean(0.5) else f"{x} * (0.5 - 2j)"
        # ({y} * 1j, not 1j * {y}: Python's complex * np.float64 scalar is a weak Python
        # complex, which a 0-d traced value cannot be)
        return f"({x} + {y} * 1j)"
    if src.boolean(0.55):
        return src.choice(_COMPLEX_UNARY).format(c)
    d = b.pick(lambda v: np.asarray(v).dtype.kind in "cf" and _fits(np.shape(v),
                                                                  np.shape(b.v(c))),
               complex_ok=True)
    if d is None or src.boolean(0.2):
        d = f"({_literal(src, np.dtype(np.float64))} + 1.5j)"
    pair = (c, d) if src.boolean(0.7) else (d, c)
    return src.choice(_COMPLEX_BINARY).format(*pair)


# family name -> (builder, weight)
FAMILIES: dict[str, tuple[Callable[[_Builder], str | None], int]] = {
    "unary": (f_unary, 18), "binary": (f_binary, 24), "power_operator": (f_power_operator, 2),
    "where": (f_where, 5), "clip": (f_clip, 3), "astype": (f_astype, 6),
    "reduce": (f_reduce, 12), "argreduce": (f_argreduce, 3), "scan": (f_scan, 3),
    "transpose": (f_transpose, 4), "index": (f_index, 6), "reshape": (f_reshape, 4),
    "broadcast": (f_broadcast, 3), "dims": (f_dims, 3), "flip": (f_flip, 2),
    "matmul": (f_matmul, 3), "concat": (f_concat, 3), "normalize": (f_normalize, 5),
    "pairwise": (f_pairwise, 2), "composite": (f_composite, 10), "gather": (f_gather, 6),
    "assign": (f_assign, 6), "scatter": (f_scatter, 4), "select": (f_select, 4),
    "sort": (f_sort, 4),
    "random": (f_random, 3), "complex": (f_complex, 12),
}


@dataclass(frozen=True)
class ProgramSpace:
    """What ``generate`` draws: counts, sizes, dtypes, families."""
    max_inputs: int = 3
    min_steps: int = 2
    max_steps: int = 10
    max_dims: int = 4
    max_size: int = 256               # elements per input array (small programs)
    large_p: float = 0.0              # probability of a large program (threads, slots)
    large_size: int = 1 << 16
    dtypes: tuple[np.dtype, ...] = ALL_DTYPES
    families: tuple[str, ...] = tuple(FAMILIES)
    layouts: bool = True
    sides: tuple[int, ...] = SIDES


def _choose_family(src: Source, families: Sequence[str]) -> str:
    total = sum(FAMILIES[f][1] for f in families)
    r = src.integer(0, total - 1)
    for f in families:
        r -= FAMILIES[f][1]
        if r < 0:
            return f
    return families[-1]


def draw_inputs(src: Source, space: ProgramSpace) -> list[np.ndarray]:
    large = space.large_p > 0 and src.boolean(space.large_p)
    max_size = space.large_size if large else space.max_size
    n = src.integer(1, space.max_inputs)
    base = draw_shape(src, 0, space.max_dims, space.sides, max_size)
    if large and math.prod(base) < max_size // 8:
        base = (src.integer(max_size // 4, max_size),) if src.boolean() else \
            (src.choice((129, 257, 1023, 1025)), src.integer(17, max_size // 1025 + 17))
    shapes = draw_broadcastable(src, n, base)
    main = src.choice(space.dtypes)
    values = src.choice(("any", "any", "any", "finite", "small", "positive", "extremes"))
    inputs = []
    for shp in shapes:
        if src.boolean(0.15):
            shp = draw_shape(src, 0, space.max_dims, space.sides, max_size)
        dt = main if src.boolean(0.6) else src.choice(space.dtypes)
        layout: Layout | str = "C"
        if space.layouts and shp and src.boolean(0.4):
            layout = draw_layout(src, shp)
        # (x0 stays real: the real families always find an operand)
        if inputs and dt.kind == "f" and dt.itemsize >= 4 and src.boolean(0.3):
            inputs.append(_complex_input(src, dt, shp, values, layout))
        else:
            inputs.append(draw_array(src, dt, shp, values, layout))
    return inputs


def _complex_input(src: Source, part: np.dtype, shape: Sequence[int], values: str,
                   layout: Layout | str) -> np.ndarray:
    """A complex input of the part dtype's precision, each part drawn like a real input (so
    the special values -- signed zeros, infinities, NaN -- land on the branch cuts), in the
    drawn memory layout."""
    cdt = np.complex64 if part == np.dtype(np.float32) else np.complex128
    re = draw_array(src, part, shape, values, "C")
    im = draw_array(src, part, shape, values, "C")
    z = np.empty(tuple(shape), cdt)
    z.real, z.imag = re, im
    if isinstance(layout, str) or layout is None:
        layout = draw_layout(src, tuple(shape), layout) if layout != "C" else Layout()
    return z if layout.is_c() else apply_layout(z, layout)


def generate(src: Source, space: ProgramSpace = ProgramSpace(), name: str = "program") -> Program:
    """Draw a program and its inputs."""
    inputs = draw_inputs(src, space)
    b = _Builder(src, inputs)
    n_steps = src.integer(space.min_steps, space.max_steps)
    attempts = 0
    while len(b.steps) < n_steps and attempts < 8 * n_steps:
        attempts += 1
        expr = FAMILIES[_choose_family(src, space.families)][0](b)
        if expr is not None:
            b.add(expr)
    if not b.steps:   # at least one op: an elementwise step always works
        b.add(f"np.positive({b.names[0]})" if b.v("x0").dtype != np.dtype(bool) else
              "np.logical_not(x0)")
    outputs = [b.steps[-1].target]
    used = {u for s in b.steps for u in s.uses}
    sinks = [s.target for s in b.steps[:-1] if s.target not in used]
    if sinks and src.boolean(0.5):   # a second result: a value nothing else uses
        outputs.append(src.choice(sinks))
    return prune(Program(tuple(inputs), tuple(b.steps), tuple(outputs), name))


def prune(p: Program) -> Program:
    """Drop steps no output depends on."""
    live = set(p.outputs)
    keep = []
    for s in reversed(p.steps):
        if s.target in live:
            keep.append(s)
            live.update(s.uses)
    return p.replace(steps=tuple(reversed(keep)))


def programs(space: ProgramSpace | None = None, **kw: Any) -> st.SearchStrategy[Program]:
    """Hypothesis strategy of random programs with matching inputs (``program.inputs``);
    keyword arguments set fields of ``ProgramSpace``."""
    sp = replace(space or ProgramSpace(), **kw)
    return st.composite(lambda draw: generate(HypothesisSource(draw), sp))()


# ============================================================================================
# Shrinking (for the soak, whose programs are not drawn by Hypothesis)
# ============================================================================================

def _rename(expr: str, old: str, new: str) -> str:
    return re.sub(rf"\b{old}\b", new, expr)


def _valid(p: Program) -> bool:
    try:
        out = p.numpy_result()
    except Exception:   # noqa: BLE001
        return False
    leaves = out if isinstance(out, tuple) else (out,)
    return all(isinstance(v, (np.ndarray, np.generic)) for v in leaves)


def shrink(p: Program, fails: Callable[[Program], bool], budget: int = 200) -> Program:
    """A smaller program (fewer outputs and steps, simpler inputs) on which ``fails`` still
    holds. Greedy; ``budget`` bounds the calls of ``fails``."""
    calls = 0

    def attempt(q: Program) -> bool:
        nonlocal calls
        if calls >= budget or not _valid(q):
            return False
        calls += 1
        return fails(q)

    changed = True
    while changed and calls < budget:
        changed = False
        if len(p.outputs) > 1:
            for o in p.outputs:
                q = prune(p.replace(outputs=(o,)))
                if attempt(q):
                    p, changed = q, True
                    break
        for i in reversed(range(len(p.steps))):   # bypass a step by one of its operands
            s = p.steps[i]
            for u in s.uses:
                rest = tuple(replace(t, expr=_rename(t.expr, s.target, u),
                                     uses=tuple(u if n == s.target else n for n in t.uses))
                             for t in p.steps[i + 1:])
                q = prune(p.replace(steps=p.steps[:i] + rest,
                                    outputs=tuple(u if o == s.target else o for o in p.outputs)))
                if attempt(q):
                    p, changed = q, True
                    break
            if changed:
                break
        if changed:
            continue
        q = _drop_unused_inputs(p)
        if q is not p and attempt(q):
            p, changed = q, True
            continue
        for q in _smaller_shapes(p):
            if attempt(q):
                p, changed = q, True
                break
        if changed:
            continue
        for k, x in enumerate(p.inputs):   # inputs: C order, then simpler values
            for simpler in _simpler_arrays(x):
                q = p.replace(inputs=p.inputs[:k] + (simpler,) + p.inputs[k + 1:])
                if attempt(q):
                    p, changed = q, True
                    break
            if changed:
                break
    return p


def _drop_unused_inputs(p: Program) -> Program:
    text = " ".join(s.expr for s in p.steps) + " " + " ".join(p.outputs)
    used = [k for k in range(len(p.inputs)) if re.search(rf"\bx{k}\b", text)]
    if len(used) == len(p.inputs) or not used:
        return p
    names = {f"x{k}": f"x{i}" for i, k in enumerate(used)}

    def ren(e: str) -> str:
        return re.sub(r"\bx\d+\b", lambda m: names.get(m.group(0), m.group(0)), e)
    steps = tuple(replace(s, expr=ren(s.expr), uses=tuple(names.get(u, u) for u in s.uses))
                  for s in p.steps)
    return p.replace(inputs=tuple(p.inputs[k] for k in used), steps=steps,
                     outputs=tuple(names.get(o, o) for o in p.outputs))


def _smaller_shapes(p: Program) -> list[Program]:
    """The program with every input axis of one size cut to 1 or to half (all inputs at once,
    so that broadcasting still lines up)."""
    sizes = sorted({n for x in p.inputs for n in x.shape if n > 1}, reverse=True)
    out = []
    for size in sizes:
        for new in sorted({1, size // 2}):
            inputs = []
            for x in p.inputs:
                key = tuple(slice(0, new) if n == size else slice(None) for n in x.shape)
                inputs.append(np.ascontiguousarray(x[key]) if x.flags.c_contiguous else x[key])
            out.append(p.replace(inputs=tuple(inputs)))
    return out


def _simpler_arrays(x: np.ndarray) -> list[np.ndarray]:
    out = []
    if not x.flags.c_contiguous:
        out.append(np.ascontiguousarray(x))
    flat = np.ascontiguousarray(x).reshape(-1)
    n = flat.size
    if n > 1:
        zero = np.zeros((), x.dtype)
        for lo, hi in ((0, n // 2), (n // 2, n)):
            y = flat.copy()
            y[lo:hi] = zero
            if not np.array_equal(y, flat, equal_nan=True):
                out.append(y.reshape(x.shape))
    return out
