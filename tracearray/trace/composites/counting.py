"""Counting into bins: np.histogram (and np.bincount, whose length depends on the data), built
on the ``scatter`` primitive: each element's bin is computed elementwise, then added to its
bin in element order, as NumPy's ``bincount`` loop does (so weighted sums are bit for bit
NumPy's).

numpy/lib/_histograms_impl.py is followed step by step for equal-width bins (the bin of each
element from its offset, corrected by one where rounding put it next to its edge, blocks of
65536 elements accumulated into the result's dtype); explicit bin edges are searched
(``searchsorted`` by bisection) instead of sorting the data, which gives NumPy's counts.
"""
from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from .. import context
from ..build import unsupported
from ..complex import ComplexTracer
from ...errors import with_location
from ..tracer import Tracer
from . import NUMERIC, NUMPY_IMPLEMENTATION, as_tracer, composite
from .indexing import safe_indices

_BLOCK = 65536          # NumPy's histogram block (the weighted sums are made per block)


def _zeros(n: int, dtype: Any) -> Tracer:
    """An array of zeros the expansion owns (it can be written, like np.zeros in user code)."""
    return context.owned(np.zeros(n, dtype), uniform=True)


def _unsigned_subtract(a: Any, b: Any) -> Any:
    """NumPy's ``_unsigned_subtract``: a - b (a >= b), of signed integers in the unsigned type
    of their width (no overflow); others subtract normally."""
    dt = np.result_type(*[v.dtype if isinstance(v, Tracer) else v for v in (a, b)])
    if dt.kind == "i":
        unsigned = np.dtype(f"u{dt.itemsize}")
        return np.subtract(as_tracer(a).astype(dt), as_tracer(b).astype(dt), casting="unsafe",
                           dtype=unsigned)
    return np.subtract(a, b, dtype=dt)


def _outer_edges(a: Tracer, range_: Any) -> tuple[Any, Any]:
    if range_ is not None:
        first, last = range_
        if isinstance(first, Tracer) or isinstance(last, Tracer):
            # a range the data decides: NumPy's edges (mi + 0.0, a Python number weakly
            # typed) in one dtype, and NumPy's checks made when the compiled function runs
            first, last = first + 0.0, last + 0.0
            dt = np.result_type(*(v.dtype if isinstance(v, Tracer) else v
                                  for v in (first, last)))
            first, last = as_tracer(first).astype(dt), as_tracer(last).astype(dt)
            context.require(np.logical_not(first > last).node, ValueError,
                            "max must be larger than min in range parameter.")
            context.require((np.isfinite(first) & np.isfinite(last)).node, ValueError,
                            "supplied range is not finite")
        elif first > last:
            raise ValueError(with_location("max must be larger than min in range parameter."))
        elif not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(with_location(
                f"supplied range of [{first}, {last}] is not finite"))
    elif a.size == 0:
        first, last = 0, 1
    else:
        first, last = a.min(), a.max()
        finite = np.isfinite(first) & np.isfinite(last)
        context.require(finite.node, ValueError,
                        "autodetected range of the data is not finite")
    if isinstance(first, Tracer):
        same = first == last
        return np.where(same, first - 0.5, first), np.where(same, last + 0.5, last)
    if first == last:
        first, last = first - 0.5, last + 0.5
    return first, last


def _linspace(first: Any, last: Any, num: int, dtype: np.dtype) -> Tracer:
    """np.linspace(first, last, num, dtype=dtype) for 0-d first and last (NumPy's steps:
    ``arange * (delta / div) + start``, the last element ``stop``)."""
    f, l = as_tracer(first), as_tracer(last)
    dt = np.result_type(f.dtype, l.dtype)
    if dt.kind != "f":
        dt = np.dtype(np.float64)
    delta = np.subtract(l, f, dtype=dt)
    y = np.arange(num, dtype=dt)
    div = num - 1
    step = delta / div
    y = np.where(step == 0, y / div * delta, y * step)   # NumPy: the denormal-step case
    y = y + f
    y[-1] = l
    return y.astype(dtype)


def _data_and_weights(a: Any, weights: Any) -> tuple[Tracer, Tracer | None]:
    x = as_tracer(a).reshape(-1)
    if x.dtype == np.bool_:   # (NumPy's: booleans cannot be subtracted; it warns too)
        warnings.warn(f"Converting input from bool to {np.uint8} for compatibility.",
                      RuntimeWarning, stacklevel=4)
        x = x.astype(np.uint8)
    if weights is None:
        return x, None
    w = as_tracer(weights)
    if w.shape != as_tracer(a).shape:
        raise ValueError(with_location("weights should have the same shape as a."))
    return x, w.reshape(-1)


def _bin_count(bins: Any) -> int:
    try:
        n_bins = operator.index(bins)
    except TypeError:
        raise TypeError(with_location("`bins` must be an integer, a string, or an array")
                        ) from None
    if n_bins < 1:
        raise ValueError(with_location("`bins` must be positive, when an integer"))
    return n_bins


@composite(np.histogram,
           calls=["np.histogram({0}, bins=7)[0]", "np.histogram({0}, bins=4)[1]",
                  "np.histogram({0}, bins=5, range=(-1, 2))[0]",
                  "np.histogram({0}, bins=3, weights={1})[0]",
                  "np.histogram({0}, bins=6, density=True)[0]",
                  "np.histogram({0}, bins=[-1.0, 0.0, 0.0, 0.5, 3.0])[0]",
                  "np.histogram({0}, bins='auto')[0]",
                  "np.histogram({0}, bins='fd', range=(-1, 1))[1]"],
           arrays=2, same_shape=True, dtypes=NUMERIC, values="small")
def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None,
              weights: Any = None) -> tuple[Tracer, Tracer]:
    x, w = _data_and_weights(a, weights)
    bins = context.index_value(bins)     # (a NumPy integer argument: a count)
    if isinstance(bins, str):
        bins = _estimated_bins(x, bins, range, w, "np.histogram")
    if np.ndim(bins) == 0 and not isinstance(bins, Tracer):
        n, edges = _equal_bins(x, w, _bin_count(bins), range)
    else:
        n, edges = _edge_bins(x, w, bins, range)
    if density:
        db = np.diff(edges).astype(np.float64)
        return n / db / n.sum(), edges
    return n, edges


@composite(np.histogram_bin_edges,
           calls=["np.histogram_bin_edges({0}, bins=5)", "np.histogram_bin_edges({0}, 'auto')",
                  "np.histogram_bin_edges({0}, bins='sturges', range=(-2, 2))",
                  "np.histogram_bin_edges({0}, bins=[0.0, 1.0, 1.0, 4.0])"],
           arrays=1, dtypes=NUMERIC, values="small")
def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None,
                        weights: Any = None) -> Tracer:
    """np.histogram's edges alone: equal-width edges for a count or an estimator's name,
    the given edges (1-d, increasing) otherwise."""
    x, w = _data_and_weights(a, weights)
    bins = context.index_value(bins)
    if isinstance(bins, str):
        bins = _estimated_bins(x, bins, range, w, "np.histogram_bin_edges")
    if np.ndim(bins) == 0 and not isinstance(bins, Tracer):
        return _equal_edges(x, _bin_count(bins), range)[3]
    return _checked_edges(bins)


# NumPy's bin-width estimators (numpy/lib/_histograms_impl.py ``_hist_bin_*``), in its
# arithmetic, on the data (a 1-d tracer with at least one element)
def _ptp(x: Tracer) -> Any:
    return _unsigned_subtract(x.max(), x.min())


def _width_sqrt(x: Tracer) -> Any:
    return _ptp(x) / np.sqrt(x.size)


def _width_sturges(x: Tracer) -> Any:
    return _ptp(x) / (np.log2(x.size) + 1.0)


def _width_rice(x: Tracer) -> Any:
    return _ptp(x) / (2.0 * x.size ** (1.0 / 3))


def _width_scott(x: Tracer) -> Any:
    return (24.0 * np.pi ** 0.5 / x.size) ** (1.0 / 3.0) * np.std(x)


def _width_fd(x: Tracer) -> Any:
    hi, lo = np.percentile(x, [75, 25])
    return 2.0 * np.subtract(hi, lo) * x.size ** (-1.0 / 3.0)


def _width_doane(x: Tracer) -> Any:
    if x.size <= 2:
        return 0.0
    sg1 = np.sqrt(6.0 * (x.size - 2) / ((x.size + 1.0) * (x.size + 3)))
    sigma = np.std(x)
    g1 = np.mean(((x - np.mean(x)) / sigma) ** 3)
    width = _ptp(x) / (1.0 + np.log2(x.size) + np.log2(1.0 + np.absolute(g1) / sg1))
    return np.where(sigma > 0.0, width, 0.0)


# NumPy 2.3 bounded 'auto''s bin count (numpy/numpy#28426): fd's width at least half sqrt's
_AUTO_BOUNDED = np.lib.NumpyVersion(np.__version__) >= "2.3.0"


def _width_auto(x: Tracer) -> Any:
    """NumPy's 'auto': since 2.3 ``min(max(fd_bw, sqrt_bw / 2), sturges_bw)``; before,
    ``min(fd_bw, sturges_bw) if fd_bw else sturges_bw`` (Python's min and max: the first
    argument unless the second is smaller, larger)."""
    fd, sturges = _width_fd(x), _width_sturges(x)
    if _AUTO_BOUNDED:
        half_sqrt = _width_sqrt(x) / 2
        fd = np.where(half_sqrt > fd, half_sqrt, fd)
        return np.where(sturges < fd, sturges, fd)
    return np.where(fd != 0, np.where(sturges < fd, sturges, fd), sturges)


_WIDTHS = {"auto": _width_auto, "doane": _width_doane, "fd": _width_fd, "rice": _width_rice,
           "scott": _width_scott, "sqrt": _width_sqrt, "sturges": _width_sturges}
_ESTIMATORS = frozenset(_WIDTHS) | {"stone"}


def _estimated_bins(x: Tracer, name: str, range_: Any, w: Tracer | None, what: str) -> int:
    """The number of equal bins NumPy's estimator ``name`` chooses for the data (its
    ``_get_bin_edges``): a width from the data (of the range given, if any), then
    ceil(range / width) bins, one where the width is zero. The count is a number the data
    decides (``context.data_size``: a probe computes it and the trace runs again with it, so
    a count seen before reuses its kernels)."""
    if name not in _ESTIMATORS:
        raise ValueError(with_location(f"{name!r} is not a valid estimator for `bins`"))
    if w is not None:
        raise TypeError(with_location("Automated estimation of the number of bins is not "
                                      "supported for weighted data"))
    if name == "stone":
        raise unsupported(f"{what}(bins='stone')",
                          "its width minimises a cross-validation estimate over up to "
                          "max(100, sqrt(n)) histograms; pass another estimator or a number")
    first, last = _outer_edges(x, range_)
    a = x if range_ is None else x[(x >= first) & (x <= last)]
    if a.size == 0:
        return 1
    width = _WIDTHS[name](a)
    if a.dtype.kind in "iu":      # NumPy: at least 1 for integer data (a zero width stays)
        width = np.where((width != 0) & (width < 1), 1, width)
    count = np.where(width != 0, np.ceil(_unsigned_subtract(last, first) / width), 1)
    n = context.data_size(count.astype(np.int64).node,
                          f"the number of bins {what}(bins={name!r}) chooses")
    return int(n)


def _equal_edges(x: Tracer, n_bins: int, range_: Any) -> tuple[Any, Any, np.dtype, Tracer]:
    """The outer edges, the edges' dtype and the ``n_bins + 1`` equal-width edges."""
    first, last = _outer_edges(x, range_)
    bin_type = np.result_type(first, last, x.dtype) if not isinstance(first, Tracer) else \
        np.result_type(first.dtype, x.dtype)
    if bin_type.kind in "biu":
        bin_type = np.result_type(bin_type, float)
    edges = _linspace(first, last, n_bins + 1, bin_type)
    # (NumPy's check: edges that do not increase, as float32 data of a tiny range or an
    # overflowing one make them)
    context.require(np.logical_not(np.any(edges[:-1] >= edges[1:])).node, ValueError,
                    f"Too many bins for data range. Cannot create {n_bins} finite-sized bins.")
    return first, last, bin_type, edges


def _equal_bins(x: Tracer, w: Tracer | None, n_bins: int, range_: Any
                ) -> tuple[Tracer, Tracer]:
    first, last, bin_type, edges = _equal_edges(x, n_bins, range_)
    ntype = np.dtype(np.intp) if w is None else w.dtype
    n = _zeros(n_bins, ntype)
    denom = _unsigned_subtract(last, first)
    for i in range(0, x.size, _BLOCK):
        a = x[i:i + _BLOCK]
        keep = (a >= first) & (a <= last)
        ta = a.astype(bin_type)
        f = (_unsigned_subtract(ta, first) / denom) * n_bins
        # NaN and far-away elements are dropped below; keep their index in range until then
        # (clipped: an infinite range's NaN positions would be read as indices before the
        # run-time check raises NumPy's "not finite" ValueError; finite ones are in range)
        idx = np.clip(np.where(keep, f, 0).astype(np.intp), 0, n_bins)
        idx = np.where(idx == n_bins, idx - 1, idx)
        idx = np.where(ta < edges[idx], idx - 1, idx)
        idx = np.where((ta >= edges[idx + 1]) & (idx != n_bins - 1), idx + 1, idx)
        # the dropped ones go to an extra bin past the end
        idx = np.where(keep, idx, n_bins)
        counts = _zeros(n_bins + 1, np.intp if w is None else np.float64)
        np.add.at(counts, idx, 1 if w is None else w[i:i + _BLOCK].astype(np.float64))
        n += counts[:n_bins].astype(ntype)
    return n, edges


def _checked_edges(bins: Any) -> Tracer:
    """Explicit bin edges, with NumPy's checks: 1-d (when tracing), increasing (when the
    compiled function runs)."""
    edges = as_tracer(bins)
    if edges.ndim != 1:
        raise ValueError(with_location("`bins` must be 1d, when an array"))
    if edges.shape[0] > 1:
        context.require(np.logical_not(np.any(edges[:-1] > edges[1:])).node, ValueError,
                        "`bins` must increase monotonically, when an array")
    return edges


def _edge_bins(x: Tracer, w: Tracer | None, bins: Any, range_: Any
               ) -> tuple[Tracer, Tracer]:
    edges = _checked_edges(bins)
    if w is not None:
        return _weighted_edge_bins(x, w, edges), edges
    m = edges.shape[0] - 1
    n = _zeros(max(m, 0), np.intp)
    if m < 1:
        return n, edges
    # bin k holds edges[k] <= x < edges[k + 1]; the last also x == edges[-1]
    idx = np.searchsorted(edges, x, side="right") - 1
    idx = np.where(x == edges[-1], m - 1, idx)
    keep = (x >= edges[0]) & (x <= edges[-1])
    idx = np.where(keep, idx, m)
    counts = _zeros(m + 1, np.intp)
    np.add.at(counts, idx, 1)
    return n + counts[:m], edges


def _weighted_edge_bins(x: Tracer, w: Tracer, edges: Tracer) -> Tracer:
    """NumPy's cumulative histogram of weights over explicit edges, step by step (its sums
    are the order it adds in): per block, the weights in the data's sorted order (NumPy's
    argsort), their running sum from 0, read at each edge's position (the last edge's
    inclusive); the bins are the differences."""
    if isinstance(w, ComplexTracer) or w.dtype.kind == "c":
        raise unsupported("np.histogram of complex weights over explicit bin edges")
    cum = _zeros(edges.shape[0], w.dtype)
    zero = _zeros(1, w.dtype)
    for i in range(0, x.shape[0], _BLOCK):
        order = np.argsort(x[i:i + _BLOCK])
        sa, sw = x[i:i + _BLOCK][order], w[i:i + _BLOCK][order]
        running = np.concatenate((zero, np.cumsum(sw)))
        at = np.concatenate((np.searchsorted(sa, edges[:-1], "left"),
                             np.searchsorted(sa, edges[-1:], "right")))
        cum += running[at]          # (NumPy's in-place add: its casting rule)
    return np.diff(cum)


@composite(np.bincount, calls=["np.bincount(np.abs({0}.ravel()).astype(np.int64))",
                               "np.bincount(np.abs({0}.ravel()).astype(np.int32), minlength=9)",
                               "np.bincount(np.abs({0}.ravel()).astype(np.int64), "
                               "weights={1}.ravel())"],
           arrays=2, same_shape=True, dtypes=NUMERIC, values="small")
def bincount(x: Any, weights: Any = None, minlength: Any = 0) -> Tracer:
    """Counts (or sums of weights, in float64) of each value of a 1-d array of non-negative
    integers. Its length, ``max(x.max() + 1, minlength)``, is decided by the data (a probe
    computes it: ``context.data_size``); the values are added in element order."""
    t = as_tracer(x)
    if t.ndim != 1:
        raise ValueError(with_location("object too deep for desired array" if t.ndim > 1 else
                                       "object of too small depth for desired array"))
    if t.dtype == np.dtype(np.uint64):
        # NumPy takes uint64 counts as intp (2**63 and up become negative: its error)
        t = t.astype(np.intp)
    else:
        safe_indices(t.dtype)
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError(with_location("'minlength' must not be negative"))
    w = None
    if weights is not None:
        w = as_tracer(weights)
        if w.shape != t.shape:
            raise ValueError(with_location("The weights and list don't have the same length."))
        w = w.astype(np.float64)
    idx = t.astype(np.intp)
    if t.size == 0:
        return _zeros(minlength, np.intp)   # NumPy: intp counts, with weights or not
    # The probe finds the length and the negative elements NumPy refuses in one pass over
    # x (its min and max reductions share a kernel, as NumPy's loop finds both at once):
    # -1 says there is a negative element. The compiled result then needs only the zeroed
    # counts and the scatter (no second pass over x for a run-time check).
    # -2: the largest intp, whose + 1 would wrap (NumPy 2.4's own bincount crashes on it)
    top = idx.max()
    longest = np.where(idx.min() >= 0, np.where(top == np.iinfo(np.intp).max, -2,
                                                np.maximum(top + 1, minlength)), -1)
    n = context.data_size(longest.node, "the length of np.bincount's result")
    if n == -2:
        raise ValueError(with_location(
            "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum "
            "possible size."))
    if n < 0:
        raise ValueError(with_location("'list' argument must have no negative elements"))
    # The probe ran on this call's x before the result is computed: every element is in
    # [0, n), so the indices go to the scatter as they are (it checks its bounds anyway).
    out = _zeros(n, np.intp if w is None else np.float64)
    np.add.at(out, idx, 1 if w is None else w)
    return out


# NumPy's code over searchsorted, ravel_multi_index and bincount (a traced range is refused
# by name, as for np.histogram: its edges would be sizes the data decides)
composite(np.histogram2d, calls=["np.histogram2d({0}.ravel(), {1}.ravel(), bins=3, "
                                 "range=[[-2, 2], [-2, 2]])[0]",
                                 "np.histogram2d({0}.ravel(), {1}.ravel(), bins=[2, 4], "
                                 "range=[[-1, 1], [-3, 3]], weights={0}.ravel())[0]"],
          arrays=2, same_shape=True, dtypes=NUMERIC, values="small", impl=NUMPY_IMPLEMENTATION,
          notes="NumPy's implementation (bins and range known when tracing)")
@composite(np.histogramdd, calls=["np.histogramdd(np.stack([{0}.ravel(), {1}.ravel()], 1), "
                                  "bins=(3, 2), range=[(-2, 2), (-1, 1)])[0]",
                                  "np.histogramdd(np.stack([{0}.ravel(), {1}.ravel()], 1), "
                                  "bins=(3, 2))[1][0]"],
           arrays=2, same_shape=True, dtypes=NUMERIC, values="small",
           notes="NumPy's implementation (bins known when tracing; an autodetected range's "
                 "ends checked finite when the compiled function runs)")
def histogramdd(sample: Any, bins: Any = 10, range: Any = None, density: Any = None,
                weights: Any = None) -> Any:
    """NumPy's implementation (np.histogram2d's too, which calls it), given the range it
    would autodetect: each dimension's data minimum and maximum, checked finite when the
    compiled function runs (NumPy's ValueError). Left to NumPy's code, non-finite data
    reached its message's f-string of the traced ends, a refusal instead of NumPy's error."""
    from .. import dispatch
    # (NumPy's reading: an array of shape (N, D), else a sequence of D arrays)
    shape = getattr(sample, "shape", None)
    arr = as_tracer(sample) if shape is not None and len(shape) == 2 else \
        np.atleast_2d(sample).T
    n, d = arr.shape
    given = [None] * d if range is None else list(range)
    if n and len(given) == d and any(r is None for r in given):
        for i, r in enumerate(given):
            if r is not None:
                continue
            lo, hi = arr[:, i].min(), arr[:, i].max()
            finite = np.isfinite(lo) & np.isfinite(hi)
            context.require(finite.node, ValueError,
                            "autodetected range of the sample's values is not finite")
            given[i] = (np.where(finite, lo, 0), np.where(finite, hi, 0))
        range = given
    return dispatch.run_numpy_implementation(_HISTOGRAMDD, _HISTOGRAMDD._implementation,
                                             (sample, bins, range, density, weights), {})


_HISTOGRAMDD = np.histogramdd   # (NumPy's, as imported: a trace may rebind the name)
