"""The graph IR: frozen, hash-consed nodes with a shape and a dtype on every node.

Building the same node twice returns the same object (``Node.make`` interns by structure), so
common-subexpression elimination is free and identity comparison is structural comparison.
Nodes hold concrete shapes: tracing is repeated per argument signature (cheap), while kernels
are keyed by their generated code, in which every size is a run-time argument.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .. import forksafe
from ..errors import TraceShapeError, with_location

Shape = tuple[int, ...]


# NumPy's limits on an array (NPY_MAXDIMS of NumPy 2; sizes in bytes fit a signed intp):
# every node is a value NumPy could hold, so a program past them fails as NumPy does, with
# its messages, when the node is made (and not later, inside a kernel's index arithmetic).
MAX_DIMS = 64
MAX_BYTES = int(np.iinfo(np.intp).max)


def check_shape(shape: Shape, dtype: np.dtype) -> None:
    if len(shape) > MAX_DIMS:
        raise TraceShapeError(with_location(
            f"maximum supported dimension for an ndarray is currently {MAX_DIMS}, found "
            f"{len(shape)}"))
    # as NumPy counts: the nonzero dimensions' product (an empty array may not be too big)
    nbytes = dtype.itemsize
    for n in shape:
        nbytes *= n or 1
    if nbytes > MAX_BYTES:
        raise TraceShapeError(with_location(
            "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum "
            "possible size."))


class Node:
    """One operation in the graph. Immutable and interned: use ``Node.make``."""

    __slots__ = ("op", "args", "attrs", "shape", "dtype", "_key", "ruled", "__weakref__")

    op: str
    args: tuple["Node", ...]
    attrs: tuple[tuple[str, Any], ...]
    shape: Shape
    dtype: np.dtype
    # True when ``trace.build.make`` gave the node the shape and dtype its op's rules give
    # for its operands (the verifier need not run the rules again)
    ruled: bool

    # The intern table: structure key -> weak reference to the node. A plain dict of plain
    # references, swept of dead entries when it has doubled since the last sweep: a
    # WeakValueDictionary's Python-level bookkeeping was half the cost of making a node, and
    # a graph re-derived for a new size makes every node again. A key that holds a large
    # constant's bytes is dropped as soon as its node dies (``_intern``), as before.
    _interned: dict[tuple, "weakref.ref[Node]"] = {}
    _sweep_at = 4096
    _lock = threading.Lock()

    def __init__(self) -> None:  # pragma: no cover - construction goes through make()
        raise TypeError("use Node.make(...)")

    @classmethod
    def make(cls, op: str, args: Iterable["Node"], attrs: dict | tuple, shape: Iterable[int],
             dtype: np.dtype | type | str, ruled: bool = False) -> "Node":
        args = tuple(args)
        attrs = tuple(sorted(attrs.items())) if isinstance(attrs, dict) else tuple(attrs)
        shape = tuple(map(int, shape))
        dtype = np.dtype(dtype)
        # Arguments are interned, so their identity is their structure.
        return _intern((op, tuple(map(id, args)), attrs, shape, dtype.str), args, dtype, ruled)

    def resized(self, args: tuple["Node", ...], shape: Shape) -> "Node":
        """This node's operation over ``args`` with the shape ``shape`` (``trace/resize.py``:
        a graph re-derived for new sizes): ``make`` without normalising again what this
        node has normalised (its attributes and dtype)."""
        return _intern((self.op, tuple(map(id, args)), self.attrs, shape, self._key[4]),
                       args, self.dtype, self.ruled)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("graph nodes are immutable")

    # Equality is identity (nodes are interned: equal structure is the same node) and the
    # hash object's own: both stay in C, as nodes key the dictionaries of every stage
    # (a Python __hash__ was a tenth of planning's time).

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return f"<{self.op} {type_str(self)}>"


def _intern(key: tuple, args: tuple[Node, ...], dtype: np.dtype, ruled: bool) -> Node:
    """The node of ``key`` (op, operand ids, attributes, shape, dtype string): the live one
    made before, or a new one."""
    table = Node._interned
    with Node._lock:
        while _died:   # large constants' keys whose nodes died (``_forget``)
            dead_key, dead_ref = _died.pop()
            if table.get(dead_key) is dead_ref:
                del table[dead_key]
        ref = table.get(key)
        node = ref() if ref is not None else None
        # (ids are reused once a node dies: the operands themselves must match)
        if node is not None and node.args == args:
            if ruled and not node.ruled:   # (its key holds the shape the rules gave)
                object.__setattr__(node, "ruled", True)
            return node
        shape = key[3]
        check_shape(shape, dtype)
        node = object.__new__(Node)
        setattr_ = object.__setattr__
        setattr_(node, "op", key[0])
        setattr_(node, "args", args)
        setattr_(node, "attrs", key[2])
        setattr_(node, "shape", shape)
        setattr_(node, "dtype", dtype)
        setattr_(node, "_key", key)
        setattr_(node, "ruled", ruled)
        if key[0] == "constant" and len(dict(key[2]).get("value") or b"") >= _LARGE_VALUE:
            table[key] = weakref.ref(node, lambda r, k=key: _died.append((k, r)))
        else:
            table[key] = weakref.ref(node)
        if len(table) >= Node._sweep_at:
            _sweep(table)
        return node


# A constant of at least this many bytes keeps no entry after its node dies: its key holds
# the bytes. The callback only appends (it may run inside ``_intern``, during a garbage
# collection an allocation triggered); the next ``_intern`` removes the entries.
_LARGE_VALUE = 1 << 12
_died: list[tuple[tuple, "weakref.ref[Node]"]] = []


def _sweep(table: dict) -> None:
    """Drop the intern table's entries of nodes that died (the caller holds the lock)."""
    for key in [k for k, r in table.copy().items() if r() is None]:
        table.pop(key, None)
    Node._sweep_at = max(4096, 2 * len(table))


forksafe.renew_at_fork(Node, "_lock")   # a child forked mid-``make`` elsewhere can trace


def type_str(node: Node) -> str:
    """``f32[3,4]``-style type of a node."""
    return f"{dtype_abbrev(node.dtype)}[{','.join(map(str, node.shape))}]"


_ABBREV = {"bool": "bool", "float16": "f16", "float32": "f32", "float64": "f64"}


def dtype_abbrev(dtype: np.dtype) -> str:
    name = np.dtype(dtype).name
    if name in _ABBREV:
        return _ABBREV[name]
    return name.replace("uint", "u").replace("int", "i")


@dataclass(frozen=True)
class Graph:
    """A traced function: its input nodes (positional: one per array argument, then one per
    array global the function read), its output nodes, and how to rebuild the function's
    return structure from them.

    ``updates``: inputs the function wrote into (``x += 1``, ``x[i] = v`` on an argument or
    a global array): after the results come their final values, one per entry, which the
    call writes back into the caller's arrays, as NumPy would have left them.
    ``checks``: run-time checks (``trace.context.require``): the last ``len(checks)`` outputs
    are bool 0-d nodes that must be True when the compiled function runs, else the paired
    error is raised. ``results`` are the outputs without the updates and checks.
    ``globals``: the names of the global arrays, read at every call, that are the last
    ``len(globals)`` inputs."""

    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    out_tree: Any  # see trace.pytree
    input_names: tuple[str, ...] = ()
    checks: tuple[tuple[type, str], ...] = ()
    globals: tuple[str, ...] = ()
    # node -> the user's line that made it in this trace (for run-time errors)
    locations: Any = field(default=None, compare=False, hash=False, repr=False)
    updates: tuple[int, ...] = ()
    # the results NumPy returns read-only (views made by np.diag / diagonal, broadcast_to,
    # sliding_window_view of the function's own arrays), by position among ``results``
    readonly_results: tuple[int, ...] = ()
    # the results NumPy returns as Python numbers (a random draw without a size: ``float`` /
    # ``int``), as (position among ``results``, "float" or "int")
    python_results: tuple[tuple[int, str], ...] = ()
    # for each result, the first result that is the same array object in the trace (the
    # function returned it twice), by position; () when every result is its own
    same_results: tuple[int, ...] = ()
    # ``nodes()``'s order, computed once: every stage walks the graph (not an init field, so
    # ``dataclasses.replace`` of other outputs starts without it)
    _order: Any = field(default=None, init=False, compare=False, hash=False, repr=False)

    @property
    def results(self) -> tuple[Node, ...]:
        return self.outputs[:len(self.outputs) - len(self.checks) - len(self.updates)]

    @property
    def update_values(self) -> tuple[Node, ...]:
        n = len(self.results)
        return self.outputs[n:n + len(self.updates)]

    def nodes(self) -> list[Node]:
        """All nodes reachable from the outputs, in topological order (operands first)."""
        if self._order is None:
            object.__setattr__(self, "_order", tuple(toposort(self.outputs)))
        return list(self._order)

    def users(self) -> dict[Node, list[Node]]:
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes()}
        for n in users:
            for a in n.args:
                users[a].append(n)
        return users


def toposort(roots: Iterable[Node]) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(r, False) for r in reversed(list(roots))]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for a in reversed(node.args):
            if id(a) not in seen:
                stack.append((a, False))
    return order


def any_ancestor(node: Node, test: Callable[[Node], bool], budget: int) -> bool | None:
    """Whether ``test`` holds for ``node`` or a node it is computed from, looking at no more
    than ``budget`` distinct nodes; None when the budget ran out first (callers choose the
    safe answer)."""
    stack, seen = [node], set()
    while stack:
        if len(seen) >= budget:
            return None
        n = stack.pop()
        if id(n) in seen:
            continue
        if test(n):
            return True
        seen.add(id(n))
        stack.extend(n.args)
    return False


def walk(roots: Iterable[Node]) -> Iterator[Node]:
    yield from toposort(roots)


def format_graph(graph: Graph) -> str:
    """Readable listing: one line per node, ``%3 = add(%1, %2) : f32[4,5]``."""
    names: dict[Node, str] = {}
    lines = []
    for i, node in enumerate(graph.nodes()):
        names[node] = f"%{i}"
        args = ", ".join(names[a] for a in node.args)
        attrs = ", ".join(f"{k}={_fmt_attr(node, k, v)}" for k, v in node.attrs)
        inner = ", ".join(x for x in (args, attrs) if x)
        lines.append(f"{names[node]} = {node.op}({inner}) : {type_str(node)}")
    outs = ", ".join(names[o] for o in graph.results)
    lines.append(f"return {outs}")
    for i, o in zip(graph.updates, graph.update_values):
        lines.append(f"write {names[o]} into input {i} ({graph.input_names[i]})")
    for o, (err, msg) in zip(graph.outputs[len(graph.results) + len(graph.updates):],
                             graph.checks):
        lines.append(f"check {names[o]} else {err.__name__}({msg.splitlines()[0]!r})")
    return "\n".join(lines)


def _fmt_attr(node: Node, key: str, value: Any) -> str:
    if key == "count" and node.op == "size":   # max(prod(dims) - less, 0): ``64``, ``8*64-1``
        dims, less = value
        return "*".join(map(str, dims)) + (f"-{less}" if less else "")
    if key == "value" and isinstance(value, bytes):
        if node.ndim == 0:   # scalar constants and sizes: show the number
            return repr(np.frombuffer(value, dtype=node.dtype)[0].item())
        return "<data>"
    return repr(value)
