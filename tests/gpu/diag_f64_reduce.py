"""Diagnostic (H200 run of 2026-11-30): float64 block reductions lost their low 32 bits when
64-bit values went through 32-bit warp shuffles and per-warp shared slots; they now use a
shared-memory tree. This compares both paths on the GPU and saves their PTX and SASS.

    python3 tests/gpu/diag_f64_reduce.py OUTDIR
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import tracearray
from tracearray.gpu import codegen, ptx as P

out = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-logs")
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
cases = {
    "sum_f64_1": (lambda x: x.sum(), np.array([1.0])),
    "min_f64_0d": (lambda x: x.min(), np.array(2.191386997143269)),
    "sum_f64_10k": (lambda x: x.sum(), rng.standard_normal(10_000)),
    "rowsum_f64": (lambda x: x.sum(1), rng.standard_normal((7, 333))),
    "sum_i64": (lambda x: x.sum(), rng.integers(-2**40, 2**40, 10_000)),
}
real_bits = codegen._bits
for path in ("tree", "shuffle"):
    if path == "shuffle":
        codegen._bits = lambda t: 32   # force 64-bit values through the 32-bit word path
    for name, (fn, x) in cases.items():
        f = tracearray.compile(fn, device="cuda")
        got = np.asarray(f(x))
        want = fn(x)
        ok = np.array_equal(got, want) or np.allclose(got, want, rtol=1e-13, atol=0)
        print(f"{path:8s} {name:12s} {'ok ' if ok else 'BAD'} got={got.ravel()[:3]!r} "
              f"want={np.asarray(want).ravel()[:3]!r}", flush=True)
        if name == "sum_f64_1":
            text = f.lower(x).as_text("ptx")
            (out / f"{path}_{name}.ptx").write_text(text)
            try:
                cubin, _ = P.ptxas(text, "sm_90")
                (out / f"{path}_{name}.cubin").write_bytes(cubin)
                sass = subprocess.run(["cuobjdump", "-sass", str(out / f"{path}_{name}.cubin")],
                                      capture_output=True, text=True).stdout
                (out / f"{path}_{name}.sass").write_text(sass)
            except Exception as e:   # noqa: BLE001
                print("no SASS:", e)
codegen._bits = real_bits
