"""Quick start: a layer norm in plain NumPy, compiled by tracearray (runs on the CPU)."""
import numpy as np

import tracearray


@tracearray.compile
def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 4096), dtype=np.float32)
    w = rng.standard_normal(4096, dtype=np.float32)
    b = rng.standard_normal(4096, dtype=np.float32)

    y = layernorm(x, w, b)                       # NumPy in, NumPy out; one fused kernel
    expected = layernorm.fn(x, w, b)             # the original NumPy function
    err = float(np.max(np.abs(y - expected)))
    print(f"result {y.dtype}{list(y.shape)}, max |compiled - numpy| = {err:.2e}")
    print(layernorm.explain(x, w, b))            # kernels, bytes, temporaries avoided
    assert err < 1e-4


if __name__ == "__main__":
    main()
