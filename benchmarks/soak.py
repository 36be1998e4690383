#!/usr/bin/env python3
"""Soak test: many thousands of random NumPy programs through the compiler, compared with NumPy.

    python benchmarks/soak.py --programs 10000 --seed 0 --jobs 2 --device cpu \
        --json soak-results/summary.json [--results soak-results] [--timeout 120]

Program ``i`` is ``tracearray.testing.fuzz.program_for(seed, i)`` (deterministic); with
``--sizes N`` each program runs at N sizes of its size class with one compiled function
(``fuzz.run_program(p, device, N)``: later sizes re-derived from a size template, each result
compared with NumPy; programs from ``fuzz.RESIZE_SPACE``). Programs run
in child processes (``multiprocessing``, spawn), ``--jobs`` of them at a time; the parent hands
out program indices and reads one outcome per program, so a child that dies (a segfault in
generated code, an abort in LLVM) is counted as a *crash* of the program it was running and
replaced -- the soak itself cannot crash. A child that runs longer than ``--timeout`` seconds
on one program is killed (*timeout*). Children are replaced every ``--recycle`` programs so
that JIT memory stays bounded.

Counts: programs, matches (``divergent``: matches that needed a divergence other than a
tolerance), mismatches, compile errors (the compiler raised although NumPy accepted the
program), unsupported (UnsupportedOperationError: refused by design, not an error), crashes,
timeouts. Each mismatch, compile error, crash and timeout is saved as a self-contained
reproducer ``<results>/<status>-<seed>-<index>.py`` (mismatches and compile errors shrunk
first). The summary is written as JSON (``--json``) and markdown (same name, ``.md``), also
while running (``"complete": false``), so a long run can be polled.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.cpu import cpu_model  # noqa: E402  (the machine line of both reports)


# ============================================================================================
# Child
# ============================================================================================

def _worker(conn: Any, seed: str, device: str, results: str, shrink_budget: int,
            crash_at: int | None, sizes: int = 1) -> None:
    import warnings

    import numpy as np

    from tracearray.testing import fuzz
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    while True:
        index = conn.recv()
        if index is None:
            return
        if index == crash_at:   # self-test of crash accounting (--crash-at)
            os.abort()
        p = fuzz.program_for(seed, index, fuzz.RESIZE_SPACE if sizes > 1 else fuzz.SOAK_SPACE)
        out = fuzz.run_program(p, device, sizes)
        record: dict[str, Any] = {"index": index, "status": out.status,
                                  "seconds": round(out.seconds, 4),
                                  "divergences": list(out.divergences),
                                  "divergent": out.divergent, "resizes": out.resizes}
        if out.status == "unsupported":
            record["detail"] = out.detail
        if out.status in ("mismatch", "compile_error"):
            small = fuzz.shrink_failure(p, out, device, shrink_budget, sizes)
            small_out = fuzz.run_program(small, device, sizes)
            note = (f"{out.status} of program {index} of seed {seed!r} on device {device!r}.\n"
                    f"Original program (before shrinking):\n{p.source()}\n"
                    f"{(small_out.detail or out.detail)[:4000]}")
            path = Path(results) / f"{out.status}-{seed}-{index}.py"
            path.write_text(fuzz.program_reproducer(small, device, f"soak {out.status}", note))
            record["detail"] = out.detail.splitlines()[0][:300] if out.detail else ""
            record["reproducer"] = str(path)
        conn.send(record)


# ============================================================================================
# Parent
# ============================================================================================

class Worker:
    def __init__(self, ctx: Any, args: argparse.Namespace):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, args.seed, args.device,
                                                      args.results, args.shrink_budget,
                                                      args.crash_at, args.sizes),
                                daemon=True)
        self.proc.start()
        child.close()
        self.task: int | None = None
        self.started = 0.0
        self.done = 0

    def give(self, index: int) -> None:
        self.task, self.started = index, time.time()
        self.conn.send(index)

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()


def _save_unresponsive(args: argparse.Namespace, index: int, status: str, why: str) -> str:
    """Crash/timeout: the child cannot report, so the parent writes the reproducer (programs
    are deterministic: regenerating one runs no compiler code). Regenerating runs NumPy on
    every drawn step, which may itself be what hung: it runs in a subprocess with a limit."""
    path = Path(args.results) / f"{status}-{args.seed}-{index}.py"
    code = ("import sys; from pathlib import Path; from tracearray.testing import fuzz; "
            f"p = fuzz.program_for({args.seed!r}, {index}, "
            f"{'fuzz.RESIZE_SPACE' if args.sizes > 1 else 'fuzz.SOAK_SPACE'}); "
            f"Path({str(path)!r}).write_text(fuzz.program_reproducer(p, {args.device!r}, "
            f"{'soak ' + status!r}, {why!r}))")
    try:
        subprocess.run([sys.executable, "-c", code], timeout=120, check=True,
                       capture_output=True)
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
        path.write_text(f"# soak {status} of program {index} of seed {args.seed!r} ({why});\n"
                        f"# regenerating it failed too ({type(e).__name__}): drawing the "
                        f"program (NumPy evaluating its steps) is what fails.\n"
                        f"from tracearray.testing import fuzz\n"
                        f"fuzz.program_for({args.seed!r}, {index})\n")
    return str(path)


def _summary(args: argparse.Namespace, records: dict[int, dict], t0: float, complete: bool,
             command: str) -> dict[str, Any]:
    import llvmlite
    import numpy as np

    import tracearray
    counts = collections.Counter(r["status"] for r in records.values())
    unsupported = collections.Counter(r.get("detail", "") for r in records.values()
                                      if r["status"] == "unsupported")
    divergences = collections.Counter(d for r in records.values() for d in r["divergences"])
    failures = {s: sorted(({"index": i, "detail": r.get("detail", ""),
                            "reproducer": r.get("reproducer", "")}
                           for i, r in records.items() if r["status"] == s),
                          key=lambda r: r["index"])
                for s in ("mismatch", "compile_error", "crash", "timeout")}
    return {
        "complete": complete,
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seed": args.seed, "device": args.device, "jobs": args.jobs, "sizes": args.sizes,
        "machine": {"platform": platform.platform(), "machine": platform.machine(),
                    "processor": cpu_model(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "versions": {"tracearray": tracearray.__version__, "numpy": np.__version__,
                     "llvmlite": llvmlite.__version__},
        "programs": len(records),
        "requested": args.programs,
        "matches": counts["match"],
        "divergent_matches": sum(1 for r in records.values()
                                 if r["status"] == "match" and r["divergent"]),
        "mismatches": counts["mismatch"],
        "compile_errors": counts["compile_error"],
        "unsupported": counts["unsupported"],
        "crashes": counts["crash"],
        "timeouts": counts["timeout"],
        "resized_calls": sum(r.get("resizes", 0) for r in records.values()),
        "wall_seconds": round(time.time() - t0, 1),
        "mean_program_seconds": round(sum(r["seconds"] for r in records.values()) /
                                      max(1, len(records)), 4),
        "divergences_applied": dict(divergences.most_common()),
        "unsupported_reasons": dict(unsupported.most_common(20)),
        "failures": failures,
    }


def _markdown(s: dict[str, Any]) -> str:
    rows = [("programs", s["programs"]), ("matches", s["matches"]),
            ("  of which needed a non-tolerance divergence", s["divergent_matches"]),
            ("mismatches", s["mismatches"]), ("compile errors", s["compile_errors"]),
            ("unsupported (refused by design)", s["unsupported"]), ("crashes", s["crashes"]),
            ("timeouts", s["timeouts"])]
    if s.get("sizes", 1) > 1:
        rows.append((f"calls re-derived from a size template (of {s['sizes']} sizes a program)",
                     s.get("resized_calls", 0)))
    lines = [f"# Soak run, seed {s['seed']!r}, device {s['device']}", "",
             f"- command: `{s['command']}`", f"- date: {s['date']}",
             f"- machine: {s['machine']['processor']} ({s['machine']['cpus']} CPUs, "
             f"{s['machine']['platform']})",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in s["versions"].items()),
             f"- wall time: {s['wall_seconds']} s ({s['mean_program_seconds']} s per program "
             f"in a child)", "", "| outcome | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    for status, items in s["failures"].items():
        for it in items:
            lines.append(f"- {status} #{it['index']}: {it['detail']} ({it['reproducer']})")
    return "\n".join(lines) + "\n"


def _write(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if not args.json:
        return
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=2))
    os.replace(tmp, path)
    path.with_suffix(".md").write_text(_markdown(summary))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--seed", default="0")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--json", default="soak-results/summary.json")
    ap.add_argument("--results", default=None, help="folder for reproducers (default: the "
                                                    "--json file's folder)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per program")
    ap.add_argument("--sizes", type=int, default=1,
                    help="run each program at this many sizes of its size class, with one "
                         "compiled function (programs from fuzz.RESIZE_SPACE, whose "
                         "dimensions are mostly past resize.EXACT_DIMS: the later sizes are "
                         "re-derived from a size template)")
    ap.add_argument("--recycle", type=int, default=300, help="programs per child")
    ap.add_argument("--shrink-budget", type=int, default=150)
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--crash-at", type=int, default=None,
                    help="self-test: the child aborts (SIGABRT) on this program index")
    args = ap.parse_args(argv)
    args.results = args.results or str(Path(args.json).parent)
    Path(args.results).mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/soak.py " + " ".join(argv if argv is not None else sys.argv[1:])

    ctx = mp.get_context("spawn")
    pending = collections.deque(range(args.start, args.start + args.programs))
    records: dict[int, dict] = {}
    workers = [Worker(ctx, args) for _ in range(max(1, args.jobs))]
    t0 = last_write = last_print = time.time()
    while pending or any(w.task is not None for w in workers):
        for k, w in enumerate(workers):
            if w.task is None and w.done >= args.recycle:
                w.stop()
                workers[k] = w = Worker(ctx, args)
            if w.task is None and pending:
                w.give(pending.popleft())
        busy = [w for w in workers if w.task is not None]
        wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
        for k, w in enumerate(workers):
            if w.task is None:
                continue
            record = None
            if w.conn.poll():
                try:
                    record = w.conn.recv()
                except (EOFError, OSError):
                    record = None
            if record is not None:
                records[w.task] = record
                w.task, w.done = None, w.done + 1
                continue
            dead = not w.proc.is_alive()
            late = time.time() - w.started > args.timeout
            if dead or late:
                status = "crash" if dead else "timeout"
                if late:
                    w.kill()
                why = (f"child exit code {w.proc.exitcode}" if dead else
                       f"no result after {args.timeout:g} s")
                records[w.task] = {"index": w.task, "status": status, "seconds": 0.0,
                                   "divergences": [], "divergent": False, "detail": why,
                                   "reproducer": _save_unresponsive(args, w.task, status, why)}
                print(f"[soak] program {w.task}: {status} ({why})", file=sys.stderr)
                workers[k] = Worker(ctx, args)
        now = time.time()
        if now - last_print > 30:
            c = collections.Counter(r["status"] for r in records.values())
            print(f"[soak] {len(records)}/{args.programs} in {now - t0:.0f} s: {dict(c)}",
                  file=sys.stderr, flush=True)
            last_print = now
        if now - last_write > 30:
            _write(args, _summary(args, records, t0, False, command))
            last_write = now
    for w in workers:
        w.stop()
    summary = _summary(args, records, t0, True, command)
    _write(args, summary)
    print(_markdown(summary))
    bad = summary["mismatches"] + summary["compile_errors"] + summary["crashes"] + \
        summary["timeouts"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
