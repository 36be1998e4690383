"""The GPU backend: NVPTX code generation, the CUDA driver, device memory and arrays.

Importing this package does not import cuda-python or initialise CUDA; that happens on the
first GPU call. ``Array`` is tracearray's device array; ``is_available()`` says whether a GPU
can be used (``device="auto"`` picks it then). ``Event`` times work on tracearray's stream.
"""
from .array import Array, as_array, is_device_array, to_device
from .events import Event


def is_available() -> bool:
    """Whether a CUDA GPU can be used (cuda-bindings importable, a driver, a device)."""
    from .driver import is_available as available
    return available()


__all__ = ["Array", "Event", "as_array", "is_device_array", "to_device", "is_available"]
