"""CpuJit (O3 + libmvec + MCJIT), the math provider and the thread pool."""

from __future__ import annotations

import ctypes
import functools
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from llvmlite import ir

from tracearray.codegen import scalar
from tracearray.cpu import pool
from tracearray.cpu.jit import CpuJit, JitError, get_jit
from tracearray.cpu.mathlib import CpuMath, apply_vector_abi

F32 = np.dtype(np.float32)
CHUNK_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def exp_module(op: str = "exp", dt: np.dtype = F32) -> str:
    """void k(float* x, float* out, i64 begin, i64 end): out[i] = op(x[i]) * 2 + 1."""
    ty = scalar.llvm_type(dt)
    i64 = ir.IntType(64)
    module = ir.Module(name="exp_loop")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ty.as_pointer()] * 2 + [i64, i64]), "k")
    x, out, begin, end = fn.args
    x.add_attribute("noalias")
    out.add_attribute("noalias")
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed("<", begin, end), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(begin, entry)
    v = scalar.load_value(b, b.gep(x, [i], inbounds=True), dt)
    r = scalar.lower_op(b, op, [v], [dt], dt, CpuMath())
    r = b.fadd(b.fmul(r, scalar.constant(2, dt)), scalar.constant(1, dt))
    scalar.store_value(b, r, b.gep(out, [i], inbounds=True), dt)
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, end), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


@pytest.fixture(scope="module")
def jit() -> CpuJit:
    return get_jit()


def test_host_description(jit: CpuJit) -> None:
    assert jit is get_jit()
    assert jit.triple and jit.data_layout and jit.cpu_name
    assert isinstance(jit.features, str)


def test_log_loop_calls_libmvec(jit: CpuJit) -> None:
    if not jit.has_vector_math:
        pytest.skip("libmvec not available on this host")
    asm = jit.asm(exp_module("log"))
    from tracearray.cpu.mathlib import _one_variant
    lanes = _one_variant(jit.vector_variants["logf"])[0]   # 8 (AVX2, AVX-512)
    assert "_ZGV" in asm and f"N{lanes}v_logf" in asm, \
        f"the vectorised loop should call libmvec's {lanes}-lane logf"
    ir_text = jit.optimized_ir(exp_module("log"))
    assert f"<{lanes} x float>" in ir_text


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_libm_results_do_not_depend_on_an_elements_position(dtype) -> None:
    """A vectorised loop calls libmvec on whole vectors and its remainder one element at a
    time: both go through the same vector function (mathlib.apply_vector_abi), so equal
    inputs give equal results wherever they lie (bug 73: the remainder's scalar exp rounded
    ulps apart from libmvec's, and np.unique found 19 values of exp over 17 integers)."""
    import tracearray
    ops = (np.exp, np.sin, np.cos, np.log1p, np.tanh, np.arctan, np.cbrt, np.expm1,
           lambda a: np.arctan2(a, 0.7), lambda a: np.power(a, 1.3), lambda a: np.hypot(a, 2.5))
    for n in (3, 17, 67, 1003):
        for value in (-1.0, 0.3, 4.0, 7.25):
            x = np.full(n, value, dtype)
            for op in ops:
                got = np.asarray(tracearray.compile(lambda a, op=op: op(np.abs(a)))(x))
                assert np.unique(got).size == 1, (op, n, value, np.unique(got))


def test_float32_exp_is_inline_and_float64_calls_libmvec(jit: CpuJit) -> None:
    """float32 exp is fastmath.exp_f32 (issue 17: softmax, logsumexp); float64 keeps glibc's."""
    assert "expf" not in exp_module() and "expf" not in jit.asm(exp_module())
    if jit.has_vector_math:
        assert "_ZGV" in jit.asm(exp_module("exp", np.dtype(np.float64)))


def test_float32_tanh_is_inline_vector_code(jit: CpuJit) -> None:
    """float32 tanh is fastmath.tanh_f32 (no libm call, vectorised as it stands); float64
    still calls the C library's tanh (issue 17: gelu_tanh)."""
    module = exp_module("tanh")
    assert "tanhf" not in module
    assert "tanhf" not in jit.asm(module)
    assert "<8 x float>" in jit.optimized_ir(module) or "<16 x float>" in jit.optimized_ir(module)
    assert 'call double @"tanh"' in exp_module("tanh", np.dtype(np.float64))


def test_vector_math_can_be_disabled() -> None:
    plain = CpuJit(vector_math=False)
    assert not plain.has_vector_math
    assert "_ZGV" not in plain.asm(exp_module("log"))
    assert apply_vector_abi("declare float @expf(float)\n", {}) == "declare float @expf(float)\n"


def test_compiled_kernel_results_and_cache(jit: CpuJit) -> None:
    text = exp_module()
    a1 = jit.compile(text, ["k"])
    a2 = jit.compile(text, ["k"])
    assert a1 == a2  # served from the kernel cache
    x = np.linspace(-20, 20, 1003, dtype=np.float32)
    out = np.zeros_like(x)
    CHUNK_KERNEL(a1["k"])(x.ctypes.data, out.ctypes.data, 0, len(x))
    want = np.exp(x) * np.float32(2) + np.float32(1)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(JitError, match="missing"):
        jit.compile(text, ["missing"])


def test_bad_ir_raises_with_excerpt(jit: CpuJit) -> None:
    with pytest.raises(JitError, match=r"(?s)parse.*ret i32 0"):
        jit.compile("define void @f() {\n  ret i32 0\n}\n", ["f"])
    with pytest.raises(JitError):
        jit.compile("define i32 @g(i32 %x) {\n  %y = add i32 %x, %z\n  ret i32 %y\n}\n", ["g"])


def test_compile_from_many_threads(jit: CpuJit) -> None:
    texts = [exp_module(op) for op in ("exp", "log", "sin", "tanh")]
    results: dict[int, dict[str, int]] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            results[k] = jit.compile(texts[k % len(texts)], ["k"])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(8):
        assert results[k] == results[k % len(texts)]


def test_importing_does_not_load_llvm() -> None:
    code = ("import sys, tracearray.cpu.jit, tracearray.cpu.pool, tracearray.cpu.mathlib, tracearray.codegen.scalar;"
            "print('llvmlite.binding' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --------------------------------------------------------------------------
# Thread pool
# --------------------------------------------------------------------------

def test_num_threads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pool.ENV_THREADS, raising=False)
    assert pool.num_threads() >= 1
    monkeypatch.setenv(pool.ENV_THREADS, "3")
    assert pool.num_threads() == 3
    monkeypatch.setenv(pool.ENV_THREADS, " 1 ")
    assert pool.num_threads() == 1
    for bad in ("0", "-2", "many", "1.5"):
        monkeypatch.setenv(pool.ENV_THREADS, bad)
        with pytest.raises(ValueError, match=pool.ENV_THREADS):
            pool.num_threads()


def test_chunk_ranges() -> None:
    assert pool.chunk_ranges(0, 10, 4) == []
    assert pool.chunk_ranges(1000, 1, 1) == [(0, 1000)]
    for n, min_chunk, threads in ((1, 1, 8), (10_000, 1, 2), (1_000_003, 4096, 8), (5000, 4096, 4)):
        chunks = pool.chunk_ranges(n, min_chunk, threads)
        assert chunks == pool.chunk_ranges(n, min_chunk, threads)
        assert chunks[0][0] == 0 and chunks[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
        assert all(e - s >= min_chunk for s, e in chunks[:-1])
        assert len(chunks) <= 4 * threads
    assert len(pool.chunk_ranges(1 << 20, 1, 2)) == 8


def test_parallel_for_matches_serial(jit: CpuJit, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.ENV_THREADS, "4")
    k = CHUNK_KERNEL(jit.compile(exp_module(), ["k"])["k"])
    x = np.random.default_rng(0).standard_normal(1_000_003).astype(np.float32)
    serial, par = np.zeros_like(x), np.zeros_like(x)
    k(x.ctypes.data, serial.ctypes.data, 0, len(x))
    chunks = pool.chunk_ranges(len(x), 4096, pool.num_threads())
    pool.parallel_for(functools.partial(k, x.ctypes.data, par.ctypes.data), chunks)
    assert np.array_equal(serial, par)
    # chunk sums add up to the serial sum
    sums = np.zeros(len(chunks))
    index = {c: j for j, c in enumerate(chunks)}
    pool.parallel_for(lambda s, e: sums.__setitem__(index[(s, e)], float(par[s:e].astype(np.float64).sum())), chunks)
    assert np.isclose(sums.sum(), par.astype(np.float64).sum())


def test_parallel_for_uses_several_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.ENV_THREADS, "3")
    seen: set[int] = set()
    lock = threading.Lock()

    def chunk(begin: int, end: int) -> None:
        with lock:
            seen.add(threading.get_ident())
        time.sleep(0.02)  # releases the GIL like a ctypes call does

    pool.parallel_for(chunk, [(i, i + 1) for i in range(12)])
    assert len(seen) == 3


def test_parallel_for_inline_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.ENV_THREADS, "1")
    idents: list[int] = []
    pool.parallel_for(lambda s, e: idents.append(threading.get_ident()), [(0, 1), (1, 2)])
    assert idents == [threading.get_ident()] * 2

    monkeypatch.setenv(pool.ENV_THREADS, "4")
    done: list[int] = []

    def chunk(begin: int, end: int) -> None:
        if begin == 5:
            raise ZeroDivisionError("chunk 5")
        done.append(begin)

    with pytest.raises(ZeroDivisionError, match="chunk 5"):
        pool.parallel_for(chunk, [(i, i + 1) for i in range(64)])
    pool.parallel_for(chunk, [(0, 1), (1, 2)])  # the pool still works afterwards
    pool.parallel_for(chunk, [])


def test_nested_parallel_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pool.ENV_THREADS, "2")
    total = []
    lock = threading.Lock()

    def inner(s: int, e: int) -> None:
        with lock:
            total.append(e - s)

    pool.parallel_for(lambda s, e: pool.parallel_for(inner, [(0, 5), (5, 10)]), [(0, 1), (1, 2), (2, 3)])
    assert sum(total) == 30
