"""THE list of tracearray's deliberate divergences from NumPy.

Each entry has an ``id`` (cited by the comparator's reports, by tests and by the docs), the
op family and ops it concerns, the text, and how the comparator of ``tracearray.testing``
honours it (``comparator``):

- ``"tolerance"``: covered by an entry of the tolerance table (``compare.TOLERANCES``);
- ``"signed-zero"``: the sign of a zero result is not compared where the divergence applies;
- ``"nan-payload"``: NaN payloads and NaN signs are never compared (NaN positions are);
- ``"unverifiable"``: elements whose value depends on the divergence are not compared;
- ``"numpy-raises"``: NumPy raises at run time where the compiled function returns a value;
  when NumPy's error is this one and the traced graph contains the op, the call is accepted;
- ``"trace"``: the traced graph computes a NumPy-level function another way than NumPy does
  (NumPy's own result is then checked against the graph with this relaxation);
- ``"error"`` / ``"not-compared"``: not a difference of values (a refused program, or a
  property the comparator does not look at).

Ops name the divergences that concern them (``OpSpec.divergences``); a test checks that every
id they name is here and that every entry names ops of the registry.

``docs/divergences.md`` is rendered from this module (a test checks that it is up to date)::

    python -c "import tracearray.ops.divergences as d; print(d.render_markdown(), end='')" \
        > docs/divergences.md
"""
from __future__ import annotations

import platform
from dataclasses import dataclass


COMPARATOR_MODES = ("tolerance", "signed-zero", "nan-payload", "unverifiable", "numpy-raises",
                    "trace", "error", "not-compared")


@dataclass(frozen=True)
class Divergence:
    id: str
    family: str                 # op family: elementwise, cast, reduction, scan, matmul, ...
    ops: tuple[str, ...]        # op-table names or NumPy-level functions it concerns
    text: str
    comparator: str             # how the comparator honours it (see the module docstring)

    def __post_init__(self) -> None:
        assert self.comparator in COMPARATOR_MODES, self.comparator


def _libm_ops() -> tuple[str, ...]:
    """The ops the target's math library computes inexactly (their accuracy family is
    "transcendental")."""
    from .spec import OPS
    return tuple(sorted(n for n, s in OPS.items() if not s.accuracy.exact))


DIVERGENCES: tuple[Divergence, ...] = (
    # --- scalar lowering (the ops' emitters) ---------------------------------------------
    Divergence(
        "int-power-negative-exponent", "elementwise", ("power",),
        'power on integers with a negative exponent: NumPy raises ValueError at run time; a '
        'compiled kernel cannot, so it returns 0, except base 1 -> 1 and base -1 -> -1 or 1 '
        "depending on the exponent's parity (the exact mathematical results).", "numpy-raises"),
    Divergence(
        "float-to-int-cast", "cast", ("cast", "reciprocal"),
        'float -> integer casts of NaN, inf or out-of-range values (and reciprocal of integer '
        "0, which NumPy computes as the cast of 1.0/0): NumPy's result is platform dependent "
        "and it warns.  We reproduce NumPy on x86-64 on every target (the 'integer indefinite' "
        "value INT_MIN of int32/int64, truncated for narrower types; uint64 via the compiler's "
        '2**63 split); out-of-range lanes are selected away before fptosi, so no poison is ever '
        'produced.  On AArch64 NumPy saturates instead.  float -> uint32 only matches NumPy on '
        'x86-64 for values in (-2**31, 2**32); beyond that NumPy is position dependent.', "unverifiable"),
    Divergence(
        "fmax-fmin-signed-zero", "elementwise", ("fmax", "fmin"),
        "fmax/fmin on float32/float64 with (+0.0, -0.0) operands or two NaNs: NumPy's SIMD body "
        'returns the second zero and the first NaN while its scalar tail (last len % '
        'vector-width elements) returns the first zero and the second NaN.  We always give the '
        "SIMD-body result.  Ties of maximum/minimum/fmax/fmin (+0.0 vs -0.0) follow NumPy's x86 "
        "loops (second operand for float32/float64, first for float16); other platforms' NumPy "
        'may differ.', "signed-zero"),
    Divergence(
        "nan-payload", "elementwise", ("*",),
        'NaN payloads and NaN sign bits are not promised to match (NumPy itself differs between '
        'its SIMD body and scalar tail); NaN-ness always matches, with one exception: a '
        'signaling NaN may be quieted (float16 -> float32 in hardware quiets it; LLVM keeps no '
        'signal), so hypot with an infinity, power with a zero exponent and power of a base of '
        'one give their number (inf, 1) where NumPy, whose libm sees the signal, gives NaN. '
        "Signaling NaNs are rare in data, but NumPy 2.4's own float16 quicksort and heapsort "
        'return every NaN as the signaling NaN 0x7c01.', "nan-payload"),
    Divergence(
        "transcendental-ulps", "elementwise", _libm_ops(),
        "transcendental functions (exp, log, sin, power, ...) come from the target's MathLib "
        '(glibc libm/libmvec on the host, except float32 tanh and exp: inline sequences, '
        'cpu/fastmath.py; libdevice on GPUs) while NumPy uses its own SIMD '
        'implementations: results agree within a few ulp, not bit for bit.', "tolerance"),
    # --- kernels ---------------------------------------------------------------------------
    Divergence(
        "float-sum-reassociation", "reduction", ("sum", "mean", "var", "std", "cumsum"),
        "Float sums are reassociated: a kernel sums blocks of 1024 terms in vector partial sums "
        "and combines the blocks (and a full reduction's slots) pairwise; column sums and a "
        "GPU thread's share are compensated (Kahan). NumPy sums its inner loop pairwise and "
        "the other reduced axes in order; cumsum runs in order, as NumPy's, except a long GPU "
        "scan with few rows, which adds tile prefixes to the scanned tile totals (each k-th "
        "output still through at most k - 1 roundings). Results agree within the summation "
        "bound d(n)·eps·Σ|x| (d(n) ≤ 1024 + log2(n/512) + 8 roundings), not bit for bit; when a partial sum could overflow in some order "
        "(Σ|x| near the dtype's maximum) the result is order dependent (inf, NaN or finite) and "
        "not compared.", "tolerance"),
    Divergence(
        "float-prod-reassociation", "reduction", ("prod", "cumprod"),
        "Float products are reassociated like sums. Products agree within n·eps relative "
        "error while no partial product can overflow or underflow; otherwise the result depends "
        "on the order (e.g. [1e-200, 1e-200, 1e200, 1e200] is 0 sequentially and 1 paired) and "
        "is not compared.", "tolerance"),
    Divergence(
        "float16-accumulation", "reduction", ("sum", "prod", "cumsum", "cumprod", "mean"),
        "float16 sums and products accumulate in float32 and round once, where NumPy rounds to "
        "float16 after every step along a strided axis: results differ by the float16 "
        "summation bound, and a float16 partial sum that NumPy overflows to inf may stay finite "
        "here (not compared when Σ|x| can exceed float16's maximum).", "tolerance"),
    Divergence(
        "matmul-blocking", "matmul", ("matmul", "dot"),
        "Float matrix products are summed in another blocking than NumPy's BLAS call: results "
        "agree within K·eps·(|A|@|B|); rows or columns holding inf/NaN may produce NaN in one "
        "and inf in the other and are not compared.", "tolerance"),
    Divergence(
        "max-min-signed-zero", "reduction", ("max", "min"),
        "max/min reductions over both +0.0 and -0.0 (and no larger/smaller value) may return "
        "either zero: the vectorised reduction compares lanes in another order than NumPy.",
        "signed-zero"),
    # --- tracing (the graph computes a NumPy function another way) ------------------------
    Divergence(
        "complex-rounding", "elementwise", ("fma",),
        "Complex multiplication is fused as NumPy's SIMD loops compute it on x86-64 "
        "(fma(ar, br, -ai bi) + i fma(ar, bi, ai br)); NumPy's loop for negative strides (and "
        "a machine without FMA) does not fuse, so the comparator accepts either rounding of "
        "each fma (unverifiable where only one of them overflows). Complex results are also "
        "compared normwise, within 8 eps |z| of NumPy's value: the elementary functions are "
        "real formulas, accurate relative to |z| rather than in each part "
        "(trace/complex_math.py).", "trace"),
    Divergence(
        "complex-weak-scalar-product", "elementwise", ("multiply", "add", "subtract"),
        "`1j * s` (or `+`, `-`, `/`) with a NumPy float64 *scalar* s on the right is Python's "
        "complex arithmetic (np.float64 subclasses float), a weak Python complex that does not "
        "widen complex64 or float32 operands later; a 0-d traced value cannot be weak, so the "
        "compiled function gives complex128. `s * 1j` is a NumPy complex128 in both.",
        "not-compared"),
    Divergence(
        "clip-signed-zero", "elementwise", ("clip",),
        "np.clip with scalar bounds returns x itself where x equals a bound (x=0.0, hi=-0.0 "
        "gives 0.0) and the bound with array bounds; the graph's maximum/minimum always follows "
        "np.minimum/np.maximum. Only the sign of a zero result can differ (and what reads that "
        "sign afterwards: signbit, copysign, 1/x).", "trace"),
    Divergence(
        "scalar-power", "elementwise", ("power",),
        "A 0-d reduction result is a NumPy scalar, and `scalar ** y` is evaluated with the C "
        "library's pow; the graph cannot tell a scalar from a 0-d array and uses np.power's "
        "loop. The two can differ by a few ulp.", "trace"),
    Divergence(
        "logaddexp-reduce", "reduction", ("logaddexp", "logaddexp2"),
        "np.logaddexp.reduce and np.logaddexp2.reduce factor out the largest term, "
        "m + log(sum(exp(x - m))), where NumPy folds the terms in one at a time with "
        "logaddexp: the results agree within the exp/log tolerance and the sum's bound, not "
        "bit for bit.", "trace"),
    Divergence(
        "norm-dot", "reduction", ("linalg.norm",),
        "np.linalg.norm(x) with axis=None (ord None/'fro'/2) computes sqrt(dot(x, x)) with "
        "BLAS; the graph computes sqrt(sum(x * x)), summed in another order.", "trace"),
    Divergence(
        "random-bit-stream", "random", ("philox",),
        "Random draws inside a compiled function (np.random.default_rng(seed), a Generator "
        "passed in, the legacy np.random.* functions) come from a counter-based Philox-4x32-10 "
        "generator computed in the kernel, not from NumPy's PCG64 or MT19937 stream: the "
        "distributions are NumPy's (checked statistically), the numbers are not. A fixed seed "
        "reproduces on every call and on both targets (integers and uniform floats bit for "
        "bit, transcendental distributions within the libm/libdevice tolerance); a Generator "
        "or the global state advances by one 64-bit draw per call (NumPy advances it by as "
        "many as it draws). Normals use Box-Muller, exponentials -log1p(-u) (NumPy: ziggurat); "
        "integers of a range r are exact except with probability below 2**-32 per element. "
        "np.random.seed(s) inside a compiled function makes the legacy draws after it "
        "reproduce on every call, as NumPy's do, but does not reseed NumPy's global state "
        "for code that runs after the call.",
        "not-compared"),
    # --- API-level: programs are refused or results are not views -------------------------
    Divergence(
        "python-scalars-static", "api", ("*",),
        "Python scalar arguments (int, float, bool) are static: their value is part of the "
        "trace and cache key (as NumPy's weak scalars they can change the result dtype), so a "
        "new value re-traces. NumPy scalars and arrays are traced.", "not-compared"),
    Divergence(
        "writes-refused", "api", ("__setitem__",),
        "Writes are NumPy's (into arrays the function made and, written back after the call, "
        "into arguments and global arrays; scatters and ufunc.at included), except these, "
        "refused with UnsupportedOperationError: writing through a reshape or ravel of an "
        "argument, or through np.ascontiguousarray / np.asfortranarray / np.asarray(order=) "
        "of one, and reading such a value after the argument was written (NumPy makes it a "
        "view or a copy depending on the caller's strides, unknown when tracing); a call "
        "whose written argument shares memory with another argument "
        "(InputError). Writing into np.broadcast_arrays results raises NumPy's read-only "
        "ValueError (NumPy 2 still writes, with a DeprecationWarning).", "error"),
    Divergence(
        "writes-on-error", "api", ("__setitem__",),
        "A compiled function that raises one of NumPy's run-time errors (an index out of "
        "range in x[i] = v or np.put, a failed check such as np.histogram's finite range) "
        "raises it after its kernels ran and writes none of its updates into the caller's "
        "arguments and global arrays; NumPy has made the writes that came before the failing "
        "operation.", "not-compared"),
    Divergence(
        "overlapping-assignment-order", "api", ("__setitem__", "copyto"),
        "An assignment whose source overlaps its destination with another stride (x[::2] = "
        "x[:5], np.copyto(x[::2], x[:5])) reads the whole source before writing, as if it "
        "were copied first; NumPy copies element by element there, so later elements may "
        "read values it already wrote, and its result depends on the arguments' memory "
        "layout (an argument with a negative stride gives another one).", "not-compared"),
    Divergence(
        "zero-d-results-are-scalars", "api", ("*",),
        "A 0-d result is always returned as a NumPy scalar (np.float32(...)), as NumPy's "
        "ufuncs and reductions return it; where NumPy returns a 0-d ndarray instead (np.where, "
        "astype or a view of a 0-d array) the compiled function still returns the scalar: the "
        "traced graph does not distinguish the two. Values and dtypes are the same.",
        "not-compared"),
    Divergence(
        "python-scalar-results", "api", ("allclose", "array_equal", "array_equiv"),
        "Where NumPy returns a Python bool (np.allclose, np.array_equal, np.array_equiv), the "
        "compiled function returns the NumPy bool of the same value (np.True_ / np.False_): "
        "a traced value cannot become a Python object. `if np.allclose(a, b):` inside a "
        "compiled function raises ConcretizationError, as any branch on array values does.",
        "not-compared"),
    Divergence(
        "views-are-copies", "api", ("reshape", "transpose", "slice", "broadcast_to"),
        "A function that returns a view of its argument (or the argument itself, after "
        "updating it in place) returns a new array with the same values when compiled; "
        "writing to that result later does not modify the argument. Likewise two results "
        "that are views of one array (`return y, y[::2]`) are separate arrays, which do not "
        "share memory (the same array returned twice is one array). Writability is NumPy's: "
        "a view NumPy returns read-only (np.diag, broadcast_to, sliding_window_view) is "
        "returned read-only.", "not-compared"),
    Divergence(
        "traced-layout-flags", "api", ("ndarray.flags", "ndarray.view", "ndarray.strides",
                                       "np.lib.stride_tricks.as_strided"),
        "Inside a compiled function, `x.flags` answers as NumPy would for the same view of "
        "C-contiguous arrays: the trace takes every argument and every array it makes as "
        "C-contiguous, whatever the caller's strides (a view's contiguity, ownership and "
        "writability are NumPy's: `x.T.flags.c_contiguous` is False). An argument passed in "
        "Fortran order or as a strided view reads as C-contiguous, and a result NumPy would "
        "lay out in Fortran order (`np.exp(x.T)` of a C-contiguous x) reads as "
        "C-contiguous. Values do not depend on it, with one exception: NumPy reads an array "
        "as items of another size (`x.view(np.uint8)`) only where its last axis is "
        "contiguous, and raises ValueError for an argument whose last axis is strided (a "
        "Fortran-order matrix, `a[:, ::2]` passed in); tracearray reads the bytes of such an "
        "argument's values in C order. `x.strides` is NumPy's for the same view of "
        "C-contiguous memory (and so is what np.lib.stride_tricks.as_strided reads), except "
        "on axes of length 1, where NumPy's own functions disagree (`x[:, None]` has stride "
        "0 there, `np.expand_dims(x, 1)` another).", "not-compared"),
    Divergence(
        "native-byte-order", "api", ("ndarray.view", "ndarray.astype", "ndarray.byteswap"),
        "Arrays in the other byte order (`'>f8'` on a little-endian machine), as arguments, "
        "globals or arrays the function reaches, are read as their values in native order: "
        "results are in native order (NumPy keeps `'>i2'`, and `x.astype('>f8')` is "
        "`'<f8'` here), and a view of such an argument's bytes (`x.view(np.uint8)`) sees "
        "the native bytes of its values, where NumPy's sees the bytes as stored.",
        "not-compared"),
    Divergence(
        "recycled-result-memory", "api", ("*",),
        "On the CPU a result of 1 MiB or more is a view of a block tracearray recycles "
        "(`.base` is that block, `flags.owndata` is False), so `ndarray.resize` refuses it; "
        "values, shape, dtype, strides and writability are NumPy's. The block is reused only "
        "after every view of it is gone; `TRACEARRAY_OUTPUT_ARENA_MB=0` returns plain arrays.",
        "not-compared"),
    Divergence(
        "fft-empty-padding", "function", ("np.fft.hfft", "np.fft.irfft"),
        "np.fft.irfft (and hfft, which calls it) of an empty axis with a length n > 0 pads "
        "the axis to n // 2 + 1 with zeros: the transform of zeros, an array of zeros. "
        "NumPy 2.4 pads it without writing the padding, so its result is uninitialised "
        "memory (a different array on each call).", "not-compared"),
    Divergence(
        "unpackbits-empty-padding", "function", ("np.unpackbits",),
        "np.unpackbits of an empty axis with a count > 0 returns count zeros, the zero "
        "padding NumPy's documentation promises for counts past the available bits. NumPy "
        "2.4 does not write that padding when the axis is empty, so its result is "
        "uninitialised memory (a different array on each call).", "not-compared"),
    Divergence(
        "gpu-fft-rounding", "function", ("np.fft.fft", "np.fft.ifft", "np.fft.rfft",
                                         "np.fft.irfft"),
        "On the GPU, FFTs are cuFFT's (device='cuda', when the library is found): not "
        "pocketfft's bits, but each element within 4 * eps * log2(n) * sqrt(n) * ||x||_2 "
        "(times NumPy's norm factor) of NumPy's value, x the transform's operand; NumPy's "
        "normalisation is applied after the transform. Where the transform's partial sums "
        "may pass the dtype's range (sqrt(n) * ||x||_2 above its largest value), an element "
        "may be an infinity in one library's order and finite in the other's. On the CPU "
        "FFTs are NumPy's own, bit for bit.", "tolerance"),
    Divergence(
        "gpu-linalg-rounding", "function", ("np.linalg.solve", "np.linalg.inv",
                                            "np.linalg.det", "np.linalg.slogdet",
                                            "np.linalg.cholesky", "np.linalg.qr"),
        "On the GPU, solves with one right-hand side per system, inverses and determinants "
        "of small contiguous matrices (n <= 64) are cuBLAS's batched LU with partial "
        "pivoting, not LAPACK's, and Cholesky and QR factors of such matrices (QR: m, n <= "
        "64) a block's unblocked factorisation (QR with LAPACK's reflectors, so its signs); "
        "larger ones (and solves with several right-hand sides) cuSOLVER's getrf/getrs, "
        "potrf, geqrf/orgqr: "
        "each element within 8 * max(m, n) * eps * cond(A) * max|x| of NumPy's value (x the "
        "result), per matrix; a determinant within 8 * n * eps * cond(A) + 4 eps of "
        "NumPy's relatively (slogdet's logarithm that much absolutely, its sign exactly where "
        "that bound is below 1/2). A singular matrix (an exact zero pivot, LAPACK's "
        "criterion), or one that is not positive definite for np.linalg.cholesky (a pivot "
        "<= 0; a NaN gives NaNs, as NumPy's LAPACK does), raises "
        "NumPy's LinAlgError when the host next waits for the device, not at the call (with "
        "NumPy inputs: at the end of the call); a singular matrix's determinant is NumPy's "
        "0 (sign 0, logarithm -inf).", "tolerance"),
    Divergence(
        "gpu-spectral-basis", "function", ("np.linalg.eigh", "np.linalg.eigvalsh",
                                           "np.linalg.svd", "np.linalg.svdvals",
                                           "np.linalg.cond", "np.linalg.matrix_rank",
                                           "np.linalg.pinv", "np.linalg.lstsq"),
        "On the GPU, eigenvalues and eigenvectors of small symmetric matrices and singular "
        "value decompositions of small matrices (contiguous, m, n <= 64) are Jacobi "
        "rotations', not LAPACK's, and of larger ones cuSOLVER's (syevd, gesvd), the same "
        "bounds: eigenvalues and singular values within 8 * max(m, n) * "
        "eps * ||A||_2 of NumPy's, in NumPy's order; the vectors an orthonormal basis that "
        "satisfies the decomposition within that much (A v = w v, A A^T u = s^2 u, A^T A v = "
        "s^2 v), but not LAPACK's basis: a vector may have the other sign, and where values "
        "repeat or are zero the basis of their space is another (U and V^T still pair: U "
        "diag(s) V^T is A). A non-finite matrix gives NaN results (LAPACK's are NaN in part, "
        "or for svd and pinv NumPy raises LinAlgError('SVD did not converge'), or returns "
        "other numbers, as LAPACK's code paths fall). A pseudo-inverse is "
        "NumPy's formula over that SVD: within 8 * max(m, n) * eps * cond(A) * max|x| of "
        "NumPy's, x the result; a least-squares solution within 8 * max(m, n) * eps * "
        "(cond * max|x| + cond^2 * ||r|| / ||A||_2), its rank exact unless a singular value "
        "lies within the rounding of the cutoff (SVDs of tall or wide matrices whose shorter "
        "side is at most 64 and longer at most 4096).", "tolerance"),
    Divergence(
        "gpu-eig", "function", ("np.linalg.eig", "np.linalg.eigvals"),
        "On the GPU, eigenvalues and eigenvectors of nonsymmetric matrices larger than 64 x 64 "
        "are cuSOLVER's geev, not NumPy's LAPACK: each eigenvalue within 8 * n * eps * "
        "||A||_2 * kappa of NumPy's (kappa: its condition number, large for nearly defective "
        "matrices), possibly in another order; each eigenvector a unit vector that satisfies "
        "A x = w x within 8 * n * eps * ||A||_2, normalised as LAPACK's (largest component "
        "real) but possibly of the other sign. Whether the results are real or complex is "
        "NumPy's rule on these values (all imaginary parts zero), so a matrix whose "
        "eigenvalues are real in exact arithmetic but not in rounding may give the other kind "
        "than NumPy's. Smaller matrices run NumPy's LAPACK on the host.", "tolerance"),
    Divergence(
        "gpu-matmul-tf32", "matmul", ("matmul", "dot"),
        "Only with compile(..., matmul_precision='tf32') (an opt-in; the default is "
        "'float32'): on the GPU, float32 matrix products that cuBLAS runs may use TF32 tensor "
        "cores, which round each operand to 10 mantissa bits before multiplying and add in "
        "float32 (about 1e-3 relative error instead of float32's K * eps bound; JAX's default "
        "precision and torch.backends.cuda.matmul.allow_tf32 do the same). float64 products, "
        "the CPU and the products of tracearray's own matmul kernel keep float32 rounding. "
        "The comparator's tolerance is float32's, so it does not accept such a function's "
        "products.", "not-compared"),
    Divergence(
        "nan-quantile-dtype", "function", ("np.nanmedian", "np.nanquantile",
                                           "np.nanpercentile", "np.quantile",
                                           "np.percentile"),
        "Along axes where NumPy applies its 1-d function one slice at a time "
        "(np.apply_along_axis: several axes, axis=(), or keepdims with q arrays), NumPy's "
        "result dtype is the first slice's: the input's (float32, float16) when that slice "
        "is all NaN, float64 otherwise (q's). Likewise np.quantile / np.percentile of "
        "float32 or float16 data with a float64 q (a NumPy scalar or array, a q passed in): "
        "a 0-d result that is NaN is NumPy's data dtype (its arr[-1]), a number float64. "
        "The compiled result always has the dtype of a result with a number; the comparator "
        "then compares NaN positions only.",
        "unverifiable"),
    Divergence(
        "gpu-sort-ties", "function", ("np.sort", "np.argsort", "np.median", "np.nanmedian",
                                      "np.quantile", "np.percentile", "np.nanquantile",
                                      "np.nanpercentile", "np.unique"),
        "On the GPU, rows of up to 4096 elements (2048 of 8 bytes) are sorted by a stable "
        "bitonic network in shared memory, longer rows by a stable radix sort over all the "
        "blocks: equal elements keep their order, which is NumPy's "
        "kind='stable' exactly; NumPy's default kind (quicksort) orders ties its own way, so "
        "+0.0 and -0.0 may come in another order and argsort may give tied elements' "
        "positions in another order. np.median, np.quantile, np.percentile and their nan* "
        "variants of float rows read that sort (NumPy's positions and interpolation), so a "
        "zero among their results may have the other sign; so may a zero among np.unique's "
        "values of a float array when return_index is not asked for (NumPy then sorts with "
        "quicksort, and takes the first of the equal zeros it leaves), and with "
        "equal_nan=False, where each NaN is a value of its own, which NaN element's inverse "
        "is which NaN slot follows the sort's order of the NaNs.", "tolerance"),
    Divergence(
        "complex-sort-ties", "function", ("np.sort", "np.argsort", "np.sort_complex"),
        "np.sort and np.argsort of complex values (and np.sort_complex) sort in NumPy's "
        "complex order (by the real part, then the imaginary part, numbers with a NaN part "
        "last) with three stable sorts: equal numbers keep their order, which is NumPy's "
        "kind='stable' exactly, where NumPy's default kind orders ties its own way. Equal "
        "complex numbers differ only in the sign of a zero part (or a NaN's payload), so a "
        "sort's values can differ there and an argsort may give tied numbers' positions in "
        "another order. The comparator does not relax this; random data has no such ties.",
        "not-compared"),
    Divergence(
        "gpu-partition-order", "function", ("np.partition", "np.argpartition"),
        "On the GPU, np.partition and np.argpartition sort the rows (the stable sorts of "
        "gpu-sort-ties), which is one of the arrangements NumPy's contract allows for every "
        "kth at once: each kth element in its sorted place, no larger element before it and "
        "no smaller one after it (NaN last). NumPy leaves the other elements in an order of "
        "its own, which its documentation calls undefined and which differs between its "
        "introselect and its vectorised partitions on some CPUs; the comparator checks the "
        "kth elements' values (a zero's sign free) and the contract, not that order.",
        "unverifiable"),
    Divergence(
        "unsorted-search", "gather", ("searchsorted", "digitize", "interp"),
        "np.searchsorted, np.digitize and np.interp need a sorted array (in NumPy's order, "
        "NaN last). On one that is not, NumPy's result also depends on the keys searched "
        "before (its bisection starts from the previous key's bounds); tracearray bisects "
        "each key from the full range, so it returns a position where NumPy may return "
        "another. Both are meaningless there (NumPy's documentation says so).",
        "not-compared"),
)

BY_ID: dict[str, Divergence] = {d.id: d for d in DIVERGENCES}
assert len(BY_ID) == len(DIVERGENCES), "duplicate divergence id"


def get(id: str) -> Divergence:
    return BY_ID[id]


def is_x86_64() -> bool:
    """NumPy's float->int casts of NaN/inf/out-of-range values are reproduced as on x86-64."""
    return platform.machine().lower() in ("x86_64", "amd64")


def render_markdown() -> str:
    """docs/divergences.md: one table of every deliberate divergence."""
    lines = [
        "# Deliberate divergences from NumPy",
        "",
        "NumPy is tracearray's specification. These are the places where a compiled function "
        "deliberately gives a different result (or refuses the program). This page is "
        "generated from `tracearray/ops/divergences.py`, the single list that the "
        "comparator of `tracearray.testing` consults; regenerate it with",
        "",
        "```",
        "python -c \"import tracearray.ops.divergences as d; "
        "print(d.render_markdown(), end='')\" \\",
        "    > docs/divergences.md",
        "```",
        "",
        "The *comparator* column says how `tracearray.testing.assert_matches_numpy` honours "
        "the divergence: `tolerance` (an entry of the tolerance table, docs/testing.md), "
        "`signed-zero` (the sign of a zero result is not compared there), `nan-payload` (NaN "
        "payloads are never compared, NaN positions are), `unverifiable` (elements that "
        "depend on it are not compared), `numpy-raises` (NumPy raises, the compiled function "
        "returns a value: accepted when the graph has the op), `trace` (NumPy's own result is "
        "checked against the traced graph with this relaxation), `error` (the program is "
        "refused with an error) and `not-compared`.",
        "",
        "| id | family | ops | comparator | divergence |",
        "|---|---|---|---|---|",
    ]
    for d in DIVERGENCES:
        ops = ", ".join(f"`{o}`" for o in d.ops) if d.ops != ("*",) else "all"
        text = d.text.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{d.id}` | {d.family} | {ops} | {d.comparator} | {text} |")
    lines.append("")
    return "\n".join(lines)


