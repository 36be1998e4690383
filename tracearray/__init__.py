"""tracearray: compile plain NumPy functions into fused native kernels.

    @tracearray.compile
    def f(x, y):
        return np.exp(x) * y + 1.0
"""
from . import config
from .api import CompiledFunction, Lowered, RetraceWarning, compile
from .cpu.pool import num_threads as get_num_threads, set_num_threads
from .gpu import Array
from .errors import (ConcretizationError, InputError, TracearrayError, TraceDTypeError,
                           TraceShapeError, UnsupportedOperationError)

from ._version import __version__


def show_config(file=None) -> None:   # noqa: ANN001 - any object with write()
    """Print the environment report of ``python -m tracearray info``: versions, CPU, threads,
    TRACEARRAY_* variables, the disk cache, and whether a GPU is usable (if not, why)."""
    from .envreport import format_report
    print(format_report(), file=file)


config.check_environment()

__all__ = ["compile", "CompiledFunction", "Lowered", "Array", "TracearrayError", "ConcretizationError",
           "UnsupportedOperationError", "TraceShapeError", "TraceDTypeError", "InputError",
           "RetraceWarning", "set_num_threads", "get_num_threads", "show_config"]
