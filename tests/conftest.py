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
