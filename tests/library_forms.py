"""Matrix products, FFTs and small solves in every layout the GPU's library calls translate (cuBLAS,
cuFFT, cuBLAS's batched LU), and some they must leave to tracearray's own kernel or the host, shared by the
emulated and the GPU tests."""
import numpy as np


def spy_on_device(monkeypatch, impls: dict) -> list:
    """Wrap each op's "cuda" implementation (``impls``: op name -> the implementation to
    call) so that what it returns is appended to the returned list (NotImplemented: the host
    ran that call)."""
    from tracearray.gpu import runtime
    from tracearray.ops import EXTERNALS
    runtime.register_device_libraries()
    ran: list = []
    for op, impl in impls.items():
        def spy(*args, _impl=impl, **kw):
            ran.append(_impl(*args, **kw))
            return ran[-1]
        monkeypatch.setitem(EXTERNALS[op].device, "cuda", spy)
    return ran


def spectral_implementations() -> dict:
    """The Jacobi kernels' entry points (gpu/jacobi.py, gpu/least_squares.py) by op."""
    from tracearray.gpu import jacobi, least_squares
    return {"linalg.eigh": jacobi.eigh, "linalg.eigvalsh": jacobi.eigvalsh,
            "linalg.svd": jacobi.svd, "linalg.pinv": least_squares.pinv,
            "linalg.lstsq": least_squares.lstsq}

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


def _cplx(r, shape, dtype=np.complex64):
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


FFT_FORMS = {
    # name: (function, make arguments from a Generator, whether cuFFT takes it)
    "fft_rows": (lambda z: np.fft.fft(z), lambda r: (_cplx(r, (6, 16)),), True),
    "fft_axis0": (lambda z: np.fft.fft(z, axis=0), lambda r: (_cplx(r, (12, 5)),), True),
    "fft_middle_axis": (lambda z: np.fft.fft(z, axis=1), lambda r: (_cplx(r, (3, 10, 4)),), True),
    "fft_truncated_ortho": (lambda z: np.fft.fft(z, 7, norm="ortho"),
                            lambda r: (_cplx(r, (4, 11), np.complex128),), True),
    "ifft": (lambda z: np.fft.ifft(z), lambda r: (_cplx(r, (5, 9)),), True),
    "ifft_forward_norm": (lambda z: np.fft.ifft(z, norm="forward"),
                          lambda r: (_cplx(r, (5, 9), np.complex128),), True),
    "fft_of_a_transposed_view": (lambda z: np.fft.fft(z.T), lambda r: (_cplx(r, (8, 6)),), True),
    "fft_of_computed_complex": (lambda x: np.fft.fft(x * 1j + 1),
                                lambda r: (r.standard_normal((4, 8)).astype(np.float32),), True),
    "rfft": (lambda x: np.fft.rfft(x), lambda r: (r.standard_normal((7, 20)),), True),
    "rfft_axis0_odd": (lambda x: np.fft.rfft(x, axis=0),
                       lambda r: (r.standard_normal((15, 3)).astype(np.float32),), True),
    "rfft_window_power": (lambda x: np.abs(np.fft.rfft(x * np.hanning(x.shape[-1]))) ** 2,
                          lambda r: (r.standard_normal((3, 64)).astype(np.float32),), True),
    "irfft_even": (lambda z: np.fft.irfft(z), lambda r: (_cplx(r, (4, 9)),), True),
    "irfft_odd_axis0": (lambda z: np.fft.irfft(z, 11, axis=0, norm="ortho"),
                        lambda r: (_cplx(r, (6, 3), np.complex128),), True),
    "rfft_round_trip": (lambda x: np.fft.irfft(np.fft.rfft(x), x.shape[-1]),
                        lambda r: (r.standard_normal((5, 12)),), True),
    "irfft_operand_read_again": (lambda z: (np.fft.irfft(z * 2), z * 2),
                                 lambda r: (_cplx(r, (4, 9)),), True),
    "fft_empty_batch": (lambda z: np.fft.fft(z), lambda r: (_cplx(r, (0, 8)),), False),
    "ihfft_empty_batch": (lambda x: np.fft.ihfft(x), lambda r: (r.standard_normal((2, 0, 6)),),
                          False),
    "fft_length_one": (lambda z: np.fft.fft(z, axis=0), lambda r: (_cplx(r, (1, 5)),), True),
    # the host runs these
    "fft_padded": (lambda z: np.fft.fft(z, 20), lambda r: (_cplx(r, (3, 8)),), False),
    "fft_of_real": (lambda x: np.fft.fft(x), lambda r: (r.standard_normal((3, 8)),), False),
    "rfft_float16": (lambda x: np.fft.rfft(x),
                     lambda r: (r.standard_normal((3, 8)).astype(np.float16),), False),
}


def _systems(r, shape, dtype=np.float64):
    n = shape[-1]
    return (r.standard_normal(shape) + n * np.eye(n)).astype(dtype)


LINALG_FORMS = {
    # name: (function, arguments from a Generator, whether cuBLAS's batched LU takes it)
    "solve_vector": (lambda a, b: np.linalg.solve(a, b),
                     lambda r: (_systems(r, (5, 5)), r.standard_normal(5)), True),
    "solve_batched_columns": (lambda a, b: np.linalg.solve(a, b),
                              lambda r: (_systems(r, (7, 6, 6), np.float32),
                                         r.standard_normal((7, 6, 1)).astype(np.float32)), True),
    "solve_4d_batch": (lambda a, b: np.linalg.solve(a * 2, b + 1),
                       lambda r: (_systems(r, (2, 3, 4, 4)), r.standard_normal((2, 3, 4, 1))),
                       True),
    "inv_batched": (lambda a: np.linalg.inv(a) * 3, lambda r: (_systems(r, (9, 5, 5)),), True),
    "inv_float32": (lambda a: np.linalg.inv(a + 1), lambda r: (_systems(r, (8, 8), np.float32),),
                    True),
    "det_batched": (lambda a: np.linalg.det(a), lambda r: (_systems(r, (9, 5, 5)),), True),
    "det_float32": (lambda a: np.linalg.det(a - 1),
                    lambda r: (_systems(r, (3, 8, 8), np.float32),), True),
    "slogdet_logdet": (lambda a: np.linalg.slogdet(a)[1] * 2,
                       lambda r: (_systems(r, (2, 3, 6, 6)),), True),
    "slogdet_sign": (lambda a: np.linalg.slogdet(a - 3)[0],
                     lambda r: (_systems(r, (11, 4, 4), np.float32),), True),
    # the host runs these
    "det_of_a_transposed_view": (lambda a: np.linalg.det(a.mT),
                                 lambda r: (_systems(r, (3, 5, 5)),), False),
    "solve_several_columns": (lambda a, b: np.linalg.solve(a, b),
                              lambda r: (_systems(r, (4, 4)), r.standard_normal((4, 3))), False),
    "solve_broadcast_batch": (lambda a, b: np.linalg.solve(a, b),
                              lambda r: (_systems(r, (4, 4)), r.standard_normal((3, 4, 1))),
                              False),
    "inv_of_a_transposed_view": (lambda a: np.linalg.inv(a.T),
                                 lambda r: (_systems(r, (8, 8), np.float32),), False),
    "inv_large": (lambda a: np.linalg.inv(a), lambda r: (_systems(r, (70, 70)),), False),
}


def _spd(r, shape, dtype=np.float64):
    """Symmetric positive definite matrices, well conditioned."""
    n = shape[-1]
    m = r.standard_normal(shape)
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dtype)


CHOLESKY_FORMS = {
    # name: (function, arguments from a Generator, whether the device's kernel takes it)
    "cholesky_batched": (lambda a: np.linalg.cholesky(a), lambda r: (_spd(r, (7, 6, 6)),),
                         True),
    "cholesky_upper_float32": (lambda a: np.linalg.cholesky(a, upper=True) * 2,
                               lambda r: (_spd(r, (5, 5), np.float32),), True),
    # only the lower triangle is read: garbage above it changes nothing
    "cholesky_reads_the_lower_triangle": (
        lambda a, b: np.linalg.cholesky(a + np.triu(b, 1)),
        lambda r: (_spd(r, (3, 9, 9)), r.standard_normal((9, 9)) * 100), True),
    "cholesky_4d_batch_n64": (lambda a: np.linalg.cholesky(a),
                              lambda r: (_spd(r, (2, 2, 64, 64)),), True),
    # the host runs these
    "cholesky_large": (lambda a: np.linalg.cholesky(a), lambda r: (_spd(r, (70, 70)),), False),
    "cholesky_of_a_transposed_view": (lambda a: np.linalg.cholesky(a.mT),
                                      lambda r: (_spd(r, (3, 5, 5)),), False),
}


def _tall(r, shape, dtype=np.float64):
    """Full-rank m x n matrices (well conditioned: an identity block added)."""
    m, n = shape[-2:]
    return (r.standard_normal(shape) + 3 * np.eye(m, n)).astype(dtype)


QR_FORMS = {
    # name: (function, arguments from a Generator, whether the device's kernel takes it)
    "qr_reduced_tall": (lambda a: np.linalg.qr(a), lambda r: (_tall(r, (4, 9, 5)),), True),
    "qr_complete_tall": (lambda a: np.linalg.qr(a, mode="complete"),
                         lambda r: (_tall(r, (3, 7, 4)),), True),
    "qr_r_wide_float32": (lambda a: np.linalg.qr(a, mode="r") * 2,
                          lambda r: (_tall(r, (5, 3, 6), np.float32),), True),
    "qr_reduced_square_64": (lambda a: np.linalg.qr(a).Q, lambda r: (_tall(r, (2, 64, 64)),),
                             True),
    # magnitudes whose squares overflow or underflow (the norms are taken scaled, as
    # LAPACK's dnrm2: R's diagonal was -inf, Q NaN or the identity)
    "qr_reduced_huge": (lambda a: np.linalg.qr(a),
                        lambda r: (_tall(r, (2, 5, 4)) * 1e200,), True),
    "qr_complete_tiny": (lambda a: np.linalg.qr(a, mode="complete"),
                         lambda r: (_tall(r, (2, 4, 4)) * 1e-200,), True),
    "qr_reduced_float32_huge": (lambda a: np.linalg.qr(a).Q,
                                lambda r: (_tall(r, (3, 4), np.float32) * np.float32(1e25),),
                                True),
    # the host runs these
    "qr_raw": (lambda a: np.linalg.qr(a, mode="raw")[1], lambda r: (_tall(r, (6, 4)),), False),
    "qr_large": (lambda a: np.linalg.qr(a).R, lambda r: (_tall(r, (70, 8)),), False),
}


def _ties(r, shape, dtype=np.float32):
    """Small integers (many ties), NaNs and signed zeros in float data."""
    x = r.integers(-4, 5, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        flat = x.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = -0.0
    return x


def _spread(r, shape, dtype=np.float32):
    """Values with ties and few NaNs, so that most quantiles are numbers: one decimal of a
    normal draw; along the last axis one slice has infinities, one a NaN, one -0.0s."""
    x = np.round(r.standard_normal(shape) * 3, 1).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    rows[0, ::3] = np.inf
    rows[0, 1::5] = -np.inf
    if len(rows) > 2:
        rows[1, -1] = np.nan
        rows[2, ::2] = -0.0
    return x


SORT_FORMS = {
    # name: (function, arguments from a Generator, whether the block sort takes it)
    "sort_rows": (lambda x: np.sort(x, axis=-1), lambda r: (_ties(r, (6, 37)),), True),
    "sort_axis0_f64": (lambda x: np.sort(x, axis=0), lambda r: (_ties(r, (300, 5), np.float64),),
                       True),
    "sort_middle_axis": (lambda x: np.sort(x, axis=1), lambda r: (_ties(r, (3, 40, 4)),), True),
    "argsort_stable": (lambda x: np.argsort(x, axis=-1, kind="stable"),
                       lambda r: (_ties(r, (5, 129)),), True),
    "argsort_stable_reversed_view": (lambda x: np.argsort(x[:, ::-2], axis=1, kind="stable"),
                                     lambda r: (_ties(r, (4, 90)),), True),
    "sort_int8": (lambda x: np.sort(x * 3, axis=-1), lambda r: (_ties(r, (4, 50), np.int8),), True),
    "sort_uint16": (lambda x: np.sort(x, axis=0), lambda r: (r.integers(0, 9, (33, 3)).astype(np.uint16),),
                    True),
    "argsort_int64_stable": (lambda x: np.argsort(x, kind="stable"),
                             lambda r: (_ties(r, (2, 3, 64), np.int64),), True),
    "sort_bool": (lambda x: np.sort(x > 0, axis=-1), lambda r: (_ties(r, (3, 20)),), True),
    "sort_flattened": (lambda x: np.sort(x, axis=None), lambda r: (_ties(r, (8, 9)),), True),
    "sort_length_one": (lambda x: np.sort(x, axis=1), lambda r: (_ties(r, (5, 1)),), True),
    "sort_then_fused": (lambda x: np.sort(x * 2 + 1, axis=-1)[:, ::-1] - 1,
                        lambda r: (_ties(r, (4, 64)),), True),
    "median_rows": (lambda x: np.median(x, axis=-1), lambda r: (_ties(r, (6, 37)),), True),
    "median_even_axis0_keepdims": (lambda x: np.median(x, axis=0, keepdims=True),
                                   lambda r: (_ties(r, (40, 3, 2), np.float64),), True),
    "median_middle_axis_view": (lambda x: np.median(x[:, ::-1, :], axis=1),
                                lambda r: (_ties(r, (3, 33, 4)),), True),
    "median_flattened": (lambda x: np.median(x), lambda r: (_spread(r, (5, 8)),), True),
    "percentile_rows": (lambda x: np.percentile(x, 30, axis=-1), lambda r: (_spread(r, (4, 9)),),
                        True),
    "quantile_rows_linear": (lambda x: np.quantile(x, [0.1, 0.5, 0.9, 1.0], axis=-1),
                             lambda r: (_spread(r, (6, 37)),), True),
    "quantile_axis0_keepdims_f64": (
        lambda x: np.quantile(x, 0.37, axis=0, keepdims=True, method="median_unbiased"),
        lambda r: (_spread(r, (40, 3, 2), np.float64).transpose(2, 0, 1).copy(),), True),
    "quantile_nearest_flattened": (lambda x: np.quantile(x, [0.25, 0.75], method="nearest"),
                                   lambda r: (_spread(r, (7, 9)),), True),
    "quantile_lower_reversed_view": (lambda x: np.quantile(x[:, ::-1], 0.6, axis=1,
                                                           method="lower"),
                                     lambda r: (_spread(r, (5, 20)),), True),
    "quantile_float32_q_array": (
        lambda x: np.quantile(x, np.array([0.2, 0.85], np.float32), axis=-1, method="hazen"),
        lambda r: (_spread(r, (5, 11)),), True),
    "percentile_weibull_f64_then_fused": (
        lambda x: np.percentile(x * 2, [5, 50, 95.5], axis=-1, method="weibull") + 1,
        lambda r: (_spread(r, (4, 16), np.float64),), True),
    "quantile_length_one_rows": (lambda x: np.quantile(x, [0.0, 0.5], axis=-1),
                                 lambda r: (_spread(r, (6, 1)),), True),
    "nanmedian_rows": (lambda x: np.nanmedian(np.where(x > 3, np.nan, x), axis=-1),
                       lambda r: (_spread(r, (6, 10)),), True),
    "nanmedian_all_nan_row_axis0_f64": (
        lambda x: np.nanmedian(np.where(np.arange(3) == 1, np.nan, x), axis=0),
        lambda r: (_spread(r, (9, 3), np.float64),), True),
    "nanmedian_huge_values": (   # NumPy's masked median: an odd count's (a + a) / 2 overflows
        lambda x: np.nanmedian(np.where(x > 2, np.nan, x) * np.float32(2.5e38), axis=-1),
        lambda r: (_spread(r, (8, 7)),), True),
    "nanmedian_huge_values_flattened": (   # NumPy's 1-d median: the middle value
        lambda x: np.nanmedian(np.where(x > 2, np.nan, x) * np.float32(2.5e38)),
        lambda r: (_spread(r, (1, 7)),), True),
    "nanmedian_rows_past_600": (lambda x: np.nanmedian(x, axis=-1),   # NumPy: 1-d medians
                            lambda r: (_spread(r, (3, 700)),), True),
    "isin_of_a_strided_view": (lambda x: np.isin(x, x[::2, ::3] + 1),
                               lambda r: (_spread(r, (6, 10)),), True),
    "isin_int16_inverted": (lambda x: np.isin(x, x[:2], invert=True),
                            lambda r: (r.integers(-9, 9, (5, 7)).astype(np.int16),), True),
    # several axes (and a strided whole array): gathered, kept axes first, then sorted
    "median_two_axes": (lambda x: np.median(x, axis=(0, 1)), lambda r: (_ties(r, (4, 5, 3)),),
                        True),
    "quantile_two_axes_keepdims": (
        lambda x: np.quantile(x, [0.3, 0.7], axis=(0, 2), keepdims=True),
        lambda r: (_spread(r, (4, 5, 3)),), True),
    "nanmedian_two_axes_huge_values": (   # NumPy's masked median: odd counts as (a + a) / 2
        lambda x: np.nanmedian(np.where(x > 2, np.nan, x) * np.float32(3e38), axis=(1, 2)),
        lambda r: (_spread(r, (6, 3, 3)),), True),
    "nanmedian_every_axis_huge_values": (   # a 1-d median for NumPy: the middle value
        lambda x: np.nanmedian(np.where(x > 2, np.nan, x) * np.float32(3e38), axis=(0, 1)),
        lambda r: (_spread(r, (2, 7)),), True),
    "nanpercentile_reversed_view_flattened": (lambda x: np.nanpercentile(x[::-1, ::2], 40),
                                              lambda r: (_spread(r, (6, 9)),), True),
    # integer and bool medians: float64, NumPy's mean of the middle values
    "median_of_ints": (lambda x: np.median(x, axis=-1), lambda r: (_ties(r, (4, 9), np.int32),),
                       True),
    "median_of_uint64_past_2_53": (
        lambda x: np.median(x, axis=0),
        lambda r: (r.integers(2**62, 2**64 - 1, (6, 5), dtype=np.uint64),), True),
    "median_of_bools_two_axes": (lambda x: np.median(x > 0, axis=(0, 2)),
                                 lambda r: (_ties(r, (4, 3, 6)),), True),
    "nanmedian_of_int16": (lambda x: np.nanmedian(x, axis=1),
                           lambda r: (r.integers(-300, 300, (5, 8)).astype(np.int16),), True),
    "quantile_of_ints": (lambda x: np.quantile(x, 0.3, axis=-1),
                         lambda r: (_ties(r, (4, 9), np.int32),), True),
    "quantile_int8_difference_wraps": (   # NumPy's b - a in int8: -128 .. 127 gives -1
        lambda x: np.quantile(x, [0.5, 0.7], axis=-1),
        lambda r: (np.array([[-128, 127], [5, -3], [127, -128]], np.int8),), True),
    "percentile_uint64_lower": (lambda x: np.percentile(x, [10, 95], axis=0, method="lower"),
                                lambda r: (r.integers(0, 2**64 - 1, (7, 4), dtype=np.uint64),),
                                True),
    "nanquantile_int16_float32_q": (
        lambda x: np.nanquantile(x, np.array([0.25, 0.6], np.float32), axis=1),
        lambda r: (r.integers(-300, 300, (5, 8)).astype(np.int16),), True),
    "quantile_bools_higher": (lambda x: np.quantile(x > 0, 0.5, axis=-1, method="higher"),
                              lambda r: (_ties(r, (5, 6)),), True),
    "nanquantile_rows": (lambda x: np.nanquantile(x, 0.3, axis=-1),
                         lambda r: (_spread(r, (4, 9)),), True),
    "nanpercentile_first_row_all_nan": (
        # NumPy's dtype is then the input's (divergence nan-quantile-dtype), its values
        # rounded to it: compared as float64
        lambda x: np.nanpercentile(np.where(np.arange(5)[:, None] == 0, np.nan, x), [10, 50.5],
                                   axis=-1).astype(np.float64),
        lambda r: (_spread(r, (5, 9)),), True),
    "nanquantile_axis0_f64": (lambda x: np.nanquantile(x, [0.2], axis=0, method="weibull"),
                              lambda r: (_spread(r, (13, 4), np.float64),), True),
    "nanpercentile_flattened": (lambda x: np.nanpercentile(x, 95), lambda r: (_spread(r, (6, 7)),),
                                True),
    # the host runs these
    "quantile_weights": (lambda x: np.quantile(x, 0.5, axis=-1, weights=(x > 0) + 1.0,
                                               method="inverted_cdf"),
                         lambda r: (_spread(r, (4, 9)),), False),
    "median_float16": (lambda x: np.median(x, axis=-1),
                       lambda r: (_ties(r, (3, 8), np.float16),), False),
}
# float16 rows the block sort takes (values as bits; the key in float16's own 16 bits)
SORT_FORMS.update({
    "sort_float16": (lambda x: np.sort(x, axis=-1), lambda r: (_ties(r, (3, 8), np.float16),), True),
    "argsort_float16_stable_axis0": (lambda x: np.argsort(x * 1000, axis=0, kind="stable"),
                                     lambda r: (_ties(r, (300, 3), np.float16),), True),
})
# np.lexsort: stable argsorts of the keys in turn and gathers (a composite): on the device
SORT_FORMS.update({
    "lexsort_rows": (lambda x: np.lexsort((x, np.round(x) > 0)), lambda r: (_ties(r, (5, 37)),),
                     True),
    "lexsort_axis0_three_keys_f64": (
        lambda x: np.lexsort((x, -x, x > 1), axis=0),
        lambda r: (_ties(r, (40, 3), np.float64),), True),
})
# rows longer than a block sorts: the radix sort over all the blocks (gpu/radix_sort.py)
SORT_FORMS.update({
    "sort_long_rows": (lambda x: np.sort(x, axis=-1), lambda r: (_ties(r, (2, 4097)),), True),
    "argsort_long_f64_axis0_reversed": (lambda x: np.argsort(x[::-1], axis=0, kind="stable"),
                                        lambda r: (_ties(r, (2049, 3), np.float64),), True),
    "sort_long_1d_int16": (lambda x: np.sort(x), lambda r: (r.integers(-300, 300, 5000)
                                                            .astype(np.int16),), True),
    "argsort_long_bool": (lambda x: np.argsort(x > 0, kind="stable"),
                          lambda r: (_ties(r, (4100,)),), True),
    "sort_long_uint64_middle_axis": (lambda x: np.sort(x, axis=1),
                                     lambda r: (r.integers(0, 2**63, (2, 2050, 2), np.uint64),),
                                     True),
    "median_long_rows": (lambda x: np.median(x, axis=-1), lambda r: (_ties(r, (2, 4101)),), True),
    "quantile_long_rows": (lambda x: np.quantile(x, [0.01, 0.5, 0.99], axis=-1),
                           lambda r: (_spread(r, (3, 4101)),), True),
    "sort_long_with_infinities": (lambda x: np.sort(x * np.float32(1e38) * 10),
                                  lambda r: (_ties(r, (4200,)),), True),
})


def _sym(r, shape, dtype=np.float64):
    """Random symmetric matrices."""
    m = r.standard_normal(shape)
    return (m + np.swapaxes(m, -1, -2)).astype(dtype)


def _rebuilt(w, v):
    """V diag(w) V^T: the same for every valid eigenbasis (signs, repeated values)."""
    return (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)


def _usv(u, s, vt):
    k = s.shape[-1]
    return (u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :]


SPECTRAL_FORMS = {
    # name: (function, arguments from a Generator, whether the device's kernel takes it).
    # Each result is one the decomposition fixes whatever basis it finds (values, |vectors|
    # of distinct values, the matrix rebuilt, projections), so it is NumPy's up to rounding
    "eigh_batched": (lambda a: (np.linalg.eigh(a)[0], np.abs(np.linalg.eigh(a)[1])),
                     lambda r: (_sym(r, (4, 6, 6)),), True),
    "eigh_upper_float32": (lambda a: _rebuilt(*np.linalg.eigh(a, UPLO="U")),
                           lambda r: (np.triu(_sym(r, (3, 5, 5), np.float32)),), True),
    "eigvalsh_reads_one_triangle": (
        lambda a, b: np.linalg.eigvalsh(a + np.tril(b, -1) * 100),
        lambda r: (_sym(r, (2, 9, 9)), r.standard_normal((9, 9))), True),
    "eigh_repeated_values": (lambda a: _rebuilt(*np.linalg.eigh(a)),
                             lambda r: (np.stack([np.eye(5), np.diag([2.0, 1, 2, 1, 2])]),),
                             True),
    "eigh_n64": (lambda a: np.linalg.eigh(a).eigenvalues, lambda r: (_sym(r, (2, 64, 64)),),
                 True),
    "eigh_one_by_one": (lambda a: np.linalg.eigh(a)[1] * np.linalg.eigh(a)[0][..., None, :],
                        lambda r: (-np.abs(r.standard_normal((3, 1, 1))),), True),
    "svd_tall_full": (lambda a: _usv(*np.linalg.svd(a)), lambda r: (_tall(r, (3, 7, 4)),),
                      True),
    "svd_wide_reduced_float32": (
        lambda a: (np.abs(np.linalg.svd(a, full_matrices=False)[2]),
                   np.linalg.svd(a, full_matrices=False)[1]),
        lambda r: (_tall(r, (2, 4, 9), np.float32),), True),
    "svd_values": (lambda a: np.linalg.svd(a, compute_uv=False),
                   lambda r: (r.standard_normal((5, 6, 6)),), True),
    "svd_rank_deficient_projections": (
        lambda a: (lambda u, s, vt: (u @ u.mT, vt.mT @ vt, s[..., :2]))(*np.linalg.svd(a)),
        lambda r: (r.standard_normal((2, 6, 2)) @ r.standard_normal((2, 2, 5)),), True),
    "svd_hermitian": (lambda a: np.linalg.svd(a, hermitian=True, compute_uv=False),
                      lambda r: (r.standard_normal((3, 4, 4)),), True),
    "svdvals_cond_norm2": (lambda a: (np.linalg.svdvals(a), np.linalg.cond(a),
                                      np.linalg.norm(a, 2, axis=(-2, -1))),
                           lambda r: (_tall(r, (4, 8, 8)),), True),
    "pinv_tall": (lambda a: np.linalg.pinv(a), lambda r: (_tall(r, (3, 7, 4)),), True),
    "pinv_wide_float32_rtol": (lambda a: np.linalg.pinv(a, rtol=1e-3) * 2,
                               lambda r: (_tall(r, (2, 4, 9), np.float32),), True),
    "pinv_zero_column_hermitian": (
        lambda a: (np.linalg.pinv(a * [1, 1, 0, 1]), np.linalg.pinv(a.mT @ a, hermitian=True)),
        lambda r: (_tall(r, (2, 5, 4)),), True),
    # a long side past 64 (W in global memory): tall data, a few features
    "svd_tall_data_reduced": (
        lambda a: (lambda u, s, vt: (u @ u.mT, _usv(u, s, vt), s))(
            *np.linalg.svd(a, full_matrices=False)),
        lambda r: (r.standard_normal((2, 300, 7)),), True),
    "svd_wide_data_values_float32": (lambda a: np.linalg.svdvals(a),
                                     lambda r: (r.standard_normal((3, 130)).astype(np.float32),),
                                     True),
    "pinv_tall_data_zero_column": (lambda a: np.linalg.pinv(a * [1, 0, 1, 1]),
                                   lambda r: (r.standard_normal((100, 4)),), True),
    "lstsq_tall_vector": (lambda a, b: np.linalg.lstsq(a, b),
                          lambda r: (r.standard_normal((50, 3)), r.standard_normal(50)), True),
    "lstsq_columns_float32": (lambda a, b: np.linalg.lstsq(a, b, rcond=1e-4),
                              lambda r: (_tall(r, (20, 4), np.float32),
                                         r.standard_normal((20, 3)).astype(np.float32)), True),
    "lstsq_wide_rank_deficient": (
        lambda a, b: np.linalg.lstsq(a * [1, 1, 0, 1, 1, 1], b)[0],
        lambda r: (r.standard_normal((3, 6)), r.standard_normal((3, 2))), True),
    "polyfit": (lambda x, y: np.polyfit(x, y, 2),
                lambda r: (np.linspace(0, 1, 40), np.linspace(0, 1, 40) ** 2 * 3 +
                           r.standard_normal(40) * 0.01), True),
    # the host runs these
    "svd_large": (lambda a: np.linalg.svd(a, compute_uv=False),
                  lambda r: (r.standard_normal((70, 70)),), False),
    "svd_tall_full_matrices": (lambda a: _usv(*np.linalg.svd(a)),
                               lambda r: (r.standard_normal((100, 4)),), False),
    "eigh_of_a_transposed_view": (lambda a: np.linalg.eigvalsh(a.mT),
                                  lambda r: (_sym(r, (3, 5, 5)),), False),
}
