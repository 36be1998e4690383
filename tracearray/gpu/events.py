"""CUDA events on tracearray's stream, for timing compiled calls on the device.

A compiled function queues its kernels on tracearray's own non-blocking stream, not on
PyTorch's or CuPy's current stream, so their events do not bracket tracearray's work (they
would measure nothing, or whatever ran on their stream). ``Event`` records on ours; its
methods mirror ``torch.cuda.Event``::

    start, end = Event(), Event()
    start.record(); y = f(x); end.record()
    end.synchronize()
    ms = start.elapsed_ms(end)

Creating an event initialises CUDA (``GpuUnavailableError`` without a GPU).
"""
from __future__ import annotations

CU_EVENT_DEFAULT = 0   # timing enabled (CU_EVENT_DISABLE_TIMING not set)
# CUDA 12.8 added cuEventElapsedTime_v2; bindings that drop the old name have only the new one.
ELAPSED_TIME_CALLS = ("cuEventElapsedTime", "cuEventElapsedTime_v2")


class Event:
    """A timing event recorded on the stream tracearray launches its kernels on."""

    def __init__(self) -> None:
        from .driver import get_device   # lazily: importing tracearray.gpu touches no driver
        dev = get_device()
        dev.make_current()
        self._device = dev
        self._handle = dev.call("cuEventCreate", CU_EVENT_DEFAULT)
        bindings = getattr(dev, "cu", None)
        self._elapsed_call = next((n for n in ELAPSED_TIME_CALLS
                                   if bindings is None or hasattr(bindings, n)),
                                  ELAPSED_TIME_CALLS[0])

    def record(self) -> None:
        """Mark the point reached by everything queued on tracearray's stream so far."""
        self._device.call("cuEventRecord", self._handle, self._device.stream)

    def synchronize(self) -> None:
        """Wait on the host until the recorded point has been reached on the device."""
        self._device.call("cuEventSynchronize", self._handle)

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds of device time from this event to ``end`` (both recorded, ``end``
        reached: call ``end.synchronize()`` first)."""
        return float(self._device.call(self._elapsed_call, self._handle, end._handle))

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            try:
                self._device.call("cuEventDestroy", handle)
            except Exception:   # noqa: BLE001 - at interpreter exit the driver may be gone
                pass


__all__ = ["Event"]
