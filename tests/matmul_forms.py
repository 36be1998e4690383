"""Matrix products in every layout the GPU's cuBLAS path translates (and some it must leave
to tracearray's own kernel), shared by the emulated and the GPU tests."""
import numpy as np

MATMUL_FORMS = {
    # name: (function, operand shapes, dtype, whether cuBLAS takes it)
    "2d": (lambda a, b: a @ b, ((37, 19), (19, 23)), np.float32, True),
    "2d_f64": (lambda a, b: a @ b, ((8, 5), (5, 9)), np.float64, True),
    "a_transposed": (lambda a, b: a.T @ b, ((19, 37), (19, 23)), np.float32, True),
    "b_transposed": (lambda a, b: a @ b.T, ((37, 19), (23, 19)), np.float32, True),
    "both_transposed": (lambda a, b: a.T @ b.T, ((19, 37), (23, 19)), np.float64, True),
    "offset_views": (lambda a, b: a[2:, 1:] @ b[1:, 3:], ((12, 9), (9, 11)), np.float32, True),
    "vector_matrix": (lambda a, b: a @ b, ((19,), (19, 7)), np.float32, True),
    "matrix_vector": (lambda a, b: a @ b, ((7, 19), (19,)), np.float32, True),
    "dot": (lambda a, b: a @ b, ((19,), (19,)), np.float64, True),
    "strided_vector": (lambda a, b: a[::3] @ b, ((57,), (19, 4)), np.float32, True),
    "batched": (lambda a, b: a @ b, ((3, 6, 5), (3, 5, 4)), np.float32, True),
    "batch_broadcast": (lambda a, b: a @ b, ((6, 5), (4, 5, 3)), np.float32, True),
    "batch_4d": (lambda a, b: a @ b, ((2, 3, 4, 5), (2, 3, 5, 2)), np.float64, True),
    "epilogue": (lambda a, b: np.maximum(a @ b + 1.5, 0), ((33, 17), (17, 29)), np.float32,
                 True),
    "product_and_epilogue": (lambda a, b: (a @ b, np.tanh(a @ b)), ((9, 4), (4, 6)),
                             np.float32, True),
    # cuBLAS cannot take these: tracearray's own kernel runs them
    "int32": (lambda a, b: a @ b, ((6, 5), (5, 4)), np.int32, False),
    "float16": (lambda a, b: a @ b, ((6, 5), (5, 4)), np.float16, False),
    "both_strides_not_unit": (lambda a, b: a[:, ::2] @ b, ((6, 10), (5, 4)), np.float32, False),
    "empty_k": (lambda a, b: a @ b, ((6, 0), (0, 4)), np.float32, False),
}
