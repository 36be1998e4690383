"""Test configuration shared by every test module.

Hypothesis profiles
-------------------
``ci``  (selected when the environment variable ``CI`` is set): derandomized, so a CI run is
        reproducible and never flaky; no deadline (shared runners are slow and jittery);
        failing examples printed with a reproduction blob; few examples so the suite stays
        fast. ``dev`` (the default elsewhere): random, more examples, no deadline either
        (the first trace of a function pays import and interning costs).
``HYPOTHESIS_PROFILE=<name>`` overrides the choice (e.g. ``HYPOTHESIS_PROFILE=dev CI=1``).
"""
from __future__ import annotations

import os
import tempfile
import pytest

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    max_examples=12,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev",
    deadline=None,
    print_blob=True,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Compiled kernels go to a disk cache (tracearray/diskcache.py); tests use a fresh one per
# session, so they never read or fill the user's ~/.cache and always exercise compilation.
os.environ.setdefault("TRACEARRAY_CACHE_DIR", tempfile.mkdtemp(prefix="tracearray-test-cache-"))

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI")
                                                                 else "dev"))


# ============================================================================================
# Hardware tiers and markers (owned by the backend engineers; extend below).
#
# The ``gpu`` marker is declared in pyproject.toml. Skip logic for tests that need a GPU
# (pytest_collection_modifyitems / a fixture probing the driver) belongs in this section.
# ============================================================================================


@pytest.fixture
def emulated_gpu():
    """tracearray's GPU driver replaced by the SIMT emulator (tests/gpu_emulator.py)."""
    from gpu_emulator import EmulatedDevice
    from tracearray.gpu import driver
    prev = driver.set_device_for_testing(EmulatedDevice())
    yield
    driver.set_device_for_testing(prev)


# ============================================================================================
# The slow tier (opt-in) and the summary of skipped tests.
#
# Tests marked ``slow`` (long property runs, differential sweeps, multi-process stress) are
# deselected unless asked for: ``--runslow`` runs everything, ``-m slow`` only them (any
# ``-m`` expression chooses for itself: ``-m gpu`` runs the slow GPU tests too). The default
# run stays a few minutes on a 2-core machine (docs/testing.md).
# ============================================================================================


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run the tests marked slow (deselected by default)")


def pytest_configure(config: pytest.Config) -> None:
    import tiers   # tests/tiers.py: property tests read it when their module is imported
    tiers.SLOW = bool(config.getoption("--runslow") or
                      "slow" in (config.getoption("-m") or ""))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or config.getoption("-m"):
        return   # a -m expression chooses for itself (the GPU runner's "-m gpu" keeps all)
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
        config.stash[_SLOW_DESELECTED] = len(slow)
        if hasattr(config, "workeroutput"):   # a pytest-xdist worker: tell the controller
            config.workeroutput["slow_deselected"] = len(slow)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller: the workers deselected the slow tests (each collects the
    whole suite, so each count is the total)."""
    n = getattr(node, "workeroutput", {}).get("slow_deselected", 0)
    node.config.stash[_SLOW_DESELECTED] = max(node.config.stash.get(_SLOW_DESELECTED, 0), n)


_SLOW_DESELECTED = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Skipped tests grouped by reason, most frequent first, one line each."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        if isinstance(report.longrepr, tuple):
            reason = report.longrepr[2]
        else:
            reason = str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    slow = config.stash.get(_SLOW_DESELECTED, 0)
    if not reasons and not slow:
        return
    terminalreporter.section("skipped, by reason", sep="-")
    for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.line(f"{count:6d}  {reason}")
    if slow:
        terminalreporter.line(f"{slow:6d}  deselected: marked slow (run them with --runslow "
                              f"or -m slow)")
