"""numpy.fft: ``fft``, ``ifft``, ``rfft`` and ``irfft`` are the external ops of ``ops/fft.py``
(NumPy's pocketfft on the host; on the GPU cuFFT, gpu/fft.py); every other
function of numpy.fft (``fft2``, ``fftn``, ``rfftn``, ``irfftn``, ``hfft``, ``ihfft``,
``fftfreq``, ``fftshift``, ...) is NumPy's own Python code, which calls those four along
each axis in NumPy's order, so the results are NumPy's exactly.

A complex value reaches the ops as its interleaved pair array (``ComplexTracer.pair_node``)
and comes back as ``ComplexTracer.from_pair`` of the result: fusion, tiling and codegen see
real arrays only. The transform's length ``n`` and axis are NumPy's checks at trace time.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...errors import with_location
from ..build import external
from ..complex import FUNCTIONS, OWN_OUT, ComplexTracer
from ..tracer import Tracer
from . import NUMPY_IMPLEMENTATION as NUMPY, as_tracer, composite

_NOTE = ("external op: NumPy's pocketfft; on the GPU cuFFT for float32/float64 complex "
         "operands and real rfft operands (divergence gpu-fft-rounding), the host for "
         "float16, zero-padded lengths and real operands of fft/irfft")
_FFT = dict(dtypes=[np.dtype(d) for d in ("float32", "float64", "int32", "int64")],
            values="small", min_dims=1, max_dims=3, notes=_NOTE)
_NORMS = (None, "backward", "ortho", "forward")


def _array(a: Any, out: Any = None) -> Any:
    """The operand as a tracer; with an ``out=`` of a wider precision (float32 data into a
    complex128 out), in out's precision: NumPy's gufunc picks its loop by out's dtype."""
    x = a if isinstance(a, ComplexTracer) else as_tracer(a)
    want = getattr(out, "dtype", None)
    if want is None or np.dtype(want).kind not in "fc":
        return x
    part = np.dtype(np.dtype(want).char.lower()) if np.dtype(want).kind == "c" else \
        np.dtype(want)
    have = x.dtype
    have = np.dtype(have.char.lower()) if have.kind == "c" else have
    if have.kind == "f" and part.itemsize > have.itemsize:
        return x.astype(np.result_type(x.dtype, part))
    return x


def _axis_and_n(x: Any, n: Any, axis: Any, default: Any = lambda m: m) -> tuple[int, int]:
    """NumPy's axis and transform length: ``n``, else ``default`` of the axis's length."""
    ndim = x.ndim
    axis = operator.index(axis)
    if n is None and not -ndim <= axis < ndim:   # NumPy reads a.shape[axis] first
        raise IndexError(with_location("tuple index out of range"))
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    axis %= ndim
    n = default(x.shape[axis]) if n is None else operator.index(n)
    if n < 1:
        raise ValueError(with_location(f"Invalid number of FFT data points ({n}) specified."))
    return axis, n


def _norm(norm: Any) -> Any:
    if norm not in _NORMS:
        raise ValueError(with_location(f'Invalid norm value {norm}; should be "backward",'
                                       f'"ortho" or "forward".'))
    return norm


def _from_pairs(node: Any) -> ComplexTracer:
    return ComplexTracer.from_pair(Tracer(node))


def _operand(x: Any) -> tuple[Any, bool]:
    """(node, pairs): a complex value's interleaved pairs, or a real array as NumPy gets it."""
    if isinstance(x, ComplexTracer):
        return x.pair_node(), True
    return x.node, False


def _c2c(a: Any, n: Any, axis: Any, norm: Any, inverse: bool) -> ComplexTracer:
    x = _array(a)
    axis, n = _axis_and_n(x, n, axis)
    node, pairs = _operand(x)
    (out,) = external("fft.c2c", [node], n=n, axis=axis, norm=_norm(norm), inverse=inverse,
                      pairs=pairs)
    return _from_pairs(out)


def _into(result: Any, out: Any, ufunc: str) -> Any:
    """``result`` written into ``out=`` as NumPy's pocketfft gufuncs write it (an out of the
    result's shape, cast under same_kind: NumPy's UFuncTypeError otherwise), and out
    returned; ``result`` itself without one."""
    if out is None:
        return result
    from ..build import unsupported
    from ..tracer import store_out
    if not isinstance(out, (Tracer, ComplexTracer)):
        raise unsupported(f"np.fft.{ufunc}(out=...) into an array the compiled function does "
                          f"not hold", "write into an argument or an array the function made")
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(with_location("output array has wrong shape."))
    if not np.can_cast(result.dtype, out.dtype, "same_kind"):
        from .. import numpy_api as api
        raise api.output_cast_error(ufunc, result.dtype, out.dtype, "same_kind")
    return store_out(ufunc, result, out, "same_kind")


@composite(np.fft.fft, calls=["np.fft.fft({0})", "np.fft.fft({0}, 7, axis=0)",
                              "np.fft.fft({0} * 1j + 1, norm='ortho')"],
           name="np.fft.fft", **_FFT)
def fft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    return _into(_c2c(_array(a, out), n, axis, norm, False), out, "fft")


@composite(np.fft.ifft, calls=["np.fft.ifft({0})", "np.fft.ifft({0} - 2j, 5, norm='forward')"],
           name="np.fft.ifft", **_FFT)
def ifft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    return _into(_c2c(_array(a, out), n, axis, norm, True), out, "ifft")


@composite(np.fft.rfft, calls=["np.fft.rfft({0})", "np.fft.rfft({0}, 9, axis=0)",
                               "np.abs(np.fft.rfft({0} * np.hanning({0}.shape[-1]))) ** 2"],
           name="np.fft.rfft", **_FFT)
def rfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    x = _array(a, out)
    if isinstance(x, ComplexTracer):   # NumPy's rfft loops take real input only
        raise TypeError(with_location(
            "ufunc 'rfft_n_even' not supported for the input types, and the inputs could not "
            "be safely coerced to any supported types according to the casting rule ''safe''"))
    axis, n = _axis_and_n(x, n, axis)
    (res,) = external("fft.r2c", [x.node], n=n, axis=axis, norm=_norm(norm))
    return _into(_from_pairs(res), out, "rfft_n_even" if n % 2 == 0 else "rfft_n_odd")


@composite(np.fft.irfft, calls=["np.fft.irfft({0})", "np.fft.irfft(np.fft.rfft({0}))",
                                "np.fft.irfft({0} + 1j, axis=0, norm='ortho')"],
           name="np.fft.irfft", **_FFT)
def irfft(a: Any, n: Any = None, axis: int = -1, norm: Any = None, out: Any = None) -> Any:
    x = _array(a, out)
    axis, n = _axis_and_n(x, n, axis, lambda m: 2 * (m - 1))
    node, pairs = _operand(x)
    (res,) = external("fft.c2r", [node], n=n, axis=axis, norm=_norm(norm), pairs=pairs)
    return _into(Tracer(res), out, "irfft")


# numpy.fft's other functions: NumPy's Python code over the four above.
_BY_NUMPY = {
    np.fft.fft2: ["np.fft.fft2({0})", "np.fft.fft2({0}, s=(3, 4), axes=(0, -1))"],
    np.fft.ifft2: ["np.fft.ifft2({0})"],
    np.fft.fftn: ["np.fft.fftn({0})", "np.fft.fftn({0} * 1j, axes=(0,))"],
    np.fft.ifftn: ["np.fft.ifftn({0}, norm='ortho')"],
    np.fft.rfft2: ["np.fft.rfft2({0})"],
    np.fft.irfft2: ["np.fft.irfft2(np.fft.rfft2({0}))"],
    np.fft.rfftn: ["np.fft.rfftn({0})"],
    np.fft.irfftn: ["np.fft.irfftn({0} + 0.5j)"],
    np.fft.hfft: ["np.fft.hfft({0})", "np.fft.hfft({0} - 1j, 8)"],
    np.fft.ihfft: ["np.fft.ihfft({0})"],
    np.fft.fftshift: ["np.fft.fftshift({0})", "np.fft.fftshift({0}, axes=0)"],
    np.fft.ifftshift: ["np.fft.ifftshift({0})"],
    np.fft.fftfreq: ["{0} + np.fft.fftfreq({0}.shape[-1], 0.5)"],
    np.fft.rfftfreq: ["np.fft.rfftfreq({0}.shape[-1])[:1] + {0}"],
}
# hfft(a, n) of an empty a: NumPy's irfft pads the empty axis without writing the padding
# (its result is uninitialised memory); ours is zeros (divergence fft-empty-padding)
_EMPTY_UNDEFINED = {np.fft.hfft}
for _fn, _calls in _BY_NUMPY.items():
    composite(_fn, calls=_calls, name=f"np.fft.{_fn.__name__}", impl=NUMPY,
              nonempty=_fn in _EMPTY_UNDEFINED, divergences=(
                  ("fft-empty-padding",) if _fn in _EMPTY_UNDEFINED else ()),
              notes="NumPy's implementation over np.fft.fft/ifft/rfft/irfft", **{
                  k: v for k, v in _FFT.items() if k != "notes"})


def _numpy_code(func: Any) -> Any:
    from ..dispatch import run_numpy_implementation

    def run(*args: Any, **kwargs: Any) -> Any:
        return run_numpy_implementation(func, func._implementation, args, kwargs)
    return run


# With a complex argument, dispatch looks in complex.FUNCTIONS
FUNCTIONS.update({np.fft.fft: fft, np.fft.ifft: ifft, np.fft.rfft: rfft, np.fft.irfft: irfft})
OWN_OUT.update((np.fft.fft, np.fft.ifft, np.fft.rfft, np.fft.irfft))   # (``_into``)
FUNCTIONS.update({fn: _numpy_code(fn) for fn in _BY_NUMPY})
