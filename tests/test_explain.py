"""``Explanation.to_dot()``: the plan as a Graphviz picture, and ``to_svg()``."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tracearray


def _linear_softmax(x, w):
    y = np.exp(x @ w)
    return y / y.sum(axis=1, keepdims=True)


def test_dot_shows_kernels_and_the_arrays_between_them() -> None:
    x, w = np.ones((4, 5)), np.ones((5, 6))
    e = tracearray.compile(_linear_softmax, device="cpu").explain(x, w)
    dot = e.to_dot()
    assert dot.startswith("digraph plan {") and dot.rstrip().endswith("}")
    kernels = re.findall(r'^  "(k\d+)" \[shape=box', dot, re.M)
    assert kernels == [f"k{i}" for i in range(len(e.kernels))] and len(kernels) >= 2
    edges = set(re.findall(r'^  "([^"]+)" -> "([^"]+)";', dot, re.M))
    # the arguments by name into the matmul; its result (one array) read by the next kernel
    assert {("x", "k0"), ("w", "k0")} <= edges
    (between,) = [b for a, b in edges if a == "k0"]
    assert (between, "k1") in edges
    for i in range(1, len(kernels)):   # every later kernel reads what an earlier one wrote
        written = {b for a, b in edges if a in kernels[:i]}
        assert any((v, f"k{i}") in edges for v in written)
    assert "temporaries avoided" in dot and "exp" in dot
    for k in e.kernels:   # every value a kernel reads or writes has a node
        for name in k.read_values + k.written_values:
            assert f'  "{name}" [shape=ellipse' in dot


def test_dot_quotes_names() -> None:
    def f(a):
        return a * 2
    f.__name__ = 'f"quoted'
    dot = tracearray.compile(f, device="cpu").explain(np.ones(3)).to_dot()
    assert '"a" -> "k0"' in dot


def test_svg_needs_graphviz(monkeypatch) -> None:
    import shutil
    e = tracearray.compile(lambda a: a + 1, device="cpu").explain(np.ones(3))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Graphviz"):
        e.to_svg()


def test_a_matmul_and_its_epilogue_say_what_runs_them() -> None:
    """explain() names what runs a matmul: NumPy's BLAS on the CPU (the bias and activation
    a kernel after it); on the GPU tracearray's matmul kernel with the map kernel as its
    epilogue, both kernels saying so (the emulated device: integer products, which cuBLAS
    does not take)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_emulator import EmulatedDevice
    from tracearray.gpu import driver

    def linear_relu(x, w, b):
        return np.maximum(x @ w + b, 0)
    x, w, b = np.ones((8, 4), np.int64), np.ones((4, 3), np.int64), np.ones(3, np.int64)
    cpu = tracearray.compile(linear_relu, device="cpu").explain(x, w, b)
    assert cpu.kernels[0].note == "external: NumPy's matmul (BLAS)"
    assert "epilogue" not in str(cpu)
    prev = driver.set_device_for_testing(EmulatedDevice())
    try:
        gpu = tracearray.compile(linear_relu, device="cuda").explain(x, w, b)
    finally:
        driver.set_device_for_testing(prev)
    assert "computing kernel 1 as its epilogue" in gpu.kernels[0].note
    assert gpu.kernels[1].note == "runs inside kernel 0 (its matmul's epilogue)"
