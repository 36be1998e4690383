#!/usr/bin/env python3
"""One workload's GPU kernels under Nsight Compute (issue 17's readings of a kernel).

    ncu --set full --kernel-name regex:layernorm_k --launch-skip 2 --launch-count 1 \\
        python benchmarks/gpu_profile.py layernorm [--size gpu] [--calls 3]

Runs ``benchmarks/workloads.py``'s workload, compiled by tracearray for the GPU, ``--calls``
times on device arrays (the first call compiles; ``--launch-skip`` past it), then checks the
last result against NumPy as ``benchmarks/gpu.py`` does. Kernel names are the function's
name, ``_k`` and the kernel's position (``layernorm_k0``); ``--list`` prints each launch's
entry, grid, block and dynamic shared memory instead of running under a profiler.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks import gpu as G  # noqa: E402
from benchmarks import workloads as W  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workload")
    p.add_argument("--size", default="gpu")
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--list", action="store_true", help="print the launches and exit")
    a = p.parse_args(argv)
    import tracearray
    import tracearray.gpu as gpu
    w = W.get(a.workload)
    host = W.make_inputs(a.workload, a.size, 0)
    args = [gpu.Array.from_numpy(x) for x in host.values()]
    f = tracearray.compile(w.fn, device="cuda")
    out = None
    for _ in range(max(1, a.calls)):
        out = W.as_outputs(f(*args))
    err, problems = G.Check(w, host).compare([np.asarray(o) for o in out])
    print(f"{a.workload}: relative error {err:.3g}{' ' + '; '.join(problems) if problems else ''}")
    if a.list:
        for exe in f._executables.values():
            for gk in getattr(exe, "kernels", []):
                for launch in gk.launches:
                    # the kernel's name, and the symbol a profiler shows for it
                    print(f"  {gk.name} ({gk.strategy}): {launch.entry}, grid {launch.grid}, "
                          f"block {launch.block}, dynamic shared {launch.smem} B")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
