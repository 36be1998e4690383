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
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import baselines as B  # noqa: E402
from benchmarks import workloads as W  # noqa: E402

SIZE = "check"
NAMES = W.names()


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
    for w in W.WORKLOADS.values():
        assert set(w.sizes) == set(W.SIZES)
        assert w.bytes("cpu") > 0 and w.flops("cpu") > 0


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


@pytest.mark.parametrize("name", NAMES)
def test_numba_baseline_matches_reference(name, numba_check):
    err, dtypes = numba_check(name)
    assert dtypes == ["float32"]
    assert err <= W.get(name).tol


# --------------------------------------------------------------------------------------
# The benchmark script
# --------------------------------------------------------------------------------------

def test_cpu_cli_runs_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cpu.py"), "--size", SIZE, "--only",
         "ew_chain,moments", "--repeat", "2", "--warmup", "1", "--settle", "0.01", "--no-numba",
         "--keep-openblas-env", "--json", str(out)],
        capture_output=True, text=True, timeout=120)
    assert "| workload |" in proc.stdout and "geomean" in proc.stdout, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["size"] == SIZE and doc["machine"]["cpu_count"] >= 1
    numpy_recs = [r for r in doc["results"] if r["framework"] == "numpy"]
    assert [r["workload"] for r in numpy_recs] == ["ew_chain", "moments"]
    assert all(r["ok"] and r["ms"] > 0 for r in numpy_recs)
    assert len(doc["verdicts"]) == 3
    # exit 1 exactly when some result failed (tracearray, until the compiler lands)
    assert proc.returncode == (1 if doc["failures"] else 0)


def test_accuracy_cli_runs_and_writes_json(tmp_path):
    """benchmarks/accuracy.py at 2^12 terms: 16 rows, exact references that are exact (a sum
    of small integers), and both NumPy's and tracearray's errors within a few eps."""
    from benchmarks import accuracy as A
    x = np.arange(1, 4097, dtype=np.float32)
    assert A.exact("sum", x) == 4096 * 4097 / 2
    assert A.exact("(x*x).sum()", x) == sum(i * i for i in range(1, 4097))
    assert A.exact("var", x) == (4096 ** 2 - 1) / 12
    out = tmp_path / "acc.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accuracy.py"), "--sizes",
                           "12", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "| dtype | op | n | NumPy |" in proc.stdout, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 8 and {r["op"] for r in rows} == set(A.OPS)
    for r in rows:
        eps = float(np.finfo(r["dtype"]).eps)
        assert r["numpy"] < 4 * eps and r["tracearray"] < 4 * eps, r


# --------------------------------------------------------------------------------------
# tracearray itself: expected to fail until tracearray.compile handles the workload
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
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
