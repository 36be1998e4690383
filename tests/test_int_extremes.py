"""Integer ops at their type's extreme values, through every kernel strategy, on every target.

NumPy wraps integer arithmetic (``-INT_MIN == INT_MIN``, ``abs(INT_MIN) == INT_MIN``,
``MAX + 1 == MIN``); a code generator that assumes signed overflow cannot happen (LLVM's
``nsw``/``nuw`` flags, ``llvm.abs(x, true)``, an assembler that treats ``abs.s32`` as
non-negative) gives wrong answers exactly there. Every program below applies one wrapping op to
an array made of the dtype's edge values (``MIN, MIN+1, -1, 0, 1, MAX-1, MAX``) and feeds the
result to every consumer kind: the value itself, comparisons and ``sign`` (where a wrongly
assumed sign folds away), and reductions along rows (short rows: a thread per row on the GPU;
long rows: a block per row), along columns, over everything (two-stage) and scans.

- ``test_regressions_*``: the three silent wrong results of the GPU soak of 2026-12-01
  (seed 4242), shrunk; they run on the CPU here and on the GPU under ``-m gpu``;
- ``test_no_wrap_assumptions_in_ir``: the IR we emit carries no ``nsw``/``nuw``/``exact``
  flags and no poison-on-overflow intrinsic arguments, for every integer op of the table;
- ``test_ptx_*``: the GPU kernels of these programs assemble with ptxas, and contain none of
  the PTX instructions ptxas 13.0 miscompiles (``tracearray.gpu.ptx.ptxas_workarounds``);
- ``test_extremes_cpu`` (a representative subset) and ``test_extremes_cpu_all`` (the rest,
  marked ``slow``: ``-m "not slow"`` leaves it out) and
  ``test_extremes_cuda`` (all of it, ``-m gpu``): compiled results equal NumPy's exactly.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import tracearray
from tracearray.gpu import driver
from tracearray.gpu import ptx as P
from tracearray.testing import assert_matches_numpy
from tracearray.ops import INT_DTYPES, OPS, Kind

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HAVE_GPU = driver.is_available()
needs_gpu = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its "
                                                 "driver and cuda-bindings")]
needs_ptxas = pytest.mark.skipif(P.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not "
                                                                "installed")


def edge_values(dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if dtype.kind == "u":
        vals = [0, 1, 2, hi // 2, hi // 2 + 1, hi - 1, hi]
    else:
        vals = [lo, lo + 1, -1, 0, 1, hi - 1, hi]
    return np.array(vals, dtype=dtype)


def edge_array(dtype: np.dtype, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """``shape`` filled with the edge values, each in many positions (first, last, ties)."""
    vals = edge_values(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    flat = np.concatenate([np.tile(vals, n // len(vals) + 1)[:n]])
    rng.shuffle(flat)
    flat[: len(vals)] = vals      # every value at the start of the first row too
    return flat.reshape(shape)


# One wrapping op per program: name -> function of x (the edge-value array).
OPS_UNDER_TEST = {
    "negative": lambda x: -x,
    "absolute": lambda x: np.abs(x),
    "abs_by_select": lambda x: np.where(x < 0, -x, x),
    "max_of_negation": lambda x: np.maximum(x, -x),
    "square": lambda x: x * x,
    "double": lambda x: x + x,
    "difference": lambda x: x - x[..., ::-1],
    "invert": lambda x: ~x,
    "floor_divide": lambda x: x // x[..., ::-1],
    "remainder": lambda x: x % x[..., ::-1],
    "shift_left": lambda x: x << 1,
    "negate_then_widen": lambda x: (-x).astype(np.int64),
    "negate_then_narrow": lambda x: (-x).astype(np.int8),
}


def consumers(y: np.ndarray):
    """Everything that reads a wrapped value, one of each kernel strategy."""
    dt = y.dtype
    return (y, y < 0, y > 0, np.sign(y),
            y.sum(axis=-1, dtype=dt), y.sum(axis=-1), y.prod(axis=-1, dtype=dt),
            y.max(axis=-1), y.min(axis=-1), y.argmax(axis=-1), y.argmin(axis=-1),
            np.cumsum(y, axis=-1, dtype=dt),
            y.sum(axis=0, dtype=dt), y.max(axis=0), y.min(axis=0), y.argmin(axis=0),
            y.sum(dtype=dt), y.max(), y.min(), y.argmax(), y.argmin())


def program(op: str):
    f = OPS_UNDER_TEST[op]

    def prog(x):
        return consumers(f(x))
    prog.__name__ = prog.__qualname__ = f"extremes_{op}"
    return prog


# Row lengths: 7 (short rows: a thread per row on the GPU), 300 (long rows: a block per row);
# 3 x 300 also makes the column reductions long and the full reductions multi-block.
SHAPES = ((5, 7), (3, 300))
CASES = [(op, np.dtype(dt), shape) for op in OPS_UNDER_TEST for dt in INT_DTYPES
         for shape in SHAPES]
CPU_SUBSET = [c for c in CASES if c[0] in ("negative", "absolute", "abs_by_select", "square")
              and c[1].itemsize in (1, 2, 4, 8) and (c[1].kind == "i" or c[1].itemsize == 8)]


def _ids(case) -> str:
    op, dt, shape = case
    return f"{op}-{dt}-{'x'.join(map(str, shape))}"


def _check(case, device: str) -> None:
    op, dt, shape = case
    x = edge_array(dt, shape)
    assert_matches_numpy(program(op), x, device=device)


@pytest.mark.parametrize("case", CPU_SUBSET, ids=_ids)
def test_extremes_cpu(case) -> None:
    _check(case, "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c not in CPU_SUBSET], ids=_ids)
def test_extremes_cpu_all(case) -> None:
    _check(case, "cpu")


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
def test_extremes_cuda(case) -> None:
    _check(case, "cuda")


# ------------------------------------------------------------------------------------------
# The three shrunk programs of the GPU soak (seed 4242, 2026-12-01)
# ------------------------------------------------------------------------------------------

def sign_of_abs(x):
    return np.sign(abs(x))


def argmin_of_negated_transpose(x):
    return np.argmin(-x.T, axis=0)


def max_of_negation_over_a_middle_axis(x0):
    return np.mean(np.max(-x0, axis=1), axis=())


def sin_of_scaled_mean(x0):
    return np.sin(x0 * np.mean(x0, axis=0, keepdims=True))


REGRESSIONS = [
    # 1. abs of INT_MIN wraps to INT_MIN, so its sign is -1 (the GPU gave 0).
    (sign_of_abs, (np.array([-2147483648], np.int32),), None),
    # 2. -(-32768) wraps to -32768 in int16 and is the minimum (the GPU gave index 0).
    (argmin_of_negated_transpose, (np.array([[0, -32768]], np.int16),), None),
    # 3. huge arguments of sin: NumPy's own value was outside the comparator's interval.
    # 4. (GPU soak gpu-2026-12-01-b) ptxas fused max(-a, -b, -c) into one VIMNMX3 and lost a
    #    negation: 4 instead of 7.
    (max_of_negation_over_a_middle_axis, (np.array([[[0], [-7], [-4]]], np.int32),), None),
    (sin_of_scaled_mean, (np.array([85, 3000000000, 7, 2**32 - 1, 0, 1, 2**31, 123456789] * 40,
                                   np.uint32),), None),
]


def _regression_expected(fn, args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("fn,args,_", REGRESSIONS, ids=lambda v: getattr(v, "__name__", ""))
def test_regressions_cpu(fn, args, _) -> None:
    assert_matches_numpy(fn, *args, device="cpu")


def test_regression_values_are_numpys() -> None:
    # The first two are exact integer results: state them, so that a comparator bug cannot
    # hide a wrong one.
    assert _regression_expected(sign_of_abs, REGRESSIONS[0][1]).tolist() == [-1]
    assert _regression_expected(argmin_of_negated_transpose, REGRESSIONS[1][1]).tolist() == [1]
    assert _regression_expected(max_of_negation_over_a_middle_axis,
                                REGRESSIONS[2][1]).tolist() == [[7.0]]
    assert tracearray.compile(sign_of_abs, device="cpu")(*REGRESSIONS[0][1]).tolist() == [-1]
    assert tracearray.compile(argmin_of_negated_transpose,
                              device="cpu")(*REGRESSIONS[1][1]).tolist() == [1]


def test_comparator_accepts_numpys_own_sin_at_huge_arguments() -> None:
    """The soak's program 1199 of seed 4242 (shrunk): its own NumPy result must pass."""
    from tracearray.testing import compare_with_numpy
    x = REGRESSIONS[3][1][0]
    cmp = compare_with_numpy(sin_of_scaled_mean, x, device="cpu")
    assert cmp.ok, cmp.report()


@pytest.mark.parametrize("fn,args,_", REGRESSIONS, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_GPU, reason="needs an NVIDIA GPU, its driver and cuda-bindings")
def test_regressions_cuda(fn, args, _) -> None:
    assert_matches_numpy(fn, *args, device="cuda")


# ------------------------------------------------------------------------------------------
# Generated code: no assumption that integer arithmetic does not wrap
# ------------------------------------------------------------------------------------------

_WRAP_FLAGS = re.compile(r"= (add|sub|mul|shl|sdiv|udiv|lshr|ashr|trunc)\b[^\n]*\b(nsw|nuw|exact)\b")
_POISON_INTRINSIC = re.compile(r"@llvm\.(abs|ctlz|cttz)\.[^(]*\([^)]*i1 (true|1)\)")

INT_ELEMENTWISE = sorted(n for n, s in OPS.items() if s.kind is Kind.ELEMENTWISE and
                         s.ufunc is not None and any(d.kind in "iu" for d in s.domain.dtypes))


@pytest.mark.parametrize("dt", [np.dtype(d) for d in INT_DTYPES], ids=str)
def test_no_wrap_assumptions_in_ir(dt) -> None:
    """Every integer ufunc of the op table (and the reductions of this module), lowered for
    the CPU and the GPU: no ``nsw``/``nuw``/``exact`` flag and no ``is_int_min_poison`` /
    ``is_zero_poison`` argument in the IR we hand to LLVM."""
    x = edge_array(dt, (5, 7))
    ops = [n for n in INT_ELEMENTWISE if dt in OPS[n].domain.dtypes]

    def all_ops(x):
        outs = []
        for name in ops:
            uf = OPS[name].ufunc
            outs.append(uf(x) if uf.nin == 1 else uf(x, x[..., ::-1]))
        return tuple(outs) + consumers(-x)

    for device in ("cpu", "cuda"):
        lowered = tracearray.compile(all_ops, device=device).lower(x)
        text = lowered.as_text("llvm")
        assert not _WRAP_FLAGS.search(text), _WRAP_FLAGS.search(text).group(0)
        assert not _POISON_INTRINSIC.search(text), _POISON_INTRINSIC.search(text).group(0)


def _assemble_kernels(lowered) -> None:
    for k in lowered.executable.kernels:
        assert not re.search(r"\babs\.s(16|32|64)\b|\bneg\.s(16|32)\b", k.ptx), k.name
        P.ptxas(k.ptx, "sm_90")


@needs_ptxas
@pytest.mark.parametrize("fn,args,_", REGRESSIONS[:3], ids=lambda v: getattr(v, "__name__", ""))
def test_ptx_of_regressions_assembles_without_miscompiled_forms(fn, args, _) -> None:
    for dt in ("int8", "int16", "int32", "int64"):
        x = args[0].astype(dt)
        _assemble_kernels(tracearray.compile(fn, device="cuda").lower(x))


@needs_ptxas
@pytest.mark.parametrize("op", ["negative", "absolute", "abs_by_select", "max_of_negation",
                                "negate_then_widen"])
def test_ptx_of_extremes_assembles(op) -> None:
    x = edge_array(np.dtype(np.int16), SHAPES[1])
    _assemble_kernels(tracearray.compile(program(op), device="cuda").lower(x))


def test_ptxas_workarounds_rewrite() -> None:
    ptx = ("\tabs.s32 \t%r6, %r5;\n"
           "\t@%p1 abs.s64 \t%rd2, %rd2;\n"
           "\tneg.s16 \t%rs2, %rs1;\n"
           "\tneg.s32 \t%r9, %r8;\n")
    out = P.ptxas_workarounds(ptx)
    assert "abs.s" not in out and "neg.s16" not in out and "neg.s32" not in out
    assert "not.b32 %tn_t, %r8;" in out and "add.s32 %r9, %tn_t, 1;" in out
    assert "@%p1 selp.b64 %rd2, %ta_t, %rd2, %ta_p;" in out   # guard kept, operand aliasing ok
    assert out.count("{") == out.count("}") == 4
    with pytest.raises(P.GpuCodegenError, match="unexpected PTX form"):
        P.ptxas_workarounds("\tabs.s32 \t%r6, 5;\n")
