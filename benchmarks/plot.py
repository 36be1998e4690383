"""The benchmark plots of the README and docs/benchmarks.md, drawn from the JSON kept in docs/.

    python benchmarks/plot.py            # writes docs/img/bench-cpu.png and docs/img/bench-gpu.png

CPU: speedup over NumPy per workload (NumPy's median time / the framework's), from the run
recorded in ``CPU_RUN``. GPU: milliseconds per call per workload, from the three calls of
``GPU_RUNS`` (each measured some of the 13 workloads; together they are docs/benchmarks.md's
GPU table). Only
results whose check against the float64 reference passed are drawn (a failed or missing one
is a gap). ``cpu_speedups`` and ``gpu_times`` read the JSON without matplotlib; only drawing
needs it (``pip install matplotlib``).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_RUN = ROOT / "docs" / "bench-cpu-2026-11-30c.json"
GPU_RUNS = tuple(ROOT / "docs" / f"bench-gpu-2026-12-01-{c}.json" for c in "abc")
CPU_FRAMEWORKS = ("numexpr", "numba", "tracearray")
GPU_FRAMEWORKS = ("tracearray", "torch.compile", "jax.jit", "cupy")


def cpu_speedups(run: dict) -> dict[str, dict[str, float]]:
    """framework -> workload -> NumPy's ms / the framework's ms, for checked results."""
    ms = {(r["workload"], r["framework"]): r["ms"] for r in run["results"] if r.get("ok")}
    out: dict[str, dict[str, float]] = {}
    for fw in CPU_FRAMEWORKS:
        out[fw] = {w: ms[(w, "numpy")] / ms[(w, fw)] for w in run["workloads"]
                   if (w, fw) in ms and (w, "numpy") in ms}
    return out


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def gpu_times(runs: list[dict]) -> dict[str, dict[str, float]]:
    """framework -> workload -> ms per call, for results whose check passed."""
    out: dict[str, dict[str, float]] = {fw: {} for fw in GPU_FRAMEWORKS}
    for run in runs:
        for r in run["results"]:
            if r["framework"] in out and r.get("status") == "ok":
                out[r["framework"]][r["workload"]] = r["ms"]
    return out


def _bars(ax, workloads: list[str], series: dict[str, dict[str, float]]) -> None:
    width = 0.8 / len(series)
    for i, (fw, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j, w in enumerate(workloads)
              if w in values]
        ax.bar(xs, [values[w] for w in workloads if w in values], width, label=fw)
    ax.set_xticks(range(len(workloads)), workloads, rotation=45, ha="right")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(axis="y", which="both", alpha=0.3)


def draw(out_dir: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    cpu = json.loads(CPU_RUN.read_text())
    speed = cpu_speedups(cpu)
    workloads = list(cpu["workloads"])
    machine = cpu["machine"]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    _bars(ax, workloads, speed)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("speedup over NumPy (higher is better)")
    ax.set_title(f"CPU, {machine['cpu_count']} cores ({machine['cpu_model']}), "
                 f"{machine['date'][:16].replace('T', ' ')} UTC: tracearray geomean "
                 f"{geomean(list(speed['tracearray'].values())):.2f}x NumPy", fontsize=10)
    fig.tight_layout()
    written.append(out_dir / "bench-cpu.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    gpus = [json.loads(path.read_text()) for path in GPU_RUNS]
    times = gpu_times(gpus)
    workloads = [w for run in gpus for w in run["workloads"]]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    _bars(ax, workloads, times)
    ax.set_ylabel("ms per call (lower is better)")
    first, last = gpus[0]["date"][:16].replace("T", " "), gpus[-1]["date"][11:16]
    ax.set_title(f"GPU, one {gpus[0]['device']}, float32, {first}-{last} UTC "
                 f"(jax.jit not run on the last two workloads)", fontsize=10)
    fig.tight_layout()
    written.append(out_dir / "bench-gpu.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    for path in draw(parser.parse_args().out):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
