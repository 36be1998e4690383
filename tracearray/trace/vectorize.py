"""``np.vectorize(f)(x, ...)`` of traced arrays: ``f`` traced once on one element of each
array, its element graph applied to the whole arrays.

NumPy calls ``f`` on the first elements as NumPy scalars (to learn the result dtype), then
once per element of the broadcast arguments with the elements as Python objects (``float``,
``int``, ``bool``), and casts the results to that dtype. Here ``f`` is called with 0-d tracers
standing for
"an element of each array" (0-d like NumPy's scalars: ``shape``, ``ndim``, ``size`` and
``len`` answer as they do), and the graph it builds from them is replayed with each element
replaced by its whole array. That is the same computation exactly when every step between
the elements and the results works element by element: NumPy's ufuncs, ``np.where``, casts
(and views that leave a 0-d value as it is). Anything else (a reduction, indexing, an array
the function closes over, a random draw, which NumPy makes per element, a branch on a value:
the tracer refuses that one itself) is refused with the operation named, never computed
another way. Python scalars passed to the
vectorized function reach ``f`` unchanged, as NumPy passes them.

With a ``signature`` (a generalized function over core dimensions), NumPy's own loop runs on
the tracers: one call of ``f`` per index of the loop dimensions, each on traced core slices,
unrolled into the graph (``SIGNATURE_CALLS_MAX`` calls at most).

The hook replaces ``np.vectorize._vectorize_call`` while any trace runs (``context``), and
calls NumPy's own for calls without traced arrays (other threads, concrete data).
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ConcretizationError, TracearrayError, with_location
from ..ops import OPS, Kind
from . import numpy_api as api
from .build import constant, known_value, make, unsupported
from .graph import Node
from .tracer import Tracer

_ORIGINAL = np.vectorize._vectorize_call
_element_ids = itertools.count()


def install() -> None:
    np.vectorize._vectorize_call = _vectorize_call


def uninstall() -> None:
    np.vectorize._vectorize_call = _ORIGINAL


def _vectorize_call(self: np.vectorize, func: Callable, args: Sequence[Any]) -> Any:
    from .complex import ComplexTracer
    from .context import current
    if current() is None or not any(isinstance(a, (Tracer, ComplexTracer)) for a in args):
        return _ORIGINAL(self, func, args)
    if self.signature is not None:
        return _with_signature(self, func, args)
    if any(isinstance(a, ComplexTracer) for a in args):
        raise unsupported("np.vectorize of complex traced arrays")
    concrete = [known_value(a.node) if isinstance(a, Tracer) else a for a in args]
    if all(c is not None for c in concrete):
        # arrays the function made from numbers (np.arange, ...): NumPy's own loop, once
        return _ORIGINAL(self, func, concrete)
    return vectorized(func, args, self.otypes)


# np.vectorize with a signature calls the function once per index of the loop dimensions;
# traced, that loop is unrolled (each call's graph is its own), so its length is bounded.
SIGNATURE_CALLS_MAX = 1024


def _with_signature(self: np.vectorize, func: Callable, args: Sequence[Any]) -> Any:
    """``np.vectorize(f, signature=...)`` of traced arrays: NumPy's own loop over the loop
    dimensions, on tracers (``f`` sees each index's core slices as traced arrays, so it may
    reduce, index and branch on shapes: its results are stacked as NumPy's loop does)."""
    from numpy.lib._function_base_impl import _parse_gufunc_signature

    from .complex import ComplexTracer
    core_in, _core_out = _parse_gufunc_signature(self.signature.replace(" ", ""))
    if len(core_in) == len(args):
        loops = []
        for a, dims in zip(args, core_in):
            shape = a.shape if isinstance(a, (Tracer, ComplexTracer)) else np.shape(a)
            loops.append(shape[:max(len(shape) - len(dims), 0)])
        try:
            calls = int(np.prod(np.broadcast_shapes(*loops)))
        except ValueError:
            calls = 0          # NumPy's own loop raises its error
        if calls > SIGNATURE_CALLS_MAX:
            raise unsupported(
                f"np.vectorize(signature={self.signature!r}) over {calls} loop indices",
                f"NumPy calls the function once per index and tracearray unrolls that loop "
                f"(at most {SIGNATURE_CALLS_MAX} calls); write the function with whole-array "
                f"operations over the loop axes")
    return _ORIGINAL(self, func, args)


def vectorized(func: Callable, args: Sequence[Any], otypes: str | None) -> Any:
    """``func`` applied element by element to ``args`` (see the module docstring).

    NumPy's types, both of them: the result's dtype is that of ``func``'s result for NumPy
    scalars of the arrays' dtypes (NumPy calls it on the first elements to learn it, unless
    ``otypes`` says), while the values are computed on the elements as Python objects
    (``float``, ``int``, ``bool``: NumPy loops over object arrays), so in float64 and int64
    here, and cast to that dtype at the end. (Python's ints do not overflow: a uint64
    element past 2**63, or an int64 product past it, wraps here where NumPy's loop would
    keep the exact integer and then fail or wrap in the final cast.)"""
    from .composites import as_tracer
    arrays: dict[int, Node] = {}      # argument position -> the whole array's node
    for i, a in enumerate(args):
        if not isinstance(a, (bool, int, float)):   # Python scalars reach func as they are
            arrays[i] = as_tracer(a).node
    shape = api.broadcast_shape([n.shape for n in arrays.values()])
    if otypes is None and 0 in shape:
        raise ValueError(with_location(
            "cannot call `vectorize` on size 0 inputs unless `otypes` is set"))
    if otypes is None:   # NumPy's first call: NumPy scalars of the arrays' dtypes, and of
        # np.asarray of the Python scalars (np.float64(3.0) for 3.0: strongly typed there)
        scalars = [np.asarray(a).flat[0] if i not in arrays else a for i, a in enumerate(args)]
        elements, tree = _explore(func, scalars, {i: n.dtype for i, n in arrays.items()})
        dtypes = _first_call_dtypes(tree, elements, arrays)
    else:
        dtypes = [np.dtype(t) for t in otypes]
    # the values: each element as the Python object NumPy's loop hands func
    python = {i: np.dtype(np.float64 if n.dtype.kind == "f" else
                          np.bool_ if n.dtype.kind == "b" else np.int64)
              for i, n in arrays.items()}
    elements, tree = _explore(func, args, python)
    outs = _joined(tree)
    if len(dtypes) != len(outs):
        raise ValueError(with_location(
            f"Invalid number of outputs: np.vectorize's otypes names {len(dtypes)}, the "
            f"function returned {len(outs)}"))
    whole = {elements[i]: api.cast(arrays[i], python[i]) for i in arrays}
    memo: dict[Node, Node] = {}
    from .context import require
    for path, (error, message) in _raising_paths(tree):
        # (an error the function raises down a branch: NumPy's, where an element goes there)
        reached = _replay(path, whole, memo)
        anywhere = api.reduce_with("any", api.broadcast_to(reached, shape))
        require(api.apply_ufunc(np.logical_not, anywhere), error, message)
    replayed = [Tracer(api.broadcast_to(api.cast(_replay(r, whole, memo), dt), shape))
                for r, dt in zip(outs, dtypes)]
    return tuple(replayed) if tree.multiple else replayed[0]


# Branches on an element's value a function given to np.vectorize may take in one call: each
# is traced both ways (2 ** MAX_ELEMENT_BRANCHES runs of the function at most).
MAX_ELEMENT_BRANCHES = 6


class ElementBranch(BaseException):
    """Raised by ``bool()`` of an element's value where the run has no decision for it yet
    (a BaseException: the user's ``except Exception`` must not take it)."""

    def __init__(self, cond: Node):
        super().__init__("np.vectorize branch")
        self.cond = cond


class _Paths:
    """The function's results down each way of its branches: a leaf (``outs``: result
    nodes; or ``raises``: the error the function raised that way, (type, message)) or a
    branch on ``cond`` with the ``yes`` and ``no`` paths."""

    def __init__(self, multiple: bool, outs: list[Node] | None = None, cond: Node | None = None,
                 yes: "_Paths | None" = None, no: "_Paths | None" = None,
                 raises: tuple | None = None):
        self.multiple, self.outs, self.cond, self.yes, self.no = multiple, outs, cond, yes, no
        self.raises = raises

    @property
    def leaf(self) -> bool:
        return self.outs is not None or self.raises is not None


def element_branch(t: Tracer) -> bool:
    """``bool()`` of an element's value in np.vectorize's function: the decision this run
    takes there (``_explore`` runs the function once per way)."""
    from .context import current
    state = current()
    cond = api.cast(api.reshape(t.node, ()), np.dtype(bool))
    if state.element_taken < len(state.element_decisions):
        state.element_taken += 1
        return state.element_decisions[state.element_taken - 1]
    raise ElementBranch(cond)


def _explore(func: Callable, args: Sequence[Any], dtypes: dict[int, np.dtype]
             ) -> tuple[dict[int, Node], _Paths]:
    """``func`` run on a 0-d stand-in of each array's element (of ``dtypes``), every branch
    on an element's value taken both ways: the stand-ins and the tree of paths."""
    tag = next(_element_ids)
    elements = {i: Node.make("input", (), {"vectorize_element": (tag, i)}, (), dt)
                for i, dt in dtypes.items()}
    call_args = [Tracer(elements[i]) if i in elements else a for i, a in enumerate(args)]
    from .context import current
    state = current()

    def run(decisions: list[bool]) -> _Paths:
        saved = state.element_decisions, state.element_taken
        state.element_decisions, state.element_taken = decisions, 0
        state.element_traces += 1
        branch = raised = None
        try:
            results = func(*call_args)
        except ElementBranch as b:
            branch = b
        except ConcretizationError as e:
            raise ConcretizationError(
                f"{e}\n(np.vectorize: tracearray traces the function on a stand-in for all "
                f"elements: it cannot pass an element to math.* functions or convert it to "
                f"a Python number; use NumPy's functions, np.sin rather than math.sin)"
            ) from None
        except TracearrayError:
            raise
        except Exception as e:   # noqa: BLE001 -- the user's error, down one way of a branch
            if not decisions:
                raise
            raised = (type(e), str(e))
        finally:
            state.element_traces -= 1
            state.element_decisions, state.element_taken = saved
        if raised is not None:
            return _Paths(False, raises=raised)
        if branch is None:
            return _Paths(isinstance(results, tuple), outs=_result_nodes(results))
        if len(decisions) >= MAX_ELEMENT_BRANCHES:
            raise unsupported(
                f"np.vectorize of a function with more than {MAX_ELEMENT_BRANCHES} branches "
                f"on an element's value in one call",
                "each is traced both ways; write the choices with np.where")
        yes, no = run(decisions + [True]), run(decisions + [False])
        if yes.raises is not None and no.raises is not None:
            return _Paths(False, raises=yes.raises)   # (every element raises: the first's)
        a, b = _leaf(yes), _leaf(no)
        if a is not None and b is not None and \
                (a.multiple != b.multiple or len(a.outs) != len(b.outs)):
            raise unsupported("np.vectorize of a function whose branches return different "
                              "numbers of values")
        return _Paths((a or b).multiple, cond=branch.cond, yes=yes, no=no)
    tree = run([])
    return elements, tree


def _leaf(p: _Paths) -> _Paths | None:
    """A leaf of ``p`` with results (None: every way raises)."""
    if p.outs is not None:
        return p
    if p.raises is not None:
        return None
    return _leaf(p.yes) or _leaf(p.no)


def _raising_paths(p: _Paths, path: Node | None = None) -> list[tuple[Node, tuple]]:
    """For each way of ``p`` that raises: whether an element goes that way (a bool element
    node: its branches' conditions together) and the error."""
    if p.raises is not None:
        return [(path if path is not None else constant(np.True_), p.raises)]
    if p.outs is not None:
        return []
    out = []
    for cond, sub in ((p.cond, p.yes), (api.apply_ufunc(np.logical_not, p.cond), p.no)):
        out += _raising_paths(sub, cond if path is None else
                              api.apply_ufunc(np.logical_and, path, cond))
    return out


def _result_nodes(results: Any) -> list[Node]:
    from .composites import as_tracer
    outs = []
    for r in (results if isinstance(results, tuple) else (results,)):
        if isinstance(r, (list, dict, set)) or (isinstance(r, np.ndarray) and r.ndim):
            raise unsupported("np.vectorize of a function that returns a sequence or an "
                              "array", "each call must return one value (or a tuple)")
        outs.append(as_tracer(r).node)
    return outs


def _joined(p: _Paths) -> list[Node]:
    """The results of every path joined by selects on the branches' conditions (each
    element takes its own way, as NumPy's loop calls the function per element); a way that
    raises takes the other's values (a run-time check raises where an element goes there)."""
    if p.outs is not None:
        return p.outs
    if p.raises is not None:
        raise p.raises[0](with_location(p.raises[1]))   # (every element's way raises)
    if p.yes.raises is not None:
        return _joined(p.no)
    if p.no.raises is not None:
        return _joined(p.yes)
    yes, no = _joined(p.yes), _joined(p.no)
    return [api.where(p.cond, a, b) for a, b in zip(yes, no)]


def _first_call_dtypes(tree: _Paths, elements: dict[int, Node], arrays: dict[int, Node]
                       ) -> list[np.dtype]:
    """The result dtypes of NumPy's first call (on the arrays' first elements, to learn
    them): a leaf's; where the branches' leaves differ, the leaf the first elements reach,
    their conditions found by a probe when the function runs (as a branch of the traced
    function itself is)."""
    leaves: list[_Paths] = []
    stack = [tree]
    while stack:
        p = stack.pop()
        if p.outs is not None:
            leaves.append(p)
        elif p.raises is None:
            stack += [p.yes, p.no]
    if not leaves:   # every way raises: NumPy's first call does
        raise tree_error(tree)
    kinds = {tuple(n.dtype for n in leaf.outs) for leaf in leaves}
    if len(kinds) == 1:
        return list(next(iter(kinds)))
    firsts = {elements[i]: api.getitem(arrays[i], (0,) * arrays[i].ndim) for i in arrays}
    memo: dict[Node, Node] = {}
    p = tree
    while p.outs is None:
        if p.raises is not None:   # (the first elements raise: the run-time check does)
            return [n.dtype for n in leaves[0].outs]
        from .tracer import _staged
        first = api.cast(_replay(p.cond, {e: api.cast(f, e.dtype) for e, f in firsts.items()},
                                 memo), np.dtype(np.int64))
        p = p.yes if _staged(first, "the first elements' branch in np.vectorize") else p.no
    return [n.dtype for n in p.outs]


def tree_error(p: _Paths) -> BaseException:
    while p.raises is None:
        p = p.yes
    return p.raises[0](with_location(p.raises[1]))


def _replay(node: Node, whole: dict[Node, Node], memo: dict[Node, Node]) -> Node:
    """``node`` of the element graph rebuilt over the whole arrays (iterative: element
    graphs of long formulas are deep)."""
    stack = [node]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        if n in whole:
            memo[n] = whole[n]
            stack.pop()
            continue
        pending = [a for a in n.args if a not in memo]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        args = [memo[a] for a in n.args]
        if all(a is b for a, b in zip(args, n.args)):   # independent of the elements
            if _draws_random(n):
                raise unsupported(
                    "np.vectorize of a function that draws random numbers",
                    "NumPy calls it once per element, so each element gets its own draw; "
                    "draw an array of the arguments' shape outside np.vectorize instead")
            if n.ndim:
                raise unsupported(
                    "np.vectorize of a function that combines its element with a whole "
                    f"array ({n.op} of shape {n.shape})",
                    "NumPy would make an array per element; pass the array as an argument "
                    "of the vectorized function, or write it with array operations")
            memo[n] = n
            continue
        spec = OPS[n.op]
        if n.ndim or any(a.ndim for a in n.args):
            raise unsupported(f"np.vectorize of a function whose element becomes an array "
                              f"({n.op} of shape {n.shape})")
        if spec.kind is Kind.ELEMENTWISE:
            memo[n] = make(n.op, args, **dict(n.attrs))
        elif spec.kind is Kind.MOVEMENT:   # a 0-d value's view of itself (np.asarray, ...)
            memo[n] = args[0]
        else:
            raise unsupported(
                f"np.vectorize of a function that applies {n.op} ({spec.kind.value}) to its "
                f"element", "tracearray vectorizes functions of NumPy's element-by-element "
                "operations (ufuncs, np.where, casts)")
    return memo[node]


def _draws_random(node: Node) -> bool:
    """Whether ``node`` is computed from a random draw (trace/random.py's philox)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n.op == "philox":
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.args)
    return False


__all__ = ["install", "uninstall", "vectorized"]
