"""Smoke test of the CPU benchmark suite (benchmarks/), at the tiny `check` size.

It proves the suite measures what it claims: inputs are deterministic, float32 and never zero;
NumPy, numexpr and numba baselines agree with the float64 reference within each workload's
tolerance; the CLI runs end to end.  The numba part runs when numba is importable here, or in
the interpreter named by $TRACEARRAY_NUMBA_PYTHON; otherwise it is skipped (numba is not a
project dependency).

The tracearray part is deliberately an ordinary test, not skipped: until `tracearray.compile`
handles every workload correctly it fails, and that failure is the signal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import baselines as B  # noqa: E402
from benchmarks import workloads as W  # noqa: E402

SIZE = "check"


def _benchmark(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> <args>`` from the repository root, its output captured."""
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
NAMES = W.names()
CPU_NAMES = W.cpu_names()   # the 13 and the CPU benchmark's arg-reduction rows


def _case(name: str):
    """(workload, inputs, float64 reference, argument list) at the check size, seed 0."""
    w = W.get(name)
    inputs = W.make_inputs(name, SIZE, seed=0)
    return w, inputs, W.reference(w, inputs), [inputs[a.name] for a in w.args]


def _dtypes(result):
    return sorted({str(o.dtype) for o in W.as_outputs(result)})


# --------------------------------------------------------------------------------------
# Inputs and the suite's own definitions
# --------------------------------------------------------------------------------------

def test_all_thirteen_workloads_defined():
    assert NAMES == ["ew_chain", "gelu_tanh", "softmax", "logsumexp", "layernorm", "rmsnorm",
                     "l2_normalize", "adam_step", "black_scholes", "haversine", "moments",
                     "pairwise_min", "linear_relu"]
    assert W.SIZES == ("check", "cpu", "gpu")
    for w in W.WORKLOADS.values():
        assert set(w.sizes) == set(W.SIZES)
        assert w.bytes("cpu") > 0 and w.flops("cpu") > 0
        assert w.flops("gpu") > w.flops("cpu")   # the GPU shapes are the larger ones


@pytest.mark.parametrize("name", NAMES)
def test_inputs_are_deterministic_float32_and_nonzero(name):
    w = W.get(name)
    first = W.make_inputs(name, SIZE, seed=0)
    again = W.make_inputs(name, SIZE, seed=0)
    other = W.make_inputs(name, SIZE, seed=1)
    assert list(first) == [a.name for a in w.args]
    assert W.input_digest(first) == W.input_digest(again)
    assert W.input_digest(first) != W.input_digest(other)
    for a in w.args:
        x = first[a.name]
        assert x.dtype == np.float32 and x.shape == w.shapes(SIZE)[a.name]
        assert np.array_equal(x, again[a.name])
        assert np.all(x != 0.0)
        assert np.all((x >= np.float32(a.low)) & (x <= np.float32(a.high)))


def test_input_streams_do_not_depend_on_other_workloads():
    """Each argument has its own stream: generating another workload first changes nothing."""
    before = W.input_digest(W.make_inputs("adam_step", SIZE, seed=3))
    W.make_inputs("softmax", SIZE, seed=3)
    assert W.input_digest(W.make_inputs("adam_step", SIZE, seed=3)) == before


# --------------------------------------------------------------------------------------
# Baselines against the float64 reference
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_numpy_float32_matches_float64_reference(name):
    w, inputs, ref, args = _case(name)
    out = w.fn(*args)
    assert _dtypes(out) == ["float32"], "a float64 constant promoted the float32 computation"
    assert W.max_rel_err(out, ref) <= w.tol


@pytest.mark.parametrize("name", sorted(B.NUMEXPR))
def test_numexpr_baseline_matches_reference(name):
    pytest.importorskip("numexpr")
    w, inputs, ref, args = _case(name)
    out = B.NUMEXPR[name](*args)
    assert _dtypes(out) == ["float32"]
    assert W.max_rel_err(out, ref) <= w.tol


@pytest.fixture(scope="module")
def numba_check():
    """A function name -> (rel_err, dtypes) for the numba loop, in-process or in the worker."""
    python = os.environ.get(B.NUMBA_PYTHON_ENV)
    if python:
        with B.RemoteNumba(python) as remote:
            def remote_check(name):
                r = remote.load(name, SIZE, 0)
                assert r["digest"] == W.input_digest(W.make_inputs(name, SIZE, 0))
                return r["rel_err"], r["dtypes"]
            yield remote_check
    elif B.numba_available():
        def local_check(name):
            w, inputs, ref, args = _case(name)
            out = B.numba_kernels()[name](*args)
            return W.max_rel_err(out, ref), _dtypes(out)
        yield local_check
    else:
        pytest.skip(f"numba not importable and ${B.NUMBA_PYTHON_ENV} unset")


def _numpy_dtypes(name):
    w, inputs, ref, args = _case(name)
    return _dtypes(w.fn(*args))


def test_cpu_extras_are_the_arg_reduction_rows_checked_exactly():
    assert CPU_NAMES == NAMES + ["argmax_rows", "argmin_rows"]
    for name in ("argmax_rows", "argmin_rows"):
        w, inputs, ref, args = _case(name)
        assert w.tol == 0.0 and w.shapes("cpu") == {"x": (4096, 1024)}
        out = w.fn(*args)
        assert _dtypes(out) == ["int64"] and W.max_rel_err(out, ref) == 0.0
        wrong = out.copy()
        wrong[0] = (wrong[0] + 1) % args[0].shape[1]
        assert W.max_rel_err(wrong, ref) > w.tol


@pytest.mark.parametrize("name", CPU_NAMES)
def test_numba_baseline_matches_reference(name, numba_check):
    err, dtypes = numba_check(name)
    assert dtypes == _numpy_dtypes(name)
    assert err <= W.get(name).tol


@pytest.fixture(scope="module")
def jax_check():
    """A function name -> (rel_err, dtypes) for jax.jit of the workload, in-process or in the
    worker named by $TRACEARRAY_JAX_PYTHON."""
    python = os.environ.get(B.JAX_PYTHON_ENV)
    if python:
        with B.RemoteJax(python) as remote:
            assert remote.info["backend"] == "cpu"
            def remote_check(name):
                r = remote.load(name, SIZE, 0)
                assert r["digest"] == W.input_digest(W.make_inputs(name, SIZE, 0))
                return r["rel_err"], r["dtypes"]
            yield remote_check
    elif B.jax_available():
        def local_check(name):
            w, inputs, ref, args = _case(name)
            out = B.jax_kernels()[name](*B.jax_device_arrays(args))
            return W.max_rel_err(out, ref), _dtypes(out)
        yield local_check
    else:
        pytest.skip(f"jax not importable and ${B.JAX_PYTHON_ENV} unset")


@pytest.mark.parametrize("name", CPU_NAMES)
def test_jax_baseline_matches_reference(name, jax_check):
    err, dtypes = jax_check(name)
    # JAX without x64 has no int64: its indices are int32 (benchmarks/cpu.py accepts them)
    assert dtypes == [{"int64": "int32"}.get(d, d) for d in _numpy_dtypes(name)]
    assert err <= W.get(name).tol


def _record(name, fw, ms, ok=True):
    return dict(workload=name, framework=fw, ok=ok, ms=ms)


def test_cpu_verdict_names_each_workload_behind_its_best_peer():
    """Issue 17's CPU target: a workload counts as behind when ANY correct peer is faster; a
    wrong peer result is no competition; the table names the peer."""
    from benchmarks import cpu as C
    results = {
        "ew_chain": {"numpy": _record("ew_chain", "numpy", 4.0),
                     "jax.jit": _record("ew_chain", "jax.jit", 1.0),
                     "tracearray": _record("ew_chain", "tracearray", 2.0)},
        "moments": {"numpy": _record("moments", "numpy", 4.0),
                    "numba": _record("moments", "numba", 0.5, ok=False),   # wrong: ignored
                    "tracearray": _record("moments", "tracearray", 1.0)},
    }
    peer_verdict = C.verdicts(results, numba_available=True)[-1]
    assert peer_verdict["passed"] is False
    assert "jax.jit" in peer_verdict["target"] and "numexpr" not in peer_verdict["target"]
    assert peer_verdict["detail"] == "behind: ew_chain 0.50× (jax.jit)"
    assert C.speedups_vs_best_peer(results) == {"ew_chain": (0.5, "jax.jit"),
                                                "moments": (4.0, "numpy")}
    table = C.markdown_table(results, "check")
    assert "| 0.50× (jax.jit) |" in table and "| 4.00× (numpy) |" in table
    results["ew_chain"]["tracearray"]["ms"] = 0.9
    assert C.verdicts(results, numba_available=True)[-1]["passed"] is True


# --------------------------------------------------------------------------------------
# The benchmark script
# --------------------------------------------------------------------------------------

def test_cpu_cli_runs_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = _benchmark("cpu.py", "--size", SIZE, "--only", "ew_chain,moments", "--repeat", "2",
                      "--warmup", "1", "--settle", "0.01", "--no-numba", "--no-jax",
                      "--keep-openblas-env", "--json", str(out), timeout=120)
    assert "| workload |" in proc.stdout and "geomean" in proc.stdout, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["size"] == SIZE and doc["machine"]["cpu_count"] >= 1
    numpy_recs = [r for r in doc["results"] if r["framework"] == "numpy"]
    assert [r["workload"] for r in numpy_recs] == ["ew_chain", "moments"]
    assert all(r["ok"] and r["ms"] > 0 for r in numpy_recs)
    assert len(doc["verdicts"]) == 4
    # exit 1 exactly when some result failed (tracearray, until the compiler lands)
    assert proc.returncode == (1 if doc["failures"] else 0)


def test_monte_carlo_cli_runs_and_writes_json(tmp_path):
    """benchmarks/monte_carlo.py at 20,000 draws: every estimate checked (exit 0), one kernel
    per workload (the draws fused into their consumers)."""
    out = tmp_path / "mc.json"
    proc = _benchmark("monte_carlo.py", "--n", "20000", "--repeat", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["workload"] for r in rows] == ["pi", "option", "dice", "noise"]
    assert all(r["ok"] and r["kernels"] == 1 for r in rows)


def test_accuracy_cli_runs_and_writes_json(tmp_path):
    """benchmarks/accuracy.py at 2^12 terms: 16 rows, exact references that are exact (a sum
    of small integers), and both NumPy's and tracearray's errors within a few eps."""
    from benchmarks import accuracy as A
    x = np.arange(1, 4097, dtype=np.float32)
    assert A.exact("sum", x) == 4096 * 4097 / 2
    assert A.exact("(x*x).sum()", x) == sum(i * i for i in range(1, 4097))
    assert A.exact("var", x) == (4096 ** 2 - 1) / 12
    out = tmp_path / "acc.json"
    proc = _benchmark("accuracy.py", "--sizes", "12", "--json", str(out), timeout=120)
    assert proc.returncode == 0 and "| dtype | op | n | NumPy |" in proc.stdout, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 8 and {r["op"] for r in rows} == set(A.OPS)
    for r in rows:
        eps = float(np.finfo(r["dtype"]).eps)
        assert r["numpy"] < 4 * eps and r["tracearray"] < 4 * eps, r


# --------------------------------------------------------------------------------------
# tracearray itself: expected to fail until tracearray.compile handles the workload
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CPU_NAMES)
def test_tracearray_compile_matches_reference(name):
    import tracearray

    w, inputs, ref, args = _case(name)
    compiled = tracearray.compile(w.fn)
    first = compiled(*args)   # trace + compile + run
    second = compiled(*args)  # the cached path
    expected = _dtypes(w.fn(*args))
    for out in (first, second):
        assert _dtypes(out) == expected
        assert W.max_rel_err(out, ref) <= w.tol


# --------------------------------------------------------------------------------------
# The GPU benchmarks (benchmarks/gpu.py, gpu_writes.py): their dry runs check tracearray on
# the CPU; their checking, namespace and timing machinery is tested without a GPU here
# --------------------------------------------------------------------------------------

DRY_WORKLOADS = ["ew_chain", "softmax", "adam_step", "moments"]   # arrays, tuples, scalars


def _dry_run(tmp_path, script: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"{script}.json"
    proc = _benchmark(script, "--dry-run", "--size", "check", "--repeat", "2", "--warmup", "0",
                      "--json", str(out), *extra)
    assert out.exists(), proc.stdout + proc.stderr
    return proc, json.loads(out.read_text())


def test_gpu_benchmark_dry_run_checks_tracearray_and_writes_json(tmp_path):
    proc, doc = _dry_run(tmp_path, "gpu.py", "--workloads", ",".join(DRY_WORKLOADS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| workload | floor ms | tracearray | torch.compile | jax.jit | cupy | cupy.fuse |" \
        in proc.stdout
    assert doc["dry_run"] and doc["size"] == SIZE and doc["date"] and doc["device"]
    assert doc["bandwidth"]["bytes_per_s"] > 0
    assert [(r["workload"], r["framework"], r["status"]) for r in doc["results"]] == \
        [(name, "tracearray", "ok") for name in DRY_WORKLOADS]
    for r in doc["results"]:
        assert r["ms"] > 0 and r["pct_floor"] > 0 and r["reps"] == 2
        assert r["rel_err"] <= W.get(r["workload"]).tol
    others = [doc["frameworks"][fw] for fw in ("torch.compile", "jax.jit", "cupy", "cupy.fuse")]
    assert all(not o["available"] and o["reason"] for o in others)


def test_gpu_writes_dry_run_checks_tracearray_and_reports_refusals(tmp_path):
    proc, doc = _dry_run(tmp_path, "gpu_writes.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = {r["workload"]: r for r in doc["results"]}
    assert list(status) == ["gather", "masked_sum", "masked_zero_sum", "scatter_add",
                            "scatter_set", "cumsum", "jacobi_inplace", "jacobi_copy",
                            "heat_steps"]
    for name, r in status.items():
        if name == "scatter_add" and r["status"] == "refused":   # until np.add.at compiles
            assert "add.at" in r["reason"] and f"refused: {r['reason']}" in proc.stdout
        else:
            assert r["status"] == "ok" and r["rel_err"] <= 1e-4, r
    assert doc["workloads"]["jacobi_inplace"]["inplace"] == ["u"]


def test_gpu_library_dry_run_checks_tracearray(tmp_path):
    """benchmarks/gpu_library.py (FFTs, matmul, solve, cholesky, qr, eigvalsh, svd, sorts, a
    partition, unique, the large matrices of cuSOLVER): every workload compiles and matches its float64 reference on the CPU."""
    proc, doc = _dry_run(tmp_path, "gpu_library.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    status = {r["workload"]: r for r in doc["results"]}
    assert list(status) == ["power_spectrum", "fft_filter", "complex_fft", "matmul",
                            "batched_solve", "sort_rows", "median_rows", "quantile_rows",
                            "sort_long", "argsort_long", "batched_cholesky", "batched_qr",
                            "batched_eigvalsh", "batched_svdvals", "top8_rows", "unique_long",
                            "large_solve", "large_eigvalsh", "large_svdvals", "large_eigvals"]
    for r in status.values():
        assert r["status"] == "ok" and r["rel_err"] <= 1e-4, r


def test_gpu_launch_ab_dry_run_runs_each_variant_in_its_own_process(tmp_path):
    """benchmarks/gpu_launch_ab.py: each (round, variant) a child with its settings applied
    (a policy field or constant that does not exist fails that variant, named), the
    workloads checked against float64 NumPy, one JSON line each."""
    out = tmp_path / "ab.jsonl"
    proc = _benchmark("gpu_launch_ab.py", "--dry-run", "--variant", "default=",
                      "--variant", "grid16=tiling.row_grid_per_sm=16",
                      "--variant", "typo=tiling.row_grid_per_smm=21",
                      "--variant", "typo2=codegen.WARP_ROW_UNROLLL=2",
                      "--workloads", "softmax,ew_chain", "--rounds", "1", "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr   # the typo's variant failed
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["variant"] for x in lines] == ["default", "grid16", "typo", "typo2"]
    assert lines[1]["settings"] == {"tiling.row_grid_per_sm": 16}
    for x in lines[:2]:
        assert set(x["results"]) == {"softmax", "ew_chain"}
        for r in x["results"].values():
            assert r["rel_err"] <= 1e-4 and not r["problems"]
    assert "no tiling policy has a field 'row_grid_per_smm'" in lines[2]["error"][0]
    assert "has no WARP_ROW_UNROLLL" in lines[3]["error"][0]


@pytest.mark.parametrize("name", NAMES)
def test_gpu_check_samples_rows_of_the_full_reference(name):
    """At large sizes gpu.py checks sampled rows: their reference must be the full one's rows,
    and a wrong output must fail the comparison."""
    from benchmarks import gpu as G

    w, inputs, full, args = _case(name)
    check = G.Check(w, inputs, max_rows=7, max_elements=101)
    assert (check.rows is None) == (G.SAMPLED_ARGS[name] == ())
    for ref, whole in zip(check.ref, full, strict=True):
        want = whole[check.rows] if check.rows is not None and whole.ndim else whole
        np.testing.assert_allclose(ref, want, rtol=1e-12)
    outs = [np.asarray(o) for o in W.as_outputs(w.fn(*args))]
    assert check.compare(outs)[1] == []
    wrong = [o * np.float32(1 + 10 * w.tol) for o in outs]
    assert any("relative error" in p for p in check.compare(wrong)[1])
    assert check.compare([o.astype(np.float64) for o in outs])[1]   # float64 is not NumPy's
    if check.rows is not None:
        short = [o[:-1] if o.ndim else o for o in outs]
        assert any("shape" in p for p in check.compare(short)[1])


class _Counting:
    """NumPy as a namespace that records which names were looked up."""

    def __init__(self):
        self.used = set()

    def __getattr__(self, name):
        self.used.add(name)
        return getattr(np, name)


def test_with_namespace_rebinds_np_in_called_functions_too():
    from benchmarks import gpu as G

    ns = _Counting()
    w, inputs, ref, args = _case("black_scholes")
    out = G.with_namespace(w.fn, ns)(*args)
    assert {"sqrt", "log", "exp", "abs", "where"} <= ns.used   # abs, where: in normal_cdf
    for got, want in zip(out, w.fn(*args), strict=True):
        np.testing.assert_array_equal(got, want)


class _FakeTorch:
    """The torch functions torch_numpy uses, with torch's signatures, over NumPy."""
    exp, log, sqrt, tanh, sin, cos, abs, where = (np.exp, np.log, np.sqrt, np.tanh, np.sin,
                                                  np.cos, np.abs, np.where)
    asin, maximum, minimum = np.arcsin, np.maximum, np.minimum

    @staticmethod
    def clamp(x, min=None, max=None):
        return np.clip(x, min, max)

    @staticmethod
    def amax(x, dim=None, keepdim=False):
        return np.max(x, axis=dim, keepdims=keepdim)

    @staticmethod
    def amin(x, dim=None, keepdim=False):
        return np.min(x, axis=dim, keepdims=keepdim)

    @staticmethod
    def sum(x, dim=None, keepdim=False):
        return np.sum(x, axis=dim, keepdims=keepdim)

    @staticmethod
    def mean(x, dim=None, keepdim=False):
        return np.mean(x, axis=dim, keepdims=keepdim)


@pytest.mark.parametrize("name", NAMES)
def test_torch_numpy_covers_every_numpy_call_of_the_workloads(name):
    from benchmarks import gpu as G

    w, inputs, ref, args = _case(name)
    out = G.with_namespace(w.fn, G.torch_numpy(_FakeTorch))(*args)
    for got, want in zip(W.as_outputs(out), W.as_outputs(w.fn(*args)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_gpu_run_cell_reports_wrong_results_refusals_and_missed_writes():
    import argparse

    from benchmarks import gpu as G
    from benchmarks import gpu_writes as GW

    fw = G.TracearrayCPU()
    opts = argparse.Namespace(repeat=2, warmup=0, budget=10.0)
    w, inputs, ref, args = _case("ew_chain")
    check = G.Check(w, inputs)
    ok = G.run_cell(fw, w.fn, args, check.compare, opts)
    assert ok["status"] == "ok" and ok["reps"] == 2

    wrong = G.run_cell(fw, lambda a, b, c, d: a * b + c, args, check.compare, opts)
    assert wrong["status"] == "FAIL" and "relative error" in wrong["reason"]

    def python_float_of_a_value(a, b, c, d):
        return a * max(b.ravel()[:4].tolist())
    refused = G.run_cell(fw, python_float_of_a_value, args, check.compare, opts)
    assert refused["status"] == "refused" and "ConcretizationError" in refused["reason"]

    stencil = GW.WORKLOADS["jacobi_inplace"]
    grid = GW.make_inputs("jacobi_inplace", SIZE)
    grid_check = GW.WriteCheck(stencil, grid)
    written = G.run_cell(fw, stencil.fn, list(grid.values()), grid_check.compare, opts, [0])
    assert written["status"] == "ok"
    missed = G.run_cell(fw, lambda u: u * 0.25, list(grid.values()), grid_check.compare, opts,
                        [0])
    assert missed["status"] == "FAIL"


def _timed_emulated_device():
    """The SIMT emulator (tests/gpu_emulator.py) with timing events: its kernels run when
    launched, so the host clock when an event is recorded is that event's time."""
    from gpu_emulator import EmulatedDevice

    class TimedEmulatedDevice(EmulatedDevice):
        stream = "emulated stream"
        driver_version = 0

        def __init__(self):
            super().__init__()
            self.events = {}

        def call(self, fname, *args):
            if fname == "cuEventCreate":
                self.events[len(self.events) + 1] = None
                return len(self.events)
            if fname == "cuEventRecord":
                assert args[1] == self.stream
                self.events[args[0]] = time.perf_counter()
            if fname == "cuEventElapsedTime":
                return (self.events[args[1]] - self.events[args[0]]) * 1e3
            return None

    return TimedEmulatedDevice()


@pytest.fixture
def timed_emulator():
    from tracearray.gpu import driver

    dev = _timed_emulated_device()
    prev = driver.set_device_for_testing(dev)
    yield dev
    driver.set_device_for_testing(prev)


def test_gpu_benchmark_device_path_under_the_emulator(timed_emulator):
    """The GPU path of both scripts for tracearray (device arrays in and out, events on its
    stream, in-place copies, memory given back), with the emulator as the GPU."""
    import argparse

    from benchmarks import gpu as G
    from benchmarks import gpu_writes as GW

    fw = G.Tracearray()
    assert fw.describe()["device"] == "emulated GPU"
    opts = argparse.Namespace(repeat=3, warmup=1, budget=30.0)
    bandwidth = G.copy_bandwidth({"tracearray": fw}, SIZE, 2)
    assert bandwidth["bytes_per_s"] > 0 and "tracearray.gpu.Event" in bandwidth["measured_with"]

    w, inputs, ref, args = _case("ew_chain")
    rec = G.run_cell(fw, w.fn, args, G.Check(w, inputs).compare, opts)
    assert rec["status"] == "ok" and rec["reps"] == 3 and rec["ms"] > 0, rec

    stencil = GW.WORKLOADS["jacobi_inplace"]
    grid = GW.make_inputs("jacobi_inplace", SIZE)
    rec = G.run_cell(fw, stencil.fn, list(grid.values()), GW.WriteCheck(stencil, grid).compare,
                     opts, [0])
    assert rec["status"] == "ok", rec
    assert timed_emulator.allocator.in_use == 0   # every array of the cells freed


def test_gpu_profile_lists_the_launches_under_the_emulator(timed_emulator, capsys):
    """benchmarks/gpu_profile.py (the program Nsight Compute runs): the workload's calls on
    device arrays, its check against NumPy, and --list's launches."""
    from benchmarks import gpu_profile

    assert gpu_profile.main(["l2_normalize", "--size", "check", "--calls", "2", "--list"]) == 0
    out = capsys.readouterr().out
    assert "l2_normalize: relative error" in out and "l2_normalize_k0 (warp_row): l2_normalize_k_" in out


def test_loops_cli_runs_and_writes_json(tmp_path):
    """benchmarks/loops.py with its loops cut to a twentieth: every result checked against
    NumPy (exit 0), one row per workload."""
    out = tmp_path / "loops.json"
    proc = _benchmark("loops.py", "--steps-scale", "0.05", "--repeat", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [r["workload"] for r in rows] == ["heat", "wave", "nbody", "sgd", "ema",
                                            "step_sums", "orbit", "seidel"]
    assert all(r["ok"] for r in rows)
