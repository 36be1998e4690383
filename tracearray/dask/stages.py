"""The Dask graph of a partitioned program: blockwise kernels and tree reductions.

Stage ``k`` computes, chunk by chunk, every result and every boundary partial whose inputs
are the arguments and the boundary values of earlier stages (``level``). Within a stage,
outputs are grouped by the split labels they vary along (one ``blockwise`` per group, so two
unrelated outputs never multiply their task counts); a group's task runs one compiled
``StageProgram`` (all its outputs from one kernel launch sequence). A group of one output
returns its block; a larger one returns a tuple that Blockwise ``getitem`` layers hand out
(as ``dask.array.apply_gufunc`` does), which Dask fuses with the tasks that read them. Each
boundary's partials are combined by ``dask.array.reduction``: the reduction's own ufunc for
sum, prod, max, min, any, all and the bitwise ones; (value, index) pairs for argmax/argmin,
the indices offset by their block's start along the reduced axis; (count, sum, squared
deviations) by Chan's formula for var/std; a sum for a matmul's per-block products.
"""
from __future__ import annotations

import operator
from functools import partial
from typing import Any

import numpy as np

import dask
import dask.array as da
from dask.array.core import _concatenate2
from dask.base import tokenize
from dask.utils import deepmap

from ..errors import TracearrayError
from ..ops import OPS
from ..ops.structure import constant_value
from ..pickling import shared_compiled
from ..trace.graph import Node
from .partition import NotDistributableError, Partition, contracted_label
from .replay import StageProgram, Step

_ARG_VALUE = {"argmax": "max", "argmin": "min"}


def build_arrays(part: Partition, sources: list[Any], compiled: Any, name: str) -> list[Any]:
    """Dask arrays of ``part.graph``'s results (``sources``: one per graph input, a Dask
    array or a NumPy array; ``compiled``: the user's compiled function, for its device)."""
    graph = part.graph
    boundaries = set(part.boundaries)
    # the second of a var/std pair needs only X, in the same pass as the sum
    first_of = {second: first for first, second in part.moments.items()}
    level: dict[Node, int] = {}
    avail: dict[Node, int] = {}
    for n in graph.nodes():
        level[n] = level[first_of[n]] if n in first_of else \
            max((avail[a] for a in n.args), default=0)
        avail[n] = level[n] + (n in boundaries)
    meta = _meta_of(sources)
    arrays: dict[Node, Any] = {}
    for node, src in zip(graph.inputs, sources):
        if node in part.dims:
            arrays[node] = _as_dask(src, part.node_chunks(node))
    for node in part.dims:
        if node.op == "constant" and any(part.split(l) for l in part.dims[node]):
            arrays[node] = da.from_array(constant_value(node), chunks=part.node_chunks(node))
    for k in range(max(level.values(), default=0) + 1):
        groups: dict[frozenset, list[Node]] = {}
        for r in graph.results:
            if r not in arrays and r not in boundaries and level[r] == k:
                groups.setdefault(_split_labels(part, part.dims[r]), []).append(r)
        for b in part.boundaries:
            if level[b] == k and b not in first_of:
                labels = sum((part.dims[a] for a in b.args), ())   # (a matmul's: both)
                groups.setdefault(_split_labels(part, labels), []).append(b)
        for g, (key, outs) in enumerate(groups.items()):
            made = _stage_group(part, arrays, boundaries, outs, key, compiled,
                                f"{name}_stage{k}_{g}", meta)
            for node, arr in zip(outs, made):
                if node in part.moments:
                    second = part.moments[node]
                    arrays[node], arrays[second] = _moments_reduce(node, second, arr, meta)
                elif node.op == "matmul":
                    arrays[node] = _sum_of_products(node, arr, meta)
                elif node in boundaries:
                    arrays[node] = _tree_reduce(part, node, arr, meta)
                else:
                    arrays[node] = arr
    return [arrays[r] for r in graph.results]


def _split_labels(part: Partition, dims: tuple) -> frozenset:
    return frozenset(l for l in dims if part.split(l))


def _stage_group(part: Partition, arrays: dict, boundaries: set, outs: list[Node],
                 key: frozenset, compiled: Any, name: str, meta: Any) -> list[Any]:
    """One blockwise over the labels ``key``: a StageProgram computing ``outs`` (boundaries
    as their per-chunk partials), and a Dask array per output."""
    program, cuts, packing, offsets = _build_program(part, arrays, boundaries, outs, name)
    # one compiled function per program and device in each process (the client's threads,
    # each worker): a later call building the same stage reuses its traces and kernels
    kernel = shared_compiled(program, (compiled.device, (), (), None,
                                       compiled.matmul_precision))

    # Tasks iterate over the split labels; an input's whole axes have one block each, named
    # apart and contracted (passed as a one-element list, unwrapped: never concatenated,
    # which would copy the block).
    split_ind = tuple(sorted({_index(_base(part, l)) for l in key}))
    args: list[Any] = []
    for i, c in enumerate(cuts):
        args += [arrays[c], tuple(_index(_base(part, l)) if part.split(l) else f"u{i}_{d}"
                                  for d, l in enumerate(part.dims[c]))]
    for off, label in offsets:
        args += [off, (_index(_base(part, label)),)]
    missing = {x for ind in args[1::2] for x in ind
               if not x.startswith("u") and x not in split_ind}
    if missing:   # the tasks would be handed all of those blocks
        raise TracearrayError(f"tracearray.dask: {name}: inputs split along {sorted(missing)}, "
                              f"which its tasks do not iterate over (a bug in tracearray.dask: "
                              f"please report it)")
    token = tokenize(program, [arrays[c].name for c in cuts])
    # the compiled stage is one key of the graph that every task reads: pickled once and
    # sent once to each worker, not once per task
    kernel_key = dask.delayed(kernel, name=f"tracearray-kernel-{name}-{tokenize(program)}",
                              pure=True)
    run = dict(program=kernel_key, packing=tuple(packing), n_data=len(cuts),
               device_chunks=_is_device(meta))
    layouts = [_output_layout(part, o, j, o in boundaries) for j, o in enumerate(outs)]
    if len(outs) == 1:   # the task's result is the block (Dask fuses it with what follows)
        ind, new_axes, adjust = layouts[0]
        return [da.blockwise(_run_one, ind, *args, name=f"tracearray-{name}-{token}",
                             new_axes=new_axes, adjust_chunks=adjust, align_arrays=False,
                             concatenate=False, meta=_empty_like(meta, len(ind), outs[0].dtype),
                             **run)]
    group = da.blockwise(_run_group, split_ind, *args, name=f"tracearray-{name}-{token}",
                         align_arrays=False, concatenate=False,
                         meta=np.empty((0,) * len(split_ind)), **run)
    return [da.blockwise(operator.getitem, ind, group, split_ind, j, None,
                         name=f"{group.name}-out{j}", new_axes=new_axes, adjust_chunks=adjust,
                         align_arrays=False, meta=_empty_like(meta, len(ind), o.dtype))
            for j, (o, (ind, new_axes, adjust)) in enumerate(zip(outs, layouts))]


def _build_program(part: Partition, arrays: dict, boundaries: set, outs: list[Node],
                   name: str) -> tuple[StageProgram, list[Node], list[tuple], list[tuple]]:
    """The StageProgram of one group: the subgraph from ``outs`` back to the values
    available as Dask arrays (its inputs, ``cuts``), the block-size recipes of every
    dimension, and how ``_run_group`` packs each output (a value; a moments, argmin or
    product partial)."""
    # the subgraph: from the outputs back to what is available as Dask arrays
    needed: set[int] = set()
    stack = list(outs)
    while stack:
        n = stack.pop()
        if id(n) in needed:
            continue
        needed.add(id(n))
        if n in arrays:
            continue
        stack.extend(n.args)
    order = [n for n in part.graph.nodes() if id(n) in needed]
    cuts = [n for n in order if n in arrays]
    position: dict[Node, int] = {n: i for i, n in enumerate(cuts)}

    found: dict[int, tuple] = {}   # split label -> ("from", input, dim)
    for i, c in enumerate(cuts):
        for d, l in enumerate(part.dims[c]):
            if part.split(l) and l not in found:
                found[l] = ("from", i, d)

    def recipe(l: int | None, n: int) -> tuple:
        if not part.split(l):
            return ("fixed", n)
        if l in found:
            return found[l]
        origin = part.origins[l]
        if origin[0] == "merge":
            return ("times", recipe(origin[1], part.sizes[origin[1]]), origin[2])
        if origin[0] == "split":
            return ("div", recipe(origin[1], part.sizes[origin[1]]), origin[2])
        raise NotDistributableError(
            f"tracearray.dask: {name} computes along a split axis of length {n} that none of "
            f"its inputs has (an array broadcast to that length); pass the array it should "
            f"follow as an argument")

    def block(n: Node) -> tuple:
        return tuple(recipe(l, s) for l, s in zip(part.dims[n], n.shape))

    steps: list[Step] = []
    for n in order:
        if n in position:
            continue
        position[n] = len(cuts) + len(steps)
        steps.append(Step(n.op, tuple(position[a] for a in n.args), n.attrs, block(n)))
    positions: list[int] = []
    packing: list[tuple] = []
    offsets: list[tuple[Any, int]] = []   # (block starts along a label, the label)
    for o in outs:
        if o in part.moments:   # sum, sum of squared deviations from the block's mean, count
            x, axes = o.args[0], o.attr("axes")
            f8 = (("dtype", "<f8"),)

            def add(op: str, args: tuple, attrs: tuple, shape_of: Node, **kw: Any) -> int:
                steps.append(Step(op, args, attrs, block(shape_of) if shape_of is not None
                                  else (), **kw))
                return len(cuts) + len(steps) - 1
            count = add("size", (), (("dtype", "<f8"), ("shape", ()),
                                     ("value", np.float64(0).tobytes())), None,
                        count=tuple(block(x)[a] for a in axes))
            mean = add("true_divide", (add("cast", (position[o],), f8, o), count), (), o)
            xf = add("cast", (position[x],), f8, x)
            dev = add("subtract", (xf, mean), (), x)
            sq = add("multiply", (dev, dev), (), x)
            m2 = add("sum", (sq,), (("axes", axes), ("dtype", "<f8")), o)
            positions += [position[o], m2, count]
            packing.append(("moments", len(positions) - 3, len(positions) - 2,
                            len(positions) - 1))
        elif o.op == "matmul":   # the block's product, one per block of the contracted axis
            positions.append(position[o])
            packing.append(("stack", len(positions) - 1))
        elif o.op in _ARG_VALUE and o in boundaries:
            (axis,) = o.attr("axes")
            value = Step(_ARG_VALUE[o.op], (position[o.args[0]],), (("axes", (axis,)),),
                         block(o))
            steps.append(value)
            positions += [position[o], len(cuts) + len(steps) - 1]
            label = part.dims[o.args[0]][axis]
            starts = np.cumsum((0,) + part.chunks[label][:-1]).astype(np.int64)
            packing.append(("arg", len(positions) - 2, len(positions) - 1, len(offsets)))
            offsets.append((da.from_array(starts, chunks=1), label))
        else:
            positions.append(position[o])
            packing.append(("value", len(positions) - 1))
    program = StageProgram(name, tuple(block(c) for c in cuts),
                           tuple(c.dtype.str for c in cuts), tuple(steps), tuple(positions))
    return program, cuts, packing, offsets


def _index(label: int) -> str:
    return f"l{label}"


def _base(part: Partition, label: int) -> int:
    """The label whose blocks a reshaped label's blocks are, one to one (a merged ``4n``
    axis has a block per block of ``n``): the one tasks are indexed by."""
    origin = part.origins[label]
    while origin[0] in ("merge", "split"):
        label = origin[1]
        origin = part.origins[label]
    return label


def _output_layout(part: Partition, node: Node, j: int, is_partial: bool
                   ) -> tuple[tuple, dict, dict]:
    """Output ``j``'s blockwise index, new axes (its whole dimensions) and chunks. A
    boundary's partials have one block per block of its operand (size 1 along the reduced
    axes)."""
    if is_partial and node.op == "matmul":   # products stacked along a new first axis
        labels = (contracted_label(node, part.dims),) + part.dims[node]
        shape, axes = (1,) + node.shape, (0,)
    elif is_partial:
        labels, shape, axes = part.dims[node.args[0]], node.args[0].shape, node.attr("axes")
    else:
        labels, shape, axes = part.dims[node], node.shape, ()
    ind, new_axes, adjust = [], {}, {}
    for d, (l, n) in enumerate(zip(labels, shape)):
        if part.split(l):
            name = _index(_base(part, l))
            adjust[name] = (1,) * len(part.chunks[l]) if d in axes else part.chunks[l]
        else:
            name = f"o{j}_{d}"
            new_axes[name] = 1 if d in axes else n
        ind.append(name)
    return tuple(ind), new_axes, adjust


def _run_one(*blocks: Any, **run: Any) -> Any:
    return _run_group(*blocks, **run)[0]


def _run_group(*blocks: Any, program: Any, packing: tuple, n_data: int,
               device_chunks: bool) -> tuple:
    """A task: the compiled stage program on one block of each input."""
    blocks = tuple(_unwrap(b) for b in blocks)
    outs = program(*blocks[:n_data])
    offsets = blocks[n_data:]
    result = []
    for p in packing:
        if p[0] == "value":
            result.append(_chunk(outs[p[1]], device_chunks))
        elif p[0] == "stack":
            result.append(_chunk(outs[p[1]], device_chunks)[None])
        elif p[0] == "moments":
            total = _chunk(outs[p[1]], device_chunks)
            count = float(np.asarray(outs[p[3]]))
            result.append({"n": np.full(total.shape, count), "s": total,
                           "m2": _chunk(outs[p[2]], device_chunks)})
        else:
            start = int(np.asarray(offsets[p[3]]).reshape(-1)[0])
            result.append({"i": _chunk(outs[p[1]], device_chunks) + start,
                           "v": _chunk(outs[p[2]], device_chunks)})
    return tuple(result)


def _unwrap(block: Any) -> Any:
    """The one block of an input's whole axes (blockwise passes them as nested lists)."""
    while isinstance(block, list):
        (block,) = block
    return block


def _tree_reduce(part: Partition, node: Node, partials: Any, meta: Any) -> Any:
    reducer = OPS[node.op].reducer
    axes = tuple(node.attr("axes"))
    is_arg = reducer.index is not None
    combine = partial(_combine, op=node.op, dtype=node.dtype, last=False)
    aggregate = partial(_combine, op=node.op, dtype=node.dtype, last=True)
    return da.reduction(partials, chunk=_keep, combine=combine, aggregate=aggregate, axis=axes,
                        keepdims=True, dtype=node.dtype, concatenate=not is_arg,
                        meta=_empty_like(meta, node.ndim, node.dtype),
                        name=f"tracearray-{node.op}")


def _sum_of_products(node: Node, partials: Any, meta: Any) -> Any:
    """A matmul contracting a split axis: the blocks' products (stacked along a first axis,
    one per block of the contracted axis) summed by a tree reduction."""
    total = da.reduction(partials, chunk=_keep, combine=_add, aggregate=_add, axis=(0,),
                         keepdims=True, dtype=node.dtype,
                         meta=_empty_like(meta, node.ndim + 1, node.dtype),
                         name="tracearray-matmul-sum")
    return total[0]


def _add(x: Any, axis: tuple, keepdims: bool) -> Any:
    return x.sum(axis=axis, keepdims=keepdims, dtype=x.dtype)


def _moments_reduce(first: Node, second: Node, partials: Any, meta: Any) -> tuple[Any, Any]:
    """The sum and the sum of squared deviations of a var/std pair, by Chan's combine."""
    axes = tuple(first.attr("axes"))
    chan = partial(_chan, total_dtype=first.dtype)
    both = da.reduction(partials, chunk=_keep, combine=chan, aggregate=chan, axis=axes,
                        keepdims=True, dtype=np.float64, concatenate=False,
                        meta=_empty_like(meta, first.ndim, np.float64),
                        name="tracearray-moments")
    return tuple(both.map_blocks(_pick, key=key, dtype=n.dtype, out_dtype=n.dtype,
                                 meta=_empty_like(meta, n.ndim, n.dtype))
                 for key, n in (("s", first), ("m2", second)))


def _pick(block: dict, key: str, out_dtype: np.dtype) -> Any:
    return block[key].astype(out_dtype, copy=False)


def _chan(pairs: Any, axis: tuple, keepdims: bool, total_dtype: np.dtype) -> dict:
    """Chan, Golub and LeVeque's pairwise update for many groups: with counts n_i, sums s_i
    and squared deviations M2_i from their own means m_i, the whole's mean m = sum(s_i)/n
    and M2 = sum(M2_i) + sum(n_i (m_i - m)^2) (each term a square: no cancellation, unlike
    sum(x^2) - n m^2)."""
    pairs = pairs if isinstance(pairs, list) else [pairs]
    device = _is_device(_first_leaf(pairs)["s"])

    def gather(key: str) -> np.ndarray:
        return _host(_concatenate2(deepmap(lambda p: p[key], pairs), axes=list(axis)))
    counts, totals, m2s = gather("n"), gather("s"), gather("m2")
    sums = totals.astype(np.float64)
    n = counts.sum(axis=axis, keepdims=True)
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    mean = np.divide(sums.sum(axis=axis, keepdims=True), n, out=np.zeros(n.shape),
                     where=n > 0)
    m2 = m2s.sum(axis=axis, keepdims=True) + \
        (counts * (means - mean) ** 2).sum(axis=axis, keepdims=True)
    acc = np.float32 if totals.dtype == np.float16 else totals.dtype
    total = np.add.reduce(totals.astype(acc), axis=axis, keepdims=True).astype(total_dtype)
    return {"n": n, "s": _like(total, device), "m2": _like(m2, device)}


def _keep(x: Any, axis: Any = None, keepdims: bool = True) -> Any:
    return x


def _combine(x: Any, axis: tuple, keepdims: bool, op: str, dtype: np.dtype,
             last: bool) -> Any:
    """Combine partials along ``axis`` (concatenated, or nested lists of (value, index)
    dicts for argmax/argmin). On the host: partials are small."""
    reducer = OPS[op].reducer
    if reducer.index is not None:
        pairs = x if isinstance(x, list) else [x]
        values = _host(_concatenate2(deepmap(lambda p: p["v"], pairs), axes=list(axis)))
        index = _host(_concatenate2(deepmap(lambda p: p["i"], pairs), axes=list(axis)))
        pick = (np.argmax if reducer.index == "max" else np.argmin)(values, axis=axis[0],
                                                                     keepdims=True)
        best = np.take_along_axis(index, pick, axis=axis[0])
        device = _is_device(_first_leaf(pairs)["i"])
        if last:
            return _like(best, device)
        return {"i": _like(best, device),
                "v": _like(np.take_along_axis(values, pick, axis=axis[0]), device)}
    device = _is_device(x)
    x = _host(x)
    acc = np.dtype(np.float32) if reducer.widen_f16 and x.dtype == np.float16 else dtype
    if reducer.bool_acc:
        out = reducer.ufunc.reduce(x.astype(bool), axis=axis, keepdims=True)
    else:
        out = reducer.ufunc.reduce(x.astype(acc, copy=False), axis=axis, keepdims=True)
    return _like(np.asarray(out).astype(dtype, copy=False), device)


def _first_leaf(x: Any) -> Any:
    while isinstance(x, list):
        x = x[0]
    return x


# --------------------------------------------------------------------------------------------
# Chunks on the host or on a GPU (CuPy-backed Dask arrays)
# --------------------------------------------------------------------------------------------

def _is_device(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def _meta_of(sources: list[Any]) -> Any:
    for s in sources:
        if isinstance(s, da.Array):
            return s._meta
    return np.empty(())


def _empty_like(meta: Any, ndim: int, dtype: np.dtype) -> Any:
    if _is_device(meta):
        import cupy
        return cupy.empty((0,) * ndim, dtype=dtype)
    return np.empty((0,) * ndim, dtype=dtype)


def _chunk(out: Any, device_chunks: bool) -> Any:
    """A kernel's result as a block: a NumPy array, or, when the inputs were CuPy blocks, a
    CuPy array over the same device memory (``__cuda_array_interface__``: no copy)."""
    if device_chunks:
        import cupy
        return cupy.asarray(out)
    return np.asarray(out)


def _host(x: Any) -> np.ndarray:
    return x.get() if _is_device(x) else np.asarray(x)


def _like(x: np.ndarray, device: bool) -> Any:
    if device:
        import cupy
        return cupy.asarray(x)
    return x


def _as_dask(value: Any, chunks: tuple) -> Any:
    if isinstance(value, da.Array):
        return value if value.chunks == chunks else value.rechunk(chunks)
    return da.from_array(np.asarray(value), chunks=chunks)
