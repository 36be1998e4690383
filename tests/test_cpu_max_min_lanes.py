"""max / min and argmax / argmin of rows whose terms read an interleaved operand (CPU).

Pairwise distances read their second operand at stride D along the row (``c[None, :, :]``
summed over its last axis inside the row's reduction). The loop vectoriser's version of such
a row ran 5x slower than the same terms evaluated in explicit lanes, so max/min rows at
strides built into the code but not all contiguous run in vector lanes
(``KernelLowering._max_min_lanes``), and argmax/argmin rows at such strides in ``_arg_row``'s
lanes; an argmin over a small nested reduction (k-means' assignment step) is
one kernel. Results are NumPy's: NaN propagates (max/min) or is found first (arg*), ties go
to the first position, integers wrap as NumPy's do.
"""
from __future__ import annotations

import numpy as np
import pytest

import tracearray
from numpy_compare import assert_matches

PROGRAMS = {
    "min_dist": (lambda a, c: np.min(((a[:, None, :] - c[None, :, :]) ** 2).sum(-1), axis=1),
                 "fused"),
    "max_abs_dist": (lambda a, c: np.max(np.abs(a[:, None, :] - c[None, :, :]).sum(-1), 1),
                     "fused"),
    "max_of_max": (lambda a, c: (a[:, None, :] * c[None, :, :]).max(-1).max(1), "exact"),
    "min_of_a_column": (lambda a, c: np.min(a[:, None, 0] + c[None, :, -1], axis=1), "exact"),
    "argmin_dist": (lambda a, c: np.argmin(((a[:, None, :] - c[None, :, :]) ** 2).sum(-1),
                                           axis=1), "exact"),
    "argmax_max": (lambda a, c: np.argmax(np.abs(a[:, None, :] - c[None, :, :]).max(-1),
                                          axis=1), "exact"),
    "min_then_used": (lambda a, c: ((a[:, None, :] - c[None, :, :]) ** 2).sum(-1)
                      .min(1, keepdims=True) - a[:, :1], "fused"),
}
# rows (n) around the lanes' step (16 lanes x 4) and its tails; D = 1, 2, 3, 5
SHAPES = [(7, 3000, 3), (5, 1, 2), (5, 15, 3), (4, 16, 3), (3, 64, 2), (3, 65, 3), (6, 257, 5),
          (3, 100, 1), (2, 0, 3), (0, 4, 3)]
DTYPES = ["float32", "float64", "int32", "int64", "uint8", "int8"]


def operands(shape, dtype: str, rng: np.random.Generator, kind: str):
    m, n, d = shape
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 9, (m, d)).astype(dtype), rng.integers(0, 9, (n, d)).astype(dtype)
    p = rng.standard_normal((m, d)).astype(dtype)
    q = rng.standard_normal((n, d)).astype(dtype)
    if n and kind == "nan":
        q[rng.integers(n), 0] = np.nan
    if n and kind == "inf":
        q[rng.integers(n), -1] = -np.inf
        q[rng.integers(n), 0] = np.inf
    if kind == "zeros":
        p[:] = 0.0
        q[:] = -0.0
    return p, q


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_interleaved_rows_match_numpy(name: str, dtype: str) -> None:
    fn, family = PROGRAMS[name]
    f = tracearray.compile(fn, device="cpu")
    rng = np.random.default_rng(abs(hash((name, dtype))) % 2**32)
    kinds = ("plain", "nan", "inf", "zeros") if np.dtype(dtype).kind == "f" else ("plain",)
    for shape in SHAPES:
        for kind in kinds:
            p, q = operands(shape, dtype, rng, kind)
            try:
                with np.errstate(all="ignore"):
                    want = fn(p, q)
            except ValueError:      # NumPy refuses an empty max/min/argmax
                with pytest.raises(ValueError):
                    f(p, q)
                continue
            with np.errstate(all="ignore"):
                got = f(p, q)
            assert_matches(got, want, family, inputs=(p, q))


def test_argmin_over_a_nested_sum_is_one_kernel() -> None:
    """k-means' assignment: the distances are summed inside the argmin's row, never stored
    (the kernel writes only the positions)."""
    fn = PROGRAMS["argmin_dist"][0]
    p, q = np.ones((50, 3), np.float32), np.ones((400, 3), np.float32)
    f = tracearray.compile(fn, device="cpu")
    (kernel,) = f.lower(p, q).executable.kernels
    assert [st.node.dtype for st in kernel.spec.kernel.stores] == [np.dtype(np.int64)]


@pytest.mark.parametrize("name,marker", [("min_dist", "llvm.minimum.v16f32"),
                                         ("max_of_max", "llvm.maximum.v16f32"),
                                         ("argmin_dist", "fcmp olt <16 x float>")])
def test_interleaved_rows_run_in_vector_lanes(name: str, marker: str) -> None:
    """The row's terms are combined in 16-lane vectors (the lanes' code, before LLVM's
    passes), not left to the loop vectoriser's gathers."""
    fn = PROGRAMS[name][0]
    p, q = np.ones((50, 3), np.float32), np.ones((400, 3), np.float32)
    assert marker in tracearray.compile(fn, device="cpu").lower(p, q).as_text("llvm")
