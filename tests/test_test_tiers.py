"""The test suite's own tiers (conftest.py, tiers.py): ``slow`` tests are deselected unless
asked for, property tests run half their examples outside the slow tier, and the run ends
with the skipped tests grouped by reason."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SAMPLE = '''
import pytest
import tiers

def test_fast(pytestconfig):   # property tests run half their examples by default
    assert tiers.examples(40) == (40 if pytestconfig.getoption("--runslow") else 20)
    assert tiers.examples(4) == (4 if pytestconfig.getoption("--runslow") else 3)

@pytest.mark.slow
def test_long():
    pass

@pytest.mark.gpu
@pytest.mark.slow
def test_long_on_the_gpu():
    pass

@pytest.mark.parametrize("i", range(3))
def test_needs_a_gpu(i):
    pytest.skip("needs an NVIDIA GPU")

def test_needs_numba():
    pytest.skip("numba not importable")
'''


def _pytest(folder: Path, *options: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", *options, str(folder)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=folder)
    return proc.stdout


def test_slow_tier_is_opt_in_and_skips_are_summarised(tmp_path: Path) -> None:
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(TESTS / "tiers.py", tmp_path / "tiers.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: s\n    gpu: g\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    out = _pytest(tmp_path)
    assert "1 passed, 4 skipped, 2 deselected" in out
    summary = out.split("skipped, by reason")[1].splitlines()
    assert [line.strip() for line in summary[1:4]] == [
        "3  needs an NVIDIA GPU",
        "1  numba not importable",
        "2  deselected: marked slow (run them with --runslow or -m slow)"]
    assert "3 passed, 4 skipped in" in _pytest(tmp_path, "--runslow")
    assert "2 passed, 5 deselected" in _pytest(tmp_path, "-m", "slow")
    assert "1 passed, 6 deselected" in _pytest(tmp_path, "-m", "gpu")   # slow GPU tests too
