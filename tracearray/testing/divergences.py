"""THE list of tracearray's deliberate divergences from NumPy.

Each entry has an ``id`` (cited by the comparator's reports, by tests and by the docs), the
op family and ops it concerns, the text, and how the comparator of ``tracearray.testing``
honours it (``comparator``):

- ``"tolerance"``: covered by an entry of the tolerance table (``compare.TOLERANCES``);
- ``"signed-zero"``: the sign of a zero result is not compared where the divergence applies;
- ``"nan-payload"``: NaN payloads and NaN signs are never compared (NaN positions are);
- ``"unverifiable"``: elements whose value depends on the divergence are not compared;
- ``"numpy-raises"``: NumPy raises at run time where the compiled function returns a value;
  when NumPy's error is this one and the traced graph contains the op, the call is accepted;
- ``"trace"``: the traced graph computes a NumPy-level function another way than NumPy does
  (NumPy's own result is then checked against the graph with this relaxation);
- ``"error"`` / ``"not-compared"``: not a difference of values (a refused program, or a
  property the comparator does not look at).

The scalar lowering's divergences live in ``tracearray.codegen.scalar.DIVERGENCES``; their
entries here *reference* that text (``scalar_text``) instead of repeating it, and a test checks
that every one of them is referenced exactly once.

``docs/divergences.md`` is rendered from this module (a test checks that it is up to date)::

    python -c "import tracearray.testing.divergences as d; print(d.render_markdown(), end='')" \
        > docs/divergences.md
"""
from __future__ import annotations

import platform
from dataclasses import dataclass

from ..codegen import scalar

COMPARATOR_MODES = ("tolerance", "signed-zero", "nan-payload", "unverifiable", "numpy-raises",
                    "trace", "error", "not-compared")


def scalar_text(prefix: str) -> str:
    """The entry of ``codegen.scalar.DIVERGENCES`` that starts with ``prefix`` (by reference:
    the text is kept in one place)."""
    hits = [d for d in scalar.DIVERGENCES if d.startswith(prefix)]
    if len(hits) != 1:
        raise LookupError(f"expected one entry of codegen.scalar.DIVERGENCES starting with "
                          f"{prefix!r}, found {len(hits)}")
    return hits[0]


@dataclass(frozen=True)
class Divergence:
    id: str
    family: str                 # op family: elementwise, cast, reduction, scan, matmul, ...
    ops: tuple[str, ...]        # op-table names or NumPy-level functions it concerns
    text: str
    comparator: str             # how the comparator honours it (see the module docstring)
    source: str = "tracearray.testing.divergences"   # where the text lives

    def __post_init__(self) -> None:
        assert self.comparator in COMPARATOR_MODES, self.comparator


def _from_scalar(id: str, family: str, ops: tuple[str, ...], prefix: str,
                 comparator: str) -> Divergence:
    return Divergence(id, family, ops, scalar_text(prefix), comparator,
                      source="tracearray.codegen.scalar.DIVERGENCES")


_TRANSCENDENTAL = tuple(sorted(scalar.MATH_FUNCTIONS))

DIVERGENCES: tuple[Divergence, ...] = (
    # --- scalar lowering (codegen/scalar.py): referenced, not repeated -------------------
    _from_scalar("int-power-negative-exponent", "elementwise", ("power",),
                 "power on integers with a negative exponent", "numpy-raises"),
    _from_scalar("float-to-int-cast", "cast", ("cast", "reciprocal"),
                 "float -> integer casts", "unverifiable"),
    _from_scalar("fmax-fmin-signed-zero", "elementwise", ("fmax", "fmin"),
                 "fmax/fmin on float32/float64", "signed-zero"),
    _from_scalar("nan-payload", "elementwise", ("*",), "NaN payloads", "nan-payload"),
    _from_scalar("transcendental-ulps", "elementwise", _TRANSCENDENTAL,
                 "transcendental functions", "tolerance"),
    # --- kernels ---------------------------------------------------------------------------
    Divergence(
        "float-sum-reassociation", "reduction", ("sum", "mean", "var", "std", "cumsum"),
        "Float sums are reassociated: a kernel keeps several vector partial sums (and a full "
        "reduction combines per-slot partials in slot order), where NumPy sums pairwise "
        "(contiguous) or sequentially (strided). Results agree within the summation bound "
        "n·eps·Σ|x|, not bit for bit; when a partial sum could overflow in some order "
        "(Σ|x| near the dtype's maximum) the result is order dependent (inf, NaN or finite) and "
        "not compared.", "tolerance"),
    Divergence(
        "float-prod-reassociation", "reduction", ("prod", "cumprod"),
        "Float products are reassociated like sums. Products agree within n·eps relative "
        "error while no partial product can overflow or underflow; otherwise the result depends "
        "on the order (e.g. [1e-200, 1e-200, 1e200, 1e200] is 0 sequentially and 1 paired) and "
        "is not compared.", "tolerance"),
    Divergence(
        "float16-accumulation", "reduction", ("sum", "prod", "cumsum", "cumprod", "mean"),
        "float16 sums and products accumulate in float32 and round once, where NumPy rounds to "
        "float16 after every step along a strided axis: results differ by the float16 "
        "summation bound, and a float16 partial sum that NumPy overflows to inf may stay finite "
        "here (not compared when Σ|x| can exceed float16's maximum).", "tolerance"),
    Divergence(
        "matmul-blocking", "matmul", ("matmul", "dot"),
        "Float matrix products are summed in another blocking than NumPy's BLAS call: results "
        "agree within K·eps·(|A|@|B|); rows or columns holding inf/NaN may produce NaN in one "
        "and inf in the other and are not compared.", "tolerance"),
    Divergence(
        "max-min-signed-zero", "reduction", ("max", "min"),
        "max/min reductions over both +0.0 and -0.0 (and no larger/smaller value) may return "
        "either zero: the vectorised reduction compares lanes in another order than NumPy.",
        "signed-zero"),
    # --- tracing (the graph computes a NumPy function another way) ------------------------
    Divergence(
        "clip-signed-zero", "elementwise", ("clip",),
        "np.clip with scalar bounds returns x itself where x equals a bound (x=0.0, hi=-0.0 "
        "gives 0.0) and the bound with array bounds; the graph's maximum/minimum always follows "
        "np.minimum/np.maximum. Only the sign of a zero result can differ.", "trace"),
    Divergence(
        "scalar-power", "elementwise", ("power",),
        "A 0-d reduction result is a NumPy scalar, and `scalar ** y` is evaluated with the C "
        "library's pow; the graph cannot tell a scalar from a 0-d array and uses np.power's "
        "loop. The two can differ by a few ulp.", "trace"),
    Divergence(
        "norm-dot", "reduction", ("linalg.norm",),
        "np.linalg.norm(x) with axis=None (ord None/'fro'/2) computes sqrt(dot(x, x)) with "
        "BLAS; the graph computes sqrt(sum(x * x)), summed in another order.", "trace"),
    # --- API-level: programs are refused or results are not views -------------------------
    Divergence(
        "python-scalars-static", "api", ("*",),
        "Python scalar arguments (int, float, bool) are static: their value is part of the "
        "trace and cache key (as NumPy's weak scalars they can change the result dtype), so a "
        "new value re-traces. NumPy scalars and arrays are traced.", "not-compared"),
    Divergence(
        "in-place-refused", "api", ("__iadd__", "__setitem__"),
        "Updating an argument (or a view of it) in place (`x += 1`) and item assignment "
        "(`x[0] = 1`) are refused with UnsupportedOperationError: a compiled function never "
        "writes to its inputs. Rebind the name (`x = x + 1`) or use np.where.", "error"),
    Divergence(
        "zero-d-results-are-scalars", "api", ("*",),
        "A 0-d result is always returned as a NumPy scalar (np.float32(...)), as NumPy's "
        "ufuncs and reductions return it; where NumPy returns a 0-d ndarray instead (np.where, "
        "astype or a view of a 0-d array) the compiled function still returns the scalar: the "
        "traced graph does not distinguish the two. Values and dtypes are the same.",
        "not-compared"),
    Divergence(
        "views-are-copies", "api", ("reshape", "transpose", "slice", "broadcast_to"),
        "A function that returns a view of its argument returns a new array (a copy) when "
        "compiled; writing to it does not modify the argument.", "not-compared"),
    Divergence(
        "recycled-result-memory", "api", ("*",),
        "On the CPU a result of 1 MiB or more is a view of a block tracearray recycles "
        "(`.base` is that block, `flags.owndata` is False), so `ndarray.resize` refuses it; "
        "values, shape, dtype, strides and writability are NumPy's. The block is reused only "
        "after every view of it is gone; `TRACEARRAY_OUTPUT_ARENA_MB=0` returns plain arrays.",
        "not-compared"),
)

BY_ID: dict[str, Divergence] = {d.id: d for d in DIVERGENCES}
assert len(BY_ID) == len(DIVERGENCES), "duplicate divergence id"


def get(id: str) -> Divergence:
    return BY_ID[id]


def is_x86_64() -> bool:
    """NumPy's float->int casts of NaN/inf/out-of-range values are reproduced as on x86-64."""
    return platform.machine().lower() in ("x86_64", "amd64")


def render_markdown() -> str:
    """docs/divergences.md: one table of every deliberate divergence."""
    lines = [
        "# Deliberate divergences from NumPy",
        "",
        "NumPy is tracearray's specification. These are the places where a compiled function "
        "deliberately gives a different result (or refuses the program). This page is "
        "generated from `tracearray/testing/divergences.py`, the single list that the "
        "comparator of `tracearray.testing` consults; regenerate it with",
        "",
        "```",
        "python -c \"import tracearray.testing.divergences as d; "
        "print(d.render_markdown(), end='')\" \\",
        "    > docs/divergences.md",
        "```",
        "",
        "The *comparator* column says how `tracearray.testing.assert_matches_numpy` honours "
        "the divergence: `tolerance` (an entry of the tolerance table, docs/testing.md), "
        "`signed-zero` (the sign of a zero result is not compared there), `nan-payload` (NaN "
        "payloads are never compared, NaN positions are), `unverifiable` (elements that "
        "depend on it are not compared), `numpy-raises` (NumPy raises, the compiled function "
        "returns a value: accepted when the graph has the op), `trace` (NumPy's own result is "
        "checked against the traced graph with this relaxation), `error` (the program is "
        "refused with an error) and `not-compared`.",
        "",
        "| id | family | ops | comparator | divergence |",
        "|---|---|---|---|---|",
    ]
    for d in DIVERGENCES:
        ops = ", ".join(f"`{o}`" for o in d.ops) if d.ops != ("*",) else "all"
        text = d.text.replace("|", "\\|").replace("\n", " ")
        src = "" if d.source == "tracearray.testing.divergences" else f" *(text: `{d.source}`)*"
        lines.append(f"| `{d.id}` | {d.family} | {ops} | {d.comparator} | {text}{src} |")
    lines.append("")
    return "\n".join(lines)


