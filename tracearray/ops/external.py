"""External kernels: ops computed by a library call instead of by generated code.

An external op (``Kind.EXTERNAL``) is one registration here: its shape and dtype rules, one
per result, and its implementations per target. The CPU implementation (``host``) is a
function over NumPy arrays that writes every result into the arrays it is given (NumPy's
sort, LAPACK through ``numpy.linalg``). A target may register a device implementation of an
op later (``device``); a target without one runs the host function on copies of the operands
("runs on the host for now", see docs/supported.md).

One call can give several results (``slogdet``: sign and log-determinant; ``eigh``: values
and vectors). Each result is a graph node of its own: the op, the same operands and
attributes, and ``result=i``. The planner gathers the nodes of one call (``call_key``) into
one external kernel, whose operands are real arrays (views of stored buffers are fine, as
for matmul) and whose results are stored; elementwise producers and consumers around it stay
fused into the kernels before and after it.

Operands and results are real arrays: an op on interleaved complex data (an FFT) registers
its operands and results as real arrays of shape ``s + (2,)``.

Nothing here imports a pipeline stage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .spec import ALL_DTYPES, EXACT, Accuracy, Domain, Kind, OpSpec, Shape, register

# (operand shapes, attrs) -> every result's shape; (operand dtypes, attrs) -> every dtype
ShapesRule = Callable[[Sequence[Shape], dict], tuple[Shape, ...]]
DtypesRule = Callable[[Sequence[np.dtype], dict], tuple[np.dtype, ...]]
# (operands, results, **attrs) -> None: writes every result array
HostFn = Callable[..., None]


@dataclass(frozen=True)
class External:
    name: str
    shapes: ShapesRule
    dtypes: DtypesRule
    host: HostFn
    what: str                                   # for explain(): "NumPy's sort", ...
    arity: int = 1
    # target name ("cuda") -> a device implementation, called as
    # ``impl(device, operands, results, **attrs)`` with DeviceBuffers, queuing its work on the
    # device's stream; a target without one runs ``host`` on copies of the operands
    device: dict[str, Any] = field(default_factory=dict)
    # (attrs, operand ndim) -> an axis along which every operand and result may be cut into
    # independent pieces (rows of a sort, matrices of a batch), or None: a runtime may then
    # run the pieces in parallel
    split: Callable[[dict, int], int | None] | None = None

    def results(self, shapes: Sequence[Shape], dtypes: Sequence[np.dtype], attrs: dict
                ) -> list[tuple[Shape, np.dtype]]:
        attrs = {k: v for k, v in attrs.items() if k != "result"}
        return list(zip(self.shapes(shapes, attrs), self.dtypes(dtypes, attrs)))


@dataclass(frozen=True)
class DeviceBuffer:
    """What a device implementation gets for an operand or a result: a device pointer (to
    the first element), the shape, element strides and dtype; ``scratch``: an operand whose
    memory nothing reads after this call (an intermediate of the call's own), which the
    implementation may overwrite instead of copying it first."""
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: np.dtype
    scratch: bool = False


EXTERNALS: dict[str, External] = {}


def register_external(name: str, shapes: ShapesRule, dtypes: DtypesRule, host: HostFn, *,
                      what: str, arity: int = 1, domain: Domain | None = None,
                      accuracy: Accuracy = EXACT, divergences: Sequence[str] = (),
                      operand_dtypes: Callable[[Any], tuple[np.dtype, ...]] | None = None,
                      split: Callable[[dict, int], int | None] | None = None,
                      ) -> External:
    """Register an external op and its ``OpSpec`` (kind EXTERNAL; ``numpy_ref`` runs the
    host function, for the graph evaluator)."""
    ext = External(name, shapes, dtypes, host, what, arity, split=split)
    EXTERNALS[name] = ext

    def shape_rule(operand_shapes: Sequence[Shape], attrs: dict) -> Shape:
        return tuple(ext.shapes(operand_shapes, _call_attrs(attrs))[attrs["result"]])

    def dtype_rule(operand_dtypes: Sequence[np.dtype], attrs: dict) -> np.dtype:
        return np.dtype(ext.dtypes(operand_dtypes, _call_attrs(attrs))[attrs["result"]])

    def numpy_ref(*operands: np.ndarray, result: int, **attrs: Any) -> np.ndarray:
        return run_host(ext, operands, attrs)[result]

    register(OpSpec(name, Kind.EXTERNAL, numpy_ref, shape_rule, dtype_rule,
                    domain or Domain(ALL_DTYPES), arity=arity, accuracy=accuracy,
                    divergences=tuple(divergences), operand_dtypes=operand_dtypes))
    return ext


def register_host_call(name: str, shapes: ShapesRule, dtypes: DtypesRule, host: HostFn, *,
                       what: str, arity: int = 1) -> External:
    """The host implementation of a primitive of another kind that a target runs as a library
    call (matmul on the CPU: NumPy's BLAS), so that runtimes call every library op one way."""
    ext = External(name, shapes, dtypes, host, what, arity)
    EXTERNALS[name] = ext
    return ext


def _call_attrs(attrs: dict) -> dict:
    return {k: v for k, v in attrs.items() if k != "result"}


def run_host(ext: External, operands: Sequence[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """Every result of one call, in fresh C-contiguous arrays."""
    attrs = _call_attrs(attrs)
    types = ext.results([a.shape for a in operands], [a.dtype for a in operands], attrs)
    outs = [np.empty(s, d) for s, d in types]
    ext.host(list(operands), outs, **attrs)
    return outs


def call_key(node: Any) -> tuple:
    """What identifies the call a result node belongs to (its results share it)."""
    return (node.op, node.args, tuple((k, v) for k, v in node.attrs if k != "result"))


def result_index(node: Any) -> int:
    return node.attr("result")


def returning(fn: Callable[..., Any]) -> HostFn:
    """A host function from one that returns its result(s): they are written into the
    result arrays (cast as NumPy's own function would have typed them: the rules say)."""
    def host(operands: list[np.ndarray], outs: list[np.ndarray], **attrs: Any) -> None:
        got = fn(*operands, **attrs)
        got = got if isinstance(got, tuple) else (got,)
        for out, value in zip(outs, got):
            np.copyto(out, np.asarray(value).reshape(out.shape), casting="unsafe")
    return host


def across_rows(attrs: dict, ndim: int) -> int | None:
    """A sort along ``attrs["axis"]``: its rows are independent along any other axis."""
    if ndim < 2:
        return None
    return 0 if attrs["axis"] != 0 else 1


def single(shape: Callable[[Sequence[Shape], dict], Shape]) -> ShapesRule:
    return lambda shapes, attrs: (tuple(shape(shapes, attrs)),)


def same_shape(shapes: Sequence[Shape], attrs: dict) -> tuple[Shape, ...]:
    return (tuple(shapes[0]),)


def same_dtype(dtypes: Sequence[np.dtype], attrs: dict) -> tuple[np.dtype, ...]:
    return (np.dtype(dtypes[0]),)


INTP = np.dtype(np.intp)
