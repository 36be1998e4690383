"""GPU code generation without a GPU: PTX from llvmlite, assembled by ptxas.

- ``lower(...).as_text("ptx")`` works with no driver (sm_90 by default);
- every LLVM intrinsic the GPU code generator may emit (``ptx.LOWERABLE``) lowers on NVPTX,
  checked in a child process (the NVPTX backend aborts the process on an op it cannot lower),
  and anything else is refused before LLVM sees it;
- every op of the op table, in every dtype of its domain, lowers to PTX that ptxas accepts;
- (``test_gpu_ptx_differential.py``) every kernel the CPU differential tests build also builds
  for the GPU, and its PTX assembles.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracearray
from tracearray.gpu import ptx as P
from tracearray.ops import ALL_DTYPES, OPS, Kind
from tracearray.trace import trace_function

needs_ptxas = pytest.mark.skipif(P.ptxas_path() is None,
                                 reason="ptxas (CUDA toolkit) is not installed: PTX is generated "
                                        "but cannot be assembled here")
_ASSEMBLED: set[str] = set()


def assemble(ptx: str) -> None:
    key = hashlib.sha256(ptx.encode()).hexdigest()
    if key not in _ASSEMBLED:
        P.ptxas(ptx, "sm_90")
        _ASSEMBLED.add(key)


def test_ptx_without_a_gpu() -> None:
    f = tracearray.compile(lambda x, y: np.exp(x) * y + 1.0, device="cuda")
    x = np.ones((4, 5), np.float32)
    text = f.lower(x, x).as_text("ptx")
    assert ".target sm_90" in text and ".entry" in text and ".version 8.0" in text
    assert "call" not in text.split(".entry")[1] or "__nv_" not in text   # libdevice inlined
    assert f.stats.calls == 0


def test_ptx_stage_needs_cuda() -> None:
    f = tracearray.compile(lambda x: x + 1, device="cpu")
    with pytest.raises(ValueError, match="PTX"):
        f.lower(np.ones(3)).as_text("ptx")


def test_target_is_capped_by_the_driver() -> None:
    assert P.target_for(9, 0) == P.GpuTarget(90, 80)
    assert P.target_for(9, 0, driver_version=12000) == P.GpuTarget(90, 80)
    assert P.target_for(8, 6, driver_version=11080).ptx_version == 78
    assert P.target_for(12, 1).cc == 120
    with pytest.raises(P.GpuCodegenError, match="too old"):
        P.target_for(9, 0, driver_version=11040)


def test_unlowerable_calls_are_refused_before_llvm() -> None:
    ir = textwrap.dedent("""
        declare float @llvm.exp.f32(float)
        define void @k(ptr %p) {
          %x = load float, ptr %p
          %y = call float @llvm.exp.f32(float %x)
          store float %y, ptr %p
          ret void
        }""")
    with pytest.raises(P.GpuCodegenError, match="llvm.exp.f32"):
        P.compile_ptx(ir)


def test_libdevice_is_found_or_the_error_names_the_install() -> None:
    try:
        path = P.find_libdevice()
    except P.LibdeviceNotFoundError as e:
        assert "pip install nvidia-nvvm" in str(e)
    else:
        assert path.name == "libdevice.10.bc"


_PROBE = textwrap.dedent("""
    import sys
    from tracearray.gpu.ptx import compile_ptx
    for spec in sys.argv[1:]:
        name, ty, nargs = spec.split(":")
        args = ", ".join([f"{ty} %x"] * int(nargs))
        ir = (f"declare {ty} @{name}({', '.join([ty] * int(nargs))})\\n"
              f"define void @k(ptr addrspace(1) %p) {{\\n  %x = load {ty}, ptr addrspace(1) %p\\n"
              f"  %y = call {ty} @{name}({args})\\n  store {ty} %y, ptr addrspace(1) %p\\n"
              f"  ret void\\n}}\\n")
        print(f"## {name}", flush=True)
        print(compile_ptx(ir), flush=True)
""")
_FLOAT_INTRINSICS = {"fabs": 1, "floor": 1, "ceil": 1, "trunc": 1, "rint": 1, "nearbyint": 1,
                     "round": 1, "roundeven": 1, "sqrt": 1, "copysign": 2, "maximum": 2,
                     "minimum": 2, "maxnum": 2, "minnum": 2, "maximumnum": 2, "minimumnum": 2,
                     "fma": 3, "fmuladd": 3}


@needs_ptxas
def test_whitelisted_float_intrinsics_lower() -> None:
    """All in one child process: an abort there fails this test (naming the intrinsic being
    lowered), not the whole run."""
    specs = [f"llvm.{b}.{s}:{ty}:{n}" for b, n in _FLOAT_INTRINSICS.items()
             for s, ty in (("f16", "half"), ("f32", "float"), ("f64", "double"))]
    assert set(_FLOAT_INTRINSICS) <= P.LOWERABLE
    r = subprocess.run([sys.executable, "-c", _PROBE, *specs], capture_output=True, text=True)
    chunks = r.stdout.split("## ")[1:]
    last = chunks[-1].splitlines()[0] if chunks else "(none)"
    assert r.returncode == 0, f"NVPTX failed while lowering {last}: {r.stderr[-800:]}"
    assert len(chunks) == len(specs)
    for chunk in chunks:
        assemble(chunk.split("\n", 1)[1])


# ------------------------------------------------------------------------------------------
# Every op of the table
# ------------------------------------------------------------------------------------------

def _op_programs():
    """(id, function, args) for every op and dtype of its domain."""
    rng = np.random.default_rng(0)
    out = []
    for name, spec in sorted(OPS.items()):
        if spec.kind is Kind.ELEMENTWISE and spec.ufunc is not None:
            uf = spec.ufunc
            for dt in spec.domain.dtypes:
                args = tuple(np.ones((3, 4), d)
                             for d in spec.domain.operand_dtypes(dt, spec.arity))
                out.append((f"{name}-{dt}", (lambda u: lambda *xs: u(*xs))(uf), args))
    for dt in ALL_DTYPES:
        x = np.ones((3, 40), dt)
        out.append((f"where-{dt}", lambda c, a: np.where(c, a, a[::-1]), (x > 0, x)))
        out.append((f"cast-{dt}", lambda a: tuple(a.astype(d) for d in ALL_DTYPES), (x,)))
        reds = [getattr(np, r) for r in ("sum", "prod", "max", "min", "any", "all", "argmax",
                                         "argmin")]
        for axis in (1, 0, None):
            out.append((f"reductions-{axis}-{dt}",
                        (lambda ax: lambda a: tuple(f(a, axis=ax) for f in reds))(axis), (x,)))
        if dt != np.dtype(bool):
            out.append((f"cumsum-{dt}", lambda a: np.cumsum(a, 1), (x,)))
            out.append((f"cumprod-{dt}", lambda a: np.cumprod(a, 0), (x,)))
            m = rng.integers(0, 3, (5, 7)).astype(dt)
            out.append((f"matmul-{dt}", lambda a, b: a @ b, (m, m.T)))
            out.append((f"matmul-relu-{dt}", lambda a, b: np.maximum(a @ b, a[:, :1]), (m, m.T)))
    x = np.ones((4, 6, 5), np.float32)
    out += [("mean-var", lambda a: (a.mean(), a.var(axis=1)), (x,)),
            ("movement", lambda a: a.transpose(2, 0, 1)[1:, ::2].reshape(4, -1)[None] + 1, (x,)),
            ("broadcast", lambda a: np.broadcast_to(a[:, :1], (4, 6, 5)).squeeze() * 2, (x,)),
            ("reshape-gather", lambda a: a.transpose(1, 0, 2).reshape(6, 20) * 2, (x,)),
            ("concatenate", lambda a: np.concatenate([a, a * 2], axis=1), (x,)),
            ("concatenate", lambda a: np.concatenate([a, a * 2, a, -a, a + 1], axis=1), (x,)),
            ("bmm", lambda a, b: a @ b, (x, x.transpose(0, 2, 1))),
            ("gather", lambda a, i: (a[i] * 2, a[:, i % 6].sum(axis=1), np.take(a, i, mode="clip")),
             (x, np.array([3, -1, 0]))),
            ("scatter", _scatters, (x, np.array([3, -1, 0, 3]))),
            ("random", lambda a, g: a * g.standard_normal(a.shape) + g.integers(0, 7, a.shape),
             (x, np.random.default_rng(0)))]
    for cdt in (np.complex64, np.complex128):   # complex multiplication: the fma primitive
        z = np.ones((3, 5), cdt) * (1 + 2j)
        out.append((f"complex-{cdt.__name__}", lambda a, b: (a * b, np.exp(a) / b), (z, z.T.T)))
    # Primitives reached through NumPy functions and ufunc methods (in every dtype kind).
    from numpy.lib.stride_tricks import sliding_window_view
    for dt in ("float32", "float64", "float16", "int8", "uint32", "bool"):
        y = np.ones((5, 7), dt)
        common = (np.maximum.accumulate(y, axis=1), np.minimum.accumulate(y))
        out.append((f"scans-views-{dt}", lambda a: (np.maximum.accumulate(a, axis=1),
                                                    np.minimum.accumulate(a), a.diagonal(1),
                                                    sliding_window_view(a, 3, axis=1) * 1),
                    (y,)))
        if np.dtype(dt).kind == "f":
            out.append((f"nan-reduce-frexp-{dt}", lambda a: (np.fmax.reduce(a, axis=0),
                                                            np.fmin.reduce(a, axis=1),
                                                            np.frexp(a)), (y,)))
        elif np.dtype(dt).kind == "b":
            out.append((f"bool-reduce-{dt}", lambda a: np.logical_xor.reduce(a, axis=0), (y,)))
        else:
            out.append((f"bit-reduce-{dt}", lambda a: (np.bitwise_and.reduce(a, axis=0),
                                                       np.bitwise_or.reduce(a, axis=1),
                                                       np.bitwise_xor.reduce(a)), (y,)))
        del common
    # External ops (library calls; on the GPU they run on the host for now), with elementwise
    # producers and consumers lowered around them
    spd = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    out += [(f"external-{name}", fn, (spd,)) for name, fn in (
        ("sorts", lambda a: (np.sort(a * 2, axis=0) + 1, np.argsort(-a, kind="stable"),
                             np.partition(a, 1) * 3, np.argpartition(a, 1) + 1,
                             np.lexsort((a[0], a[1])), np.percentile(a + 1, [10, 50], axis=0))),
        ("unique-axis", lambda a: np.unique(np.round(a) * 2, axis=1, return_counts=True)),
        ("linalg", lambda a: (np.linalg.inv(a * 2) + 1, np.linalg.det(a), np.linalg.slogdet(a),
                              np.linalg.cholesky(a), np.linalg.qr(a), np.linalg.svd(a),
                              np.linalg.eigh(a), np.linalg.eigvalsh(a), np.linalg.pinv(a),
                              np.linalg.matrix_rank(a), np.linalg.solve(a, a[:, :2]) - 1)),
        ("lstsq", lambda a: np.linalg.lstsq(a[:, :2], a[:, 0] * 2)),
        ("eig-cond", lambda a: (np.linalg.eig(a + np.triu(a, 1)), np.linalg.cond(a, 1))),
        ("fft", lambda a: (np.fft.fft(a, axis=0), np.fft.irfft(np.fft.rfft(a * 2), 3))),
        ("bitcast", lambda a: (a.view(np.int64) >> 1, a.astype(np.float32).view(np.uint32),
                               (a > 1).view(np.uint8))))]
    # the complex variants of the library ops (a Hermitian positive-definite matrix)
    herm = spd + 0.1j * np.array([[0.0, 1.0, -0.5], [-1.0, 0.0, 0.3], [0.5, -0.3, 0.0]])
    out += [("external-linalg-complex", lambda a: (
        np.linalg.inv(a * 2) + 1, np.linalg.det(a), np.linalg.slogdet(a), np.linalg.cholesky(a),
        np.linalg.qr(a), np.linalg.svd(a), np.linalg.eigh(a), np.linalg.eigvalsh(a),
        np.linalg.pinv(a), np.linalg.solve(a, a[:, :2]) - 1, np.linalg.eig(a),
        np.linalg.cond(a, 1), np.linalg.lstsq(a[:, :2], a[:, 0] * 2)), (herm,))]
    return out


@needs_ptxas
def _scatters(a, i):
    y = a.copy()
    y[i] = 1.0
    np.add.at(y, (slice(None), i % 6), a[:, :1] * 2)
    h = np.zeros(6, np.int64)
    np.add.at(h, i, 1)          # an integer add: the GPU's atomic scatter
    return y, h


@pytest.mark.slow   # one ptxas run per kernel of every op: the longest test of the suite
def test_every_op_lowers_to_ptx_that_ptxas_accepts() -> None:
    seen_ops: set[str] = set()
    failures = []
    for name, fn, args in _op_programs():
        f = tracearray.compile(fn, device="cuda")
        try:
            lowered = f.lower(*args)
            for k in lowered.executable.kernels:
                assemble(k.ptx)
        except Exception as e:   # noqa: BLE001 - collect all failures
            failures.append(f"{name}: {type(e).__name__}: {str(e)[:300]}")
            continue
        seen_ops |= {n.op for n in lowered.graph.nodes()}
        # (and the ops of a probe, which counts a size the data decides first)
        first = trace_function(fn, args, {}, frozenset(), frozenset())
        seen_ops |= {n.op for n in first.graph.nodes()}
    assert not failures, "\n".join(failures)
    missing = set(OPS) - seen_ops
    assert not missing, f"ops never lowered here: {sorted(missing)}"


def test_nested_concatenations_stay_within_the_kernel_parameter_space() -> None:
    """GPU test run 8 (H200): np.pad(x, 2, mode='symmetric') of a 3-d array nested a
    concatenation by selects per axis into one kernel of 1,212 parameters (9,696 bytes; PTX 8.0
    allows 4,352). A concatenation of parts that read one is a concatenation kernel."""
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    for fn in (lambda a: np.pad(a, 2, mode="symmetric"), lambda a: np.pad(a, 1, mode="wrap"),
               lambda a: np.concatenate([np.concatenate([a, a]), np.concatenate([a, -a])])):
        lowered = tracearray.compile(fn, device="cuda").lower(x)
        for k in lowered.executable.kernels:
            if k is not None:
                params = re.search(r"\.entry\s+\w+\(([^)]*)\)", k.ptx).group(1)
                assert params.count(".param") * 8 <= 4352, k.name


def test_ptx_from_the_disk_cache_loads_no_llvm(tmp_path) -> None:
    """A new process whose PTX is all in the disk cache never maps libllvmlite (issue 12's
    warm first call): the PTX key names LLVM by llvmlite's version and library identity,
    the same component as the CPU's kernel key."""
    script = textwrap.dedent("""
        import sys
        import numpy as np, tracearray
        def softmax(x):
            e = np.exp(x - x.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
        low = tracearray.compile(softmax, device="cuda").lower(np.ones((8, 2048), np.float32))
        print(low.executable.disk_hits, low.executable.compiles,
              "llvmlite.binding" in sys.modules)
    """)
    env = {**__import__("os").environ, "TRACEARRAY_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    first, second = (r.stdout.split() for r in runs)
    assert first[1] != "0" and first[2] == "True"       # compiled: LLVM was needed
    assert second == [first[1], "0", "False"]            # every kernel from disk, no LLVM


@needs_ptxas
@pytest.mark.parametrize("dtype,res", [(np.float32, np.float32), (np.float32, np.float64),
                                       (np.float64, np.float64), (np.int8, np.float64),
                                       (np.uint64, np.float64), (np.int16, np.float32)])
def test_quantile_kernel_rounds_like_numpy_and_assembles(dtype, res) -> None:
    """Issue 13: the GPU's quantile kernel (gpu/quantile.py) rounds its product before the
    add, as NumPy's ``_lerp`` does: no fused multiply-add in its PTX (``.rn`` operations,
    which ptxas does not contract), and ptxas accepts it."""
    from tracearray.gpu.quantile import quantile_kernel_ir
    text = P.compile_ptx(quantile_kernel_ir(dtype, res, "ta_quantile_test"), P.DEFAULT_TARGET)
    assert "fma" not in text
    ops = set(re.findall(r"\b(mul|add|sub)(\.rn)?\.f(?:32|64)", text))
    assert {op for op, _ in ops} >= {"mul", "add", "sub"} and all(rn for _, rn in ops)
    assemble(text)


@needs_ptxas
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.uint64,
                                   np.bool_])
def test_median_kernel_assembles(dtype) -> None:
    """The GPU's median kernel (gpu/sort.py; np.median and np.nanmedian's binary search for
    a row's first NaN; integer and bool rows to float64) is accepted by ptxas."""
    from tracearray.gpu.sort import median_kernel_ir
    assemble(P.compile_ptx(median_kernel_ir(dtype, "ta_median_test"), P.DEFAULT_TARGET))


@needs_ptxas
@pytest.mark.parametrize("dtype", [np.uint64, np.int32, np.bool_, np.float32])
def test_quantile_take_kernel_assembles(dtype) -> None:
    """The quantile kernel of the methods without interpolation (results in the values' own
    dtype: a copy of the value read) is accepted by ptxas."""
    from tracearray.gpu.quantile import quantile_kernel_ir
    assemble(P.compile_ptx(quantile_kernel_ir(dtype, dtype, "ta_quantile_take_test"),
                           P.DEFAULT_TARGET))


@needs_ptxas
@pytest.mark.parametrize("axes,shape", [((1, 3), (2, 37, 3, 31)), ((0, 2), (3, 40, 2, 35)),
                                        ((0, 2, 3), (4, 3, 32, 40))])
def test_block_row_over_parallel_dims_on_both_sides_assembles(axes, shape) -> None:
    """A block_row kernel whose rows are indexed by two or more parallel dimensions (a
    reduction over axes (1, 3), with a map after it): the pipelined row prefetch decomposed
    the next row's index inside a branch and then this row's again there, so this row's
    indices did not dominate their later uses (LLVM rejected the kernel; soak
    gpu-2026-12-07-tenth-b, program 1)."""
    def norm(x):
        return (x - x.max(axis=axes, keepdims=True)) / x.mean(axis=axes, keepdims=True)

    lowered = tracearray.compile(norm, device="cuda").lower(np.ones(shape, np.float32))
    for kern in lowered.executable.kernels:
        assemble(kern.ptx)


@needs_ptxas
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_block_row_prefetch_copies_only_whole_cp_async_sizes(dtype) -> None:
    """A block_row row cache of 1-byte values in a vector plan of 2 lanes (beside 8-byte
    values: the int8 sum's int64) asked cp.async for 2 bytes, which it does not copy (4, 8
    or 16): ptxas rejected the kernel (probe session 7). Such accesses are cached by the
    sweep instead."""
    def f(a):
        return a + a.sum(axis=1, keepdims=True), a - a.mean(axis=1, keepdims=True)

    x = (np.arange(4 * 2000) % 100).astype(dtype).reshape(4, 2000)
    lowered = tracearray.compile(f, device="cuda").lower(x)
    for kern in lowered.executable.kernels:
        assert "cp.async.ca.shared.global.2" not in kern.ptx
        assemble(kern.ptx)
