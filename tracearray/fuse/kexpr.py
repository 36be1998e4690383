"""The body of a kernel: scalar expressions over the kernel's loop indices.

``Walker`` turns graph nodes into ``KExpr`` DAGs for one kernel. Elementwise ops become
``KOp``s; view ops vanish into index arithmetic; values stored by other kernels (and inputs,
and array constants) become ``KLoad``s through an ``Access`` (a buffer, the chain of view ops
applied to it, and an affine index); scalar constants and sizes become ``KParam``s (run-time
kernel arguments, so kernels do not depend on their values); reductions computed by the same
kernel become ``KRed``s, legal only at the row the kernel is working on.

The planner runs the walker to test whether a node may join a kernel (``NotFusable`` says
why not); the tiler keeps the final DAGs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

from ..trace.graph import Node
from ..ops import OPS, Kind
from .index import ZERO, Aff, Index, NotAffine, broadcast_index, loaded_indices, producer_index


class NotFusable(Exception):
    """``node`` cannot be computed inside the kernel; ``store`` names a node whose storing
    (materialisation) would make it fusable, when there is one."""

    def __init__(self, reason: str, store: Node | None = None):
        super().__init__(reason)
        self.reason = reason
        self.store = store


@dataclass(frozen=True)
class Access:
    """A load from a stored array: ``buffer`` seen through the view ops ``chain`` (bottom-up;
    the last one's shape is what ``index`` indexes) at an affine ``index``."""
    buffer: Node
    chain: tuple[Node, ...]
    index: Index

    @property
    def top(self) -> Node:
        return self.chain[-1] if self.chain else self.buffer


@dataclass(frozen=True, eq=False)
class KLoad:
    access: int           # position in KernelBody.accesses
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class KParam:
    param: int            # position in KernelBody.params
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class KOp:
    op: str
    args: tuple["KExpr", ...]
    in_dtypes: tuple[np.dtype, ...]
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class KRed:
    reduction: int        # position in the kernel's reductions (its phase)
    dtype: np.dtype


@dataclass(frozen=True, eq=False)
class KNested:
    """A small reduction computed inline where it is used: ``op`` of ``expr`` over the extra
    loop variables ``vars`` (numbered after the kernel's space dimensions)."""
    op: str
    expr: "KExpr"
    vars: tuple[int, ...]
    in_dtype: np.dtype
    dtype: np.dtype


@dataclass(frozen=True, eq=False, repr=False)
class KIndex:
    """An index loaded from data (a gather's index array): the integer ``expr`` made a
    position along an axis of ``bound`` elements (a run-time parameter). ``mode``: 'raise'
    wraps negative indices once and records an out-of-range one in the kernel's error flag as
    check ``check`` (then reads position 0, so no load leaves the array); 'wrap' and 'clip'
    are np.take's modes; 'valid' is an index known to be in range at trace time."""
    expr: "KExpr"
    bound: KParam
    mode: str
    check: int = -1          # position in KernelBody.checks when mode == 'raise'
    dtype: np.dtype = np.dtype(np.int64)

    def __repr__(self) -> str:
        # not the expression: a bisection's index reads earlier ones, and printing the DAG
        # as a tree doubles with every step (explain() and debug output hung)
        return f"loaded<{self.mode}>"


KExpr = Union[KLoad, KParam, KOp, KRed, KNested, KIndex]


def _index_terms(e: KExpr, body: "KernelBody") -> set[int]:
    """ids of the KIndex terms that ``e`` reads (in its operands and load indices)."""
    out: set[int] = set()
    stack, seen = [e], set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, KIndex):
            out.add(id(n))
            stack.append(n.expr)
        elif isinstance(n, KOp):
            stack.extend(n.args)
        elif isinstance(n, KNested):
            stack.append(n.expr)
        elif isinstance(n, KLoad):
            stack.extend(loaded_indices(body.accesses[n.access].index))
    return out


@dataclass(frozen=True)
class IndexCheck:
    """What an out-of-range index of a gather reports: NumPy's words (``message`` with
    ``{}`` for the index) at the user's line (the gather node's location)."""
    node: Node           # the gather
    message: str


@dataclass
class KernelBody:
    """Expressions of one kernel plus what they read."""
    accesses: list[Access] = field(default_factory=list)
    params: list[Node] = field(default_factory=list)     # scalar constant / size nodes
    space_rank: int = 0
    nested_extents: list[int] = field(default_factory=list)   # extent of each extra loop var
    checks: list[IndexCheck] = field(default_factory=list)    # bounds checks of gathers
    # A scatter kernel's store position in its target (loaded ``KIndex`` terms along the
    # indexed axes, loop variables along the others); None for other kernels.
    scatter_index: Index | None = None
    _access_ids: dict[Access, int] = field(default_factory=dict)
    _param_ids: dict[Node, int] = field(default_factory=dict)

    def access(self, acc: Access) -> int:
        if acc not in self._access_ids:
            self._access_ids[acc] = len(self.accesses)
            self.accesses.append(acc)
        return self._access_ids[acc]

    def param(self, node: Node) -> int:
        if node not in self._param_ids:
            self._param_ids[node] = len(self.params)
            self.params.append(node)
        return self._param_ids[node]

    def check(self, check: IndexCheck) -> int:
        if check not in self.checks:
            self.checks.append(check)
        return self.checks.index(check)

    def new_var(self, extent: int) -> int:
        self.nested_extents.append(extent)
        return self.space_rank + len(self.nested_extents) - 1

    def copy(self) -> "KernelBody":
        """An independent copy (a walk continued from it leaves this one as it was)."""
        return KernelBody(list(self.accesses), list(self.params), self.space_rank,
                          list(self.nested_extents), list(self.checks), self.scatter_index,
                          dict(self._access_ids), dict(self._param_ids))


_SCALAR_SOURCES = frozenset({"constant", "size"})


def is_scalar_source(node: Node) -> bool:
    return node.op in _SCALAR_SOURCES and not node.shape


# An inline value computed at more distinct indices of one kernel than this is stored
# (``Walker._count_recomputation``): a 3 x 3 stencil of an expression still fuses.
MAX_RECOMPUTED_AT = 9


class Walker:
    """Builds the expressions of one kernel.

    ``stored``: nodes available in memory (inputs, array constants, outputs of kernels that run
    before this one). ``inline_roots``: map outputs computed by this kernel, with the index at
    which the kernel computes them; reading them elsewhere would need another kernel.
    ``reductions``: reductions computed by this kernel, with the index of the current row.
    """

    def __init__(self, body: KernelBody, stored: set[Node], inline_roots: dict[Node, Index],
                 reductions: dict[Node, tuple[int, Index]], reductions_readable: bool = True,
                 planned: set[Node] | frozenset = frozenset(), space: tuple[int, ...] = ()):
        self.body = body  # (body.space_rank must be set: nested reductions number vars after it)
        self.space = space
        self.stored = stored
        # Every node the plan keeps in memory, including outputs of *later* kernels.
        self.planned = planned
        self.inline_roots = inline_roots
        self.reductions = reductions
        self.reductions_readable = reductions_readable
        self.memo: dict[tuple[Node, Index], KExpr] = {}
        # the distinct indices at which each elementwise or gather node is computed
        self.computed_at: dict[Node, set[Index]] = {}

    def fork(self, stored: set[Node]) -> "Walker":
        """A copy of this walker, reading ``stored``, whose walks leave this one (and its
        body) as they were: the planner continues a kernel's last walk with one more root
        instead of walking the kernel again (``plan._try``)."""
        other = Walker(self.body.copy(), stored, dict(self.inline_roots), dict(self.reductions),
                       self.reductions_readable, self.planned, self.space)
        other.memo = dict(self.memo)
        other.computed_at = {n: set(at) for n, at in self.computed_at.items()}
        return other

    def expr(self, node: Node, idx: Index) -> KExpr:
        key = (node, idx)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._expr(node, idx)
        return hit

    def _expr(self, node: Node, idx: Index) -> KExpr:
        if node in self.reductions:
            phase, row = self.reductions[node]
            if not self.reductions_readable:
                raise NotFusable(f"{node.op} over all elements is not known until every "
                                 f"thread has finished: it cannot be used in the same kernel")
            if idx != row:
                raise NotFusable(f"{node.op} result is read at another row {idx} than the one "
                                 f"being reduced {row}")
            return KRed(phase, node.dtype)
        if node in self.inline_roots and idx != self.inline_roots[node]:
            raise NotFusable(f"{node.op} output is read at a shifted index", store=None)
        if is_scalar_source(node):
            return KParam(self.body.param(node), node.dtype)
        if node in self.stored and node not in self.inline_roots:
            return self._load(node, (), idx)
        if node in self.planned and node not in self.inline_roots:
            # Stored by a kernel that runs at or after this one: read it from memory (this
            # node goes after that kernel), never recompute it here. Recomputing undoes the
            # store: a reduction would become a nested loop (found by the fuzzer,
            # tests/test_fuzz_regressions.py: impossible for argmax/argmin, O(n) per element
            # for the others), and a long unrolled loop's chain, cut every MAX_INLINE_DEPTH
            # ops so that each cut is stored, would be walked back to its start, past
            # Python's recursion limit.
            raise NotFusable(f"{node.op} is computed by a later kernel", store=node)
        kind = OPS[node.op].kind
        if kind in (Kind.ELEMENTWISE, Kind.GATHER):
            self._count_recomputation(node, idx)
        if kind is Kind.MOVEMENT:
            chain = self._chain_to_buffer(node)
            if chain is not None:
                return self._load(chain[0], chain[1:], idx)
            try:
                src_idx = producer_index(node, idx)
            except NotAffine as e:
                raise NotFusable(str(e), store=node.args[0]) from None
            return self.expr(node.args[0], src_idx)
        if kind is Kind.ELEMENTWISE:
            args = tuple([self.expr(a, broadcast_index(idx, node.shape, a.shape))
                          for a in node.args])
            return KOp(node.op, args, tuple(a.dtype for a in node.args), node.dtype)
        if kind is Kind.REDUCE and node not in self.stored:
            return self._nested(node, idx)
        if kind is Kind.GATHER:
            return self._gather(node, idx)
        # reductions, scans, contractions, concatenations of other kernels are stored values
        raise NotFusable(f"{node.op} is computed by another kernel", store=node)

    def _count_recomputation(self, node: Node, idx: Index) -> None:
        """Store a value that this kernel would compute at more than MAX_RECOMPUTED_AT
        distinct indices. Each shifted read of an inline value recomputes it there, and the
        reads multiply along a chain: the time loop of a stencil (``b[1:-1] = a[:-2] + a[2:]``,
        then ``a[1:-1] = b[:-2] + b[2:]``, ...) fused into one kernel reads step t at 2t + 1
        shifts, and in two dimensions at O(t^2), a kernel body that grows as the cube of the
        number of steps (fdtd_2d's ten steps took LLVM minutes). Inductor realizes a buffer
        read more than a few times for the same reason."""
        at = self.computed_at.setdefault(node, set())
        at.add(idx)
        if len(at) > MAX_RECOMPUTED_AT:
            raise NotFusable(f"{node.op}{list(node.shape)} would be recomputed at "
                             f"{len(at)} shifted indices", store=node)

    def _gather(self, node: Node, idx: Index) -> KExpr:
        """``x[i0, i1, ...]`` at ``idx``: the index arrays are read at the broadcast part of
        ``idx`` and become loaded terms of the index into ``x``, which is computed (or loaded)
        there. A gather whose indices are checked is computed only where the kernel visits
        every one of its elements, so that every index NumPy checks is checked."""
        if node.attr("mode") == "raise" and not self._covers(node, idx):
            raise NotFusable("a gather read in part (its indices are checked where it is "
                             "computed in full)", store=node)
        x, index_args = node.args[0], node.args[1:]
        positions = self._positions(node, x, index_args, idx)
        value = self.expr(x, positions)
        if node.attr("mode") == "raise":
            checked = {id(t) for a in positions for t, _c in a.dyn if t.check >= 0}
            if checked - _index_terms(value, self.body):
                # x's value does not depend on a checked index (a broadcast scalar, np.take
                # of a 0-d value the function made): stored, it is read at that index,
                # which is then checked as NumPy checks it
                raise NotFusable("a gather of a value that ignores its checked index",
                                 store=x)
        return value

    def scatter_index(self, node: Node, idx: Index) -> Index:
        """Where a scatter kernel at ``idx`` (an index into the values' space: the shape of
        the gather with the scatter's attributes) writes into its target: the position that
        gather would read there."""
        from ..ops.indexing import scatter_parts
        x, index_args, _values = scatter_parts(node.args, node.attr("axes"))
        return self._positions(node, x, index_args, idx)

    def _positions(self, node: Node, x: Node, index_args: tuple[Node, ...] | list[Node],
                   idx: Index) -> Index:
        """The index into ``x`` of a gather (or scatter) ``node`` at ``idx``: the index arrays
        read at the broadcast part of ``idx``, made positions by the node's mode, along its
        axes; the other parts of ``idx`` along the other axes."""
        axes, mode = node.attr("axes"), node.attr("mode")
        nb = index_args[0].ndim
        start = node.attr("at")
        at = idx[start:start + nb]
        rest = iter(idx[:start] + idx[start + nb:])
        src: list[Aff] = []
        for d in range(x.ndim):
            if d not in axes:
                src.append(next(rest))
                continue
            arg = index_args[axes.index(d)]
            value = self.expr(arg, broadcast_index(at, index_args[0].shape, arg.shape))
            bound = KParam(self.body.param(_size_node(x.shape[d])), np.dtype(np.int64))
            check = self.body.check(IndexCheck(node, node.attr("messages")[axes.index(d)])) \
                if mode == "raise" else -1
            src.append(Aff.loaded(KIndex(value, bound, mode, check)))
        return tuple(src)

    def _covers(self, node: Node, idx: Index) -> bool:
        """Does the kernel, reading ``node`` at ``idx``, visit each of its elements?"""
        if 0 in node.shape:
            return True    # nothing to read (the tracer checks the indices of empty gathers)
        extents = tuple(self.space) + tuple(self.body.nested_extents)
        seen = set()
        for n, a in zip(node.shape, idx):
            if n == 1:
                continue
            if a.dyn or len(a.terms) != 1:
                return False
            v, c = a.terms[0]
            if v in seen or v >= len(extents) or extents[v] != n or \
                    not ((c, a.const) == (1, 0) or (c, a.const) == (-1, n - 1)):
                return False
            seen.add(v)
        return True

    def _nested(self, node: Node, idx: Index) -> KNested:
        """An unstored (small) reduction, recomputed where it is read: fresh loop variables
        replace its reduced axes in the index of its operand."""
        axes = node.attr("axes")
        src = node.args[0]
        src_idx = tuple(Aff.var(self.body.new_var(src.shape[d])) if d in axes else i
                        for d, i in enumerate(idx))
        inner = self.expr(src, src_idx)
        new_vars = tuple(a.terms[0][0] for d, a in enumerate(src_idx) if d in axes)
        return KNested(node.op, inner, new_vars, src.dtype, node.dtype)

    def _chain_to_buffer(self, node: Node) -> tuple[Node, ...] | None:
        """(buffer, view1, ..., node) when ``node`` is a chain of views of a stored array."""
        chain = [node]
        cur = node.args[0]
        while cur not in self.stored or cur in self.inline_roots:
            if OPS[cur.op].kind is not Kind.MOVEMENT or cur in self.reductions:
                return None
            chain.append(cur)
            cur = cur.args[0]
        chain.append(cur)
        return tuple(reversed(chain))

    def _load(self, buffer: Node, chain: tuple[Node, ...], idx: Index) -> KLoad:
        top = chain[-1] if chain else buffer
        return KLoad(self.body.access(Access(buffer, chain, idx)), top.dtype)


def _size_node(n: int) -> Node:
    from ..trace.build import size_scalar
    return size_scalar(n, np.int64)


def row_index(space: tuple[int, ...], reduce_axes: tuple[int, ...]) -> Index:
    """The index of a keepdims reduction result at the row being reduced."""
    return tuple(ZERO if d in reduce_axes or n == 1 else Aff.var(d)
                 for d, n in enumerate(space))


def space_index(space: tuple[int, ...]) -> Index:
    """Loop variable d for each space dimension (0 for size-1 dimensions)."""
    return tuple(ZERO if n == 1 else Aff.var(d) for d, n in enumerate(space))
