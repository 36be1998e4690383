"""Differential fuzzing of the compiler with random programs: one program, one outcome.

Used by ``tests/test_fuzz_programs.py`` (a bounded, deterministic batch in CI) and by
``benchmarks/soak.py`` (thousands of programs, each in a child process). Program ``i`` of seed
``s`` is ``program_for(s, i)``: the same on every machine and every run.

Outcomes (``STATUSES``): ``match``; ``mismatch`` (a value, dtype, shape or error differs from
NumPy); ``compile_error`` (tracing, planning, code generation or the run raised although NumPy
accepted the program -- a compiler bug); ``unsupported`` (``UnsupportedOperationError``: an
op combination tracearray refuses by design; not a bug); ``crash`` and ``timeout`` (only the
soak's parent can see those: the child died or hung).
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import UnsupportedOperationError
from .compare import Comparison, compare_with_numpy
from .programs import Program, ProgramSpace, generate, shrink
from .repro import reproducer
from .strategies import RandomSource

STATUSES = ("match", "mismatch", "compile_error", "unsupported", "crash", "timeout")

# The soak's programs: small shapes (compile time dominates), 3% large ones (threads, slots).
SOAK_SPACE = ProgramSpace(max_size=256, large_p=0.04)
# Divergences that only widen the tolerance (every float reduction or transcendental uses
# them); a match that needed any *other* one is counted as "divergent" in the soak summary.
TOLERANCE_DIVERGENCES = frozenset({"transcendental-ulps", "float-sum-reassociation",
                                   "float-prod-reassociation", "float16-accumulation",
                                   "matmul-blocking"})


# Programs run at several sizes (``run_program(sizes=...)``): dimensions mostly past
# ``trace.resize.EXACT_DIMS``, so that later sizes are re-derived from a size template.
RESIZE_SPACE = ProgramSpace(max_size=4096, large_p=0.04,
                            sides=(0, 1, 2, 3, 5, 16, 17, 19, 23, 31, 33, 64))


def grown_inputs(inputs: Sequence[np.ndarray], k: int) -> list[np.ndarray]:
    """The inputs at the ``k``-th other size of their size class: every dimension past
    ``EXACT_DIMS`` elements ``7 k`` longer (distinct ones stay distinct), the values repeated
    (special values included); contiguous copies."""
    from ..trace.resize import EXACT_DIMS
    out = []
    for a in inputs:
        shape = tuple(n + 7 * k if n > EXACT_DIMS else n for n in a.shape)
        out.append(np.resize(a, shape).astype(a.dtype) if a.size else np.zeros(shape, a.dtype))
    return out


def program_for(seed: int | str, index: int, space: ProgramSpace = SOAK_SPACE) -> Program:
    """The ``index``-th program of ``seed`` (deterministic)."""
    return generate(RandomSource(f"{seed}-{index}"), space, name="program")


@dataclass
class Outcome:
    status: str
    detail: str = ""
    divergences: tuple[str, ...] = ()
    seconds: float = 0.0
    comparison: Comparison | None = field(default=None, repr=False)
    error: BaseException | None = field(default=None, repr=False)
    resizes: int = 0   # calls re-derived from a size template (``run_program(sizes=...)``)

    @property
    def divergent(self) -> bool:
        return bool(set(self.divergences) - TOLERANCE_DIVERGENCES)


def run_program(p: Program, device: str = "cpu", sizes: int = 1) -> Outcome:
    """Compile and run ``p`` on ``device`` and compare with NumPy; with ``sizes`` > 1, the
    same compiled function also at ``sizes - 1`` other sizes of the inputs' size class
    (``grown_inputs``: the second checks the size template the first made, later ones are
    re-derived from it), each compared with NumPy."""
    t0 = time.perf_counter()
    try:
        compiled = None
        for k in range(sizes):
            inputs = p.inputs if k == 0 else grown_inputs(p.inputs, k)
            if compiled is None and sizes > 1:
                import tracearray
                compiled = tracearray.compile(p.fn, device=device)
            # (its draws reach the results through stream-independent values: fuzz f_random)
            cmp = compare_with_numpy(p.fn, *inputs, device=device, compiled=compiled,
                                     draws_reach_numpy=True)
            if not cmp.ok:
                return Outcome("mismatch", (f"at size {k} of {sizes} (fuzz.grown_inputs):\n"
                                            if k else "") + cmp.report(),
                               tuple(sorted(cmp.divergences)), time.perf_counter() - t0,
                               comparison=cmp)
    except UnsupportedOperationError as exc:
        return Outcome("unsupported", str(exc).splitlines()[0], seconds=time.perf_counter() - t0,
                       error=exc)
    except Exception as exc:   # noqa: BLE001 -- any other failure is a compiler bug
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4))
        return Outcome("compile_error", f"{type(exc).__name__}: {exc}\n{tb}",
                       seconds=time.perf_counter() - t0, error=exc)
    status = "match" if cmp.ok else "mismatch"
    return Outcome(status, "" if cmp.ok else cmp.report(), tuple(sorted(cmp.divergences)),
                   time.perf_counter() - t0, comparison=cmp,
                   resizes=compiled.stats.resizes if compiled is not None else 0)


def same_failure(a: Outcome, b: Outcome) -> bool:
    if a.status != b.status:
        return False
    if a.status == "compile_error":
        return type(a.error) is type(b.error)
    return True


def shrink_failure(p: Program, outcome: Outcome, device: str = "cpu", budget: int = 150,
                   sizes: int = 1) -> Program:
    """A smaller program that fails the same way (fewer outputs and steps, simpler inputs)."""
    def fails(q: Program) -> bool:
        return same_failure(outcome, run_program(q, device, sizes))
    return shrink(p, fails, budget)


def program_reproducer(p: Program, device: str | None, title: str, note: str = "") -> str:
    return reproducer(p.fn, p.inputs, device=device, title=title, note=note)


def cross_check(p: Program, devices: Sequence[str] = ("cpu", "cuda")) -> list[str]:
    """Run ``p`` on every device: each must match NumPy, and the devices must agree with each
    other bit for bit wherever NumPy's result is exact (integers, bools, exact float ops)."""
    problems: list[str] = []
    results: dict[str, Comparison] = {}
    for dev in devices:
        out = run_program(p, dev)
        if out.status not in ("match", "unsupported"):
            problems.append(f"{dev}: {out.status}: {out.detail[:3000]}")
        if out.comparison is not None:
            results[dev] = out.comparison
    if len(results) < 2:
        return problems
    (d0, c0), *others = results.items()
    leaves0 = _leaves(c0.result)
    for d1, c1 in others:
        for k, (g0, g1) in enumerate(zip(leaves0, _leaves(c1.result))):
            g0a, g1a = np.asarray(g0), np.asarray(g1)
            if g0a.shape != g1a.shape or g0a.dtype != g1a.dtype:
                problems.append(f"result leaf {k}: {d0} {g0a.dtype}{list(g0a.shape)} vs {d1} "
                                f"{g1a.dtype}{list(g1a.shape)}")
                continue
            pairs = g0a.dtype.kind == "c"
            if pairs:     # compared as (real, imag) pairs, as bounded
                g0a = np.stack([g0a.real, g0a.imag], axis=-1)
                g1a = np.stack([g1a.real, g1a.imag], axis=-1)
            # exact where both devices' bounds say so: a library path's documented
            # divergence (the GPU sort's order of ties, gpu-sort-ties) frees its elements
            exact = np.ones(g0a.shape, bool)
            for c in (c0, c1):
                b = c.bounds[k] if c.bounds is not None and k < len(c.bounds) else None
                if b is None:
                    continue
                e = np.asarray(b.exact)
                if pairs and e.shape == exact.shape[:-1]:
                    e = e[..., None]    # one flag per complex element: both its parts
                if e.shape == exact.shape or e.ndim == 0:
                    exact = exact & e
            same = (g0a == g1a) | (np.isnan(g0a) & np.isnan(g1a) if g0a.dtype.kind == "f"
                                   else False)
            bad = exact & ~np.asarray(same)
            if bad.any():
                problems.append(f"result leaf {k}: {int(bad.sum())} exact elements differ "
                                f"between {d0} and {d1}")
    return problems


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in _leaves(v)]
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v)]
    return [x]
