"""A CompiledFunction pickles by reference to its function and options (tracearray/pickling.py)
and runs in process pools, its kernels loaded from the disk cache in the receiving process."""
from __future__ import annotations

import multiprocessing
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import tracearray
from tracearray import config
import pickling_helpers as helpers


def test_module_level_function_pickles_by_name():
    x = np.linspace(0, 1, 7, dtype=np.float32)
    helpers.scaled_exp(x, x)           # called first: it holds machine code now
    back = pickle.loads(pickle.dumps(helpers.scaled_exp))
    assert back is helpers.scaled_exp  # the module's own, as for a plain function
    assert len(pickle.dumps(helpers.scaled_exp)) < 200


def test_options_travel_with_the_function():
    back = pickle.loads(pickle.dumps(helpers.softmax_cpu))
    assert back is not helpers.softmax_cpu and back.fn is helpers.plain_softmax
    assert (back.device, back.static_argnums) == ("cpu", frozenset())
    x = np.random.default_rng(0).standard_normal((3, 5))
    np.testing.assert_allclose(back(x), helpers.plain_softmax(x), rtol=1e-12)
    # a process rebuilds one compiled function per function and options, whatever the count
    # of pickles it receives (a Dask graph sends one per task)
    assert pickle.loads(pickle.dumps(helpers.softmax_cpu)) is back


def test_matmul_precision_travels_with_the_function():
    back = pickle.loads(pickle.dumps(helpers.matmul_tf32))
    assert back.fn is helpers.plain_matmul and back.matmul_precision == "tf32"
    # the same function compiled with the default precision is another compiled function
    default = tracearray.compile(helpers.plain_matmul, device="cpu")
    assert pickle.loads(pickle.dumps(default)).matmul_precision == "float32"


def test_static_argnums_survive():
    back = pickle.loads(pickle.dumps(helpers.power_sum))
    assert back.static_argnums == frozenset({1})
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(back(x, 3), (x ** 3).sum(-1))


def test_lambda_and_closure_pickle_with_cloudpickle():
    pytest.importorskip("cloudpickle")
    k = 3.0
    f = tracearray.compile(lambda x: x * k + 1, device="cpu")
    x = np.arange(4.0)
    f(x)
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(g(x), x * 3 + 1)


def test_lambda_without_cloudpickle_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cloudpickle", None)   # import fails

    def make():
        @tracearray.compile
        def inner(x):
            return x + 1
        return inner

    with pytest.raises(pickle.PicklingError, match=r"'make'.*closure.*module.*cloudpickle"):
        pickle.dumps(make())
    with pytest.raises(pickle.PicklingError, match="is a lambda"):
        pickle.dumps(tracearray.compile(lambda x: x))


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_process_pool_runs_a_compiled_function(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 33)).astype(np.float32)
    y = rng.standard_normal((4, 33)).astype(np.float32)
    expected = helpers.scaled_exp(x, y)     # compiled here: the disk cache holds its kernels
    ctx = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        futures = [pool.submit(helpers.call_and_count, helpers.scaled_exp, x[i:], y[i:])
                   for i in range(3)]
        results = [f.result(timeout=120) for f in futures]
    for i, (out, compiles, disk_hits, _traces) in enumerate(results):
        np.testing.assert_allclose(out, np.exp(x[i:]) * y[i:] + 1.0, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(results[0][0], expected)
        if method == "spawn" and config.cache_dir() is not None:
            # a fresh process: kernels loaded from the disk cache, nothing compiled
            assert compiles == 0 and disk_hits >= 1, (compiles, disk_hits)


def test_process_pool_map_over_a_rebuilt_function():
    ctx = multiprocessing.get_context("spawn")
    xs = [np.full((5, 4), float(i)) for i in range(4)]
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        outs = list(pool.map(helpers.softmax_cpu, xs, timeout=120))
    for x, out in zip(xs, outs):
        np.testing.assert_allclose(out, helpers.plain_softmax(x), rtol=1e-12)
