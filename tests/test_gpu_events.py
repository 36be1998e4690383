"""``tracearray.gpu.Event`` without a GPU: the driver calls it makes, on a recording device.

Events must be recorded on tracearray's own stream (where compiled calls queue their
kernels), not on the default stream; the GPU tier (``test_gpu_cuda.py``) times a real kernel.
"""
from __future__ import annotations

from typing import Any

import pytest

from tracearray.gpu import Event, driver


class RecordingDevice:
    """Stands in for ``driver.Device``: logs every driver call and answers event queries."""

    stream = object()   # tracearray's stream handle (a CUstream on a real device)

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []
        self._next_event = 100

    def make_current(self) -> None:
        pass

    def call(self, fname: str, *args: Any) -> Any:
        self.calls.append((fname, args))
        if fname == "cuEventCreate":
            self._next_event += 1
            return self._next_event
        if fname.startswith("cuEventElapsedTime"):
            return 2.5
        return None


@pytest.fixture
def recording():
    dev = RecordingDevice()
    prev = driver.set_device_for_testing(dev)
    yield dev
    driver.set_device_for_testing(prev)


def test_events_record_on_tracearrays_stream_and_time_between_them(recording) -> None:
    start, end = Event(), Event()
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_ms(end) == 2.5
    names = [name for name, _ in recording.calls]
    assert names == ["cuEventCreate", "cuEventCreate", "cuEventRecord", "cuEventRecord",
                     "cuEventSynchronize", "cuEventElapsedTime"]
    creates = [args for name, args in recording.calls if name == "cuEventCreate"]
    assert creates == [(0,), (0,)]   # timing enabled
    records = [args for name, args in recording.calls if name == "cuEventRecord"]
    assert records == [(101, RecordingDevice.stream), (102, RecordingDevice.stream)]
    assert recording.calls[-1] == ("cuEventElapsedTime", (101, 102))


def test_an_event_is_destroyed_with_its_object(recording) -> None:
    ev = Event()
    del ev
    assert recording.calls[-1] == ("cuEventDestroy", (101,))


def test_elapsed_time_uses_the_v2_call_where_the_bindings_have_only_that(recording) -> None:
    class Bindings:   # cuda-bindings without the pre-12.8 name
        def cuEventElapsedTime_v2(self):
            raise AssertionError("called through Device.call, never directly")

    recording.cu = Bindings()
    start, end = Event(), Event()
    start.elapsed_ms(end)
    assert recording.calls[-1] == ("cuEventElapsedTime_v2", (101, 102))
