"""``explain()`` and ``as_text("plan")``: what each kernel computes, reads and writes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fuse.plan import Kernel, Plan
from .tile import TileSpec
from .trace.graph import Node, type_str
from .ops import OPS, Kind


@dataclass(frozen=True)
class KernelReport:
    """One kernel of an ``Explanation``: its position, strategy (the driver that runs it for
    these arguments: ``map``, ``map2d``, ``col``, ``full``, on the CPU ``row``, on the GPU
    ``warp_row``, ``block_row``, ``thread_row``, ``scan_tiled``, ...; the plan's ``map`` /
    ``row`` / ``full`` / ``scan`` / ``scatter`` for a kernel the runtime does not bind, such as
    a library call), iteration space, the ops it computes, the values it reads and writes
    with their bytes, the temporaries it avoids (intermediate arrays NumPy would have
    materialised), and ``launch``: the bound kernel in words (``tile.bind.BoundKernel
    .summary``: its parallel and inner extents and the chunks or grid it runs as)."""
    index: int
    strategy: str
    space: tuple[int, ...]
    ops: tuple[str, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    bytes_read: int
    bytes_written: int
    temporaries_avoided: int
    note: str = ""
    # names of the values read and written (the same name for the same array in memory
    # across kernels: an argument's name, else ``t<n>``), for ``Explanation.to_dot``
    read_values: tuple[str, ...] = ()
    written_values: tuple[str, ...] = ()
    launch: str = ""


@dataclass(frozen=True)
class Explanation:
    """What ``CompiledFunction.explain(*args)`` returns: the ``kernels`` (``KernelReport``s)
    and the fusions the planner ``rejected`` with the reason. ``bytes_read``,
    ``bytes_written`` and ``temporaries_avoided`` add up the kernels; ``str()`` is a table."""
    kernels: tuple[KernelReport, ...]
    rejected: tuple[str, ...]
    rewrites: tuple[str, ...] = ()   # the plan's graph rewrites (fuse/rewrite.py)

    @property
    def bytes_read(self) -> int:
        return sum(k.bytes_read for k in self.kernels)

    @property
    def bytes_written(self) -> int:
        return sum(k.bytes_written for k in self.kernels)

    @property
    def temporaries_avoided(self) -> int:
        return sum(k.temporaries_avoided for k in self.kernels)

    def __str__(self) -> str:
        head = f"{'#':>2}  {'kind':8} {'space':18} {'read':>10} {'written':>10} {'temps avoided':>13}  ops"
        lines = [head, "-" * len(head)]
        for k in self.kernels:
            ops = ", ".join(k.ops)
            lines.append(f"{k.index:>2}  {k.strategy:8} {str(list(k.space)):18} "
                         f"{_bytes(k.bytes_read):>10} {_bytes(k.bytes_written):>10} "
                         f"{k.temporaries_avoided:>13}  {ops}")
            if k.launch:
                lines.append(f"    runs: {k.launch}")
            if k.note:
                lines.append(f"    {k.note}")
        lines.append(f"total: {len(self.kernels)} kernel(s), {_bytes(self.bytes_read)} read, "
                     f"{_bytes(self.bytes_written)} written, "
                     f"{self.temporaries_avoided} temporaries avoided")
        for r in self.rewrites:
            lines.append(f"rewritten: {r}")
        for r in self.rejected:
            lines.append(f"not fused: {r}")
        return "\n".join(lines)

    __repr__ = __str__

    def to_dot(self) -> str:
        """The plan as a Graphviz DOT graph: kernels as boxes (strategy, space, ops, bytes,
        temporaries avoided), the arrays in memory between them as ellipses, an edge for each
        read and write. Render it with ``dot -Tsvg`` (or ``to_svg()``)."""
        lines = ["digraph plan {", "  rankdir=LR;",
                 '  node [fontname="Helvetica", fontsize=10];']
        values: dict[str, str] = {}
        for k in self.kernels:
            for name, ty in zip(k.read_values, k.reads):
                values.setdefault(name, ty)
            for name, ty in zip(k.written_values, k.writes):
                values.setdefault(name, ty)
        for name, ty in values.items():
            lines.append(f'  "{_dot(name)}" [shape=ellipse, label="{_dot(name)}\\n{_dot(ty)}"];')
        for k in self.kernels:
            label = (f"kernel {k.index}: {k.strategy} {list(k.space)}\\n"
                     f"{_dot(', '.join(k.ops))}\\n"
                     f"read {_bytes(k.bytes_read)}, written {_bytes(k.bytes_written)}, "
                     f"{k.temporaries_avoided} temporaries avoided")
            if k.launch:
                label += f"\\n{_dot(k.launch)}"
            if k.note:
                label += f"\\n{_dot(k.note)}"
            lines.append(f'  "k{k.index}" [shape=box, style=rounded, label="{label}"];')
            for name in k.read_values:
                lines.append(f'  "{_dot(name)}" -> "k{k.index}";')
            for name in k.written_values:
                lines.append(f'  "k{k.index}" -> "{_dot(name)}";')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_svg(self) -> str:
        """``to_dot()`` rendered by Graphviz's ``dot`` (which must be on PATH)."""
        import shutil
        import subprocess
        dot = shutil.which("dot")
        if dot is None:
            raise RuntimeError("Explanation.to_svg() needs Graphviz's `dot` program on PATH "
                               "(e.g. apt install graphviz); to_dot() gives the text to "
                               "render elsewhere")
        return subprocess.run([dot, "-Tsvg"], input=self.to_dot(), capture_output=True,
                              text=True, check=True).stdout


def _dot(text: str) -> str:
    """``text`` inside a DOT double-quoted string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _nbytes(node: Node) -> int:
    return node.size * node.dtype.itemsize


def _values(kernel: Kernel) -> tuple[list[Node], list[Node]]:
    """The nodes a kernel reads and writes, in the order of its report's reads and writes."""
    if kernel.call is not None:
        return list(kernel.call.operands), [n for n in kernel.call.results if n is not None]
    return [a.top for a in kernel.body.accesses], [s.node for s in kernel.stores]


def report(index: int, kernel: Kernel, spec: TileSpec) -> KernelReport:
    if kernel.call is not None:   # a library call (matmul, ops.external)
        call = kernel.call
        results = [n for n in call.results if n is not None]
        note = f"external: {call.what}"
        return KernelReport(index, kernel.kind, kernel.space, (call.op,),
                            tuple(type_str(a) for a in call.operands),
                            tuple(type_str(n) for n in results),
                            sum(_nbytes(a) for a in call.operands),
                            sum(_nbytes(n) for n in results), 0, note)
    ops = sorted({n.op for n in kernel.nodes if OPS[n.op].kind is not Kind.MOVEMENT})
    read_nodes = list(dict.fromkeys(a.top for a in kernel.body.accesses))
    stored = {s.node for s in kernel.stores}
    temps = sum(1 for n in kernel.nodes
                if n not in stored and OPS[n.op].kind in (Kind.ELEMENTWISE, Kind.REDUCE))
    return KernelReport(
        index, spec.strategy, kernel.space, tuple(ops),
        tuple(type_str(n) for n in read_nodes), tuple(type_str(s.node) for s in kernel.stores),
        sum(_nbytes(n) for n in read_nodes), sum(_nbytes(s.node) for s in kernel.stores), temps)


def explain_plan(plan: Plan, specs: list[TileSpec], notes: dict[int, str] | None = None,
                 bound: dict[int, Any] | None = None) -> Explanation:
    """``notes``: the runtime's own words for some kernels (the executable's
    ``kernel_notes()``: which matmuls a library runs, which map kernels run as a matmul's
    epilogue), in place of the plan's; ``bound``: the executable's ``bound_kernels()``
    (``tile.bind.BoundKernel`` by kernel position), whose driver and launch are reported."""
    from dataclasses import replace
    reports = []
    names: dict[Node, str] = {n: name for n, name in zip(plan.graph.inputs,
                                                          plan.graph.input_names)}

    def name_of(node: Node) -> str:
        if node not in names:
            names[node] = f"t{len(names) - len(plan.graph.inputs)}"
        return names[node]
    for i, (k, s) in enumerate(zip(plan.kernels, specs)):
        r = report(i, k, s)
        reads, writes = _values(k)
        r = replace(r, read_values=tuple(name_of(n) for n in reads),
                    written_values=tuple(name_of(n) for n in writes))
        arg_names = [plan.graph.input_names[plan.graph.inputs.index(plan.in_place[st.dest])]
                     for st in k.stores if st.dest in plan.in_place]
        if arg_names:
            r = replace(r, note=f"writes the argument {', '.join(map(repr, arg_names))} in place "
                               f"(no temporary, no copy back)")
        if notes and i in notes:
            r = replace(r, note=notes[i])
        if bound and i in bound:
            r = replace(r, strategy=bound[i].strategy, launch=bound[i].summary())
        reports.append(r)
    return Explanation(tuple(reports), tuple(plan.rejected), tuple(plan.rewrites))


def format_plan(plan: Plan, specs: list[TileSpec]) -> str:
    lines = []
    for i, (k, spec) in enumerate(zip(plan.kernels, specs)):
        lines.append(f"kernel {i}: {spec.strategy} over {list(k.space)}"
                     + (f", reducing axes {list(k.reduce_axes)}" if k.reduce_axes else "")
                     + f"; parallel dims {list(spec.par_dims)}, inner dims {list(spec.inner_dims)}")
        for r in k.reductions:
            lines.append(f"  reduce  {r.op} -> {type_str(r)}")
        for s in k.stores:
            dest = "" if s.dest is s.node else f" into {type_str(s.dest)}[axis {s.axis} @ {s.offset}]"
            lines.append(f"  store   {s.node.op} {type_str(s.node)}{dest}")
        for a in k.body.accesses:
            view = "".join(f".{c.op}" for c in a.chain)
            lines.append(f"  load    {a.buffer.op} {type_str(a.buffer)}{view} at {list(a.index)}")
    return "\n".join(lines)
