"""Set routines on sorted arrays: unique, isin, intersect1d, union1d, setdiff1d, setxor1d
(``numpy/lib/_arraysetops_impl.py``).

``unique`` is NumPy's own function (an external op: its sort, its hash table, its records
along an axis), once the number of distinct values is known: a size the data decides
(``context.data_size``), probed when the compiled function runs; on the GPU the flattened
array's is the device's (``gpu/unique.py``), and the rows' along an axis
(``gpu/unique_axis.py``). ``isin`` (and
``setdiff1d`` on it) is a bisection of the sorted test elements, whatever the ``kind``
(NumPy's kinds give the same answers; its table method would need the data's range while
tracing); the others are NumPy's own code run on tracers.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ...errors import with_location
from .. import context
from ..build import external, normalize_axes
from ..tracer import Tracer
from . import ALL, NUMPY_IMPLEMENTATION as NUMPY, as_tracer, composite


_UNIQUE_NOTE = ("external op: NumPy's own np.unique on the buffers; on the GPU (sorted, bool, "
                "integers, float32, float64) the device's stable sort and four kernels over "
                "the sorted values, every flag (divergence gpu-sort-ties: a zero's sign "
                "without return_index); along an axis (rows of up to 64 elements) one stable "
                "sort per element of the rows, then the same kernels over the rows' groups "
                "(float rows asked for return_inverse without return_index on the host); "
                "float16 on the host; complex values (flattened, not along an axis) "
                "NumPy's own on the host on both targets")
_SET_NOTE = ("NumPy's own code on tracers (np.unique, sorts, concatenations), on the GPU the "
             "device's where np.unique runs there")
_SETDIFF_NOTE = "np.unique, then a bisection of the sorted test elements (as np.isin)"
_UNSORTED_NOTE = ("NumPy's code calling np.unique(sorted=False): the order of NumPy's hash "
                  "table for integers, which np.unique's host call reproduces (on the GPU too)")
_ISIN_NOTE = ("a bisection of the sorted test elements: np.sort and np.searchsorted, compiled (on "
              "the GPU the device's sort; float16 rows past 4096 elements sort on the host)")


@composite(np.unique, calls=['np.unique({0})', 'np.unique(np.round({0}), return_counts=True)[1]',
                             'np.unique(np.round({0}), return_index=True, return_inverse=True)[2]',
                             'np.unique({0} > 0, return_index=True)[1]',
                             'np.unique(np.round({0}), axis=0, return_counts=True)[1]'],
           dtypes=ALL, min_dims=0, notes=_UNIQUE_NOTE)
def unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True,
           sorted: bool = True) -> Any:
    """NumPy's own np.unique as an external op, once the number of distinct values (slices,
    along an axis) is known: probed when the compiled function runs."""
    t = as_tracer(ar)
    if axis is not None:
        if t.ndim == 0:
            raise np.exceptions.AxisError(with_location(
                f"unique: axis {axis} is out of bounds for array of dimension 0"))
        (axis,) = normalize_axes(operator.index(axis), t.ndim, "unique")
    attrs = dict(axis=axis, equal_nan=bool(equal_nan), sorted=bool(sorted),
                 return_index=bool(return_index), return_inverse=bool(return_inverse),
                 return_counts=bool(return_counts))
    # the probe asks for the same flags: NumPy may take another path without them (2.4's
    # float16 unique without flags returns duplicates: soak cpu-2026-12-02-f, program 1408)
    (count,) = external("unique_count", [t.node], **attrs)
    n = context.data_size(count, "np.unique's number of distinct values")
    results = external("unique", [t.node], count=n, **attrs)
    out = tuple(Tracer(r) for r in results)
    return out[0] if len(out) == 1 else out


def _isin(ar1: Any, ar2: Any, invert: bool, kind: Any) -> Tracer:
    """Whether each element of ``ar1`` is in ``ar2``: a bisection of the sorted ``ar2``, one
    fused kernel after the sort (NumPy's methods give the same answers: equality in the
    common dtype, NaN never found)."""
    if kind not in (None, "sort", "table"):
        raise ValueError(with_location(
            f"Invalid kind: '{kind}'. Please use None, 'sort' or 'table'."))
    a, b = as_tracer(ar1), as_tracer(ar2).ravel()
    if kind == "table" and any(t.dtype.kind not in "uib" for t in (a, b)):
        raise ValueError(with_location(
            "The 'table' method is only supported for boolean or integer arrays. Please "
            "select 'sort' or None for kind."))
    if b.shape[0] == 0:
        return np.full_like(a, invert, dtype=bool)
    dt = np.result_type(a.dtype, b.dtype)
    a, b = a.astype(dt), np.sort(b.astype(dt))
    at = np.minimum(np.searchsorted(b, a), b.shape[0] - 1)
    found = b[at] == a
    return ~found if invert else found


@composite(np.isin, calls=['np.isin({0}, [0, 1, 2])', 'np.isin(np.round({0}), np.round({1}))',
                           'np.isin({0}, {1}, invert=True)'],
           arrays=2, dtypes=ALL, notes=_ISIN_NOTE)
def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False,
         *, kind: Any = None) -> Tracer:
    return _isin(element, test_elements, invert, kind)


@composite(np.setdiff1d, calls=['np.setdiff1d(np.round({0}), np.round({1}))'], arrays=2,
           dtypes=ALL, notes=_SETDIFF_NOTE)
def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False) -> Tracer:
    a = as_tracer(ar1).ravel() if assume_unique else np.unique(ar1)
    return a[_isin(a, ar2, True, None)]


composite(np.intersect1d, calls=['np.intersect1d(np.round({0}), np.round({1}))',
                                 'np.intersect1d(np.round({0}), np.round({1}), '
                                 'return_indices=True)[1]'],
          arrays=2, dtypes=ALL, notes=_SET_NOTE, impl=NUMPY)
composite(np.union1d, calls=['np.union1d(np.round({0}), {1})'], arrays=2, dtypes=ALL,
          notes=_SET_NOTE, impl=NUMPY)
composite(np.setxor1d, calls=['np.setxor1d(np.round({0}), np.round({1}))'], arrays=2,
          dtypes=ALL, notes=_SET_NOTE, impl=NUMPY)


# NumPy 2's array-API functions: NumPy's code calling np.unique (sorted=False: for integers
# without flags, the order of NumPy's hash table, which np.unique's host call reproduces)
for _name, _call in (("unique_all", "np.unique_all(np.round({0})).counts"),
                     ("unique_counts", "np.unique_counts({0} > 0)"),
                     ("unique_inverse", "np.unique_inverse(np.round({0})).inverse_indices"),
                     ("unique_values", "np.unique_values(np.round({0}))")):
    composite(getattr(np, _name), calls=[_call], dtypes=ALL, notes=_UNSORTED_NOTE, impl=NUMPY)
