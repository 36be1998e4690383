"""``z[mask]`` of a complex array with a traced mask: a pair of real selections
(``selection.MaskedSelection``) of one mask.

As for real values, an element-wise ufunc of selections of the same mask (and scalars) is
applied to the whole arrays and picked by the mask later, so ``z[m] = z[m] ** 2 + c[m]`` (the
escape-time loop of a Mandelbrot set) writes the selected elements back with no compaction
and no data-dependent size; sums and means reduce each part with the mask. Anything else sees
the compacted elements, whose count the data decides (``MaskedSelection.compact``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .selection import MaskedSelection


class ComplexSelection:
    __array_priority__ = 3000     # above ComplexTracer's: mixed operators come here

    def __init__(self, re: MaskedSelection, im: MaskedSelection):
        self.re, self.im = re, im

    # --- the two forms ----------------------------------------------------------------
    def _whole(self) -> Any:
        """The complex values the mask picks from (the whole array)."""
        from .complex import ComplexTracer
        from .tracer import Tracer
        return ComplexTracer(Tracer(self.re.values), Tracer(self.im.values))

    def compact(self) -> Any:
        from .complex import ComplexTracer
        return ComplexTracer(self.re.compact(), self.im.compact())

    def _same_mask(self, other: Any) -> bool:
        sel = other.re if isinstance(other, ComplexSelection) else other
        return isinstance(sel, MaskedSelection) and sel.mask is self.re.mask and \
            sel.lead == self.re.lead and not sel._written

    def _pairs_with(self, other: Any) -> bool:
        if isinstance(other, (ComplexSelection, MaskedSelection)):
            return self._same_mask(other)
        return isinstance(other, (bool, int, float, complex, np.generic))

    def _picked(self, result: Any) -> Any:
        """A result over the whole array as a selection of the same mask."""
        from .complex import ComplexTracer
        from .tracer import Tracer
        sel = self.re

        def pick(t: Tracer) -> MaskedSelection:
            node = t.node
            if node.shape != sel.values.shape:
                node = np.broadcast_to(t, sel.values.shape).node
            return MaskedSelection(node, sel.mask, sel.made_at, sel.lead)
        if isinstance(result, ComplexTracer):
            return ComplexSelection(pick(result.re), pick(result.im))
        if isinstance(result, Tracer):
            return pick(result)
        return None

    def _compacted(self, x: Any) -> Any:
        if isinstance(x, ComplexSelection):
            return x.compact()
        if isinstance(x, MaskedSelection):
            return x.compact()
        return x

    # --- element-wise ------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return self._elementwise(ufunc, method, inputs, kwargs)

    def _elementwise(self, ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict,
                     op: Any = None) -> Any:
        """``ufunc`` (or the operator ``op``: ``z ** 2`` is ndarray's fast path, np.square,
        which rounds otherwise than np.power) on the whole arrays, the mask kept; on the
        selected elements where that cannot be done."""
        if method == "__call__" and kwargs.get("out") is None and ufunc.nout == 1 and \
                ufunc.signature is None and kwargs.get("where", True) is True and \
                all(self._pairs_with(a) for a in inputs) and not self.re._written:
            from .tracer import Tracer
            whole = [a._whole() if isinstance(a, ComplexSelection) else
                     Tracer(a.values) if isinstance(a, MaskedSelection) else a for a in inputs]
            picked = self._picked((op or ufunc)(*whole, **kwargs))
            if picked is not None:
                return picked
        call = op if op is not None else getattr(ufunc, method)
        return call(*[self._compacted(a) for a in inputs],
                    **{k: self._compacted(v) for k, v in kwargs.items()})

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        def unwrap(x: Any) -> Any:
            if isinstance(x, (list, tuple)):
                return type(x)(unwrap(v) for v in x)
            return self._compacted(x)
        return func(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})

    def _binary(ufunc: np.ufunc, reflected: bool = False) -> Any:  # noqa: N805
        def method(self: "ComplexSelection", other: Any) -> Any:
            return self.__array_ufunc__(ufunc, "__call__", *((other, self) if reflected
                                                             else (self, other)))
        return method

    __add__, __radd__ = _binary(np.add), _binary(np.add, True)
    __sub__, __rsub__ = _binary(np.subtract), _binary(np.subtract, True)
    __mul__, __rmul__ = _binary(np.multiply), _binary(np.multiply, True)
    __truediv__, __rtruediv__ = _binary(np.true_divide), _binary(np.true_divide, True)
    __rpow__ = _binary(np.power, True)
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)  # type: ignore[assignment]

    def __pow__(self, other: Any) -> Any:   # ndarray's operator (see MaskedSelection)
        return self._elementwise(np.power, "__call__", (self, other), {},
                                 op=lambda a, b: a ** b)
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> Any:
        return self.__array_ufunc__(np.negative, "__call__", self)

    def __pos__(self) -> Any:
        return self.__array_ufunc__(np.positive, "__call__", self)

    def __abs__(self) -> Any:
        return self.__array_ufunc__(np.absolute, "__call__", self)

    def conj(self) -> "ComplexSelection":
        return ComplexSelection(self.re, -self.im)

    conjugate = conj
    real = property(lambda self: self.re)
    imag = property(lambda self: self.im)
    dtype = property(lambda self: self._whole().dtype)
    ndim = property(lambda self: self.re.ndim)

    # --- reductions: each part with the mask -------------------------------------------
    def sum(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            **kw: Any) -> Any:
        from .complex import ComplexTracer
        if out is None and dtype is None and not kw:
            return ComplexTracer(self.re.sum(axis=axis, keepdims=keepdims),
                                 self.im.sum(axis=axis, keepdims=keepdims))
        return self.compact().sum(axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    def mean(self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             **kw: Any) -> Any:
        from .complex import ComplexTracer
        if out is None and dtype is None and not kw:
            return ComplexTracer(self.re.mean(axis=axis, keepdims=keepdims),
                                 self.im.mean(axis=axis, keepdims=keepdims))
        return self.compact().mean(axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)

    # --- everything else: the compacted elements ---------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("re", "im"):
            raise AttributeError(name)
        return getattr(self.compact(), name)

    def __getitem__(self, key: Any) -> Any:
        return self.compact()[key]

    def __len__(self) -> int:
        return len(self.compact())

    def __iter__(self) -> Any:
        return iter(self.compact())

    def __bool__(self) -> bool:
        return bool(self.compact())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.compact().__array__(dtype)

    def __repr__(self) -> str:
        return f"ComplexSelection({self.re!r})"
