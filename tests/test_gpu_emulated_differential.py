"""The CPU differential suites (``test_cpu_ops.py``, ``test_cpu_fusion.py``) run with
``device="cuda"`` under the SIMT emulator (``gpu_emulator``): the GPU strategies checked
against NumPy on the same programs and inputs as the CPU, without a GPU. Opt-in, because
every GPU thread of a block reduction is an OS thread (hours for the whole suite): set
``TRACEARRAY_TEST_EMULATE_ALL=1`` (and select with ``-k``)."""
from __future__ import annotations

import os

import pytest

import gpu_differential as gd
import tracearray
from gpu_emulator import EmulatedDevice
from tracearray.gpu import driver

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.skipif(os.environ.get("TRACEARRAY_TEST_EMULATE_ALL") != "1",
                                 reason="opt-in (hours): TRACEARRAY_TEST_EMULATE_ALL=1")]

_MODS = gd.collect(globals(), prefix="emulated_")


def _gpu(fn, **options):
    return tracearray.compile(fn, device="cuda", **options)


@pytest.fixture(autouse=True)
def _on_the_emulator(monkeypatch):
    prev = driver.set_device_for_testing(EmulatedDevice())
    gd.patch_compiled(monkeypatch, _MODS, _gpu)
    yield
    driver.set_device_for_testing(prev)
