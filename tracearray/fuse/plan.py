"""The fusion planner: partition a graph into kernels.

1. ``choose_stores``: the nodes that must be in memory — graph outputs, reductions, scans,
   matmuls, external calls' results (``ops.external``), concatenations, multi-use
   transcendental values (recomputing them per use costs more than a store on the CPU), and
   operands that a view or an external call needs stored.
2. ``group``: in topological order, each stored node joins the most recent compatible kernel
   whose iteration space it shares and whose expressions it can read (the ``Walker`` decides),
   or starts a new kernel. Map roots join map kernels of the same shape, or reduction kernels
   as a full-space phase (softmax's ``e / s``) or a row epilogue (logsumexp's ``log(s) + m``);
   reductions join reduction kernels over the same space and axes (layernorm's mean then var).
3. ``finish``: walk every kernel once more to get its expressions and accesses, and keep in
   memory only what another kernel or the caller reads.

Everything depends on shapes only through equality of spaces, so the plan of a program is the
same at every size (except where a dimension of size 1 changes broadcasting).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import stage_error
from ..trace.graph import Graph, Node
from ..ops import OPS, TRANSCENDENTAL, Kind, call_key, result_index
from ..ops.external import EXTERNALS
from ..ops.indexing import gather_shape, scatter_parts
from .rewrite import rewrite_graph
from .index import Index
from .kexpr import (Access, KernelBody, KExpr, NotFusable, Walker, is_scalar_source, row_index,
                    space_index)


@dataclass(frozen=True)
class Store:
    """Where a kernel writes ``node``: its own buffer, or (concatenation) a slab of ``dest``
    starting at ``offset`` along ``axis``."""
    node: Node
    index: Index
    dest: Node
    axis: int = 0
    offset: int = 0


@dataclass(eq=False)
class ExternalCall:
    """One library call (``ops.external``): its operands (stored arrays or views of them)
    and, per result, the graph node that holds it (None where the graph does not use it)."""
    op: str
    operands: tuple[Node, ...]
    attrs: tuple[tuple[str, Any], ...]
    results: list[Node | None]

    @property
    def what(self) -> str:
        return EXTERNALS[self.op].what


@dataclass(eq=False)
class Kernel:
    kind: str               # "map" | "reduce" | "scan" | "matmul" | "scatter" | "external"
    space: tuple[int, ...]
    reduce_axes: tuple[int, ...] = ()
    reductions: list[Node] = field(default_factory=list)   # phases of a reduce kernel; the scan
    roots: list[Store] = field(default_factory=list)       # map outputs (full-space or row)
    body: KernelBody = field(default_factory=KernelBody)
    red_exprs: list[KExpr] = field(default_factory=list)   # input of each reduction / scan
    root_exprs: list[KExpr] = field(default_factory=list)  # value of each root
    stores: list[Store] = field(default_factory=list)      # what is written to memory
    nodes: set[Node] = field(default_factory=set)          # graph nodes computed here
    matmul: Node | None = None
    # kinds "matmul" and "external": the library call that computes the kernel's results
    call: ExternalCall | None = None
    # kind "scatter": the scatter node; its space is the values' (the gather's shape), its
    # reduce_axes the index dimensions, visited in order (body.scatter_index: where it writes)
    scatter: Node | None = None
    # the planner's last successful walk of this kernel's roots and reductions (``_try``),
    # continued when a root joins; None when the kernel must be walked again
    walked: Any = field(default=None, repr=False)
    # the descriptions of this kernel and of its re-derivations for other sizes, shared by
    # them (``tile.describe.DescriptionMemo``; set by ``templates.py``)
    descriptions: Any = field(default=None, repr=False)

    @property
    def full_rows(self) -> bool:
        """Whether threads own whole rows (non-empty kept space)."""
        return len(self.reduce_axes) < len(self.space)

    def outputs(self) -> list[Node]:
        return [s.node for s in self.stores]


@dataclass
class Plan:
    graph: Graph
    kernels: list[Kernel]
    stored: set[Node]                 # every node held in memory (inputs included)
    rejected: list[str] = field(default_factory=list)   # why-not-fused notes for explain()
    # an argument's final value (Graph.updates) -> that argument's input node, where the
    # kernel computing it may write the argument's own memory (``in_place_updates``)
    in_place: dict[Node, Node] = field(default_factory=dict)
    rewrites: list[str] = field(default_factory=list)   # the graph rewrites applied (rewrite.py)
    # every value the planner chose to store, as ``finish`` got them (``replan.py`` replays
    # the plan from them); None for a plan not made by ``plan_graph``
    planned_stores: set[Node] | None = field(default=None, repr=False)


def plan_graph(graph: Graph) -> Plan:
    """Entry point of the fuse stage: the graph's rewrites (``rewrite.py``), then which
    values are stored and which kernel computes what."""
    rewrites: list[str] = []
    graph = rewrite_graph(graph, rewrites)
    stores = choose_stores(graph)
    cuts = _bound_inline_depth(graph, stores)
    for _ in range(10 * len(stores) + 10):
        try:
            found: set[Node] = set()
            kernels, notes = group(graph, stores, cuts, found)
            if found:
                continue   # (stored now: the next pass plans with them from the start)
            plan = finish(graph, kernels, stores, notes)
            plan.rewrites = rewrites
            plan.planned_stores = set(stores)
            return plan
        except NotFusable as e:
            if e.store is None or e.store in stores:
                raise stage_error("planning", [e.store] if e.store is not None else [],
                                  AssertionError(f"no kernel can compute it: {e}"),
                                  graph.locations) from None
            stores.add(e.store)
    raise stage_error("planning", [], AssertionError("the planner did not converge"))


def choose_stores(graph: Graph) -> set[Node]:
    users = graph.users()
    stores: set[Node] = set()
    for node in graph.nodes():
        kind = OPS[node.op].kind
        if kind is Kind.SOURCE:
            if not is_scalar_source(node):
                stores.add(node)
        elif kind is Kind.REDUCE and _inline_reduction(node, users, graph):
            pass   # recomputed where it is used (a nested loop), never stored
        elif kind in (Kind.REDUCE, Kind.SCAN, Kind.CONTRACT, Kind.CONCAT, Kind.SCATTER,
                      Kind.EXTERNAL):
            stores.add(node)
        elif kind is Kind.ELEMENTWISE and len(users[node]) > 1 and (
                _has_transcendental(node, stores) or
                (len(set(users[node])) > 1 and     # (x * x reads x once)
                 _inline_ops(node, stores, SHARED_INLINE_MAX) > SHARED_INLINE_MAX)):
            stores.add(node)
    stores.update(o for o in graph.outputs if not is_scalar_source(o))
    for node in graph.nodes():
        if OPS[node.op].kind in (Kind.CONTRACT, Kind.EXTERNAL):
            for a in node.args:   # a library call needs real arrays (views of buffers are fine)
                if not _is_view_of(a, stores):
                    stores.add(a)
    return stores


# An expression computed inline is at most this many ops deep: a deeper one is stored where
# it reaches the bound. Long chains come from unrolled Python loops (``for i in range(n):
# out[i] = ...`` nests one select per write); inline, each element would recompute the whole
# chain, and the kernel walker's recursion would grow with it. Each such store starts a
# kernel of its own (``group``), so that planning a long chain stays linear in its length.
MAX_INLINE_DEPTH = 48
def _bound_inline_depth(graph: Graph, stores: set[Node]) -> set[Node]:
    """Store every elementwise or gather node whose inline expression would be deeper than
    MAX_INLINE_DEPTH (added to ``stores``); returns those cuts."""
    cuts: set[Node] = set()
    depth: dict[Node, int] = {}
    for node in graph.nodes():
        if node in stores or not node.args:
            depth[node] = 0
            continue
        d = 1 + max(depth[a] for a in node.args)
        if d > MAX_INLINE_DEPTH and OPS[node.op].kind in (Kind.ELEMENTWISE, Kind.GATHER):
            stores.add(node)
            cuts.add(node)
            d = 0
        depth[node] = d
    return cuts


# A reduction over at most this many elements per result, read by one consumer that reduces
# further, is computed inside that consumer (pairwise distances: min_j sum_d (x_id - y_jd)^2).
NESTED_REDUCTION_MAX = 16


def _inline_reduction(node: Node, users: dict[Node, list[Node]], graph: Graph) -> bool:
    if OPS[node.op].reducer.index is not None or node in graph.outputs:
        return False
    extent = 1
    for a in node.attr("axes"):
        extent *= node.args[0].shape[a]
    if extent > NESTED_REDUCTION_MAX or len(users[node]) != 1:
        return False
    # Follow single-use elementwise/view consumers: the chain must end in a reduction.
    user = users[node][0]
    while OPS[user.op].kind in (Kind.ELEMENTWISE, Kind.MOVEMENT) and len(users[user]) == 1 \
            and user not in graph.outputs:
        user = users[user][0]
    return OPS[user.op].kind is Kind.REDUCE


# A value read by several consumers is stored when computing it inline takes more than this
# many ops: each consumer (each kernel) would compute it again. In an unrolled time loop
# (``p = p + dt * v`` read by the next step's pairwise differences and update) the inline
# expression of step t holds every step before it, so inline work and kernel size grew with
# t (an n-body loop of 50 steps ran 4x slower than NumPy and compiled 61 distinct kernels).
# 8 leaves the 13 benchmark workloads' plans as they were (6 would store black_scholes' and
# moments' shared terms) and keeps such loops' kernels to a few ops a step.
SHARED_INLINE_MAX = 8


def _inline_ops(node: Node, stores: set[Node], limit: int) -> int:
    """The ops of ``node``'s inline expression (up to stored values) on arrays of about its
    size, counted up to ``limit`` + 1: arithmetic on values it broadcasts, much smaller
    (a variance's combination of sums, broadcast to every element), is left out."""
    stack, seen, count = [node], set(), 0
    while stack and count <= limit:
        n = stack.pop()
        if n in seen or n in stores or not n.args:
            continue
        seen.add(n)
        count += n.size * SMALL_OPERAND_RATIO >= node.size
        stack.extend(n.args)
    return count


# (an operand this many times smaller than the value it feeds is a broadcast one)
SMALL_OPERAND_RATIO = 64


def _has_transcendental(node: Node, stores: set[Node]) -> bool:
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op in TRANSCENDENTAL:
            return True
        stack.extend(a for a in n.args if a not in stores)
    return False


def _is_view_of(node: Node, stores: set[Node]) -> bool:
    while node not in stores:
        if OPS[node.op].kind is not Kind.MOVEMENT:
            return False
        node = node.args[0]
    return True


def group(graph: Graph, stores: set[Node], cuts: set[Node] | frozenset = frozenset(),
          found: set[Node] | None = None) -> tuple[list[Kernel], list[str]]:
    """Every stored node placed in a kernel, in the graph's order (a root joins the last
    kernel that can compute it inline, else starts one). Where a placement needs a value
    stored that is not (NotFusable with ``store``: a value recomputed at too many shifted
    indices, a view no index map reaches), a pass with ``found`` adds it to ``stores`` and
    ``found``, gives it a kernel of its own and goes on, so that one pass finds every such
    value (``plan_graph`` then plans again from the start with them; the rest of that pass
    is not used). Without ``found`` the first one is raised: a long stencil loop needing
    dozens of them made dozens of whole passes."""
    if found is None:
        return _group(graph, stores, cuts, None)
    while True:
        try:
            return _group(graph, stores, cuts, found)
        except _Found:
            continue


class _Found(Exception):
    """A value found to need storing that cannot be placed where it was found."""


def _group(graph: Graph, stores: set[Node], cuts: set[Node] | frozenset,
           found: set[Node] | None) -> tuple[list[Kernel], list[str]]:
    kernels: list[Kernel] = []
    produced_by: dict[Node, int] = {}
    notes: list[str] = []
    calls: dict[tuple, int] = {}   # an external call's key -> its kernel
    # The first kernel that can compute each node inline: the last of the kernels storing
    # what it reads. An earlier kernel would have to recompute a stored value, which the
    # walker refuses, so placing a node never tries one (a long chain of stored steps made
    # every placement try every kernel before it: planning quadratic in the chain's length).
    first: dict[Node, int] = {}
    for node in graph.nodes():
        first[node] = max((produced_by[a] if a in produced_by else first[a] for a in node.args),
                          default=0)
        if node not in stores or OPS[node.op].kind is Kind.SOURCE:
            continue
        if found is None:
            produced_by[node] = _place(node, kernels, produced_by, stores, notes,
                                       first[node], cuts, calls)
            continue
        while True:
            try:
                produced_by[node] = _place(node, kernels, produced_by, stores, notes,
                                           first[node], cuts, calls)
                break
            except NotFusable as e:
                s = e.store
                if s is None or s in stores or s is node or \
                        OPS[s.op].kind not in (Kind.ELEMENTWISE, Kind.MOVEMENT, Kind.GATHER):
                    raise
                found.add(s)
                stores.add(s)
                kernel = Kernel("map", s.shape, roots=[Store(s, space_index(s.shape), s)])
                try:
                    _try(kernel, stores, produced_by, len(kernels))
                except NotFusable as inner:
                    if inner.store is None or inner.store in stores:
                        raise
                    found.add(inner.store)
                    stores.add(inner.store)
                    raise _Found() from None   # (a pass with both stored from the start)
                produced_by[s] = _new_kernel(kernels, kernel)
    return kernels, notes


def _place(node: Node, kernels: list[Kernel], produced_by: dict[Node, int],
           stores: set[Node], notes: list[str], first: int, cuts: set[Node] | frozenset,
           calls: dict[tuple, int]) -> int:
    """The kernel that computes ``node`` (a stored value): one it joins or a new one."""
    kind = OPS[node.op].kind
    if kind is Kind.REDUCE:
        k = _place_reduction(node, kernels, produced_by, stores, notes, first)
    elif node in cuts:   # the end of a long inline chain: a kernel of its own
        kernel = Kernel("map", node.shape, roots=[Store(node, space_index(node.shape), node)])
        _try(kernel, stores, produced_by, len(kernels))
        k = _new_kernel(kernels, kernel)
    elif kind in (Kind.ELEMENTWISE, Kind.MOVEMENT, Kind.GATHER):
        k = _place_root(node, kernels, produced_by, stores, notes, first)
    elif kind is Kind.SCAN:
        k = _new_kernel(kernels, Kernel("scan", node.shape, (node.attr("axis"),),
                                        reductions=[node]))
    elif kind is Kind.CONTRACT:
        call = ExternalCall(node.op, node.args, (), [node])
        k = _new_kernel(kernels, Kernel("matmul", node.shape, matmul=node, call=call))
    elif kind is Kind.EXTERNAL:
        k = _place_external(node, kernels, calls)
    elif kind is Kind.SCATTER:
        k = _place_scatter(node, kernels, produced_by, stores)
    else:  # CONCAT: one copy kernel per operand, each writing a slab of the result
        k = _place_concat(node, kernels, produced_by, stores)
    return k


def _new_kernel(kernels: list[Kernel], kernel: Kernel) -> int:
    kernels.append(kernel)
    return len(kernels) - 1


# Whether ``_try`` continues a kernel's last walk when a root joins it (else every try walks
# the whole kernel again: a kernel of r roots was walked r times over, most of black_scholes's
# planning; tests/test_cpu_fusion.py checks both give the same plans).
INCREMENTAL = True


class _StoredBefore:
    """The values kernel ``k`` reads from memory: inputs, and what the kernels before it
    store (the walker asks only ``node in``; a set of them made for each try made planning
    a long loop's thousands of kernels quadratic)."""
    __slots__ = ("stores", "produced_by", "k")

    def __init__(self, stores: set[Node], produced_by: dict[Node, int], k: int):
        self.stores, self.produced_by, self.k = stores, produced_by, k

    def __contains__(self, n: Node) -> bool:
        return n in self.stores and (self.produced_by.get(n, -1) < self.k
                                     or OPS[n.op].kind is Kind.SOURCE)


def _try(kernel: Kernel, stores: set[Node], produced_by: dict[Node, int], k: int,
         extra_root: Store | None = None, extra_red: Node | None = None) -> None:
    """Raise NotFusable unless the kernel, extended by a root or a reduction, can be built
    from what is stored before it runs.

    A root joining a kernel that was walked before is walked alone, continuing a copy of
    the last walk (its memo, recomputation counts and body): the same answer as walking the
    whole kernel again, since nothing the earlier walk read can have changed. Its roots and
    reductions read only nodes before them in the graph's order, which were placed (stored
    or not, and by which kernel) before they were; the new root, later in that order, is no
    operand of theirs; and a fresh walk visits the roots last, in order, after the reductions,
    as the continued walk does."""
    earlier = _StoredBefore(stores, produced_by, k)
    last = kernel.walked
    if INCREMENTAL and extra_red is None and extra_root is not None and last is not None:
        walker = last.fork(earlier)
        if extra_root.dest is extra_root.node:
            walker.inline_roots[extra_root.node] = extra_root.index
        walker.expr(extra_root.node, extra_root.index)
        kernel.walked = walker
        return
    roots = kernel.roots + ([extra_root] if extra_root else [])
    reds = kernel.reductions + ([extra_red] if extra_red else [])
    walker = _walk_kernel(kernel, roots, reds, earlier, KernelBody(), stores)[2]
    kernel.walked = walker if kernel.scatter is None else None


def _walk_kernel(kernel: Kernel, roots: list[Store], reds: list[Node], stored: set[Node],
                 body: KernelBody, planned: set[Node] | frozenset = frozenset()
                 ) -> tuple[list[KExpr], list[KExpr], Walker]:
    row = row_index(kernel.space, kernel.reduce_axes)
    body.space_rank = len(kernel.space)
    walker = Walker(body, stored, {r.node: r.index for r in roots if r.dest is r.node},
                    {r: (i, row) for i, r in enumerate(reds)},
                    reductions_readable=kernel.full_rows, planned=planned,
                    space=kernel.space)
    if kernel.scatter is not None:
        # the values (if any) at each point of the space, and where each goes
        body.scatter_index = walker.scatter_index(kernel.scatter, space_index(kernel.space))
        values = scatter_parts(kernel.scatter.args, kernel.scatter.attr("axes"))[2]
        return [], ([walker.expr(values, space_index(kernel.space))] if values is not None
                    else []), walker
    red_exprs = []
    for i, r in enumerate(reds):
        # A reduction's input may use only the reductions of earlier phases, and only when
        # threads own whole rows (a full reduction is complete only after all threads).
        walker.reductions = {x: (j, row) for j, x in enumerate(reds[:i])}
        walker.memo.clear()
        red_exprs.append(walker.expr(r.args[0], space_index(kernel.space)))
    # Roots run after every reduction of their row (for full reductions: after the combine).
    walker.reductions = {x: (j, row) for j, x in enumerate(reds)}
    walker.reductions_readable = True
    walker.memo.clear()
    root_exprs = [walker.expr(r.node, r.index) for r in roots]
    return red_exprs, root_exprs, walker


def _root_index(kernel: Kernel, node: Node) -> Index | None:
    """The index at which ``kernel`` would compute ``node``: over its whole space, or, for a
    reduction kernel, at the current row (keepdims shape or the kept dims only)."""
    if node.shape == kernel.space and (kernel.kind == "map" or kernel.full_rows):
        return space_index(kernel.space)
    if kernel.kind != "reduce":
        return None
    row = row_index(kernel.space, kernel.reduce_axes)
    keep = tuple(1 if d in kernel.reduce_axes else n for d, n in enumerate(kernel.space))
    if node.shape == keep:
        return row
    kept = tuple(n for d, n in enumerate(kernel.space) if d not in kernel.reduce_axes)
    if node.shape == kept:
        return tuple(i for d, i in enumerate(row) if d not in kernel.reduce_axes)
    return None


def _place_root(node: Node, kernels: list[Kernel], produced_by: dict[Node, int],
                stores: set[Node], notes: list[str], first: int = 0) -> int:
    for k in range(len(kernels) - 1, first - 1, -1):
        kernel = kernels[k]
        if kernel.kind not in ("map", "reduce") or len(kernel.roots) >= MAX_ROOTS_PER_KERNEL:
            continue
        idx = _root_index(kernel, node)
        if idx is None:
            continue
        store = Store(node, idx, node)
        try:
            _try(kernel, stores, produced_by, k, extra_root=store)
        except NotFusable as e:
            if e.store is not None and e.store not in stores:
                raise
            notes.append(f"{node.op}{list(node.shape)} not fused into kernel {k}: {e.reason}")
            continue
        kernel.roots.append(store)
        return k
    kernel = Kernel("map", node.shape, roots=[Store(node, space_index(node.shape), node)])
    _try(kernel, stores, produced_by, len(kernels))
    return _new_kernel(kernels, kernel)


# Reductions one kernel computes, at most: a Python loop with a reduction per step
# (``out[t] = rets[t].sum()``) made one kernel of every step's reduction, whose body LLVM
# optimised in time growing faster than its length (64 steps 3.8 s, 256 steps 48 s).
MAX_REDUCTIONS_PER_KERNEL = 16
# Stored values one kernel computes, at most: a Python loop over scalars (an IIR filter, an
# ODE step per sample) stored two values a step into one kernel, which LLVM optimised in
# time that jumped past a few hundred (126 steps 1.2 s, 127 steps more than 60 s).
MAX_ROOTS_PER_KERNEL = 64


def _place_reduction(node: Node, kernels: list[Kernel], produced_by: dict[Node, int],
                     stores: set[Node], notes: list[str], first: int = 0) -> int:
    space, axes = node.args[0].shape, node.attr("axes")
    for k in range(len(kernels) - 1, first - 1, -1):
        kernel = kernels[k]
        if kernel.kind != "reduce" or kernel.space != space or kernel.reduce_axes != axes \
                or len(kernel.reductions) >= MAX_REDUCTIONS_PER_KERNEL:
            continue
        try:
            _try(kernel, stores, produced_by, k, extra_red=node)
        except NotFusable as e:
            if e.store is not None and e.store not in stores:
                raise
            notes.append(f"{node.op}{list(node.shape)} not fused into kernel {k}: {e.reason}")
            continue
        kernel.reductions.append(node)
        return k
    kernel = Kernel("reduce", space, axes, reductions=[node])
    _try(kernel, stores, produced_by, len(kernels))
    return _new_kernel(kernels, kernel)


def _place_scatter(node: Node, kernels: list[Kernel], produced_by: dict[Node, int],
                   stores: set[Node]) -> int:
    """Two kernels: the target copied into the scatter's buffer (a map), then the scatter
    kernel writing (or combining) the values at their positions, in NumPy's order."""
    target = node.args[0]
    copy = Kernel("map", target.shape, roots=[Store(target, space_index(target.shape), node)])
    _try(copy, stores, produced_by, len(kernels))
    _new_kernel(kernels, copy)
    axes = node.attr("axes")
    index_args = scatter_parts(node.args, axes)[1]
    space = gather_shape([target.shape, index_args[0].shape], dict(node.attrs))
    at, nb = node.attr("at"), index_args[0].ndim
    ordered = () if node.attr("unique") else tuple(range(at, at + nb))
    kernel = Kernel("scatter", space, ordered, scatter=node)
    _try(kernel, stores, produced_by, len(kernels))
    return _new_kernel(kernels, kernel)


def _place_external(node: Node, kernels: list[Kernel], calls: dict[tuple, int]) -> int:
    """The kernel of the call ``node`` is a result of: every result of one call is one
    kernel (the call runs once)."""
    key = call_key(node)
    k = calls.get(key)
    if k is None:
        n_results = len(EXTERNALS[node.op].results(
            [a.shape for a in node.args], [a.dtype for a in node.args], dict(node.attrs)))
        call = ExternalCall(node.op, node.args, key[2], [None] * n_results)
        k = calls[key] = _new_kernel(kernels, Kernel("external", node.shape, call=call))
    kernels[k].call.results[result_index(node)] = node
    return k


def _place_concat(node: Node, kernels: list[Kernel], produced_by: dict[Node, int],
                  stores: set[Node]) -> int:
    axis = node.attr("axis")
    offset = 0
    for part in node.args:
        store = Store(part, space_index(part.shape), node, axis, offset)
        kernel = Kernel("map", part.shape, roots=[store])
        _try(kernel, stores, produced_by, len(kernels))
        _new_kernel(kernels, kernel)
        offset += part.shape[axis]
    return len(kernels) - 1


def finish(graph: Graph, kernels: list[Kernel], stores: set[Node], notes: list[str]) -> Plan:
    """Final expressions of each kernel; keep in memory only what is read elsewhere."""
    produced_by = {}
    for k, kernel in enumerate(kernels):
        for n in kernel.reductions + [r.node for r in kernel.roots if r.dest is r.node]:
            produced_by[n] = k
        if kernel.call is not None:
            for n in kernel.call.results:
                if n is not None:
                    produced_by[n] = k
        if kernel.scatter is not None:
            produced_by[kernel.scatter] = k
        for r in kernel.roots:
            if r.dest is not r.node:
                produced_by[r.dest] = k
    needed: set[Node] = {o for o in graph.outputs if not is_scalar_source(o)}
    for k, kernel in enumerate(kernels):
        if kernel.call is not None:
            for a in kernel.call.operands:
                needed.add(view_chain(a, stores)[0])
            continue
        earlier = _StoredBefore(stores, produced_by, k)
        kernel.body = KernelBody()
        kernel.red_exprs, kernel.root_exprs, _ = _walk_kernel(
            kernel, kernel.roots, kernel.reductions, earlier, kernel.body, stores)
        kernel.walked = None   # (the planner's; not kept with the plan)
        needed.update(acc.buffer for acc in kernel.body.accesses)
    for kernel in kernels:
        if kernel.call is not None:
            kernel.stores = [Store(n, (), n) for n in kernel.call.results if n is not None]
            kernel.nodes = {s.node for s in kernel.stores}
            continue
        kernel.stores = [r for r in kernel.roots if r.dest is not r.node or r.node in needed]
        row = row_index(kernel.space, kernel.reduce_axes)
        kernel.stores += [Store(r, row, r) for r in kernel.reductions
                          if r in needed and kernel.kind == "reduce"]
        if kernel.kind == "scan":
            kernel.stores = [Store(kernel.reductions[0], space_index(kernel.space),
                                   kernel.reductions[0])]
        if kernel.kind == "scatter":
            kernel.stores = [Store(kernel.scatter, kernel.body.scatter_index, kernel.scatter)]
        kernel.nodes = _computed_nodes(kernel, stores)
    stored = {n for n in stores if n in needed or OPS[n.op].kind is Kind.SOURCE}
    return Plan(graph, kernels, stored, notes, in_place_updates(graph, kernels))


def in_place_updates(graph: Graph, kernels: list[Kernel]) -> dict[Node, Node]:
    """The argument updates whose kernel may write the argument's memory itself (no
    temporary, no copy back): the value is stored by one map kernel over the argument's
    whole shape, which reads that argument only at the element it writes (``x += 1``,
    ``y += a * x``, ``x[x < 0] = 0``), and no later kernel reads the argument. A stencil
    (``u[1:-1] = u[:-2] + u[2:]``) reads its neighbours: NumPy computes the right-hand side
    first, so it keeps its temporary."""
    out: dict[Node, Node] = {}
    for i, value in zip(graph.updates, graph.update_values):
        arg = graph.inputs[i]
        if value in graph.results or value in out or value.shape != arg.shape:
            continue
        writers = [k for k, kern in enumerate(kernels)
                   if any(st.dest is value for st in kern.stores)]
        if len(writers) != 1:
            continue
        k = writers[0]
        kern = kernels[k]
        (store,) = [st for st in kern.stores if st.dest is value] or [None]
        if kern.kind != "map" or store is None or store.node is not value or \
                kern.space != value.shape or store.index != space_index(value.shape):
            continue
        if any(a.buffer is arg and (a.chain or a.index != store.index)
               for a in kern.body.accesses):
            continue
        # another value the kernel stores may read the argument after this store wrote its
        # element (``old = x.copy(); x[...] = 0; return x - old``: one kernel)
        if len(kern.stores) > 1 and any(a.buffer is arg for a in kern.body.accesses):
            continue
        # a result or another update that is the argument's value, or a view of it, is
        # returned as the argument's memory
        if any(o is not value and _movement_base(o) is arg for o in graph.outputs):
            continue
        if any(a.buffer is arg for later in kernels[k + 1:] for a in later.body.accesses) or \
                any(later.call is not None and any(_movement_base(a) is arg
                                                   for a in later.call.operands)
                    for later in kernels[k + 1:]):
            continue
        out[value] = arg
    return out


def _movement_base(node: Node) -> Node:
    """The node a chain of views starts from."""
    while OPS[node.op].kind is Kind.MOVEMENT:
        node = node.args[0]
    return node


def view_chain(node: Node, stores: set[Node] | dict[Node, Any]) -> tuple[Node, tuple[Node, ...]]:
    """(the stored buffer ``node`` is a view of, the views from it to ``node`` bottom-up): a
    library call's operand (``stores``: the plan's stored values, or a runtime's slots)."""
    chain = []
    while node not in stores:
        chain.append(node)
        node = node.args[0]
    return node, tuple(reversed(chain))


def _computed_nodes(kernel: Kernel, stores: set[Node]) -> set[Node]:
    """Graph nodes evaluated inside the kernel (for explain)."""
    out: set[Node] = set()
    stack = [r.node for r in kernel.roots] + list(kernel.reductions)
    own = set(stack)
    if kernel.scatter is not None:
        out.add(kernel.scatter)
        stack += list(kernel.scatter.args[1:])   # the indices and values, not the target
    while stack:
        n = stack.pop()
        if n in out or (n in stores and n not in own) or OPS[n.op].kind is Kind.SOURCE:
            continue
        out.add(n)
        stack.extend(n.args)
    return out


def is_reduction(node: Node) -> bool:
    return OPS[node.op].kind is Kind.REDUCE


__all__ = ["Plan", "Kernel", "Store", "Access", "ExternalCall", "plan_graph"]
