"""Arrays the compiled function reaches through closures, defaults, the bound object and
global containers are read at every call, as NumPy reads them (trace/captured.py): an
in-place update, or a new array of the same shape and dtype bound to the same place, is
seen without tracing again; another shape or dtype traces again."""
import sys
import types

import numpy as np
import pytest

import tracearray

X = np.arange(3.0)


def compiled(fn):
    return tracearray.compile(fn, device="cpu")


def test_closure_in_place_and_rebound_cell():
    w = np.ones(3)

    def f(x):
        return x + w

    c = compiled(f)
    np.testing.assert_array_equal(c(X), f(X))
    w[:] = 7.0                         # in place
    np.testing.assert_array_equal(c(X), X + 7.0)

    def rebind(v):
        nonlocal w
        w = v
    rebind(np.full(3, -2.0))           # the cell now holds another array
    np.testing.assert_array_equal(c(X), X - 2.0)
    assert c.stats.traces == 1


def test_default_argument_in_place():
    def f(x, w=np.ones(3)):
        return x * w

    c = compiled(f)
    c(X)
    f.__defaults__[0][:] = 4.0
    np.testing.assert_array_equal(c(X), X * 4.0)


def test_bound_method_attribute_in_place_rebound_and_new_shape():
    class Model:
        def __init__(self):
            self.w = np.ones(3)
            self.b = np.zeros(3, np.float32)

        def forward(self, x):
            return np.tanh(x * self.w + self.b)

    m = Model()
    c = compiled(m.forward)
    np.testing.assert_allclose(c(X), m.forward(X))
    m.w -= 0.5 * np.arange(3.0)        # an optimiser step, in place
    np.testing.assert_allclose(c(X), m.forward(X))
    m.b = m.b + np.float32(1.5)        # a new array of the same shape and dtype
    np.testing.assert_allclose(c(X), m.forward(X))
    assert c.stats.traces == 1
    m.w, m.b = np.ones(4), np.ones(4, np.float32)   # another shape: traced again
    np.testing.assert_allclose(c(np.ones(4)), m.forward(np.ones(4)))
    assert c.stats.traces == 2
    m.b = np.zeros(4, np.float64)      # another dtype: traced again
    np.testing.assert_allclose(c(np.ones(4)), m.forward(np.ones(4)))
    assert c.stats.traces == 3


def test_nested_objects_and_lists_of_layers():
    class Layer:
        def __init__(self, n):
            self.w = np.eye(n) * 2.0

    class Net:
        def __init__(self):
            self.layers = [Layer(3), Layer(3)]

        def __call__(self, x):
            for layer in self.layers:
                x = np.maximum(x @ layer.w, 0.0)
            return x

    net = Net()
    c = compiled(net)
    np.testing.assert_allclose(c(X), net(X))
    net.layers[1].w[0, 0] = -5.0
    np.testing.assert_allclose(c(X), net(X))


def test_views_of_a_captured_array_follow_it():
    W = np.arange(12.0).reshape(3, 4)

    def f(x):
        return W.T @ x + W[1, ::-1] + W[:, ::-1].T @ x + W[::-2, 1:3].T[1, :1]

    c = compiled(f)
    x = np.ones(3)
    np.testing.assert_allclose(c(x), f(x))
    W[:] = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_allclose(c(x), f(x))


def test_global_containers_namespaces_and_modules():
    ns = types.SimpleNamespace(w=np.ones(3))
    params = {"w": np.ones(3), "layers": [np.ones(3)]}
    mod = types.ModuleType("tracearray_test_captured_cfg")
    mod.W = np.ones(3)
    sys.modules[mod.__name__] = mod
    try:
        g = {"ns": ns, "params": params, "mod": mod, "np": np}
        code = "def f(x):\n    return (x * ns.w + params['w']) * params['layers'][0] * mod.W\n"
        exec(code, g)
        f = g["f"]
        c = compiled(f)
        np.testing.assert_allclose(c(X), f(X))
        ns.w[:] = 3.0
        params["w"] = np.full(3, 5.0)
        params["layers"][0][:] = 2.0
        mod.W = np.full(3, -1.0)
        np.testing.assert_allclose(c(X), f(X))
        assert c.stats.traces == 1
    finally:
        del sys.modules[mod.__name__]


def test_captured_integer_index_array():
    idx = np.array([2, 0])

    def f(x):
        return x[idx] * 2

    c = compiled(f)
    np.testing.assert_array_equal(c(X), f(X))
    idx[:] = [1, 1]
    np.testing.assert_array_equal(c(X), f(X))
    idx[0] = 3                          # out of bounds now: NumPy's IndexError
    with pytest.raises(IndexError):
        c(X)


def test_captured_mask_values_are_fixed_by_the_trace():
    mask = np.array([True, False, True])

    def f(x):
        return x[mask].sum() + x[mask]

    c = compiled(f)
    np.testing.assert_array_equal(c(X), f(X))
    mask[1] = True                      # another count: another shape, traced again
    np.testing.assert_array_equal(c(X), f(X))
    assert c.stats.traces == 2
    np.testing.assert_array_equal(c(X), f(X))
    assert c.stats.traces == 2


def test_path_that_breaks_traces_again():
    class Holder:
        pass

    h = Holder()
    h.w = np.ones(3)

    def f(x):
        return x + h.w

    c = compiled(f)
    c(X)
    del h.w
    h.w = [1.0, 2.0, 3.0]              # not an array any more: traced again, as NumPy reads it
    np.testing.assert_allclose(c(X), f(X))
    assert c.stats.traces == 2


def test_values_numpy_computes_from_captured_arrays_alone_are_computed_once():
    # documented (docs/sharp-bits.md): no traced operand, so NumPy computes it while tracing
    w = np.ones(3)

    def f(x):
        return x + w.sum()

    c = compiled(f)
    c(X)
    w[:] = 2.0
    np.testing.assert_array_equal(c(X), X + 3.0)


def test_arrays_the_function_makes_stay_constants():
    def f(x):
        table = np.array([1.0, 2.0, 3.0])
        return x * table

    c = compiled(f)
    graph = c.lower(X).graph
    assert graph.input_names == ("x",)


def test_lower_names_the_captured_input():
    class M:
        def __init__(self):
            self.scale = np.full(3, 2.0)

        def run(self, x):
            return x * self.scale

    m = M()
    graph = compiled(m.run).lower(X).graph
    assert graph.input_names == ("x", "<captured self.scale>")


def test_new_layout_of_a_global_or_captured_array_gets_its_own_executable():
    # the fast path checks the layout its executable was built for (a C-ordered array
    # rebound to an F-ordered one of the same shape and values read element 0, 3, 6, ...)
    g = {"np": np, "W": np.arange(9.0).reshape(3, 3)}
    exec("def f(x):\n    return x + W\n", g)
    c = compiled(g["f"])
    x = np.zeros((3, 3))
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))
    g["W"] = np.asfortranarray(g["W"])
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))

    class M:
        w = None

        def f(self, x):
            return x + self.w

    m = M()
    m.w = np.arange(9.0).reshape(3, 3)
    cm = compiled(m.f)
    for _ in range(2):
        np.testing.assert_array_equal(cm(x), m.f(x))
    m.w = np.asfortranarray(m.w)
    for _ in range(2):
        np.testing.assert_array_equal(cm(x), m.f(x))
    m.w = m.w[::-1]
    for _ in range(2):
        np.testing.assert_array_equal(cm(x), m.f(x))
    assert cm.stats.traces == 1


def test_an_in_place_reshape_of_a_captured_array_is_seen():
    class M:
        def __init__(self):
            self.w = np.arange(6.0)

        def f(self, x):
            return x + self.w

    m = M()
    c = compiled(m.f)
    x = np.ones(6)
    for _ in range(2):
        np.testing.assert_array_equal(c(x), m.f(x))
    m.w.shape = (6, 1)                   # the same object, another shape
    for _ in range(2):
        np.testing.assert_array_equal(c(x), m.f(x))
    assert c.stats.traces == 2


def test_an_in_place_reshape_of_a_global_array_is_seen():
    g = {"np": np, "W": np.arange(6.0)}
    exec("def f(x):\n    return x + W\n", g)
    c = compiled(g["f"])
    x = np.ones(6)
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))
    g["W"].shape = (6, 1)
    for _ in range(2):
        np.testing.assert_array_equal(c(x), g["f"](x))


def test_arrays_of_a_static_argument_are_read_at_every_call():
    # a method compiled in a class body with a static self: its arrays are the call's own
    class Model:
        def __init__(self, scale):
            self.w = np.full(3, scale)

        @tracearray.compile(static_argnums=0, device="cpu")
        def forward(self, x):
            return x * self.w

    a, b = Model(1.0), Model(2.0)
    np.testing.assert_array_equal(a.forward(X), X)
    a.w[:] = 3.0
    np.testing.assert_array_equal(a.forward(X), X * 3.0)
    np.testing.assert_array_equal(b.forward(X), X * 2.0)
    a.w = np.full(3, -1.0)
    np.testing.assert_array_equal(a.forward(X), -X)
    np.testing.assert_array_equal(b.forward(X), X * 2.0)
