"""Products: dot, matmul, inner, outer, vdot, tensordot, einsum, kron, cross and vector /
matrix norms. Contractions become the ``matmul`` primitive on transposed and reshaped operands
(a reshape that merges transposed axes stores its operand first); elementwise products and
sums stay fused."""
from __future__ import annotations

import operator
import string
from typing import Any, Sequence

import numpy as np

from .. import numpy_api as api
from ..build import normalize_axes, unsupported
from ...errors import with_location
from ..complex import FUNCTIONS, numpy_code_for_complex
from ..tracer import Tracer, unwrap
from . import NUMERIC, NUMPY_IMPLEMENTATION as NUMPY, as_tracer, composite

_MM = ("matmul-blocking",)


def _matmul(a: Any, b: Any, **kwargs: Any) -> Tracer:
    if kwargs:
        raise unsupported(f"np.matmul({', '.join(sorted(kwargs))}=...)")
    return Tracer(api.matmul(unwrap(as_tracer(a)), unwrap(as_tracer(b))))


composite(np.matmul, calls=['np.matmul({0}, {1}.swapaxes(-1, -2))', '{0} @ {1}[0]'],
          arrays=2, dtypes=NUMERIC, min_dims=2, same_shape=True, divergences=_MM, impl=_matmul)


@composite(np.dot, calls=['np.dot({0}, {1}.T)', 'np.dot({0}, {1}[..., 0])'],
           arrays=2, dtypes=NUMERIC, min_dims=1, same_shape=True, divergences=_MM)
def dot(a: Any, b: Any, out: Any = None) -> Tracer:
    """NumPy's dot: a product with a scalar, matmul for at most 2 dimensions, else the sum over
    a's last and b's second-to-last axis (every pair of leading indices)."""
    if out is not None:
        return _dot_into(dot(a, b), out)
    ta, tb = as_tracer(a), as_tracer(b)
    if ta.ndim <= 2 and tb.ndim <= 2:
        return Tracer(api.dot(ta.node, tb.node))
    return tensordot(ta, tb, axes=([-1], [-2 if tb.ndim >= 2 else 0]))


def _dot_into(result: Any, out: Any) -> Any:
    """``np.dot(a, b, out=out)``: NumPy takes only an out of the result's dtype and number of
    dimensions, C-contiguous (its flags as traced: traced-layout-flags), and of its shape;
    the product is written into it and out returned."""
    from ..complex import ComplexTracer
    from ..tracer import store_out
    r = as_tracer(result)
    if not isinstance(out, (Tracer, ComplexTracer)):
        raise unsupported("np.dot(out=...) into an array the compiled function does not hold",
                          "write into an argument or an array the function made")
    if out.dtype != r.dtype or out.ndim != r.ndim or not out.flags.c_contiguous:
        raise ValueError(with_location(
            "output array is not acceptable (must have the right datatype, number of "
            "dimensions, and be a C-Array)"))
    if out.shape != r.shape:
        raise ValueError(with_location("output array has wrong dimensions"))
    return store_out("np.dot", r, out, "no")


@composite(np.vdot, calls=['np.vdot({0}, {1})'], arrays=2, dtypes=NUMERIC,
           same_shape=True, divergences=_MM)
def vdot(a: Any, b: Any) -> Tracer:
    ta, tb = as_tracer(a).ravel(), as_tracer(b).ravel()
    if ta.shape != tb.shape:
        raise ValueError(with_location("cannot reshape array: vdot needs equal sizes"))
    return np.matmul(ta, tb)


@composite(np.inner, calls=['np.inner({0}, {1})'], arrays=2, dtypes=NUMERIC,
           min_dims=1, same_shape=True, divergences=_MM)
def inner(a: Any, b: Any) -> Tracer:
    ta, tb = as_tracer(a), as_tracer(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return ta * tb
    return tensordot(ta, tb, axes=([-1], [-1]))


composite(np.outer, calls=['np.outer({0}, {1})'], arrays=2, dtypes=NUMERIC, impl=NUMPY)


@composite(np.tensordot, calls=['np.tensordot({0}, {1}, axes=1)',
                                'np.tensordot({0}, {1}, axes=([0], [0]))'],
           arrays=2, dtypes=NUMERIC, min_dims=2, same_shape=True, divergences=_MM)
def tensordot(a: Any, b: Any, axes: Any = 2) -> Tracer:
    """numpy/_core/numeric.py::tensordot: move the summed axes to the end of a and the front
    of b, flatten both to matrices, multiply, and shape the result."""
    ta, tb = as_tracer(a), as_tracer(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0:
            raise ValueError(with_location("negative axes are not supported by tensordot"))
        axes_a = list(range(ta.ndim - n, ta.ndim))
        axes_b = list(range(n))
    else:
        axes_a, axes_b = axes
        axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
        axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    if len(axes_a) != len(axes_b):
        raise ValueError(with_location("shape-mismatch for sum"))
    axes_a = [normalize_axes(int(x), ta.ndim, "tensordot")[0] for x in axes_a]
    axes_b = [normalize_axes(int(x), tb.ndim, "tensordot")[0] for x in axes_b]
    for x, y in zip(axes_a, axes_b):
        if ta.shape[x] != tb.shape[y]:
            raise ValueError(with_location("shape-mismatch for sum"))
    free_a = [d for d in range(ta.ndim) if d not in axes_a]
    free_b = [d for d in range(tb.ndim) if d not in axes_b]
    k = int(np.prod([ta.shape[d] for d in axes_a], dtype=np.int64))
    ma = int(np.prod([ta.shape[d] for d in free_a], dtype=np.int64))
    nb = int(np.prod([tb.shape[d] for d in free_b], dtype=np.int64))
    a2 = ta.transpose(*(free_a + axes_a)).reshape(ma, k) if ta.ndim else ta.reshape(1, 1)
    b2 = tb.transpose(*(axes_b + free_b)).reshape(k, nb) if tb.ndim else tb.reshape(1, 1)
    out_shape = tuple(ta.shape[d] for d in free_a) + tuple(tb.shape[d] for d in free_b)
    return np.matmul(a2, b2).reshape(out_shape)


@composite(np.kron, calls=['np.kron({0}, {1}[..., :2])'], arrays=2, dtypes=NUMERIC,
           max_dims=2)
def kron(a: Any, b: Any) -> Tracer:
    """Every product a[i] * b[j], interleaved: shape a.shape * b.shape."""
    ta, tb = as_tracer(a), as_tracer(b)
    nd = max(ta.ndim, tb.ndim)
    ta = ta.reshape((1,) * (nd - ta.ndim) + ta.shape)
    tb = tb.reshape((1,) * (nd - tb.ndim) + tb.shape)
    sa = sum(((n, 1) for n in ta.shape), ())
    sb = sum(((1, n) for n in tb.shape), ())
    prod = np.multiply(ta.reshape(sa), tb.reshape(sb))
    return prod.reshape(tuple(x * y for x, y in zip(ta.shape, tb.shape)))


@composite(np.cross, calls=['np.cross({0}[..., :3], {1}[..., :3])'], arrays=2,
           dtypes=NUMERIC, min_dims=1, same_shape=True)
def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: Any = None) -> Tracer:
    """The cross product of 3-vectors (2-vectors: the z component, as NumPy's), broadcast
    over the other axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    ta, tb = np.moveaxis(as_tracer(a), axisa, -1), np.moveaxis(as_tracer(b), axisb, -1)
    na, nb = ta.shape[-1], tb.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(with_location(
            "incompatible dimensions for cross product\n(dimension must be 2 or 3)"))
    a0, a1 = ta[..., 0], ta[..., 1]
    b0, b1 = tb[..., 0], tb[..., 1]
    if na == 2 and nb == 2:
        return a0 * b1 - a1 * b0
    a2 = ta[..., 2] if na == 3 else None
    b2 = tb[..., 2] if nb == 3 else None
    zero = 0
    c0 = (a1 * b2 - (a2 * b1 if a2 is not None else zero)) if b2 is not None else \
        -(a2 * b1)
    c1 = ((a2 * b0 if a2 is not None else zero) - (a0 * b2 if b2 is not None else zero))
    c2 = a0 * b1 - a1 * b0
    c0, c1, c2 = np.broadcast_arrays(c0, c1, c2)
    return np.moveaxis(np.stack([c0, c1, c2], axis=-1), -1, axisc)


@composite(np.linalg.norm, calls=['np.linalg.norm({0})',
                                  'np.linalg.norm({0}, axis=-1)',
                                  'np.linalg.norm({0}, 1, axis=0)',
                                  'np.linalg.norm({0}[..., None], np.inf, axis=(-1, 0))',
                                  'np.linalg.norm({0}[None], -1, axis=(0, -1))'],
           dtypes=NUMERIC, min_dims=1, max_dims=2, values="small",
           divergences=("norm-dot", "float-sum-reassociation"), name="np.linalg.norm")
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tracer:
    t = as_tracer(x)
    if isinstance(ord, str) or ord in (2, -2):
        axes = _matrix_norm_axes(t, axis)
        if axes is not None and ord in (2, -2, "nuc"):
            return _singular_value_norm(t, ord, axes, keepdims)
    return Tracer(api.norm(unwrap(t), ord, axis, keepdims))


def complex_norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """np.linalg.norm of complex values, as numpy/linalg/_linalg.py::norm computes it: the
    2-norm and Frobenius norm from the real and imaginary parts' squares (a dot product of
    each when ``axis`` is None), the singular-value norms from the SVD, every other norm the
    real norm of ``abs(x)``."""
    from ..complex import as_complex
    z = as_complex(x)
    axes = _matrix_norm_axes(z.re, axis)
    if axes is not None and ord in (2, -2, "nuc"):
        return _singular_value_norm(z, ord, axes, keepdims)
    if axis is None and (ord is None or (ord == 2 and z.ndim == 1) or
                         (ord == "fro" and z.ndim == 2)):
        re, im = z.re.ravel(), z.im.ravel()
        out = np.sqrt(np.dot(re, re) + np.dot(im, im))
        return out.reshape((1,) * z.ndim) if keepdims else out
    # (NumPy's checks, before anything is computed)
    n_axes = z.ndim if axis is None else len(axis) if isinstance(axis, (tuple, list)) else 1
    if n_axes > 2:
        raise ValueError(with_location("Improper number of dimensions to norm."))
    if n_axes == 1 and isinstance(ord, str):
        raise ValueError(with_location(f"Invalid norm order '{ord}' for vectors"))
    if ord is None or ord == "fro" or (axes is None and ord == 2):
        square = z.re * z.re + z.im * z.im      # NumPy's (x.conj() * x).real
        where = axis if axis is None or isinstance(axis, (tuple, list)) else (axis,)
        return np.sqrt(np.add.reduce(square, axis=tuple(where) if where is not None else None,
                                     keepdims=keepdims))
    return norm(np.abs(z), ord, axis, keepdims)


def _matrix_norm_axes(t: Tracer, axis: Any) -> tuple[int, int] | None:
    """The (row, col) axes of a matrix norm, or None for a vector norm."""
    if axis is None:
        return (0, 1) if t.ndim == 2 else None
    if not isinstance(axis, (tuple, list)) or len(axis) != 2:
        return None
    row, col = (normalize_axes(int(a), t.ndim, "norm")[0] for a in axis)
    if row == col:
        raise ValueError(with_location("Duplicate axes given."))
    return row, col


def _singular_value_norm(t: Tracer, ord: Any, axes: tuple[int, int], keepdims: bool
                         ) -> Tracer:
    """numpy/linalg/_linalg.py::_multi_svd_norm: the largest (2), smallest (-2) or the sum
    ('nuc') of the singular values of the matrices over ``axes``."""
    if t.dtype.kind not in "fc":
        t = t.astype(np.float64)
    s = np.linalg.svd(np.moveaxis(t, axes, (-2, -1)), compute_uv=False)
    out = np.amax(s, axis=-1, initial=0) if ord == 2 else np.amin(s, axis=-1) if ord == -2 else \
        np.sum(s, axis=-1)
    if keepdims:
        shape = list(t.shape)
        shape[axes[0]] = shape[axes[1]] = 1
        out = out.reshape(shape)
    return out


# np.linalg's array-API functions: NumPy's code is a wrapper of the main namespace's (matmul,
# tensordot, outer, trace, vecdot, cross, norms) or a chain of matmuls (multi_dot).
_LINALG = {
    "matmul": (['np.linalg.matmul({0}, {1}.swapaxes(-1, -2))'], 2, 2, _MM),
    "tensordot": (['np.linalg.tensordot({0}, {1}, axes=({0}.ndim - 1, {1}.ndim - 1))'], 2, 1,
                  _MM),
    "outer": (['np.linalg.outer({0}, {1})'], 2, 1, ()),
    "trace": (['np.linalg.trace({0}, offset=1)'], 1, 2, ("float-sum-reassociation",)),
    "vecdot": (['np.linalg.vecdot({0}, {1})'], 2, 1, ("float-sum-reassociation",)),
    "matrix_transpose": (['np.linalg.matrix_transpose({0})'], 1, 2, ()),
    "diagonal": (['np.linalg.diagonal({0}, offset=-1)'], 1, 2, ()),
    "cross": (['np.linalg.cross({0}[..., :3], {1}[..., 1:4])'], 2, 1, ()),
    "multi_dot": (['np.linalg.multi_dot([{0}, {1}.T, {0}])'], 2, 2, _MM),
    "vector_norm": (['np.linalg.vector_norm({0}, axis=-1)',
                     'np.linalg.vector_norm({0}, ord=1)'], 1, 1,
                    ("norm-dot", "float-sum-reassociation")),
    "matrix_norm": (['np.linalg.matrix_norm({0})',
                     'np.linalg.matrix_norm({0}, ord=np.inf)'], 1, 2,
                    ("norm-dot", "float-sum-reassociation")),
}
for _name, (_calls, _arrays, _min_dims, _div) in _LINALG.items():
    if hasattr(np.linalg, _name):
        composite(getattr(np.linalg, _name), calls=_calls, arrays=_arrays, dtypes=NUMERIC,
                  min_dims=_min_dims, max_dims=2, same_shape=_arrays == 2,
                  values="small", divergences=_div, impl=NUMPY, name=f"np.linalg.{_name}")
        numpy_code_for_complex(getattr(np.linalg, _name))


@composite(np.linalg.matrix_power, calls=['np.linalg.matrix_power({0} @ {0}.swapaxes(-1, -2), 3)',
                                          'np.linalg.matrix_power({0} @ {0}.swapaxes(-1, -2), 0)',
                                          'np.linalg.matrix_power({0} @ {0}.swapaxes(-1, -2), 6)'],
           dtypes=NUMERIC, min_dims=2, max_dims=3, values="small", divergences=_MM,
           name="np.linalg.matrix_power")
def matrix_power(a: Any, n: Any) -> Tracer:
    """Repeated squaring, as NumPy's: the identity for n == 0 (broadcast over a stack), the
    operand's dtype throughout; a negative power is a power of the inverse."""
    from ..complex import ComplexTracer, as_complex
    t = a if isinstance(a, ComplexTracer) else as_tracer(a)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise np.linalg.LinAlgError(with_location(
            f"{t.ndim}-dimensional array given. Array must be at least two-dimensional"
            if t.ndim < 2 else "Last 2 dimensions of the array must be square"))
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(with_location("exponent must be an integer")) from None
    if n < 0:
        t, n = np.linalg.inv(t), -n
    if n == 0:
        eye = np.eye(t.shape[-1], dtype=t.dtype)
        eye = as_complex(eye) if eye.dtype.kind == "c" else as_tracer(eye)
        return np.broadcast_to(eye, t.shape).copy()
    if n == 3:   # NumPy's short-cut: (a @ a) @ a, not a @ (a @ a) (float rounding and
        return np.matmul(np.matmul(t, t), t)     # float16 overflow follow the order)
    result, z = None, t
    while True:
        if n & 1:
            result = z if result is None else np.matmul(result, z)
        n >>= 1
        if not n:
            return result
        z = np.matmul(z, z)


# ------------------------------------------------------------------------------------------
# einsum
# ------------------------------------------------------------------------------------------

@composite(np.einsum, calls=["np.einsum('ij,kj->ik', {0}, {1})",
                             "np.einsum('ij,ij->i', {0}, {1})",
                             "np.einsum('ii->i', {0} @ {1}.T)",
                             "np.einsum('ij->', {0})",
                             "np.einsum('...j,...j->...', {0}, {1})"],
           arrays=2, dtypes=NUMERIC, min_dims=2, max_dims=2, same_shape=True,
           divergences=_MM + ("float-sum-reassociation",))
def einsum(subscripts: Any, *operands: Any, out: Any = None, dtype: Any = None,
           order: str = "K", casting: str = "safe", optimize: Any = False) -> Tracer:
    """Each operand's repeated labels become diagonals; then operands are contracted pairwise
    left to right with ``tensordot``-style products (batch labels kept, labels no later
    operand or the output needs summed), and the result is put in the output's label order."""
    if out is not None:
        raise unsupported("np.einsum(out=...)", "compiled functions return new arrays")
    if not isinstance(subscripts, str):
        raise unsupported("np.einsum in its interleaved form (operand, sublist, ...)")
    ts = [as_tracer(o) for o in operands]
    inputs, output = _parse_einsum(subscripts, [t.ndim for t in ts])
    if len(inputs) != len(ts):
        raise ValueError(with_location("more operands provided to einstein sum function "
                                       "than specified in the subscripts string"))
    if dtype is not None:
        for i, t in enumerate(ts):   # NumPy's iterator casts each operand under ``casting``
            if not np.can_cast(t.dtype, dtype, casting):
                raise TypeError(with_location(
                    f"Iterator operand {i} dtype could not be cast from {t.dtype!r} to "
                    f"{np.dtype(dtype)!r} according to the rule {casting!r}"))
        ts = [t.astype(dtype) for t in ts]
    sizes: dict[str, int] = {}
    terms = []
    for i, (t, labels) in enumerate(zip(ts, inputs)):
        own: dict[str, int] = {}
        for lab, n in zip(labels, t.shape):   # (a repeated label of one operand: a diagonal)
            if lab in own and own[lab] != n:
                where = "single operand" if len(ts) == 1 and "->" in subscripts \
                    else f"operand {i}"   # (NumPy's two paths' words)
                raise ValueError(with_location(
                    f"dimensions in {where} for collapsing index {lab!r} don't match "
                    f"({own[lab]} != {n})"))
            own[lab] = n
        for lab, n in zip(labels, t.shape):
            if lab in sizes and sizes[lab] != n and 1 not in (n, sizes[lab]):
                raise ValueError(with_location(
                    f"operands could not be broadcast together with remapped shapes: label "
                    f"{lab!r} has sizes {sizes[lab]} and {n}"))
            sizes[lab] = max(sizes.get(lab, n), n)
        terms.append(_einsum_diagonals(t, labels))
    # a label of size 1 in one operand broadcasts against the others' size (NumPy's rule):
    # make it explicit, so the pairwise reshapes below see matching sizes
    terms = [(t if all(t.shape[i] == sizes[lab] for i, lab in enumerate(labels))
              else np.broadcast_to(t, tuple(sizes[lab] for lab in labels)), labels)
             for t, labels in terms]
    while len(terms) > 1:
        (ta, la), (tb, lb) = terms[0], terms[1]
        later = set(output).union(*[set(lab) for _t, lab in terms[2:]])
        terms = [_contract(ta, la, tb, lb, later, sizes)] + terms[2:]
    t, labels = terms[0]
    summed = [i for i, lab in enumerate(labels) if lab not in output]
    if summed:   # (in the operands' dtype: einsum does not widen small integers as sum does)
        t = np.sum(t, axis=tuple(summed), dtype=t.dtype)
        labels = [lab for lab in labels if lab in output]
    perm = [labels.index(lab) for lab in output]
    t = t.transpose(*perm) if perm != list(range(len(perm))) else t
    target = tuple(sizes[lab] for lab in output)
    return t if t.shape == target else np.broadcast_to(t, target)


def _parse_einsum(subscripts: str, ndims: Sequence[int]) -> tuple[list[list[str]], list[str]]:
    s = subscripts.replace(" ", "")
    lhs, arrow, rhs = s.partition("->")
    parts = lhs.split(",")
    used = set(c for c in s if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    n_ell = max([nd - len(p.replace("...", "")) for p, nd in zip(parts, ndims) if "..." in p],
                default=0)
    ell = spare[:max(n_ell, 0)]
    inputs = []
    for p, nd in zip(parts, ndims):
        if "..." in p:
            k = nd - len(p.replace("...", ""))
            labels = list(p.replace("...", "\0"))
            i = labels.index("\0")
            labels[i:i + 1] = ell[len(ell) - k:] if k else []
        else:
            labels = list(p)
        if len(labels) != nd:
            raise ValueError(with_location(
                f"einstein sum subscripts string contains too many subscripts for operand"))
        inputs.append(labels)
    if arrow:
        out = list(rhs.replace("...", "\0"))
        if "\0" in out:
            i = out.index("\0")
            out[i:i + 1] = ell
        elif ell:
            raise ValueError(with_location(
                "output has more dimensions than subscripts given in einstein sum, but no "
                "'...' ellipsis provided to broadcast the extra dimensions."))
    else:
        counts: dict[str, int] = {}
        for labels in inputs:
            for lab in labels:
                counts[lab] = counts.get(lab, 0) + 1
        out = ell + sorted(lab for lab, c in counts.items() if c == 1 and lab not in ell)
    return inputs, out


def _einsum_diagonals(t: Tracer, labels: list[str]) -> tuple[Tracer, list[str]]:
    """Repeated labels of one operand ('ii') become its diagonal."""
    labels = list(labels)
    while True:
        dup = next((lab for lab in labels if labels.count(lab) > 1), None)
        if dup is None:
            return t, labels
        i = labels.index(dup)
        j = labels.index(dup, i + 1)
        t = t.diagonal(0, i, j)
        labels = [lab for k, lab in enumerate(labels) if k not in (i, j)] + [dup]


def _sum_out(t: Tracer, labels: list[str], keep: set[str]) -> tuple[Tracer, list[str]]:
    """Labels of one term that nothing else needs are summed out first."""
    drop = tuple(i for i, x in enumerate(labels) if x not in keep)
    if not drop:
        return t, labels
    return np.sum(t, axis=drop, dtype=t.dtype), [x for x in labels if x in keep]


def _contract(ta: Tracer, la: list[str], tb: Tracer, lb: list[str], later: set[str],
              sizes: dict[str, int]) -> tuple[Tracer, list[str]]:
    """Two einsum terms into one: labels in both and needed later are batch labels, labels in
    both and not needed later are summed (a matmul), the rest are free."""
    ta, la = _sum_out(ta, la, later | set(lb))
    tb, lb = _sum_out(tb, lb, later | set(la))
    batch = [x for x in la if x in lb and x in later]
    summed = [x for x in la if x in lb and x not in later]
    free_a = [x for x in la if x not in lb]
    free_b = [x for x in lb if x not in la]
    a = ta.transpose(*[la.index(x) for x in batch + free_a + summed]) if la else ta
    b = tb.transpose(*[lb.index(x) for x in batch + summed + free_b]) if lb else tb
    nb = len(batch)

    def prod(t: Tracer, start: int, count: int) -> int:
        return int(np.prod(t.shape[start:start + count], dtype=np.int64))

    ma, k = prod(a, nb, len(free_a)), prod(a, nb + len(free_a), len(summed))
    nf = prod(b, nb + len(summed), len(free_b))
    a3 = a.reshape(a.shape[:nb] + (ma, k))
    b3 = b.reshape(b.shape[:nb] + (k, nf))
    batch_shape = tuple(max(a.shape[i], b.shape[i]) for i in range(nb))
    shape = batch_shape + a.shape[nb:nb + len(free_a)] + b.shape[nb + len(summed):]
    return np.matmul(a3, b3).reshape(shape), batch + free_a + free_b


FUNCTIONS[np.linalg.norm] = complex_norm
FUNCTIONS[np.linalg.matrix_power] = matrix_power
