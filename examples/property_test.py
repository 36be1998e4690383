"""A property test of your own function: tracearray.testing draws inputs (NaN, infinities,
signed zeros, subnormals, odd sizes, strided layouts) and compares the compiled function with
NumPy on each; a failure is shrunk to a minimal input and printed with a reproducer.

    python examples/property_test.py          # or run it under pytest: test_* functions
"""
import numpy as np

from tracearray.testing import arrays, check, matches_numpy, shapes


def smooth_l1(pred, target):
    """The Huber / smooth-L1 loss, elementwise."""
    diff = np.abs(pred - target)
    return np.where(diff < 1.0, 0.5 * diff * diff, diff - 0.5)


@matches_numpy(arrays(np.float32, shapes(max_dims=2)), max_examples=10, device="cpu")
def test_softplus(x):
    return np.logaddexp(0.0, x)


def test_smooth_l1() -> None:
    check(smooth_l1, arrays(np.float64, (3, 17)), arrays(np.float64, (17,)),
          max_examples=10, derandomize=True, device="cpu")


if __name__ == "__main__":
    test_softplus()
    test_smooth_l1()
    print("smooth_l1 and softplus match NumPy on every drawn input")
