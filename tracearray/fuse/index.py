"""Index maps: how a consumer's loop indices reach a producer's elements.

An index into a node of rank r is a tuple of r ``Aff`` values, each an affine function of
the kernel's loop variables and of indices loaded from data (a gather's index arrays, read
by the same kernel: ``KIndex`` terms, with a run-time stride each). View ops (transpose, slice, squeeze, expand_dims, broadcasting)
map affine indices to affine indices; a reshape does when it only splits dimensions (or adds
and removes size-1 ones). A reshape that merges dimensions of a computed value needs div/mod:
the planner stores its operand instead, and the reshape becomes a view of that buffer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..trace.graph import Node, Shape


@dataclass(frozen=True)
class Aff:
    """``const + sum(coef * loop_var) + sum(coef * loaded_index)``: loop variables numbered
    0..n-1, and (gathers) indices loaded from data, ``KIndex`` expressions of the kernel."""
    const: int = 0
    terms: tuple[tuple[int, int], ...] = ()   # sorted (var, coef), coef != 0
    dyn: tuple[tuple[Any, int], ...] = ()     # (KIndex, coef), coef != 0, in first-use order

    @staticmethod
    def var(v: int) -> "Aff":
        return Aff(0, ((v, 1),))

    @staticmethod
    def loaded(index: Any) -> "Aff":
        return Aff(0, (), ((index, 1),))

    def scaled(self, k: int) -> "Aff":
        if k == 0:
            return ZERO
        return Aff(self.const * k, tuple((v, c * k) for v, c in self.terms),
                   tuple((x, c * k) for x, c in self.dyn))

    def plus(self, other: "Aff") -> "Aff":
        coefs = dict(self.terms)
        for v, c in other.terms:
            coefs[v] = coefs.get(v, 0) + c
        dyn: dict[int, list] = {}
        for x, c in self.dyn + other.dyn:     # keyed by identity: KIndex compares by identity
            if id(x) in dyn:
                dyn[id(x)][1] += c
            else:
                dyn[id(x)] = [x, c]
        return Aff(self.const + other.const, tuple(sorted((v, c) for v, c in coefs.items() if c)),
                   tuple((x, c) for x, c in dyn.values() if c))

    def shifted(self, k: int) -> "Aff":
        return Aff(self.const + k, self.terms, self.dyn)

    def coef(self, v: int) -> int:
        return dict(self.terms).get(v, 0)

    def __repr__(self) -> str:
        parts = [f"{c}*i{v}" if c != 1 else f"i{v}" for v, c in self.terms]
        parts += [f"{c}*[{x!r}]" if c != 1 else f"[{x!r}]" for x, c in self.dyn]
        if self.const or not parts:
            parts.append(str(self.const))
        return "+".join(parts)


ZERO = Aff()
Index = tuple[Aff, ...]


def loaded_indices(index: Index) -> tuple[Any, ...]:
    """The loaded (``KIndex``) terms of an index, each once, in first-use order: an access
    gets one run-time stride per term."""
    out: dict[int, Any] = {}
    for a in index:
        for x, _c in a.dyn:
            out.setdefault(id(x), x)
    return tuple(out.values())


class NotAffine(Exception):
    """Raised when a reshape cannot be expressed as an affine index map."""

    def __init__(self, node: Node):
        super().__init__(f"reshape {node.args[0].shape} -> {node.shape} is not an affine view")
        self.node = node


def broadcast_index(idx: Index, out_shape: Shape, arg_shape: Shape) -> Index:
    """NumPy broadcasting: right-align; size-1 dims of the operand read index 0."""
    if arg_shape == out_shape:   # (most operands: planning walks every one)
        return idx
    lead = len(out_shape) - len(arg_shape)
    return tuple(ZERO if s == 1 and out_shape[lead + d] != 1 else idx[lead + d]
                 for d, s in enumerate(arg_shape))


def producer_index(node: Node, idx: Index) -> Index:
    """Index into ``node.args[0]`` for a view op ``node`` read at ``idx``."""
    op, src = node.op, node.args[0]
    if op == "transpose":
        perm = node.attr("perm")
        out: list[Aff] = [ZERO] * len(perm)
        for d, p in enumerate(perm):
            out[p] = idx[d]
        return tuple(out)
    if op == "slice":
        return tuple(i.scaled(step).shifted(start)
                     for i, (start, _stop, step) in zip(idx, node.attr("slices")))
    if op == "squeeze":
        axes = node.attr("axes")
        it = iter(idx)
        return tuple(ZERO if d in axes else next(it) for d in range(src.ndim))
    if op == "expand_dims":
        axes = node.attr("axes")
        return tuple(i for d, i in enumerate(idx) if d not in axes)
    if op == "broadcast_to":
        return broadcast_index(idx, node.shape, src.shape)
    if op == "reshape":
        return _reshape_index(node, idx)
    if op == "diagonal":
        # x.diagonal(off, a1, a2)[..., k] = x[..., k (+ max(-off, 0)) at a1, k + max(off, 0) at a2]
        off, a1, a2 = node.attr("offset"), node.attr("axis1"), node.attr("axis2")
        rest = iter(idx[:-1])
        k = idx[-1]
        out = []
        for d in range(src.ndim):
            if d == a1:
                out.append(k.shifted(max(-off, 0)))
            elif d == a2:
                out.append(k.shifted(max(off, 0)))
            else:
                out.append(next(rest))
        return tuple(out)
    if op == "sliding_window":
        # windows[..., i, ..., j] = x[..., i + j, ...]
        axis = node.attr("axis")
        return tuple(i.plus(idx[-1]) if d == axis else i for d, i in enumerate(idx[:-1]))
    raise AssertionError(f"not a view op: {op}")


def _reshape_index(node: Node, idx: Index) -> Index:
    """Reshape as an index map. Dimensions are matched in groups of equal element count; a
    group that splits one source dimension into several is affine (the source index is the
    row-major linearisation of the group), a group that merges several source dimensions
    into one needs div/mod and is refused. Size-1 dimensions always read index 0."""
    src_shape, dst_shape = node.args[0].shape, node.shape
    if 0 in src_shape:
        # No elements: the grouping by element counts below cannot match 0-sized dims (it
        # ran off the end: IndexError). Refused, so the planner stores the (empty) operand
        # and the reshape becomes a view of that buffer.
        raise NotAffine(node)
    src = [d for d, s in enumerate(src_shape) if s != 1]
    dst = [d for d, s in enumerate(dst_shape) if s != 1]
    out = [ZERO] * len(src_shape)
    i = j = 0
    while i < len(src) and j < len(dst):
        gs, gd = [src[i]], [dst[j]]
        ps, pd = src_shape[src[i]], dst_shape[dst[j]]
        while ps != pd:
            if ps < pd:
                i += 1
                gs.append(src[i])
                ps *= src_shape[src[i]]
            else:
                j += 1
                gd.append(dst[j])
                pd *= dst_shape[dst[j]]
        if len(gs) > 1:
            raise NotAffine(node)
        lin, stride = ZERO, 1
        for d in reversed(gd):
            lin = lin.plus(idx[d].scaled(stride))
            stride *= dst_shape[d]
        out[gs[0]] = lin
        i += 1
        j += 1
    return tuple(out)


def loop_index(n: int) -> Index:
    return tuple(Aff.var(v) for v in range(n))
