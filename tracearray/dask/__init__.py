"""Compiled functions on Dask arrays: every chunk computed by tracearray kernels.

A ``CompiledFunction`` called with ``dask.array`` arguments returns Dask arrays (lazy, as
Dask's own functions do). On the client, the function is traced once from the arrays'
shapes and dtypes; ``partition.py`` decides what runs chunk by chunk and where the program
splits into stages, ``replay.py`` turns each stage into a small program compiled like any
function, and ``stages.py`` builds the Dask graph: ``blockwise`` tasks for elementwise,
broadcasting and row-local work (rows rechunked whole where a row reduction needs them), and
``dask.array.reduction`` tree reductions for reductions along split axes. Dask schedules,
moves data and retries; tracearray only computes chunks.

The kernels reach the workers without re-tracing per task: each stage's compiled function
is one key of the Dask graph, pickled by its program (``tracearray/pickling.py``) once, sent
once to each worker and rebuilt once per worker process,
traced once per chunk shape there and compiled once per process, or loaded from the disk
cache. A ragged last chunk re-traces and compiles nothing new (kernels are size-generic).
With ``device="cuda"`` (or "auto" on a worker with a GPU) chunks run on the worker's GPU;
CuPy-backed Dask arrays pass through without copies (not yet run on a GPU cluster).

Importing tracearray does not import Dask: ``CompiledFunction.__call__`` comes here only
when ``dask.array`` is already imported and an argument is one of its arrays.
"""
from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from ..errors import TracearrayError
from .partition import NotDistributableError

__all__ = ["NotDistributableError", "call_on_dask", "has_dask_arrays", "refuse_dask_arrays"]


def _dask_array_type() -> Any:
    mod = sys.modules.get("dask.array")
    return getattr(mod, "Array", None)


def has_dask_arrays(args: tuple, kwargs: dict) -> bool:
    """Whether any argument leaf is a Dask array (cheap when Dask is not imported)."""
    array = _dask_array_type()
    if array is None:
        return False
    from ..trace import is_array_leaf, pytree
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, array):
            return True
        if isinstance(value, (tuple, list, dict)) or hasattr(value, "__dataclass_fields__"):
            if any(isinstance(v, array) for v in pytree.flatten(value, is_array_leaf)[0]):
                return True
    return False


def refuse_dask_arrays(what: str, args: tuple, kwargs: dict) -> None:
    if has_dask_arrays(args, kwargs):
        from ..errors import InputError
        raise InputError(
            f"{what} take NumPy arrays: one argument is a Dask array, whose chunks run as "
            f"separate stages (docs/dask.md); pass a chunk of it (x.blocks[0].compute()) to "
            f"see the kernels")


def call_on_dask(compiled: Any, args: tuple, kwargs: dict) -> Any:
    """``compiled(*args, **kwargs)`` with Dask array arguments: Dask arrays of the results.
    With ``fallback="numpy"``, what tracearray cannot run (on Dask) runs as the plain
    function on the Dask arrays, Dask's own NumPy implementation, with a warning."""
    try:
        return _call_on_dask(compiled, args, kwargs)
    except TracearrayError:
        if compiled.fallback != "numpy":
            raise
        warnings.warn(f"tracearray could not compile {compiled.__name__} for Dask arrays; "
                      f"running it with dask.array (fallback='numpy')", RuntimeWarning,
                      stacklevel=3)
        return compiled.fn(*args, **kwargs)


def _call_on_dask(compiled: Any, args: tuple, kwargs: dict) -> Any:
    from ..trace import is_array_leaf, pytree, trace_function
    from .partition import partition
    from .stages import build_arrays
    array = _dask_array_type()
    name = compiled.__name__

    def stand_in(value: Any, what: str) -> Any:
        leaves, tree = pytree.flatten(value, is_array_leaf)
        fakes = []
        for leaf in leaves:
            if isinstance(leaf, array):
                if any(np.isnan(c).any() for c in map(np.asarray, leaf.chunks)):
                    raise NotDistributableError(
                        f"{name}: argument {what} has chunks of unknown size (after boolean "
                        f"indexing or from a delayed source); call compute_chunk_sizes() "
                        f"on it first")
                # a zero-strided array of the full shape: tracing reads shape and dtype
                fakes.append(np.broadcast_to(np.zeros((), leaf.dtype), leaf.shape))
            else:
                fakes.append(leaf)
        return pytree.unflatten(tree, fakes), leaves

    sources: list[Any] = []
    t_args = []
    for i, a in enumerate(args):
        if i in compiled.static_argnums:
            if isinstance(a, array):
                raise NotDistributableError(
                    f"{name}: argument {i} is static (static_argnums) but a Dask array")
            t_args.append(a)
            continue
        fake, leaves = stand_in(a, str(i))
        t_args.append(fake)
        sources += leaves
    t_kwargs = {}
    for k in sorted(kwargs):
        if k in compiled.static_argnames:
            t_kwargs[k] = kwargs[k]
            continue
        t_kwargs[k], leaves = stand_in(kwargs[k], repr(k))
        sources += leaves
    trace = trace_function(compiled.fn, tuple(t_args), t_kwargs, compiled.static_argnums,
                           compiled.static_argnames)
    if trace.probe is not None:
        raise NotDistributableError(
            f"{name}: a size depends on the data ({trace.probe}), so the chunks of the "
            f"result cannot be known before computing; Dask graphs need them up front")
    graph = trace.graph
    compiled.note_captured(trace)
    sources += [np.asarray(compiled.global_value(g)) for g in graph.globals]
    chunks = [s.chunks if isinstance(s, array) else None for s in sources]
    part = partition(graph, chunks)
    outs = build_arrays(part, sources, compiled, _kernel_name(name))
    return pytree.unflatten(graph.out_tree, outs)


def _kernel_name(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:32]
