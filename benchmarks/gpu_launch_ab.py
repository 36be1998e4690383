#!/usr/bin/env python3
"""A/B of the GPU backend's launch constants on the 13 workloads and the library workloads of
benchmarks/gpu_library.py (issues 13, 17).

    python benchmarks/gpu_launch_ab.py --variant default= \\
        --variant grid16=tiling.row_grid_per_sm=16 \\
        --variant unroll2=codegen.WARP_ROW_UNROLL=2 \\
        --workloads layernorm,rmsnorm,softmax --rounds 2 --json ab.jsonl
    python benchmarks/gpu_launch_ab.py --dry-run ...   # no GPU: the CPU backend, check size

A variant is ``NAME=SETTINGS``, SETTINGS a comma-separated list of ``module.NAME=VALUE``:
``tiling.FIELD=N`` replaces a field of the launch policy (``tile/policy.py`` ``GpuTiling``,
through ``TRACEARRAY_TILING``: launch shapes only, the same code), ``codegen``, ``vector``,
``sort`` (``tracearray.gpu.*``) or ``drivers`` (``tracearray.tile.gpu``) ``.CONSTANT=VALUE``
sets a module constant that shapes the code, VALUE a Python literal; empty settings: the
code as it is. Each (round, variant) runs in a
new process with its own kernel cache folder, so no variant sees another's compiled kernels;
the variants alternate within each round. In the child: tracearray only, device arrays in,
the first call checked against float64 NumPy as ``benchmarks/gpu.py`` checks it, then
``--warmup`` calls and ``--repeat`` calls each between two CUDA events on tracearray's stream,
the median. This is a call-by-call harness (each call synchronised), so its figures run a few
percent above ``benchmarks/gpu.py``'s; compare variants within one run. One JSON line per
(round, variant) is appended to ``--json`` and printed.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = {"codegen": "tracearray.gpu.codegen", "vector": "tracearray.gpu.vector",
           "sort": "tracearray.gpu.sort", "drivers": "tracearray.tile.gpu"}
POLICY = "tiling"   # fields of tile.policy.GpuTiling


def parse_variant(text: str) -> tuple[str, dict[str, object]]:
    name, _, settings = text.partition("=")
    out: dict[str, object] = {}
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        module, _, constant = key.partition(".")
        if (module not in MODULES and module != POLICY) or not constant or not value:
            raise SystemExit(f"bad setting {item!r} in variant {text!r}: want module.NAME="
                             f"VALUE with module one of {POLICY}, {', '.join(MODULES)}")
        out[key] = ast.literal_eval(value)
    return name, out


def child(settings: dict[str, object], workloads: list[str], size: str, device: str,
          warmup: int, repeat: int) -> dict:
    import importlib
    import numpy as np
    sys.path.insert(0, str(ROOT))
    from benchmarks import gpu as G
    from benchmarks import workloads as W
    policy = {}
    for key, value in settings.items():
        module, constant = key.split(".")
        if module == POLICY:
            policy[constant] = value
            continue
        mod = importlib.import_module(MODULES[module])
        if not hasattr(mod, constant):
            raise SystemExit(f"{MODULES[module]} has no {constant}")
        setattr(mod, constant, value)
    if policy:   # read by every executable this process builds (tile.policy.policy_for)
        os.environ["TRACEARRAY_TILING"] = ",".join(f"{k}={v}" for k, v in policy.items())
        from tracearray.tile.policy import GpuTiling, policy_for
        policy_for(GpuTiling(1, 1))     # an unknown field fails here, named
    from benchmarks import gpu_library as L
    import tracearray
    out: dict = {}
    for name in workloads:
        if name in L.WORKLOADS:   # a library workload (benchmarks/gpu_library.py)
            w = L.WORKLOADS[name]
            host = L.make_inputs(name, size, 0)
            check = L.LibraryCheck(w, host)
        else:
            w = W.get(name)
            host = W.make_inputs(name, size, 0)
            check = G.Check(w, host)
        f = tracearray.compile(w.fn, device=device)
        if device == "cuda":
            import tracearray.gpu as gpu
            args = [gpu.Array.from_numpy(a) for a in host.values()]
        else:
            args = list(host.values())
        first = W.as_outputs(f(*args))
        # benchmarks/gpu.py's check (float64 NumPy on sampled rows at large sizes) or
        # benchmarks/gpu_library.py's
        err, problems = check.compare([np.asarray(o) for o in first])
        times = event_times(f, args, warmup, repeat) if device == "cuda" else []
        out[name] = {"ms": round(statistics.median(times), 4) if times else None,
                     "rel_err": err, "problems": problems}
        if device == "cuda":
            out[name]["launches"] = launch_facts(f)
    return out


def event_times(f, args, warmup: int, repeat: int) -> list[float]:
    """Milliseconds of ``repeat`` calls of ``f(*args)``, each between two CUDA events on
    tracearray's stream (waited for), after ``warmup`` untimed calls."""
    from tracearray import gpu
    for _ in range(warmup):
        f(*args)
    times = []
    for _ in range(repeat):
        start, end = gpu.Event(), gpu.Event()
        start.record()
        f(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_ms(end))
    return times


def launch_facts(f) -> list[dict]:
    """Each launch of a compiled function's executables: entry, grid, block, dynamic shared
    bytes, and the loaded function's registers per thread and resident blocks per
    multiprocessor (the driver's occupancy calculator)."""
    from tracearray.gpu import driver
    dev = driver.get_device()
    cu = dev.cu
    functions = {n: fn for mod in dev._modules.values() for n, fn in mod.items()}
    out = []
    for exe in f._executables.values():
        for gk in getattr(exe, "kernels", []):
            for launch in gk.launches:
                fn = functions.get(launch.entry)
                row = {"entry": launch.entry, "grid": launch.grid, "block": launch.block,
                       "smem": launch.smem}
                if fn is not None:
                    row["regs"] = int(dev.call(
                        "cuFuncGetAttribute",
                        cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn.handle))
                    row["blocks_per_sm"] = int(dev.call(
                        "cuOccupancyMaxActiveBlocksPerMultiprocessor", fn.handle,
                        launch.block, launch.smem))
                out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=module.NAME=VALUE,... (repeatable; default: one 'default=')")
    p.add_argument("--workloads", default="layernorm,rmsnorm,softmax")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--size", default=None, help="workload size (default: gpu; check with "
                                                "--dry-run)")
    p.add_argument("--json", help="append one JSON line per (round, variant) here")
    p.add_argument("--dry-run", action="store_true", help="the CPU backend: checks only")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    workloads = [w for w in a.workloads.split(",") if w]
    device = "cpu" if a.dry_run else "cuda"
    size = a.size or ("check" if a.dry_run else "gpu")
    if a.child is not None:
        print(json.dumps(child(json.loads(a.child), workloads, size, device, a.warmup,
                               a.repeat)))
        return 0
    variants = [parse_variant(v) for v in (a.variant or ["default="])]
    failed = 0
    for rnd in range(a.rounds):
        for name, settings in variants:
            with tempfile.TemporaryDirectory(prefix="ta-ab-") as cache:
                env = dict(os.environ, TRACEARRAY_CACHE_DIR=cache)
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                                 env.get("PYTHONPATH")]))
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(settings),
                     "--workloads", ",".join(workloads), "--size", size, "--warmup",
                     str(a.warmup), "--repeat", str(a.repeat)] + (["--dry-run"] * a.dry_run),
                    env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                failed += 1
                line = {"round": rnd, "variant": name, "settings": settings,
                        "error": proc.stderr.strip().splitlines()[-1:]}
            else:
                line = {"round": rnd, "variant": name, "settings": settings,
                        "results": json.loads(proc.stdout.strip().splitlines()[-1])}
            text = json.dumps(line)
            print(text, flush=True)
            if a.json:
                with open(a.json, "a") as fh:
                    fh.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
