"""Compiled functions on Dask arrays (tracearray/dask): every chunk by tracearray kernels, equal
to NumPy on the same data. Threaded-scheduler tests first (fast, in this process, where the
JIT's counters can be read), then a distributed LocalCluster of two worker processes."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import tracearray  # noqa: E402
from tracearray.dask import NotDistributableError  # noqa: E402
import pickling_helpers as h  # noqa: E402

RNG = np.random.default_rng(7)
X64 = RNG.standard_normal((101, 37))           # 101 rows: ragged last chunks
X32 = X64.astype(np.float32)
W32 = RNG.standard_normal(37).astype(np.float32)
B32 = RNG.standard_normal(37).astype(np.float32)


def threads(*arrays):
    return dask.compute(*arrays, scheduler="threads")


def close(got, want, tol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                  got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_importing_tracearray_does_not_import_dask():
    code = "import sys, tracearray; assert 'dask' not in sys.modules, 'dask imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_elementwise_chunk_by_chunk_with_broadcasting():
    x = da.from_array(X32, chunks=(30, 10))
    y = da.from_array(W32, chunks=20)           # other chunks: aligned to a common refinement
    out = h.dask_elementwise(x, y)
    assert isinstance(out, da.Array) and out.dtype == np.float32
    assert out.chunks == ((30, 30, 30, 11), (10, 10, 10, 7))
    (got,) = threads(out)
    close(got, h.dask_elementwise.fn(X32, W32), 1e-6)


GLOBAL_WEIGHTS = np.linspace(1.0, 2.0, 37)


def test_constants_globals_and_transposed_operands():
    """Arrays the function makes (np.arange) and global arrays it reads follow the chunks
    of the axis they broadcast against; a transposed operand with other chunks is
    rechunked to the common refinement."""
    f = tracearray.compile(lambda a: (a + np.arange(37.0)) * GLOBAL_WEIGHTS)
    (got,) = threads(f(da.from_array(X64, chunks=(25, 10))))
    close(got, (X64 + np.arange(37.0)) * GLOBAL_WEIGHTS, 1e-12)
    g = tracearray.compile(lambda a, b: (a * b.T).sum(axis=0))
    y = X64.T.copy()
    out = g(da.from_array(X64, chunks=(25, 10)), da.from_array(y, chunks=(7, 40)))
    assert out.chunks == ((7, 3, 4, 6, 1, 7, 2, 5, 2),)
    (got,) = threads(out)
    close(got, (X64 * y.T).sum(axis=0), 1e-12)


def test_captured_arrays_are_read_when_the_graph_is_built():
    """An array the function reaches through its bound object is a source of the Dask
    graph, read as it is when the graph is built (trace/captured.py)."""
    class Scale:
        def __init__(self):
            self.w = np.arange(37.0)

        def __call__(self, a):
            return a * self.w

    s = Scale()
    f = tracearray.compile(s)
    (got,) = threads(f(da.from_array(X64, chunks=(25, 10))))
    close(got, X64 * np.arange(37.0), 1e-12)
    s.w[:] = 2.0
    (got,) = threads(f(da.from_array(X64, chunks=(25, 10))))
    close(got, X64 * 2.0, 1e-12)


@pytest.mark.parametrize("row_chunks", [37, 10], ids=["rows-whole", "rows-split"])
def test_row_normalisation(row_chunks):
    x = da.from_array(X32, chunks=(25, row_chunks))
    w, b = da.from_array(W32, chunks=row_chunks), B32   # a Dask and a NumPy argument
    ln, sm = h.dask_layernorm(x, w, b), h.dask_softmax(x)
    assert ln.chunks == sm.chunks == ((25, 25, 25, 25, 1), (37,))   # rows made whole
    got_ln, got_sm = threads(ln, sm)
    close(got_ln, h.dask_layernorm.fn(X32, W32, B32), 1e-5)
    close(got_sm, h.dask_softmax.fn(X32), 1e-6)
    # one blockwise stage, one kernel task per row block, and no tree reduction
    layers = [name for name in sm.__dask_graph__().layers if name.startswith("tracearray-")]
    stages = [name for name in layers if "_stage" in name and not name.endswith("-out0")
              and not name.startswith("tracearray-kernel-")]
    assert len(stages) == 1 and "stage0" in stages[0], layers
    assert len(dict(sm.__dask_graph__().layers[stages[0]])) == 5
    assert not [name for name in layers if name.startswith(("tracearray-sum",
                                                             "tracearray-max"))]


@pytest.mark.parametrize("chunks", [(20, 37), (30, 8), (101, 5)])
def test_reductions_over_split_axes(chunks):
    x = da.from_array(X64, chunks=chunks)
    got = h.dask_reductions(x)
    want = h.dask_reductions.fn(X64)
    assert set(got) == set(want) and all(isinstance(v, da.Array) for v in got.values())
    values = threads(*got.values())
    for k, g in zip(got, values):
        close(g, want[k], 1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_var_and_std_read_the_data_once(dtype):
    """var/std over a split axis: one pass (per-chunk count, sum and squared deviations,
    combined by Chan's formula), not a mean stage and then a deviations stage."""
    data = (X64 * 10).astype(dtype)
    x = da.from_array(data, chunks=(20, 10))
    f = tracearray.compile(lambda a: (a.var(axis=0), a.std(), a.var(axis=0, ddof=1)))
    outs = f(x)
    for out in outs:
        hlg = out.__dask_graph__()
        readers = [k for k, deps in hlg.dependencies.items() if x.name in deps]
        assert len(readers) == 1, readers
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for g, w in zip(threads(*outs), f.fn(data)):
        close(g, w, tol)
    # and the split rows are not gathered into one chunk (no rechunk): column statistics
    # are tree reductions, while their columns stay split
    assert not any("rechunk" in name for name in outs[0].__dask_graph__().layers)
    assert outs[0].chunks == ((10, 10, 10, 7),)


def test_argmax_and_min_with_nan_and_ties_as_numpy():
    x = np.zeros((9, 4))
    x[5, 1] = x[7, 1] = np.nan            # first NaN wins, in a later chunk than the ties
    x[2, 2] = x[6, 2] = 3.0               # first maximum wins across chunks
    f = tracearray.compile(lambda a: (a.argmax(axis=0), a.max(axis=0), a.argmin()))
    got = threads(*f(da.from_array(x, chunks=(3, 2))))
    for g, w in zip(got, f.fn(x)):
        np.testing.assert_array_equal(g, w)


def test_reshapes_follow_the_chunks():
    """A merge of whole axes into a split one, and a split of a split axis into blocks that
    divide its chunks: the same tasks, relabelled (the flat argmin finds an element in a
    late chunk)."""
    x = X64.copy()
    x[93, 4] = -100.0
    f = tracearray.compile(lambda a: (a.argmin(), a.reshape(-1) * 2.0,
                                      a.reshape(101, 37, 1).sum(axis=(1, 2))))
    outs = f(da.from_array(x, chunks=(20, 10)))
    assert outs[1].chunks == ((20 * 37,) * 5 + (37,),)
    for g, w in zip(threads(*outs), f.fn(x)):
        close(g, w, 1e-12)
    g = tracearray.compile(lambda a: a.reshape(10, 10, 37).max(axis=1))
    y = da.from_array(X64[:100], chunks=(20, 37))
    (got,) = threads(g(y))
    close(got, g.fn(X64[:100]), 0)


def test_keyword_static_and_container_arguments():
    x = da.from_array(X64, chunks=(20, 37))
    y = da.from_array(X64 * 2, chunks=(30, 37))
    (got,) = threads(h.power_sum(x, 3))                     # static_argnums=(1,)
    close(got, (X64 ** 3).sum(axis=-1), 1e-12)
    f = tracearray.compile(lambda pair, scale=None: pair[0] * scale - pair[1])
    (got,) = threads(f((x, y), scale=np.float64(0.5)))
    close(got, X64 * 0.5 - X64 * 2, 1e-12)
    g = tracearray.compile(lambda a, *, b: {"d": a - b, "s": (a * b).sum(axis=0)})
    out = g(x, b=y)
    got = dict(zip(out, threads(*out.values())))
    close(got["d"], X64 - X64 * 2, 1e-12)
    close(got["s"], (X64 * X64 * 2).sum(axis=0), 1e-12)


def test_matmul_contracting_a_split_axis():
    """x.T @ x and x.T @ y with the rows split (normal equations): per-chunk products,
    summed by a tree reduction; and x @ w with the contracted columns split."""
    y = X64[:, 0] * 2 - 1
    f = tracearray.compile(lambda a, b: (a.T @ a, a.T @ b, b @ b, (a.T @ a) / len(b) + 1.0))
    got = threads(*f(da.from_array(X64, chunks=(20, 37)), da.from_array(y, chunks=20)))
    for g, w in zip(got, f.fn(X64, y)):
        close(g, w, 1e-12)
    w = RNG.standard_normal((37, 5))
    g = tracearray.compile(lambda a, m: np.tanh(a @ m).sum(axis=0))
    (got,) = threads(g(da.from_array(X64, chunks=(30, 10)), w))
    close(got, g.fn(X64, w), 1e-12)


def test_mixed_program_splits_into_stages():
    x = da.from_array(X64, chunks=(17, 20))
    y = da.from_array(X64[0], chunks=20)
    got = threads(*h.dask_mixed(x, y))
    for g, w in zip(got, h.dask_mixed.fn(X64, X64[0])):
        close(g, w, 1e-12)


def test_ragged_chunks_compile_nothing_new():
    from tracearray.cpu.jit import get_jit
    f = tracearray.compile(lambda a: np.sqrt(a * a + 1.0) - a, device="cpu")
    # compiles its kernels: for whole rows (contiguous blocks) and for blocks of columns
    # (strided views of the array): contiguity changes code, sizes do not
    threads(f(da.from_array(X64, chunks=(50, 37))), f(da.from_array(X64, chunks=(50, 20))))
    before = get_jit().stats.compiles
    for chunks in [(7, 37), (33, 37), (101, 11), (9, 5)]:   # new block shapes, ragged ends
        (got,) = threads(f(da.from_array(X64, chunks=chunks)))
        close(got, np.sqrt(X64 * X64 + 1.0) - X64, 1e-12)
    assert get_jit().stats.compiles == before


def test_the_compiled_stage_is_one_key_every_task_reads():
    """Pickled once and sent once to each worker, not once per task."""
    out = h.dask_elementwise(da.from_array(X32, chunks=(13, 37)), W32)
    hlg = out.__dask_graph__()
    graph = dict(hlg)
    kernels = [k for k in graph if str(k).startswith("tracearray-kernel-")]
    assert len(kernels) == 1
    deps = hlg.get_all_dependencies()
    tasks = [k for k in graph if isinstance(k, tuple) and "_stage0_0-" in k[0]
             and not k[0].endswith("-out0")]
    assert len(tasks) == 8 and all(kernels[0] in deps[k] for k in tasks)


def test_a_second_call_reuses_the_stages_kernels():
    from tracearray import pickling
    from tracearray.dask.replay import StageProgram
    f = tracearray.compile(lambda a: np.tanh(a) * 2.0, device="cpu")
    x = da.from_array(X64, chunks=(25, 37))
    threads(f(x))
    stages = [cf for (fn, _o), cf in pickling._REBUILT.items()
              if isinstance(fn, StageProgram) and "lambda" in fn.name]
    traces = [cf.stats.traces for cf in stages]
    (got,) = threads(f(x))          # a new Dask graph, the same stage program
    close(got, np.tanh(X64) * 2.0, 1e-12)
    assert traces and [cf.stats.traces for cf in stages] == traces


def test_cuda_stages_lower_to_ptx():
    """device="cuda": each stage is compiled for the worker's GPU (here, no GPU: to PTX, and
    through ptxas when it is installed)."""
    from tracearray import pickling
    from tracearray.dask.replay import StageProgram
    from tracearray.gpu import ptx as P

    @tracearray.compile(device="cuda")
    def gpu_softmax_and_colsum(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True), a.sum(axis=0)

    outs = gpu_softmax_and_colsum(da.from_array(X32[:64, :32], chunks=(16, 8)))
    assert outs[0].chunks == ((16,) * 4, (32,))
    stages = [cf for (fn, _o), cf in pickling._REBUILT.items()
              if isinstance(fn, StageProgram) and fn.name.startswith("gpu_softmax")]
    assert stages and all(cf.device == "cuda" for cf in stages)
    for cf in stages:
        blocks = [np.ones(tuple(r[1] if r[0] == "fixed" else 16 for r in recipe), dtype)
                  for recipe, dtype in zip(cf.fn.inputs, cf.fn.dtypes)]
        exe = cf.lower(*blocks).executable
        for kernel in [k for k in exe.kernels if k is not None]:
            assert ".entry" in kernel.ptx
            if P.ptxas_path() is not None:
                P.ptxas(kernel.ptx, "sm_90")


def test_what_cannot_be_distributed_is_a_clear_error():
    x = da.from_array(X64, chunks=(20, 37))
    with pytest.raises(NotDistributableError, match=r"cumsum along axis 0.*split into 6 "
                                                     r"chunks.*rechunk"):
        tracearray.compile(lambda a: np.cumsum(a, axis=0))(x)
    with pytest.raises(NotDistributableError, match=r"slice"):
        tracearray.compile(lambda a: a[1:] - a[:-1])(x)
    with pytest.raises(NotDistributableError, match="depends on the data"):
        tracearray.compile(lambda a: a[a > 0])(x)

    def update(a):
        a += 1
        return a
    with pytest.raises(NotDistributableError, match="immutable"):
        tracearray.compile(update)(x)
    sq = da.from_array(X64[:30, :30], chunks=(10, 10))
    with pytest.raises(NotDistributableError, match=r"multiply pairs axes \[0, 1\].*x \* x.T"):
        tracearray.compile(lambda a: a * a.T)(sq)
    # the same programs along an axis in one chunk are fine
    y = da.from_array(X64, chunks=(101, 10))
    (got,) = threads(tracearray.compile(lambda a: np.cumsum(a, axis=0))(y))
    close(got, np.cumsum(X64, axis=0), 1e-12)


def test_dask_multiprocessing_scheduler():
    """Dask's local process pool pickles each task's compiled stage (cloudpickle)."""
    x = da.from_array(X32, chunks=(20, 10))
    (got,) = dask.compute(h.dask_softmax(x), scheduler="processes", num_workers=2)
    close(got, h.dask_softmax.fn(X32), 1e-6)


def test_lower_and_explain_say_they_take_numpy_arrays():
    x = da.from_array(X64, chunks=(20, 37))
    for call in (h.dask_softmax.lower, h.dask_softmax.explain):
        with pytest.raises(tracearray.InputError, match="take NumPy arrays.*Dask array"):
            call(x)


def test_fallback_runs_the_function_with_dask_array():
    f = tracearray.compile(lambda a: np.cumsum(a, axis=0) * 2.0, fallback="numpy")
    with pytest.warns(RuntimeWarning, match="fallback='numpy'"):
        out = f(da.from_array(X64, chunks=(20, 37)))
    assert isinstance(out, da.Array)
    (got,) = threads(out)
    close(got, np.cumsum(X64, axis=0) * 2.0, 1e-12)


# --------------------------------------------------------------------------------------------
# A distributed cluster: two worker processes
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, silence_logs=40) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_cluster_elementwise_and_ragged(client):
    x = da.from_array(X32, chunks=(13, 37))                # 8 blocks, the last of 10 rows
    out = h.dask_elementwise(x, W32).compute()
    close(out, h.dask_elementwise.fn(X32, W32), 1e-6)

    def rebuilt():   # on each worker: the compiled stages it rebuilt, and their traces
        from tracearray import pickling
        return [cf.stats.traces for cf in pickling._REBUILT.values()]
    traces = client.run(rebuilt)
    assert len(traces) == 2
    for per_worker in traces.values():
        # one compiled stage per process, traced once per block shape (13 and 10 rows),
        # not once per task
        assert per_worker and all(t <= 2 for t in per_worker), traces


@pytest.mark.parametrize("row_chunks", [37, 12], ids=["rows-whole", "rows-split"])
def test_cluster_row_normalisation(client, row_chunks):
    x = da.from_array(X32, chunks=(30, row_chunks))
    got = h.dask_layernorm(x, W32, B32).compute()
    close(got, h.dask_layernorm.fn(X32, W32, B32), 1e-5)


def test_cluster_reductions_and_mixed(client):
    x = da.from_array(X64, chunks=(30, 10))
    got = h.dask_reductions(x)
    want = h.dask_reductions.fn(X64)
    values = dask.compute(*got.values())
    for k, g in zip(got, values):
        close(g, want[k], 1e-12)
    y = da.from_array(X64[0], chunks=10)
    for g, w in zip(dask.compute(*h.dask_mixed(x, y)), h.dask_mixed.fn(X64, X64[0])):
        close(g, w, 1e-12)

