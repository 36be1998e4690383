"""Which nodes of a traced graph run chunk by chunk, and where the graph splits into stages.

Works on the graph traced from the full arrays' shapes and dtypes (nothing here imports Dask:
the chunks of the Dask inputs arrive as tuples of block sizes). Three passes:

1. **Labels.** Every dimension of every node (except those of size 1, which broadcast) gets
   a *label*, an axis identity propagated through the graph: elementwise operands that
   broadcast together share labels (union-find), views move them (transpose, squeeze,
   reshape by dimension groups), a reduction's kept dimensions keep theirs. An op that needs
   a dimension whole (a scan along it, a slice or a gather along it) records that
   requirement; a matmul unifies the contracted axes of its operands.
2. **Chunks.** Each label class gets one chunking: the common refinement of its inputs'
   chunks (inputs are rechunked to it), one block where a requirement or a ``whole`` label
   says so, or one derived from another label (a reshape merging ``(n, 4)`` into ``4n``
   scales the blocks of ``n``).
3. **Reductions.** A reduction over labels that are all one block is local (it runs inside
   a chunk's kernel). One over a split label is either *row-local*, when its result is
   broadcast back against that label and some kept dimension is still split (softmax,
   layernorm with the rows split): its reduced labels are rechunked whole and it becomes
   local; or a *boundary*: a per-chunk partial, combined by Dask's tree reduction, whose
   value a later stage reads (a total, ``x - x.mean()``). A matmul contracting a split axis
   (``x.T @ x`` with the rows split) is a boundary too: per-chunk products, summed.

Passes 2 and 3 repeat until no label has to become whole any more. What cannot run
chunk-locally without gathering a split dimension the user chunked raises
``NotDistributableError`` naming the operation, the axis and the user's line.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import UnsupportedOperationError
from ..ops import OPS, Kind
from ..trace.graph import Graph, Node

Chunks = tuple[int, ...]


class NotDistributableError(UnsupportedOperationError):
    """A program (or an input of it) that Dask's chunk-by-chunk execution cannot run."""


@dataclass
class _Label:
    size: int
    origin: tuple          # ("input", i, d) | ("free",) | ("const",) | ("whole",) |
                           # ("merge", src, factor) | ("split", src, divisor)


@dataclass
class Partition:
    """The result: node dims as label roots, chunks per root, the boundary reductions."""
    graph: Graph
    dims: dict[Node, tuple[int | None, ...]]
    chunks: dict[int, Chunks]                 # label root -> block sizes
    origins: dict[int, tuple]                 # label root -> how a block's size is known
    sizes: dict[int, int]
    boundaries: list[Node]                    # reductions combined by a tree reduction
    # a boundary sum of X -> the boundary sum of squared deviations of X from its mean over
    # the same axes (var, std): both from one pass over X, combined by Chan's formula
    moments: dict[Node, Node] = field(default_factory=dict)

    def split(self, label: int | None) -> bool:
        return label is not None and len(self.chunks[label]) > 1

    def node_chunks(self, node: Node) -> tuple[Chunks, ...]:
        return tuple(self.chunks[l] if l is not None else (n,)
                     for l, n in zip(self.dims[node], node.shape))


class _Labels:
    def __init__(self) -> None:
        self.labels: list[_Label] = []
        self.parent: list[int] = []

    def new(self, size: int, origin: tuple) -> int:
        self.labels.append(_Label(size, origin))
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, l: int) -> int:
        while self.parent[l] != l:
            self.parent[l] = self.parent[self.parent[l]]
            l = self.parent[l]
        return l

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)
        return min(a, b)


def _where(graph: Graph, node: Node) -> str:
    loc = (graph.locations or {}).get(node)
    return f"\n  at {loc}" if loc else ""


def partition(graph: Graph, input_chunks: Sequence[tuple[Chunks, ...] | None]) -> Partition:
    """Label, chunk and classify ``graph`` whose inputs have these chunks (None: an array the
    caller holds whole, such as a NumPy argument or a global array)."""
    if graph.updates:
        names = ", ".join(repr(graph.input_names[i]) for i in graph.updates)
        raise NotDistributableError(
            f"the compiled function writes into its input {names}: Dask arrays are immutable, "
            f"so it cannot run on them; return the new value instead")
    if graph.checks:
        raise NotDistributableError(
            f"the compiled function makes a run-time check of its data "
            f"({graph.checks[0][1].splitlines()[0]!r}), which a Dask graph cannot raise "
            f"before computing: run it on NumPy chunks (x.map_blocks) instead")
    lab = _Labels()
    dims: dict[Node, tuple[int | None, ...]] = {}
    needs: list[tuple[int, Node, str, bool]] = []   # (label, op, why, may rechunk)
    reductions: list[Node] = []
    nodes = graph.nodes()
    inputs = {n: i for i, n in enumerate(graph.inputs)}
    for node in nodes:
        dims[node] = _label_node(node, lab, dims, inputs, needs, reductions)

    def root(l: int | None) -> int | None:
        return None if l is None else lab.find(l)

    dims = {n: tuple(root(l) for l in d) for n, d in dims.items()}
    users = graph.users()
    pairs, internal = _find_moments(reductions, users)
    forced: set[int] = set()
    while True:
        before = set(forced)
        chunks = _assign_chunks(lab, input_chunks, forced)   # (may force derived sources)
        grow: set[int] = forced - before
        for label, node, why, may in needs:
            r = lab.find(label)
            if len(chunks[r]) > 1 and r not in forced:
                if not may:
                    raise NotDistributableError(
                        f"tracearray.dask: {why} cannot run chunk by chunk: that axis is "
                        f"split into {len(chunks[r])} chunks, and the operation needs it "
                        f"whole; rechunk it into one chunk first (x.rechunk({{axis: -1}})), "
                        f"or slice/concatenate the Dask arrays before calling the compiled "
                        f"function{_where(graph, node)}")
                grow.add(r)
        boundaries = []
        for red in reductions:
            if red.op == "matmul":
                k = contracted_label(red, dims)
                if k is not None and len(chunks[k]) > 1:
                    boundaries.append(red)
                continue
            operand = dims[red.args[0]]
            axes = red.attr("axes")
            split_red = {operand[a] for a in axes if operand[a] is not None
                         and len(chunks[operand[a]]) > 1}
            if not split_red:
                continue
            kept_split = any(l is not None and len(chunks[l]) > 1 for l in dims[red])
            if kept_split and _re_expanded(red, split_red, users, dims, internal):
                grow |= split_red       # row-local: its rows rechunked whole
            else:
                boundaries.append(red)
        if not grow:
            break
        forced |= grow
    # (reported at the op that paired them: an elementwise op, not the input or a view)
    for node in sorted(nodes, key=lambda n: OPS[n.op].kind in (Kind.SOURCE, Kind.MOVEMENT)):
        split = [l for l in dims[node] if l is not None and len(chunks[l]) > 1]
        if len(split) != len(set(split)):
            axes = [d for d, l in enumerate(dims[node]) if split.count(l) > 1]
            raise NotDistributableError(
                f"tracearray.dask: {node.op} pairs axes {axes} of its result with each other "
                f"(as in x * x.T): both are split, and a task would need blocks off the "
                f"diagonal; rechunk one of them into one chunk first{_where(graph, node)}")
    origins = {r: _root_origin(lab, r) for r in chunks}
    sizes = {r: lab.labels[r].size for r in chunks}
    moments = {a: b for a, b in pairs.items() if a in boundaries and b in boundaries}
    return Partition(graph, dims, chunks, origins, sizes, boundaries, moments)


def _find_moments(reductions: list[Node], users: dict) -> tuple[dict[Node, Node], set[Node]]:
    """Pairs (sum(X), sum((X - mean)**2)) over the same axes, the mean being that sum
    divided by the element count (how NumPy's var and std are traced: ``_methods._var``),
    and the pattern's nodes that nothing else reads. The second would otherwise need a
    second pass over X, after the first's result."""
    sums = {(b.args[0], b.attr("axes")): b for b in reductions if b.op == "sum"}
    pairs: dict[Node, Node] = {}
    internal: set[Node] = set()
    for b in reductions:
        if b.op != "sum" or b.dtype.kind != "f":
            continue
        sq = b.args[0]
        if sq.op == "square" or (sq.op == "multiply" and sq.args[0] is sq.args[1]):
            dev = sq.args[0]
        else:
            continue
        if dev.op != "subtract":
            continue
        x, mean = dev.args
        first = sums.get((x, b.attr("axes")))
        if first is None or first in pairs or not _mean_of(mean, first):
            continue
        pairs[first] = b
        chain, n = [sq, dev], mean
        while n is not first:
            chain.append(n)
            n = n.args[0]
        inside = set(chain) | {b}
        if all(all(u in inside for u in users[c]) for c in chain):
            internal |= set(chain)
    return pairs, internal


def _mean_of(node: Node, total: Node) -> bool:
    """Whether ``node`` is ``total / count`` (casts around it allowed)."""
    while node.op == "cast":
        node = node.args[0]
    if node.op != "true_divide" or node.args[1].op != "size":
        return False
    count = int(np.frombuffer(node.args[1].attr("value"), dtype=node.args[1].dtype)[0])
    n = node.args[0]
    while n.op == "cast":
        n = n.args[0]
    x = total.args[0]
    return n is total and count == int(np.prod([x.shape[a] for a in total.attr("axes")]))


def _re_expanded(red: Node, labels: set[int], users: dict, dims: dict,
                 internal: set[Node]) -> bool:
    """Whether a value computed from ``red`` is broadcast against one of the labels it
    reduced (softmax's ``e / s``): then each chunk needs its rows' whole result. The
    deviations of a var/std pair (``internal``) do not count: Chan's combine needs no
    second pass."""
    stack, seen = list(users[red]), set()
    while stack:
        n = stack.pop()
        if id(n) in seen or n in internal:
            continue
        seen.add(id(n))
        if any(l in labels for l in dims[n]):
            return True
        stack.extend(users[n])
    return False


def _root_origin(lab: _Labels, r: int) -> tuple:
    """How a block's size along label class ``r`` is found inside a task: from an input's
    block (``("input", i, d)``), the whole size (``("full",)``), or from another label's
    (``("merge", src, factor)``, ``("split", src, divisor)``)."""
    members = [i for i in range(len(lab.parent)) if lab.find(i) == r]
    for kind in ("input", "merge", "split"):
        for m in members:
            o = lab.labels[m].origin
            if o[0] == kind:
                return o if kind == "input" else (kind, lab.find(o[1]), o[2])
    return ("full",)


def _refine(tuples: list[Chunks]) -> Chunks:
    """The common refinement of chunkings of one axis (every boundary of each)."""
    if len(set(tuples)) == 1:
        return tuples[0]
    cuts: set[int] = set()
    for t in tuples:
        cuts.update(np.cumsum(t).tolist())
    edges = [0] + sorted(cuts)
    return tuple(int(b - a) for a, b in zip(edges, edges[1:]))


def _assign_chunks(lab: _Labels, input_chunks: Sequence[tuple[Chunks, ...] | None],
                   forced: set[int]) -> dict[int, Chunks]:
    classes: dict[int, list[int]] = {}
    for i in range(len(lab.parent)):
        classes.setdefault(lab.find(i), []).append(i)
    out: dict[int, Chunks] = {}

    def chunks_of(r: int) -> Chunks:
        if r in out:
            return out[r]
        size = lab.labels[r].size
        whole: Chunks = (size,)
        found: list[Chunks] = []
        derived: list[Chunks] = []
        is_whole = r in forced
        for m in classes[r]:
            o = lab.labels[m].origin
            if o[0] == "input":
                c = input_chunks[o[1]]
                if c is not None:
                    found.append(tuple(int(b) for b in c[o[2]]))
            elif o[0] == "whole":
                is_whole = True
            elif o[0] == "merge":
                derived.append(tuple(b * o[2] for b in chunks_of(lab.find(o[1]))))
            elif o[0] == "split":
                src = chunks_of(lab.find(o[1]))
                if all(b % o[2] == 0 for b in src):
                    derived.append(tuple(b // o[2] for b in src))
                else:   # a block boundary inside a group: the source is needed whole
                    forced.add(lab.find(o[1]))
                    derived.append(whole)
        if is_whole:
            result = whole
            for d in derived:
                if len(d) > 1:   # the source of a derived label must be whole too
                    for m in classes[r]:
                        o = lab.labels[m].origin
                        if o[0] in ("merge", "split"):
                            forced.add(lab.find(o[1]))
        elif derived:
            result = derived[0] if len(set(derived)) == 1 else whole
            if len(set(derived)) > 1:
                for m in classes[r]:
                    o = lab.labels[m].origin
                    if o[0] in ("merge", "split"):
                        forced.add(lab.find(o[1]))
        elif found:
            result = _refine(found)
        else:
            result = whole
        out[r] = result
        return result

    for r in classes:
        chunks_of(r)
    return out


def _label_node(node: Node, lab: _Labels, dims: dict, inputs: dict, needs: list,
                reductions: list) -> tuple[int | None, ...]:
    """The labels of ``node``'s dimensions, from its operands' (see the module docstring)."""
    spec = OPS[node.op]
    shape = node.shape
    args = [dims[a] for a in node.args]

    def fresh(origin: tuple) -> tuple[int | None, ...]:
        return tuple(lab.new(n, origin) if n != 1 else None for n in shape)

    def need(labels: Any, why: str, may: bool = False) -> None:
        for l in labels:
            if l is not None:
                needs.append((l, node, why, may))

    if node.op == "input":
        i = inputs[node]
        return tuple(lab.new(n, ("input", i, d)) if n != 1 else None
                     for d, n in enumerate(shape))
    if spec.kind is Kind.SOURCE:
        return fresh(("const",))
    if spec.kind is Kind.ELEMENTWISE:
        out: list[int | None] = [None] * len(shape)
        for a, d in zip(node.args, args):
            off = len(shape) - len(d)
            for j, l in enumerate(d):
                if l is None:
                    continue
                out[off + j] = l if out[off + j] is None else lab.union(out[off + j], l)
        return tuple(out)
    if spec.kind is Kind.REDUCE:
        reductions.append(node)
        axes = node.attr("axes")
        return tuple(None if j in axes else l for j, l in enumerate(args[0]))
    if spec.kind is Kind.SCAN:
        a = args[0]
        need([a[node.attr("axis")]], f"{node.op} along axis {node.attr('axis')} of a "
             f"{node.args[0].shape} array")
        return a
    if node.op == "transpose":
        return tuple(args[0][p] for p in node.attr("perm"))
    if node.op in ("squeeze", "expand_dims"):
        kept = [l for l, n in zip(args[0], node.args[0].shape) if n != 1]
        it = iter(kept)
        return tuple(next(it) if n != 1 else None for n in shape)
    if node.op == "broadcast_to":
        src, src_shape = args[0], node.args[0].shape
        off = len(shape) - len(src)
        out = []
        for j, n in enumerate(shape):
            k = j - off
            if n == 1:
                out.append(None)
            elif k >= 0 and src_shape[k] == n:
                out.append(src[k])
            else:
                out.append(lab.new(n, ("free",)))
        return tuple(out)
    if node.op == "reshape":
        return _label_reshape(node, args[0], lab, need)
    if node.op == "slice":
        out = []
        for (start, stop, step), l, n_in, n in zip(node.attr("slices"), args[0],
                                                    node.args[0].shape, shape):
            if (start, stop, step) == (0, n_in, 1):
                out.append(l)
            else:
                need([l], f"a slice of axis {len(out)} of a {node.args[0].shape} array")
                out.append(lab.new(n, ("whole",)) if n != 1 else None)
        return tuple(out)
    if node.op == "gather":
        x, at, axes = args[0], node.attr("at"), node.attr("axes")
        need([x[a] for a in axes], "indexing with an integer array (a gather) along axis "
             + ", ".join(map(str, axes)))
        index = [None] * node.args[1].ndim
        for d in args[1:]:
            for j, l in enumerate(d):
                if l is not None:
                    index[j] = l if index[j] is None else lab.union(index[j], l)
        rest = [l for j, l in enumerate(x) if j not in axes]
        return tuple(rest[:at] + index + rest[at:])
    if node.op == "matmul":
        reductions.append(node)   # a sum over the contracted axis, when it is split
        return _label_matmul(node, args, lab)
    # scatter, diagonal, sliding_window, concatenate: every operand axis whole
    for a, n in zip(args, node.args):
        need(a, f"{node.op} (of a {n.shape} operand)")
    return fresh(("whole",))


def contracted_label(node: Node, dims: dict) -> int | None:
    """The label of the axis a matmul contracts (its first operand's last)."""
    return dims[node.args[0]][-1]


def _label_matmul(node: Node, args: list, lab: _Labels) -> tuple[int | None, ...]:
    a, b = args
    sa, sb = node.args[0].shape, node.args[1].shape
    a2 = a if len(sa) > 1 else (None,) + a
    b2 = b if len(sb) > 1 else b + (None,)
    if a2[-1] is not None and b2[-2] is not None:
        lab.union(a2[-1], b2[-2])
    batch_a, batch_b = list(a2[:-2]), list(b2[:-2])
    n = max(len(batch_a), len(batch_b))
    batch_a = [None] * (n - len(batch_a)) + batch_a
    batch_b = [None] * (n - len(batch_b)) + batch_b
    batch = [x if y is None else y if x is None else lab.union(x, y)
             for x, y in zip(batch_a, batch_b)]
    out = batch + [a2[-2], b2[-1]]
    if len(sa) == 1:
        out = out[:-2] + out[-1:]
    if len(sb) == 1:
        out = out[:-1]
    return tuple(l if n != 1 else None for l, n in zip(out, node.shape))


def _label_reshape(node: Node, src: tuple, lab: _Labels, need: Any) -> tuple[int | None, ...]:
    """Dimensions are matched in groups of equal products (sizes 1 aside): one to one keeps
    the label; many to one merges (all but the first whole, blocks scaled); one to many
    splits (blocks divided, when they divide); many to many needs the inputs whole."""
    in_shape, out_shape = node.args[0].shape, node.shape
    ins = [(l, n) for l, n in zip(src, in_shape) if n != 1]
    outs = [j for j, n in enumerate(out_shape) if n != 1]
    result: list[int | None] = [None] * len(out_shape)
    i = o = 0
    while i < len(ins) and o < len(outs):
        gi, go = [ins[i]], [outs[o]]
        pi, po = ins[i][1], out_shape[outs[o]]
        i, o = i + 1, o + 1
        while pi != po:
            if pi < po:
                gi.append(ins[i])
                pi *= ins[i][1]
                i += 1
            else:
                go.append(outs[o])
                po *= out_shape[outs[o]]
                o += 1
        if len(gi) == 1 and len(go) == 1:
            result[go[0]] = gi[0][0]
        elif len(go) == 1:   # merge
            need([l for l, _n in gi[1:]], "a reshape merging axes", may=True)
            factor = int(np.prod([n for _l, n in gi[1:]]))
            result[go[0]] = lab.new(po, ("merge", gi[0][0], factor))
        elif len(gi) == 1:   # split
            divisor = int(np.prod([out_shape[j] for j in go[1:]]))
            result[go[0]] = lab.new(out_shape[go[0]], ("split", gi[0][0], divisor))
            for j in go[1:]:
                result[j] = lab.new(out_shape[j], ("whole",))
        else:
            need([l for l, _n in gi], f"a reshape of {in_shape} to {out_shape}, which "
                 f"regroups several axes,")
            for j in go:
                result[j] = lab.new(out_shape[j], ("whole",))
    return tuple(result)
