"""The scripts in examples/ run as a user runs them (``python examples/NAME.py``), each in its
own interpreter, at small sizes. The GPU one runs too: without a GPU it must say so and exit
with status 0; with one, it runs its checks."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# script -> (arguments, a line its output must contain)
RUNS = {
    "quickstart.py": ((), "max |compiled - numpy|"),
    "black_scholes.py": (("20000",), "put-call parity error"),
    "softmax_layernorm.py": ((), "layernorm: (1024, 768) float32 matches NumPy: True"),
    "explain_pipeline.py": ((), "== explain()"),
    "property_test.py": ((), "match NumPy on every drawn input"),
    "device_arrays.py": ((), ""),
}


def test_every_example_is_run() -> None:
    assert sorted(RUNS) == sorted(p.name for p in EXAMPLES.glob("*.py"))


@pytest.mark.parametrize("script", sorted(RUNS))
def test_example_runs(script: str) -> None:
    args, expected = RUNS[script]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    assert expected in proc.stdout, proc.stdout
    if script == "softmax_layernorm.py":
        assert "total: 1 kernel(s)" in proc.stdout   # each normalisation is one kernel
