"""The sort family as external ops: NumPy's own sorts run on the operand buffers.

Calling ``np.sort`` / ``np.argsort`` / ``np.partition`` / ``np.lexsort`` on the operands gives
NumPy's exact results: NaN last, the order of ties of every ``kind`` (the default quicksort's
included), and for partitions the very arrangement NumPy's introselect leaves. Rows are
independent, so a CPU implementation parallel over rows can be registered here later without
changing anything above; NumPy's sorts are vectorised (AVX-512 / AVX2 quicksort) already.

Axes are normalised by the tracer (``axis=None`` is a sort of the flattened array); kth values
are normalised to non-negative positions.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .external import INTP, register_external, returning, same_dtype, same_shape
from .spec import ALL_DTYPES, Domain

_ANY = Domain(ALL_DTYPES)


def _index_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> tuple[np.dtype, ...]:
    return (INTP,)


def _sort(x: np.ndarray, *, axis: int, kind: str) -> np.ndarray:
    return np.sort(x, axis=axis, kind=kind)


def _argsort(x: np.ndarray, *, axis: int, kind: str) -> np.ndarray:
    return np.argsort(x, axis=axis, kind=kind)


def _partition(x: np.ndarray, *, kth: tuple[int, ...], axis: int) -> np.ndarray:
    return np.partition(x, kth, axis=axis)


def _argpartition(x: np.ndarray, *, kth: tuple[int, ...], axis: int) -> np.ndarray:
    return np.argpartition(x, kth, axis=axis)


def _lexsort(*keys: np.ndarray, axis: int) -> np.ndarray:
    return np.lexsort(keys, axis=axis)


register_external("sort", same_shape, same_dtype, returning(_sort), what="NumPy's sort",
                  domain=_ANY)
register_external("argsort", same_shape, _index_dtype, returning(_argsort),
                  what="NumPy's argsort", domain=_ANY)
register_external("partition", same_shape, same_dtype, returning(_partition),
                  what="NumPy's partition (introselect)", domain=_ANY)
register_external("argpartition", same_shape, _index_dtype, returning(_argpartition),
                  what="NumPy's argpartition (introselect)", domain=_ANY)
register_external("lexsort", same_shape, _index_dtype, returning(_lexsort),
                  what="NumPy's lexsort", arity=-1, domain=_ANY)

