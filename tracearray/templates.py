"""Size templates: one call's trace and plan, re-derived for other sizes of its size class.

A compiled function called with new input sizes used to trace, plan and bind again (1-3 ms
for the public workloads); its kernels were already size-generic. A ``Template`` keeps the
trace and the plan's choices of one call, and a later call whose input sizes are of the same
size class (``trace.resize.size_class``: the same ranks, dtypes, small dimensions and
equalities between larger ones) gets its graph from ``trace.resize.resize_graph`` and its plan
from ``fuse.replan.replan`` instead: about a tenth of the work, and the same nodes, hence the
same kernels and the same results.

Trust is earned once per size class: a template is made from the first size of a class whose
trace is re-derivable (``resize.resizable``), and the second size is traced and planned as
before *and* derived from the template; the template is used from then on only if the
derivation gave the very graph (interned nodes: identical nodes) and the same plan. A
mismatch would be a tracearray bug (a size hidden in an attribute or a constant, or a planner
choice depending on a size): the template is dropped, the function keeps tracing every new
size, and the miss is logged at ``TRACEARRAY_DEBUG=1`` (and by
``TRACEARRAY_EXPLAIN_CACHE_MISSES``).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from . import config
from .fuse import replan as replan_
from .fuse.plan import Plan
from .tile import TileSpec, tile_plan
from .tile.describe import DescriptionMemo
from .trace import Trace
from .trace import resize

# Templates kept per compiled function (one per size class it is called with).
MAX_TEMPLATES = 16


@dataclass(eq=False)
class Template:
    trace: Trace
    larger: tuple[int, ...]          # the larger dimensions of the sizes it was traced at
    classes: tuple                   # the size class of those sizes, globals included
    global_shapes: tuple             # shapes of the graph's inputs after the arguments'
    skeleton: replan_.Skeleton
    # per kernel: its descriptions at every size (a new size describes nothing again)
    descriptions: tuple[DescriptionMemo, ...] = ()
    verified: bool = False           # the second size of the class gave the same graph and plan

    def share_descriptions(self, plan: Plan) -> None:
        for kernel, memo in zip(plan.kernels, self.descriptions):
            kernel.descriptions = memo


class SizeTemplates:
    """A compiled function's templates, by the size class of its arguments."""

    def __init__(self) -> None:
        # None: a class whose template was dropped (its check failed) or could not be made
        self._by_key: OrderedDict[Any, Template | None] = OrderedDict()

    @staticmethod
    def key(statics: Any, shapes: Sequence[tuple[tuple[int, ...], str]]) -> Any:
        """The templates' key of a call: its static values, dtypes and arguments' size
        class (``shapes``: the trace key's (shape, dtype) per argument leaf)."""
        classes, _larger = resize.size_class([s for s, _d in shapes])
        return statics, tuple(d for _s, d in shapes), classes

    def derive(self, key: Any, shapes: Sequence[tuple[tuple[int, ...], str]]
               ) -> tuple[Trace, Plan, list[TileSpec]] | None:
        """The trace, plan and tiles for ``shapes`` from a verified template of their class,
        or None (no template, not verified yet, or the globals' sizes moved it to another
        class). The caller has checked the template trace's guards (``guards_of``)."""
        t = self._by_key.get(key)
        if t is None or not t.verified:
            return None
        derived = self._derive(t, [s for s, _d in shapes])
        if derived is not None:
            self._by_key.move_to_end(key)
        return derived

    def template_trace(self, key: Any) -> Trace | None:
        """The trace a verified template of ``key`` was made from (whose guards the caller
        checks before ``derive``)."""
        t = self._by_key.get(key)
        return t.trace if t is not None and t.verified else None

    def offer(self, key: Any, shapes: Sequence[tuple[tuple[int, ...], str]], trace: Trace,
              plan: Plan, name: str, guards_hold: Callable[[Trace], bool]) -> None:
        """A trace and plan just made for ``shapes``: the first of a re-derivable class
        becomes its template; the second checks the template (module docstring).
        ``guards_hold(trace)``: whether the globals a trace read are still what it saw (a
        template made before a global changed is replaced, not checked)."""
        old = self._by_key.get(key)
        if key not in self._by_key or (old is not None and not guards_hold(old.trace)):
            self._by_key.pop(key, None)
            self._by_key[key] = self._make(trace, plan, [s for s, _d in shapes], name)
            while len(self._by_key) > MAX_TEMPLATES:
                self._by_key.popitem(last=False)
            return
        t = self._by_key[key]
        if t is None or t.verified:
            return
        derived = self._derive(t, [s for s, _d in shapes])
        if derived is None:
            return   # (another class once the globals are counted: try the next size)
        if not _same_graph(derived[0], trace) or not replan_.same_plan(derived[1], plan):
            self._by_key[key] = None
            config.log(config.COMPILES, "%s: a graph re-derived for new sizes differs from "
                       "its trace: tracing every new size (a tracearray bug: please report "
                       "it)", name)
            if config.explain_cache_misses():
                config.explain_miss(f"{name}: the size template gave another graph or plan "
                                    f"than the trace: every new size is traced")
            return
        t.verified = True
        t.share_descriptions(plan)

    # ------------------------------------------------------------------ internals
    def _make(self, trace: Trace, plan: Plan, arg_shapes: list, name: str) -> Template | None:
        graph = trace.graph
        if trace.probe is not None:
            return None
        global_shapes = tuple(n.attr("shape") for n in graph.inputs[len(arg_shapes):])
        classes, larger = resize.size_class(list(arg_shapes) + list(global_shapes))
        why = resize.resizable(graph, trace.size_dependence, larger)
        skel = replan_.skeleton(plan) if why is None else None
        if why is None and skel is None:
            why = "its plan has kernels that are planned again at each size"
        if why is not None:
            config.log(config.COMPILES, "%s: new sizes will be traced again: %s", name, why)
            return None
        t = Template(trace, larger, classes, global_shapes, skel,
                     tuple(DescriptionMemo() for _k in plan.kernels))
        t.share_descriptions(plan)
        return t

    def _derive(self, t: Template, arg_shapes: list
                ) -> tuple[Trace, Plan, list[TileSpec]] | None:
        classes, larger = resize.size_class(list(arg_shapes) + list(t.global_shapes))
        if classes != t.classes:
            return None
        to = resize.sigma(t.larger, larger)
        new: dict = {}
        graph = resize.resize_graph(t.trace.graph, to, new)
        plan = replan_.replan(t.skeleton, graph, to, new)
        if plan is None:
            return None
        t.share_descriptions(plan)
        # (everything the template's trace checks at a call holds for the new sizes too:
        # its guards, captured arrays, the reads of the state it reaches)
        trace = replace(t.trace, graph=graph, probe=None)
        return trace, plan, tile_plan(plan)


def _same_graph(a: Trace, b: Trace) -> bool:
    ga, gb = a.graph, b.graph
    return len(ga.outputs) == len(gb.outputs) and \
        all(x is y for x, y in zip(ga.outputs, gb.outputs)) and \
        all(x is y for x, y in zip(ga.inputs, gb.inputs)) and \
        (ga.out_tree, ga.input_names, ga.checks, ga.globals, ga.updates) == \
        (gb.out_tree, gb.input_names, gb.checks, gb.globals, gb.updates)


__all__ = ["SizeTemplates", "Template"]
