"""Why a call missed a compiled function's caches (``TRACEARRAY_EXPLAIN_CACHE_MISSES=1``).

A ``CompiledFunction`` keeps two caches (``api.py``): traces, keyed by the *trace key*
``(statics, shapes, sizes)``, and executables, keyed by the *executable key*
``(trace key, strides, device, kinds)``:

- ``statics``: one entry per positional argument (its pytree structure with the values of
  Python scalars, or its value when it is static), then ``name, entry`` per keyword;
- ``shapes``: ``(shape, dtype.str)`` of each array leaf of the arguments, in order;
- ``sizes``: the sizes the data decided (``x[mask]``, ``np.nonzero``), found by probes;
- ``strides``: byte strides of every input (argument leaves, then global arrays);
- ``device``: the resolved device; ``kinds``: whether each input is a NumPy array.

``explain`` compares the key of a call that missed with the most recently used one and says,
in words, which part changed: the dtype, rank, which axes broadcast (length 1), the size
alone (the kernels are size-generic: tracing again compiles nothing new), the layout
(contiguity, strides), a static or Python scalar argument's value, the argument structure,
a data-dependent size or the device.
"""
from __future__ import annotations

from typing import Any, Sequence


def explain_trace_miss(fn_name: str, old: Any, new: Any, statics_labels: Sequence[str],
                       leaf_names: Sequence[str]) -> str:
    """Why the trace key ``new`` missed, against the most recent key ``old`` (None: the
    function's first trace)."""
    if old is None:
        return f"{fn_name}: first call: tracing"
    (old_statics, old_shapes, old_sizes), (new_statics, new_shapes, new_sizes) = old, new
    reasons: list[str] = []
    if len(old_statics) != len(new_statics):
        reasons.append("the number of arguments changed")
    else:
        changed = sorted({_label(statics_labels, i) for i, (a, b) in
                          enumerate(zip(old_statics, new_statics)) if a != b})
        for name in changed:
            reasons.append(f"argument {name!r} changed its structure, or the value of a "
                           f"Python scalar or static argument in it (each value is traced "
                           f"separately)")
    if len(old_shapes) != len(new_shapes):
        if not reasons:
            reasons.append(f"the number of array arguments changed ({len(old_shapes)} -> "
                           f"{len(new_shapes)})")
    else:
        for j, ((s0, d0), (s1, d1)) in enumerate(zip(old_shapes, new_shapes)):
            name = _label(leaf_names, j)
            if d0 != d1:
                reasons.append(f"{name!r}: dtype {_dtype(d0)} -> {_dtype(d1)}")
            if len(s0) != len(s1):
                reasons.append(f"{name!r}: rank {len(s0)} -> {len(s1)} (shape {s0} -> {s1})")
            elif _ones(s0) != _ones(s1):
                reasons.append(f"{name!r}: which axes have length 1 (broadcast) changed: shape "
                               f"{s0} -> {s1}")
            elif s0 != s1:
                reasons.append(f"{name!r}: a new size, shape {s0} -> {s1} (traced again; the "
                               f"kernels are size-generic, so nothing new should compile)")
    if old_sizes != new_sizes and len(old_sizes) == len(new_sizes):
        reasons.append(f"a size the data decides changed: {old_sizes} -> {new_sizes}")
    if not reasons:
        reasons.append("the key is one seen before, evicted since (least recently used) or "
                       "a global it reads changed")
    return f"{fn_name}: trace cache miss: " + "; ".join(reasons)


def explain_executable_miss(fn_name: str, old: Any, new: Any, leaf_names: Sequence[str]
                            ) -> str:
    """Why the executable key ``new`` missed although its trace was cached, against the
    most recent executable key of the same trace (``old``; None: the trace's first)."""
    if old is None:
        return f"{fn_name}: building the kernels of a new trace"
    _t0, strides0, device0, kinds0 = old
    _t1, strides1, device1, kinds1 = new
    reasons: list[str] = []
    if device0 != device1:
        reasons.append(f"device {device0} -> {device1}")
    if kinds0 != kinds1:
        reasons.append("an argument changed between a NumPy array and a device array")
    if len(strides0) == len(strides1):
        for j, (a, b) in enumerate(zip(strides0, strides1)):
            if a != b:
                reasons.append(f"{_label(leaf_names, j)!r}: layout (strides in bytes) "
                               f"{a} -> {b}")
    if not reasons:
        reasons.append("the key is one seen before, evicted since (least recently used)")
    return f"{fn_name}: executable cache miss: " + "; ".join(reasons)


def _label(names: Sequence[str], i: int) -> str:
    return names[i] if i < len(names) else f"input {i}"


def _ones(shape: tuple[int, ...]) -> tuple[bool, ...]:
    return tuple(n == 1 for n in shape)


def _dtype(code: str) -> str:
    import numpy as np
    return str(np.dtype(code))
