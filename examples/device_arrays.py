"""Device arrays: a function compiled for the GPU takes CuPy and PyTorch arrays without a
copy and returns a ``tracearray.Array`` on the GPU, which CuPy and PyTorch take back without a
copy (``__cuda_array_interface__``, DLPack).

Needs an NVIDIA GPU (``pip install -e ".[cuda]"``); CuPy and PyTorch are each optional. Without
a GPU it says so and exits with status 0.

    python examples/device_arrays.py
"""
import sys

import numpy as np

import tracearray
import tracearray.gpu


def rms_normalize(x):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)


def main() -> int:
    if not tracearray.gpu.is_available():
        print("no usable NVIDIA GPU here: nothing to run (the CPU examples run anywhere)")
        return 0
    f = tracearray.compile(rms_normalize, device="cuda")
    host = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    expected = rms_normalize(host)

    out = f(tracearray.Array.from_numpy(host))
    print("tracearray.Array in:", type(out).__name__, np.allclose(out.numpy(), expected, atol=1e-5))

    try:
        import cupy
    except ImportError:
        print("CuPy not installed: skipped")
    else:
        out = f(cupy.asarray(host))                 # no copy in
        back = cupy.asarray(out)                    # no copy out
        print("CuPy in:", type(back).__name__, np.allclose(cupy.asnumpy(back), expected, atol=1e-5))

    try:
        import torch
    except ImportError:
        print("PyTorch not installed: skipped")
    else:
        out = f(torch.from_numpy(host).cuda())      # no copy in
        back = torch.from_dlpack(out)               # no copy out
        print("PyTorch in:", type(back).__name__,
              np.allclose(back.cpu().numpy(), expected, atol=1e-5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
