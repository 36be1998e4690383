"""tracearray: compile plain NumPy functions into fused native kernels.

    @tracearray.compile
    def f(x, y):
        return np.exp(x) * y + 1.0
"""
from .api import CompiledFunction, Lowered, RetraceWarning, compile
from .gpu import Array
from .errors import (ConcretizationError, InputError, TracearrayError, TraceDTypeError,
                           TraceShapeError, UnsupportedOperationError)

from ._version import __version__

__all__ = ["compile", "CompiledFunction", "Lowered", "Array", "TracearrayError", "ConcretizationError",
           "UnsupportedOperationError", "TraceShapeError", "TraceDTypeError", "InputError",
           "RetraceWarning"]
