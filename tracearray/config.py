"""The one place that reads tracearray's environment variables, and its logging.

Every variable is declared once in ``VARIABLES`` (name, default, effect, the module that
uses it); ``docs/configuration.md`` shows that table and a test keeps the two equal. Values
are read where they are used (a variable set after ``import tracearray`` still applies), each
raw value parsed once. A ``TRACEARRAY_*`` name that is not declared is warned about once, with
the closest declared name (``check_environment``: at import and whenever a function is
compiled).

Logging goes through ``logging.getLogger("tracearray")``. The DEBUG ladder is a set of levels
below ``logging.DEBUG``: ladder step ``n`` logs at ``logging_level(n) = 11 - n``, so step 1
(compile events, cache hits) is ``logging.DEBUG`` itself and ``logging.basicConfig(level=
logging.DEBUG)`` shows it without the IR dumps; ``logger.setLevel(logging_level(7))`` shows
everything. ``TRACEARRAY_DEBUG=N`` sets the logger to step ``N`` and adds a stderr handler
(``[tracearray] message``). Messages use lazy ``%`` formatting, and large texts (graphs, IR)
are built only when ``enabled(step)`` says the step is shown.
"""
from __future__ import annotations

import difflib
import logging
import os
import sys
import warnings
from dataclasses import dataclass

_OFF = ("", "0", "off", "false", "no", "none")


@dataclass(frozen=True)
class Variable:
    """One environment variable tracearray reads."""
    name: str
    default: str     # as documented ("unset" where absence has its own meaning)
    effect: str
    read_by: str     # the modules (under tracearray/) that use the value


VARIABLES: tuple[Variable, ...] = (
    Variable("TRACEARRAY_DEBUG", "0",
             "Debug ladder, cumulative: 1 compile events and cache hits, 2 per-kernel times, "
             "3 fusion plan, 4 traced graph, 5 bound tiles, 6 LLVM IR, 7 PTX/assembly. "
             "Printed to stderr through the `tracearray` logger.", "config.py"),
    Variable("TRACEARRAY_EXPLAIN_CACHE_MISSES", "0",
             "`1` says, for each call that traces or builds again, which part of the cache "
             "key changed (dtype, rank, broadcast pattern, size, layout, a static value, the "
             "device).", "api.py, cachemiss.py"),
    Variable("TRACEARRAY_DUMP_DIR", "unset",
             "Folder into which every stage's text (graph, plan, tiles, LLVM IR, assembly or "
             "PTX) is written, one file per stage and signature, with an `index.txt`.",
             "config.py"),
    Variable("TRACEARRAY_NUM_THREADS", "the CPUs this process may run on",
             "Threads of the CPU backend (`tracearray.set_num_threads` overrides it at run "
             "time).", "cpu/pool.py"),
    Variable("TRACEARRAY_SPIN_US", "300",
             "Microseconds a CPU helper thread spins waiting for its next job before it sleeps "
             "(a calling thread waiting for its helpers' chunks yields the processor after "
             "each such round); `0` turns the native helpers off (chunks then run on Python "
             "threads, which sleep at once).",
             "cpu/team.py"),
    Variable("TRACEARRAY_VECTOR_MATH", "1",
             "`0` turns off libmvec vector variants of libm calls on the CPU.", "cpu/jit.py"),
    Variable("TRACEARRAY_CACHE_DIR", "the user cache folder",
             "Folder of the disk cache of compiled kernels (`~/.cache/tracearray`, "
             "`~/Library/Caches/tracearray`, `%LOCALAPPDATA%\\tracearray\\Cache`); `\"\"`, "
             "`0` or `off` turn the disk cache off.", "cpu/jit.py, gpu/ptx.py"),
    Variable("TRACEARRAY_CHECK_KERNEL_KEYS", "0",
             "`1` generates the LLVM IR of every CPU kernel found by its description key and "
             "checks it against the IR the cached code was compiled from (a debug check of "
             "the size-free kernel key).", "cpu/codecache.py"),
    Variable("TRACEARRAY_CACHE_MAX_MB", "256",
             "Size bound of each backend's disk cache, least recently used entries deleted "
             "first; `unlimited` for none.", "cpu/jit.py, gpu/ptx.py"),
    Variable("TRACEARRAY_OUTPUT_ARENA_MB", "512",
             "Bytes of large CPU result blocks kept for reuse; `0` turns recycling off.",
             "cpu/memory.py"),
    Variable("TRACEARRAY_MAX_TRACE_OPS", "200000",
             "Operations a trace may record before it stops with an error (a Python loop "
             "that unrolls without end).", "trace/context.py"),
    Variable("TRACEARRAY_TILING", "unset",
             "Fields of the tiling policies replaced for this process, e.g. "
             "`row_grid_per_sm=16,map_block=512` (`tile/policy.py`: `CpuTiling`, "
             "`GpuTiling`); they shape launches, never the code. For A/B measurements.",
             "tile/policy.py"),
    Variable("TRACEARRAY_AUTOTUNE", "0",
             "`1` times each GPU map and row kernel's launch-policy candidates on its first "
             "run (CUDA events) and keeps the fastest, cached on disk per kernel, size bucket "
             "and device; `print` also prints the candidates and their times. Results do not "
             "change (`tile/tune.py`).", "gpu/tuning.py"),
    Variable("TRACEARRAY_LIBDEVICE", "unset",
             "Explicit path of NVIDIA's `libdevice.10.bc` (searched for otherwise).",
             "gpu/ptx.py"),
    Variable("TRACEARRAY_GPU_LOAD", "auto",
             "How GPU modules are loaded: `auto` (cubin through nvJitLink or ptxas when "
             "present, else the driver's PTX JIT), `ptx` or `cubin`.", "gpu/driver.py"),
    Variable("TRACEARRAY_GPU_LIBRARIES", "auto",
             "`auto`: on the GPU, float32 and float64 matrix products run in cuBLAS and FFTs "
             "in cuFFT when the libraries are found; `off`: tracearray's own matmul kernel, "
             "FFTs on the host.", "gpu/blas.py, gpu/fft.py"),
    Variable("TRACEARRAY_DISABLE_GPU", "0",
             "`1` behaves as if no GPU were present (`device=\"auto\"` runs on the CPU).",
             "gpu/driver.py"),
    Variable("CUDA_HOME", "unset",
             "CUDA toolkit root, searched for `libdevice` and `ptxas` (also `CUDA_PATH`).",
             "gpu/ptx.py"),
    Variable("CUDA_PATH", "unset", "Same as `CUDA_HOME`, searched after it.", "gpu/ptx.py"),
)

# Variables of the repository's test and benchmark scripts (read there, not by the package);
# any name starting with one of the prefixes is theirs too. Declared so they are not warned
# about.
SCRIPT_VARIABLES: dict[str, str] = {
    "TRACEARRAY_TEST_REPORT": "tests/test_gpu_cuda.py: file the GPU bandwidth report goes to",
    "TRACEARRAY_TEST_EMULATE_ALL": "tests/gpu: run every GPU test on the SIMT emulator",
    "TRACEARRAY_NUMBA_PYTHON": "benchmarks: interpreter with numba, for the comparison",
    "TRACEARRAY_JAX_PYTHON": "benchmarks: interpreter with jax and jaxlib, for the comparison",
    "TRACEARRAY_BENCH_REMOVED_OPENBLAS_ENV": "benchmarks: internal marker of a re-executed run",
}
SCRIPT_PREFIXES = ("TRACEARRAY_TEST_", "TRACEARRAY_BENCH_")

_DECLARED = {v.name for v in VARIABLES}


def is_declared(name: str) -> bool:
    return name in _DECLARED or name in SCRIPT_VARIABLES or name.startswith(SCRIPT_PREFIXES)


_warned_unknown: set[str] = set()


def check_environment() -> list[str]:
    """Warn (once per name) about each ``TRACEARRAY_*`` variable that tracearray does not
    read: a misspelt name is otherwise silently ignored. Returns the unknown names set."""
    unknown = sorted(n for n in os.environ if n.startswith("TRACEARRAY_")
                     and not is_declared(n))
    for name in unknown:
        if name in _warned_unknown:
            continue
        _warned_unknown.add(name)
        # compared without the shared prefix, which would make every name look close
        known = {v[len("TRACEARRAY_"):]: v for v in sorted(_DECLARED)
                 if v.startswith("TRACEARRAY_")}
        close = difflib.get_close_matches(name[len("TRACEARRAY_"):], list(known), n=1,
                                          cutoff=0.6)
        hint = f"; did you mean {known[close[0]]}?" if close else ""
        warnings.warn(f"tracearray does not know the environment variable {name}{hint} "
                      f"(docs/configuration.md lists the ones it reads)", RuntimeWarning,
                      stacklevel=3)
    return unknown


# ------------------------------------------------------------------------------------------
# Logging and the DEBUG ladder
# ------------------------------------------------------------------------------------------

LADDER: dict[int, str] = {
    1: "compile events and cache hits",
    2: "per-kernel times",
    3: "fusion plan",
    4: "traced graph",
    5: "bound tiles",
    6: "LLVM IR",
    7: "PTX/assembly",
}
COMPILES, TIMES, PLAN, GRAPH, TILES, LLVM_IR, ASSEMBLY = range(1, 8)
TIMES_LEVEL = logging.DEBUG + 1 - TIMES   # checked on every call: logger.isEnabledFor(...)

logger = logging.getLogger("tracearray")


def logging_level(step: int) -> int:
    """The ``logging`` level of ladder step ``step`` (1 is ``logging.DEBUG``, 7 is 4)."""
    return logging.DEBUG + 1 - step


def debug_level() -> int:
    """``TRACEARRAY_DEBUG`` as an integer (0 when unset)."""
    raw = os.environ.get("TRACEARRAY_DEBUG", "0").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"TRACEARRAY_DEBUG must be an integer, got {raw!r}") from None


class _StderrHandler(logging.StreamHandler):
    """The handler ``TRACEARRAY_DEBUG`` adds (stderr looked up at each record, so a test's
    or a notebook's replaced ``sys.stderr`` receives it)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("[tracearray] %(message)s"))

    @property   # type: ignore[override]
    def stream(self):   # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:   # noqa: ANN001
        pass


_handler = _StderrHandler()
_applied_debug: str | None = None   # the TRACEARRAY_DEBUG value the logger was last set for


def _sync_debug_env() -> None:
    """Apply ``TRACEARRAY_DEBUG`` to the logger when its value changed since it was last
    applied (unset: the logger is left as the application configured it)."""
    global _applied_debug
    raw = os.environ.get("TRACEARRAY_DEBUG")
    if raw == _applied_debug:
        return
    level = debug_level()
    _applied_debug = raw
    if level > 0:
        logger.setLevel(logging_level(min(level, ASSEMBLY)))
        if _handler not in logger.handlers:
            logger.addHandler(_handler)
    else:
        logger.setLevel(logging.NOTSET)
        logger.removeHandler(_handler)


def enabled(step: int) -> bool:
    """Whether ladder step ``step`` is shown (build expensive messages only when it is).

    Not for the call path of a built function, which reads no environment: it asks
    ``logger.isEnabledFor(TIMES_LEVEL)`` (a changed ``TRACEARRAY_DEBUG`` applies from the
    next trace, build or log message on)."""
    _sync_debug_env()
    return logger.isEnabledFor(logging_level(step))


def log(step: int, message: str, *args: object) -> None:
    """Log ``message % args`` at ladder step ``step`` (formatted only if it is shown)."""
    _sync_debug_env()
    logger.log(logging_level(step), message, *args, stacklevel=2)   # the caller's line


# ------------------------------------------------------------------------------------------
# Dump directory
# ------------------------------------------------------------------------------------------

def dump_dir() -> str | None:
    return os.environ.get("TRACEARRAY_DUMP_DIR") or None


def signature_id(key: object) -> str:
    """A short stable name for one signature's cache key, for dump file names."""
    import hashlib
    return hashlib.sha1(repr(key).encode()).hexdigest()[:10]


def dump(name: str, stage: str, text: str, signature: str = "",
         describe: str = "") -> None:
    """Write one stage's artifact into TRACEARRAY_DUMP_DIR, if set, as
    ``<name>-<signature>.<stage>``: each signature has its own files. ``describe`` (the
    argument shapes and dtypes) is recorded beside the file name in ``index.txt``."""
    folder = dump_dir()
    if folder is None:
        return
    os.makedirs(folder, exist_ok=True)
    base = f"{name}-{signature}" if signature else name
    path = os.path.join(folder, f"{base}.{stage}")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)   # atomic: a reader never sees half a file
    if describe:
        with open(os.path.join(folder, "index.txt"), "a") as f:   # O_APPEND: whole lines
            f.write(f"{base}.{stage}\t{describe}\n")


# ------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------

def explain_cache_misses() -> bool:
    """``TRACEARRAY_EXPLAIN_CACHE_MISSES=1``: say why each call that traces or builds again
    missed a compiled function's caches (which part of the key changed: dtype, rank,
    broadcast pattern, size, layout, a static value, the device). Read on misses only."""
    raw = os.environ.get("TRACEARRAY_EXPLAIN_CACHE_MISSES", "0").strip().lower()
    return raw not in _OFF


def explain_miss(message: str) -> None:
    """One cache-miss explanation, asked for with ``TRACEARRAY_EXPLAIN_CACHE_MISSES``: printed
    to stderr (whatever the logging configuration: the user asked for it), and logged at
    ladder step 1 for handlers of the ``tracearray`` logger."""
    print(f"[tracearray] {message}", file=sys.stderr)
    log(COMPILES, "%s", message)


def vector_math() -> bool:
    """``TRACEARRAY_VECTOR_MATH``: libmvec vector variants for libm calls (default on)."""
    raw = os.environ.get("TRACEARRAY_VECTOR_MATH", "1").strip().lower()
    return raw not in ("0", "false", "no", "off")


_threads_for: dict[str | None, int | None] = {}   # read on every parallel call: parse once


def check_kernel_keys() -> bool:
    """``TRACEARRAY_CHECK_KERNEL_KEYS``: check each kernel key against its IR (debug)."""
    return os.environ.get("TRACEARRAY_CHECK_KERNEL_KEYS", "0").strip().lower() not in _OFF


def num_threads_setting() -> int | None:
    """``TRACEARRAY_NUM_THREADS`` as a positive integer; None when unset or empty."""
    raw = os.environ.get("TRACEARRAY_NUM_THREADS")
    try:
        return _threads_for[raw]
    except KeyError:
        pass
    n: int | None = None
    if raw is not None and raw.strip() != "":
        try:
            n = int(raw.strip())
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"TRACEARRAY_NUM_THREADS must be a positive integer, got {raw!r}")
    _threads_for[raw] = n
    return n


def spin_microseconds() -> float:
    """``TRACEARRAY_SPIN_US``: how long CPU pool threads spin before they sleep (default 300;
    0 turns the native chunk loop and its spinning off)."""
    raw = os.environ.get("TRACEARRAY_SPIN_US", "300")
    if not raw.strip():   # (set but empty: the default, as for the other settings)
        raw = "300"
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError(f"TRACEARRAY_SPIN_US must be a number of microseconds >= 0, got {raw!r}")
    return value


def max_trace_ops() -> int:
    """``TRACEARRAY_MAX_TRACE_OPS``: operations one trace may record (default 200000)."""
    raw = os.environ.get("TRACEARRAY_MAX_TRACE_OPS", "200000")
    try:
        n = int(raw.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"TRACEARRAY_MAX_TRACE_OPS must be a positive integer, got {raw!r}")
    return n


def default_cache_dir() -> str:
    """The per-user cache folder for tracearray, following each platform's convention."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser(r"~\AppData\Local")
        return os.path.join(base, "tracearray", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/tracearray")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "tracearray")


def cache_dir() -> str | None:
    """Folder of the disk cache of compiled kernels, or None when it is off.

    ``TRACEARRAY_CACHE_DIR`` unset: the user cache folder (``$XDG_CACHE_HOME/tracearray``,
    else ``~/.cache/tracearray``; ``~/Library/Caches/tracearray`` on macOS,
    ``%LOCALAPPDATA%\\tracearray\\Cache`` on Windows). Set to a path: that folder (``~`` is
    expanded; created on first write). Set to ``""``, ``0``, ``off`` (or ``false``, ``no``,
    ``none``; any case): no disk cache at all - nothing is read or written, kernels are still
    cached in memory. An empty value means "off" rather than "default" so that
    ``TRACEARRAY_CACHE_DIR= python ...`` is a one-word way to run without the disk cache.
    Each backend keeps its own subfolder (``cpu/`` for host objects).
    """
    raw = os.environ.get("TRACEARRAY_CACHE_DIR")
    if raw is None:
        return default_cache_dir()
    raw = raw.strip()
    if raw.lower() in _OFF:
        return None
    return os.path.abspath(os.path.expanduser(raw))


def cache_max_bytes() -> int | None:
    """``TRACEARRAY_CACHE_MAX_MB``: size bound of each backend's disk cache, None for no bound.

    Default 256 MB (a CPU kernel object is 2-50 KB). Beyond the bound the least recently used
    entries are deleted after a write. ``unlimited`` (or ``none``, ``inf``) removes the bound;
    to turn the cache off use ``TRACEARRAY_CACHE_DIR=off``.
    """
    raw = os.environ.get("TRACEARRAY_CACHE_MAX_MB", "256").strip().lower()
    if raw in ("unlimited", "none", "inf"):
        return None
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb > 0:
        raise ValueError(f"TRACEARRAY_CACHE_MAX_MB must be a positive number of megabytes or "
                         f"'unlimited', got {raw!r} (TRACEARRAY_CACHE_DIR=off turns the cache off)")
    return int(mb * 1024 * 1024)


def disk_cache_bound() -> int | None:
    """``cache_max_bytes()`` for a disk cache being opened: a value it refuses is warned about
    (``CacheWarning``) and the default bound used, as no trouble of the disk cache fails a
    compile."""
    try:
        return cache_max_bytes()
    except ValueError as e:
        from .diskcache import CacheWarning
        warnings.warn(f"tracearray: {e}; the default 256 MB bound is used", CacheWarning,
                      stacklevel=2)
        return 256 * 1024 * 1024


def output_arena_bytes() -> int:
    """``TRACEARRAY_OUTPUT_ARENA_MB``: bytes of large CPU result blocks kept for reuse (in use
    or idle). Default 512 MB; 0 turns recycling off (every result is a plain ``np.empty``)."""
    raw = os.environ.get("TRACEARRAY_OUTPUT_ARENA_MB", "512")
    cached = _ARENA_CACHE.get(raw)
    if cached is None:
        try:
            mb = float(raw.strip())
        except ValueError:
            mb = -1.0
        if not mb >= 0:
            raise ValueError(f"TRACEARRAY_OUTPUT_ARENA_MB must be a number of megabytes >= 0, "
                             f"got {raw!r}")
        cached = _ARENA_CACHE[raw] = int(mb * 1024 * 1024)
    return cached


_ARENA_CACHE: dict[str, int] = {}


def tiling_overrides() -> dict[str, str]:
    """``TRACEARRAY_TILING``: ``name=value`` pairs, comma-separated, as given (the policy
    checks the names and values: ``tile.policy.with_overrides``)."""
    raw = os.environ.get("TRACEARRAY_TILING", "").strip()
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        name, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"TRACEARRAY_TILING: {item!r} is not name=value")
        out[name.strip()] = value.strip()
    return out


def libdevice_path() -> str | None:
    """``TRACEARRAY_LIBDEVICE``: an explicit path to NVIDIA's ``libdevice.10.bc``."""
    return os.environ.get("TRACEARRAY_LIBDEVICE") or None


def cuda_toolkit_roots() -> list[tuple[str, str]]:
    """``CUDA_HOME`` then ``CUDA_PATH``, where set: (variable, folder)."""
    return [(var, os.environ[var]) for var in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(var)]


# The system's search paths a tool or library is found through (PATH for ptxas, the loader's
# path and a conda prefix for nvJitLink): not tracearray settings, read to tell whether a
# remembered answer (``gpu/ptx.py``'s assembler) was found under the same ones.
TOOL_SEARCH_VARIABLES = ("PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX")


def tool_search_environment() -> dict[str, str]:
    """The values of ``TOOL_SEARCH_VARIABLES`` and of ``CUDA_HOME`` / ``CUDA_PATH`` ('' when
    unset)."""
    names = TOOL_SEARCH_VARIABLES + ("CUDA_HOME", "CUDA_PATH")
    return {name: os.environ.get(name, "") for name in names}


def gpu_load_mode() -> str:
    """``TRACEARRAY_GPU_LOAD``: how GPU modules are loaded: ``auto`` (cubin through nvJitLink
    or ptxas when present, else the driver's PTX JIT), ``ptx`` or ``cubin``."""
    mode = os.environ.get("TRACEARRAY_GPU_LOAD", "auto").strip().lower() or "auto"
    if mode not in ("auto", "ptx", "cubin"):
        raise ValueError(f"TRACEARRAY_GPU_LOAD must be auto, ptx or cubin, got {mode!r}")
    return mode


def gpu_libraries_enabled() -> bool:
    """``TRACEARRAY_GPU_LIBRARIES``: ``auto`` (cuBLAS for float matrix products and cuFFT for
    FFTs, when found) or ``off`` (tracearray's own matmul kernel, FFTs on the host)."""
    mode = os.environ.get("TRACEARRAY_GPU_LIBRARIES", "auto").strip().lower() or "auto"
    if mode not in ("auto", "off"):
        raise ValueError(f"TRACEARRAY_GPU_LIBRARIES must be auto or off, got {mode!r}")
    return mode == "auto"


def autotune_mode() -> str:
    """``TRACEARRAY_AUTOTUNE``: ``off`` (default), ``on`` (``1``) or ``print``."""
    raw = os.environ.get("TRACEARRAY_AUTOTUNE", "0").strip().lower()
    if raw in _OFF:
        return "off"
    if raw in ("1", "on", "true", "yes"):
        return "on"
    if raw == "print":
        return "print"
    raise ValueError(f"TRACEARRAY_AUTOTUNE must be 0, 1 or print, got {raw!r}")


def gpu_disabled() -> bool:
    """``TRACEARRAY_DISABLE_GPU=1``: behave as if no GPU were present (device="auto" -> CPU)."""
    return os.environ.get("TRACEARRAY_DISABLE_GPU", "0").strip() not in ("", "0")


def set_variables() -> dict[str, str]:
    """Every ``TRACEARRAY_*`` variable set in this process, with its value (for reports)."""
    return {n: v for n, v in sorted(os.environ.items()) if n.startswith("TRACEARRAY_")}
