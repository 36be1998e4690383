"""A transformer block's normalisations in plain NumPy: softmax attention weights and a layer
norm, compiled with tracearray. Each compiles to a single kernel that reads its input once.

    python examples/softmax_layernorm.py
"""
import numpy as np

import tracearray


@tracearray.compile
def softmax(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


@tracearray.compile
def layernorm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def main() -> None:
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((8, 128, 128), dtype=np.float32)
    x = rng.standard_normal((1024, 768), dtype=np.float32)
    gamma = rng.standard_normal(768, dtype=np.float32)
    beta = rng.standard_normal(768, dtype=np.float32)

    weights = softmax(scores)
    print("softmax:", weights.shape, weights.dtype,
          "rows sum to 1:", bool(np.allclose(weights.sum(axis=-1), 1.0, atol=1e-5)),
          "matches NumPy:", bool(np.allclose(weights, softmax.fn(scores), atol=1e-6)))
    print(softmax.explain(scores))
    y = layernorm(x, gamma, beta)
    print("layernorm:", y.shape, y.dtype,
          "matches NumPy:", bool(np.allclose(y, layernorm.fn(x, gamma, beta), atol=1e-4)))
    print(layernorm.explain(x, gamma, beta))


if __name__ == "__main__":
    main()
